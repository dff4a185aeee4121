"""The records model on the stored pairs alone: the large components, linear in their pairs.

A component too large for dense comparison blocks (:mod:`._records`) keeps only its stored
pairs, as rows of neighbours (CSR over the permuted positions, each row ascending, each pair
in both rows): ``sp_adj[f, e]`` and ``sp_exm[f, e]`` are entry ``e``'s ``a_c`` and exact
agreement, as the dense blocks hold them. A pair that is not stored carries no comparison
(``a_c = 0``, not exact: what the dense blocks hold for a pair the linker did not score), and
the clusters are **connected in the pair graph**: the posterior there is the records model's
restricted to those partitions,

    p(Z | records) ∝ α^K Π_C (|C| - 1)! Λ(C) · 1[the stored pairs connect every C],

exact for that support: a cluster's ``Λ(C)`` is computed from its own pairs (gathered into a
small dense block, :func:`~._records_scratch.cohesion` on it, the same formula as the dense
path), and the moves below leave that distribution invariant. The linker scores every pair of
the components it completes (:func:`~._splink.component_pairs`), so there the restriction is
void and the model is the dense path's; at 10⁶ records the giant component keeps its proposed
pairs only, and a cluster there is a set of records that Splink's predictions chain together
(as its connected components are), scored by the records model on the pairs it holds.

**Gibbs.** A record's update scores its own cluster without it (when that stays connected;
otherwise every other state is off the support and the record stays), each cluster holding
one of its neighbours with it added (found along its row), and a new cluster, each with its
Ewens weight. A cluster holding none of its neighbours would not be connected with it. The
scores come from the records' root sums over their clusters, kept as the records move
(:mod:`._records_sparse_score`): ``O(deg + Σ_C (|C| F + deg))`` per record.

**Pair split-merge.** A stored pair ``(i, j)`` of the component is drawn uniformly (whatever
the state). If ``i`` and ``j`` share a cluster ``C``, the split that puts ``i`` in ``A``,
``j`` in ``B`` and each other member in either with probability 1/2 is proposed (rejected
when ``A`` or ``B`` is not connected) and accepted with ``min(1, (π(A, B) / π(C))^{1/T}
2^{|C| - 2})``; otherwise the merge of their clusters (connected by ``(i, j)``) with ``min(1,
(π(C) / π(A, B))^{1/T} 2^{2 - |C|})``: for each pair the two moves are each other's reverse,
so each pair's kernel is reversible, and so is their mixture. Free labels are found from the
record's own index upward (no state).
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit
from ._records_cache import link, unlink
from ._records_scratch import cohesion, root_sums
from ._records_sparse_score import (
    connected_positions,
    find_pair,
    member_sums,
    move_sums,
    room,
    scratch,
    set_score,
    sort_positions,
    sparse_score,
)
from ._sweeps import softmax_draw

__all__ = [
    "SPARSE_ATTEMPTS",
    "build_sparse",
    "find_pair",
    "scratch",
    "sparse_log_posterior",
    "sparse_moves",
    "sparse_work",
    "strong_cliques",
]

#: Pair split-merge attempts per record of a component after each Gibbs sweep.
SPARSE_ATTEMPTS = 0.2

#: Cluster size the scratch blocks hold without reallocating.
_CAP = 16


@njit
def _score(md, pos, count, buf, loc):
    """``(is connected, log Λ)`` of the cluster of the records at positions ``pos[:count]``
    (sorted in place) from scratch: its stored pairs gathered into a dense block, the others'
    entries 0 (no comparison), and whether the stored pairs connect its records (``loc``
    -1 at every position, and left so)."""
    if count < 2:
        return True, 0.0
    ladj, lexm, lnon, R, N, extra, idx, zd, stack, lexp = buf
    cap = idx.size
    F = md.n_comparisons
    if count > cap:
        ladj, lexm, lnon, R, N, extra, idx, zd, stack, lexp = scratch(F, count)
    sort_positions(pos, count)
    s = count
    for a in range(s):
        loc[pos[a]] = a
        for f in range(F):
            lnon[f, a] = md.nonnull[f, pos[a]]
            for b in range(s):
                ladj[(f * s + a) * s + b] = 0.0
                lexp[(f * s + a) * s + b] = 1.0
                lexm[(f * s + a) * s + b] = 0
    for a in range(s):
        for b in range(a + 1, s):
            e = find_pair(md.sp_ptr, md.sp_nbr, pos[a], pos[b])
            if e < 0:
                continue
            for f in range(F):
                v = md.sp_adj[f, e]
                x = md.sp_exm[f, e]
                ladj[(f * s + a) * s + b] = v
                ladj[(f * s + b) * s + a] = v
                lexp[(f * s + a) * s + b] = lexp[(f * s + b) * s + a] = math.exp(v)
                lexm[(f * s + a) * s + b] = x
                lexm[(f * s + b) * s + a] = x
    connected = connected_positions(md.sp_ptr, md.sp_nbr, pos, s, loc, stack)
    for a in range(s):
        loc[pos[a]] = -1
    root_sums(ladj, lexm, lnon, 0, s, 0, F, idx, s, zd, False, R, N)
    return connected, cohesion(md.half_log_m, lnon, R, N, 0, idx, s, F, extra, md.group,
                               md.move_rate, lexp, lexm, 0, s, md.counts[0])


@njit(inline="always")
def _gather(cache, lo, g, skip, out, at):
    """Positions of the members of slot ``g`` (but ``skip``) into ``out[at:]``; the count."""
    k = cache.head[g]
    while k >= 0:
        if k != skip:
            out[at] = lo + k
            at += 1
        k = cache.nxt[lo + k]
    return at


@njit(inline="always")
def _free_label(cache, lo, m, start):
    """The first label from ``start`` upward (cyclically) that no cluster holds."""
    k = start
    while cache.size[lo + k] > 0:
        k += 1
        if k == m:
            k = 0
    return k


@njit
def build_sparse(md, cache):
    """Member lists and log-cohesions of the sparse components from their labels in
    ``cache.z``; False when the pair graph does not connect a cluster's records."""
    s = md.scstart
    buf = scratch(md.n_comparisons, _CAP)
    pos = np.empty(_CAP, dtype=np.int64)
    loc = np.full(md.n, -1, dtype=np.int64)
    ok = True
    for c in range(s.size - 1):
        lo, m = s[c], s[c + 1] - s[c]
        for k in range(m):
            cache.head[lo + k] = -1
            cache.size[lo + k] = 0
            cache.ver[lo + k] += 1
        for i in range(m - 1, -1, -1):
            link(cache, lo, lo + cache.z[lo + i], i)
        for k in range(m):
            g = lo + k
            if cache.size[g] == 0:
                continue
            if cache.size[g] > pos.size:
                pos = np.empty(2 * cache.size[g], dtype=np.int64)
            count = _gather(cache, lo, g, -1, pos, 0)
            valid, h = _score(md, pos, count, buf, loc)
            ok = ok and valid
            cache.h[g] = h
            member_sums(md, cache, lo, g)
    return ok


