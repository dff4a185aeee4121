"""The chains' ledger across runs that may be cut short by Ctrl-C.

Each chain is, at any time, either *continuable* (a state after its last finished draw) or to
be *run again from its seed* (it never ran, or stopped in warm-up): a chain is a function of
its seed, so running it again gives the same draws. Chains stopped by Ctrl-C finish different
numbers of draws; the estimator stores as many per chain as every chain has (the draws axis is
one array), and keeps each chain's further finished draws aside (``pending``), to be handed
out first by the next run. So a run cut short and continued gives, chain by chain, the draws
of one run that was not (as far as the chains' continuation itself is exact, see
:meth:`~sksubsample._base.MCMCEstimator.sample_more`).
"""

from __future__ import annotations

import copy
import functools
from typing import NamedTuple

import numpy as np

from ._progress import takes_progress
from ._utils import ChainInterrupted

__all__ = ["FitInterrupted", "Restart", "continue_job", "join", "keeps_state_on_interrupt",
           "n_finished", "resume", "stop_asked", "trim"]


class FitInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the chains of ``fit`` or ``sample_more``, after the estimator stored the
    draws every chain had finished (``n_draws_completed_`` per chain)."""


def keeps_state_on_interrupt(fit):
    """Decorate an estimator's ``fit`` so that Ctrl-C never leaves it half old, half new.

    Interrupted before its chains (set-up, e.g. the MAP or the plan), the estimator is put
    back as it was before ``fit`` (the previous fit, or unfitted). Interrupted in its chains,
    the new fit is kept, whole and marked partial (:class:`FitInterrupted`, see
    :class:`~sksubsample._base.MCMCEstimator`), with none of the previous fit's attributes
    (those the chains would have set again, e.g. ``labels_``, are absent when no draw was
    finished). ``KeyboardInterrupt`` is raised again in both cases. Any other error leaves
    the attributes as ``fit`` left them, the previous fit's where it set none.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        before = dict(self.__dict__)
        for name in before:
            if name.endswith("_") and not name.startswith("_"):
                del self.__dict__[name]
        try:
            return fit(self, *args, **kwargs)
        except FitInterrupted:
            raise
        except KeyboardInterrupt:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise
        except BaseException:
            for name, value in before.items():
                self.__dict__.setdefault(name, value)
            raise

    return wrapper


class Restart(NamedTuple):
    """How to run a chain again from its seed: ``chain_fn(*args, n_draws, n_warmup, seed)``
    (``seeds[c]`` the untouched generator of chain c)."""

    chain_fn: object
    args: tuple
    n_warmup: int
    seeds: list


def resume(fn, arguments, progress=None):
    """``fn(*arguments)``, with ``progress`` when ``fn`` takes it (module-level, so that
    process backends can pickle the call)."""
    if progress is not None and takes_progress(fn):
        return fn(*arguments, progress=progress)
    return fn(*arguments)


def _resume_started(fn, arguments, progress=None):
    start = getattr(fn, "start_ahead", None)
    return None if start is None else start(*arguments)


# (read by sksubsample._progress.run_tasks)
resume.start_ahead = _resume_started


def continue_job(sampler, chain, n_draws, start_over):
    """``(fn, arguments)`` that gives chain ``chain`` its next ``n_draws`` draws: from its seed
    when ``start_over`` or it has no state, from its state otherwise."""
    state = sampler.states[chain]
    if start_over or state is None:
        restart = sampler.restart
        # A deep copy: a chain run in this process advances the generator it is given.
        seed = copy.deepcopy(restart.seeds[chain])
        return restart.chain_fn, (*restart.args, int(n_draws), restart.n_warmup, seed)
    return sampler.continue_fn, (*sampler.args, int(n_draws), state)


def stop_asked(progress, n):
    """Report ``n`` finished steps to a chain's ``progress`` callable (if any); whether the run
    was asked to stop (Ctrl-C), in which case the chain returns what it has finished.

    For chain drivers that call it between two steps, where their state is whole.
    """
    if progress is None:
        return False
    try:
        progress(n)
    except ChainInterrupted:
        return True
    return False


def n_finished(result):
    return 0 if result is None else int(result.draws.shape[0])


def trim(result, start, stop, n_evaluations=0):
    """Draws ``start:stop`` of a chain's result, with ``n_evaluations`` data terms.

    Extras with per-draw parts (a ``trimmed(start, stop)`` method) are cut alike.
    """
    extras = result.extras
    if hasattr(extras, "trimmed"):
        extras = extras.trimmed(start, stop)
    return result._replace(draws=result.draws[start:stop],
                           stats={k: v[start:stop] for k, v in result.stats.items()},
                           n_evaluations=int(n_evaluations), extras=extras)


def join(first, second):
    """One chain's draws ``first`` then ``second`` (either may be None); the last's state.

    Extras with per-draw parts (a ``joined(later)`` method) are joined alike; other extras
    are the last's.
    """
    if first is None or second is None:
        return second if first is None else first
    stats = {k: np.concatenate([first.stats[k], second.stats[k]]) for k in second.stats}
    extras = second.extras
    if hasattr(first.extras, "joined"):
        extras = first.extras.joined(second.extras)
    return second._replace(draws=np.concatenate([first.draws, second.draws]), stats=stats,
                           n_evaluations=first.n_evaluations + second.n_evaluations,
                           extras=extras)
