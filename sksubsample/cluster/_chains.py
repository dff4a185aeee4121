"""Chains of the coreference sampler: annealing to a MAP partition, then posterior draws.

A chain starts from singletons and runs the Gibbs sweeps of :func:`~._gibbs.sweep` at the
temperatures of a geometric annealing schedule (Finkel et al. 2005): its last partition is
the chain's MAP candidate. It then continues at ``T = 1``, where the Gibbs sweeps leave the
posterior ``p(y | x)`` invariant: ``n_warmup`` sweeps are discarded and each of the next
``n_draws`` sweeps gives one posterior draw, a partition, with its log-potential and its number
of clusters (the scalar quantities whose convergence across chains can be checked: partitions
themselves have no stable labels).
"""

from __future__ import annotations

import copy
import time
from typing import NamedTuple

import numpy as np

from .._base import ChainResult
from .._partial import stop_asked
from ._gibbs import Partition, canonical_labels, log_potential, sweep

__all__ = ["AnnealingTrace", "CorefExtras", "CorefSettings", "CorefState", "continuable",
           "coref_chain", "coref_continue", "finished_draws"]


class CorefSettings(NamedTuple):
    """What a chain needs to know besides the potentials (see the estimator's parameters)."""

    method: str
    delta: float
    first_batch: int
    temperatures: np.ndarray
    track_log_potential: bool
    track_labels: bool
    audit: bool
    score_annealed: bool


class AnnealingTrace(NamedTuple):
    """Per annealing sweep: factors evaluated, clusters after it, mentions moved, races, race
    errors (audited), eliminations postponed by the guard of the races' normal approximation,
    wall time; the partitions (``track_labels``) and log-potentials (``track_log_potential``)
    after each sweep, or None; the annealed partition and its log-potential (NaN when not
    computed)."""

    n_evaluations: np.ndarray
    n_clusters: np.ndarray
    n_moves: np.ndarray
    n_races: np.ndarray
    n_race_errors: np.ndarray
    n_guarded: np.ndarray
    sweep_times: np.ndarray
    labels: np.ndarray | None
    log_potential: np.ndarray | None
    annealed_labels: np.ndarray
    annealed_log_potential: float


class CorefExtras(NamedTuple):
    """What a chain returns besides its scalar draws: its partitions (one per draw, clusters
    numbered in order of first appearance), from ``fit`` its annealing, and over all its
    sweeps of this call (annealing, warm-up, draws) the updates decided by a race and the
    eliminations the guard of their normal approximation postponed."""

    partitions: np.ndarray
    annealing: AnnealingTrace | None
    n_races: int
    n_guarded: int

    def trimmed(self, start, stop):
        """The extras of draws ``start:stop`` (the annealing and the race counts go with the
        first draws, as the chain's data terms do)."""
        first = start == 0
        return CorefExtras(self.partitions[start:stop], self.annealing if first else None,
                           self.n_races if first else 0, self.n_guarded if first else 0)

    def joined(self, later):
        """These extras, then those of the same chain's ``later`` draws."""
        annealing = self.annealing if self.annealing is not None else later.annealing
        return CorefExtras(np.concatenate([self.partitions, later.partitions]), annealing,
                           self.n_races + later.n_races, self.n_guarded + later.n_guarded)


class CorefState(NamedTuple):
    """Where a chain stopped: its partition (as stored, so that the chain continues exactly as
    if it had not stopped) and its generator."""

    partition: Partition
    rng: np.random.Generator


