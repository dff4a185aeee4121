"""Compiled laws of racing (Alg. 1 and App. C.3 of Chen & Ghahramani 2016).

Everything a race does between two reward evaluations is compiled here, once: the schedules
(with the remainder rule below), the index draws, and the round updates (running sums, the
leader, the bounds ``G``, elimination). A whole race is one compiled call whatever its
rewards (:func:`race_shared_python`, :func:`race_independent_python` for a NumPy callable,
called back in object mode once per round, or per block of :data:`BLOCK_REWARDS` rewards in
a larger round: :func:`chunk_columns`; :func:`race_shared_compiled`,
:func:`race_independent_compiled` for a compiled per-datum function,
:class:`~sksubsample.algorithms.CompiledRewards`): both run the same round loop on the same
blocks, so they draw the same indices from the same random stream and apply the same
arithmetic to the same values: for the same generator state they return the same race, bit
for bit.

Rewards reach the updates raw, as the user's function returned them, with an affine map per
arm ``reward = scale[arm] * value + offset[arm]`` applied inside the update: this is how
:func:`sksubsample.algorithms.sample_discrete` adds the Gumbel perturbation ``eps_i / N`` and
scales per-state sums (Eq. 3), so both drivers see the same floating-point operations. An arm
with ``scale == 0`` has the constant reward ``offset`` and is never evaluated.

Index draws. A race on shared minibatches sums each round's rewards, so only the *set* of a
batch matters: each random round is a uniformly random subset of the indices not drawn yet,
in increasing order (:func:`~._subsample.draw_unmarked`: rejection against a bitmap of the
drawn indices, from a SplitMix64 stream that the caller seeds with one 64-bit word of its
generator; the batches are nested uniformly random subsets, the law of successive stretches
of a Fisher–Yates shuffle read as sets). An index costs a few nanoseconds, and the rewards
are read in one forward sweep. The independent-arms race (App. C.3) draws each arm's batch
from the arm's own sparse Fisher–Yates shuffle (:class:`~._subsample.MultiIndexSampler`'s
law) with the caller's generator.

Remainder rule
--------------
A round whose new indices would be at least :data:`REMAINDER_FRACTION` (half) of what is left
of a population takes *all* that is left instead, in increasing order and without drawing
random numbers; so a population with ``N <= 2 m^(1)`` is evaluated whole in the first round
(e.g. the clusters of a few mentions of entity resolution). Racing saves evaluations only by
stopping before the end of the schedule: once the next batch is as large as half the
remainder, one more comparison can save at most the rest of the population of the arms it
eliminates, while it costs the index draws of the batch, a round, and, when no arm leaves,
the remaining batches all the same. On the doubling schedule the rule applies once
``T >= N / 3``: it drops at most the last comparison before ``T = N`` and adds at most
``N - 2T <= N / 3`` evaluations to an arm that comparison would have eliminated.

The rule keeps the error guarantee. The rounds a race with the rule checks are a prefix of the
rounds of the schedule without it (the same nested random subsets), followed by
the exact round ``T = N`` where ``G = 0``. A sub-optimal arm is returned only if the best arm
is eliminated at a checked round, i.e. only if for some arm the empirical gap to the best
crosses the bound at one of those rounds. For ``B_Normal``
(§3.3.2, computed for the full doubling walk) that event is contained in the crossing event
over all the rounds of the unmodified schedule, of probability at most ``delta`` (Prop. 3);
the union bounds (Eq. 7, Eq. 27) split ``delta`` over the rounds before ``T = N`` of the
modified schedule, which is fixed by ``N`` and ``m^(1)`` alone, so the union is over exactly
the rounds that are checked. And when the whole population of every surviving arm is
evaluated, the result is the exact best arm, as in Alg. 1.
"""

from __future__ import annotations

import math
import threading

import numba
import numpy as np
from numba import objmode

from .._numba import njit
from ..sampling import FREE as _FREE
from ..sampling import (
    clear_marks,
    draw_unmarked,
    fisher_yates_sparse,
    take_marked,
    take_unmarked,
)
from ..sampling import mark_new as _mark_new
from ..sampling import slot as _slot
from ..sampling._fisher_yates import _rehash
from ._bounds import b_ebs_scalar, g_normal_scalar

__all__ = [
    "BLOCK_REWARDS",
    "REMAINDER_FRACTION",
    "arm_target",
    "chunk_columns",
    "compiled_block",
    "compiled_sums",
    "end_draws",
    "independent_draw",
    "independent_rounds",
    "independent_update",
    "min_max",
    "pop_callback",
    "push_callback",
    "race_independent_compiled",
    "race_independent_python",
    "race_shared_compiled",
    "race_shared_python",
    "shared_accumulate",
    "shared_decide",
    "shared_draw",
    "shared_rounds",
    "shared_stored",
    "shared_target",
    "whole_in_first_round",
    "work_size",
]

#: A round whose new indices would be at least this share of what is left of a population
#: evaluates the rest of it instead (module docstring).
REMAINDER_FRACTION = 0.5

# Status codes returned by the kernels.
CONTINUE, DONE, ALL_NEG_INF, BAD_VALUE = 0, 1, 2, 3
# Bound codes.
NORMAL, EBS = 0, 1
# Fields of the integer state ``ints``.
N_ALIVE, COUNT, ROUND, LEADER, BEST, ENTRIES, TARGET, MARKED = 0, 1, 2, 3, 4, 5, 6, 7
N_INTS = 8
# Fields of ``config`` (integers) and ``bconf`` (floats).
POPULATION, FIRST_BATCH, PAIRWISE, BOUND = 0, 1, 2, 3
B_CONST, DELTA = 0, 1
# Rows of ``stats`` (one column per arm).
SHIFT, SUM_R, SUM_R2, SUM_D, SUM_D2 = 0, 1, 2, 3, 4
N_STATS = 5