@njit
def sparse_log_posterior(md, z):
    """``Σ_C (log α + log (|C| - 1)! + log Λ(C))`` over the clusters of the sparse components
    (local labels ``z``, permuted order); ``-inf`` when the pair graph does not connect one."""
    s = md.scstart
    buf = scratch(md.n_comparisons, _CAP)
    loc = np.full(md.n, -1, dtype=np.int64)
    total = 0.0
    for c in range(s.size - 1):
        lo, m = s[c], s[c + 1] - s[c]
        order = np.argsort(z[lo:lo + m], kind="mergesort")
        a = 0
        while a < m:
            b = a
            while b < m and z[lo + order[b]] == z[lo + order[a]]:
                b += 1
            pos = order[a:b] + lo
            valid, h = _score(md, pos, b - a, buf, loc)
            if not valid:
                return -math.inf
            total += md.log_alpha + math.lgamma(b - a) + h
            a = b
    return total


@njit
def strong_cliques(md, strong, init):
    """The annealing's start on the sparse components, written into ``init`` (local labels):
    each record, in order, joins the first cluster of its neighbours whose members all share
    a strong pair with it (``strong[e]`` of row entry ``e``: the model links the pair on its
    own), else a new one. Cliques of the strong pairs, so connected, and of about an entity's
    size: a component of the strong pairs there may chain hundreds of records, which one
    cluster's from-scratch scores (``O(|C|² F)``) would make slow to break up."""
    s = md.scstart
    ptr, nbr = md.sp_ptr, md.sp_nbr
    size = np.zeros(md.n, dtype=np.int64)
    tally = np.zeros(md.n, dtype=np.int64)
    for c in range(s.size - 1):
        lo, m = s[c], s[c + 1] - s[c]
        for r in range(m):
            init[lo + r] = -1
        for r in range(m):
            p = lo + r
            for e in range(ptr[p], ptr[p + 1]):
                if strong[e] and init[nbr[e]] >= 0:
                    tally[lo + init[nbr[e]]] += 1
            pick = -1
            for e in range(ptr[p], ptr[p + 1]):
                k = init[nbr[e]]
                if strong[e] and k >= 0 and tally[lo + k] == size[lo + k]:
                    pick = k
                    break
            for e in range(ptr[p], ptr[p + 1]):
                if init[nbr[e]] >= 0:
                    tally[lo + init[nbr[e]]] = 0
            if pick < 0:
                # Labelled by its first record: the labels in use spread over the component,
                # so that a free one is found a few steps from any record (_free_label).
                pick = r
            init[p] = pick
            size[lo + pick] += 1