def _anneal(part, pot, settings, rng, progress):
    n_sweeps = settings.temperatures.size
    counts = np.zeros((6, n_sweeps), dtype=np.int64)
    times = np.zeros(n_sweeps)
    labels = (np.empty((n_sweeps, part.n), dtype=np.int64) if settings.track_labels else None)
    trace = np.zeros(n_sweeps) if settings.track_log_potential else None
    for s, temperature in enumerate(settings.temperatures):
        start = time.perf_counter()
        result = sweep(part, pot, float(temperature), settings.method, settings.delta,
                       settings.first_batch, rng, audit=settings.audit)
        times[s] = time.perf_counter() - start
        counts[:, s] = (result.n_evaluations, part.n_clusters(), result.n_moves,
                        result.n_races, result.n_race_errors, result.n_guarded)
        if labels is not None:
            labels[s] = canonical_labels(part.labels)
        if trace is not None:
            trace[s] = log_potential(part, pot)
        if progress is not None:
            progress(1)
    if trace is not None:
        final = float(trace[-1])
    elif settings.score_annealed:
        final = float(log_potential(part, pot))
    else:
        final = np.nan
    return AnnealingTrace(counts[0], counts[1], counts[2], counts[3], counts[4], counts[5],
                          times, labels, trace, part.canonical_labels(), final)


def _draws(part, pot, settings, n_warmup, n_draws, rng, progress):
    """``n_warmup`` discarded sweeps at ``T = 1``, then ``n_draws`` recorded ones (those
    finished when the run was asked to stop, see :func:`finished_draws`)."""
    scalars = np.zeros((n_draws, 2))
    partitions = np.empty((n_draws, part.n), dtype=np.int32)
    stats = {name: np.zeros(n_draws, dtype=np.int64)
             for name in ("n_evaluations", "n_moves", "n_races", "n_guarded")}
    evaluations = 0
    races = np.zeros(2, dtype=np.int64)  # races and postponed eliminations, warm-up included
    for s in range(n_warmup + n_draws):
        result = sweep(part, pot, 1.0, settings.method, settings.delta, settings.first_batch,
                       rng)
        evaluations += result.n_evaluations
        races += (result.n_races, result.n_guarded)
        k = s - n_warmup
        if k >= 0:
            scalars[k] = log_potential(part, pot), part.n_clusters()
            partitions[k] = part.canonical_labels()
            stats["n_evaluations"][k] = result.n_evaluations
            stats["n_moves"][k] = result.n_moves
            stats["n_races"][k] = result.n_races
            stats["n_guarded"][k] = result.n_guarded
        if stop_asked(progress, 1):
            scalars, partitions, stats = finished_draws(s + 1 - n_warmup, scalars,
                                                        partitions, stats)
            break
    return scalars, partitions, stats, evaluations, races


def finished_draws(n, scalars, partitions, stats):
    """The first ``n`` (at least 0) draws of a chain stopped by Ctrl-C between two sweeps."""
    n = max(n, 0)
    return scalars[:n], partitions[:n], {k: v[:n] for k, v in stats.items()}


def continuable(state, n_draws, scalars):
    """``state``, or None for a chain stopped before its first draw: it runs again from its
    seed (its warm-up unfinished)."""
    return state if scalars.shape[0] or not n_draws else None


def coref_chain(pot, settings, n_draws, n_warmup, rng, progress=None):
    """One chain: annealing from singletons, ``n_warmup`` sweeps at ``T = 1``, ``n_draws``
    draws. Returns a :class:`~sksubsample._base.ChainResult` whose draws are the log-potential
    and the number of clusters of each drawn partition, with :class:`CorefExtras`."""
    part = Partition(np.arange(pot.n))
    annealing = _anneal(part, pot, settings, rng, progress)
    scalars, partitions, stats, evaluations, races = _draws(part, pot, settings, n_warmup,
                                                            n_draws, rng, progress)
    n_races = int(annealing.n_races.sum() + races[0])
    n_guarded = int(annealing.n_guarded.sum() + races[1])
    return ChainResult(scalars, stats, int(annealing.n_evaluations.sum()) + evaluations,
                       np.nan, continuable(CorefState(part, rng), n_draws, scalars),
                       CorefExtras(partitions, annealing, n_races, n_guarded))


def coref_continue(pot, settings, n_draws, state, progress=None):
    """``n_draws`` more draws of the chain that stopped in ``state`` (no warm-up)."""
    part = copy.deepcopy(state.partition)
    scalars, partitions, stats, evaluations, races = _draws(part, pot, settings, 0, n_draws,
                                                            state.rng, progress)
    return ChainResult(scalars, stats, evaluations, np.nan, CorefState(part, state.rng),
                       CorefExtras(partitions, None, int(races[0]), int(races[1])))
