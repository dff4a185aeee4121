"""Compiled Gibbs sweeps of the coreference CRF: exact and racing updates (§5.3, App. C.3).

A sweep updates every mention once, in a given order, without returning to Python: per update,
the mention leaves its cluster, the log-probabilities of the candidate clusters are computed
(exactly, or by a race for the large clusters: :mod:`._races`), one is drawn and the mention
joins it. Both methods run the same code, with the same potentials and the same draw of the
exact part, so their wall times compare like for like.

Dense potentials (:func:`sweep_dense`: features, a dense matrix or a callable) give every pair
a factor: an exact update reads ``f(x_i, x_j)`` for every ``j != i`` in one pass over the
mentions and sums them by cluster. Sparse precomputed potentials (:func:`sweep_sparse`) store
some pairs; an unstored pair has the known constant ``-repulsion``, so cluster ``k`` has
log-probability ``(Σ_{stored j ∈ C_k} f_ij - repulsion · (|C_k| - s_k)) / T`` with ``s_k``
stored neighbours of ``i`` in ``C_k``, and a raced cluster's population is its ``s_k`` stored
potentials (its log-prior the constant part): racing subsamples what an exact update reads.
Factor evaluations count the stored entries read, for both methods.

Either way the cluster is drawn from the softmax of the log-probabilities ``score_k / T`` (and
0 for a new cluster) with one uniform (:func:`softmax_draw`).
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit
from ._partition import N_ACTIVE, part_add, part_new_slot, part_remove
from ._potentials import StoredPotentials, add_row_scores, member_sum
from ._races import cluster_rewards, race_update, raced_clusters, racing_rules

__all__ = ["LINEAR_PASS_FRACTION", "softmax_draw", "sweep_dense", "sweep_sparse"]

# A racing update reads its exact group in one pass over all mentions (instead of cluster by
# cluster) when the group holds more than this fraction of them: a pass costs about one load
# per mention plus the group's factors, a gather a likely cache miss per factor, so the pass
# pays once the group is a sizeable share of the mentions. That is the case early in an
# annealing run from singletons, once the first clusters outgrow 2 m¹ and races start while
# most mentions are still in small clusters. Set on the first sweeps of the heavy-tailed
# benchmark (``benchmarks/coref_experiments.py``), where it made those racing sweeps about as
# fast as the exact ones instead of 1.1-1.5 times slower; the law is unchanged.
LINEAR_PASS_FRACTION = 0.2


@njit
def softmax_draw(logits, m, u):
    """Index drawn from ``softmax(logits[:m])`` by inversion of the uniform ``u``, and
    ``logsumexp(logits[:m])``. ``logits`` is overwritten by the unnormalised weights. Returns
    index -1 when a logit is NaN or ``+inf`` (a factor was), which the sweeps report as a bad
    value."""
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


@njit
def _remove(i, s, pool):
    part_remove(i, s.labels, s.size, s.pos, s.start, pool, s.active, s.apos, s.free, s.meta)


@njit
def _add(i, k, s, pool):
    return part_add(i, k, s.labels, s.size, s.pos, s.start, s.cap, pool, s.active, s.apos,
                    s.meta)


@njit
def sweep_dense(pot, order, inv_t, racing, racer, rng, s, pool):
    """Gibbs updates of the mentions ``order`` with dense potentials ``pot``.

    Returns ``(n_evaluations, n_moves, n_races, ok, pool)``; ``ok`` false when a factor is NaN
    or ``+inf``.
    """
    rules = racing_rules(racer)
    n = s.labels.size
    whole = 2 * rules.first_batch  # populations read whole by a race's first round
    scores = np.zeros(n)
    logits = np.empty(n + 1)
    group = np.empty(n + 1, dtype=np.int64)
    raced = np.empty(n + 1, dtype=np.int64)
    n_evaluations = 0
    n_moves = 0
    n_races = 0
    for i in order:
        old = s.labels[i]
        _remove(i, s, pool)
        n_active = s.meta[N_ACTIVE]
        n_raced = 0
        if racing:
            n_raced = raced_clusters(rules, s.active, n_active, s.size, raced)
        if n_raced == 0:
            # Exact: every factor, in one pass over the mentions.
            for a in range(n_active):
                scores[s.active[a]] = 0.0
            n_evaluations += add_row_scores(pot, i, s.labels, scores)
            for a in range(n_active):
                logits[a] = scores[s.active[a]] * inv_t
            logits[n_active] = 0.0  # the new cluster
            choice, _ = softmax_draw(logits, n_active + 1, rng.random())
            if choice < 0:
                return n_evaluations, n_moves, n_races, False, pool
            k = s.active[choice] if choice < n_active else part_new_slot(s.free, s.meta)
        else:
            # The exact group's factors: by cluster (a gather through ``pool``) when the group
            # is small, else in one pass over the mentions that skips the raced clusters, as
            # the exact update reads them: a gather costs a random memory access per factor,
            # which early in an annealing run, when most mentions sit in small clusters, makes
            # racing slower than exact.
            grouped = n - 1
            for a in range(1, n_raced):
                grouped -= s.size[raced[a]]
            linear = LINEAR_PASS_FRACTION * (n - 1) < grouped
            if linear:
                for a in range(n_active):
                    scores[s.active[a]] = 0.0
                for a in range(1, n_raced):
                    scores[raced[a]] = math.nan  # marks a raced cluster: skipped
                n_evaluations += add_row_scores(pot, i, s.labels, scores)
            m = 0
            for a in range(n_active):
                k = s.active[a]
                if s.size[k] <= whole:
                    if linear:
                        total = scores[k]
                    else:
                        total = member_sum(pot, i, pool[s.start[k]:s.start[k] + s.size[k]])
                        n_evaluations += s.size[k]
                    logits[m] = total * inv_t
                    group[m] = k
                    m += 1
            logits[m] = 0.0
            group[m] = -1
            m += 1
            # The group's log-sum-exp is computed with its draw (a uniform drawn before the
            # race, used only if the group wins: the same law as drawing it afterwards).
            inside, lse = softmax_draw(logits, m, rng.random())
            if inside < 0:
                return n_evaluations, n_moves, n_races, False, pool
            sizes = np.zeros(n_raced, dtype=np.int64)
            log_prior = np.zeros(n_raced)
            log_prior[0] = lse
            for a in range(1, n_raced):
                sizes[a] = s.size[raced[a]]
            rewards = cluster_rewards(pot, i, pool, s.start, raced[:n_raced])
            best, used, ok = race_update(racer, rewards, sizes, log_prior, inv_t, rng)
            if not ok:
                return n_evaluations, n_moves, n_races, False, pool
            n_evaluations += used
            n_races += 1
            if best > 0:
                k = raced[best]
            elif group[inside] >= 0:
                k = group[inside]
            else:
                k = part_new_slot(s.free, s.meta)
        pool = _add(i, k, s, pool)
        n_moves += k != old
    return n_evaluations, n_moves, n_races, True, pool


@njit
def sweep_sparse(indptr, indices, data, repulsion, order, inv_t, racing, racer, rng, s, pool):
    """Gibbs updates of the mentions ``order`` with a CSR matrix of stored potentials (the
    diagonal removed), unstored pairs at ``-repulsion``.

    Returns ``(n_evaluations, n_moves, n_races, ok, pool)``.
    """
    rules = racing_rules(racer)
    n = s.labels.size
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
    stored = StoredPotentials(data)
    n_evaluations = 0
    n_moves = 0
    n_races = 0
    for i in order:
        old = s.labels[i]
        _remove(i, s, pool)
        lo, hi = indptr[i], indptr[i + 1]
        n_touched = 0
        for p in range(lo, hi):
            k = s.labels[indices[p]]
            if stored_count[k] == 0:
                touched[n_touched] = k
                n_touched += 1
            stored_count[k] += 1
        n_raced = 0
        if racing:
            n_raced = raced_clusters(rules, touched, n_touched, stored_count, raced)
        if n_raced > 0:
            # Buckets of the raced clusters' CSR positions, in CSR order.
            bstart[1] = 0
            for a in range(1, n_raced):
                k = raced[a]
                arm_of[k] = a
                bstart[a + 1] = bstart[a] + stored_count[k]
            fill = bstart.copy()
        for p in range(lo, hi):
            k = s.labels[indices[p]]
            if n_raced > 0 and arm_of[k] > 0:
                a = arm_of[k]
                bucket[fill[a]] = p
                fill[a] += 1
            else:
                stored_sum[k] += data[p]
                n_evaluations += 1
        n_active = s.meta[N_ACTIVE]
        m = 0
        for a in range(n_active):
            k = s.active[a]
            if n_raced > 0 and arm_of[k] > 0:
                continue
            logits[m] = (stored_sum[k] - repulsion * (s.size[k] - stored_count[k])) * inv_t
            group[m] = k
            m += 1
        logits[m] = 0.0  # the new cluster
        group[m] = -1
        m += 1
        inside, lse = softmax_draw(logits, m, rng.random())
        if inside < 0:
            return n_evaluations, n_moves, n_races, False, pool
        k = group[inside]
        if n_raced > 0:
            sizes = np.zeros(n_raced, dtype=np.int64)
            log_prior = np.zeros(n_raced)
            log_prior[0] = lse
            for a in range(1, n_raced):
                r = raced[a]
                sizes[a] = stored_count[r]
                log_prior[a] = -repulsion * (s.size[r] - stored_count[r]) * inv_t
                arm_of[r] = -1
            rewards = cluster_rewards(stored, i, bucket, bstart, arms[:n_raced])
            best, used, ok = race_update(racer, rewards, sizes, log_prior, inv_t, rng)
            if not ok:
                return n_evaluations, n_moves, n_races, False, pool
            n_evaluations += used
            n_races += 1
            if best > 0:
                k = raced[best]
        for t in range(n_touched):
            stored_sum[touched[t]] = 0.0
            stored_count[touched[t]] = 0
        if k < 0:
            k = part_new_slot(s.free, s.meta)
        pool = _add(i, k, s, pool)
        n_moves += k != old
    return n_evaluations, n_moves, n_races, True, pool