# ----------------------------------------------------------------------------- schedules


@njit(inline="always")
def _remainder_rule(target, count, n):
    """``n`` when the batch ``target - count`` is a large share of the ``n - count`` left."""
    if target < n and target - count >= REMAINDER_FRACTION * (n - count):
        return n
    return target


@njit
def shared_target(t, count, n, first_batch):
    """``T^(t)`` of the shared schedule of Alg. 1 after ``count`` rewards per arm.

    ``T^(1) = m^(1)`` and ``T^(t) = min(2 T^(t-1), N)``, with the remainder rule.
    """
    target = first_batch if t == 1 else 2 * count
    return _remainder_rule(min(target, n), count, n)


@njit
def arm_target(t, count, n, first_batch):
    """Arm ``i``'s cumulative sample size in round ``t`` (App. C.3), with the remainder rule.

    ``min(m^(1), N_i)`` rewards, then ``max(1, ceil((N_i - m^(1)) / 10))`` more, then doubling
    up to ``N_i``.
    """
    if t == 1:
        target = min(first_batch, n)
    elif t == 2:
        target = min(n, count + max(1, (n - count + 9) // 10))
    else:
        target = min(2 * count, n)
    return _remainder_rule(target, count, n)


@njit
def min_max(sizes):
    """``(min, max)`` of a non-empty integer array in one pass (cheaper than two reductions
    for the few arms of a typical race)."""
    smallest = largest = sizes[0]
    for i in range(1, sizes.size):
        smallest = min(smallest, sizes[i])
        largest = max(largest, sizes[i])
    return smallest, largest


@njit
def whole_in_first_round(sizes, first_batch):
    """Whether the first round takes every population whole (by the remainder rule).

    The first round's target is the same for the shared and the per-arm schedules; a
    population of at most one reward (a state without factors) is whole.
    """
    for i in range(sizes.size):
        n = max(sizes[i], 1)
        if _remainder_rule(min(first_batch, n), 0, n) < n:
            return False
    return True


@njit
def shared_rounds(n, first_batch):
    """``t*``: the rounds of the shared schedule, the last one at ``T = N``."""
    t = 0
    count = 0
    while count < n:
        t += 1
        count = shared_target(t, count, n, first_batch)
    return t


@njit
def shared_stored(n, first_batch):
    """The largest ``T < N`` of the shared schedule (0 if the first round takes all of it):
    the rewards per arm that a pairwise race may have to store."""
    t = 0
    count = 0
    while True:
        t += 1
        target = shared_target(t, count, n, first_batch)
        if target >= n:
            return count
        count = target


@njit
def independent_rounds(sizes, first_batch):
    """``t*``: the rounds until every arm's schedule has reached its ``N_i``."""
    longest = 0
    for i in range(sizes.size):
        t = 0
        count = 0
        while count < sizes[i]:
            t += 1
            count = arm_target(t, count, sizes[i], first_batch)
        longest = max(longest, t)
    return longest


# ----------------------------------------------------------------------------- index draws


@njit
def _grown_table(keys, values, n_entries):
    """A sparse-shuffle table with room for ``n_entries`` swaps holding those of ``keys``
    (the capacity rule of :func:`~._subsample.new_table`)."""
    capacity = 16
    while capacity < 2 * n_entries:
        capacity *= 2
    new_keys = np.full(capacity, _FREE, dtype=np.int64)
    new_values = np.empty(capacity, dtype=np.int64)
    if keys.size:
        _rehash(keys, values, new_keys, new_values)
    return new_keys, new_values


@njit
def _sorted_rest(n, count, keys, values, offset, out, bits):
    """The indices of ``range(n)`` not among the first ``count`` of its sparse shuffle (the
    table at ``offset``), ascending. ``bits`` is a zero bitmap of at least ``n`` bits, left
    zero."""
    if keys.size:
        for p in range(count, n):
            s = _slot(keys, offset + p)
            _mark_new(bits, values[s] if keys[s] == offset + p else p)
    else:  # nothing was shuffled: positions count..n-1 hold their own values
        for p in range(count, n):
            out[p - count] = p
        return
    take_marked(bits, n, out)


@njit
def _sort_dense_batch(out, n, bits):
    """Sort a batch of distinct indices of ``range(n)`` in place when it holds at least an
    eighth of them, in ``O(m + n / 64)`` (``bits``: a zero bitmap of at least ``n`` bits, left
    zero); sparser batches are left as drawn (their reads miss the cache anyway)."""
    m = out.size
    if 8 * m < n:
        return
    for k in range(m):
        _mark_new(bits, out[k])
    take_marked(bits, n, out)


@njit
def shared_draw(state, ints, config, drawn, before, idx):
    """The indices of the next round of a shared race: ``(batch, state)``.

    A random round draws the batch uniformly without replacement from the indices not drawn
    yet (:func:`~._subsample.draw_unmarked`, with the SplitMix64 generator state ``state``);
    a round that reaches ``N`` (by the schedule or the remainder rule) takes every index not
    drawn yet, without random numbers. Either way the batch is in increasing order, so the
    reward function reads its data in one forward sweep. Batches are written one after the
    other into ``idx`` (room for ``N`` indices): ``batch = idx[count:target]``, and the
    indices marked in the bitmap ``drawn`` are ``idx[:ints[MARKED]]`` (:func:`end_draws`
    clears them). ``before`` is a zero bitmap of ``N`` bits (left zero).
    """
    n = config[POPULATION]
    count = ints[COUNT]
    target = shared_target(ints[ROUND] + 1, count, n, config[FIRST_BATCH])
    ints[TARGET] = target
    out = idx[count:target]
    if target == n:
        take_unmarked(drawn, n, out)
    else:
        state = draw_unmarked(state, n, drawn, before, out)
        ints[MARKED] = target
    return out, state


@njit
def end_draws(ints, config, drawn, idx):
    """Clear the bitmap of drawn indices at the end of a race (for the next race)."""
    clear_marks(drawn, idx[:ints[MARKED]], config[POPULATION])


@njit
def independent_draw(rng, ints, config, sizes, starts, counts, alive, keys, values, bits):
    """The indices of the next round of an independent-arms race.

    Returns ``(idx, lengths, drawing, keys, values)``: the arms that draw this round (alive,
    population not exhausted, in increasing order), their batches concatenated in that order
    and the batch lengths. Arm ``i``'s random batch is the next stretch of its own shuffle,
    stored in one table at offset ``starts[i]`` (the law of
    :class:`~._subsample.MultiIndexSampler`); a batch that reaches ``N_i`` takes the indices
    not drawn yet, ascending, without random numbers. ``bits`` is a zero bitmap of at least
    ``max(sizes)`` bits, left zero.
    """
    t = ints[ROUND] + 1
    n_alive = ints[N_ALIVE]
    first_batch = config[FIRST_BATCH]
    drawing = np.empty(n_alive, dtype=np.int64)
    lengths = np.empty(n_alive, dtype=np.int64)
    n_drawing = 0
    n_random = 0
    total = 0
    for a in range(n_alive):
        arm = alive[a]
        count = counts[arm]
        n = sizes[arm]
        if count >= n:
            continue
        m = arm_target(t, count, n, first_batch) - count
        drawing[n_drawing] = arm
        lengths[n_drawing] = m
        n_drawing += 1
        total += m
        if count + m < n:
            n_random += m
    if n_random and 2 * (ints[ENTRIES] + n_random) > keys.size:
        keys, values = _grown_table(keys, values, ints[ENTRIES] + n_random)
    ints[ENTRIES] += n_random
    out = np.empty(total, dtype=np.int64)
    start = 0
    for j in range(n_drawing):
        arm = drawing[j]
        m = lengths[j]
        count = counts[arm]
        n = sizes[arm]
        if count + m < n:
            fisher_yates_sparse(rng, n, count, m, keys, values, out[start:start + m], starts[arm])
            _sort_dense_batch(out[start:start + m], n, bits)
        else:
            _sorted_rest(n, count, keys, values, starts[arm], out[start:start + m], bits)
        counts[arm] = count + m
        start += m
    return out, lengths[:n_drawing], drawing[:n_drawing], keys, values


# ----------------------------------------------------------------------------- round updates


@njit(inline="always")
def _has_neg_inf(values, start, stop):
    for k in range(start, stop):
        if values[k] == -math.inf:
            return True
    return False


@njit(inline="always")
def _block_sum(values, start, stop, scale, offset):
    """``sum_k scale * values[k] + offset`` with four partial sums (independent chains)."""
    s0 = s1 = s2 = s3 = 0.0
    k = start
    while k + 4 <= stop:
        s0 += scale * values[k] + offset
        s1 += scale * values[k + 1] + offset
        s2 += scale * values[k + 2] + offset
        s3 += scale * values[k + 3] + offset
        k += 4
    while k < stop:
        s0 += scale * values[k] + offset
        k += 1
    return (s0 + s1) + (s2 + s3)


@njit(inline="always")
def _block_moments(values, start, stop, scale, offset):
    """Sums of ``r`` and ``r²`` for ``r = scale * values[k] + offset``."""
    s0 = s1 = q0 = q1 = 0.0
    k = start
    while k + 2 <= stop:
        r0 = scale * values[k] + offset
        r1 = scale * values[k + 1] + offset
        s0 += r0
        s1 += r1
        q0 += r0 * r0
        q1 += r1 * r1
        k += 2
    if k < stop:
        r0 = scale * values[k] + offset
        s0 += r0
        q0 += r0 * r0
    return s0 + s1, q0 + q1


@njit(inline="always")
def _store_sum(values, scale, offset, row, at):
    """Store ``r = scale * values[k] + offset`` at ``row[at + k]``; return their sum."""
    s0 = s1 = 0.0
    m = values.size
    k = 0
    while k + 2 <= m:
        r0 = scale * values[k] + offset
        r1 = scale * values[k + 1] + offset
        row[at + k] = r0
        row[at + k + 1] = r1
        s0 += r0
        s1 += r1
        k += 2
    if k < m:
        r0 = scale * values[k] + offset
        row[at + k] = r0
        s0 += r0
    return s0 + s1


@njit(inline="always")
def _store_sum_differences(values, scale, offset, row, at, lead):
    """:func:`_store_sum` of ``values`` and the sums of ``d`` and ``d²`` for
    ``d = lead[k] - r`` (:func:`_stored_difference_moments`), in one pass.
    """
    m = values.size
    s0 = s1 = 0.0  # the two chains of _store_sum
    d0 = d1 = d2 = d3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    k = 0
    while k + 4 <= m:
        r0 = scale * values[k] + offset
        r1 = scale * values[k + 1] + offset
        r2 = scale * values[k + 2] + offset
        r3 = scale * values[k + 3] + offset
        row[at + k] = r0
        row[at + k + 1] = r1
        row[at + k + 2] = r2
        row[at + k + 3] = r3
        s0 += r0
        s1 += r1
        s0 += r2
        s1 += r3
        e0 = lead[k] - r0
        e1 = lead[k + 1] - r1
        e2 = lead[k + 2] - r2
        e3 = lead[k + 3] - r3
        d0 += e0
        d1 += e1
        d2 += e2
        d3 += e3
        q0 += e0 * e0
        q1 += e1 * e1
        q2 += e2 * e2
        q3 += e3 * e3
        k += 4
    while k < m:
        r0 = scale * values[k] + offset
        row[at + k] = r0
        if k % 2 == 0:
            s0 += r0
        else:
            s1 += r0
        e0 = lead[k] - r0
        d0 += e0
        q0 += e0 * e0
        k += 1
    return s0 + s1, (d0 + d1) + (d2 + d3), (q0 + q1) + (q2 + q3)


@njit(inline="always")
def _stored_difference_moments(lead, values):
    """Sums of ``d`` and ``d²`` for ``d = lead[k] - values[k]`` (stored rewards)."""
    s0 = s1 = s2 = s3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    m = values.size
    k = 0
    while k + 4 <= m:
        d0 = lead[k] - values[k]
        d1 = lead[k + 1] - values[k + 1]
        d2 = lead[k + 2] - values[k + 2]
        d3 = lead[k + 3] - values[k + 3]
        s0 += d0
        s1 += d1
        s2 += d2
        s3 += d3
        q0 += d0 * d0
        q1 += d1 * d1
        q2 += d2 * d2
        q3 += d3 * d3
        k += 4
    while k < m:
        d0 = lead[k] - values[k]
        s0 += d0
        q0 += d0 * d0
        k += 1
    return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)


@njit(inline="always")
def _difference_moments(lead, lead_scale, lead_offset, values, scale, offset):
    """Sums of ``d`` and ``d²`` for ``d = (lead_scale * lead[k] + lead_offset) - (scale *
    values[k] + offset)``: the differences of two arms' rewards computed from their values."""
    s0 = s1 = s2 = s3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    m = values.size
    k = 0
    while k + 4 <= m:
        d0 = (lead_scale * lead[k] + lead_offset) - (scale * values[k] + offset)
        d1 = (lead_scale * lead[k + 1] + lead_offset) - (scale * values[k + 1] + offset)
        d2 = (lead_scale * lead[k + 2] + lead_offset) - (scale * values[k + 2] + offset)
        d3 = (lead_scale * lead[k + 3] + lead_offset) - (scale * values[k + 3] + offset)
        s0 += d0
        s1 += d1
        s2 += d2
        s3 += d3
        q0 += d0 * d0
        q1 += d1 * d1
        q2 += d2 * d2
        q3 += d3 * d3
        k += 4
    while k < m:
        d0 = (lead_scale * lead[k] + lead_offset) - (scale * values[k] + offset)
        s0 += d0
        q0 += d0 * d0
        k += 1
    return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)


