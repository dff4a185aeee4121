"""Compiled Gibbs sweeps of the records model (:mod:`._records`), component by component.

A record's update scores every cluster of its connected component (clusters never span two
components): removing the record from its cluster, the log-cohesion ``Σ_c log Λ_c`` of each
cluster with and without it and the Ewens weight ``|C|`` (``α`` for a new cluster) give the
conditional, drawn with :func:`~._sweeps.softmax_draw`. Each record keeps, per comparison, its
root sum ``R_c(k) = Σ_{r ∈ C \\ k} a_c(r, k)`` and its exact count ``N_c(k)`` within its cluster,
so that a cluster's ``log Λ_c`` with a record added is ``O(|C|)`` per comparison
(``log Λ_c = log √m_ex + logsumexp_k (R_c(k) - log N_c(k))``) and an update costs ``O(m F)``
for a component of ``m`` records and ``F`` comparisons. The move term of an address block is
summed from scratch over a cluster's pairs of distinct addresses (``O(d² |C|)`` for ``d`` of
them), in the same cohesion routine that every update calls. Components are independent: a
sweep visits them in turn, each record once, in a random order within its component.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit
from ._sweeps import softmax_draw

__all__ = ["records_init", "records_log_posterior", "records_split_merge", "records_sweep"]


@njit(inline="always")
def _a(adj, base, f, m, i, j):
    return adj[base + (f * m + i) * m + j]


@njit
def _largest(cstart):
    """Records of the largest component (the size of the scratch arrays), at least 1."""
    largest = 1
    for c in range(cstart.size - 1):
        largest = max(largest, cstart[c + 1] - cstart[c])
    return largest


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
def _two_addresses(adj, exm, nonnull, base, m, lo, f, members, count):
    """``log Σ_{k<l} Π_r ½ (e^{A(r,k)} + e^{A(r,l)})`` over the pairs of distinct addresses
    ``k, l`` (one root per address) of the records ``members[:count]``, ``A`` the block's
    summed factors (slot ``f``; 0 for a record without an address); ``-inf`` below two
    addresses. Returns ``(value, records with an address)``."""
    n_home = 0
    reps = np.empty(count, dtype=np.int64)
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
            for q in range(count):
                r = members[q]
                if r == k or r == l_:
                    continue
                x = _a(adj, base, f, m, r, k)
                y = _a(adj, base, f, m, r, l_)
                v += max(x, y) + math.log1p(math.exp(-abs(x - y))) - math.log(2.0)
            if v > top:
                acc = acc * math.exp(top - v) + 1.0
                top = v
            else:
                acc += math.exp(v - top)
    if n_reps < 2:
        return -math.inf, n_home
    return top + math.log(acc), n_home


@njit
def _cohesion(half_log_m, nonnull, R, N, lo, members, count, F, extra, group, rho, adj, exm,
              base, m):
    """``log Λ`` of the cluster ``members[:count]`` (local indices) from their root sums plus
    ``extra`` (``(2, F, count)``: additions to ``R`` and ``N``; zeros for none): ``Σ_c log
    Λ_c`` over the comparisons, except those of the address block (``group == 1``), which
    enter through the mixture of one address and two (the slot ``group == 2``) of
    :mod:`._records`, with the prior probability ``rho`` of two."""
    total = 0.0
    block = 0.0
    move = -1
    for f in range(F):
        if group[f] == 2:
            move = f
            continue
        top = -math.inf
        k_nn = 0
        for q in range(count):
            i = lo + members[q]
            if nonnull[f, i]:
                k_nn += 1
                v = R[f, i] + extra[0, f, q] - math.log(N[f, i] + extra[1, f, q])
                top = max(top, v)
        if k_nn < 2:
            continue
        acc = 0.0
        for q in range(count):
            i = lo + members[q]
            if nonnull[f, i]:
                acc += math.exp(R[f, i] + extra[0, f, q] - math.log(N[f, i] + extra[1, f, q])
                                - top)
        if group[f] == 0:
            total += half_log_m[f] + top + math.log(acc)
        else:
            block += half_log_m[f] + top + math.log(acc)
    if move < 0:
        return total + block
    two, n_home = _two_addresses(adj, exm, nonnull, base, m, lo, move, members, count)
    if n_home < 2:  # fewer than two records with an address: no evidence either way
        return total + block
    # One address: no move, or a move whose records all hold one of the two addresses.
    a = math.log1p(-rho * (1.0 - 2.0 ** (1 - n_home))) + block
    b = math.log(rho) + half_log_m[move] + two
    return total + max(a, b) + math.log1p(math.exp(-abs(a - b)))


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
def _root_sums(adj, exm, nonnull, base, m, lo, F, members, count, z, by_label, R, N):
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
def _grow(adj, exm, nonnull, base, m, lo, F, members, count, r, Rs, Ns):
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
def _gain(adj, exm, nonnull, half_log_m, base, m, lo, F, members, count, r, Rs, Ns, extra,
          joined, alone, group, rho):
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
    return (_cohesion(half_log_m, nonnull, Rs, Ns, lo, joined, count + 1, F, extra, group,
                      rho, adj, exm, base, m) - alone)


@njit
def records_sweep(adj, exm, nonnull, half_log_m, log_alpha, cstart, boff, F, group, rho,
                  z, R, N, inv_t, rng):
    """One Gibbs sweep of every record at temperature ``1 / inv_t``; ``z`` (local labels),
    ``R`` and ``N`` updated in place. Returns ``(n_evaluations, n_moves)``: comparison factors
    read and records that changed cluster."""
    n_eval = 0
    n_moves = 0
    largest = _largest(cstart)
    order = np.empty(largest, dtype=np.int64)
    first = np.empty(largest + 1, dtype=np.int64)
    count = np.zeros(largest + 1, dtype=np.int64)
    logits = np.empty(largest + 1)
    labels = np.empty(largest + 1, dtype=np.int64)
    extra = np.zeros((2, F, largest + 1))
    used = np.zeros(largest + 1, dtype=np.bool_)
    joined = np.empty(largest + 1, dtype=np.int64)
    for c in range(cstart.size - 1):
        lo, m, base = cstart[c], cstart[c + 1] - cstart[c], boff[c]
        if m < 2:
            continue
        for r in rng.permutation(m):
            old = z[lo + r]
            # Out of its cluster: its former clustermates lose its factors.
            for j in range(m):
                if j != r and z[lo + j] == old:
                    for f in range(F):
                        R[f, lo + j] -= _a(adj, base, f, m, r, j)
                        N[f, lo + j] -= exm[base + (f * m + r) * m + j]
            _members(z, lo, m, r, order, first, count)
            n_lab = 0
            for k in range(m):
                used[k] = count[k] > 0
                if count[k] == 0:
                    continue
                mem = order[first[k]:first[k] + count[k]]
                size = count[k]
                extra[:, :, :size + 1] = 0.0
                alone = _cohesion(half_log_m, nonnull, R, N, lo, mem, size, F, extra, group,
                                  rho, adj, exm, base, m)
                # With r: r's factors to each member, and r as a root of its own.
                gain = _gain(adj, exm, nonnull, half_log_m, base, m, lo, F, mem, size, r, R,
                             N, extra, joined, alone, group, rho)
                n_eval += size * F
                logits[n_lab] = (gain + math.log(size)) * inv_t
                labels[n_lab] = k
                n_lab += 1
            logits[n_lab] = log_alpha * inv_t
            labels[n_lab] = -1
            choice, _ = softmax_draw(logits, n_lab + 1, rng.random())
            k = labels[choice]
            if k < 0:
                k = old if not used[old] else 0
                while used[k]:
                    k += 1
            z[lo + r] = k
            for f in range(F):
                R[f, lo + r] = 0.0
                N[f, lo + r] = nonnull[f, lo + r]
            for j in range(m):
                if j != r and z[lo + j] == k:
                    for f in range(F):
                        R[f, lo + j] += _a(adj, base, f, m, r, j)
                        N[f, lo + j] += exm[base + (f * m + r) * m + j]
                        R[f, lo + r] += _a(adj, base, f, m, j, r)
                        N[f, lo + r] += exm[base + (f * m + j) * m + r]
            n_moves += k != old
    return n_eval, n_moves


@njit
def records_log_posterior(adj, exm, nonnull, half_log_m, log_alpha, cstart, boff, F, group, rho,
                          z, R, N):
    """``log p(Z) + Σ_C Σ_c log Λ_c(C)`` up to a constant: ``Σ_C (log α + log (|C|-1)! +
    log-cohesion)`` over the clusters of every component (``R``, ``N`` those of ``z``)."""
    largest = _largest(cstart)
    order = np.empty(largest, dtype=np.int64)
    first = np.empty(largest + 1, dtype=np.int64)
    count = np.zeros(largest + 1, dtype=np.int64)
    extra = np.zeros((2, F, largest + 1))
    total = 0.0
    for c in range(cstart.size - 1):
        lo, m, base = cstart[c], cstart[c + 1] - cstart[c], boff[c]
        _members(z, lo, m, -1, order, first, count)
        for k in range(m):
            if count[k] > 0:
                mem = order[first[k]:first[k] + count[k]]
                total += log_alpha + math.lgamma(count[k])
                total += _cohesion(half_log_m, nonnull, R, N, lo, mem, count[k], F, extra,
                                   group, rho, adj, exm, base, m)
    return total


@njit
def records_split_merge(adj, exm, nonnull, half_log_m, log_alpha, cstart, boff, F, group,
                        rho, z, R, N, inv_t, attempts, rng):
    """Split-merge Metropolis-Hastings moves by sequential allocation (Dahl 2003, in the
    manner of Jain & Neal 2004): ``attempts`` per record, in each component of 3 records or
    more. Two records ``i, j`` of a component are drawn; if they share a cluster, it is split
    by allocating its other records in random order to ``i``'s or ``j``'s part with the
    tempered Gibbs probabilities of the partial parts, else their clusters are merged and the
    allocation that would split them back is scored; the move is accepted with the
    Metropolis-Hastings ratio ``(π'/π)^{1/T} q(back) / q(forth)``. Returns
    ``(n_evaluations, n_accepted)``."""
    n = z.size
    Rs = np.zeros((F, n))
    Ns = np.zeros((F, n), dtype=np.int64)
    n_eval = 0
    n_accepted = 0
    largest = _largest(cstart)
    extra = np.zeros((2, F, largest + 1))
    part_i = np.empty(largest + 1, dtype=np.int64)
    part_j = np.empty(largest + 1, dtype=np.int64)
    rest = np.empty(largest, dtype=np.int64)
    joined = np.empty(largest + 1, dtype=np.int64)
    side = np.empty(largest, dtype=np.int64)
    for c in range(cstart.size - 1):
        lo, m, base = cstart[c], cstart[c + 1] - cstart[c], boff[c]
        if m < 3:
            continue
        for _ in range(int(attempts * m)):
            i = rng.integers(0, m)
            j = rng.integers(0, m - 1)
            j += j >= i
            zi, zj = z[lo + i], z[lo + j]
            split = zi == zj
            n_rest = 0
            for r in range(m):
                if r != i and r != j and (z[lo + r] == zi or z[lo + r] == zj):
                    rest[n_rest] = r
                    side[n_rest] = 0 if z[lo + r] == zi else 1
                    n_rest += 1
            perm = rng.permutation(n_rest)
            # Sequential allocation from {i} and {j}.
            for f in range(F):
                Rs[f, lo + i] = 0.0
                Ns[f, lo + i] = nonnull[f, lo + i]
                Rs[f, lo + j] = 0.0
                Ns[f, lo + j] = nonnull[f, lo + j]
            part_i[0], part_j[0] = i, j
            ci, cj = 1, 1
            extra[:, :, :] = 0.0
            hi_ = _cohesion(half_log_m, nonnull, Rs, Ns, lo, part_i, ci, F, extra, group,
                            rho, adj, exm, base, m)
            hj_ = _cohesion(half_log_m, nonnull, Rs, Ns, lo, part_j, cj, F, extra, group,
                            rho, adj, exm, base, m)
            log_q = 0.0
            for t in range(n_rest):
                r = rest[perm[t]]
                gi = _gain(adj, exm, nonnull, half_log_m, base, m, lo, F, part_i, ci, r, Rs,
                           Ns, extra, joined, hi_, group, rho)
                gj = _gain(adj, exm, nonnull, half_log_m, base, m, lo, F, part_j, cj, r, Rs,
                           Ns, extra, joined, hj_, group, rho)
                n_eval += (ci + cj) * F
                wi = (gi + math.log(ci)) * inv_t
                wj = (gj + math.log(cj)) * inv_t
                top = max(wi, wj)
                log_norm = top + math.log(math.exp(wi - top) + math.exp(wj - top))
                to_i = rng.random() < math.exp(wi - log_norm) if split else side[perm[t]] == 0
                if to_i:
                    log_q += wi - log_norm
                    _grow(adj, exm, nonnull, base, m, lo, F, part_i, ci, r, Rs, Ns)
                    part_i[ci] = r
                    ci += 1
                    hi_ += gi
                else:
                    log_q += wj - log_norm
                    _grow(adj, exm, nonnull, base, m, lo, F, part_j, cj, r, Rs, Ns)
                    part_j[cj] = r
                    cj += 1
                    hj_ += gj
            # The merged cluster: root sums from scratch.
            for q in range(ci):
                joined[q] = part_i[q]
            for q in range(cj):
                joined[ci + q] = part_j[q]
            size = ci + cj
            _root_sums(adj, exm, nonnull, base, m, lo, F, joined, size, z, False, Rs, Ns)
            extra[:, :, :] = 0.0
            h_merged = _cohesion(half_log_m, nonnull, Rs, Ns, lo, joined, size, F, extra, group,
                                 rho, adj, exm, base, m)
            n_eval += size * size * F
            log_split = (2 * log_alpha + math.lgamma(ci) + math.lgamma(cj) + hi_ + hj_)
            log_merged = log_alpha + math.lgamma(size) + h_merged
            if split:
                log_ratio = (log_split - log_merged) * inv_t - log_q
            else:
                log_ratio = (log_merged - log_split) * inv_t + log_q
            if math.log(rng.random()) < log_ratio:
                n_accepted += 1
                if split:
                    new = 0
                    while True:  # a label no record of the component holds
                        free = True
                        for r in range(m):
                            if z[lo + r] == new:
                                free = False
                                break
                        if free:
                            break
                        new += 1
                    for q in range(cj):
                        z[lo + part_j[q]] = new
                else:
                    for q in range(cj):
                        z[lo + part_j[q]] = zi
                # Root sums of the records of the clusters that changed.
                _root_sums(adj, exm, nonnull, base, m, lo, F, joined, size, z, True, R, N)
    return n_eval, n_accepted
