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
from ._size_classes import (
    class_count,
    class_draw,
    class_grow,
    class_shrink,
    rest_draw_exact,
    rest_weight_exact,
    size_classes,
)

__all__ = ["softmax_draw", "softmax_weights", "sweep_dense", "sweep_sparse", "weights_draw"]


@njit
def softmax_draw(logits, m, u):
    """Index drawn from ``softmax(logits[:m])`` by inversion of the uniform ``u``, and
    ``logsumexp(logits[:m])``. ``logits`` is overwritten by the unnormalised weights. Returns
    index -1 when a logit is NaN or ``+inf`` (a factor was), which the sweeps report as a bad
    value."""
    top, total = softmax_weights(logits, m)
    if not (0.0 < total < math.inf):  # NaN propagates into the total
        return -1, math.nan
    return weights_draw(logits, m, total, u), top + math.log(total)


@njit(inline="always")
def softmax_weights(logits, m):
    """``logits[:m]`` overwritten by their unnormalised softmax weights ``exp(l - max l)``;
    returns ``(max l, Σ weights)``."""
    top = -math.inf
    for a in range(m):
        top = max(top, logits[a])
    total = 0.0
    for a in range(m):
        w = math.exp(logits[a] - top)
        logits[a] = w
        total += w
    return top, total


