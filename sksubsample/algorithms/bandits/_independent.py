"""The round laws of a race with independently subsampled arms (App. C.3 of Chen & Ghahramani).

Each arm draws its rewards from its own population ``range(N_i)`` on its own schedule
(:func:`~._schedule.arm_target`: App. C.3's, or the guarded one, as ``config.schedule`` says):
the next stretch of the arm's Fisher–Yates shuffle (the
:class:`~sksubsample.algorithms.sampling.Shuffles` of the race state, drawn with the caller's
generator), or, when the arm reaches ``N_i``, the indices not drawn yet, ascending, without
random numbers (:func:`independent_draw`). The gap of two arms is then bounded by Eq. 26 with
``B`` of Eq. 27 (:func:`independent_update`).

References
----------
Chen & Ghahramani (2016), App. C.3, Eq. 26-27.
"""

from __future__ import annotations

import math

import numpy as np

from .._numba import njit
from ..sampling import mark_new, shuffles_draw, shuffles_reserve, take_marked, value_at
from ._bounds import b_ebs_scalar, g_normal_scalar
from ._schedule import TENTH, arm_target
from ._state import ALL_NEG_INF, CONTINUE, DONE, NORMAL
from ._sums import (
    COCHRAN_BASE,
    GUARD_LEAST,
    block_moments,
    block_sum,
    has_neg_inf,
    normal_doubtful,
)

__all__ = ["fewest_guarded_reads", "independent_draw", "independent_update"]


@njit
def fewest_guarded_reads(n, first_batch, schedule=TENTH):
    """The rewards an arm of population ``n`` has read, on its ``schedule``, when the guard of
    the normal approximation can first let it be eliminated: the first cumulative target of at
    least :data:`~._sums.GUARD_LEAST` draws (Cochran's rule at skewness 0, the least
    :func:`~._sums.normal_required` asks for), or ``n``. A lower bound of what a guarded race
    reads of an arm, for the callers that decide whether a race can repay its cost."""
    t = 0
    count = 0
    while count < n and count < GUARD_LEAST:
        t += 1
        count = arm_target(t, count, n, first_batch, schedule)
    return count


@njit
def _sorted_rest(shuffles, arm, out, bits):
    """The indices of arm ``arm``'s population not drawn yet, ascending (``bits``: a zero
    bitmap of at least ``N_i`` bits, left zero)."""
    n = shuffles.sizes[arm]
    count = shuffles.counts[arm]
    offset = shuffles.offsets[arm]
    if count == 0:  # nothing was shuffled: positions count..n-1 hold their own values
        for p in range(n):
            out[p] = p
    else:
        for p in range(count, n):
            mark_new(bits, value_at(shuffles.keys, shuffles.values, offset, p))
        take_marked(bits, n, out)
    shuffles.counts[arm] = n


@njit
def _sort_dense_batch(out, n, bits):
    """Sort a batch of distinct indices of ``range(n)`` in place when it holds at least an
    eighth of them, in ``O(m + n / 64)`` (``bits``: a zero bitmap of at least ``n`` bits, left
    zero); sparser batches are left as drawn (their reads miss the cache anyway)."""
    m = out.size
    if 8 * m < n:
        return
    for k in range(m):
        mark_new(bits, out[k])
    take_marked(bits, n, out)


@njit
def independent_draw(rng, state, config):
    """The indices of the next round: ``(idx, lengths, drawing)``.

    ``drawing`` lists the arms that draw this round (alive, population not exhausted, in
    increasing order), ``idx`` their batches concatenated in that order, ``lengths`` the batch
    lengths. A batch short of ``N_i`` is the next stretch of the arm's shuffle (sorted when it
    is dense enough for sorting to pay); a batch that reaches ``N_i`` takes the indices not
    drawn yet, ascending, without random numbers.
    """
    shuffles = state.shuffles
    t = state.round + 1
    n_alive = state.n_alive
    drawing = np.empty(n_alive, dtype=np.int64)
    lengths = np.empty(n_alive, dtype=np.int64)
    n_drawing = 0
    n_random = 0
    total = 0
    for a in range(n_alive):
        arm = state.alive[a]
        count = shuffles.counts[arm]
        n = shuffles.sizes[arm]
        if count >= n:
            continue
        m = arm_target(t, count, n, config.first_batch, config.schedule) - count
        drawing[n_drawing] = arm
        lengths[n_drawing] = m
        n_drawing += 1
        total += m
        if count + m < n:
            n_random += m
    if n_random:
        shuffles_reserve(shuffles, n_random)
    out = np.empty(total, dtype=np.int64)
    start = 0
    for j in range(n_drawing):
        arm = drawing[j]
        m = lengths[j]
        batch = out[start:start + m]
        if shuffles.counts[arm] + m < shuffles.sizes[arm]:
            shuffles_draw(shuffles, rng, arm, batch)
            _sort_dense_batch(batch, shuffles.sizes[arm], state.bits)
        else:
            _sorted_rest(shuffles, arm, batch, state.bits)
        start += m
    return out, lengths[:n_drawing], drawing[:n_drawing]