#: Rewards per block: a round is evaluated (and a NumPy callable called) in blocks of about
#: this many rewards, which bounds the memory of a round of a large population.
BLOCK_REWARDS = 1 << 18


@njit
def chunk_columns(n_alive):
    """Indices per block of rewards: a round is evaluated in blocks of about
    :data:`BLOCK_REWARDS` rewards (at least 1024 indices)."""
    return max(1024, BLOCK_REWARDS // max(n_alive, 1))


def work_size(n_arms):
    """The values a block of a race of ``n_arms`` arms may hold (:func:`chunk_columns`)."""
    return max(BLOCK_REWARDS, 1024 * n_arms)


@njit(fastmath={"reassoc"})
def _accumulate(block, ints, config, scale, offset, alive, stats, buffer, dead):
    """The sums of :func:`shared_accumulate` for one block, dead arms known.

    Compiled with reassociation allowed, so that the block sums run in vector registers
    (about 0.9 instead of 1.2 ns per stored reward, 0.35 instead of 0.64 ns per reward of a
    last round, measured on the machine this was written on): their rounding is that of this
    one compiled function, so both drivers of a race still sum the same values the same way.
    """
    n_alive = ints[N_ALIVE]
    count = ints[COUNT]
    m = block.shape[1]
    n = config[POPULATION]
    pairwise = config[PAIRWISE] != 0
    differences = pairwise and ints[TARGET] < n
    store = differences and n_alive > 2
    if differences and ints[LEADER] < 0:
        ints[LEADER] = alive[0]  # a provisional reference for the first round
    shift = stats[SHIFT]
    sum_r = stats[SUM_R]
    sum_r2 = stats[SUM_R2]
    sum_d = stats[SUM_D]
    sum_d2 = stats[SUM_D2]
    ref = ints[LEADER]
    ref_slot = -1
    for a in range(n_alive):
        arm = alive[a]
        if arm == ref:
            ref_slot = a
        if not dead[arm] and count == 0:
            shift[arm] = _block_sum(block[a], 0, m, scale[arm], offset[arm]) / m
    differences = differences and not dead[ref]
    if differences:
        # The reference first: the other arms' differences read its rewards.
        sc = scale[ref]
        shifted = offset[ref] - shift[ref]
        if store:
            sum_r[ref] += _store_sum(block[ref_slot], sc, shifted, buffer[ref], count)
        else:
            sum_r[ref] += _block_sum(block[ref_slot], 0, m, sc, shifted)
    for a in range(n_alive):
        arm = alive[a]
        if dead[arm] or (differences and arm == ref):
            continue
        row = block[a]
        sc = scale[arm]
        # The shifted reward r = scale * value + (offset - shift), everywhere.
        shifted = offset[arm] - shift[arm]
        if store and differences:
            # One pass for the stored rewards, their sum and the differences to the reference.
            s, ds, dq = _store_sum_differences(row, sc, shifted, buffer[arm], count,
                                               buffer[ref, count:count + m])
            sum_r[arm] += s
            sum_d[arm] += ds
            sum_d2[arm] += dq
        elif store:
            sum_r[arm] += _store_sum(row, sc, shifted, buffer[arm], count)
        elif pairwise:
            sum_r[arm] += _block_sum(row, 0, m, sc, shifted)
            if differences:
                ds, dq = _difference_moments(block[ref_slot], scale[ref],
                                             offset[ref] - shift[ref], row, sc, shifted)
                sum_d[arm] += ds
                sum_d2[arm] += dq
        else:
            s, q = _block_moments(row, 0, m, sc, shifted)
            sum_r[arm] += s
            sum_r2[arm] += q


@njit
def _sums_finite(ints, alive, stats, dead):
    """Whether every live arm's running sums are finite."""
    for a in range(ints[N_ALIVE]):
        arm = alive[a]
        if dead[arm]:
            continue
        for row in range(N_STATS):
            if not math.isfinite(stats[row, arm]):
                return False
    return True


@njit
def _mark_dead(block, ints, alive, scale, dead):
    """Mark ``dead`` the arms whose block holds ``-inf`` (their mean is ``-inf``); returns
    :data:`BAD_VALUE` when a value is NaN or ``+inf`` (or when every value is finite: then
    only an overflow of the sums can have made them infinite)."""
    found = False
    for a in range(ints[N_ALIVE]):
        arm = alive[a]
        if dead[arm] or scale[arm] == 0.0:
            continue
        row = block[a]
        for k in range(row.size):
            v = row[k]
            if v != v or v == math.inf:
                return BAD_VALUE
            if v == -math.inf:
                dead[arm] = True
                found = True
    return CONTINUE if found else BAD_VALUE


@njit
def shared_accumulate(block, ints, config, scale, offset, alive, n_sampled, stats, buffer,
                      dead, saved):
    """Add one block of a round of Alg. 1 on shared minibatches to the running sums.

    ``block[a, k]`` is the raw value of arm ``alive[a]`` at the block's ``k``-th index
    (``scale * value + offset`` is its reward); a round is one or more blocks, in draw order.
    The sums are of the rewards shifted by each arm's first-block mean, so that variances do
    not suffer from cancellation when rewards share a large offset, as log-likelihood terms
    do. For the pairwise variance, the differences to the reference arm ``ints[LEADER]`` (the
    last leader) are summed as well, and, while more than two arms survive and the round is
    not the last, the shifted rewards are stored in ``buffer`` (row ``i`` for arm ``i``, in
    draw order; room for every round before ``T = N``: :func:`shared_stored`) so that the
    differences can be summed again if the leader changes.

    Values are not checked one by one: a NaN or an infinite value makes its arm's sums
    non-finite, which is checked once per arm. Only then is the block scanned: an arm with a
    ``-inf`` value is marked ``dead`` (its mean is ``-inf``) and the block is summed again
    from the sums saved in ``saved`` before it, without the dead arms; NaN or ``+inf``
    returns :data:`BAD_VALUE`. Returns :data:`CONTINUE` otherwise.
    """
    saved[:, :] = stats
    leader = ints[LEADER]
    _accumulate(block, ints, config, scale, offset, alive, stats, buffer, dead)
    if not _sums_finite(ints, alive, stats, dead):
        if _mark_dead(block, ints, alive, scale, dead) == BAD_VALUE:
            return BAD_VALUE
        stats[:, :] = saved
        ints[LEADER] = leader
        _accumulate(block, ints, config, scale, offset, alive, stats, buffer, dead)
        if not _sums_finite(ints, alive, stats, dead):
            return BAD_VALUE
    m = block.shape[1]
    for a in range(ints[N_ALIVE]):
        n_sampled[alive[a]] += m
    ints[COUNT] += m
    return CONTINUE


@njit
def shared_decide(ints, config, bconf, ranges, alive, out_round, stats, buffer, dead):
    """End a round of Alg. 1 on shared minibatches (after :func:`shared_accumulate`).

    Eliminates every arm ``i`` whose gap to the leader ``x`` exceeds ``G`` (Eq. 5: the pairwise
    bound on ``sigma_{x,i}`` or the sum of marginal bounds ``G_x + G_i``, Eq. 9 or Eq. 6-7;
    ``G = 0`` at ``T = N``, where the leader is returned) and every dead arm, and records the
    round in which each arm left. When the leader is not the reference of the pairwise sums,
    they are summed again from ``buffer`` (more than two arms) or turned around (two arms: the
    new sums are the old ones negated, exactly, since ``fl(a - b) = -fl(b - a)``).

    Returns :data:`CONTINUE`, :data:`DONE` (``ints[BEST]`` is the best arm) or
    :data:`ALL_NEG_INF`.
    """
    n_alive = ints[N_ALIVE]
    total = ints[COUNT]
    t = ints[ROUND] + 1
    ints[ROUND] = t
    n = config[POPULATION]
    pairwise = config[PAIRWISE] != 0
    shift = stats[SHIFT]
    sum_r = stats[SUM_R]
    sum_r2 = stats[SUM_R2]
    sum_d = stats[SUM_D]
    sum_d2 = stats[SUM_D2]
    mean = np.empty(n_alive)
    n_dead = 0
    for a in range(n_alive):
        arm = alive[a]
        if dead[arm]:
            mean[a] = -math.inf
            n_dead += 1
        else:
            mean[a] = sum_r[arm] / total + shift[arm]
    if n_dead == n_alive:
        return ALL_NEG_INF
    x = 0
    for a in range(1, n_alive):
        if mean[a] > mean[x]:
            x = a
    lead = alive[x]
    if total >= n:
        # T = N: every mean is exact and G = 0 (Alg. 1), so the leader is the true best.
        for a in range(n_alive):
            if a != x:
                out_round[alive[a]] = t
        alive[0] = lead
        ints[N_ALIVE] = 1
        ints[BEST] = lead
        return DONE
    if pairwise:
        ref = ints[LEADER]
        if lead != ref:
            if n_alive > 2:
                lead_row = buffer[lead, :total]
                for a in range(n_alive):
                    arm = alive[a]
                    if arm == lead or dead[arm]:
                        continue
                    s, q = _stored_difference_moments(lead_row, buffer[arm, :total])
                    sum_d[arm] = s
                    sum_d2[arm] = q
            elif not dead[ref]:
                sum_d[ref] = -sum_d[lead]
                sum_d2[ref] = sum_d2[lead]
            ints[LEADER] = lead
    bound = config[BOUND]
    b = bconf[B_CONST]
    delta = bconf[DELTA]
    g_lead = 0.0
    if not pairwise:
        g_lead = _marginal_g(bound, b, delta, total, n, sum_r[lead], sum_r2[lead], ranges[lead])
    kept = 0
    for a in range(n_alive):
        arm = alive[a]
        keep = True
        if a != x:
            if dead[arm]:
                keep = False
            else:
                gap = mean[x] - mean[a]
                if pairwise:
                    mean_d = sum_d[arm] / total
                    sd = math.sqrt(max(sum_d2[arm] / total - mean_d * mean_d, 0.0))
                    if bound == NORMAL:
                        threshold = g_normal_scalar(total, n, sd, b)
                    else:
                        threshold = b_ebs_scalar(delta, total, n, sd, ranges[lead] + ranges[arm])
                else:
                    threshold = g_lead + _marginal_g(bound, b, delta, total, n, sum_r[arm],
                                                     sum_r2[arm], ranges[arm])
                keep = not gap > threshold
        if keep:
            alive[kept] = arm
            kept += 1
        else:
            out_round[arm] = t
    ints[N_ALIVE] = kept
    if kept == 1:
        ints[BEST] = alive[0]
        return DONE
    return CONTINUE


@njit(inline="always")
def _marginal_g(bound, b, delta, total, n, sum_r, sum_r2, reward_range):
    """``G_i`` of one arm from its running sums (the marginal variance of Eq. 5)."""
    mean_c = sum_r / total
    sd = math.sqrt(max(sum_r2 / total - mean_c * mean_c, 0.0))
    if bound == NORMAL:
        return g_normal_scalar(total, n, sd, b)
    return b_ebs_scalar(delta, total, n, sd, reward_range)


@njit
def independent_update(values, lengths, drawing, scan, ints, config, bconf, scale, offset,
                       ranges, sizes, counts, alive, out_round, stats):
    """One round of racing with independently subsampled arms (App. C.3, Eq. 26-27).

    ``values`` holds the raw values of the arms ``drawing`` (batches of ``lengths``,
    concatenated); ``counts`` already include them. Each arm's first batch sets its shift.
    The gap of arm ``i`` to the leader ``x`` is compared with ``B sqrt(G_x² + G_i²)`` (Eq. 26
    with ``B`` of Eq. 27) or ``G_x + G_i`` (EBS), where an exhausted arm has ``G = 0``. When all
    survivors are exact they are tied at the best mean and the lowest index wins, as argmax
    would. Returns :data:`CONTINUE`, :data:`DONE` or :data:`ALL_NEG_INF`.
    """
    t = ints[ROUND] + 1
    ints[ROUND] = t
    shift = stats[SHIFT]
    sum_r = stats[SUM_R]
    sum_r2 = stats[SUM_R2]
    dead = np.zeros(sizes.size, dtype=np.bool_)
    start = 0
    for j in range(drawing.size):
        arm = drawing[j]
        stop = start + lengths[j]
        if scan and _has_neg_inf(values, start, stop):
            dead[arm] = True
        else:
            sc = scale[arm]
            off = offset[arm]
            if counts[arm] == lengths[j]:
                shift[arm] = _block_sum(values, start, stop, sc, off) / lengths[j]
            s, q = _block_moments(values, start, stop, sc, off - shift[arm])
            sum_r[arm] += s
            sum_r2[arm] += q
        start = stop
    n_alive = ints[N_ALIVE]
    mean = np.empty(n_alive)
    # Normal: G_i² per unit B (Eq. 26); EBS: G_i (Eq. 6). Zero for an exhausted arm.
    spread = np.zeros(n_alive)
    all_dead = True
    bound = config[BOUND]
    delta = bconf[DELTA]
    for a in range(n_alive):
        arm = alive[a]
        if dead[arm]:
            mean[a] = -math.inf
            continue
        all_dead = False
        n = counts[arm]
        mean_c = sum_r[arm] / n
        mean[a] = mean_c + shift[arm]
        if n >= sizes[arm]:
            continue
        sd = math.sqrt(max(sum_r2[arm] / n - mean_c * mean_c, 0.0))
        if bound == NORMAL:
            g = g_normal_scalar(n, sizes[arm], sd, 1.0)
            spread[a] = g * g
        else:
            spread[a] = b_ebs_scalar(delta, n, sizes[arm], sd, ranges[arm])
    if all_dead:
        return ALL_NEG_INF
    x = 0
    for a in range(1, n_alive):
        if mean[a] > mean[x]:
            x = a
    b = bconf[B_CONST]
    kept = 0
    all_exact = True
    for a in range(n_alive):
        arm = alive[a]
        keep = True
        if a != x:
            if dead[arm]:
                keep = False
            else:
                if bound == NORMAL:
                    threshold = b * math.sqrt(spread[x] + spread[a])
                else:
                    threshold = spread[x] + spread[a]
                keep = not mean[x] - mean[a] > threshold
        if keep:
            alive[kept] = arm
            kept += 1
            all_exact = all_exact and counts[arm] >= sizes[arm]
        else:
            out_round[arm] = t
    if kept > 1 and all_exact:
        # Exact survivors have G = 0, so they are tied at the best mean: the lowest index
        # wins, as argmax would.
        for a in range(1, kept):
            out_round[alive[a]] = t
        kept = 1
    ints[N_ALIVE] = kept
    if kept == 1:
        ints[BEST] = alive[0]
        return DONE
    return CONTINUE


# ----------------------------------------------------------------------------- whole races
#
# A race runs in one compiled call, whatever its rewards: compiled rewards are computed in the
# round loop, a NumPy callable is called back from it in object mode (a few microseconds per
# block). A race thus crosses from Python into compiled code once: a generator passed from
# Python costs about 15 microseconds to unbox, more than a cheap round.


_callbacks = threading.local()


def push_callback(callback):
    """Register ``callback`` for the race about to run in this thread; returns its handle.

    A race started from inside another race's callable (same thread) gets the next handle.
    """
    stack = getattr(_callbacks, "stack", None)
    if stack is None:
        stack = _callbacks.stack = []
    stack.append(callback)
    return len(stack) - 1


def pop_callback():
    """Unregister the callback of the race that just ended in this thread."""
    _callbacks.stack.pop()


def _call_back(handle, *arrays):
    """Run the registered callback ``handle`` (in object mode, from a compiled race)."""
    return _callbacks.stack[handle](*arrays)


@numba.njit(cache=True)  # object mode holds the GIL: without nogil, which numba warns about
def _shared_block_python(handle, alive, n_alive, idx):
    """The values of the NumPy callable registered as ``handle`` (Python:
    ``callback(arms, idx) -> values``, C-contiguous, of shape ``(n_alive, idx.size)``)."""
    with objmode(values="float64[:, ::1]"):
        values = _call_back(handle, alive[:n_alive], idx)
    return values.size, values


@njit
def _shared_block(function, data, alive, n_alive, scale, idx, block):
    """The values of the surviving arms at a block of indices: ``(evaluations, values)``
    where ``values[a, k]`` is the value of arm ``alive[a]`` at ``idx[k]``.

    ``function`` is ``None`` for a NumPy callable, whose handle is ``data``
    (:func:`_shared_block_python`; numba compiles only the branch of the given type), else
    ``function(data, arm, index)``, computed into ``block``; an arm with ``scale == 0`` is then
    not evaluated (its values are 0, which its scale ignores). Values are checked by
    :func:`shared_accumulate`, not here.
    """
    if function is None:
        return _shared_block_python(data, alive, n_alive, idx)
    m = idx.size
    n_evaluations = 0
    for a in range(n_alive):
        arm = alive[a]
        row = block[a]
        if scale[arm] == 0.0:
            row[:] = 0.0
            continue
        n_evaluations += m
        for k in range(m):
            row[k] = float(function(data, arm, idx[k]))
    return n_evaluations, block


@njit(inline="always")  # compiled into each race: one compilation less per function
def _shared_race(function, data, seed, ints, config, bconf, scale, offset, ranges, alive,
                 out_round, n_sampled, stats, buffer, dead, drawn, before, idx, work):
    """The round loop of Alg. 1 on shared minibatches: per round :func:`shared_draw`, the
    values of each block (:func:`chunk_columns`, :func:`_shared_block`) with
    :func:`shared_accumulate`, then :func:`shared_decide`. Returns ``(status, n_evaluations)``.

    ``seed`` (``uint64``) starts the race's SplitMix64 stream of index draws; ``drawn`` and
    ``before`` are zero bitmaps of ``N`` bits (left zero), ``idx`` has room for ``N`` indices
    and ``work`` for :func:`work_size` values.
    """
    state = seed
    saved = np.empty_like(stats)
    n_evaluations = 0
    status = CONTINUE
    while status == CONTINUE:
        batch, state = shared_draw(state, ints, config, drawn, before, idx)
        n_alive = ints[N_ALIVE]
        columns = chunk_columns(n_alive)
        for start in range(0, batch.size, columns):
            stop = min(start + columns, batch.size)
            block = work[:n_alive * (stop - start)].reshape((n_alive, stop - start))
            n_block, block = _shared_block(function, data, alive, n_alive, scale,
                                           batch[start:stop], block)
            n_evaluations += n_block
            status = shared_accumulate(block, ints, config, scale, offset, alive, n_sampled,
                                       stats, buffer, dead, saved)
            if status != CONTINUE:
                break
        if status == CONTINUE:
            status = shared_decide(ints, config, bconf, ranges, alive, out_round, stats, buffer,
                                   dead)
    end_draws(ints, config, drawn, idx)
    return status, n_evaluations


def race_shared_compiled(function):
    """A whole shared race with rewards ``scale * function(data, arm, index) + offset``:
    ``race(data, seed, ints, ...)`` with the arguments of :func:`race_shared_python` after the
    handle (:func:`_shared_race`); :data:`BAD_VALUE` when ``function`` returned NaN or
    ``+inf``.

    ``function`` is a constant of the race, so a call does not type it (numba takes about
    10 microseconds to type a function passed as an argument). Compiled in each process for
    each ``function`` (code that calls a given function cannot be cached on disk); the laws it
    runs are cached.
    """

    @numba.njit(nogil=True)
    def race(data, seed, ints, config, bconf, scale, offset, ranges, alive, out_round,
             n_sampled, stats, buffer, dead, drawn, before, idx, work):
        return _shared_race(function, data, seed, ints, config, bconf, scale, offset, ranges,
                            alive, out_round, n_sampled, stats, buffer, dead, drawn, before, idx,
                            work)

    return race


@njit
def race_shared_python(handle, seed, ints, config, bconf, scale, offset, ranges, alive,
                       out_round, n_sampled, stats, buffer, dead, drawn, before, idx, work):
    """A whole shared race whose values come from the callback ``handle``
    (:func:`push_callback`): the race of :func:`race_shared_compiled` on the same values.
    Returns ``(status, n_evaluations)``; :data:`BAD_VALUE` when a value is NaN or ``+inf``."""
    return _shared_race(None, handle, seed, ints, config, bconf, scale, offset, ranges, alive,
                        out_round, n_sampled, stats, buffer, dead, drawn, before, idx, work)


@numba.njit(cache=True)  # object mode holds the GIL: without nogil, which numba warns about
def _independent_block_python(handle, drawing, lengths, idx, block):
    """Fill ``block`` with the values of the arms ``drawing`` from the callback ``handle``
    (Python: ``callback(arms, lengths, idx, block) -> (saw -inf, evaluations)``)."""
    with objmode(scan="boolean", n_evaluations="int64"):
        scan, n_evaluations = _call_back(handle, drawing, lengths, idx, block)
    return CONTINUE, scan, n_evaluations


@njit
def _independent_block(function, data, drawing, lengths, scale, idx, block):
    """The values of the arms ``drawing`` at their batches (concatenated in ``idx``): from the
    callback ``data`` when ``function`` is ``None``, else from ``function(data, arm, index)``
    (an arm with ``scale == 0`` then gets zeros). Returns ``(status, saw -inf, evaluations)``.
    """
    if function is None:
        return _independent_block_python(data, drawing, lengths, idx, block)
    n_evaluations = 0
    scan = False
    start = 0
    for j in range(drawing.size):
        arm = drawing[j]
        stop = start + lengths[j]
        if scale[arm] == 0.0:
            block[start:stop] = 0.0
        else:
            for k in range(start, stop):
                v = float(function(data, arm, idx[k]))
                if v != v or v == math.inf:
                    return BAD_VALUE, scan, n_evaluations
                scan = scan or v == -math.inf
                block[k] = v
            n_evaluations += stop - start
        start = stop
    return CONTINUE, scan, n_evaluations


@njit(inline="always")  # compiled into each race: one compilation less per function
def _independent_race(function, data, rng, ints, config, bconf, scale, offset, ranges, sizes,
                      starts, counts, alive, out_round, stats, bits):
    """The round loop of racing with independent arms (App. C.3): per round
    :func:`independent_draw`, the values (:func:`_independent_block`),
    :func:`independent_update`. Returns ``(status, n_evaluations)``."""
    keys = np.empty(0, dtype=np.int64)
    values = np.empty(0, dtype=np.int64)
    n_evaluations = 0
    while True:
        idx, lengths, drawing, keys, values = independent_draw(rng, ints, config, sizes, starts,
                                                               counts, alive, keys, values, bits)
        block = np.empty(idx.size)
        status, scan, n_block = _independent_block(function, data, drawing, lengths, scale, idx,
                                                   block)
        n_evaluations += n_block
        if status != CONTINUE:
            return status, n_evaluations
        status = independent_update(block, lengths, drawing, scan, ints, config, bconf, scale,
                                    offset, ranges, sizes, counts, alive, out_round, stats)
        if status != CONTINUE:
            return status, n_evaluations


def race_independent_compiled(function):
    """A whole independent-arms race with compiled rewards: ``race(data, rng, ints, ...)``
    with the arguments of :func:`race_independent_python` after the handle (see
    :func:`race_shared_compiled`)."""

    @numba.njit(nogil=True)
    def race(data, rng, ints, config, bconf, scale, offset, ranges, sizes, starts, counts, alive,
             out_round, stats, bits):
        return _independent_race(function, data, rng, ints, config, bconf, scale, offset,
                                 ranges, sizes, starts, counts, alive, out_round, stats, bits)

    return race


@njit
def race_independent_python(handle, rng, ints, config, bconf, scale, offset, ranges, sizes,
                            starts, counts, alive, out_round, stats, bits):
    """A whole independent-arms race with values from the callback ``handle``."""
    return _independent_race(None, handle, rng, ints, config, bconf, scale, offset, ranges,
                             sizes, starts, counts, alive, out_round, stats, bits)


# ----------------------------------------------------------------------------- compiled rewards


@njit(inline="always")
def _evaluate(function, data, arm, idx, start, stop, out, at):
    """``out[at + k - start] = function(data, arm, idx[k])``; returns (bad, saw -inf)."""
    neg_inf = False
    for k in range(start, stop):
        v = float(function(data, arm, idx[k]))
        if v != v or v == math.inf:
            return True, neg_inf
        if v == -math.inf:
            neg_inf = True
        out[at + k - start] = v
    return False, neg_inf


@njit
def compiled_block(function, data, scale, offset, arms, idx, out):
    """``out[a, k] = scale[arm] * function(data, arm, idx[k]) + offset[arm]`` for
    ``arm = arms[a]``; returns ``(bad, n_evaluations)``, ``bad`` for NaN or ``+inf``."""
    n_evaluations = 0
    for a in range(arms.size):
        arm = arms[a]
        sc = scale[arm]
        if sc == 0.0:
            out[a, :] = offset[arm]
            continue
        bad, _ = _evaluate(function, data, arm, idx, 0, idx.size, out[a], 0)
        if bad:
            return True, n_evaluations
        n_evaluations += idx.size
        for k in range(idx.size):
            out[a, k] = sc * out[a, k] + offset[arm]
    return False, n_evaluations


@njit
def compiled_sums(function, data, sizes, scale, offset, out):
    """``out[i] = sum_{n < sizes[i]} scale[i] * function(data, i, n) + offset[i]``.

    Four partial sums per arm keep the additions from waiting on each other. Returns
    ``(bad, n_evaluations)``, ``bad`` for NaN or ``+inf``.
    """
    n_evaluations = 0
    for i in range(sizes.size):
        n = sizes[i]
        sc = scale[i]
        off = offset[i]
        if sc == 0.0:
            out[i] = n * off
            continue
        s0 = s1 = s2 = s3 = 0.0
        k = 0
        bad = False
        while k + 4 <= n:
            v0 = float(function(data, i, k))
            v1 = float(function(data, i, k + 1))
            v2 = float(function(data, i, k + 2))
            v3 = float(function(data, i, k + 3))
            bad |= v0 != v0 or v0 == math.inf or v1 != v1 or v1 == math.inf
            bad |= v2 != v2 or v2 == math.inf or v3 != v3 or v3 == math.inf
            s0 += sc * v0 + off
            s1 += sc * v1 + off
            s2 += sc * v2 + off
            s3 += sc * v3 + off
            k += 4
        while k < n:
            v0 = float(function(data, i, k))
            bad |= v0 != v0 or v0 == math.inf
            s0 += sc * v0 + off
            k += 1
        if bad:
            return True, n_evaluations
        n_evaluations += n
        out[i] = (s0 + s1) + (s2 + s3)
    return False, n_evaluations
