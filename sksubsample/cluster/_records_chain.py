"""Chains of the records model: annealing to a MAP partition, then posterior draws.

The same schedule as the pairwise CRF's chains (:mod:`._chains`): Gibbs sweeps at geometric
temperatures from the initial partition (the connected components of the pairs that the model
links as isolated pairs), the last one the chain's MAP candidate, then ``n_warmup`` discarded
sweeps and ``n_draws`` recorded ones at ``T = 1``, where the sweeps leave the posterior
invariant.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from .._base import ChainResult
from .._partial import stop_asked
from ._chains import AnnealingTrace, CorefExtras, continuable, finished_draws
from ._partition import canonical_labels
from ._records_cache import cached_log_posterior, empty_cache
from ._records_scratch import records_init, records_log_posterior
from ._records_split_merge import records_split_merge
from ._records_sweep import build_cache, records_sweep

__all__ = ["RecordsState", "labels_log_posterior", "log_posterior", "records_chain",
           "records_continue", "records_labels", "start_state"]


class RecordsState(NamedTuple):
    """Where a records chain stopped: its partition and cluster statistics
    (:class:`~._records_cache.ClusterCache`), its generator, the split-merge attempts per
    component and the moves' scratch clusters."""

    cache: object
    rng: np.random.Generator
    attempts: np.ndarray
    scratch: object

    @property
    def z(self):
        """Local labels of the records (permuted order)."""
        return self.cache.z


def records_labels(model, z):
    """Cluster labels ``0..k-1`` of the records in their original order (first appearance)."""
    comp = np.repeat(np.arange(model.cstart.size - 1), np.diff(model.cstart))
    flat = model.cstart[comp] + z
    out = np.empty(model.n, dtype=np.int64)
    out[model.perm] = flat
    return canonical_labels(out)


#: Split-merge attempts after each Gibbs sweep, per cluster of a component's initial
#: partition: single-record updates cannot move a whole group of records, which an entity
#: split in two needs. Per cluster rather than per record: a split proposal costs
#: ``O(|C|²)`` and a component that is one large entity needs few of them.
SPLIT_MERGE_ATTEMPTS = 0.5


def _sweep(model, state, inv_t):
    n_eval, n_moves = records_sweep(model, state.cache, inv_t, state.rng)
    more, _ = records_split_merge(model, state.cache, inv_t, state.attempts, state.rng,
                                  state.scratch)
    return n_eval + more, n_moves


def log_posterior(model, state):
    """The log posterior (up to a constant) of the chain's partition, from its cached
    cluster statistics."""
    return cached_log_posterior(model, state.cache)


def _n_clusters(model, z):
    comp = np.repeat(np.arange(model.cstart.size - 1), np.diff(model.cstart))
    return int(np.unique(model.cstart[comp] + z).size)


def start_state(model, z, rng):
    """The :class:`RecordsState` of the local labels ``z`` (copied)."""
    cache = empty_cache(model.n_comparisons, model.cstart, np.array(z, dtype=np.int64))
    build_cache(model, cache)
    # Clusters of the initial partition per component (its labels are 0..k-1 there).
    initial = np.maximum.reduceat(model.init, model.cstart[:-1]) + 1
    scratch = empty_cache(model.n_comparisons, model.cstart, np.zeros_like(cache.z))
    return RecordsState(cache, rng, SPLIT_MERGE_ATTEMPTS * initial, scratch)


def _draws(model, state, settings, n_warmup, n_draws, progress):
    scalars = np.zeros((n_draws, 2))
    partitions = np.empty((n_draws, model.n), dtype=np.int32)
    stats = {"n_evaluations": np.zeros(n_draws, dtype=np.int64),
             "n_moves": np.zeros(n_draws, dtype=np.int64)}
    evaluations = 0
    for s in range(n_warmup + n_draws):
        n_eval, n_moves = _sweep(model, state, 1.0)
        evaluations += n_eval
        k = s - n_warmup
        if k >= 0:
            scalars[k] = log_posterior(model, state), _n_clusters(model, state.z)
            partitions[k] = records_labels(model, state.z)
            stats["n_evaluations"][k] = n_eval
            stats["n_moves"][k] = n_moves
        if stop_asked(progress, 1):
            scalars, partitions, stats = finished_draws(s + 1 - n_warmup, scalars,
                                                        partitions, stats)
            break
    return scalars, partitions, stats, evaluations


