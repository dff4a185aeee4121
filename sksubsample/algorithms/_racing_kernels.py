"""Compiled laws of racing (Alg. 1 and App. C.3 of Chen & Ghahramani 2016).

Everything a race does between two reward evaluations is compiled here, once: the schedules
(with the remainder rule below), the index draws, and the round updates (running sums, the
leader, the bounds ``G``, elimination). :func:`sksubsample.algorithms.race` drives them from
Python when the rewards are a NumPy callable (per round: one call of :func:`shared_draw` or
:func:`independent_draw`, the callable on the round's indices (in blocks of about 2^16
rewards: :func:`chunk_columns`) with :func:`shared_accumulate` after each block, then
:func:`shared_decide`; or :func:`independent_update`), and hands the whole race to
:func:`race_shared_compiled` or :func:`race_independent_compiled` when the rewards are a
compiled per-datum function (:class:`~sksubsample.algorithms.CompiledRewards`), which run the
same functions in the same order without returning to Python. Both drivers therefore draw the
same indices from the same random stream and apply the same arithmetic to the same values:
for the same generator state they return the same race, bit for bit.

Rewards reach the updates raw, as the user's function returned them, with an affine map per
arm ``reward = scale[arm] * value + offset[arm]`` applied inside the update: this is how
:func:`sksubsample.algorithms.sample_discrete` adds the Gumbel perturbation ``eps_i / N`` and
scales per-state sums (Eq. 3), so both drivers see the same floating-point operations. An arm
with ``scale == 0`` has the constant reward ``offset`` and is never evaluated.

Indices follow the package's one index-sampling law (:mod:`._subsample`): a round's random
batch is the next stretch of a Fisher–Yates shuffle of the population, drawn by
:func:`~._subsample.fisher_yates_sparse` while the race has drawn at most a quarter of the
population and by :func:`~._subsample.fisher_yates_dense` after (the representation policy of
:class:`~._subsample.IndexSampler`, which only changes the cost).

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
rounds of the schedule without it (the same nested stretches of the same shuffle), followed by
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

import numpy as np

from ._bounds import b_ebs_scalar, g_normal_scalar
from ._numba import njit
from ._subsample import _FREE, _densify, _rehash, _slot, fisher_yates_dense, fisher_yates_sparse

__all__ = [
    "REMAINDER_FRACTION",
    "arm_target",
    "chunk_columns",
    "compiled_block",
    "compiled_sums",
    "independent_draw",
    "independent_rounds",
    "independent_update",
    "min_max",
    "race_independent_compiled",
    "race_shared_compiled",
    "shared_accumulate",
    "shared_decide",
    "shared_draw",
    "shared_rounds",
    "shared_stored",
    "shared_target",
    "whole_in_first_round",
]

#: A round whose new indices would be at least this share of what is left of a population
#: evaluates the rest of it instead (module docstring).
REMAINDER_FRACTION = 0.5

# Status codes returned by the kernels.
CONTINUE, DONE, ALL_NEG_INF, BAD_VALUE = 0, 1, 2, 3
# Bound codes.
NORMAL, EBS = 0, 1
# Fields of the integer state ``ints``.
N_ALIVE, COUNT, ROUND, LEADER, BEST, ENTRIES, TARGET = 0, 1, 2, 3, 4, 5, 6
N_INTS = 7
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


@njit(inline="always")
def _compact(marked, out):
    """Write the positions of the ``out.size`` true entries of ``marked`` into ``out``, in
    increasing order.

    Without a data-dependent branch (the pattern is random, so a branch would be mispredicted
    half of the time): every position is written at the next free place, which only a marked
    one then keeps.
    """
    m = out.size
    if m == 0:
        return
    j = 0
    for i in range(marked.size):
        out[j] = i
        j += marked[i]
        if j == m:
            return


@njit
def _sorted_rest(n, count, keys, values, offset, arrangement, out):
    """The indices of ``range(n)`` not among the first ``count`` of its shuffle, ascending.

    They are the values at positions ``count..n-1`` of the shuffle (the positions both
    representations keep exact): ``arrangement`` when it is not empty, else the sparse table at
    ``offset`` (a position it does not hold has its own value).
    """
    rest = np.zeros(n, dtype=np.bool_)
    if arrangement.size:
        for p in range(count, n):
            rest[arrangement[p]] = True
    elif keys.size:
        for p in range(count, n):
            s = _slot(keys, offset + p)
            rest[values[s] if keys[s] == offset + p else p] = True
    else:
        rest[count:] = True
    _compact(rest, out)


@njit
def _sort_dense_batch(out, n):
    """Sort a batch of distinct indices of ``range(n)`` in place when it holds at least an
    eighth of them, in ``O(n)``.

    The order of a batch does not change its law (a batch is a set; its rewards are summed),
    but reward functions read their data at the batch's indices: in increasing order those
    reads stream through memory instead of missing the cache at every index, which is most of
    the cost of a large batch. Sparser batches are left as drawn (their reads miss anyway).
    """
    m = out.size
    if 8 * m < n:
        return
    drawn = np.zeros(n, dtype=np.bool_)
    for k in range(m):
        drawn[out[k]] = True
    _compact(drawn, out)


@njit
def shared_draw(rng, ints, config, keys, values, arrangement):
    """The indices of the next round of a shared race: ``(idx, keys, values, arrangement)``.

    A random batch is the next stretch of the population's Fisher–Yates shuffle (sorted when it
    is dense: :func:`_sort_dense_batch`); a round that reaches ``N`` (by the schedule or the
    remainder rule) takes the indices not drawn yet in increasing order. The shuffle's storage
    is returned (it may have been replaced).
    """
    n = config[POPULATION]
    count = ints[COUNT]
    target = shared_target(ints[ROUND] + 1, count, n, config[FIRST_BATCH])
    ints[TARGET] = target
    m = target - count
    out = np.empty(m, dtype=np.int64)
    if target == n:
        _sorted_rest(n, count, keys, values, 0, arrangement, out)
        return out, keys, values, arrangement
    if arrangement.size == 0 and 4 * target > n:
        # Most of the population will be drawn: one O(N) arrangement is proportionate.
        arrangement = np.arange(n) if count == 0 else _densify(n, count, keys, values, 0)
        keys = np.empty(0, dtype=np.int64)
        values = np.empty(0, dtype=np.int64)
    if arrangement.size:
        fisher_yates_dense(rng, count, m, arrangement, out)
    else:
        if 2 * target > keys.size:
            keys, values = _grown_table(keys, values, target)
        fisher_yates_sparse(rng, n, count, m, keys, values, out)
    _sort_dense_batch(out, n)
    return out, keys, values, arrangement


@njit
def independent_draw(rng, ints, config, sizes, starts, counts, alive, keys, values):
    """The indices of the next round of an independent-arms race.

    Returns ``(idx, lengths, drawing, keys, values)``: the arms that draw this round (alive,
    population not exhausted, in increasing order), their batches concatenated in that order
    and the batch lengths. Arm ``i``'s random batch is the next stretch of its own shuffle,
    stored in one table at offset ``starts[i]`` (the law of
    :class:`~._subsample.MultiIndexSampler`); a batch that reaches ``N_i`` takes the indices
    not drawn yet, ascending, without random numbers.
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
    empty = np.empty(0, dtype=np.int64)
    out = np.empty(total, dtype=np.int64)
    start = 0
    for j in range(n_drawing):
        arm = drawing[j]
        m = lengths[j]
        count = counts[arm]
        n = sizes[arm]
        if count + m < n:
            fisher_yates_sparse(rng, n, count, m, keys, values, out[start:start + m], starts[arm])
            _sort_dense_batch(out[start:start + m], n)
        else:
            _sorted_rest(n, count, keys, values, starts[arm], empty, out[start:start + m])
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
def _difference_moments(lead, values, scale, offset):
    """Sums of ``d`` and ``d²`` for ``d = lead[k] - (scale * values[k] + offset)``."""
    s0 = s1 = s2 = s3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    m = values.size
    k = 0
    while k + 4 <= m:
        d0 = lead[k] - (scale * values[k] + offset)
        d1 = lead[k + 1] - (scale * values[k + 1] + offset)
        d2 = lead[k + 2] - (scale * values[k + 2] + offset)
        d3 = lead[k + 3] - (scale * values[k + 3] + offset)
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
        d0 = lead[k] - (scale * values[k] + offset)
        s0 += d0
        q0 += d0 * d0
        k += 1
    return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)


