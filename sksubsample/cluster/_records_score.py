"""Scores of one cluster with a record added or removed, from its cached statistics.

With the statistics of :mod:`._records_cache`, adding record ``r`` to cluster ``C`` turns
each root term ``T_c(k)`` into ``T_c(k) B_c(r, k) N_c(k) / (N_c(k) + [r ≡ k])`` and removing
it divides instead (``B_c = e^{a_c}``), so ``log Λ_c(C ∪ {r})`` costs ``O(|C|)``
multiplications and a couple of logarithms (Steorts 2015's likelihood, d-blink's prototypes
integrated out as in :mod:`._records`). Each address block's move term (``Λ_G``) keeps, per
pair of roots ``(k, l)`` (one per distinct value of the block), its share ``W_kl`` of the
two-address sum
``Σ_{k<l} Π_{q ∈ C \\ {k,l}} ½ (e^{A(q,k)} + e^{A(q,l)})``; with ``r`` added each kept pair
gains ``r``'s factor, and a pair with a new root ``r`` is summed over the members
(``O(d² + d |C|)`` for ``d`` roots instead of ``O(d² |C|)``). Sums that leave the range of
doubles are recomputed in log space from the root sums.
"""

from __future__ import annotations

import math

from ..algorithms.kernels import njit
from ._borrowing import njit_borrowing
from ._records_scratch import HUGE, TINY, factor, mixed, times

__all__ = ["added_term", "comparisons", "factor", "kept_sum", "lse", "mix", "pair_log",
           "roots_with", "score_with", "score_without", "two_with"]

@njit(inline="always")
def _at(base, f, m, i, j):
    return base + (f * m + i) * m + j


@njit(inline="always")
def mix(md, b, sumb, nhome, two):
    """``log Λ_G`` of address block ``b`` from its one-address cohesion (``sumb``) and its
    two-address sum: the mixture of :mod:`._records` with the block's prior probability
    ``ρ_b`` of a move (:func:`~._records_scratch.mixture`), ``sumb`` below two records with
    a value of the block."""
    if nhome < 2:
        return sumb
    return mixed(0.0, sumb, two, md.counts[2 + b, nhome], md.move_log[b])


@njit(inline="always")
def pair_log(md, cache, lo, m, base, fm, g, k, l_, minus):
    """``log Π_q ½ (e^{A(q,k)} + e^{A(q,l)})``, ``q`` over the members of slot ``g`` other
    than ``k``, ``l`` and ``minus``."""
    cache_head, cache_nxt, md_bexp = cache.head, cache.nxt, md.bexp
    v = 0.0
    prod = 1.0
    q = cache_head[g]
    while q >= 0:
        if q != minus and q != k and q != l_:
            v, prod = times(v, prod, factor(md_bexp, base, fm, m, q, k, l_))
        q = cache_nxt[lo + q]
    return v + math.log(prod)


@njit(inline="always")
def lse(top, acc, v):
    """Running ``logsumexp``: ``(top, acc)`` with ``v`` added (``top + log acc`` the sum)."""
    if v > top:
        return v, acc * math.exp(top - v) + 1.0
    if v > -math.inf:
        return top, acc + math.exp(v - top)
    return top, acc


@njit(inline="always")
def roots_with(md, cache, lo, m, base, fm, b, g, r, roots):
    """The roots of block ``b`` (move slot ``fm``) of slot ``g`` that stay roots with ``r``
    added (``roots[:count]``) and whether ``r`` is one: ``r``'s address may be new, or held
    by a root above it, which ``r`` then replaces (the root is the lowest record holding the
    address)."""
    cache_head, cache_nxt, md_exm = cache.head, cache.nxt, md.exm
    cache_isroot = cache.isroot[b]
    md_nonnull = md.nonnull
    homed = md_nonnull[fm, lo + r]
    count = 0
    r_root = bool(homed)
    k = cache_head[g]
    while k >= 0:
        same = homed and md_exm[_at(base, fm, m, r, k)]
        if cache_isroot[lo + k] and not (same and r < k):
            roots[count] = k
            count += 1
        if same and k < r:
            r_root = False
        k = cache_nxt[lo + k]
    return count, r_root


@njit(inline="always")
def kept_sum(md, cache, base, wb, fm, b, m, r, roots, n_kept, sign):
    """``Σ_{k<l} W_kl f_kl(r)^sign`` over the pairs of ``roots[:n_kept]``: the kept pairs'
    share of the two-address sum once ``r`` (factor ``f_kl(r) = ½ (e^{A(r,k)} +
    e^{A(r,l)})``) joins (``sign`` 1) or leaves (-1); block ``b``, move slot ``fm``."""
    cache_W = cache.W[b]
    s = 0.0
    for a in range(n_kept):
        k = roots[a]
        for c in range(a + 1, n_kept):
            f = factor(md.bexp, base, fm, m, r, k, roots[c])
            s += cache_W[wb + k * m + roots[c]] * (f if sign > 0 else 1.0 / f)
    return s


