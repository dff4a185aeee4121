"""The round laws of a race on shared minibatches (Alg. 1 of Chen & Ghahramani 2016).

Every surviving arm is evaluated at the same indices. A round draws its batch
(:func:`shared_draw`: a uniformly random subset of the indices not drawn yet, in increasing
order, by :func:`~sksubsample.algorithms.sampling.draw_unmarked` from a SplitMix64 stream the
race seeds with one 64-bit word of its caller's generator; the rest of the population, without
random numbers, when the round reaches ``N``), adds the values of each block of the batch to the
arms' running sums (:func:`shared_accumulate`) and then eliminates (:func:`shared_decide`).

References
----------
Chen & Ghahramani (2016), Alg. 1, Eq. 5-9, Prop. 3.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._numba import njit
from ..sampling import clear_marks, draw_unmarked, take_unmarked
from ._bounds import b_ebs_scalar, g_normal_scalar
from ._schedule import shared_target
from ._state import ALL_NEG_INF, BAD_VALUE, CONTINUE, DONE, NORMAL
from ._sums import (
    COCHRAN_BASE,
    block_moments,
    block_sum,
    difference_moments,
    normal_doubtful,
    normal_required,
    store_sum,
    store_sum_differences,
    stored_difference_moments,
)

__all__ = ["BLOCK_REWARDS", "DrawBuffers", "chunk_columns", "end_draws", "shared_accumulate",
           "shared_decide", "shared_draw", "should_bail", "work_size"]

#: Rewards per block: a round is evaluated (and a NumPy callable called) in blocks of about
#: this many rewards, which bounds the memory of a round of a large population.
BLOCK_REWARDS = 1 << 18


class DrawBuffers(NamedTuple):
    """The memory of a shared race's rounds (kept from race to race by its caller).

    Attributes
    ----------
    drawn, before : ndarray of int64
        Zero bitmaps of at least ``N`` bits (the drawn indices; a batch being sorted). A race
        leaves both zero.
    idx : ndarray of int64
        Room for ``N`` indices: the batches, one after the other.
    work : ndarray of float64
        Room for :func:`work_size` values: one block of rewards.
    """

    drawn: np.ndarray
    before: np.ndarray
    idx: np.ndarray
    work: np.ndarray


@njit
def chunk_columns(n_alive):
    """Indices per block: a round is evaluated in blocks of about :data:`BLOCK_REWARDS`
    rewards (at least 1024 indices)."""
    return max(1024, BLOCK_REWARDS // max(n_alive, 1))


def work_size(n_arms):
    """The values a block of a race of ``n_arms`` arms may hold (:func:`chunk_columns`)."""
    return max(BLOCK_REWARDS, 1024 * n_arms)


@njit
def shared_draw(seed, state, config, buffers):
    """The indices of the next round: ``(batch, seed)``.

    A random round draws the batch uniformly without replacement from the indices not drawn
    yet (with the SplitMix64 state ``seed``); a round that reaches ``N`` (by the schedule or
    the remainder rule) takes every index not drawn yet, without random numbers. Either way
    the batch is in increasing order, so the reward function reads its data in one forward
    sweep. Batches are written one after the other into ``buffers.idx``: ``batch =
    idx[count:target]``; the indices marked in ``buffers.drawn`` are ``idx[:state.marked]``
    (:func:`end_draws` clears them).
    """
    n = config.population
    count = state.count
    target = shared_target(state.round + 1, count, n, config.first_batch)
    state.target = target
    out = buffers.idx[count:target]
    if target == n:
        take_unmarked(buffers.drawn, n, out)
    else:
        seed = draw_unmarked(seed, n, buffers.drawn, buffers.before, out)
        state.marked = target
    return out, seed


@njit
def end_draws(state, config, buffers):
    """Clear the bitmap of drawn indices at the end of a race (for the next race)."""
    clear_marks(buffers.drawn, buffers.idx[:state.marked], config.population)


@njit(fastmath={"reassoc"})
def _accumulate(block, state, config):
    """The sums of :func:`shared_accumulate` for one block, dead arms known.

    Compiled with reassociation allowed, so that the block sums run in vector registers
    (about 0.9 instead of 1.2 ns per stored reward, 0.35 instead of 0.64 ns per reward of a
    last round, measured on the machine this was written on): their rounding is that of this
    one compiled function, so every driver of a race sums the same values the same way.
    """
    n_alive = state.n_alive
    count = state.count
    m = block.shape[1]
    alive, dead, scale, offset = state.alive, state.dead, state.scale, state.offset
    differences = config.pairwise and state.target < config.population
    store = differences and n_alive > 2
    if differences and state.leader < 0:
        state.leader = alive[0]  # a provisional reference for the first round
    shift, sum_r, sum_r2 = state.shift, state.sum_r, state.sum_r2
    sum_r3, sum_r4 = state.sum_r3, state.sum_r4
    sum_d, sum_d2, sum_d3, sum_d4 = state.sum_d, state.sum_d2, state.sum_d3, state.sum_d4
    buffer = state.store
    ref = state.leader
    ref_slot = -1
    for a in range(n_alive):
        arm = alive[a]
        if arm == ref:
            ref_slot = a
        if not dead[arm] and count == 0:
            shift[arm] = block_sum(block[a], 0, m, scale[arm], offset[arm]) / m
    differences = differences and not dead[ref]
    if differences:
        # The reference first: the other arms' differences read its rewards.
        sc = scale[ref]
        shifted = offset[ref] - shift[ref]
        if store:
            sum_r[ref] += store_sum(block[ref_slot], sc, shifted, buffer[ref], count)
        else:
            sum_r[ref] += block_sum(block[ref_slot], 0, m, sc, shifted)
    for a in range(n_alive):
        arm = alive[a]
        if dead[arm] or (differences and arm == ref):
            continue
        row = block[a]
        sc = scale[arm]
        # The shifted reward r = scale * value + (offset - shift), everywhere.
        shifted = offset[arm] - shift[arm]
        d1 = d2 = d3 = d4 = 0.0
        if store and differences:
            # One pass for the stored rewards, their sum and the differences to the reference.
            s, d1, d2, d3, d4 = store_sum_differences(row, sc, shifted, buffer[arm], count,
                                                      buffer[ref, count:count + m])
            sum_r[arm] += s
        elif store:
            sum_r[arm] += store_sum(row, sc, shifted, buffer[arm], count)
        elif config.pairwise:
            sum_r[arm] += block_sum(row, 0, m, sc, shifted)
            if differences:
                d1, d2, d3, d4 = difference_moments(block[ref_slot], scale[ref],
                                                    offset[ref] - shift[ref], row, sc, shifted)
        else:
            r1, r2, r3, r4 = block_moments(row, 0, m, sc, shifted)
            sum_r[arm] += r1
            sum_r2[arm] += r2
            sum_r3[arm] += r3
            sum_r4[arm] += r4
        if differences and config.pairwise:
            sum_d[arm] += d1
            sum_d2[arm] += d2
            sum_d3[arm] += d3
            sum_d4[arm] += d4


@njit
def _sums_finite(state):
    """Whether every live arm's running sums are finite."""
    moments = state.moments
    for a in range(state.n_alive):
        arm = state.alive[a]
        if state.dead[arm]:
            continue
        for row in range(moments.shape[0]):
            if not math.isfinite(moments[row, arm]):
                return False
    return True


