"""Split-merge moves of the records model (:mod:`._records`): groups of records change cluster.

Single-record Gibbs updates (:mod:`._records_sweep`) cannot move a whole group of records,
which an entity split in two needs. These Metropolis-Hastings moves by sequential allocation
(Dahl 2003, in the manner of Jain & Neal 2004) propose to split a cluster or to merge two,
building the partial clusters with incremental statistics (:mod:`._records_cache`) and
scoring them as the Gibbs sweeps do (:mod:`._records_score`). A merge's cohesion depends on
the two clusters alone: it is kept with their versions (:class:`~._records_cache.ClusterCache`)
and built again only once either has changed, so that the proposals to merge the same two
clusters again, most of them rejected, cost a look-up (the same bits, the same draws).

A split whose two anchors the model links with near certainty on their own evidence
(:func:`strong_pairs`) is almost always rejected, and its restricted scan costs ``O(|C|²)``:
while drawing it is proposed only with probability :data:`SPLIT_STRONG`, the merge across
such a pair always, and the Metropolis-Hastings ratios carry that probability
(:func:`split_merge`; the annealing proposes every split, see :mod:`._records_chain`).
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit, permutation_into
from ._borrowing import njit_borrowing
from ._prefetch import prefetch_rows
from ._records_cache import (
    add_member,
    clear_slot,
    component,
    copy_slot,
    empty_cache,
    link,
    refresh,
    unlink,
)
from ._records_score import score_with
from ._records_scratch import cohesion, largest, root_sums

__all__ = ["SPLIT_STRONG", "STRONG_LOG_ODDS", "records_split_merge", "split_merge",
           "strong_pairs"]

#: Pairs of records that the model links as an isolated pair with log-odds (``log Λ({i, j})
#: - log α``) at least this: a link probability above 0.99995 on their own evidence. From 5
#: up, the draws' link probabilities varied more between seeds on generated person records
#: (the merges across such pairs slowed), and their calibration error rose.
STRONG_LOG_ODDS = 10.0

#: Records of a proposal's allocation whose rows are asked of memory ahead of their turn: an
#: allocation takes about as long as a row takes to arrive, so two keep them in time.
PREFETCH_AHEAD = 2

#: The probability of proposing a split anchored at such a pair. A split whose
#: Metropolis-Hastings ratio is below it is accepted as often per attempt as if every split
#: were proposed (the ratio divided by it), and the merge back as often unless its ratio
#: times this probability is below 1.
SPLIT_STRONG = 0.05


@njit
def strong_pairs(md, strong):
    """``1`` for each ordered pair ``(i, j)``, ``i ≠ j``, of a component's records that the
    model links as an isolated pair with log-odds ``>= strong``, at ``woff[c] + i m + j``
    (the offsets of :class:`~._records_cache.ClusterCache`); a function of the model
    alone."""
    cstart, boff, F = md.cstart, md.boff, md.n_comparisons
    sizes = cstart[1:] - cstart[:-1]
    total = 0
    for c in range(sizes.size):
        total += sizes[c] * sizes[c]
    out = np.zeros(total, dtype=np.uint8)
    R = np.zeros((F, md.n))
    N = np.zeros((F, md.n), dtype=np.int64)
    pair = np.empty(2, dtype=np.int64)
    extra = np.zeros((2, F, 2))
    at = 0
    for c in range(sizes.size):
        lo, m, base = cstart[c], sizes[c], boff[c]
        for i in range(m):
            for j in range(m):
                if j > i:
                    pair[0], pair[1] = i, j
                    root_sums(md.adj, md.exm, md.nonnull, base, m, lo, F, pair, 2, pair,
                              False, R, N)
                    odds = cohesion(md.half_log_m, md.nonnull, R, N, lo, pair, 2, F, extra,
                                    md.group, md.move_rate, md.bexp, md.exm, base,
                                    m, md.counts[0]) - md.log_alpha
                    out[at + i * m + j] = out[at + j * m + i] = odds >= strong
        at += m * m
    return out


@njit_borrowing
def _gather(cache, lo, g, skip_a, skip_b, out, side, at, label):
    """Append the members of slot ``g`` other than ``skip_a``, ``skip_b`` to ``out`` from
    ``at`` (``side`` set to ``label``); returns the new count."""
    cache_head, cache_nxt = cache.head, cache.nxt
    k = cache_head[g]
    while k >= 0:
        if k != skip_a and k != skip_b:
            out[at] = k
            side[at] = label
            at += 1
        k = cache_nxt[lo + k]
    return at


@njit
def _by_index(rest, side, count):
    """Sort ``rest[:count]`` (and ``side`` with it) by record index: the allocation order is
    then a function of the drawn permutation alone, whatever the order of the member
    lists."""
    for a in range(1, count):
        r, s = rest[a], side[a]
        b = a - 1
        while b >= 0 and rest[b] > r:
            rest[b + 1], side[b + 1] = rest[b], side[b]
            b -= 1
        rest[b + 1], side[b + 1] = r, s


def records_split_merge(md, cache, inv_t, attempts, rng, scratch=None, first=0, stop=-1,
                        skip_up_to=2, strong=None, split_strong=SPLIT_STRONG):
    """Split-merge Metropolis-Hastings moves by sequential allocation (Dahl 2003, in the
    manner of Jain & Neal 2004) in each component of 3 records or more: ``attempts`` per
    record (a float), or per component (an array: its expected number, the integer part and
    one more with the probability of the fraction, a count drawn whatever the state). Two
    records ``i, j`` of a component are drawn; if they share a cluster, it is split by
    allocating its other records in random order to ``i``'s or ``j``'s part with the
    tempered Gibbs probabilities of the partial parts, else their clusters are merged and the
    allocation that would split them back is scored; the move is accepted with the
    Metropolis-Hastings ratio ``(π'/π)^{1/T} q(back) / q(forth)``. When ``strong`` (a
    table of :func:`strong_pairs`; none when None) marks ``i, j``, the split is proposed only
    with probability ``split_strong``, which enters ``q(forth)`` of the split and
    ``q(back)`` of the merge. A merge is rejected before its allocation is scored when
    ``(π'/π)^{1/T}`` and that probability alone are below the uniform it is compared with
    (the rest of ``q(back)`` is at most 1: the same decision), and its allocation stops as
    soon as the ratio with the part of ``q(back)`` scored so far is (each record's factor is
    at most 1, and the allocation back draws nothing). The partial clusters are built in
    ``scratch`` (a :class:`~._records_cache.ClusterCache` of the same records; made when
    None) with incremental statistics. Only the components ``first`` to ``stop - 1`` (``-1``:
    to the last) of more than ``skip_up_to`` records are visited. Returns ``(n_evaluations,
    n_accepted)``."""
    if scratch is None:
        scratch = empty_cache(md.n_comparisons, md.cstart, np.zeros_like(cache.z), memo=False,
                              n_blocks=md.move_slots.size)
    if np.ndim(attempts) == 0:
        attempts = np.floor(attempts * np.diff(md.cstart)).astype(np.float64)
    attempts = np.asarray(attempts, dtype=np.float64)
    if strong is None:
        strong = np.zeros(int(cache.woff[-1]), dtype=np.uint8)
    return split_merge(md, cache, scratch, inv_t, attempts, strong, float(split_strong), rng,
                       first, stop, skip_up_to)


@njit_borrowing
def _build(md, sc, lo, m, base, wb, g, members, count, roots, vals):
    """Slot ``g`` of ``sc`` made the cluster ``members[:count]``; returns its log-cohesion."""
    sc_h = sc.h
    clear_slot(md, sc, g)
    for q in range(count):
        add_member(md, sc, lo, m, base, wb, g, members[q], roots, vals)
    return sc_h[g]


@njit_borrowing
def _merged(md, cache, sc, lo, m, base, wb, big, small, g, roots, vals):
    """The log-cohesion of the clusters in slots ``big`` and ``small`` of ``cache`` merged,
    built in slot ``g`` of ``sc``: the larger one's statistics, the other's records added."""
    cache_head, cache_nxt = cache.head, cache.nxt
    copy_slot(md, cache, sc, lo, m, wb, lo + big, g, roots)
    k = cache_head[lo + small]
    while k >= 0:
        add_member(md, sc, lo, m, base, wb, g, k, roots, vals)
        k = cache_nxt[lo + k]
    return sc.h[g]


@njit
def split_merge(md, cache, sc, inv_t, attempts, strong, split_strong, rng, first, stop,
                skip_up_to):
    """The moves of :func:`records_split_merge`, compiled: ``attempts`` per component (an
    array), ``sc`` the scratch clusters, ``strong`` the pairs whose splits are proposed with
    probability ``split_strong``.

    For a pair ``(i, j)`` drawn whatever the state, the move proposes a split of their
    cluster with probability ``s`` (``split_strong`` for a strong pair, else 1) and the merge
    of their clusters with probability 1; the reverse of a split is the merge of the same
    pair, so detailed balance holds with ``s`` in the split's ``q(forth)`` and the merge's
    ``q(back)`` (Jain & Neal 2004, whose ratio this is with the choice of move made part of
    the proposal)."""
    cache_h, cache_size = cache.h, cache.size
    cache_z, sc_h, F, log_alpha = cache.z, sc.h, md.n_comparisons, md.log_alpha
    merged, merged_ver, ver = cache.merged, cache.merged_ver, cache.ver
    log_strong = math.log(split_strong)
    n_eval = 0
    n_accepted = 0
    most = largest(md.cstart)
    ints = np.empty((7, most + 1), dtype=np.int64)  # the parts, the rest, roots, an order
    part_i, part_j, rest, joined, side, roots = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    order = ints[6]
    log_k, lgamma_k = md.counts[0], md.counts[1]
    vals = np.empty(most + 1)
    for c in range(first, md.cstart.size - 1 if stop < 0 else stop):
        lo, m, base, wb = component(cache, md.cstart, md.boff, c)
        if m <= skip_up_to:
            continue
        slot_i, slot_j = lo, lo + 1
        n_attempts = int(attempts[c])
        if rng.random() < attempts[c] - n_attempts:
            n_attempts += 1
        for _ in range(n_attempts):
            i = rng.integers(0, m)
            j = rng.integers(0, m - 1)
            j += j >= i
            zi, zj = cache_z[lo + i], cache_z[lo + j]
            split = zi == zj
            log_s = log_strong if strong[wb + i * m + j] else 0.0
            if split and log_s < 0.0 and rng.random() >= split_strong:
                continue  # no split proposed
            if split:
                n_rest = _gather(cache, lo, lo + zi, i, j, rest, side, 0, 0)
            else:  # gathered below once the merge passes its first test (most fail it)
                n_rest = cache_size[lo + zi] + cache_size[lo + zj] - 2
            size = n_rest + 2
            perm = permutation_into(rng, order, n_rest)
            if not split:
                log_u = math.log(rng.random())
                ni, nj = cache_size[lo + zi], cache_size[lo + zj]
                big, small = (zi, zj) if ni >= nj else (zj, zi)
                at = wb + big * m + small
                if merged_ver[0, at] != ver[lo + big] or merged_ver[1, at] != ver[lo + small]:
                    merged[at] = _merged(md, cache, sc, lo, m, base, wb, big, small,
                                         slot_i, roots, vals)
                    merged_ver[0, at], merged_ver[1, at] = ver[lo + big], ver[lo + small]
                    n_eval += ni * nj * F
                h_merged = merged[at]
                log_pi = (log_alpha + lgamma_k[size] + h_merged
                          - 2 * log_alpha - lgamma_k[ni] - lgamma_k[nj]
                          - cache_h[lo + zi] - cache_h[lo + zj])
                if log_u >= log_pi * inv_t + log_s:
                    continue
                n_rest = _gather(cache, lo, lo + zi, i, j, rest, side, 0, 0)
                n_rest = _gather(cache, lo, lo + zj, i, j, rest, side, n_rest, 1)
            _by_index(rest, side, n_rest)
            # Sequential allocation from {i} and {j}, the rows of each record to allocate
            # asked of memory two records ahead (see :mod:`._prefetch`).
            for t in range(min(n_rest, PREFETCH_AHEAD)):
                prefetch_rows(md, base, m, rest[perm[t]])
            part_i[0], part_j[0] = i, j
            ci, cj = 1, 1
            _build(md, sc, lo, m, base, wb, slot_i, part_i, 1, roots, vals)
            _build(md, sc, lo, m, base, wb, slot_j, part_j, 1, roots, vals)
            log_q = 0.0
            rejected = False
            for t in range(n_rest):
                r = rest[perm[t]]
                if t + PREFETCH_AHEAD < n_rest:
                    prefetch_rows(md, base, m, rest[perm[t + PREFETCH_AHEAD]])
                gi = (score_with(md, sc, lo, m, base, wb, slot_i, r, roots, vals)
                      - sc_h[slot_i])
                gj = (score_with(md, sc, lo, m, base, wb, slot_j, r, roots, vals)
                      - sc_h[slot_j])
                n_eval += (ci + cj) * F
                wi = (gi + log_k[ci]) * inv_t
                wj = (gj + log_k[cj]) * inv_t
                top = max(wi, wj)
                log_norm = top + math.log(math.exp(wi - top) + math.exp(wj - top))
                to_i = rng.random() < math.exp(wi - log_norm) if split else side[perm[t]] == 0
                log_q += (wi if to_i else wj) - log_norm
                if not split and log_u >= log_pi * inv_t + log_q + log_s:
                    # Each step adds a log probability (<= 0) to log_q, so the ratio below
                    # can only fall: the merge is rejected, and its allocation draws nothing.
                    rejected = True
                    break
                if to_i:
                    add_member(md, sc, lo, m, base, wb, slot_i, r, roots, vals)
                    part_i[ci] = r
                    ci += 1
                else:
                    add_member(md, sc, lo, m, base, wb, slot_j, r, roots, vals)
                    part_j[cj] = r
                    cj += 1
            if rejected:
                continue
            if split:
                log_u = math.log(rng.random())
                log_pi = (2 * log_alpha + lgamma_k[ci] + lgamma_k[cj] + sc_h[slot_i]
                          + sc_h[slot_j] - log_alpha - lgamma_k[size] - cache_h[lo + zi])
                log_ratio = log_pi * inv_t - log_q - log_s
            else:
                log_ratio = log_pi * inv_t + log_q + log_s
            if log_u < log_ratio:
                n_accepted += 1
                if split:
                    target = 0
                    while cache_size[lo + target] > 0:  # a label no record holds
                        target += 1
                    source = zi
                else:
                    target, source = zi, zj
                for q in range(cj):
                    unlink(cache, lo, lo + source, part_j[q])
                    link(cache, lo, lo + target, part_j[q])
                    cache_z[lo + part_j[q]] = target
                for q in range(ci):
                    joined[q] = part_i[q]
                for q in range(cj):
                    joined[ci + q] = part_j[q]
                # Root sums of the records of the clusters that changed.
                root_sums(md.adj, md.exm, md.nonnull, base, m, lo, F, joined, size, cache.z,
                          True, cache.R, cache.N)
                for g in (lo + source, lo + target):
                    if cache_size[g] > 0:
                        refresh(md, cache, lo, m, base, wb, g, roots)
    return n_eval, n_accepted
