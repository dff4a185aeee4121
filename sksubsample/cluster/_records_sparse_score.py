"""Scores of a sparse component's clusters from cached root sums (:mod:`._records_sparse`).

Each record ``p`` of a sparse component keeps, as the dense layout's records do
(:mod:`._records_cache`), its root sums and exact counts over its own cluster ``C``,

    R_c(p) = Σ_{q ∈ C \\ p} a_c(q, p),    N_c(p) = [x_p not missing] + Σ_{q ∈ C \\ p} [x_q ≡ x_p],

the sums over the stored pairs only (a pair not stored carries no comparison: ``a_c = 0``, not
exact). They change only along the rows of the records that move (:func:`move_sums`,
``O(deg F)``), so that ``log Λ`` of a cluster with a record added or removed
(:func:`sparse_score`) is :func:`~._records_scratch.cohesion` of the cached sums plus that
record's entries, ``O(|C| F + deg)``, rather than its stored pairs gathered into a dense block
and summed again (``O(|C|² F)``). Each address block's move term reads the pairs of the
cluster's records in its slot only, each found in its row, with
:func:`~._records_scratch.two_addresses` (the same law as the dense layout's and the
from-scratch score's). Whether a cluster stays connected without the record is a search along
the rows of its members.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kernels import njit
from ._records_scratch import cohesion_terms, mixture, two_addresses

__all__ = ["connected_positions", "find_pair", "member_sums", "move_sums", "scratch",
           "set_score", "sort_positions", "sparse_score"]


@njit(inline="always")
def find_pair(ptr, nbr, p, q):
    """The entry of the stored pair ``(p, q)`` in row ``p``, or -1."""
    lo, hi = ptr[p], ptr[p + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if nbr[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    if lo < ptr[p + 1] and nbr[lo] == q:
        return lo
    return -1


@njit
def scratch(F, cap):
    """Scratch blocks for clusters of up to ``cap`` records: a dense block of their pairs'
    ``a`` and exact agreement, their values' presence, root sums, exact counts, additions to
    those, their indices, and two more index arrays (marks and a stack)."""
    return (np.zeros(F * cap * cap), np.zeros(F * cap * cap, dtype=np.uint8),
            np.zeros((F, cap), dtype=np.uint8), np.zeros((F, cap)),
            np.zeros((F, cap), dtype=np.int64), np.zeros((2, F, cap + 1)),
            np.arange(cap), np.zeros(cap, dtype=np.int64), np.empty(cap, dtype=np.int64))


@njit
def member_sums(md, cache, lo, g):
    """The root sums and exact counts of the members of slot ``g`` (component from ``lo``)
    from their rows."""
    ptr, nbr, z, R, N = md.sp_ptr, md.sp_nbr, cache.z, cache.R, cache.N
    F = md.n_comparisons
    label = g - lo
    k = cache.head[g]
    while k >= 0:
        p = lo + k
        for f in range(F):
            R[f, p] = 0.0
            N[f, p] = md.nonnull[f, p]
        for e in range(ptr[p], ptr[p + 1]):
            if z[nbr[e]] == label:
                for f in range(F):
                    R[f, p] += md.sp_adj[f, e]
                    N[f, p] += md.sp_exm[f, e]
        k = cache.nxt[p]


@njit
def move_sums(md, cache, p, old, new):
    """The record at position ``p`` moves from local label ``old`` to ``new`` (``cache.z[p]``
    still ``old``; set here): its former clustermates lose its entries, its new ones gain
    them, its own sums are those over its new cluster."""
    ptr, nbr, z, R, N = md.sp_ptr, md.sp_nbr, cache.z, cache.R, cache.N
    F = md.n_comparisons
    z[p] = new
    for f in range(F):
        R[f, p] = 0.0
        N[f, p] = md.nonnull[f, p]
    for e in range(ptr[p], ptr[p + 1]):
        q = nbr[e]
        if z[q] == old:
            for f in range(F):
                R[f, q] -= md.sp_adj[f, e]
                N[f, q] -= md.sp_exm[f, e]
        elif z[q] == new:
            for f in range(F):
                a = md.sp_adj[f, e]
                x = md.sp_exm[f, e]
                R[f, q] += a
                N[f, q] += x
                R[f, p] += a
                N[f, p] += x


@njit(inline="always")
def sort_positions(pos, count):
    """Sort ``pos[:count]`` in place (insertion: the clusters are small). Ascending positions
    are the component's order, as the roots of the move term (the lowest record holding an
    address) need."""
    for a in range(1, count):
        v = pos[a]
        b = a
        while b > 0 and pos[b - 1] > v:
            pos[b] = pos[b - 1]
            b -= 1
        pos[b] = v


@njit
def sparse_score(md, cache, lo, g, p, adding, pos, loc, buf):
    """``(connected, log Λ)`` of the cluster in slot ``g`` with the record at position ``p``
    added (``adding``; it neighbours a member, so the cluster stays connected) or removed (a
    member; connected: whether the stored pairs connect the others). ``loc`` is -1 at every
    position (and left so), ``buf`` the scratch blocks of :func:`scratch`, their additions
    zero (and left so; larger blocks made here when the cluster outgrows them)."""
    ptr, nbr, R, N = md.sp_ptr, md.sp_nbr, cache.R, cache.N
    F = md.n_comparisons
    count = 0
    k = cache.head[g]
    while k >= 0:
        if lo + k != p:
            pos[count] = lo + k
            count += 1
        k = cache.nxt[lo + k]
    if adding:
        pos[count] = p
        count += 1
    if count < 2:
        return True, 0.0
    ladj, lexm, lnon, _, _, extra, idx, _, stack = _prepare(F, pos, count, loc, buf)
    # The record's entries: its pairs with the others enter (or leave) their root sums; added,
    # its own sums become those over the others (R, N hold them over its present cluster).
    sign = 1.0 if adding else -1.0
    at = loc[p]
    for e in range(ptr[p], ptr[p + 1]):
        b = loc[nbr[e]]
        if b < 0:
            continue
        for f in range(F):
            a_ = md.sp_adj[f, e]
            x = md.sp_exm[f, e]
            extra[0, f, b] += sign * a_
            extra[1, f, b] += sign * x
            if adding:
                extra[0, f, at] += a_
                extra[1, f, at] += x
    if adding:
        for f in range(F):
            extra[0, f, at] -= R[f, p]
            extra[1, f, at] += md.nonnull[f, p] - N[f, p]
    connected = adding or connected_positions(ptr, nbr, pos, count, loc, stack)
    return connected, _cohesion(md, R, N, pos, count, loc, ladj, lexm, lnon, extra, idx)


@njit
def set_score(md, cache, pos, count, loc, buf):
    """``(connected, log Λ)`` of the records ``pos[:count]`` of one sparse component as one
    cluster (sorted in place), from their cached root sums: each gains its stored pairs with
    the others outside its present cluster and loses those with its clustermates outside
    them, ``O(Σ deg F)`` rather than ``O(|C|² F)``. ``loc`` and ``buf`` as
    :func:`sparse_score` needs them."""
    ptr, nbr, z, R, N = md.sp_ptr, md.sp_nbr, cache.z, cache.R, cache.N
    F = md.n_comparisons
    if count < 2:
        return True, 0.0
    ladj, lexm, lnon, _, _, extra, idx, _, stack = _prepare(F, pos, count, loc, buf)
    for a in range(count):
        p = pos[a]
        for e in range(ptr[p], ptr[p + 1]):
            q = nbr[e]
            inside = loc[q] >= 0
            if inside == (z[q] == z[p]):
                continue  # counted in its root sums as it should be, or in neither
            sign = 1.0 if inside else -1.0
            for f in range(F):
                extra[0, f, a] += sign * md.sp_adj[f, e]
                extra[1, f, a] += sign * md.sp_exm[f, e]
    connected = connected_positions(ptr, nbr, pos, count, loc, stack)
    return connected, _cohesion(md, R, N, pos, count, loc, ladj, lexm, lnon, extra, idx)


@njit
def _prepare(F, pos, count, loc, buf):
    """The scratch blocks for ``count`` records (``buf``, or larger ones), ``pos[:count]``
    sorted and ``loc`` their indices there."""
    if count > buf[6].size:
        buf = scratch(F, count)
    sort_positions(pos, count)
    for a in range(count):
        loc[pos[a]] = a
    return buf


@njit
def _cohesion(md, R, N, pos, count, loc, ladj, lexm, lnon, extra, idx):
    """``log Λ`` of the records ``pos[:count]`` (ascending; ``loc`` their indices there) from
    their root sums plus ``extra``: the comparisons outside every address block, and each
    block's mixture; ``loc`` back to -1 and ``extra`` to zeros after."""
    ptr, nbr = md.sp_ptr, md.sp_nbr
    F = md.n_comparisons
    h = cohesion_terms(md.half_log_m, md.nonnull, R, N, 0, pos, count, F, extra, md.group, 0)
    for b in range(md.move_slots.size):
        move = md.move_slots[b]
        block = cohesion_terms(md.half_log_m, md.nonnull, R, N, 0, pos, count, F, extra,
                               md.group, b + 1)
        n_home = 0
        for a in range(count):
            n_home += md.nonnull[move, pos[a]]
        if n_home < 2:
            h += block
            continue
        # The move slot's pairs of the cluster, each found in its row (``O(|C|² log
        # deg)``: a row may hold hundreds of pairs where the linker scored them all).
        for a in range(count):
            idx[a] = a
            lnon[0, a] = md.nonnull[move, pos[a]]
            for c in range(count):
                ladj[a * count + c] = 0.0
                lexm[a * count + c] = 0
        for a in range(count):
            for c in range(a + 1, count):
                e = find_pair(ptr, nbr, pos[a], pos[c])
                if e >= 0:
                    ladj[a * count + c] = ladj[c * count + a] = md.sp_adj[move, e]
                    lexm[a * count + c] = lexm[c * count + a] = md.sp_exm[move, e]
        two, n_home = two_addresses(ladj, lexm, lnon, 0, count, 0, 0, idx, count)
        h += mixture(0.0, block, two, n_home, md.move_rate[b], md.half_log_m[move])
    for a in range(count):
        loc[pos[a]] = -1
        for f in range(F):  # zeros again, as the from-scratch scores read them
            extra[0, f, a] = 0.0
            extra[1, f, a] = 0.0
    return h


@njit
def connected_positions(ptr, nbr, pos, count, loc, stack):
    """Whether the stored pairs connect the records ``pos[:count]`` (``loc`` their indices
    there; marked -2 when reached, then restored)."""
    loc[pos[0]] = -2
    stack[0] = 0
    top = 1
    reached = 1
    while top > 0:
        top -= 1
        a = stack[top]
        p = pos[a]
        for e in range(ptr[p], ptr[p + 1]):
            q = nbr[e]
            b = loc[q]
            if b >= 0:
                loc[q] = -2 - b
                stack[top] = b
                top += 1
                reached += 1
    for a in range(count):
        loc[pos[a]] = a
    return reached == count