def records_chain(model, settings, n_draws, n_warmup, rng, progress=None):
    """One chain: annealing from the initial partition, ``n_warmup`` sweeps at ``T = 1``,
    ``n_draws`` draws (a :class:`~sksubsample._base.ChainResult` as the CRF's chains give)."""
    state = start_state(model, model.init, rng)
    n_sweeps = settings.temperatures.size
    counts = np.zeros((3, n_sweeps), dtype=np.int64)
    times = np.zeros(n_sweeps)
    labels = np.empty((n_sweeps, model.n), dtype=np.int64) if settings.track_labels else None
    trace = np.zeros(n_sweeps) if settings.track_log_potential else None
    for s, temperature in enumerate(settings.temperatures):
        start = time.perf_counter()
        n_eval, n_moves = _sweep(model, state, 1.0 / float(temperature))
        times[s] = time.perf_counter() - start
        counts[:, s] = n_eval, _n_clusters(model, state.z), n_moves
        if labels is not None:
            labels[s] = records_labels(model, state.z)
        if trace is not None:
            trace[s] = log_posterior(model, state)
        if progress is not None:
            progress(1)
    final = float(trace[-1]) if trace is not None else float(log_posterior(model, state))
    zeros = np.zeros(n_sweeps, dtype=np.int64)
    annealing = AnnealingTrace(counts[0], counts[1], counts[2], zeros, zeros, zeros, times,
                               labels, trace, records_labels(model, state.z), final)
    scalars, partitions, stats, evaluations = _draws(model, state, settings, n_warmup,
                                                     n_draws, progress)
    return ChainResult(scalars, stats, int(counts[0].sum()) + evaluations, np.nan,
                       continuable(state, n_draws, scalars),
                       CorefExtras(partitions, annealing, 0, 0))


def records_continue(model, settings, n_draws, state, progress=None):
    """``n_draws`` more draws of the chain that stopped in ``state`` (no warm-up)."""
    state = state._replace(cache=type(state.cache)(*(a.copy() for a in state.cache)))
    scalars, partitions, stats, evaluations = _draws(model, state, settings, 0, n_draws,
                                                     progress)
    return ChainResult(scalars, stats, evaluations, np.nan, state,
                       CorefExtras(partitions, None, 0, 0))


def labels_log_posterior(model, labels):
    """The model's log posterior (up to a constant) of the partition ``labels`` of the records
    in their original order; ``-inf`` when a cluster spans two components."""
    ordered = labels[model.perm]
    comp = np.repeat(np.arange(model.cstart.size - 1), np.diff(model.cstart))
    by_label = np.argsort(ordered, kind="stable")
    if np.any((ordered[by_label][1:] == ordered[by_label][:-1])
              & (comp[by_label][1:] != comp[by_label][:-1])):
        return -np.inf  # outside the model's support
    # Local labels: each component's clusters numbered from 0.
    o = np.lexsort((ordered, comp))
    new = np.r_[True, (ordered[o][1:] != ordered[o][:-1]) | (comp[o][1:] != comp[o][:-1])]
    group = np.cumsum(new) - 1
    first = np.empty(model.cstart.size - 1, dtype=np.int64)
    first[comp[o][::-1]] = group[::-1]
    z = np.empty(model.n, dtype=np.int64)
    z[o] = group - first[comp[o]]
    F = model.n_comparisons
    R = np.zeros((F, model.n))
    N = np.zeros((F, model.n), dtype=np.int64)
    records_init(model.adj, model.exm, model.nonnull, model.cstart, model.boff, F, z, R, N)
    return float(records_log_posterior(model.adj, model.exm, model.nonnull, model.half_log_m,
                                       model.log_alpha, model.cstart, model.boff, F,
                                       model.group, model.move_rate, z, R, N))
