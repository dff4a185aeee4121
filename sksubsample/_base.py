"""Everything the posterior-sampling estimators of the package share.

:class:`MCMCEstimator` gives every estimator the same behaviour for what is not specific to its
model, so that an estimator's ``fit`` only validates its data, builds its target and kernel and
hands them over:

* the common parameters ``n_draws``, ``n_warmup``, ``n_chains``, ``n_jobs``, ``random_state``,
  ``progress`` and their scikit-learn ``_parameter_constraints``;
* independent chains run through :class:`joblib.Parallel`, each with its own generator spawned by
  :class:`numpy.random.SeedSequence` *before* any work is scheduled, so the draws are
  bit-identical whatever ``n_jobs`` and whatever joblib backend (loky, threading, dask) runs them;
* an optional tqdm progress bar over the chains' draws, fed by the chains as they run (also from
  worker processes) without changing the draws;
* storing the draws, per-draw statistics, data-evaluation counts and the diagnostics
  (:mod:`sksubsample.diagnostics`), with a :class:`~sksubsample.diagnostics.ConvergenceWarning`
  when the chains have not mixed;
* ``sample_more(n_draws)``: the chains continue from their last state, with their frozen step
  sizes and their own random streams;
* ``n_draws="auto"`` (for an estimator that allows it): ``fit`` continues its chains that way,
  in rounds, until the draws meet the convergence criteria or a budget of draws;
* ``sample_posterior(n_samples=None, random_state=None)``: draws with the draw axis first;
* ``to_inference_data()``: an ArviZ ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x),
  with the log likelihood, observed data and posterior predictive draws of the estimators that
  provide them.

A chain function returns a :class:`ChainResult`; a subclass implements ``_posterior_variables()``
(an ordered mapping ``name -> array of shape (n_chains, n_draws, *shape)``) and may override
``_posterior_dims()``, ``_after_sampling()`` and the hooks of
:meth:`MCMCEstimator.to_inference_data` (``_n_observations``, ``_observed_data``,
``_pointwise_log_likelihood``, ``_posterior_predictive``, ``_log_density``).
"""

from __future__ import annotations

from numbers import Integral
from typing import ClassVar, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._arviz import (
    CHEAP_LP_TERMS,
    MAX_POINTWISE_VALUES,
    arviz_from_dict,
    import_arviz,
    select_observations,
)
from ._progress import run_tasks
from ._utils import as_generator, check_int, spawn_generators
from .diagnostics import check_convergence, effective_sample_size, split_rhat

__all__ = ["ChainResult", "MCMCEstimator", "run_chains"]

#: Largest chain length or number of chains: the draws are stored in arrays indexed by int64.
_MAX_COUNT = np.iinfo(np.int64).max

#: ``n_draws="auto"``: draws per chain of the first round, the criteria every parameter must
#: meet (Vehtari et al. 2021, Section 4.3: bulk and tail ESS of at least 400, i.e. 100 per
#: chain for four chains, and rank-normalised split R-hat at most 1.01), and the most draws
#: per chain the rounds may reach in all.
AUTO_FIRST_DRAWS = 1000
AUTO_MIN_ESS = 400.0
AUTO_MAX_RHAT = 1.01
AUTO_MAX_DRAWS = 10_000
#: A round asks for this much more than the ESS measured so far says the criteria need
#: (ESS grows about linearly with the draws, and its estimate is noisy), and for at least
#: this fraction of the draws so far (R-hat, which does not say how far off it is, then
#: gets its next look on a markedly longer chain).
_AUTO_MARGIN = 1.2
_AUTO_MIN_GROWTH = 0.5


class ChainResult(NamedTuple):
    """What one chain returns to :class:`MCMCEstimator`.

    Attributes
    ----------
    draws : ndarray of shape (n_draws, n_params)
        The retained draws of the flat parameter vector.
    stats : dict of str -> ndarray of shape (n_draws,)
        Per-draw sample statistics, named as ArviZ names them where a name exists
        (``acceptance_rate``, ``step_size``) and after the package's quantities otherwise
        (``accepted``, ``batch_size``, ``n_evaluations``).
    n_evaluations : int
        Data terms evaluated by the chain, warm-up included.
    step_size : float
        The chain's step size after warm-up (NaN for samplers without one).
    state : object or None, default None
        What the estimator's continuation function needs to continue the chain (its last
        state, frozen step size and random generator); None when the chain cannot continue.
    extras : object, default None
        Outputs of the chain that are neither draws nor per-draw statistics, for the
        estimator's ``_after_sampling`` (``MCMCEstimator`` keeps those of the last chains run
        in ``_latest_extras``).
    """

    draws: np.ndarray
    stats: dict
    n_evaluations: int
    step_size: float
    state: object = None
    extras: object = None


