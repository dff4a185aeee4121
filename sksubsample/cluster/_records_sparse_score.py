"""Scores of a sparse component's clusters from cached root sums (:mod:`._records_sparse`).

Each record ``p`` of a sparse component keeps, as the dense layout's records do
(:mod:`._records_cache`), its root sums and exact counts over its own cluster ``C``,

    R_c(p) = Σ_{q ∈ C \\ p} a_c(q, p),    N_c(p) = [x_p not missing] + Σ_{q ∈ C \\ p} [x_q ≡ x_p],

the sums over the stored pairs only (a pair not stored carries no comparison: ``a_c = 0``, not
exact). They change only along the rows of the records that move (:func:`move_sums`,
``O(deg F)``), so that ``log Λ`` of a cluster with a record added or removed
(:func:`sparse_score`) is :func:`~._records_scratch.cohesion` of the cached sums plus that
record's entries, ``O(|C| F + deg)``, rather than its stored pairs gathered into a dense block
and summed again (``O(|C|² F)``). The address blocks' move terms read the pairs of the
cluster's records in their slots, found along the members' rows (the slots' exponentials
from the model's ``sp_mexp``), with :func:`~._records_scratch.two_addresses_into` (the same
law as the dense layout's and the from-scratch score's). Whether a cluster stays connected
without the record is a search along the rows of its members. The scores allocate nothing and
are compiled without reference counting (:mod:`._borrowing`): they take the model and the
statistics, about forty arrays, and are called for every cluster a record is scored against.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kernels import njit
from ._borrowing import njit_borrowing
from ._records_scratch import cohesion_terms, mixture, two_addresses_into

__all__ = ["connected_positions", "find_pair", "member_sums", "move_sums", "room",
           "scratch", "set_score", "sort_positions", "sparse_score"]


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
    those, their indices, two more index arrays (marks or roots, and a stack), and the
    exponentials of the dense block."""
    return (np.zeros(F * cap * cap), np.zeros(F * cap * cap, dtype=np.uint8),
            np.zeros((F, cap), dtype=np.uint8), np.zeros((F, cap)),
            np.zeros((F, cap), dtype=np.int64), np.zeros((2, F, cap + 1)),
            np.arange(cap), np.zeros(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
            np.ones(F * cap * cap))


@njit(inline="always")
def room(F, buf, count):
    """``buf`` (:func:`scratch`), or larger blocks when it holds fewer than ``count``
    records: the scores below allocate nothing (they are compiled without reference
    counting), so their callers make the room."""
    if count > buf[6].size:
        return scratch(F, 2 * count)
    return buf


@njit_borrowing
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


@njit_borrowing
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


@njit_borrowing
def sparse_score(md, cache, lo, g, p, adding, pos, loc, buf):
    """``(connected, log Λ)`` of the cluster in slot ``g`` with the record at position ``p``
    added (``adding``; it neighbours a member, so the cluster stays connected) or removed (a
    member; connected: whether the stored pairs connect the others). ``loc`` is -1 at every
    position (and left so), ``buf`` the scratch blocks of :func:`scratch` for the cluster
    with ``p`` (:func:`room`), their additions zero (and left so)."""
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
    _, lexm, lnon, _, _, extra, idx, reps, stack, lexp = _prepare(pos, count, loc, buf)
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
    return connected, _cohesion(md, R, N, pos, count, loc, lexp, lexm, lnon, extra, idx,
                                reps)


@njit_borrowing
def set_score(md, cache, pos, count, loc, buf, check):
    """``(connected, log Λ)`` of the records ``pos[:count]`` of one sparse component as one
    cluster (sorted in place), from their cached root sums: each gains its stored pairs with
    the others outside its present cluster and loses those with its clustermates outside
    them, ``O(Σ deg F)`` rather than ``O(|C|² F)``. Whether the stored pairs connect them is
    checked first (``check``; else taken as true, as for two clusters and a pair between
    them), and ``log Λ`` is not computed (0) when they do not. ``loc`` and ``buf`` (room for
    ``count`` records) as :func:`sparse_score` needs them."""
    ptr, nbr, z, R, N = md.sp_ptr, md.sp_nbr, cache.z, cache.R, cache.N
    F = md.n_comparisons
    if count < 2:
        return True, 0.0
    _, lexm, lnon, _, _, extra, idx, reps, stack, lexp = _prepare(pos, count, loc, buf)
    if check and not connected_positions(ptr, nbr, pos, count, loc, stack):
        for a in range(count):
            loc[pos[a]] = -1
        return False, 0.0  # off the support: its score is never read
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
    return True, _cohesion(md, R, N, pos, count, loc, lexp, lexm, lnon, extra, idx, reps)


@njit(inline="always")
def _prepare(pos, count, loc, buf):
    """The scratch blocks ``buf``, ``pos[:count]`` sorted and ``loc`` their indices there."""
    sort_positions(pos, count)
    for a in range(count):
        loc[pos[a]] = a
    return buf


@njit_borrowing
def _cohesion(md, R, N, pos, count, loc, lexp, lexm, lnon, extra, idx, reps):
    """``log Λ`` of the records ``pos[:count]`` (ascending; ``loc`` their indices there) from
    their root sums plus ``extra``: the comparisons outside every address block, and each
    block's mixture; ``loc`` back to -1 and ``extra`` to zeros after. ``lexp`` and ``lexm``
    hold the move slots' dense blocks (their entries' exponentials and exact agreement),
    ``reps`` is scratch of ``count`` entries."""
    ptr, nbr = md.sp_ptr, md.sp_nbr
    F = md.n_comparisons
    n_blocks = md.move_slots.size
    h = cohesion_terms(md.half_log_m, md.nonnull, R, N, 0, pos, count, F, extra, md.group, 0,
                       md.counts[0])
    homed = False
    for b in range(n_blocks):
        n_home = 0
        for a in range(count):
            n_home += md.nonnull[md.move_slots[b], pos[a]]
        homed = homed or n_home >= 2
    if homed:
        # The move slots' pairs of the cluster, block b's in slot b of the scratch blocks
        # (1 and not exact where no pair is stored), found along the members' rows in one
        # pass for every block (``O(Σ deg)``: a binary search per pair of members read as
        # many scattered entries, per block).
        cc = count * count
        for b in range(n_blocks):
            for a in range(count):
                lnon[b, a] = md.nonnull[md.move_slots[b], pos[a]]
            for t in range(b * cc, (b + 1) * cc):
                lexp[t] = 1.0
                lexm[t] = 0
        for a in range(count):
            p = pos[a]
            for e in range(ptr[p], ptr[p + 1]):
                c = loc[nbr[e]]
                if c <= a or (e > ptr[p] and nbr[e - 1] == nbr[e]):
                    continue  # each pair once, from its lower member's row (its first entry)
                for b in range(n_blocks):
                    move = md.move_slots[b]
                    v = md.sp_mexp[e, b]
                    x = md.sp_exm[move, e]
                    lexp[(b * count + a) * count + c] = lexp[(b * count + c) * count + a] = v
                    lexm[(b * count + a) * count + c] = lexm[(b * count + c) * count + a] = x
        for a in range(count):
            idx[a] = a
    for b in range(n_blocks):
        move = md.move_slots[b]
        block = cohesion_terms(md.half_log_m, md.nonnull, R, N, 0, pos, count, F, extra,
                               md.group, b + 1, md.counts[0])
        n_home = 0
        for a in range(count):
            n_home += md.nonnull[move, pos[a]]
        if n_home < 2:
            h += block
            continue
        two, n_home = two_addresses_into(lexp, lexm, lnon, 0, count, 0, b, idx, count, reps)
        h += mixture(0.0, block, two, n_home, md.move_rate[b], md.half_log_m[move])
    for a in range(count):
        loc[pos[a]] = -1
        for f in range(F):  # zeros again, as the from-scratch scores read them
            extra[0, f, a] = 0.0
            extra[1, f, a] = 0.0
    return h


@njit_borrowing
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