@njit
def _mark_dead(block, state):
    """Mark ``dead`` the arms whose block holds ``-inf`` (their mean is ``-inf``); returns
    :data:`BAD_VALUE` when a value is NaN or ``+inf`` (or when every value is finite: then
    only an overflow of the sums can have made them infinite)."""
    found = False
    for a in range(state.n_alive):
        arm = state.alive[a]
        if state.dead[arm] or state.scale[arm] == 0.0:
            continue
        row = block[a]
        for k in range(row.size):
            v = row[k]
            if v != v or v == math.inf:
                return BAD_VALUE
            if v == -math.inf:
                state.dead[arm] = True
                found = True
    return CONTINUE if found else BAD_VALUE


@njit
def shared_accumulate(block, state, config):
    """Add one block of a round to the running sums of the surviving arms.

    ``block[a, k]`` is the raw value of arm ``alive[a]`` at the block's ``k``-th index
    (``scale * value + offset`` is its reward); a round is one or more blocks, in draw order.
    The sums are of the rewards shifted by each arm's first-block mean, so that variances do
    not suffer from cancellation when rewards share a large offset, as log-likelihood terms
    do. For the pairwise variance, the differences to the reference arm ``state.leader`` (the
    last leader) are summed as well, and, while more than two arms survive and the round is
    not the last, the shifted rewards are stored in ``state.store`` (row ``i`` for arm ``i``,
    in draw order; room for every round before ``T = N``:
    :func:`~._schedule.shared_stored`) so that the differences can be summed again if the
    leader changes.

    Values are not checked one by one: a NaN or an infinite value makes its arm's sums
    non-finite, which is checked once per arm. Only then is the block scanned: an arm with a
    ``-inf`` value is marked ``dead`` (its mean is ``-inf``) and the block is summed again from
    the sums saved before it, without the dead arms; NaN or ``+inf`` returns
    :data:`BAD_VALUE`. Returns :data:`CONTINUE` otherwise.
    """
    state.saved[:, :] = state.moments
    leader = state.leader
    _accumulate(block, state, config)
    if not _sums_finite(state):
        if _mark_dead(block, state) == BAD_VALUE:
            return BAD_VALUE
        state.moments[:, :] = state.saved
        state.leader = leader
        _accumulate(block, state, config)
        if not _sums_finite(state):
            return BAD_VALUE
    m = block.shape[1]
    for a in range(state.n_alive):
        state.n_sampled[state.alive[a]] += m
    state.count += m
    return CONTINUE