def run_chains(chain_fn, args, *, n_chains, random_state, n_jobs=None, progress=False,
               desc="chains", steps_per_chain=None):
    """Run ``chain_fn(*args, rng)`` for ``n_chains`` independent generators, in parallel.

    Every chain's generator is spawned from ``random_state`` through ``SeedSequence.spawn``
    before anything is scheduled, and results are collected in chain order, so the output does
    not depend on ``n_jobs`` or on the joblib backend (use ``joblib.parallel_config`` to pick
    one, e.g. ``backend="dask"``).

    Parameters
    ----------
    chain_fn : callable
        A picklable (module-level) function ``chain_fn(*args, rng) -> result``; when it also
        takes a ``progress`` keyword and ``steps_per_chain`` is given, it is passed a callable
        that the chain calls with the number of steps it finished since its previous call.
    args : tuple
        Arguments shared by every chain (pickled once per task by process backends).
    n_chains : int >= 1
    random_state : None, int, SeedSequence, Generator or RandomState
    n_jobs : int or None
        As in joblib; ``None`` means 1 unless a ``parallel_config`` context says otherwise.
    progress : bool or "notebook"
        Show a tqdm bar: over the chains' steps when the chains report them (see
        ``chain_fn``), over finished chains otherwise. It does not change the results.
    desc : str
        Label of the progress bar.
    steps_per_chain : int or None
        Steps each chain reports in all (the bar's total is ``n_chains`` times it).

    Returns
    -------
    list
        ``n_chains`` results in chain order.
    """
    n_chains = check_int(n_chains, "n_chains", low=1)
    rngs = spawn_generators(random_state, n_chains)
    return run_tasks(chain_fn, args, [(rng,) for rng in rngs], n_jobs=n_jobs,
                      progress=progress, desc=desc, steps_per_chain=steps_per_chain)


class _Sampler(NamedTuple):
    """What :meth:`MCMCEstimator.sample_more` and the data hooks need after ``fit``: kept in
    memory, not pickled (it holds the kernel, hence the training data)."""

    continue_fn: object
    args: tuple
    states: list
    data: object


