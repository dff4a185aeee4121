"""Everything the posterior-sampling estimators of the package share.

:class:`MCMCEstimator` gives every estimator the same behaviour for what is not specific to its
model, so that an estimator's ``fit`` only validates its data, builds its target and kernel and
hands them over:

* the common parameters ``n_draws``, ``n_warmup``, ``n_chains``, ``n_jobs``, ``random_state``,
  ``progress`` and their scikit-learn ``_parameter_constraints``;
* independent chains run through :class:`joblib.Parallel`, each with its own generator spawned by
  :class:`numpy.random.SeedSequence` *before* any work is scheduled, so the draws are
  bit-identical whatever ``n_jobs`` and whatever joblib backend (loky, threading, dask) runs them;
* an optional tqdm progress bar (a no-op object when ``progress=False``, as emcee's ``pbar``);
* storing the draws, per-draw statistics, data-evaluation counts and the diagnostics
  (:mod:`sksubsample.diagnostics`), with a :class:`~sksubsample.diagnostics.ConvergenceWarning`
  when the chains have not mixed;
* ``sample_posterior(n_samples=None, random_state=None)``: draws with the draw axis first;
* ``to_inference_data()``: an ArviZ ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x).

A chain function returns a :class:`ChainResult`; a subclass implements ``_posterior_variables()``
(an ordered mapping ``name -> array of shape (n_chains, n_draws, *shape)``) and may override
``_posterior_dims()``.
"""

from __future__ import annotations

import inspect
from numbers import Integral
from typing import ClassVar, NamedTuple

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._utils import as_generator, check_int, spawn_generators
from .algorithms._mh import run_kernel
from .diagnostics import check_convergence, effective_sample_size, split_rhat

__all__ = ["ChainResult", "MCMCEstimator", "mh_chain", "run_chains"]


class ChainResult(NamedTuple):
    """What one chain returns to :class:`MCMCEstimator`.

    Attributes
    ----------
    draws : ndarray of shape (n_draws, n_params)
        The retained draws of the flat parameter vector.
    stats : dict of str -> ndarray of shape (n_draws,)
        Per-draw sample statistics, named as ArviZ names them where a name exists
        (``acceptance_rate``, ``step_size``) and after the package's quantities otherwise
        (``batch_size``, ``n_evaluations``).
    n_evaluations : int
        Data terms evaluated by the chain, warm-up included.
    step_size : float
        The chain's step size after warm-up (NaN for samplers without one).
    """

    draws: np.ndarray
    stats: dict
    n_evaluations: int
    step_size: float


def mh_chain(kernel, center, init_chol, n_draws, n_warmup, rng):
    """One MH chain of ``kernel`` from an overdispersed start, as a :class:`ChainResult`.

    The start ``θ0 = center + 2 L z`` (``L = init_chol``, z standard normal) is drawn from a
    Gaussian twice as wide as the posterior's Laplace approximation, so that split R-hat can
    detect chains that have not forgotten their start (Vehtari et al. 2021, Section 2).
    Module-level so that process backends can pickle it.
    """
    theta0 = center + 2.0 * (init_chol @ rng.standard_normal(center.size))
    res = run_kernel(kernel, theta0, n_draws=n_draws, n_warmup=n_warmup, random_state=rng)
    stats = {"acceptance_rate": res.accepted.astype(np.float64),
             "step_size": np.full(n_draws, res.step_size),
             "batch_size": res.batch_sizes,
             "n_evaluations": res.evaluations_per_draw}
    return ChainResult(res.draws, stats, res.n_evaluations, res.step_size)


# --------------------------------------------------------------------------------------------
# progress bar
# --------------------------------------------------------------------------------------------


