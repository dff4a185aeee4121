"""Compiled Gibbs sweeps of the records model (:mod:`._records`), component by component.

A record's update scores every cluster of its connected component (clusters never span two
components): the conditional of ``r`` joining cluster ``C`` is proportional to ``|C| Λ(C ∪
{r}) / Λ(C)`` (its own cluster: ``(|C| - 1) Λ(C) / Λ(C \\ {r})``) and to ``α`` for a new
cluster, drawn with :func:`~._sweeps.softmax_draw`. Each cluster's log-cohesion and scaled
root terms are cached (:mod:`._records_cache`), so a cluster is scored from them in ``O(|C|
F)`` multiplications for ``F`` comparisons (an update ``O(m F)`` for a component of ``m``
records), and the statistics are rebuilt only for the two clusters a record leaves and joins.
Components are independent: a sweep visits them in turn, each record once, in a random order
within its component.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kernels import njit, permutation_into
from ._borrowing import njit_borrowing
from ._records_cache import component, link, refresh, unlink
from ._records_score import score_with, score_without
from ._records_scratch import largest
from ._sweeps import softmax_draw

__all__ = ["build_cache", "build_component", "move_record", "records_sweep"]


@njit(inline="always")
def _at(base, f, m, i, j):
    return base + (f * m + i) * m + j


@njit
def build_cache(md, cache):
    """Member lists, root sums, exact counts and cluster statistics of the labels
    ``cache.z`` (local per component); ``cache`` freshly made by
    :func:`~._records_cache.empty_cache`."""
    for c in range(md.cstart.size - 1):
        build_component(md, cache, c)


@njit
def build_component(md, cache, c):
    """The member lists and statistics of component ``c`` rebuilt from its labels in
    ``cache.z``."""
    cache_N, cache_R, cache_head, cache_nxt = cache.N, cache.R, cache.head, cache.nxt
    cache_size, cache_woff, cache_z, md_adj = cache.size, cache.woff, cache.z, md.adj
    md_boff, md_cstart, md_exm, md_nonnull = md.boff, md.cstart, md.exm, md.nonnull
    F = md.n_comparisons
    lo, m, base = md_cstart[c], md_cstart[c + 1] - md_cstart[c], md_boff[c]
    roots = np.empty(m + 1, dtype=np.int64)
    for k in range(m):
        cache_head[lo + k] = -1
        cache_size[lo + k] = 0
        cache.ver[lo + k] += 1
    for i in range(m - 1, -1, -1):
        link(cache, lo, lo + cache_z[lo + i], i)
    for i in range(m):
        for f in range(F):
            s = 0.0
            e = md_nonnull[f, lo + i]
            j = cache_head[lo + cache_z[lo + i]]
            while j >= 0:
                if j != i:
                    s += md_adj[_at(base, f, m, j, i)]
                    e += md_exm[_at(base, f, m, j, i)]
                j = cache_nxt[lo + j]
            cache_R[f, lo + i] = s
            cache_N[f, lo + i] = e
    for k in range(m):
        if cache_size[lo + k] > 0:
            refresh(md, cache, lo, m, base, cache_woff[c], lo + k, roots)


@njit_borrowing
def move_record(md, cache, lo, m, base, wb, r, old, new, roots):
    """Move record ``r`` (local index) from cluster ``old`` to ``new`` (local labels): its
    former clustermates lose its factors, its new ones gain them, both clusters' statistics
    are rebuilt."""
    cache_N, cache_R, cache_head, cache_nxt = cache.N, cache.R, cache.head, cache.nxt
    cache_size, cache_z, md_adj, md_exm = cache.size, cache.z, md.adj, md.exm
    md_nonnull, F = md.nonnull, md.n_comparisons
    g_old, g_new = lo + old, lo + new
    unlink(cache, lo, g_old, r)
    k = cache_head[g_old]
    while k >= 0:
        for f in range(F):
            at = _at(base, f, m, r, k)
            cache_R[f, lo + k] -= md_adj[at]
            cache_N[f, lo + k] -= md_exm[at]
        k = cache_nxt[lo + k]
    if cache_size[g_old] > 0:
        refresh(md, cache, lo, m, base, wb, g_old, roots)
    for f in range(F):
        cache_R[f, lo + r] = 0.0
        cache_N[f, lo + r] = md_nonnull[f, lo + r]
    k = cache_head[g_new]
    while k >= 0:
        for f in range(F):
            at = _at(base, f, m, r, k)
            cache_R[f, lo + k] += md_adj[at]
            cache_N[f, lo + k] += md_exm[at]
            back = _at(base, f, m, k, r)
            cache_R[f, lo + r] += md_adj[back]
            cache_N[f, lo + r] += md_exm[back]
        k = cache_nxt[lo + k]
    link(cache, lo, g_new, r)
    cache_z[lo + r] = new
    refresh(md, cache, lo, m, base, wb, g_new, roots)


@njit
def records_sweep(md, cache, inv_t, rng, first=0, stop=-1, skip_up_to=1):
    """One Gibbs sweep of every record of the components ``first`` to ``stop - 1`` (``-1``:
    to the last) of more than ``skip_up_to`` records at temperature ``1 / inv_t``; ``cache``
    updated in place. Returns ``(n_evaluations, n_moves)``: comparison factors read and
    records that changed cluster."""
    cache_h, cache_size, cache_z, F = cache.h, cache.size, cache.z, md.n_comparisons
    memo, memo_ver, ver = cache.memo, cache.memo_ver, cache.ver
    n_eval = 0
    n_moves = 0
    most = largest(md.cstart)
    logits = np.empty(most + 1)
    labels = np.empty(most + 1, dtype=np.int64)
    roots = np.empty(most + 1, dtype=np.int64)
    vals = np.empty(most + 1)
    spare = np.empty(most + 1, dtype=np.int64)
    order = np.empty(most + 1, dtype=np.int64)
    log_k = md.counts[0]
    for c in range(first, md.cstart.size - 1 if stop < 0 else stop):
        lo, m, base, wb = component(cache, md.cstart, md.boff, c)
        if m <= skip_up_to:
            continue
        # The labels in use lie below ``top`` (a new cluster takes the lowest free label):
        # the updates skip the empty slots above it, the same draws in fewer steps.
        top = m
        while cache_size[lo + top - 1] == 0:
            top -= 1
        for r in permutation_into(rng, order, m):
            old = cache_z[lo + r]
            size_old = cache_size[lo + old]
            n_lab = 0
            col = wb + r  # slot k's entry at col + k m (see ClusterCache)
            if size_old > 1:
                if memo_ver[col + old * m] != ver[lo + old]:
                    memo[col + old * m] = score_without(md, cache, lo, m, base, wb,
                                                        lo + old, r, roots, spare)
                    memo_ver[col + old * m] = ver[lo + old]
                    n_eval += (size_old - 1) * F
                logits[0] = ((cache_h[lo + old] - memo[col + old * m] + log_k[size_old - 1])
                             * inv_t)
                labels[0] = old
                n_lab = 1
            for k in range(top):
                size = cache_size[lo + k]
                if size == 0 or k == old:
                    continue
                if memo_ver[col + k * m] != ver[lo + k]:
                    memo[col + k * m] = score_with(md, cache, lo, m, base, wb, lo + k, r,
                                                   roots, vals)
                    memo_ver[col + k * m] = ver[lo + k]
                    n_eval += size * F
                logits[n_lab] = (memo[col + k * m] - cache_h[lo + k] + log_k[size]) * inv_t
                labels[n_lab] = k
                n_lab += 1
            logits[n_lab] = md.log_alpha * inv_t
            labels[n_lab] = -1
            choice, _ = softmax_draw(logits, n_lab + 1, rng.random())
            k = labels[choice]
            if k < 0:
                if size_old == 1:
                    continue  # alone already: a new cluster is the one it holds
                k = 0
                while cache_size[lo + k] > 0:
                    k += 1
            if k != old:
                move_record(md, cache, lo, m, base, wb, r, old, k, roots)
                n_moves += 1
                top = max(top, k + 1)
    return n_eval, n_moves