class MCMCEstimator(BaseEstimator):
    """Chains, stored draws, diagnostics, warnings and ArviZ export shared by the estimators.

    Subclasses call :meth:`_sample` from ``fit`` with a picklable chain function returning a
    :class:`ChainResult`, and implement ``_posterior_variables()`` returning an ordered mapping
    ``name -> ndarray (n_chains, n_draws, *shape)`` of the fitted draws; ``_posterior_dims()``
    (``name -> list of dimension names``, and coordinates) is optional. The flat parameter vector
    used by :meth:`sample_posterior` and the diagnostics concatenates the variables in that
    order.

    Optional hooks: ``_after_sampling()`` derives the estimator's own fitted attributes from the
    draws (after ``fit`` and after :meth:`sample_more`); ``_n_observations()``,
    ``_observed_data(rows)``, ``_pointwise_log_likelihood(rows)``,
    ``_posterior_predictive(rows, rng)`` and ``_log_density()`` feed
    :meth:`to_inference_data` (see there); an estimator without them exports the posterior and
    the sample statistics only.

    Fitted attributes set by :meth:`_sample`: ``posterior_names_``, ``n_evaluations_``,
    ``fraction_data_touched_``, ``step_size_``, ``acceptance_rate_``, ``ess_``, ``rhat_``,
    ``n_draws_`` (draws per chain) and ``convergence_`` (how the draws ended, see
    :meth:`_sample`).
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_draws": [Interval(Integral, 1, _MAX_COUNT, closed="both")],
        "n_warmup": [Interval(Integral, 0, _MAX_COUNT, closed="both")],
        "n_chains": [Interval(Integral, 1, _MAX_COUNT, closed="both")],
        "n_jobs": [Integral, None],
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator,
                         np.random.SeedSequence, np.random.RandomState, None],
        "progress": ["boolean", StrOptions({"notebook"})],
    }

    def _posterior_variables(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _posterior_dims(self):
        return {}, {}

    def _after_sampling(self):
        """Derive the estimator's fitted attributes from ``self._draws`` and ``self._stats``
        (called after the draws of ``fit`` and of :meth:`sample_more` are stored)."""

    # hooks of to_inference_data: an estimator overrides those it can provide
    def _n_observations(self):
        """Number of observations the likelihood is a sum over."""
        raise NotImplementedError

    def _observed_data(self, rows):
        """``name -> ndarray (len(rows),)``: the observations ``rows`` (all when None)."""
        raise NotImplementedError

    def _pointwise_log_likelihood(self, rows):
        """``name -> ndarray (n_chains, n_draws, len(rows))``: the log likelihood of each of
        the observations ``rows`` (all when None) at every draw."""
        raise NotImplementedError

    def _posterior_predictive(self, rows, rng):
        """``name -> ndarray (n_chains, n_draws, len(rows))``: replicated observations, one
        per draw, drawn with ``rng``."""
        raise NotImplementedError

    def _log_density(self):
        """ndarray (n_chains, n_draws): the log density of the sampled target at every draw,
        up to a constant."""
        raise NotImplementedError

    def _provides(self, hook):
        return getattr(type(self), hook) is not getattr(MCMCEstimator, hook)

    def __sklearn_is_fitted__(self):
        # validate_data sets n_features_in_ before a fit can still fail: only draws mean fitted.
        return hasattr(self, "_draws")

    def __getstate__(self):
        # The sampler holds the kernel, hence the training data: pickles stay the size of the
        # draws. What needs it (sample_more, the log likelihood) says so after unpickling.
        # (a copy: object.__getstate__ may return the instance's own __dict__)
        state = dict(super().__getstate__())
        state.pop("_sampler", None)
        return state

    def _sample(self, chain_fn, args, *, names, n_data, n_setup_evaluations=0,
                continue_fn=None, data=None, n_warmup_steps=None, desc=None,
                caller_depth=0):
        """Run the chains and store draws, statistics, counts and diagnostics.

        Parameters
        ----------
        chain_fn : callable
            Module-level ``chain_fn(*args, n_draws, n_warmup, rng) -> ChainResult``; it may
            take a ``progress`` keyword (see :func:`run_chains`).
        args : tuple
            Arguments shared by every chain.
        names : sequence of str
            Names of the flat parameters (columns of :meth:`sample_posterior`).
        n_data : int
            Data terms an exact sampler evaluates per step (for ``fraction_data_touched_``).
        n_setup_evaluations : int, default 0
            Data terms evaluated once before the chains (e.g. to build control variates).
        continue_fn : callable or None, default None
            Module-level ``continue_fn(*args, n_draws, state, progress=None) -> ChainResult``
            that continues a chain from the ``state`` of its last result; it makes
            :meth:`sample_more` available.
        data : object, default None
            What the estimator's hooks need of the training data; kept in memory with the
            chains' states, not pickled.
        n_warmup_steps : int or None, default None
            Steps each chain runs before its first draw, when not ``n_warmup`` (for the
            progress bar and ``fraction_data_touched_``).
        desc : str or None, default None
            Label of the progress bar (the estimator's class name when None), e.g. with what
            the fit is planned to cost.
        caller_depth : int, default 0
            Calls between the estimator's ``fit`` and this one (the warnings point at the
            user's call of ``fit``).

        Returns
        -------
        ndarray of shape (n_chains, n_draws, n_params)
            The draws (also kept for the diagnostics and :meth:`sample_posterior`).

        Warns
        -----
        ConvergenceWarning
            When the chains have not converged (:func:`sksubsample.diagnostics.check_convergence`).
        """
        before = int(self.n_warmup if n_warmup_steps is None else n_warmup_steps)
        auto = self._auto_draws()
        first = self._first_round_draws()
        label = desc or type(self).__name__
        # int(): a bool passes the Integral constraints but not the compiled chains' signatures
        results = run_chains(chain_fn, (*args, first, int(self.n_warmup)),
                             n_chains=self.n_chains, random_state=self.random_state,
                             n_jobs=self.n_jobs, progress=self.progress,
                             desc=f"{label} (round 1)" if auto else label,
                             steps_per_chain=first + before)
        self.posterior_names_ = np.array([str(n) for n in names], dtype=object)
        self.step_size_ = np.array([r.step_size for r in results])
        self._n_data, self._n_warmup_run = int(n_data), before
        self.n_evaluations_ = int(n_setup_evaluations)
        states = [r.state for r in results]
        if continue_fn is None or any(state is None for state in states):
            continue_fn, args, states = None, (), []
        self._sampler = _Sampler(continue_fn, tuple(args), states, data)
        # Diagnostics point at the user's call of fit: fit -> _sample -> _store -> check.
        if not auto:
            self._store(results, append=False, stacklevel=5 + caller_depth)
            self.convergence_ = {"rounds": 1, "stopped": "n_draws"}
            return self._draws
        self._store(results, append=False, stacklevel=None)
        rounds, stopped = 1, None
        while stopped is None:
            more, stopped = self._next_round()
            if more:
                rounds += 1
                self._continue(more, f"{label} (round {rounds})", stacklevel=None)
        self.convergence_ = {"rounds": rounds, "stopped": stopped,
                             "max_draws": AUTO_MAX_DRAWS, **self._auto_criteria()[1]}
        # Warns naming the worst parameters when the budget ran out first.
        self._check(stacklevel=5 + caller_depth, tail=True)
        return self._draws

    def _auto_draws(self):
        return isinstance(self.n_draws, str) and self.n_draws == "auto"

    def _first_round_draws(self):
        """Draws per chain of ``fit``'s first (with an integer ``n_draws``, only) run."""
        return AUTO_FIRST_DRAWS if self._auto_draws() else int(self.n_draws)

    def _auto_criteria(self):
        """``(met, summary)``: whether every parameter's bulk and tail ESS reach
        :data:`AUTO_MIN_ESS` and its R-hat is at most :data:`AUTO_MAX_RHAT`, and the worst
        of each."""
        draws = self._draws
        tail = effective_sample_size(draws, method="tail")
        summary = {"min_bulk_ess": float(np.min(self.ess_)), "min_tail_ess": float(np.min(tail)),
                   "max_rhat": float(np.max(self.rhat_))}
        met = bool(np.all(self.ess_ >= AUTO_MIN_ESS) and np.all(tail >= AUTO_MIN_ESS)
                   and np.all(self.rhat_ <= AUTO_MAX_RHAT))
        return met, summary

    def _next_round(self):
        """``(draws per chain of the next round, why the rounds stop)``: 0 and
        ``"converged"``, ``"budget"`` (:data:`AUTO_MAX_DRAWS` reached) or ``"cannot
        continue"`` when they stop, else the draws the ESS so far says are missing (with a
        margin, at least half the draws so far, within the budget) and None."""
        met, summary = self._auto_criteria()
        if met:
            return 0, "converged"
        n = self._draws.shape[1]
        if n >= AUTO_MAX_DRAWS:
            return 0, "budget"
        if self._sampler.continue_fn is None:
            return 0, "cannot continue"
        worst = min(summary["min_bulk_ess"], summary["min_tail_ess"])
        wanted = (n * _AUTO_MARGIN * AUTO_MIN_ESS / worst
                  if np.isfinite(worst) and worst > 0 else AUTO_MAX_DRAWS)
        more = max(int(np.ceil(wanted)) - n, int(np.ceil(_AUTO_MIN_GROWTH * n)))
        return min(more, AUTO_MAX_DRAWS - n), None

    def _continue(self, n_draws, desc, stacklevel):
        sampler = self._sampler
        results = run_tasks(sampler.continue_fn, (*sampler.args, n_draws),
                            [(state,) for state in sampler.states], n_jobs=self.n_jobs,
                            progress=self.progress, desc=desc, steps_per_chain=n_draws)
        self._sampler = sampler._replace(states=[r.state for r in results])
        self._store(results, append=True,
                    stacklevel=None if stacklevel is None else stacklevel + 1)

    def _check(self, stacklevel, tail=False):
        """The convergence diagnostics of the draws, with a ConvergenceWarning when they fail
        (``tail``: when the tail ESS of :meth:`_auto_criteria` fails too)."""
        draws = self._draws
        if draws.shape[1] == 0:  # a fit that asked for no draws (a search, not a sample)
            self.rhat_ = self.ess_ = np.full(draws.shape[2], np.nan)
            return
        if stacklevel is None:  # quietly, between the rounds of n_draws="auto"
            self.rhat_ = split_rhat(draws)
            self.ess_ = effective_sample_size(draws)
            return
        # (stacklevel counts the frames above _store or _sample, whichever called this)
        options = ({"ess_per_chain": AUTO_MIN_ESS / draws.shape[0],
                    "rhat_threshold": AUTO_MAX_RHAT, "tail": True} if tail else {})
        self.rhat_, self.ess_ = check_convergence(draws, self.posterior_names_,
                                                  stacklevel=stacklevel, **options)

    def _store(self, results, *, append, stacklevel):
        draws = np.stack([r.draws for r in results])
        stats = {key: np.stack([r.stats[key] for r in results]) for key in results[0].stats}
        if append:
            draws = np.concatenate([self._draws, draws], axis=1)
            stats = {key: np.concatenate([self._stats[key], value], axis=1)
                     for key, value in stats.items()}
        self._draws, self._stats = draws, stats
        self.n_draws_ = int(draws.shape[1])
        self._latest_extras = [r.extras for r in results]
        self.n_evaluations_ += int(sum(r.n_evaluations for r in results))
        if "accepted" in stats:
            self.acceptance_rate_ = float(stats["accepted"].mean())
        elif "acceptance_rate" in stats:
            self.acceptance_rate_ = float(stats["acceptance_rate"].mean())
        n_steps = draws.shape[0] * (draws.shape[1] + self._n_warmup_run)
        self.fraction_data_touched_ = self.n_evaluations_ / (self._n_data * n_steps)
        self._after_sampling()
        self._check(None if stacklevel is None else stacklevel + 1)

    def sample_more(self, n_draws):
        """Continue every chain by ``n_draws`` draws, appended to the fitted ones.

        The chains go on from their last draw with the step size their warm-up froze and their
        own random generators, without a new warm-up: the draws are exactly, to the last bit,
        those the chains would have given had ``fit`` asked for more draws from the same
        sampler (whatever ``n_jobs``; with ``n_jobs=1`` only for the minibatch Barker test,
        which draws its noise in blocks kept per process). A fit with a larger ``n_draws``
        gives the same draws too unless the sampler it builds differs, e.g. control variates
        planned for a longer run. Draws, sample
        statistics, counts (``n_evaluations_``, ``fraction_data_touched_``), the acceptance
        rate and the diagnostics (``rhat_``, ``ess_``, with a ConvergenceWarning when they
        still fail) are updated, as are the estimator's posterior summaries. The ``n_draws``
        parameter of the estimator is left as set (scikit-learn parameters are not changed by
        fitting).

        Parameters
        ----------
        n_draws : int >= 1
            Further draws per chain.

        Returns
        -------
        self

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        RuntimeError
            After unpickling: the sampler, which holds the training data, is kept in memory
            but not pickled (fit again).
        NotImplementedError
            For an estimator whose chains cannot continue.

        Warns
        -----
        ConvergenceWarning
            When the chains, with the new draws, have not converged.
        """
        check_is_fitted(self)
        n_draws = check_int(n_draws, "n_draws", low=1)
        sampler = self._fitted_sampler("sample_more")
        if sampler.continue_fn is None:
            raise NotImplementedError(
                f"{type(self).__name__} cannot continue its chains: fit it again with more "
                "draws")
        # sample_more -> _continue -> _store -> _check -> check_convergence
        self._continue(n_draws, type(self).__name__, stacklevel=4)
        return self

    def _fitted_sampler(self, what):
        sampler = getattr(self, "_sampler", None)
        if sampler is None:
            raise RuntimeError(
                f"{what} needs the sampler and training data that fit keeps in memory, which "
                f"are not pickled with the estimator (this {type(self).__name__} was "
                "unpickled or copied): call fit again")
        return sampler

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

    def to_inference_data(self, *, log_likelihood=False, posterior_predictive=False,
                          lp="auto", random_state=None):
        """The fitted draws as an ArviZ object, ready for ``az.summary``, ``az.loo``, ``az.waic``.

        Parameters
        ----------
        log_likelihood : bool, int or array-like, default False
            Add the group ``log_likelihood``: the log likelihood of each observation at every
            draw (what ``az.loo`` and ``az.waic`` need). It costs one pass over the chosen
            observations per draw, so it is computed on request only: ``True`` for every
            observation, an int ``k`` for ``k`` observations drawn at random without
            replacement (``random_state``), or an array of observation indices (or a boolean
            mask). On a subsample, ``az.loo`` estimates the elpd of those observations:
            scale it by ``n / k`` for the whole data set. A selection larger than 5·10⁷
            values (draws × observations) is refused: choose a subsample.
        posterior_predictive : bool, int or array-like, default False
            Add the group ``posterior_predictive``: one replicated data set per draw, for the
            same observations as ``log_likelihood`` (``True`` takes the subsample given
            there, if any; two different subsamples are refused).
        lp : {"auto", True, False}, default "auto"
            Add ``lp`` to ``sample_stats``: the log density of the sampled posterior at every
            draw, up to a constant. Exact, it reads every observation per draw (the chains
            never compute it), so ``"auto"`` adds it only when that costs at most 2·10⁷ data
            terms and the training data are in memory; ``True`` always computes it.
        random_state : None, int or numpy.random.Generator, default None
            Randomness of a random subsample and of the posterior predictive draws.

        Returns
        -------
        arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
            Groups: ``posterior`` (dimensions ``(chain, draw, ...)``); ``sample_stats``, named
            as ArviZ names them where a name exists (``acceptance_rate``: the acceptance
            probability of each step's proposal; ``step_size``; ``lp``) and after the
            package's quantities otherwise (``accepted``, ``batch_size``, ``n_evaluations``,
            ...); ``observed_data`` (when the estimator provides it and its training data are
            in memory: the chosen observations, dimension ``obs_id`` with their indices as
            coordinates); ``log_likelihood`` and ``posterior_predictive`` when asked.

        Raises
        ------
        ImportError
            When ArviZ is not installed (install the ``arviz`` extra).
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        NotImplementedError
            When the estimator cannot provide a requested group (or ``lp=True``).
        RuntimeError
            When a requested group needs the training data and the estimator was unpickled
            (the training data are kept in memory, not pickled).
        ValueError, TypeError
            For a bad selection of observations.
        """
        check_is_fitted(self)
        if not (isinstance(lp, bool | np.bool_) or (isinstance(lp, str) and lp == "auto")):
            raise ValueError(f"lp must be 'auto', True or False, got {lp!r}")
        requests = {"log_likelihood": log_likelihood,
                    "posterior_predictive": posterior_predictive}
        hooks = {"log_likelihood": "_pointwise_log_likelihood",
                 "posterior_predictive": "_posterior_predictive", "lp": "_log_density"}
        wanted = [name for name, value in requests.items()
                  if value is not None and value is not False]
        if lp is True:
            wanted.append("lp")
        for name in wanted:
            if not self._provides(hooks[name]):
                raise NotImplementedError(f"{type(self).__name__} does not provide {name}")
        for name in wanted:
            self._fitted_sampler(name)
        arviz = import_arviz()
        rng = as_generator(random_state)
        has_data = getattr(self, "_sampler", None) is not None and self._provides(
            "_n_observations")
        rows = n_rows = None
        if has_data:
            n_obs = self._n_observations()
            rows = select_observations(requests, n_obs, rng)
            n_rows = n_obs if rows is None else rows.size
        n_chains, n_draws = self._draws.shape[:2]
        for name in wanted:
            if name != "lp" and n_chains * n_draws * n_rows > MAX_POINTWISE_VALUES:
                raise ValueError(
                    f"{name} over {n_rows} observations would hold {n_chains * n_draws} × "
                    f"{n_rows} values (more than {MAX_POINTWISE_VALUES:.0e}): pass an int, "
                    f"the size of a random subsample of observations, or their indices")
        dims, coords = self._posterior_dims()
        dims, coords = dict(dims), dict(coords)
        stats = {k: np.asarray(v) for k, v in self._stats.items()}
        cheap = has_data and n_chains * n_draws * self._n_observations() <= CHEAP_LP_TERMS
        if lp is True or (lp == "auto" and cheap and self._provides("_log_density")):
            stats["lp"] = np.asarray(self._log_density())
        groups = {
            "posterior": {k: np.asarray(v) for k, v in self._posterior_variables().items()},
            "sample_stats": stats,
        }
        pointwise = {}
        if has_data and self._provides("_observed_data"):
            groups["observed_data"] = self._observed_data(rows)
            pointwise.update(groups["observed_data"])
        if "log_likelihood" in wanted:
            groups["log_likelihood"] = self._pointwise_log_likelihood(rows)
            pointwise.update(groups["log_likelihood"])
        if "posterior_predictive" in wanted:
            groups["posterior_predictive"] = self._posterior_predictive(rows, rng)
            pointwise.update(groups["posterior_predictive"])
        if pointwise:
            for name in pointwise:
                dims.setdefault(name, ["obs_id"])
            coords["obs_id"] = np.arange(n_rows) if rows is None else rows
        return arviz_from_dict(arviz, groups, coords, dims)