@njit(inline="always")
def two_with(md, cache, lo, m, base, wb, fm, b, g, r, roots, n_kept, r_root, vals):
    """Log of block ``b``'s two-address sum of slot ``g`` with ``r`` added (move slot ``fm``),
    from the cached pair weights ``W`` (``W_kl = Π_q ½ (e^{A(q,k)} + e^{A(q,l)}) / Σ``,
    ``log Σ = two``): each kept pair gains ``r``'s factor; the new pairs ``(k, r)`` (``r`` a
    root) are summed afresh, their logs left in ``vals``."""
    cache_two = cache.two[b]
    top = -math.inf
    acc = 0.0
    if n_kept >= 2:
        s = kept_sum(md, cache, base, wb, fm, b, m, r, roots, n_kept, 1)
        if not s > TINY:  # the kept pairs' weights underflowed: sum them afresh
            s = 0.0
            for a in range(n_kept):
                for c in range(a + 1, n_kept):
                    v = pair_log(md, cache, lo, m, base, fm, g, roots[a], roots[c], -1)
                    v += math.log(factor(md.bexp, base, fm, m, r, roots[a], roots[c]))
                    top, acc = lse(top, acc, v)
        else:
            top, acc = cache_two[g] + math.log(s), 1.0
    if r_root:
        for a in range(n_kept):
            vals[a] = pair_log(md, cache, lo, m, base, fm, g, roots[a], r, -1)
            top, acc = lse(top, acc, vals[a])
    if acc == 0.0:
        return -math.inf
    return top + math.log(acc)


@njit
def _log_space(md, cache, lo, m, base, f, g, r, sign):
    """``log Σ_k exp(R'_c(k) - log N'_c(k))`` of slot ``g`` with ``r`` added (``sign`` 1,
    ``r`` a root too) or removed (-1), computed in log space."""
    cache_N, cache_R, cache_head, cache_nxt = cache.N, cache.R, cache.head, cache.nxt
    md_adj, md_exm, md_nonnull = md.adj, md.exm, md.nonnull
    top = -math.inf
    acc = 0.0
    sr = 0.0
    er = 1
    for sweep in range(2):
        k = cache_head[g]
        while k >= 0:
            p = lo + k
            if k != r:
                at = _at(base, f, m, r, k)
                if sweep == 0:
                    sr += md_adj[at]
                    er += md_exm[at]
                if md_nonnull[f, p]:
                    v = (cache_R[f, p] + sign * md_adj[at]
                         - math.log(cache_N[f, p] + sign * md_exm[at]))
                    if sweep == 0:
                        top = max(top, v)
                    else:
                        acc += math.exp(v - top)
            k = cache_nxt[p]
        if sign > 0:
            v = sr - math.log(er)
            if sweep == 0:
                top = max(top, v)
            else:
                acc += math.exp(v - top)
    return top + math.log(acc)


@njit(inline="always")
def added_term(T, N, bexp, exm, at, p, f):
    """Member ``p``'s scaled term of comparison ``f`` once the record of entry ``at`` joins
    its cluster: its root sum gains ``a``, its exact count ``[r ≡ k]``."""
    t = T[f, p] * bexp[at]
    if exm[at]:
        nk = N[f, p]
        t *= nk / (nk + 1.0)
    return t


@njit(inline="always")
def comparisons(md, cache, lo, m, base, g, r, sign, which):
    """``Σ log Λ_c`` over the comparisons of group ``which`` (0: outside every address block;
    ``b + 1``: block ``b``'s) of slot ``g`` with ``r`` added (``sign`` 1) or removed (-1).
    Each comparison's scaled sum is multiplied into a product, one logarithm per group
    rather than per comparison."""
    cache_M, cache_N, cache_T, cache_cnt = cache.M, cache.N, cache.T, cache.cnt
    cache_head, cache_hf, cache_nxt, md_adj = cache.head, cache.hf, cache.nxt, md.adj
    md_binv, md_exm, md_group, md_half_log_m = md.binv, md.exm, md.group, md.half_log_m
    md_log_int, md_nonnull = md.log_int, md.nonnull
    total = 0.0
    prod = 1.0
    for f in range(md.n_comparisons):
        if md_group[f] != which:
            continue
        if not md_nonnull[f, lo + r] or (sign > 0 and cache_cnt[f, g] == 0):
            # r has no value, or the cluster none: unchanged
            total += cache_hf[f, g]
            continue
        if sign < 0 and cache_cnt[f, g] <= 2:
            continue  # one value left at most: log Λ_c = 0
        scale = cache_M[f, g]
        s = 0.0
        sr = 0.0
        er = 1
        k = cache_head[g]
        while k >= 0:
            p = lo + k
            at = _at(base, f, m, r, k)
            if sign > 0:
                sr += md_adj[at]
                er += md_exm[at]
                s += added_term(cache.T, cache.N, md.bexp, md.exm, at, p, f)
            elif k != r and md_nonnull[f, p]:
                t = cache_T[f, p] * md_binv[at]
                if md_exm[at]:
                    nk = cache_N[f, p]
                    t *= nk / (nk - 1.0)
                s += t
            k = cache_nxt[p]
        if sign > 0:
            own = sr - md_log_int[er] - scale
            s = s + math.exp(own) if own < 575.0 else math.inf
        v = md_half_log_m[f] + scale
        if TINY < s < HUGE and TINY < prod * s < HUGE:
            prod *= s
        else:  # out of range: this comparison in log space from the root sums
            v += _log_space(md, cache, lo, m, base, f, g, r, sign) - scale
        total += v
    return total + math.log(prod)