@njit
def shared_decide(state, config):
    """End a round (after :func:`shared_accumulate`): eliminate, and say whether the race is
    done.

    Eliminates every arm ``i`` whose gap to the leader ``x`` exceeds ``G`` (Eq. 5: the pairwise
    bound on ``sigma_{x,i}`` or the sum of marginal bounds ``G_x + G_i``, Eq. 9 or Eq. 6-7;
    ``G = 0`` at ``T = N``, where the leader is returned) and every dead arm, and records the
    round in which each arm left. When the leader is not the reference of the pairwise sums,
    they are summed again from the stored rewards (more than two arms) or turned around (two
    arms: the new sums are the old ones negated, exactly, since ``fl(a - b) = -fl(b - a)``).

    Returns :data:`CONTINUE`, :data:`DONE` (``state.best`` is the best arm) or
    :data:`ALL_NEG_INF`.
    """
    n_alive = state.n_alive
    total = state.count
    t = state.round + 1
    state.round = t
    n = config.population
    alive, dead, out_round = state.alive, state.dead, state.out_round
    shift, sum_r, sum_r2 = state.shift, state.sum_r, state.sum_r2
    sum_d, sum_d2, sum_d3, sum_d4 = state.sum_d, state.sum_d2, state.sum_d3, state.sum_d4
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
        state.n_alive = 1
        state.best = lead
        return DONE
    if config.pairwise:
        ref = state.leader
        if lead != ref:
            if n_alive > 2:
                lead_row = state.store[lead, :total]
                for a in range(n_alive):
                    arm = alive[a]
                    if arm == lead or dead[arm]:
                        continue
                    d1, d2, d3, d4 = stored_difference_moments(lead_row,
                                                               state.store[arm, :total])
                    sum_d[arm] = d1
                    sum_d2[arm] = d2
                    sum_d3[arm] = d3
                    sum_d4[arm] = d4
            elif not dead[ref]:
                # Turned around: the odd powers change sign, exactly.
                sum_d[ref] = -sum_d[lead]
                sum_d2[ref] = sum_d2[lead]
                sum_d3[ref] = -sum_d3[lead]
                sum_d4[ref] = sum_d4[lead]
            state.leader = lead
    bound = config.bound
    b = config.b_const
    delta = config.delta_round
    ranges = state.ranges
    g_lead = 0.0
    lead_doubtful = False
    if not config.pairwise:
        g_lead = _marginal_g(bound, b, delta, total, n, sum_r[lead], sum_r2[lead], ranges[lead])
        lead_doubtful = bound == NORMAL and config.guard and normal_doubtful(
            total, sum_r[lead], sum_r2[lead], state.sum_r3[lead], state.sum_r4[lead])
    kept = 0
    for a in range(n_alive):
        arm = alive[a]
        keep = True
        if a != x:
            if dead[arm]:
                keep = False
            else:
                gap = mean[x] - mean[a]
                if config.pairwise:
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
                if (not keep and bound == NORMAL and config.guard
                        and _doubtful(state, arm, total, lead_doubtful, config.pairwise)):
                    # The normal approximation the bound rests on is doubtful: read on. Counted
                    # only past the minimum sample every elimination waits for (Cochran's
                    # base), where the doubt is the data's shape, not the sample's size.
                    keep = True
                    if total > COCHRAN_BASE:
                        state.n_guarded += 1
        if keep:
            alive[kept] = arm
            kept += 1
        else:
            out_round[arm] = t
    state.n_alive = kept
    if kept == 1:
        state.best = alive[0]
        return DONE
    return CONTINUE


