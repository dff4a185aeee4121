"""Compiled Gibbs sweeps of the coreference CRF: exact and racing updates (§5.3, App. C.3).

A sweep updates every mention once, in a given order, without returning to Python: per update,
the mention leaves its cluster, the log-probabilities of the candidate clusters are computed
(exactly, or by a race for the large clusters), one is drawn and the mention joins it. Both
methods run here with the same bookkeeping, the same potentials and the same draw of the exact
part, so their wall times compare like for like.

Partition storage
-----------------
Clusters live in ``n`` slots. Slot ``k`` keeps its ``size[k]`` members contiguously in
``pool[start[k]:start[k] + size[k]]`` (capacity ``cap[k]``, doubled when full, the pool compacted
when it runs out), so that the ``j``-th member of a cluster, what a race subsamples, is one
index away. ``active[:n_active]`` lists the non-empty slots (``apos`` is the inverse) and
``free[:n_free]`` is a stack of empty slots: a mention removed from a singleton and then put
in a new cluster gets its old slot back, so "moved" means "changed cluster".

Exact update
------------
Every factor ``f(x_i, x_j)``, ``j != i``, is evaluated (dense input: one pass over the mentions;
sparse precomputed input: the stored entries of row ``i``, an unstored factor being the known
constant ``-repulsion``, summed by counting cluster members). The cluster is drawn from the
softmax of the log-probabilities ``score_k / T`` (and 0 for a new cluster) with one uniform.

Racing update
-------------
A cluster whose factor population would be read whole in the race's first round (at most
``2 m¹`` factors, by the remainder rule of the racing kernels) is evaluated exactly; so are the
new cluster and, with sparse input, the clusters without enough stored neighbours of ``i``.
These exact clusters form one arm with no factors whose log-prior is the log-sum-exp of their
log-probabilities (by the Gumbel-max property the group's perturbed maximum is a Gumbel variable
at that location, and the winner inside the group is independent of it and softmax
distributed, drawn when the group wins). The other clusters are raced with independent
subsamples (Eq. 26-27, the per-arm schedule of App. C.3): :func:`race_clusters` is
:func:`sksubsample.algorithms.sample_discrete` with per-state factor counts, the Gumbel
perturbation drawn before any factor is read, and the round laws of
:mod:`sksubsample.algorithms.bandits._kernels` (the loop of ``race_independent_compiled``), with
the potential evaluated inline. The update's error is at most ``delta`` in total variation
(Prop. 1) under the race's normal approximation (standard deviations estimated from the first
``m¹`` factors: with ``m¹ = 3`` close clusters can exceed it). A race is run only when what
it could skip (the raced clusters' factors beyond their first batches) is worth more than what
a race costs, ``race_fixed + race_per_arm · R``
factors for ``R`` raced clusters (a cost model, :data:`sksubsample.cluster._gibbs.RACE_COST`);
otherwise the update is the exact one, with the same random draws, so racing costs nothing
where it cannot save.

Sparse precomputed potentials
-----------------------------
The log-probability of cluster ``k`` is ``(Σ_{stored j ∈ C_k} f_ij - repulsion · (|C_k| -
s_k)) / T`` with ``s_k`` stored neighbours of ``i`` in ``C_k``. The unstored part is exact and
free, so a raced cluster's population is its ``s_k`` stored potentials (log-prior the constant
part): racing subsamples what an exact update reads. Factor evaluations count stored entries
read, for both methods.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms._numba import njit
from ..algorithms.bandits import _kernels as rk

__all__ = ["EUCLIDEAN", "MATRIX", "STORED", "b_table", "part_add", "part_new_slot",
           "part_remove", "race_clusters", "sweep_dense", "sweep_sparse"]

# How a race's arm reads a factor: ``pair_value``.
EUCLIDEAN, MATRIX, STORED = 0, 1, 2
# Fields of the partition's integer state ``meta``.
N_ACTIVE, N_FREE, TOP = 0, 1, 2
# Status of a sweep.
OK, BAD_VALUE = 0, 1
# A racing update reads its exact group in one pass over all mentions (instead of cluster by
# cluster) when the group holds more than this fraction of them: a pass costs about one load
# per mention plus the group's factors, a gather a likely cache miss per factor, so the pass
# pays once the group is a sizeable share of the mentions. That is the case early in an
# annealing run from singletons, once the first clusters outgrow 2 m¹ and races start while
# most mentions are still in small clusters. Set on the first sweeps of the heavy-tailed
# benchmark (``benchmarks/coref_experiments.py``), where it made those racing sweeps about as
# fast as the exact ones instead of 1.1-1.5 times slower; the law is unchanged.
LINEAR_PASS_FRACTION = 0.2


# ----------------------------------------------------------------------------- partition


@njit
def _compact(pool, start, cap, size, active, meta, extra):
    """A new pool holding the active slots' members contiguously, with room for ``extra``
    more entries; capacities become ``max(4, 2 size)``."""
    n_active = meta[N_ACTIVE]
    # Empty slots lose their blocks (their old places are reused): capacity 0.
    cap[:] = 0
    needed = extra
    for a in range(n_active):
        k = active[a]
        needed += max(4, 2 * size[k])
    new = np.empty(max(pool.size, 2 * needed), dtype=np.int64)
    top = 0
    for a in range(n_active):
        k = active[a]
        s = size[k]
        new[top:top + s] = pool[start[k]:start[k] + s]
        start[k] = top
        cap[k] = max(4, 2 * s)
        top += cap[k]
    meta[TOP] = top
    return new


@njit
def part_remove(i, labels, size, pos, start, pool, active, apos, free, meta):
    """Take mention ``i`` out of its slot (its ``labels`` entry is left stale)."""
    k = labels[i]
    last = size[k] - 1
    moved = pool[start[k] + last]
    pool[start[k] + pos[i]] = moved
    pos[moved] = pos[i]
    size[k] = last
    if last == 0:
        # The slot leaves the active list (swap with the last) and goes on the free stack.
        a = apos[k]
        tail = active[meta[N_ACTIVE] - 1]
        active[a] = tail
        apos[tail] = a
        meta[N_ACTIVE] -= 1
        free[meta[N_FREE]] = k
        meta[N_FREE] += 1


@njit
def part_new_slot(free, meta):
    """An empty slot for a new cluster (the update has removed a mention first)."""
    meta[N_FREE] -= 1
    return free[meta[N_FREE]]


@njit
def part_add(i, k, labels, size, pos, start, cap, pool, active, apos, meta):
    """Put mention ``i`` in slot ``k``; returns the pool (a new array when it had to grow)."""
    s = size[k]
    if s == 0:
        active[meta[N_ACTIVE]] = k
        apos[k] = meta[N_ACTIVE]
        meta[N_ACTIVE] += 1
    if s == cap[k]:
        grown = max(4, 2 * cap[k])
        if meta[TOP] + grown > pool.size:
            pool = _compact(pool, start, cap, size, active, meta, grown)
        if s == cap[k]:  # compaction may already have made room
            top = meta[TOP]
            pool[top:top + s] = pool[start[k]:start[k] + s]
            start[k] = top
            cap[k] = grown
            meta[TOP] = top + grown
    pool[start[k] + s] = i
    pos[i] = s
    size[k] = s + 1
    labels[i] = k
    return pool


# ----------------------------------------------------------------------------- potentials


@njit(inline="always")
def pair_value(kind, X, i, j, scale):
    """One factor: ``1 - scale ||x_i - x_j||²`` (EUCLIDEAN), ``X[i, j]`` (MATRIX), or the
    stored potential at CSR position ``j`` held in ``X[j, 0]`` (STORED)."""
    if kind == EUCLIDEAN:
        s = 0.0
        for d in range(X.shape[1]):
            t = X[i, d] - X[j, d]
            s += t * t
        return 1.0 - scale * s
    if kind == MATRIX:
        return X[i, j]
    return X[j, 0]


@njit
def _softmax_draw(logits, m, u):
    """Index drawn from ``softmax(logits[:m])`` by inversion of the uniform ``u``, and
    ``logsumexp(logits[:m])``. ``logits`` is overwritten by the unnormalised weights. Returns
    index -1 when a logit is NaN or ``+inf`` (a factor was), which the sweeps report as
    :data:`BAD_VALUE`."""
    top = -math.inf
    for a in range(m):
        top = max(top, logits[a])
    total = 0.0
    for a in range(m):
        w = math.exp(logits[a] - top)
        logits[a] = w
        total += w
    if not (0.0 < total < math.inf):  # NaN propagates into the total
        return -1, math.nan
    target = u * total
    acc = 0.0
    last = 0
    for a in range(m):
        if logits[a] > 0.0:
            last = a
            acc += logits[a]
            if target < acc:
                return a, top + math.log(total)
    return last, top + math.log(total)  # rounding: u * total reached the last partial sum


# ----------------------------------------------------------------------------- races


@njit
def _rounds_of(n, first_batch):
    """``out[N]``: the rounds of the per-arm schedule of a population of ``N`` (``N < n``)."""
    out = np.ones(max(n, 2), dtype=np.int64)
    one = np.empty(1, dtype=np.int64)
    for size in range(1, n):
        one[0] = size
        out[size] = rk.independent_rounds(one, first_batch)
    return out


def b_table(delta, n, first_batch):
    """The constants of every race a sweep over ``n`` mentions can run: ``(btable, rounds)``.

    ``rounds[N]`` is the number of rounds of the per-arm schedule (App. C.3, with the remainder
    rule) of a population of ``N`` factors, so a race's ``t*`` is the largest over its arms (as
    ``independent_rounds`` computes it). ``btable[D, t*]`` is ``B_Normal`` of Eq. 27,
    ``Φ^-1(1 - (δ / (D - 1)) / (t* - 1))``, computed as
    :func:`sksubsample.algorithms.sample_discrete` does for its independent-arms race (δ split
    over the ``D - 1`` comparisons with the winner, then over the rounds before the last), so the
    compiled update applies the same bound. Raced clusters have more than ``2 m¹`` factors, so
    a race has at most ``(n - 1) / (2 m¹ + 1) + 1`` arms.
    """
    from scipy import special

    n_arms = max(2, (n - 1) // (2 * first_batch + 1) + 1)
    rounds = _rounds_of(n, first_batch)
    n_rounds = int(rounds.max())
    arms = np.arange(n_arms + 1, dtype=np.float64)[:, None]
    ts = np.arange(n_rounds + 1, dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        table = -special.ndtri((delta / (arms - 1)) / (ts - 1))
    table[:, :2] = 0.0  # t* = 1: every mean is exact after the first round, no bound is used
    table[:2, :] = 0.0
    return np.ascontiguousarray(table), rounds


@njit
def race_clusters(kind, X, i, scale, members, mstart, arm_slot, sizes, log_prior, inv_t,
                  first_batch, btable, rounds, rng):
    """Draw an arm of ``p(a) ∝ exp(log_prior[a] + Σ_{n < sizes[a]} f_n(a) / T)`` by racing.

    The factors of arm ``a >= 1`` are ``pair_value(kind, X, i, members[mstart[arm_slot[a]] +
    n], scale)``; arm 0 has none (``sizes[0] == 0``: its probability is its log-prior). This is
    :func:`sksubsample.algorithms.sample_discrete` with ``variance="independent"``, per-state
    ``n_factors = sizes``, ``log_prior`` and ``CompiledRewards(scale=1/T)``, bound Eq. 27 from
    ``btable`` (:func:`b_table`): Gumbel perturbations first (Eq. 2), rewards ``N_a f / T +
    log_prior + G_a`` whose means are compared (App. C.3), and the loop of
    ``race_independent_compiled`` over the same round laws. Returns ``(arm, n_evaluations,
    status, offsets)``: status :data:`BAD_VALUE` when a factor is NaN or ``+inf``; ``offsets``
    the perturbed log-priors ``log_prior + G`` (for :func:`_race_error`).
    """
    n_arms = sizes.size
    offsets = log_prior - np.log(rng.standard_exponential(n_arms))
    population = np.maximum(sizes, 1)
    scale_arm = sizes.astype(np.float64) * inv_t
    n_rounds = 1
    for a in range(n_arms):
        n_rounds = max(n_rounds, rounds[population[a]])
    bconf = np.zeros(2)
    bconf[rk.B_CONST] = btable[n_arms, n_rounds]
    config = np.zeros(4, dtype=np.int64)
    config[rk.FIRST_BATCH] = first_batch
    config[rk.BOUND] = rk.NORMAL
    ints = np.zeros(rk.N_INTS, dtype=np.int64)
    ints[rk.N_ALIVE] = n_arms
    ints[rk.LEADER] = -1
    ranges = np.zeros(n_arms)
    starts = np.cumsum(population) - population
    counts = np.zeros(n_arms, dtype=np.int64)
    alive = np.arange(n_arms)
    out_round = np.zeros(n_arms, dtype=np.int64)
    stats = np.zeros((rk.N_STATS, n_arms))
    keys = np.empty(0, dtype=np.int64)
    values = np.empty(0, dtype=np.int64)
    bits = np.zeros((population.max() >> 6) + 1, dtype=np.int64)  # zero bitmap, left zero
    n_evaluations = 0
    while True:
        idx, lengths, drawing, keys, values = rk.independent_draw(
            rng, ints, config, population, starts, counts, alive, keys, values, bits)
        block = np.empty(idx.size)
        scan = False
        lo = 0
        for d in range(drawing.size):
            arm = drawing[d]
            hi = lo + lengths[d]
            if scale_arm[arm] == 0.0:
                block[lo:hi] = 0.0
            else:
                base = mstart[arm_slot[arm]]
                for q in range(lo, hi):
                    v = pair_value(kind, X, i, members[base + idx[q]], scale)
                    if v != v or v == math.inf:
                        return 0, n_evaluations, BAD_VALUE, offsets
                    scan = scan or v == -math.inf
                    block[q] = v
                n_evaluations += hi - lo
            lo = hi
        status = rk.independent_update(block, lengths, drawing, scan, ints, config, bconf,
                                       scale_arm, offsets, ranges, population, counts, alive,
                                       out_round, stats)
        if status != rk.CONTINUE:
            # Arm 0 is never evaluated and has a finite reward, so some arm always survives.
            return ints[rk.BEST], n_evaluations, OK, offsets


@njit
def _race_error(kind, X, i, scale, members, mstart, arm_slot, sizes, offsets, inv_t, best):
    """Whether a race's arm differs from the exact argmax of ``offsets + Σ f / T`` (the same
    Gumbel perturbations, every factor read): the error event of Prop. 3."""
    top = offsets[0]
    exact = 0
    for a in range(1, sizes.size):
        base = mstart[arm_slot[a]]
        s = 0.0
        for q in range(sizes[a]):
            s += pair_value(kind, X, i, members[base + q], scale)
        value = offsets[a] + s * inv_t
        if value > top:
            top = value
            exact = a
    return exact != best


# ----------------------------------------------------------------------------- sweeps


@njit(inline="always")
def _raced_clusters(slots, n_slots, population, whole, first_batch, race_fixed, race_per_arm,
                    raced):
    """The clusters a racing update races: those of ``slots[:n_slots]`` with more than
    ``whole`` factors (``population[k]``), written to ``raced[1:]`` (arm 0 is the exact
    group). Returns their number plus one, or 0 when the race would not repay itself: the
    factors it could skip, ``Σ (population - m¹)``, are worth less than ``race_fixed +
    race_per_arm · R`` factors for ``R`` raced clusters (:data:`~._gibbs.RACE_COST`)."""
    saving = 0
    n_raced = 1
    for t in range(n_slots):
        k = slots[t]
        if population[k] > whole:
            raced[n_raced] = k
            n_raced += 1
            saving += population[k] - first_batch
    if n_raced == 1 or saving < race_fixed + race_per_arm * (n_raced - 1):
        return 0
    return n_raced


@njit
def sweep_dense(kind, X, scale, order, inv_t, racing, first_batch, race_fixed, race_per_arm,
                btable, rounds, audit, rng, labels, size, pos, start, cap, pool, active, apos,
                free, meta):
    """Gibbs updates of the mentions ``order`` with features (EUCLIDEAN) or a dense matrix
    (MATRIX) of potentials. With ``audit``, every race is checked against the exact argmax
    under its Gumbel perturbations (:func:`_race_error`, not counted as evaluations).

    Returns ``(n_evaluations, n_moves, n_races, n_race_errors, status, pool)``.
    """
    n = labels.size
    whole = 2 * first_batch  # populations read whole by a race's first round
    scores = np.zeros(n)
    logits = np.empty(n + 1)
    group = np.empty(n + 1, dtype=np.int64)
    raced = np.empty(n + 1, dtype=np.int64)
    n_evaluations = 0
    n_moves = 0
    n_races = 0
    n_errors = 0
    for i in order:
        old = labels[i]
        part_remove(i, labels, size, pos, start, pool, active, apos, free, meta)
        n_active = meta[N_ACTIVE]
        n_raced = 0
        if racing:
            n_raced = _raced_clusters(active, n_active, size, whole, first_batch, race_fixed,
                                      race_per_arm, raced)
        if n_raced == 0:
            # Exact: every factor, in one pass over the mentions.
            for a in range(n_active):
                scores[active[a]] = 0.0
            for j in range(n):
                if j != i:
                    scores[labels[j]] += pair_value(kind, X, i, j, scale)
            n_evaluations += n - 1
            for a in range(n_active):
                logits[a] = scores[active[a]] * inv_t
            logits[n_active] = 0.0  # the new cluster
            choice, _ = _softmax_draw(logits, n_active + 1, rng.random())
            if choice < 0:
                return n_evaluations, n_moves, n_races, n_errors, BAD_VALUE, pool
            k = active[choice] if choice < n_active else part_new_slot(free, meta)
        else:
            # The exact group's factors: by cluster (a gather through ``pool``) when the group
            # is small, else in one pass over the mentions that skips the raced clusters, as
            # the exact update reads them: a gather costs a random memory access per factor,
            # which early in an annealing run, when most mentions sit in small clusters, makes
            # racing slower than exact.
            grouped = n - 1
            for a in range(1, n_raced):
                grouped -= size[raced[a]]
            linear = LINEAR_PASS_FRACTION * (n - 1) < grouped
            if linear:
                for a in range(n_active):
                    scores[active[a]] = 0.0
                for a in range(1, n_raced):
                    scores[raced[a]] = math.nan  # marks a raced cluster: skipped
                for j in range(n):
                    if j != i:
                        k = labels[j]
                        if scores[k] == scores[k]:
                            scores[k] += pair_value(kind, X, i, j, scale)
                n_evaluations += grouped
            m = 0
            for a in range(n_active):
                k = active[a]
                if size[k] <= whole:
                    if linear:
                        s = scores[k]
                    else:
                        s = 0.0
                        base = start[k]
                        for q in range(size[k]):
                            s += pair_value(kind, X, i, pool[base + q], scale)
                        n_evaluations += size[k]
                    logits[m] = s * inv_t
                    group[m] = k
                    m += 1
            logits[m] = 0.0
            group[m] = -1
            m += 1
            # The group's log-sum-exp is computed with its draw (a uniform drawn before the
            # race, used only if the group wins: the same law as drawing it afterwards).
            inside, lse = _softmax_draw(logits, m, rng.random())
            if inside < 0:
                return n_evaluations, n_moves, n_races, n_errors, BAD_VALUE, pool
            sizes = np.zeros(n_raced, dtype=np.int64)
            log_prior = np.zeros(n_raced)
            log_prior[0] = lse
            for a in range(1, n_raced):
                sizes[a] = size[raced[a]]
            best, used, status, offsets = race_clusters(
                kind, X, i, scale, pool, start, raced[:n_raced], sizes, log_prior, inv_t,
                first_batch, btable, rounds, rng)
            if status != OK:
                return n_evaluations, n_moves, n_races, n_errors, status, pool
            n_evaluations += used
            n_races += 1
            if audit:
                n_errors += _race_error(kind, X, i, scale, pool, start, raced[:n_raced], sizes,
                                        offsets, inv_t, best)
            if best > 0:
                k = raced[best]
            elif group[inside] >= 0:
                k = group[inside]
            else:
                k = part_new_slot(free, meta)
        pool = part_add(i, k, labels, size, pos, start, cap, pool, active, apos, meta)
        n_moves += k != old
    return n_evaluations, n_moves, n_races, n_errors, OK, pool


@njit
def sweep_sparse(indptr, indices, data, repulsion, order, inv_t, racing, first_batch,
                 race_fixed, race_per_arm, btable, rounds, audit, rng, labels, size, pos, start,
                 cap, pool, active, apos, free, meta):
    """Gibbs updates of the mentions ``order`` with a CSR matrix of stored potentials (the
    diagonal removed), unstored pairs at ``-repulsion``; ``audit`` as in :func:`sweep_dense`.

    Returns ``(n_evaluations, n_moves, n_races, n_race_errors, status, pool)``.
    """
    n = labels.size
    whole = 2 * first_batch
    stored_sum = np.zeros(n)
    stored_count = np.zeros(n, dtype=np.int64)
    touched = np.empty(n, dtype=np.int64)
    logits = np.empty(n + 1)
    raced = np.empty(n + 1, dtype=np.int64)
    arm_of = np.full(n, -1, dtype=np.int64)
    bucket = np.empty(indices.size, dtype=np.int64)
    bstart = np.empty(n + 1, dtype=np.int64)
    group = np.empty(n + 1, dtype=np.int64)
    arms = np.arange(n + 1)
    values = data.reshape((data.size, 1))
    n_evaluations = 0
    n_moves = 0
    n_races = 0
    n_errors = 0
    for i in order:
        old = labels[i]
        part_remove(i, labels, size, pos, start, pool, active, apos, free, meta)
        lo, hi = indptr[i], indptr[i + 1]
        n_touched = 0
        for p in range(lo, hi):
            k = labels[indices[p]]
            if stored_count[k] == 0:
                touched[n_touched] = k
                n_touched += 1
            stored_count[k] += 1
        n_raced = 0
        if racing:
            n_raced = _raced_clusters(touched, n_touched, stored_count, whole, first_batch,
                                      race_fixed, race_per_arm, raced)
        if n_raced > 0:
            # Buckets of the raced clusters' CSR positions, in CSR order.
            bstart[1] = 0
            for a in range(1, n_raced):
                k = raced[a]
                arm_of[k] = a
                bstart[a + 1] = bstart[a] + stored_count[k]
            fill = bstart.copy()
        for p in range(lo, hi):
            k = labels[indices[p]]
            if n_raced > 0 and arm_of[k] > 0:
                a = arm_of[k]
                bucket[fill[a]] = p
                fill[a] += 1
            else:
                stored_sum[k] += data[p]
                n_evaluations += 1
        n_active = meta[N_ACTIVE]
        m = 0
        for a in range(n_active):
            k = active[a]
            if n_raced > 0 and arm_of[k] > 0:
                continue
            logits[m] = (stored_sum[k] - repulsion * (size[k] - stored_count[k])) * inv_t
            group[m] = k
            m += 1
        logits[m] = 0.0  # the new cluster
        group[m] = -1
        m += 1
        inside, lse = _softmax_draw(logits, m, rng.random())
        if inside < 0:
            return n_evaluations, n_moves, n_races, n_errors, BAD_VALUE, pool
        k = group[inside]
        if n_raced > 0:
            sizes = np.zeros(n_raced, dtype=np.int64)
            log_prior = np.zeros(n_raced)
            log_prior[0] = lse
            for a in range(1, n_raced):
                r = raced[a]
                sizes[a] = stored_count[r]
                log_prior[a] = -repulsion * (size[r] - stored_count[r]) * inv_t
                arm_of[r] = -1
            best, used, status, offsets = race_clusters(
                STORED, values, i, 0.0, bucket, bstart, arms, sizes, log_prior, inv_t,
                first_batch, btable, rounds, rng)
            if status != OK:
                return n_evaluations, n_moves, n_races, n_errors, status, pool
            n_evaluations += used
            n_races += 1
            if audit:
                n_errors += _race_error(STORED, values, i, 0.0, bucket, bstart, arms, sizes,
                                        offsets, inv_t, best)
            if best > 0:
                k = raced[best]
        for t in range(n_touched):
            stored_sum[touched[t]] = 0.0
            stored_count[touched[t]] = 0
        if k < 0:
            k = part_new_slot(free, meta)
        pool = part_add(i, k, labels, size, pos, start, cap, pool, active, apos, meta)
        n_moves += k != old
    return n_evaluations, n_moves, n_races, n_errors, OK, pool
