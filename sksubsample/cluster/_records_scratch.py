"""The records model's cohesion from the root sums, the definition the sweeps are checked by.

``log Λ(C) = Σ_c log Λ_c(C)`` of a cluster (:mod:`._records`) from each member's root sum
``R_c(k) = Σ_{r ∈ C \\ k} a_c(r, k)`` and exact count ``N_c(k)`` (``log Λ_c = log √m_ex +
logsumexp_k (R_c(k) - log N_c(k))``), each address block's move term summed over the pairs
of its distinct addresses (``O(d² |C|)`` for ``d`` of them), each pair's factors multiplied
from their exponentials (:func:`times`, as the cached scores multiply them). The split-merge moves
(:mod:`._records_split_merge`) score their partial clusters with it, the log posterior of a
partition is summed with it, and the Gibbs sweeps' cached statistics
(:mod:`._records_cache`) compute the same quantities incrementally.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit
from ._borrowing import njit_borrowing

__all__ = ["HUGE", "TINY", "cohesion", "cohesion_terms", "count_tables", "factor", "gain",
           "grow", "largest", "log_count", "mixed", "mixture", "one_address", "records_init",
           "records_log_posterior", "root_sums", "times", "two_addresses",
           "two_addresses_into"]

#: Products of factors outside this range are folded into their logarithm (no underflow to
#: 0, no overflow); scaled sums outside it are recomputed in log space (:mod:`._records_score`):
#: they arise only where one root's term dwarfs all others by ~e^575.
TINY = 1e-250
HUGE = 1e250


@njit(inline="always")
def _a(adj, base, f, m, i, j):
    return adj[base + (f * m + i) * m + j]


@njit(inline="always")
def factor(bexp, base, f, m, r, k, l_):
    """``½ (e^{A(r,k)} + e^{A(r,l)})``: record ``r``'s factor in the pair ``(k, l)`` of slot
    ``f`` (``bexp`` the exponentials of a dense block's entries)."""
    return 0.5 * (bexp[base + (f * m + r) * m + k] + bexp[base + (f * m + r) * m + l_])


@njit(inline="always")
def times(v, prod, x):
    """``(v, prod)`` with ``x`` multiplied in, ``v + log prod`` the logarithm of the product:
    ``prod`` folded into ``v`` when it leaves ``(TINY, HUGE)``."""
    prod *= x
    if not TINY < prod < HUGE:
        return v + math.log(prod), 1.0
    return v, prod


@njit
def largest(cstart):
    """Records of the largest component (the size of the scratch arrays), at least 1."""
    most = 1
    for c in range(cstart.size - 1):
        most = max(most, cstart[c + 1] - cstart[c])
    return most


@njit
def records_init(model_adj, model_exm, nonnull, cstart, boff, F, z, R, N):
    """Root sums ``R`` and exact counts ``N`` (``(F, n)``, permuted order) of the partition
    ``z`` (local labels per component)."""
    for c in range(cstart.size - 1):
        lo, m, base = cstart[c], cstart[c + 1] - cstart[c], boff[c]
        for i in range(m):
            for f in range(F):
                s = 0.0
                e = nonnull[f, lo + i]
                for j in range(m):
                    if j != i and z[lo + j] == z[lo + i]:
                        s += _a(model_adj, base, f, m, j, i)
                        e += model_exm[base + (f * m + j) * m + i]
                R[f, lo + i] = s
                N[f, lo + i] = e


@njit
def two_addresses(bexp, exm, nonnull, base, m, lo, f, members, count):
    """``log Σ_{k<l} Π_r ½ (e^{A(r,k)} + e^{A(r,l)})`` over the pairs of distinct addresses
    ``k, l`` (one root per address) of the records ``members[:count]``, ``A`` the block's
    summed factors (slot ``f``; 0 for a record without an address) and ``bexp`` their
    exponentials; ``-inf`` below two addresses. Returns ``(value, records with an
    address)``."""
    return two_addresses_into(bexp, exm, nonnull, base, m, lo, f, members, count,
                              np.empty(count, dtype=np.int64))


@njit_borrowing
def two_addresses_into(bexp, exm, nonnull, base, m, lo, f, members, count, reps):
    """:func:`two_addresses` with the roots written into ``reps`` (at least ``count``
    entries): no array allocated, so that the sparse layout's scores, called for every
    cluster a record is scored against, are compiled without reference counting."""
    n_home = 0
    n_reps = 0
    for q in range(count):
        k = members[q]
        if not nonnull[f, lo + k]:
            continue
        n_home += 1
        # One root per address: the record of lowest index among those that hold it (a
        # property of the cluster, whatever the order of its members).
        first = True
        for t in range(count):
            r = members[t]
            if r < k and exm[base + (f * m + r) * m + k]:
                first = False
                break
        if first:
            reps[n_reps] = k
            n_reps += 1
    top = -math.inf
    acc = 0.0
    for a in range(n_reps):
        k = reps[a]
        for b in range(a + 1, n_reps):
            l_ = reps[b]
            v = 0.0
            prod = 1.0
            for q in range(count):
                r = members[q]
                if r != k and r != l_:
                    v, prod = times(v, prod, factor(bexp, base, f, m, r, k, l_))
            v += math.log(prod)
            if v > top:
                acc = acc * math.exp(top - v) + 1.0
                top = v
            else:
                acc += math.exp(v - top)
    if n_reps < 2:
        return -math.inf, n_home
    return top + math.log(acc), n_home


@njit
def cohesion(half_log_m, nonnull, R, N, lo, members, count, F, extra, group, rho, bexp, exm,
              base, m, log_k):
    """``log Λ`` of the cluster ``members[:count]`` (local indices) from their root sums plus
    ``extra`` (``(2, F, count)``: additions to ``R`` and ``N``; zeros for none): ``Σ_c log
    Λ_c`` over the comparisons outside every address block (``group == 0``), times, per block
    ``b`` (its comparisons ``group == b + 1``, its move slot ``group == -(b + 1)``), the
    mixture ``Λ_G`` of one address and two of :mod:`._records`, with the block's prior
    probability ``rho[b]`` of two (``bexp``, ``exm``: the exponentials of the dense block's
    entries, from ``base``, and their exact agreement; ``log_k`` as :func:`log_count`
    reads it)."""
    total = cohesion_terms(half_log_m, nonnull, R, N, lo, members, count, F, extra, group, 0,
                           log_k)
    for f in range(F):
        if group[f] < 0:
            b = -group[f] - 1
            block = cohesion_terms(half_log_m, nonnull, R, N, lo, members, count, F, extra,
                                   group, b + 1, log_k)
            two, n_home = two_addresses(bexp, exm, nonnull, base, m, lo, f, members, count)
            total += mixture(0.0, block, two, n_home, rho[b], half_log_m[f])
    return total


@njit(inline="always")
def log_count(log_k, n):
    """``log n`` of an exact count ``n >= 1`` (a float holding an integer): ``log_k[n]`` when
    the table holds it (``log k`` by the compiled ``math.log``, :func:`count_tables`: the same
    bits), else computed."""
    k = int(n)
    if 0 < k < log_k.size:
        return log_k[k]
    return math.log(n)


@njit_borrowing
def cohesion_terms(half_log_m, nonnull, R, N, lo, members, count, F, extra, group, which,
                   log_k):
    """``Σ_c log Λ_c`` over the comparisons ``c`` with ``group[c] == which`` (0: those
    outside every address block; ``b + 1``: block ``b``'s) from the root sums, as in
    :func:`cohesion`; the logarithms of the exact counts read from ``log_k``
    (:func:`log_count`), two per record and comparison otherwise."""
    total = 0.0
    for f in range(F):
        if group[f] != which:
            continue
        top = -math.inf
        k_nn = 0
        for q in range(count):
            i = lo + members[q]
            if nonnull[f, i]:
                k_nn += 1
                v = R[f, i] + extra[0, f, q] - log_count(log_k, N[f, i] + extra[1, f, q])
                top = max(top, v)
        if k_nn < 2:
            continue
        acc = 0.0
        for q in range(count):
            i = lo + members[q]
            if nonnull[f, i]:
                acc += math.exp(R[f, i] + extra[0, f, q]
                                - log_count(log_k, N[f, i] + extra[1, f, q]) - top)
        total += half_log_m[f] + top + math.log(acc)
    return total


@njit
def mixture(total, block, two, n_home, rho, half_move):
    """``log Λ`` from :func:`cohesion_terms` and the two-address sum ``two`` of ``n_home``
    records with an address: one address (no move, or a move whose records all hold one of
    the two) or two, ``half_move`` the move slot's ``log √m_ex``."""
    if n_home < 2:  # fewer than two records with an address: no evidence either way
        return total + block
    return mixed(total, block, two, one_address(n_home, rho), math.log(rho) + half_move)


@njit(inline="always")
def one_address(n_home, rho):
    """``log (1 - ρ + ρ 2^{1 - n})``: the prior weight of one address among ``n_home``
    records with an address (:func:`mixture`)."""
    return math.log1p(-rho * (1.0 - 2.0 ** (1 - n_home)))


@njit(inline="always")
def mixed(total, block, two, one, move):
    """:func:`mixture` from its two prior weights' logs: ``one`` (:func:`one_address`) and
    ``move = log ρ + log √m_ex`` of the move slot; the sweeps read both from tables
    (:func:`count_tables`)."""
    a = one + block
    b = move + two
    return total + max(a, b) + math.log1p(math.exp(-abs(a - b)))


@njit
def count_tables(size, rho, half_move):
    """``(log k, log Γ(k), one_address(k, rho[b]) for each block b)`` for ``k`` in ``0..size -
    1`` (``(2 + B, size)``; NaN where undefined and unused) and ``log ρ_b + half_move[b]`` per
    block, computed by the functions the compiled code would call in place (``math.log``,
    ``math.lgamma``, :func:`one_address`): a look-up gives the same bits, the sweeps' counts
    and cluster sizes being small integers that they would otherwise take the logarithm of at
    every update."""
    out = np.full((2 + rho.size, size), np.nan)
    for k in range(size):
        if k > 0:
            out[0, k] = math.log(k)
            out[1, k] = math.lgamma(k)
        for b in range(rho.size):
            out[2 + b, k] = one_address(k, rho[b])
    move = np.empty(rho.size)
    for b in range(rho.size):
        move[b] = math.log(rho[b]) + half_move[b]
    return out, move


@njit
def _members(z, lo, m, skip, order, first, count):
    """Counting sort of the component's records by label (``skip`` left out): the records of
    label ``k`` are ``order[first[k]:first[k] + count[k]]``."""
    count[:m] = 0
    for i in range(m):
        if i != skip:
            count[z[lo + i]] += 1
    acc = 0
    for k in range(m):
        first[k] = acc
        acc += count[k]
    fill = first[:m].copy()
    for i in range(m):
        if i != skip:
            k = z[lo + i]
            order[fill[k]] = i
            fill[k] += 1


@njit
def root_sums(adj, exm, nonnull, base, m, lo, F, members, count, z, by_label, R, N):
    """``R`` and ``N`` of the records ``members[:count]`` from scratch: over all of them as one
    cluster, or (``by_label``) over those that share each record's label in ``z``."""
    for q in range(count):
        k = members[q]
        for f in range(F):
            s = 0.0
            e = nonnull[f, lo + k]
            for t in range(count):
                r = members[t]
                if t != q and (not by_label or z[lo + r] == z[lo + k]):
                    s += _a(adj, base, f, m, r, k)
                    e += exm[base + (f * m + r) * m + k]
            R[f, lo + k] = s
            N[f, lo + k] = e


@njit
def grow(adj, exm, nonnull, base, m, lo, F, members, count, r, Rs, Ns):
    """Add record ``r`` to the partial cluster ``members[:count]`` in the scratch root sums
    ``Rs``, ``Ns`` (``r``'s own entry written); the caller appends ``r`` to ``members``."""
    for f in range(F):
        sr = 0.0
        er = nonnull[f, lo + r]
        for q in range(count):
            k = members[q]
            Rs[f, lo + k] += _a(adj, base, f, m, r, k)
            Ns[f, lo + k] += exm[base + (f * m + r) * m + k]
            sr += _a(adj, base, f, m, k, r)
            er += exm[base + (f * m + k) * m + r]
        Rs[f, lo + r] = sr
        Ns[f, lo + r] = er


@njit
def gain(adj, bexp, exm, nonnull, half_log_m, base, m, lo, F, members, count, r, Rs, Ns,
         extra, joined, alone, group, rho, log_k):
    """``Σ_c log Λ_c`` of ``members[:count] ∪ {r}`` less ``alone`` (that of the members)."""
    for f in range(F):
        sr = 0.0
        er = 0.0
        for q in range(count):
            k = members[q]
            a = _a(adj, base, f, m, r, k)
            e = exm[base + (f * m + r) * m + k]
            extra[0, f, q] = a
            extra[1, f, q] = e
            sr += a
            er += e
        # r's own entry: its root sum and exact count become those of r among the members.
        extra[0, f, count] = sr - Rs[f, lo + r]
        extra[1, f, count] = er + nonnull[f, lo + r] - Ns[f, lo + r]
    joined[:count] = members[:count]
    joined[count] = r
    return (cohesion(half_log_m, nonnull, Rs, Ns, lo, joined, count + 1, F, extra, group,
                      rho, bexp, exm, base, m, log_k) - alone)


@njit
def records_log_posterior(bexp, exm, nonnull, half_log_m, log_alpha, cstart, boff, F, group,
                          rho, z, R, N, log_k):
    """``log p(Z) + Σ_C Σ_c log Λ_c(C)`` up to a constant: ``Σ_C (log α + log (|C|-1)! +
    log-cohesion)`` over the clusters of every component (``R``, ``N`` those of ``z``)."""
    most = largest(cstart)
    order = np.empty(most, dtype=np.int64)
    first = np.empty(most + 1, dtype=np.int64)
    count = np.zeros(most + 1, dtype=np.int64)
    extra = np.zeros((2, F, most + 1))
    total = 0.0
    for c in range(cstart.size - 1):
        lo, m, base = cstart[c], cstart[c + 1] - cstart[c], boff[c]
        _members(z, lo, m, -1, order, first, count)
        for k in range(m):
            if count[k] > 0:
                mem = order[first[k]:first[k] + count[k]]
                total += log_alpha + math.lgamma(count[k])
                total += cohesion(half_log_m, nonnull, R, N, lo, mem, count[k], F, extra,
                                   group, rho, bexp, exm, base, m, log_k)
    return total


