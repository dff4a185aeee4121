"""Sums of a block of rewards, the running statistics of a race's arms.

A block holds raw values ``v`` of one arm; its rewards are ``r = scale * v + offset`` (the
per-arm affine map of a race). Each sum keeps two or four partial sums, so that the additions
do not wait on each other, and the two drivers of a race (compiled rewards, NumPy callables)
apply the same floating-point operations to the same values.
"""

from __future__ import annotations

import math

from .._numba import njit

__all__ = ["block_moments", "block_sum", "difference_moments", "has_neg_inf", "store_sum",
           "store_sum_differences", "stored_difference_moments"]


@njit(inline="always")
def has_neg_inf(values, start, stop):
    for k in range(start, stop):
        if values[k] == -math.inf:
            return True
    return False


@njit(inline="always")
def block_sum(values, start, stop, scale, offset):
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
def block_moments(values, start, stop, scale, offset):
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
def store_sum(values, scale, offset, row, at):
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
def store_sum_differences(values, scale, offset, row, at, lead):
    """:func:`store_sum` of ``values`` and the sums of ``d`` and ``d²`` for
    ``d = lead[k] - r`` (:func:`stored_difference_moments`), in one pass.
    """
    m = values.size
    s0 = s1 = 0.0  # the two chains of store_sum
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
def stored_difference_moments(lead, values):
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
def difference_moments(lead, lead_scale, lead_offset, values, scale, offset):
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