@njit(inline="always")
def _doubtful(state, arm, total, lead_doubtful, pairwise):
    """Whether the normal approximation behind eliminating ``arm`` is doubtful: of the
    differences to the leader (pairwise variance), or of either arm's rewards (marginal)."""
    if pairwise:
        return normal_doubtful(total, state.sum_d[arm], state.sum_d2[arm], state.sum_d3[arm],
                               state.sum_d4[arm])
    return lead_doubtful or normal_doubtful(total, state.sum_r[arm], state.sum_r2[arm],
                                            state.sum_r3[arm], state.sum_r4[arm])


@njit(inline="always")
def _marginal_g(bound, b, delta, total, n, sum_r, sum_r2, reward_range):
    """``G_i`` of one arm from its running sums (the marginal variance of Eq. 5)."""
    mean_c = sum_r / total
    sd = math.sqrt(max(sum_r2 / total - mean_c * mean_c, 0.0))
    if bound == NORMAL:
        return g_normal_scalar(total, n, sd, b)
    return b_ebs_scalar(delta, total, n, sd, reward_range)


@njit
def should_bail(state, config):
    """Whether a race should stop here and let its caller finish exactly (``config.bail_ratio
    > 0``, Normal bound): when the rewards it would still read, projected from what it has
    read, cost more than the exact sums of the surviving arms over the whole population.

    For each survivor ``i`` the race stops reading it once its gap to the leader exceeds the
    bound, at ``T_i* = N / (1 + gap² (N - 1) / (B² σ²))`` rewards (Eq. 9 solved for ``T``, with
    the current estimate of the standard deviation ``σ`` of the differences and the gap's
    estimate plus one standard error ``σ / √n``, so that the projection does not mistake the
    noise of an early gap for a tie; ``N`` when the sample shows no spread), rounded up to the
    doubling schedule, and no earlier than the guard of the normal approximation allows
    (:func:`~._sums.normal_required`); the leader is read until the last of them. The
    projected cost is those rewards times ``config.bail_ratio`` (a race's evaluation against
    an exact one); the exact sums cost ``N`` evaluations per survivor. Stopping changes no
    draw but those the race would have got wrong (the exact sums decide among the
    survivors).
    """
    n = config.population
    total = state.count
    n_alive = state.n_alive
    if config.bail_ratio <= 0.0 or config.bound != NORMAL or n_alive < 2 or total >= n:
        return False
    means = np.empty(n_alive)
    x = 0
    for a in range(n_alive):
        arm = state.alive[a]
        means[a] = state.sum_r[arm] / total + state.shift[arm]
        if means[a] > means[x]:
            x = a
    b2 = config.b_const * config.b_const
    remaining = 0.0
    longest = total
    for a in range(n_alive):
        if a == x:
            continue
        arm = state.alive[a]
        lead = state.alive[x]
        gap = means[x] - means[a]
        if config.pairwise:
            s1, s2 = state.sum_d[arm], state.sum_d2[arm]
            required = normal_required(total, s1, s2, state.sum_d3[arm], state.sum_d4[arm])
            mean_d = s1 / total
            variance = max(s2 / total - mean_d * mean_d, 0.0)
        else:
            required = max(normal_required(total, state.sum_r[arm], state.sum_r2[arm],
                                           state.sum_r3[arm], state.sum_r4[arm]),
                           normal_required(total, state.sum_r[lead], state.sum_r2[lead],
                                           state.sum_r3[lead], state.sum_r4[lead]))
            variance = 0.0
            for i in (arm, lead):
                mean_i = state.sum_r[i] / total
                variance += max(state.sum_r2[i] / total - mean_i * mean_i, 0.0)
        if not config.guard:
            required = 0.0
        target = n
        if variance > 0.0 and required < n:
            # Eliminated once the bound is below the gap and the guard trusts the sample. The
            # gap is taken one standard error larger than estimated: an early estimate of a
            # small gap is mostly noise, and the race should stop only when it has clearly
            # stopped paying, not when it might.
            gap = abs(gap) + math.sqrt(variance / total)
            star = max(n / (1.0 + gap * gap * (n - 1.0) / (b2 * variance)), required)
            target = total
            t = state.round
            while target < star and target < n:
                t += 1
                target = shared_target(t + 1, target, n, config.first_batch)
        remaining += target - total
        longest = max(longest, target)
    remaining += longest - total
    return config.bail_ratio * remaining > n * n_alive