@njit
def chunk_columns(n_alive):
    """Indices per block of rewards: a round is evaluated in blocks of about 2^16 rewards.

    A larger block would touch fresh memory (for the values and for a NumPy callable's
    temporaries), which costs a page fault per 4 KiB on first touch: more than cheap rewards.
    """
    return max(1024, 65536 // max(n_alive, 1))


@njit
def shared_accumulate(block, scan, ints, config, scale, offset, alive, n_sampled, stats,
                      buffer, dead):
    """Add one block of a round of Alg. 1 on shared minibatches to the running sums.

    ``block[a, k]`` is the raw value of arm ``alive[a]`` at the block's ``k``-th index
    (``scale * value + offset`` is its reward); a round is one or more blocks, in draw order.
    The sums are of the rewards shifted by each arm's first-block mean, so that variances do
    not suffer from cancellation when rewards share a large offset, as log-likelihood terms
    do. A row holding ``-inf`` (looked for only when ``scan``) marks the arm ``dead`` (its
    mean is ``-inf``). For the pairwise variance, the differences to the reference arm
    ``ints[LEADER]`` (the last leader) are summed as well, and, while more than two arms
    survive and the round is not the last, the shifted rewards are stored in ``buffer`` (row
    ``i`` for arm ``i``, in draw order; room for every round before ``T = N``:
    :func:`shared_stored`) so that the differences can be summed again if the leader changes.
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
        n_sampled[arm] += m
        if arm == ref:
            ref_slot = a
        if dead[arm]:
            continue
        row = block[a]
        if scan and _has_neg_inf(row, 0, m):
            dead[arm] = True
            continue
        sc = scale[arm]
        off = offset[arm]
        if count == 0:
            shift[arm] = _block_sum(row, 0, m, sc, off) / m
        # The shifted reward r = scale * value + (offset - shift), everywhere.
        shifted = off - shift[arm]
        if store:
            sum_r[arm] += _store_sum(row, sc, shifted, buffer[arm], count)
        elif pairwise:
            sum_r[arm] += _block_sum(row, 0, m, sc, shifted)
        else:
            s, q = _block_moments(row, 0, m, sc, shifted)
            sum_r[arm] += s
            sum_r2[arm] += q
    if differences and not dead[ref]:
        if store:
            ref_rewards = buffer[ref, count:count + m]
        else:
            ref_rewards = np.empty(m)
            sc = scale[ref]
            off = offset[ref] - shift[ref]
            for k in range(m):
                ref_rewards[k] = sc * block[ref_slot, k] + off
        for a in range(n_alive):
            arm = alive[a]
            if arm == ref or dead[arm]:
                continue
            s, q = _difference_moments(ref_rewards, block[a], scale[arm],
                                       offset[arm] - shift[arm])
            sum_d[arm] += s
            sum_d2[arm] += q
    ints[COUNT] = count + m


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
                    s, q = _difference_moments(lead_row, buffer[arm, :total], 1.0, 0.0)
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
def race_shared_compiled(function, data, rng, ints, config, bconf, scale, offset, ranges, alive,
                         out_round, n_sampled, stats, buffer, dead):
    """A whole shared race with rewards ``scale * function(data, arm, index) + offset``.

    The round loop of :func:`sksubsample.algorithms.race` without Python: the same
    :func:`shared_draw`, :func:`shared_accumulate` on the same blocks (:func:`chunk_columns`)
    and :func:`shared_decide`, the values computed here. Returns ``(status, n_evaluations)``;
    :data:`BAD_VALUE` when ``function`` returned NaN or ``+inf``.
    """
    keys = np.empty(0, dtype=np.int64)
    values = np.empty(0, dtype=np.int64)
    arrangement = np.empty(0, dtype=np.int64)
    work = np.empty(max(65536, 1024 * alive.size))  # n_alive * chunk_columns(n_alive) fits
    n_evaluations = 0
    while True:
        idx, keys, values, arrangement = shared_draw(rng, ints, config, keys, values,
                                                     arrangement)
        n_alive = ints[N_ALIVE]
        columns = chunk_columns(n_alive)
        for start in range(0, idx.size, columns):
            stop = min(start + columns, idx.size)
            block = work[:n_alive * (stop - start)].reshape((n_alive, stop - start))
            scan = False
            for a in range(n_alive):
                arm = alive[a]
                if scale[arm] == 0.0:
                    block[a, :] = 0.0
                    continue
                bad, neg_inf = _evaluate(function, data, arm, idx, start, stop, block[a], 0)
                if bad:
                    return BAD_VALUE, n_evaluations
                scan = scan or neg_inf
                n_evaluations += stop - start
            shared_accumulate(block, scan, ints, config, scale, offset, alive, n_sampled, stats,
                              buffer, dead)
        status = shared_decide(ints, config, bconf, ranges, alive, out_round, stats, buffer,
                               dead)
        if status != CONTINUE:
            return status, n_evaluations


@njit
def race_independent_compiled(function, data, rng, ints, config, bconf, scale, offset, ranges,
                              sizes, starts, counts, alive, out_round, stats):
    """A whole independent-arms race with compiled rewards (see :func:`race_shared_compiled`).
    """
    keys = np.empty(0, dtype=np.int64)
    values = np.empty(0, dtype=np.int64)
    n_evaluations = 0
    while True:
        idx, lengths, drawing, keys, values = independent_draw(rng, ints, config, sizes, starts,
                                                               counts, alive, keys, values)
        block = np.empty(idx.size)
        scan = False
        start = 0
        for j in range(drawing.size):
            arm = drawing[j]
            stop = start + lengths[j]
            if scale[arm] == 0.0:
                block[start:stop] = 0.0
            else:
                bad, neg_inf = _evaluate(function, data, arm, idx, start, stop, block, start)
                if bad:
                    return BAD_VALUE, n_evaluations
                scan = scan or neg_inf
                n_evaluations += stop - start
            start = stop
        status = independent_update(block, lengths, drawing, scan, ints, config, bconf, scale,
                                    offset, ranges, sizes, counts, alive, out_round, stats)
        if status != CONTINUE:
            return status, n_evaluations


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
