"""Per-cluster sufficient statistics of the records model (:mod:`._records`), kept up to date.

A Gibbs update of record ``r`` needs, for every cluster ``C`` of its component, ``log Λ(C ∪
{r}) - log Λ(C)`` (and for its own cluster ``log Λ(C) - log Λ(C \\ {r})``). Recomputing both
cohesions from the root sums costs a logarithm and an exponential per record and comparison;
here each cluster keeps its log-cohesion ``h(C)`` and, per comparison ``c``, its roots' terms
on a common scale,

    T_c(k) = exp(R_c(k) - log N_c(k) - M_c(C)),    M_c(C) = max_k (R_c(k) - log N_c(k)),

and, for each address block's move term, a flag per record marking the root of each distinct
value of the block and each pair of roots' share ``W_kl`` of the block's two-address sum;
:mod:`._records_score`
scores a cluster with a record added or removed from them, the law unchanged. The Gibbs
sweeps rebuild a cluster's statistics from its root sums (:func:`refresh`) when a record
leaves or joins it; the split-merge moves grow their partial clusters record by record
(:func:`add_member`), each member's term and each kept pair's share updated by
multiplication.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import njit
from . import _records_score as score
from ._borrowing import njit_borrowing

__all__ = [
    "ClusterCache",
    "add_member",
    "cached_log_posterior",
    "cached_posterior_and_clusters",
    "clear_slot",
    "component",
    "copy_slot",
    "empty_cache",
    "link",
    "posterior_and_clusters",
    "refresh",
    "unlink",
]

class ClusterCache(NamedTuple):
    """A records chain's partition and its clusters' statistics, permuted order.

    ``z`` are the local labels; cluster ``k`` of the component starting at ``lo`` lives in
    slot ``lo + k`` of ``size``, ``head`` (its first member, local index, or -1), ``cnt``
    (members with a value, per comparison), ``M`` (scale), ``hf`` (``log Λ_c``), per address
    block ``b`` ``nhome[b]`` (members with a value of the block) and ``two[b]`` (log of the
    two-address sum), and ``h`` (its log-cohesion); per record: ``nxt``/``prv`` (the member
    list), ``R``/``N`` (root sums and exact counts), ``T`` (scaled terms), ``isroot[b]`` (the
    root of its value of block ``b``); per pair of roots ``k, l`` of one cluster of the
    component ``c`` of ``m`` records, ``W[b, woff[c] + k m + l]``, the pair's share of block
    ``b``'s two-address sum.

    ``ver`` counts the changes of each slot (its members, their order or its statistics), so
    that a score of the slot computed at one version holds while the version does: ``memo[woff[c]
    + k m + r]`` is the score of record ``r`` against slot ``k`` (``log Λ`` of the cluster with
    ``r`` added, or removed when ``r`` is a member) at version ``memo_ver`` of the slot, the
    same bits as computing it again (see :mod:`._records_sweep`); slot-major, so that the
    scores against a component's few low labels in use lie together; ``merged[woff[c] + k m + l]``
    likewise the log-cohesion of slots ``k`` and ``l`` merged at their versions
    ``merged_ver[:, woff[c] + k m + l]`` (see :mod:`._records_split_merge`). Empty (size 0) in
    the split-merge moves' scratch clusters.
    """

    z: np.ndarray
    R: np.ndarray
    N: np.ndarray
    size: np.ndarray
    head: np.ndarray
    nxt: np.ndarray
    prv: np.ndarray
    cnt: np.ndarray
    M: np.ndarray
    T: np.ndarray
    hf: np.ndarray
    isroot: np.ndarray
    nhome: np.ndarray
    two: np.ndarray
    h: np.ndarray
    W: np.ndarray
    woff: np.ndarray
    ver: np.ndarray
    memo: np.ndarray
    memo_ver: np.ndarray
    merged: np.ndarray
    merged_ver: np.ndarray


def empty_cache(F, cstart, z, memo=True, sparse_memo=0, n_blocks=0):
    """A :class:`ClusterCache` for the components ``cstart``, ``F`` comparison slots and
    ``n_blocks`` address blocks, labels ``z``; without the memo of scores when ``memo`` is
    False; with ``sparse_memo`` more memo entries past the dense components' for the sparse
    ones (:mod:`._records_sparse`)."""
    n = int(z.size)  # every record, the sparse components' too (past cstart[-1])
    sizes = np.diff(cstart)
    woff = np.r_[0, np.cumsum(sizes * sizes)].astype(np.int64)
    n_memo = int(woff[-1]) if memo else 0
    # Root sums and exact counts record-major (``(F, n)`` views): the sparse layout's
    # clusters gather records scattered over a large component, each read for every slot.
    return ClusterCache(z, np.zeros((n, F)).T, np.zeros((n, F), dtype=np.int64).T,
                        np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64),
                        np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64),
                        np.zeros((F, n), dtype=np.int64), np.zeros((F, n)), np.zeros((F, n)),
                        np.zeros((F, n)), np.zeros((n_blocks, n), dtype=np.bool_),
                        np.zeros((n_blocks, n), dtype=np.int64),
                        np.full((n_blocks, n), -math.inf), np.zeros(n),
                        np.zeros((n_blocks, int(woff[-1]))), woff, np.zeros(n, dtype=np.int64),
                        np.zeros(n_memo + sparse_memo),
                        np.full(n_memo + sparse_memo, -1, dtype=np.int64),
                        np.zeros(n_memo), np.full((2, n_memo), -1, dtype=np.int64))


@njit_borrowing
def clear_slot(md, cache, g):
    """Make slot ``g`` an empty cluster (for the split-merge moves' partial clusters)."""
    cache_M, cache_cnt, cache_h, cache_head = cache.M, cache.cnt, cache.h, cache.head
    cache_hf, cache_nhome, cache_size, cache_two = cache.hf, cache.nhome, cache.size, cache.two
    cache_head[g] = -1
    cache_size[g] = 0
    cache.ver[g] += 1
    for b in range(md.move_slots.size):
        cache_nhome[b, g] = 0
        cache_two[b, g] = -math.inf
    cache_h[g] = 0.0
    for f in range(md.n_comparisons):
        cache_cnt[f, g] = 0
        cache_M[f, g] = -math.inf
        cache_hf[f, g] = 0.0


@njit_borrowing
def add_member(md, cache, lo, m, base, wb, g, r, roots, vals):
    """Add record ``r`` to the cluster in slot ``g``, its statistics updated in place rather
    than rebuilt: each member's scaled term gains ``r``'s factor, each kept pair of roots of
    each address block ``r``'s factor in the block's two-address sum."""
    cache_M, cache_N, cache_R, cache_T = cache.M, cache.N, cache.R, cache.T
    cache_cnt, cache_head, cache_hf = cache.cnt, cache.head, cache.hf
    cache_nxt, md_adj, md_exm, md_group = cache.nxt, md.adj, md.exm, md.group
    md_half_log_m, md_nonnull, F = md.half_log_m, md.nonnull, md.n_comparisons
    # Each block's two-address sum with r added, from the statistics before r joins; the
    # blocks' pair weights are updated once r is linked.
    for b in range(md.move_slots.size):
        fm = md.move_slots[b]
        if md_nonnull[fm, lo + r]:
            n_kept, r_root = score.roots_with(md, cache, lo, m, base, fm, b, g, r, roots)
            two = score.two_with(md, cache, lo, m, base, wb, fm, b, g, r, roots, n_kept,
                                 r_root, vals)
            _add_root(md, cache, lo, m, base, wb, fm, b, g, r, roots, vals, n_kept, r_root,
                      two)
    pr = lo + r
    # One walk of the members for every slot (r's root sums, exact counts and, in its T, the
    # sum of the members' new terms, accumulated in the members' order: the same bits as a
    # walk per slot, with the members' list and rows read once).
    for f in range(F):
        cache_R[f, pr] = 0.0
        cache_N[f, pr] = md_nonnull[f, pr]
        cache_T[f, pr] = 0.0
    k = cache_head[g]
    while k >= 0:
        p = lo + k
        for f in range(F):
            at = _at(base, f, m, r, k)
            if md_group[f] >= 0 and md_nonnull[f, pr]:
                t = score.added_term(cache_T, cache_N, md.bexp, md_exm, at, p, f)
                cache_T[f, p] = t
                cache_T[f, pr] += t
            cache_R[f, p] += md_adj[at]
            cache_N[f, p] += md_exm[at]
            cache_R[f, pr] += md_adj[at]
            cache_N[f, pr] += md_exm[at]
        k = cache_nxt[p]
    for f in range(F):
        s = cache_T[f, pr]
        cache_T[f, pr] = 0.0
        if md_group[f] >= 0 and md_nonnull[f, pr]:
            own = cache_R[f, pr] - md.counts[0, cache_N[f, pr]]
            if cache_cnt[f, g] == 0:
                cache_M[f, g] = own
            t = math.exp(own - cache_M[f, g]) if own - cache_M[f, g] < 575.0 else math.inf
            cache_T[f, pr] = t
            s += t
            cache_cnt[f, g] += 1
            if not score.TINY < s < score.HUGE:  # rescale from the root sums
                _rescale(md, cache, lo, f, g, r)
            else:
                if not 1e-10 < s < 1e10:
                    # Back to a sum near 1, so that the scores' products of sums stay in
                    # range (see comparisons).
                    _renormalise(cache, lo, f, g, r, s)
                    s = 1.0
                cache_hf[f, g] = md_half_log_m[f] + cache_M[f, g] + math.log(s)
            if cache_cnt[f, g] < 2:
                cache_hf[f, g] = 0.0
    link(cache, lo, g, r)
    for b in range(md.move_slots.size):
        if not md_nonnull[md.move_slots[b], lo + r]:
            cache.isroot[b, lo + r] = False
    cache.h[g] = _log_cohesion(md, cache, g)


@njit_borrowing
def _add_root(md, cache, lo, m, base, wb, fm, b, g, r, roots, vals, n_kept, r_root, two):
    """Block ``b``'s roots and pair weights of slot ``g`` once ``r`` (with a value of the
    block, not yet linked) joins, ``two`` the block's two-address sum with it
    (:func:`~._records_score.two_with`, which left the new pairs' logs in ``vals``)."""
    cache_W, cache_isroot, cache_two = cache.W[b], cache.isroot[b], cache.two[b]
    cache_head, cache_nxt, md_exm = cache.head, cache.nxt, md.exm
    # Demoted roots (r holds their address and lies below them) leave their pairs.
    k = cache_head[g]
    while k >= 0:
        if k != r and cache_isroot[lo + k] and r < k and md_exm[_at(base, fm, m, r, k)]:
            cache_isroot[lo + k] = False
        k = cache_nxt[lo + k]
    cache_isroot[lo + r] = r_root
    shift = cache_two[g] - two  # the shares are renormalised to the new sum
    rescale = math.exp(shift) if -700.0 < shift < 700.0 else 0.0
    for a in range(n_kept):
        k = roots[a]
        for c in range(a + 1, n_kept):
            at = wb + k * m + roots[c]
            w = cache_W[at] * score.factor(md.bexp, base, fm, m, r, k, roots[c])
            w = w * rescale if rescale > 0.0 else math.exp(math.log(w) + shift)
            cache_W[at] = w
            cache_W[wb + roots[c] * m + k] = w
        if r_root:
            w = math.exp(vals[a] - two)
            cache_W[wb + k * m + r] = w
            cache_W[wb + r * m + k] = w
    cache.nhome[b, g] += 1
    cache_two[g] = two


@njit(inline="always")
def _log_cohesion(md, cache, g):
    """``log Λ`` of slot ``g`` from its comparisons' ``log Λ_c`` and each address block's
    two-address sum: the comparisons outside every block, and each block's mixture."""
    md_group, cache_hf = md.group, cache.hf
    total = 0.0
    for f in range(md.n_comparisons):
        if md_group[f] == 0:
            total += cache_hf[f, g]
    for b in range(md.move_slots.size):
        sumb = 0.0
        for f in range(md.n_comparisons):
            if md_group[f] == b + 1:
                sumb += cache_hf[f, g]
        total += score.mix(md, b, sumb, cache.nhome[b, g], cache.two[b, g])
    return total


@njit_borrowing
def copy_slot(md, src, dst, lo, m, wb, g_src, g_dst, roots):
    """Slot ``g_dst`` of ``dst`` made a copy of the cluster in slot ``g_src`` of ``src``
    (members, their statistics and the cluster's)."""
    dst_M, dst_N, dst_R, dst_T, dst_cnt = dst.M, dst.N, dst.R, dst.T, dst.cnt
    src_M, src_N, src_R, src_T, src_cnt = src.M, src.N, src.R, src.T, src.cnt
    dst_h, dst_hf, src_h, src_head, src_hf = dst.h, dst.hf, src.h, src.head, src.hf
    src_nxt = src.nxt
    clear_slot(md, dst, g_dst)
    F = md.n_comparisons
    k = src_head[g_src]
    while k >= 0:
        p = lo + k
        link(dst, lo, g_dst, k)
        for f in range(F):
            dst_R[f, p] = src_R[f, p]
            dst_N[f, p] = src_N[f, p]
            dst_T[f, p] = src_T[f, p]
        k = src_nxt[p]
    for f in range(F):
        dst_cnt[f, g_dst] = src_cnt[f, g_src]
        dst_M[f, g_dst] = src_M[f, g_src]
        dst_hf[f, g_dst] = src_hf[f, g_src]
    dst_h[g_dst] = src_h[g_src]
    for b in range(md.move_slots.size):
        src_isroot, dst_isroot, src_W, dst_W = src.isroot[b], dst.isroot[b], src.W[b], dst.W[b]
        dst.nhome[b, g_dst] = src.nhome[b, g_src]
        dst.two[b, g_dst] = src.two[b, g_src]
        n_roots = 0
        k = src_head[g_src]
        while k >= 0:
            dst_isroot[lo + k] = src_isroot[lo + k]
            if src_isroot[lo + k]:
                roots[n_roots] = k
                n_roots += 1
            k = src_nxt[lo + k]
        for a in range(n_roots):
            for c in range(n_roots):
                at = wb + roots[a] * m + roots[c]
                dst_W[at] = src_W[at]


@njit
def _renormalise(cache, lo, f, g, r, s):
    """Divide the scaled terms of comparison ``f`` of slot ``g`` (and of ``r``, not yet
    linked) by their sum ``s``, the scale growing by ``log s``."""
    cache_M, cache_T, cache_head, cache_nxt = cache.M, cache.T, cache.head, cache.nxt
    k = r
    while k >= 0:
        cache_T[f, lo + k] /= s
        k = cache_head[g] if k == r else cache_nxt[lo + k]
    cache_M[f, g] += math.log(s)


@njit
def _rescale(md, cache, lo, f, g, r):
    """Scaled terms of comparison ``f`` of slot ``g`` (``r`` not yet linked) recomputed from
    the root sums, with their log-cohesion."""
    cache_M, cache_N, cache_R, cache_T, cache_head = cache.M, cache.N, cache.R, cache.T, cache.head
    cache_hf, cache_nxt, md_half_log_m, md_nonnull = cache.hf, cache.nxt, md.half_log_m, md.nonnull
    top = -math.inf
    k = r
    while k >= 0:
        if md_nonnull[f, lo + k]:
            top = max(top, cache_R[f, lo + k] - math.log(cache_N[f, lo + k]))
        k = cache_head[g] if k == r else cache_nxt[lo + k]
    s = 0.0
    k = r
    while k >= 0:
        t = 0.0
        if md_nonnull[f, lo + k]:
            t = math.exp(cache_R[f, lo + k] - math.log(cache_N[f, lo + k]) - top)
        cache_T[f, lo + k] = t
        s += t
        k = cache_head[g] if k == r else cache_nxt[lo + k]
    cache_M[f, g] = top
    cache_hf[f, g] = md_half_log_m[f] + top + math.log(s)


@njit(inline="always")
def component(cache, cstart, boff, c):
    """``(lo, m, base, wb)`` of component ``c``: its first position, its records, where its
    comparison blocks and its pair weights start."""
    return cstart[c], cstart[c + 1] - cstart[c], boff[c], cache.woff[c]


@njit(inline="always")
def _at(base, f, m, i, j):
    return base + (f * m + i) * m + j


@njit(inline="always")
def link(cache, lo, g, r):
    """Put record ``r`` (local index) at the head of the member list of cluster slot ``g``."""
    first = cache.head[g]
    cache.nxt[lo + r] = first
    cache.prv[lo + r] = -1
    if first >= 0:
        cache.prv[lo + first] = r
    cache.head[g] = r
    cache.size[g] += 1
    cache.ver[g] += 1


@njit(inline="always")
def unlink(cache, lo, g, r):
    """Take record ``r`` out of the member list of cluster slot ``g``."""
    before, after = cache.prv[lo + r], cache.nxt[lo + r]
    if before >= 0:
        cache.nxt[lo + before] = after
    else:
        cache.head[g] = after
    if after >= 0:
        cache.prv[lo + after] = before
    cache.size[g] -= 1
    cache.ver[g] += 1


@njit_borrowing
def refresh(md, cache, lo, m, base, wb, g, roots):
    """Rebuild the statistics of the cluster in slot ``g`` from its members' root sums."""
    cache_M, cache_R, cache_T, cache_N = cache.M, cache.R, cache.T, cache.N
    cache_cnt, cache_head, cache_hf = cache.cnt, cache.head, cache.hf
    cache_nxt, md_group, md_half_log_m = cache.nxt, md.group, md.half_log_m
    md_nonnull, F, log_k = md.nonnull, md.n_comparisons, md.counts[0]
    cache.ver[g] += 1
    for f in range(F):
        if md_group[f] < 0:
            continue
        top = -math.inf
        cnt = 0
        k = cache_head[g]
        while k >= 0:
            p = lo + k
            if md_nonnull[f, p]:
                cnt += 1
                # The member's log term, kept in T until it is scaled below.
                v = cache_R[f, p] - log_k[cache_N[f, p]]
                cache_T[f, p] = v
                top = max(top, v)
            k = cache_nxt[p]
        cache_cnt[f, g] = cnt
        cache_M[f, g] = top
        s = 0.0
        k = cache_head[g]
        while k >= 0:
            p = lo + k
            t = 0.0
            if md_nonnull[f, p]:
                t = math.exp(cache_T[f, p] - top)
            cache_T[f, p] = t
            s += t
            k = cache_nxt[p]
        cache_hf[f, g] = md_half_log_m[f] + top + math.log(s) if cnt >= 2 else 0.0
    for b in range(md.move_slots.size):
        _refresh_block(md, cache, lo, m, base, wb, md.move_slots[b], b, g, roots)
    cache.h[g] = _log_cohesion(md, cache, g)


@njit_borrowing
def _refresh_block(md, cache, lo, m, base, wb, fm, b, g, roots):
    """Rebuild address block ``b``'s roots, pair weights and two-address sum of slot ``g``."""
    cache_W, cache_isroot = cache.W[b], cache.isroot[b]
    cache_head, cache_nxt, md_exm, md_nonnull = cache.head, cache.nxt, md.exm, md.nonnull
    nhome = 0
    n_roots = 0
    k = cache_head[g]
    while k >= 0:
        p = lo + k
        root = bool(md_nonnull[fm, p])
        if root:
            nhome += 1
            q = cache_head[g]
            while q >= 0:
                if q < k and md_exm[_at(base, fm, m, q, k)]:
                    root = False
                    break
                q = cache_nxt[lo + q]
        cache_isroot[p] = root
        if root:
            roots[n_roots] = k
            n_roots += 1
        k = cache_nxt[p]
    cache.nhome[b, g] = nhome
    top = -math.inf
    acc = 0.0
    for a in range(n_roots):
        for c in range(a + 1, n_roots):
            v = score.pair_log(md, cache, lo, m, base, fm, g, roots[a], roots[c], -1)
            cache_W[wb + roots[a] * m + roots[c]] = v
            top, acc = score.lse(top, acc, v)
    two = top + math.log(acc) if acc > 0.0 else -math.inf
    for a in range(n_roots):
        for c in range(a + 1, n_roots):
            w = math.exp(cache_W[wb + roots[a] * m + roots[c]] - two)
            cache_W[wb + roots[a] * m + roots[c]] = w
            cache_W[wb + roots[c] * m + roots[a]] = w
    cache.two[b, g] = two


@njit
def cached_log_posterior(md, cache):
    """``log p(Z) + Σ_C log Λ(C)`` up to a constant from the cached cohesions."""
    return cached_posterior_and_clusters(md, cache)[0]


@njit
def cached_posterior_and_clusters(md, cache):
    """:func:`cached_log_posterior` and the number of clusters, in one pass over the
    clusters (each draw records both, see :func:`posterior_and_clusters`)."""
    return posterior_and_clusters(cache.h, cache.size, md.counts[1], md.log_alpha)


@njit
def posterior_and_clusters(h, size, log_gamma, log_alpha):
    """``log p(Z) + Σ_C log Λ(C)`` up to a constant and the number of clusters of the
    cohesions ``h`` of the slots of sizes ``size`` (empty slots skipped). ``log Γ(|C|)`` is
    read from the model's table ``log_gamma`` where it holds the size (the same bits as
    ``math.lgamma``, see :func:`~._records_scratch.count_tables`): a draw of 50 000 records
    sums it over about 20 000 clusters. The arrays alone, not the model and the statistics
    whole: a draw calls it from the interpreter, and numba unboxes every array of an
    argument at each call."""
    total = 0.0
    n_clusters = 0
    for g in range(size.size):
        n = size[g]
        lg = log_gamma[n] if n < log_gamma.size else math.lgamma(n)
        term = log_alpha + lg + h[g]
        # An empty slot adds +0.0 (the sum, never -0.0, is unchanged) rather than a branch:
        # the slots are empty or not at random, about 0.1 ms a draw of 50 000 records.
        total += term if n > 0 else 0.0
        n_clusters += n > 0
    return total, n_clusters