@njit(inline="always")
def _key(cache, g):
    """The memo's key of slot ``g`` at its version: unique per slot and version."""
    return cache.ver[g] * cache.size.size + g


@njit
def _gibbs(md, cache, c, inv_t, rng, buf, pos, loc, logits, labels, scores, tally):
    """One Gibbs sweep of sparse component ``c``; ``(n_scores, n_moves)``. The clusters are
    scored from the records' cached root sums (:func:`~._records_sparse_score.sparse_score`),
    and the scores memoised past the dense memo (``cache.memo[woff[-1]:]``): against the
    cluster of the neighbour of row entry ``e`` at ``e``, of a record's own cluster without it
    at ``entries + p`` (``-inf``: not connected), each with the key of the slot's version, the
    same bits as computing them again."""
    lo, m = md.scstart[c], md.scstart[c + 1] - md.scstart[c]
    ptr, nbr, z = md.sp_ptr, md.sp_nbr, cache.z
    memo, memo_key = cache.memo, cache.memo_ver
    mb = cache.woff[-1]
    own_at = mb + nbr.size
    n_eval = 0
    n_moves = 0
    for r in rng.permutation(m):
        p = lo + r
        old = z[p]
        g_old = lo + old
        size_old = cache.size[g_old]
        n_lab = 0
        if size_old > 1:
            key = _key(cache, g_old)
            if memo_key[own_at + p] != key:
                buf = room(md.n_comparisons, buf, size_old)
                connected, without = sparse_score(md, cache, lo, g_old, p, False, pos, loc,
                                                  buf)
                n_eval += 1
                memo[own_at + p] = without if connected else -math.inf
                memo_key[own_at + p] = key
            without = memo[own_at + p]
            if without == -math.inf:
                continue  # its cluster falls apart without it: every other state is off
            scores[0] = without
            logits[0] = (cache.h[g_old] - without + math.log(size_old - 1)) * inv_t
            labels[0] = old
            n_lab = 1
        for e in range(ptr[p], ptr[p + 1]):
            k = z[nbr[e]]
            if k == old or tally[k] < 0:
                continue
            tally[k] = -1  # scored once
            g = lo + k
            key = _key(cache, g)
            if memo_key[mb + e] != key:
                buf = room(md.n_comparisons, buf, cache.size[g] + 1)
                _, with_r = sparse_score(md, cache, lo, g, p, True, pos, loc, buf)
                n_eval += 1
                memo[mb + e] = with_r
                memo_key[mb + e] = key
            with_r = memo[mb + e]
            scores[n_lab] = with_r
            logits[n_lab] = (with_r - cache.h[g] + math.log(cache.size[g])) * inv_t
            labels[n_lab] = k
            n_lab += 1
        for e in range(ptr[p], ptr[p + 1]):
            tally[z[nbr[e]]] = 0
        logits[n_lab] = md.log_alpha * inv_t
        labels[n_lab] = -1
        scores[n_lab] = 0.0
        choice, _ = softmax_draw(logits, n_lab + 1, rng.random())
        k = labels[choice]
        if k == old:
            continue
        if k < 0:
            if size_old == 1:
                continue  # alone already
            k = _free_label(cache, lo, m, r)
        # r leaves its cluster (its cohesion without r known when it had others) and joins k.
        without = scores[0] if size_old > 1 else 0.0
        unlink(cache, lo, g_old, r)
        cache.h[g_old] = without
        link(cache, lo, lo + k, r)
        cache.h[lo + k] = scores[choice]
        move_sums(md, cache, p, old, k)
        n_moves += 1
    return n_eval, n_moves