@njit
def independent_update(values, lengths, drawing, scan, state, config):
    """One round of racing with independently subsampled arms (App. C.3, Eq. 26-27).

    ``values`` holds the raw values of the arms ``drawing`` (batches of ``lengths``,
    concatenated, already counted in the state's shuffles); ``scan``: some value may be
    ``-inf``. Each arm's first batch sets its shift. The gap of arm ``i`` to the leader ``x``
    is compared with ``B sqrt(G_x² + G_i²)`` (Eq. 26 with ``B`` of Eq. 27) or ``G_x + G_i``
    (EBS), where an exhausted arm has ``G = 0``. When all survivors are exact they are tied at
    the best mean and the lowest index wins, as argmax would. Returns :data:`CONTINUE`,
    :data:`DONE` or :data:`ALL_NEG_INF`.
    """
    t = state.round + 1
    state.round = t
    shift, sum_r, sum_r2 = state.shift, state.sum_r, state.sum_r2
    counts = state.shuffles.counts
    sizes = state.shuffles.sizes
    dead = state.dead
    start = 0
    for j in range(drawing.size):
        arm = drawing[j]
        stop = start + lengths[j]
        state.n_sampled[arm] += lengths[j]
        if scan and has_neg_inf(values, start, stop):
            dead[arm] = True
        else:
            sc = state.scale[arm]
            off = state.offset[arm]
            if counts[arm] == lengths[j]:
                shift[arm] = block_sum(values, start, stop, sc, off) / lengths[j]
            r1, r2, r3, r4 = block_moments(values, start, stop, sc, off - shift[arm])
            sum_r[arm] += r1
            sum_r2[arm] += r2
            state.sum_r3[arm] += r3
            state.sum_r4[arm] += r4
        start = stop
    n_alive = state.n_alive
    alive = state.alive
    mean = np.empty(n_alive)
    # Normal: G_i² per unit B (Eq. 26); EBS: G_i (Eq. 6). Zero for an exhausted arm.
    spread = np.zeros(n_alive)
    # Whether an arm's normal approximation is doubtful (an exhausted arm's mean is exact).
    doubtful = np.zeros(n_alive, dtype=np.bool_)
    all_dead = True
    bound = config.bound
    delta = config.delta_round
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
            doubtful[a] = config.guard and normal_doubtful(n, sum_r[arm], sum_r2[arm],
                                                           state.sum_r3[arm], state.sum_r4[arm])
        else:
            spread[a] = b_ebs_scalar(delta, n, sizes[arm], sd, state.ranges[arm])
    if all_dead:
        return ALL_NEG_INF
    x = 0
    for a in range(1, n_alive):
        if mean[a] > mean[x]:
            x = a
    b = config.b_const
    lead_count = counts[alive[x]]
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
                if not keep and (doubtful[x] or doubtful[a]):
                    # The normal approximation the bound rests on is doubtful: read on
                    # (counted past the minimum sample, as in the shared race).
                    keep = True
                    if min(lead_count, counts[arm]) > COCHRAN_BASE:
                        state.n_guarded += 1
        if keep:
            alive[kept] = arm
            kept += 1
            all_exact = all_exact and counts[arm] >= sizes[arm]
        else:
            state.out_round[arm] = t
    if kept > 1 and all_exact:
        # Exact survivors have G = 0, so they are tied at the best mean: the lowest index
        # wins, as argmax would.
        for a in range(1, kept):
            state.out_round[alive[a]] = t
        kept = 1
    state.n_alive = kept
    if kept == 1:
        state.best = alive[0]
        return DONE
    return CONTINUE