@njit(inline="always")
def weights_draw(weights, m, total, u):
    """The index that the uniform ``u`` draws by inversion from the weights ``weights[:m]``
    of sum ``total`` (finite and positive), as :func:`softmax_draw` draws it."""
    target = u * total
    acc = 0.0
    last = 0
    for a in range(m):
        if weights[a] > 0.0:
            last = a
            acc += weights[a]
            if target < acc:
                return a
    return last  # rounding: u * total reached the last partial sum


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

    Returns ``(n_evaluations, n_moves, n_races, n_guarded, ok, pool)``; ``ok`` false when a
    factor is NaN or ``+inf``.
    """
    rules = racing_rules(racer)
    n = s.labels.size
    is_raced = np.zeros(n, dtype=np.bool_)
    scores = np.zeros(n)
    logits = np.empty(n + 1)
    group = np.empty(n + 1, dtype=np.int64)
    raced = np.empty(n + 1, dtype=np.int64)
    n_evaluations = 0
    n_moves = 0
    n_races = 0
    n_guarded = 0
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
                return n_evaluations, n_moves, n_races, n_guarded, False, pool
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
                is_raced[raced[a]] = True
            linear = rules.linear_fraction * (n - 1) < grouped
            if linear:
                for a in range(n_active):
                    scores[s.active[a]] = 0.0
                for a in range(1, n_raced):
                    scores[raced[a]] = math.nan  # marks a raced cluster: skipped
                n_evaluations += add_row_scores(pot, i, s.labels, scores)
            m = 0
            for a in range(n_active):
                k = s.active[a]
                if not is_raced[k]:
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
                return n_evaluations, n_moves, n_races, n_guarded, False, pool
            sizes = np.zeros(n_raced, dtype=np.int64)
            log_prior = np.zeros(n_raced)
            log_prior[0] = lse
            for a in range(1, n_raced):
                sizes[a] = s.size[raced[a]]
                is_raced[raced[a]] = False
            rewards = cluster_rewards(pot, i, pool, s.start, raced[:n_raced])
            best, used, ok, guarded = race_update(racer, rewards, sizes, log_prior, inv_t, rng)
            if not ok:
                return n_evaluations, n_moves, n_races, n_guarded, False, pool
            n_evaluations += used
            n_races += 1
            n_guarded += guarded > 0
            if best > 0:
                k = raced[best]
            elif group[inside] >= 0:
                k = group[inside]
            else:
                k = part_new_slot(s.free, s.meta)
        pool = _add(i, k, s, pool)
        n_moves += k != old
    return n_evaluations, n_moves, n_races, n_guarded, True, pool


# Group entries that are not one cluster: the new cluster, and the clusters ``i`` has no stored
# potential with (drawn from the size classes when the entry wins).
_NEW, _REST = -1, -2


@njit
def _draw_rest(classes, size, stored_count, old, n_left_out, exact, weight, rng):
    """A cluster that ``i`` (in slot ``old``) has no stored potential with, drawn with
    probability ``∝ exp(-repulsion |C_k| / T)`` among them.

    By default a size is drawn from the classes (all clusters, ``∝ c_s w_s``) and a slot of
    that size uniformly, again until the slot is none of those scored one by one
    (``stored_count > 0`` or ``old``): rejection sampling, whose acceptance is at least 1/2
    because the caller takes this path only when the scored clusters hold at most half of the
    classes' weight. Otherwise (``exact``) the size is drawn from the class sums of the other
    clusters, ``(c_s - t_s) w_s`` (``weight`` in all, ``n_left_out[s] = t_s``), and a slot of
    that size uniformly among its unscored ones (by rejection within the class)."""
    while True:
        if exact:
            s = rest_draw_exact(classes, size, n_left_out, rng.random() * weight)
        else:
            s = class_draw(classes, rng.random())
        if s < 1 or s >= size.size + 1:
            continue  # rounding sent the draw past the last class
        count = class_count(classes, s)
        if count == 0 or (exact and count == n_left_out[s]):
            continue
        while True:
            k = classes.by_size[classes.first[s] + rng.integers(0, count)]
            if stored_count[k] == 0 and k != old:
                return k
            if not exact:
                break  # reject the draw of the size as well


@njit
def sweep_sparse(indptr, indices, data, repulsion, order, inv_t, racing, racer, rng, s, pool):
    """Gibbs updates of the mentions ``order`` with a CSR matrix of stored potentials (the
    diagonal removed), unstored pairs at ``-repulsion``, in time proportional to the stored
    potentials of the mention updated (plus ``O(log n)``).

    Mention ``i`` stays in its slot while its update is drawn (its cluster is scored without
    it), and moves only when it changes cluster. The clusters it has stored potentials with
    (and its own) are scored one by one; every other cluster, of log-probability
    ``-repulsion |C_k| / T``, enters through the :class:`~._size_classes.SizeClasses` of the
    partition: one entry of weight ``Σ_s (c_s - t_s) exp(-repulsion s / T)`` (the classes'
    total less the scored clusters' weights, or summed class by class when those hold more than
    half of it, so that the difference never loses more than a bit), and, when it wins, a
    cluster drawn from the classes (:func:`_draw_rest`). The new cluster has log-probability 0.

    Returns ``(n_evaluations, n_moves, n_races, n_guarded, ok, pool)``.
    """
    rules = racing_rules(racer)
    n = s.labels.size
    classes = size_classes(s.size, repulsion, inv_t)
    n_left_out = np.zeros(n + 2, dtype=np.int64)
    stored_sum = np.zeros(n)
    stored_count = np.zeros(n, dtype=np.int64)
    scored = np.empty(n + 1, dtype=np.int64)
    logits = np.empty(n + 3)
    raced = np.empty(n + 1, dtype=np.int64)
    arm_of = np.full(n, -1, dtype=np.int64)
    bucket = np.empty(max(indices.size, 1), dtype=np.int64)
    bstart = np.empty(n + 2, dtype=np.int64)
    group = np.empty(n + 3, dtype=np.int64)
    arms = np.arange(n + 1)
    stored = StoredPotentials(data)
    log_unit = -repulsion * inv_t  # the log-probability of w_1: a singleton i has no pair with
    n_evaluations = 0
    n_moves = 0
    n_races = 0
    n_guarded = 0
    for i in order:
        old = s.labels[i]
        lo, hi = indptr[i], indptr[i + 1]
        n_scored = 0
        for p in range(lo, hi):
            k = s.labels[indices[p]]
            if stored_count[k] == 0:
                scored[n_scored] = k
                n_scored += 1
            stored_count[k] += 1
        if stored_count[old] == 0:  # i's own cluster is scored without i, never aggregated
            scored[n_scored] = old
            n_scored += 1
        n_raced = 0
        if racing:
            n_raced = raced_clusters(rules, scored, n_scored, stored_count, raced)
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
        m = 0
        near = 0.0  # the classes' weight of the scored clusters
        for t in range(n_scored):
            k = scored[t]
            near += classes.weight[s.size[k]]
            n_left_out[s.size[k]] += 1
            members = s.size[k] - (k == old)
            if members == 0 or (n_raced > 0 and arm_of[k] > 0):
                continue  # i's singleton (the new cluster stands for it) or a raced cluster
            logits[m] = (stored_sum[k] - repulsion * (members - stored_count[k])) * inv_t
            group[m] = k
            m += 1
        exact_rest = False
        rest = 0.0
        if s.meta[N_ACTIVE] > n_scored:  # every scored cluster is active (i is in old)
            exact_rest = near > 0.5 * classes.total[0]
            if exact_rest:
                rest = rest_weight_exact(classes, s.size, n_left_out)
            else:
                rest = classes.total[0] - near
            if rest > 0.0:
                logits[m] = log_unit + math.log(rest)
                group[m] = _REST
                m += 1
        logits[m] = 0.0  # the new cluster
        group[m] = _NEW
        m += 1
        inside, lse = softmax_draw(logits, m, rng.random())
        if inside < 0:
            return n_evaluations, n_moves, n_races, n_guarded, False, pool
        k = group[inside]
        if n_raced > 0:
            sizes = np.zeros(n_raced, dtype=np.int64)
            log_prior = np.zeros(n_raced)
            log_prior[0] = lse
            for a in range(1, n_raced):
                r = raced[a]
                sizes[a] = stored_count[r]
                members = s.size[r] - (r == old)
                log_prior[a] = -repulsion * (members - stored_count[r]) * inv_t
                arm_of[r] = -1
            rewards = cluster_rewards(stored, i, bucket, bstart, arms[:n_raced])
            best, used, ok, guarded = race_update(racer, rewards, sizes, log_prior, inv_t, rng)
            if not ok:
                return n_evaluations, n_moves, n_races, n_guarded, False, pool
            n_evaluations += used
            n_races += 1
            n_guarded += guarded > 0
            if best > 0:
                k = raced[best]
        if k == _REST:
            k = _draw_rest(classes, s.size, stored_count, old, n_left_out, exact_rest, rest, rng)
        for t in range(n_scored):
            stored_sum[scored[t]] = 0.0
            stored_count[scored[t]] = 0
            n_left_out[s.size[scored[t]]] = 0
        if k == _NEW and s.size[old] == 1:
            k = old  # a singleton's new cluster is the one it is in
        if k == old:
            continue
        class_shrink(classes, old, s.size[old])
        _remove(i, s, pool)
        if k == _NEW:
            k = part_new_slot(s.free, s.meta)
        class_grow(classes, k, s.size[k])
        pool = _add(i, k, s, pool)
        n_moves += 1
    return n_evaluations, n_moves, n_races, n_guarded, True, pool
