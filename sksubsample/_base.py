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
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._arviz import InferenceDataMixin
from ._interrupt import ChainsInterrupted
from ._partial import (
    FitInterrupted,
    Restart,
    continue_job,
    join,
    keeps_state_on_interrupt,
    n_finished,
    resume,
    trim,
)
from ._progress import run_tasks
from ._rounds import ConvergenceRounds
from ._utils import as_generator, check_int, spawn_generators
from .diagnostics import effective_sample_size, split_rhat

__all__ = ["ChainResult", "FitInterrupted", "MCMCEstimator", "keeps_state_on_interrupt",
           "run_chains"]

#: Largest chain length or number of chains: the draws are stored in arrays indexed by int64.
_MAX_COUNT = np.iinfo(np.int64).max

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
    memory, not pickled (it holds the kernel, hence the training data).

    ``states[c]`` continues chain c (None: run it again from ``restart``'s seed);
    ``pending[c]`` holds draws chain c finished beyond the stored ones (a run cut short by
    Ctrl-C), handed out first by the next run (see :mod:`sksubsample._partial`).
    """

    continue_fn: object
    args: tuple
    states: list
    data: object
    pending: list
    restart: Restart


class MCMCEstimator(ConvergenceRounds, InferenceDataMixin, BaseEstimator):
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
    ``n_draws_`` (draws per chain), ``convergence_`` (how the draws ended, see :meth:`_sample`),
    ``n_draws_completed_`` (draws per chain stored) and ``interrupted_``.

    Ctrl-C in the set-up puts the estimator back as it was (:func:`keeps_state_on_interrupt`);
    in the chains, it keeps the new fit whole with the draws every chain finished
    (``interrupted_``; none if a chain was in warm-up: then ``NotFittedError`` says so) and
    raises :class:`FitInterrupted`; :meth:`sample_more` continues them draw for draw (a chain
    that had no draw runs again from its seed). See :mod:`sksubsample._interrupt`.
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
        if not hasattr(self, "_draws") and getattr(self, "interrupted_", False):
            raise NotFittedError(
                f"This {type(self).__name__} was interrupted (Ctrl-C) before every chain had "
                f"finished its warm-up and a first draw, so it has no draws yet: call "
                f"sample_more(n_draws) to continue its chains, or fit it again")
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
        n_chains = check_int(self.n_chains, "n_chains", low=1)
        seeds = spawn_generators(self.random_state, n_chains)
        auto = self._auto_draws()
        label = desc or type(self).__name__
        self.posterior_names_ = np.array([str(n) for n in names], dtype=object)
        self._n_data, self._n_warmup_run = int(n_data), before
        self.n_evaluations_ = int(n_setup_evaluations)
        for name in ("_draws", "_stats"):
            self.__dict__.pop(name, None)
        # int(): a bool passes the Integral constraints but not the compiled chains' signatures
        restart = Restart(chain_fn, tuple(args), int(self.n_warmup), seeds)
        self._sampler = _Sampler(continue_fn, tuple(args), [None] * n_chains, data,
                                 [None] * n_chains, restart)
        # Diagnostics point at the user's call of fit: fit -> _sample -> _advance -> _store
        # -> _check -> check_convergence.
        if not auto:
            self._advance(int(self.n_draws), first=True, desc=label,
                          stacklevel=5 + caller_depth)
            self.convergence_ = {"rounds": 1, "stopped": "n_draws"}
            return self._draws
        self._draw_until_converged(label, stacklevel=5 + caller_depth)
        return self._draws

    def _advance(self, n_draws, *, first, desc, stacklevel):
        """Give every chain ``n_draws`` more draws (all of ``fit``'s when ``first``), store
        them, and on Ctrl-C store as many per chain as every chain finished, keep the rest
        aside and raise :class:`FitInterrupted` (see :mod:`sksubsample._partial`)."""
        sampler = self._sampler
        jobs, which = [], []
        for c, pending in enumerate(sampler.pending):
            need = n_draws - n_finished(pending)
            if first or need > 0:
                jobs.append(continue_job(sampler, c, need, start_over=first))
                which.append(c)
        steps = n_draws + (self._n_warmup_run if first else 0)
        interrupted = False
        try:
            returned = run_tasks(resume, (), jobs, n_jobs=self.n_jobs, progress=self.progress,
                                 desc=desc, steps_per_chain=steps)
        except ChainsInterrupted as exc:
            returned, interrupted = exc.results, True
        # Data that changed under the chains (a file rewritten, a NaN written into an array
        # in memory) make draws of no posterior: an error, and nothing stored.
        check_unchanged = getattr(sampler.data, "check_unchanged", None)
        if check_unchanged is not None:
            check_unchanged()
        states, chains = list(sampler.states), list(sampler.pending)
        evaluations = [0] * len(chains)
        for c, result in zip(which, returned, strict=True):
            if result is not None:
                evaluations[c] = int(result.n_evaluations)
                states[c] = result.state
                chains[c] = join(chains[c], result)
        step_sizes = None if first else getattr(self, "step_size_", None)
        step_sizes = np.full(len(chains), np.nan) if step_sizes is None else step_sizes
        self.step_size_ = np.array([s if r is None else r.step_size
                                    for s, r in zip(step_sizes, chains, strict=True)])
        done = min(n_draws, *(n_finished(r) for r in chains))
        pending = [None if r is None or n_finished(r) <= done else trim(r, done, None)
                   for r in chains]
        self._sampler = sampler._replace(states=states, pending=pending)
        if done or not interrupted:
            self._store([trim(r, 0, done, e) for r, e in zip(chains, evaluations, strict=True)],
                        append=hasattr(self, "_draws"), stacklevel=stacklevel)
        else:
            self.n_evaluations_ += sum(evaluations)
        self.n_draws_completed_ = self._draws.shape[1] if hasattr(self, "_draws") else 0
        self.interrupted_ = interrupted
        if interrupted:
            raise FitInterrupted(
                f"{type(self).__name__} interrupted: {self.n_draws_completed_} draws per chain "
                f"kept (n_draws_completed_); sample_more(n_draws) continues the chains")

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
        if not getattr(self, "interrupted_", False):
            check_is_fitted(self)
        n_draws = check_int(n_draws, "n_draws", low=1)
        sampler = self._fitted_sampler("sample_more")
        if sampler.continue_fn is None:
            raise NotImplementedError(
                f"{type(self).__name__} cannot continue its chains: fit it again with more "
                "draws")
        # sample_more -> _advance -> _store -> _check -> check_convergence
        self._advance(n_draws, first=False, desc=type(self).__name__, stacklevel=5)
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