@njit
def _split_merge(md, cache, c, inv_t, rng, n_attempts, buf, pos, loc):
    """``n_attempts`` pair split-merge moves in sparse component ``c``; ``(n_scores,
    n_accepted)``. The proposed clusters are scored from the records' cached root sums
    (:func:`~._records_sparse_score.set_score`)."""
    lo, m = md.scstart[c], md.scstart[c + 1] - md.scstart[c]
    ptr, nbr, z = md.sp_ptr, md.sp_nbr, cache.z
    e_lo, n_e = ptr[lo], ptr[lo + m] - ptr[lo]
    n_eval = 0
    n_acc = 0
    if n_e == 0:
        return 0, 0
    log2 = math.log(2.0)
    for _ in range(n_attempts):
        e = e_lo + min(int(rng.random() * n_e), n_e - 1)
        # The row of entry e: the last position whose row starts at or before it.
        a, b = lo, lo + m
        while b - a > 1:
            mid = (a + b) >> 1
            if ptr[mid] <= e:
                a = mid
            else:
                b = mid
        i, j = a, nbr[e]
        ki, kj = z[i], z[j]
        gi, gj = lo + ki, lo + kj
        u = rng.random()
        if ki == kj:
            size = cache.size[gi]
            # i to A, j to B, every other member to either with probability 1/2.
            na = 0
            nb = 0
            k = cache.head[gi]
            while k >= 0:
                q = lo + k
                if q == i:
                    s_ = 0
                elif q == j:
                    s_ = 1
                else:
                    s_ = 0 if rng.random() < 0.5 else 1
                if s_ == 0:
                    pos[na] = q
                    na += 1
                else:
                    pos[size - 1 - nb] = q
                    nb += 1
                k = cache.nxt[q]
            part_b = pos[na:size].copy()
            buf = room(md.n_comparisons, buf, size)
            # Off the support (a part not connected): rejected, the other part unscored.
            ok_a, ha = set_score(md, cache, pos, na, loc, buf, True)
            n_eval += 1
            if not ok_a:
                continue
            ok_b, hb = set_score(md, cache, part_b, nb, loc, buf, True)
            n_eval += 1
            if not ok_b:
                continue
            log_r = (inv_t * (md.log_alpha + math.lgamma(na) + math.lgamma(nb)
                              - math.lgamma(size) + ha + hb - cache.h[gi])
                     + (size - 2) * log2)
            if math.log(u) < log_r:
                kb = _free_label(cache, lo, m, j - lo)
                for t in range(nb):
                    q = part_b[t]
                    unlink(cache, lo, gi, q - lo)
                    link(cache, lo, lo + kb, q - lo)
                    z[q] = kb
                cache.h[gi] = ha
                cache.h[lo + kb] = hb
                member_sums(md, cache, lo, gi)
                member_sums(md, cache, lo, lo + kb)
                n_acc += 1
        else:
            si, sj = cache.size[gi], cache.size[gj]
            count = _gather(cache, lo, gi, -1, pos, 0)
            count = _gather(cache, lo, gj, -1, pos, count)
            buf = room(md.n_comparisons, buf, count)
            # Connected: each cluster is, and the pair (i, j) joins them.
            _, hm = set_score(md, cache, pos, count, loc, buf, False)
            n_eval += 1
            log_r = (inv_t * (-md.log_alpha + math.lgamma(count) - math.lgamma(si)
                              - math.lgamma(sj) + hm - cache.h[gi] - cache.h[gj])
                     - (count - 2) * log2)
            if math.log(u) < log_r:
                k = cache.head[gj]
                while k >= 0:
                    nxt = cache.nxt[lo + k]
                    unlink(cache, lo, gj, k)
                    link(cache, lo, gi, k)
                    z[lo + k] = ki
                    k = nxt
                cache.h[gi] = hm
                cache.h[gj] = 0.0
                member_sums(md, cache, lo, gi)
                n_acc += 1
    return n_eval, n_acc


