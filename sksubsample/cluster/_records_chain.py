"""Chains of the records model: annealing to a MAP partition, then posterior draws.

The same schedule as the pairwise CRF's chains (:mod:`._chains`): Gibbs sweeps at geometric
temperatures from the initial partition (the connected components of the pairs that the model
links as isolated pairs), the last one the chain's MAP candidate, then ``n_warmup`` discarded
sweeps and ``n_draws`` recorded ones at ``T = 1``, where the sweeps leave the posterior
invariant.

The connected components are independent given the model (no cluster spans two), so a sweep
may visit them in any order, or concurrently. They are cut into shards of consecutive
components (:func:`shards`, a function of the model alone), each with its own random stream
spawned from the chain's (``SeedSequence.spawn``); each shard's sweeps and split-merge moves
draw from its stream only, so the chain's draws are the same whatever the number of threads
that run the shards (the compiled sweeps release the GIL).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from queue import Empty, SimpleQueue
from typing import NamedTuple

import numpy as np

from .._base import ChainResult
from .._partial import stop_asked
from ..algorithms.kernels import njit
from ..algorithms.stores import let_go
from ._chains import AnnealingTrace, CorefExtras, continuable, finished_draws
from ._records_cache import cached_log_posterior, empty_cache, posterior_and_clusters
from ._records_exact import (
    EXACT_UP_TO,
    TABLE,
    exact_draws,
    small_log_posteriors,
    tempered_weights,
)
from ._records_scratch import records_init, records_log_posterior
from ._records_sparse import build_sparse, sparse_log_posterior, sparse_moves, sparse_work
from ._records_split_merge import SPLIT_STRONG, STRONG_LOG_ODDS, split_merge, strong_pairs
from ._records_sweep import build_cache, records_sweep

__all__ = ["SHARD_WORK", "RecordsState", "labels_log_posterior", "log_posterior",
           "records_chain", "records_continue", "records_labels", "shards", "start_state"]

#: Work of a shard at least, as ``Σ m²`` over its components of ``m`` records (what a sweep
#: costs): enough for a shard's compiled call to outweigh its dispatch, few enough shards
#: for the threads to share the work evenly.
SHARD_WORK = 1 << 16


class RecordsState(NamedTuple):
    """Where a records chain stopped: its partition and cluster statistics
    (:class:`~._records_cache.ClusterCache`), the random stream of each shard, the shards'
    first components (and the end), the split-merge attempts per component, the pairs whose
    splits are proposed less often (:func:`~._records_split_merge.strong_pairs`), the moves'
    scratch clusters, and the small components' partitions' log posteriors
    (:func:`~._records_exact.small_log_posteriors`) with room for their tempered weights
    (:func:`~._records_exact.tempered_weights`)."""

    cache: object
    streams: list
    cuts: np.ndarray
    attempts: np.ndarray
    strong: np.ndarray
    scratch: object
    small: tuple

    @property
    def z(self):
        """Local labels of the records (permuted order)."""
        return self.cache.z


def records_labels(model, z):
    """Cluster labels ``0..k-1`` of the records in their original order (first appearance)."""
    out = np.empty(model.n, dtype=np.int64)
    _first_appearance(model.perm, all_starts(model), z, out, np.empty(model.n, dtype=np.int64),
                      np.empty(model.n, dtype=np.int64))
    return out


def all_starts(model):
    """The starts of every component, dense then sparse (and the end)."""
    return np.r_[model.cstart, model.scstart[1:]]


@njit
def _first_appearance(perm, cstart, z, out, flat, rank):
    # One pass each way instead of sorting: the labels are recorded with every draw.
    # ``flat`` and ``rank`` are scratch of n entries.
    n = perm.size
    for c in range(cstart.size - 1):
        for p in range(cstart[c], cstart[c + 1]):
            flat[perm[p]] = cstart[c] + z[p]
    rank[:] = -1
    count = 0
    for i in range(n):
        g = flat[i]
        if rank[g] < 0:
            rank[g] = count
            count += 1
        out[i] = rank[g]


@njit
def _record_draw(z, h, size, log_gamma, log_alpha, out):
    """The chain's local labels ``z`` copied into ``out``, where :func:`_label_rows` turns
    them into labels once the draws are done; returns the partition's log posterior
    (:func:`log_posterior`) and its number of clusters. The arrays it reads alone, not the
    model and the statistics whole (numba unboxes every array of an argument at each call):
    a draw's serial part, the threads idle meanwhile, is a copy and a pass over the
    clusters."""
    for p in range(z.size):
        out[p] = z[p]
    return posterior_and_clusters(h, size, log_gamma, log_alpha)


@njit
def _label_rows(perm, starts, rows, first, stop):
    """Rows ``first`` to ``stop - 1`` of ``rows`` (local labels of the records in permuted
    order, as :func:`_record_draw` wrote them) turned in place into the labels of
    :func:`records_labels`."""
    n = perm.size
    z = np.empty(n, dtype=np.int64)
    flat = np.empty(n, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    for k in range(first, stop):
        row = rows[k]
        for p in range(n):
            z[p] = row[p]
        _first_appearance(perm, starts, z, row, flat, rank)


#: Split-merge attempts after each Gibbs sweep, per cluster of a component's initial
#: partition: single-record updates cannot move a whole group of records, which an entity
#: split in two needs. Per cluster rather than per record: a split proposal costs
#: ``O(|C|²)`` and a component that is one large entity needs few of them.
SPLIT_MERGE_ATTEMPTS = 0.5


def shards(cstart, work=None):
    """Cut points ``b`` of the components into shards: shard ``s`` holds the components
    ``b[s]`` to ``b[s + 1] - 1``, consecutive ones until their ``Σ m²`` reaches ``work``
    (:data:`SHARD_WORK` when None)."""
    return _cut(cstart, SHARD_WORK if work is None else int(work))


@njit
def _cut(cstart, work):
    n_comp = cstart.size - 1
    cuts = np.zeros(n_comp + 1, dtype=np.int64)
    count = 1
    acc = 0
    for c in range(n_comp):
        m = cstart[c + 1] - cstart[c]
        acc += m * m
        if acc >= work or c == n_comp - 1:
            cuts[count] = c + 1
            count += 1
            acc = 0
    return cuts[:count]


def _run(model, state, inv_t, which, split_strong=SPLIT_STRONG):
    """The shards ``which`` (:func:`_shard`), each with its stream, the splits of strong pairs
    proposed with probability ``split_strong``; past the dense components' shards, one of the
    sparse components (:func:`~._records_sparse.sparse_moves`)."""
    n_eval = n_moves = 0
    offset, logp, weights, kept = state.small
    n_dense = state.cuts.size - 1
    for s in which:
        if s >= n_dense:
            ev, mv = sparse_moves(model, state.cache, inv_t, state.streams[s])
        else:
            ev, mv = _shard(model, state.cache, state.scratch, inv_t, state.streams[s],
                            state.attempts, state.strong, split_strong, offset, logp,
                            weights, kept, state.cuts[s], state.cuts[s + 1])
        n_eval += ev
        n_moves += mv
    return n_eval, n_moves


@njit
def _shard(md, cache, scratch, inv_t, rng, attempts, strong, split_strong, offset, logp,
           weights, kept, first, stop):
    """The exact draws of the small components of ``first`` to ``stop - 1``, then the sweep
    and the split-merge moves of the others (one compiled call per shard: the model and the
    statistics are unboxed once)."""
    exact_draws(md, cache, inv_t, rng, offset, logp, TABLE, first, stop, weights, kept)
    n_eval, n_moves = records_sweep(md, cache, inv_t, rng, first, stop, EXACT_UP_TO)
    more, _ = split_merge(md, cache, scratch, inv_t, attempts, strong, split_strong, rng,
                          first, stop, EXACT_UP_TO)
    return n_eval + more, n_moves


class _Threads:
    """Runs a chain's sweeps on ``n_threads`` threads (a context manager: leaving it lets the
    threads go; sequentially with one thread). Each sweep deals the shards longest first,
    each to the first thread that is free, their lengths those they took in the sweep before
    (their work at first): a shard's cost drifts from its ``Σ m²`` and from sweep to sweep
    (its moves, the annealing's temperature), which a deal fixed once left to one thread
    while the other waited."""

    def __init__(self, model, state, n_threads):
        n_shards = len(state.streams)
        self.n_threads = max(1, min(int(n_threads), n_shards))
        sizes = np.diff(model.cstart).astype(np.int64)
        total = np.r_[0, np.cumsum(sizes * sizes)]
        self.seconds = np.r_[total[state.cuts[1:]] - total[state.cuts[:-1]],
                             sparse_work(model)].astype(np.float64)
        # The calling thread takes shards as well; the others wait for them for the whole
        # chain (joblib's Parallel took about 10 ms a call to hand out a sweep's batches and
        # collect them, as long as the sweep itself at 50 000 records).
        self.pool = (ThreadPoolExecutor(self.n_threads - 1) if self.n_threads > 1
                     else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        let_go(self.pool)

    def _take(self, model, state, inv_t, split_strong, queue):
        """Run the shards of ``queue`` until it is empty; ``(n_evaluations, n_moves)``."""
        n_eval = n_moves = 0
        while True:
            try:
                s = queue.get_nowait()
            except Empty:
                return n_eval, n_moves
            start = time.perf_counter()
            ev, mv = _run(model, state, inv_t, (s,), split_strong)
            self.seconds[s] = time.perf_counter() - start
            n_eval += ev
            n_moves += mv

    def sweep(self, model, state, inv_t, split_strong=SPLIT_STRONG):
        # The shards draw from their own streams: the order and the threads that run them
        # leave the draws as they are.
        queue = SimpleQueue()
        for s in np.argsort(-self.seconds, kind="stable"):
            queue.put(int(s))
        others = ([self.pool.submit(self._take, model, state, inv_t, split_strong, queue)
                   for _ in range(self.n_threads - 1)] if self.pool is not None else [])
        try:
            done = [self._take(model, state, inv_t, split_strong, queue)]
        except BaseException:
            while not queue.empty():  # the other threads stop after their present shard
                queue.get_nowait()
            raise
        finally:
            # Whatever happened here (Ctrl-C included), the other threads end before the
            # state is read again, within a shard's time: the chain's state stays whole.
            wait(others)
        done += [future.result() for future in others]
        return sum(d[0] for d in done), sum(d[1] for d in done)

    def label(self, model, rows):
        """The draws ``rows`` recorded by :func:`_record_draw` turned into labels
        (:func:`_label_rows`), a block of rows per thread, once the chain has drawn them all:
        at 50 000 records the first-appearance labels were two thirds of a draw's work
        between two sweeps, while the other threads waited."""
        starts = all_starts(model)
        cuts = np.linspace(0, rows.shape[0], self.n_threads + 1).astype(np.int64)
        others = [self.pool.submit(_label_rows, model.perm, starts, rows, cuts[t],
                                   cuts[t + 1]) for t in range(1, self.n_threads)]
        try:
            _label_rows(model.perm, starts, rows, cuts[0], cuts[1])
        finally:
            wait(others)
        for future in others:
            future.result()


def log_posterior(model, state):
    """The log posterior (up to a constant) of the chain's partition, from its cached
    cluster statistics."""
    return cached_log_posterior(model, state.cache)


def _n_clusters(state):
    return int(np.count_nonzero(state.cache.size))


def start_state(model, z, rng, n_threads=1):
    """The :class:`RecordsState` of the local labels ``z`` (copied), the shards' streams
    spawned from ``rng``; with ``n_threads`` > 1 the strong pairs
    (:func:`~._records_split_merge.strong_pairs`, a function of the model alone) are found on
    another thread meanwhile."""
    pool = ThreadPoolExecutor(1) if n_threads > 1 else None
    try:
        strong = pool.submit(strong_pairs, model, STRONG_LOG_ODDS) if pool is not None else None
        cache = empty_cache(model.n_comparisons, model.cstart, np.array(z, dtype=np.int64),
                            sparse_memo=model.sp_nbr.size + model.n,
                            n_blocks=model.move_slots.size)
        build_cache(model, cache)
        if not build_sparse(model, cache):
            raise ValueError("z: the pair graph does not connect a cluster of a sparse "
                             "component")
        # Clusters of the initial partition per dense component (its labels are 0..k-1
        # there).
        dense = model.init[:model.cstart[-1]]
        initial = (np.maximum.reduceat(dense, model.cstart[:-1]) + 1 if model.cstart.size > 1
                   else np.zeros(0, dtype=np.int64))
        scratch = empty_cache(model.n_comparisons, model.cstart, np.zeros_like(cache.z),
                              memo=False, n_blocks=model.move_slots.size)
        small = small_log_posteriors(model)
        small = (*small, *tempered_weights(*small))
        strong = (strong.result() if strong is not None
                  else strong_pairs(model, STRONG_LOG_ODDS))
    finally:
        let_go(pool)
    cuts = shards(model.cstart)
    n_streams = cuts.size - 1 + (model.scstart.size > 1)
    return RecordsState(cache, rng.spawn(n_streams), cuts, SPLIT_MERGE_ATTEMPTS * initial,
                        strong, scratch, small)


def _draws(model, state, threads, n_warmup, n_draws, progress):
    scalars = np.zeros((n_draws, 2))
    partitions = np.empty((n_draws, model.n), dtype=np.int32)
    stats = {"n_evaluations": np.zeros(n_draws, dtype=np.int64),
             "n_moves": np.zeros(n_draws, dtype=np.int64)}
    evaluations = 0
    cache = state.cache
    for s in range(n_warmup + n_draws):
        n_eval, n_moves = threads.sweep(model, state, 1.0)
        evaluations += n_eval
        k = s - n_warmup
        if k >= 0:
            scalars[k] = _record_draw(cache.z, cache.h, cache.size, model.counts[1],
                                      model.log_alpha, partitions[k])
            stats["n_evaluations"][k] = n_eval
            stats["n_moves"][k] = n_moves
        if stop_asked(progress, 1):
            scalars, partitions, stats = finished_draws(s + 1 - n_warmup, scalars,
                                                        partitions, stats)
            break
    threads.label(model, partitions)
    return scalars, partitions, stats, evaluations


def records_chain(model, settings, n_threads, n_draws, n_warmup, rng, progress=None):
    """One chain: annealing from the initial partition, ``n_warmup`` sweeps at ``T = 1``,
    ``n_draws`` draws (a :class:`~sksubsample._base.ChainResult` as the CRF's chains give),
    its shards run on ``n_threads`` threads (the draws do not depend on it)."""
    state = start_state(model, model.init, rng, n_threads)
    with _Threads(model, state, n_threads) as threads:
        return _anneal_and_draw(model, settings, state, threads, n_draws, n_warmup, progress)


def _anneal_and_draw(model, settings, state, threads, n_draws, n_warmup, progress):
    n_sweeps = settings.temperatures.size
    counts = np.zeros((3, n_sweeps), dtype=np.int64)
    times = np.zeros(n_sweeps)
    labels = np.empty((n_sweeps, model.n), dtype=np.int64) if settings.track_labels else None
    trace = np.zeros(n_sweeps) if settings.track_log_potential else None
    for s, temperature in enumerate(settings.temperatures):
        start = time.perf_counter()
        # Every split proposed while annealing, strong pairs' too: the annealing searches for
        # the MAP partition rather than drawing, and its partition (``labels_``) is then the
        # same bits as with every split proposed throughout (with the rarer splits there,
        # B³ F1 on generated person records came out lower by 0.0008 on three seeds).
        n_eval, n_moves = threads.sweep(model, state, 1.0 / float(temperature), 1.0)
        times[s] = time.perf_counter() - start
        counts[:, s] = n_eval, _n_clusters(state), n_moves
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
    scalars, partitions, stats, evaluations = _draws(model, state, threads, n_warmup,
                                                     n_draws, progress)
    return ChainResult(scalars, stats, int(counts[0].sum()) + evaluations, np.nan,
                       continuable(state, n_draws, scalars),
                       CorefExtras(partitions, annealing, 0, 0))


def records_continue(model, settings, n_threads, n_draws, state, progress=None):
    """``n_draws`` more draws of the chain that stopped in ``state`` (no warm-up), on
    ``n_threads`` threads."""
    state = state._replace(cache=type(state.cache)(*(a.copy(order="K") for a in state.cache)))
    with _Threads(model, state, n_threads) as threads:
        scalars, partitions, stats, evaluations = _draws(model, state, threads, 0, n_draws,
                                                         progress)
    return ChainResult(scalars, stats, evaluations, np.nan, state,
                       CorefExtras(partitions, None, 0, 0))


def labels_log_posterior(model, labels):
    """The model's log posterior (up to a constant) of the partition ``labels`` of the records
    in their original order; ``-inf`` when a cluster spans two components."""
    ordered = labels[model.perm]
    starts = all_starts(model)
    comp = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    by_label = np.argsort(ordered, kind="stable")
    if np.any((ordered[by_label][1:] == ordered[by_label][:-1])
              & (comp[by_label][1:] != comp[by_label][:-1])):
        return -np.inf  # outside the model's support
    # Local labels: each component's clusters numbered from 0.
    o = np.lexsort((ordered, comp))
    new = np.r_[True, (ordered[o][1:] != ordered[o][:-1]) | (comp[o][1:] != comp[o][:-1])]
    group = np.cumsum(new) - 1
    first = np.empty(starts.size - 1, dtype=np.int64)
    first[comp[o][::-1]] = group[::-1]
    z = np.empty(model.n, dtype=np.int64)
    z[o] = group - first[comp[o]]
    F = model.n_comparisons
    R = np.zeros((F, model.n))
    N = np.zeros((F, model.n), dtype=np.int64)
    records_init(model.adj, model.exm, model.nonnull, model.cstart, model.boff, F, z, R, N)
    dense = records_log_posterior(model.bexp, model.exm, model.nonnull, model.half_log_m,
                                  model.log_alpha, model.cstart, model.boff, F, model.group,
                                  model.move_rate, z, R, N, model.counts[0])
    return float(dense + sparse_log_posterior(model, z))