@njit_borrowing
def score_with(md, cache, lo, m, base, wb, g, r, roots, vals):
    """``log Λ(C ∪ {r})`` of the cluster in slot ``g`` (``r`` not a member) from its cached
    statistics: the comparisons outside every address block, and each block's mixture."""
    total = comparisons(md, cache, lo, m, base, g, r, 1, 0)
    for b in range(md.move_slots.size):
        fm = md.move_slots[b]
        sumb = comparisons(md, cache, lo, m, base, g, r, 1, b + 1)
        nhome = cache.nhome[b, g] + md.nonnull[fm, lo + r]
        if nhome < 2:
            total += sumb
            continue
        n_kept, r_root = roots_with(md, cache, lo, m, base, fm, b, g, r, roots)
        two = two_with(md, cache, lo, m, base, wb, fm, b, g, r, roots, n_kept, r_root, vals)
        total += mix(md, b, sumb, nhome, two)
    return total


@njit_borrowing
def score_without(md, cache, lo, m, base, wb, g, r, roots, spare):
    """``log Λ(C \\ {r})`` of the cluster in slot ``g`` (``r`` a member) from its cached
    statistics (``spare``: scratch of the component's size)."""
    total = comparisons(md, cache, lo, m, base, g, r, -1, 0)
    for b in range(md.move_slots.size):
        fm = md.move_slots[b]
        sumb = comparisons(md, cache, lo, m, base, g, r, -1, b + 1)
        nhome = cache.nhome[b, g] - md.nonnull[fm, lo + r]
        if nhome < 2:
            total += sumb
            continue
        two = _two_without(md, cache, lo, m, base, wb, fm, b, g, r, roots, spare)
        total += mix(md, b, sumb, nhome, two)
    return total


@njit(inline="always")
def _two_without(md, cache, lo, m, base, wb, fm, b, g, r, roots, spare):
    """Log of block ``b``'s two-address sum of slot ``g`` with ``r`` (a member) removed."""
    cache_head, cache_nxt, md_exm, md_nonnull = cache.head, cache.nxt, md.exm, md.nonnull
    cache_isroot, cache_two = cache.isroot[b], cache.two[b]
    homed = md_nonnull[fm, lo + r]
    # Roots of C \ {r}: the others, and a record whose only lower holder of its address was
    # r becomes one (its pairs summed afresh, after the kept ones).
    n_kept = 0
    n_roots = 0
    k = cache_head[g]
    while k >= 0:
        if k != r and cache_isroot[lo + k]:
            roots[n_kept] = k
            n_kept += 1
        k = cache_nxt[lo + k]
    n_roots = n_kept
    # Candidates: members above r holding its address, in increasing order; with the
    # relation transitive only the lowest is promoted, found by its lower candidates first.
    n_cand = 0
    k = cache_head[g]
    while k >= 0:
        if (k != r and not cache_isroot[lo + k] and homed and r < k
                and md_exm[_at(base, fm, m, r, k)]):
            c = n_cand
            while c > 0 and spare[c - 1] > k:
                spare[c] = spare[c - 1]
                c -= 1
            spare[c] = k
            n_cand += 1
        k = cache_nxt[lo + k]
    for a in range(n_cand):
        k = spare[a]
        promoted = True
        for c in range(a):
            if md_exm[_at(base, fm, m, spare[c], k)]:
                promoted = False
                break
        q = cache_head[g] if promoted else -1
        while q >= 0:
            if q != r and q < k and md_exm[_at(base, fm, m, q, k)]:
                promoted = False
                break
            q = cache_nxt[lo + q]
        if promoted:
            roots[n_roots] = k
            n_roots += 1
    top = -math.inf
    acc = 0.0
    if n_kept >= 2:
        s = kept_sum(md, cache, base, wb, fm, b, m, r, roots, n_kept, -1)
        if TINY < s < HUGE:
            top, acc = cache_two[g] + math.log(s), 1.0
        else:  # the kept pairs' weights left the range: sum them afresh
            for a in range(n_kept):
                for c in range(a + 1, n_kept):
                    v = pair_log(md, cache, lo, m, base, fm, g, roots[a], roots[c], r)
                    top, acc = lse(top, acc, v)
    for a in range(n_kept, n_roots):
        for c in range(a):
            v = pair_log(md, cache, lo, m, base, fm, g, roots[a], roots[c], r)
            top, acc = lse(top, acc, v)
    return top + math.log(acc) if acc > 0.0 else -math.inf