class _NoOpProgress:
    """Stands in for tqdm when ``progress=False`` (as emcee's ``_NoOpPBar``)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, s, refresh=True):
        pass


def _progress_bar(progress, total, desc):
    """tqdm when ``progress`` is true, a no-op otherwise; ``progress`` may name a tqdm flavour."""
    if not progress:
        return _NoOpProgress()
    if progress == "notebook":
        from tqdm.notebook import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit="chain")


# --------------------------------------------------------------------------------------------
# ArviZ
# --------------------------------------------------------------------------------------------


def _import_arviz():
    try:
        import arviz
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "to_inference_data() needs ArviZ; install it with `pip install sksubsample[arviz]` "
            "(or `pip install arviz`)"
        ) from exc
    return arviz


def _arviz_from_dict(arviz, groups, coords, dims):
    """Call ``arviz.from_dict`` in the 0.x form (keyword groups) or the 1.x form (a dict).

    ArviZ 0.x: ``from_dict(posterior=None, *, sample_stats=None, ..., coords, dims)`` returns an
    ``InferenceData``. ArviZ 1.x (arviz-base): ``from_dict(data, *, coords, dims, ...)`` with
    ``data = {"posterior": {...}, "sample_stats": {...}}`` returns an ``xarray.DataTree``. The
    signature tells them apart without relying on version strings.
    """
    params = inspect.signature(arviz.from_dict).parameters
    groups = {k: v for k, v in groups.items() if v}
    if "posterior" in params:
        return arviz.from_dict(**groups, coords=coords, dims=dims)
    return arviz.from_dict(groups, coords=coords, dims=dims)


# --------------------------------------------------------------------------------------------
# chains
# --------------------------------------------------------------------------------------------


def run_chains(chain_fn, args, *, n_chains, random_state, n_jobs=None, progress=False,
               desc="chains"):
    """Run ``chain_fn(*args, rng)`` for ``n_chains`` independent generators, in parallel.

    Every chain's generator is spawned from ``random_state`` through ``SeedSequence.spawn``
    before anything is scheduled, and results are collected in chain order, so the output does
    not depend on ``n_jobs`` or on the joblib backend (use ``joblib.parallel_config`` to pick
    one, e.g. ``backend="dask"``).

    Parameters
    ----------
    chain_fn : callable
        A picklable (module-level) function ``chain_fn(*args, rng) -> result``.
    args : tuple
        Arguments shared by every chain (pickled once per task by process backends).
    n_chains : int >= 1
    random_state : None, int, SeedSequence, Generator or RandomState
    n_jobs : int or None
        As in joblib; ``None`` means 1 unless a ``parallel_config`` context says otherwise.
    progress : bool or "notebook"
        Show a tqdm bar advancing as chains complete.
    desc : str
        Label of the progress bar.

    Returns
    -------
    list
        ``n_chains`` results in chain order.
    """
    n_chains = check_int(n_chains, "n_chains", low=1)
    rngs = spawn_generators(random_state, n_chains)
    tasks = (delayed(chain_fn)(*args, rng) for rng in rngs)
    results = []
    with _progress_bar(progress, n_chains, desc) as bar:
        # return_as="generator" yields results in submission order as they complete, so the
        # bar advances during the run without changing which chain gets which stream.
        for result in Parallel(n_jobs=n_jobs, return_as="generator")(tasks):
            results.append(result)
            bar.update(1)
    return results


class MCMCEstimator(BaseEstimator):
    """Chains, stored draws, diagnostics, warnings and ArviZ export shared by the estimators.

    Subclasses call :meth:`_sample` from ``fit`` with a picklable chain function returning a
    :class:`ChainResult`, and implement ``_posterior_variables()`` returning an ordered mapping
    ``name -> ndarray (n_chains, n_draws, *shape)`` of the fitted draws; ``_posterior_dims()``
    (``name -> list of dimension names``, and coordinates) is optional. The flat parameter vector
    used by :meth:`sample_posterior` and the diagnostics concatenates the variables in that
    order.

    Fitted attributes set by :meth:`_sample`: ``posterior_names_``, ``n_evaluations_``,
    ``fraction_data_touched_``, ``step_size_``, ``acceptance_rate_``, ``ess_``, ``rhat_``.
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_draws": [Interval(Integral, 1, None, closed="left")],
        "n_warmup": [Interval(Integral, 0, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator,
                         np.random.SeedSequence, np.random.RandomState, None],
        "progress": ["boolean", StrOptions({"notebook"})],
    }

    def _posterior_variables(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _posterior_dims(self):
        return {}, {}

    def __sklearn_is_fitted__(self):
        # validate_data sets n_features_in_ before a fit can still fail: only draws mean fitted.
        return hasattr(self, "_draws")

    def _sample(self, chain_fn, args, *, names, n_data, n_setup_evaluations=0):
        """Run the chains and store draws, statistics, counts and diagnostics.

        Parameters
        ----------
        chain_fn : callable
            Module-level ``chain_fn(*args, n_draws, n_warmup, rng) -> ChainResult``.
        args : tuple
            Arguments shared by every chain.
        names : sequence of str
            Names of the flat parameters (columns of :meth:`sample_posterior`).
        n_data : int
            Data terms an exact sampler evaluates per step (for ``fraction_data_touched_``).
        n_setup_evaluations : int, default 0
            Data terms evaluated once before the chains (e.g. to build control variates).

        Returns
        -------
        ndarray of shape (n_chains, n_draws, n_params)
            The draws (also kept for the diagnostics and :meth:`sample_posterior`).

        Warns
        -----
        ConvergenceWarning
            When the chains have not converged (:func:`sksubsample.diagnostics.check_convergence`).
        """
        results = run_chains(chain_fn, (*args, self.n_draws, self.n_warmup),
                             n_chains=self.n_chains, random_state=self.random_state,
                             n_jobs=self.n_jobs, progress=self.progress,
                             desc=type(self).__name__)
        draws = np.stack([r.draws for r in results])
        self._draws = draws
        self._stats = {key: np.stack([r.stats[key] for r in results])
                       for key in results[0].stats}
        self.posterior_names_ = np.array([str(n) for n in names], dtype=object)
        self.step_size_ = np.array([r.step_size for r in results])
        if "acceptance_rate" in self._stats:
            self.acceptance_rate_ = float(self._stats["acceptance_rate"].mean())
        self.n_evaluations_ = int(sum(r.n_evaluations for r in results) + n_setup_evaluations)
        n_steps = self.n_chains * (self.n_draws + self.n_warmup)
        self.fraction_data_touched_ = self.n_evaluations_ / (n_data * n_steps)
        # Diagnostics point at the user's call of fit: fit -> _sample -> check_convergence.
        self.rhat_, self.ess_ = check_convergence(draws, self.posterior_names_, stacklevel=4)
        return draws

    def _flat_draws(self):
        """All posterior variables as one array of shape (n_chains, n_draws, n_params)."""
        return self._draws

    def sample_posterior(self, n_samples=None, random_state=None):
        """Posterior draws of the parameter vector, the draw axis first.

        Parameters
        ----------
        n_samples : int >= 1 or None, default None
            ``None`` returns every retained draw of every chain (chain after chain). An int
            returns that many draws picked uniformly from the pooled chains: without
            replacement when ``n_samples`` does not exceed the pool, with replacement otherwise.
        random_state : None, int or numpy.random.Generator, default None
            Randomness of the pick (unused when ``n_samples`` is None).

        Returns
        -------
        ndarray of shape (n_samples, n_params)
            The columns are the estimator's parameters in the order of its
            ``posterior_names_`` attribute.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self)
        draws = self._flat_draws()
        pooled = draws.reshape(-1, draws.shape[2])
        if n_samples is None:
            return pooled.copy()
        n_samples = check_int(n_samples, "n_samples", low=1)
        rng = as_generator(random_state)
        replace = n_samples > pooled.shape[0]
        return pooled[rng.choice(pooled.shape[0], size=n_samples, replace=replace)]

    def rhat(self, method="rank"):
        """Split R-hat of each parameter (see :func:`split_rhat`; one chain is split in two)."""
        check_is_fitted(self)
        draws = self._flat_draws()
        return split_rhat(draws, method=method)

    def ess(self, method="bulk"):
        """Effective sample size of each parameter (see :func:`effective_sample_size`)."""
        check_is_fitted(self)
        return effective_sample_size(self._flat_draws(), method=method)

    def to_inference_data(self):
        """The fitted draws as an ArviZ object.

        Returns
        -------
        arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
            Group ``posterior`` holds the posterior variables with dimensions
            ``(chain, draw, ...)``; group ``sample_stats`` the per-draw statistics.

        Raises
        ------
        ImportError
            When ArviZ is not installed (install the ``arviz`` extra).
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self)
        arviz = _import_arviz()
        dims, coords = self._posterior_dims()
        groups = {
            "posterior": {k: np.asarray(v) for k, v in self._posterior_variables().items()},
            "sample_stats": {k: np.asarray(v) for k, v in self._stats.items()},
        }
        return _arviz_from_dict(arviz, groups, coords, dims)