@njit
def sparse_moves(md, cache, inv_t, rng):
    """A Gibbs sweep of each sparse component then its pair split-merge moves
    (:data:`SPARSE_ATTEMPTS` per record), all components in one call with one stream (the
    model and the cache unboxed once); ``(n_evaluations, n_moves)``, the evaluations counted
    as comparison factors (``F`` per scored cluster)."""
    s = md.scstart
    F = md.n_comparisons
    most = 1
    deg = 1
    for c in range(s.size - 1):
        most = max(most, s[c + 1] - s[c])
    for p in range(s[0], s[-1]):
        deg = max(deg, md.sp_ptr[p + 1] - md.sp_ptr[p])
    # Scratch blocks for twice the largest cluster: grown past it only when one doubles.
    cap = _CAP
    for p in range(s[0], s[-1]):
        cap = max(cap, 2 * cache.size[p])
    buf = scratch(F, cap)
    pos = np.empty(most + 1, dtype=np.int64)
    loc = np.full(md.n, -1, dtype=np.int64)
    logits = np.empty(deg + 2)
    labels = np.empty(deg + 2, dtype=np.int64)
    scores = np.empty(deg + 2)
    tally = np.zeros(most, dtype=np.int64)
    n_eval = 0
    n_moves = 0
    for c in range(s.size - 1):
        ev, mv = _gibbs(md, cache, c, inv_t, rng, buf, pos, loc, logits, labels, scores,
                        tally)
        more, _ = _split_merge(md, cache, c, inv_t, rng, int(SPARSE_ATTEMPTS * (s[c + 1] - s[c])),
                               buf, pos, loc)
        n_eval += ev + more
        n_moves += mv
    return n_eval * F, n_moves


def sparse_work(md):
    """Work of the sparse components' moves (their stored entries and records), for balancing
    threads: one shard of them all, or none."""
    s = md.scstart
    if s.size < 2:
        return np.zeros(0, dtype=np.int64)
    return np.array([md.sp_ptr[s[-1]] - md.sp_ptr[s[0]] + s[-1] - s[0]], dtype=np.int64)
