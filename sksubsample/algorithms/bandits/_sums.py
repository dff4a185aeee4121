"""Sums of a block of rewards: the running statistics of a race's arms.

A block holds raw values ``v`` of one arm; its rewards are ``r = scale * v + offset`` (the
per-arm affine map of a race). A race keeps, per arm, the sums of its (shifted) rewards and of
their squares, cubes and fourth powers, or the same sums of the differences of its rewards to
the leader's: the mean and the variance are what the bound of Alg. 1 reads, and the skewness
and kurtosis are what the guard of the normal approximation reads (:func:`normal_doubtful`).
The round laws that call these sums are compiled with reassociation allowed, so that the
simple loops here run in vector registers; every driver of a race sums the same values the
same way.
"""

from __future__ import annotations

import math

from .._numba import njit

__all__ = ["COCHRAN_BASE", "COCHRAN_SKEWNESS", "GUARD_LEAST", "KURTOSIS_FACTOR", "block_moments",
           "block_sum", "difference_moments", "has_neg_inf", "normal_doubtful", "normal_required",
           "store_sum", "store_sum_differences", "stored_difference_moments"]

#: The guard refuses a sample where the normal approximation of its mean is plainly broken, not
#: merely imperfect. Cochran's rule for a simple random sample without replacement, as refined
#: by Sugden, Smith & Jones (2000), asks for ``n > 28 + 25 γ₁²`` draws from a population of
#: skewness ``γ₁`` (a 95% interval then covers within 1%); the guard keeps its base and asks
#: that the skewness of the mean, ``γ₁ / √n``, be at most 1 (``n > 28 + γ₁²``): beyond that
#: the first Edgeworth correction to the normal tail is as large as the tail itself. The full
#: rule reads five to ten times more on the control-variate residuals of ARCH likelihoods
#: (skewness 2-10, kurtosis up to 130) and changed no decision on the adversarial problems of
#: ``benchmarks/racing_guard.py``, where a sample with no spread, or a few large values seen
#: among many small ones (``γ₁²`` close to ``n``), is what a race must not trust.
COCHRAN_BASE = 28.0
COCHRAN_SKEWNESS = 1.0
#: The fewest draws :func:`normal_required` ever accepts (at skewness 0): no arm with fewer is
#: eliminated, nor eliminates another, while the guard is on.
GUARD_LEAST = math.floor(COCHRAN_BASE) + 1
#: The variance estimated from ``n`` draws has a relative standard error of about
#: ``sqrt((κ - 1) / n)`` (``κ`` the kurtosis): a bound built on it is trusted once that is at
#: most 1, i.e. ``n >= κ - 1`` (the same "plainly broken" standard).
KURTOSIS_FACTOR = 1.0


@njit(inline="always")
def has_neg_inf(values, start, stop):
    for k in range(start, stop):
        if values[k] == -math.inf:
            return True
    return False


@njit(inline="always")
def block_sum(values, start, stop, scale, offset):
    """``sum_k scale * values[k] + offset``."""
    s = 0.0
    for k in range(start, stop):
        s += scale * values[k] + offset
    return s


@njit(inline="always")
def block_moments(values, start, stop, scale, offset):
    """Sums of ``r``, ``r²``, ``r³``, ``r⁴`` for ``r = scale * values[k] + offset``."""
    s1 = s2 = s3 = s4 = 0.0
    for k in range(start, stop):
        r = scale * values[k] + offset
        r2 = r * r
        s1 += r
        s2 += r2
        s3 += r2 * r
        s4 += r2 * r2
    return s1, s2, s3, s4


@njit(inline="always")
def store_sum(values, scale, offset, row, at):
    """Store ``r = scale * values[k] + offset`` at ``row[at + k]``; return their sum."""
    s = 0.0
    for k in range(values.size):
        r = scale * values[k] + offset
        row[at + k] = r
        s += r
    return s


@njit(inline="always")
def store_sum_differences(values, scale, offset, row, at, lead):
    """:func:`store_sum` of ``values`` and the sums of the powers of ``d = lead[k] - r``
    (:func:`stored_difference_moments`), in one pass."""
    s = d1 = d2 = d3 = d4 = 0.0
    for k in range(values.size):
        r = scale * values[k] + offset
        row[at + k] = r
        s += r
        d = lead[k] - r
        dd = d * d
        d1 += d
        d2 += dd
        d3 += dd * d
        d4 += dd * dd
    return s, d1, d2, d3, d4


@njit(inline="always")
def stored_difference_moments(lead, values):
    """Sums of ``d``, ``d²``, ``d³``, ``d⁴`` for ``d = lead[k] - values[k]`` (stored
    rewards)."""
    d1 = d2 = d3 = d4 = 0.0
    for k in range(values.size):
        d = lead[k] - values[k]
        dd = d * d
        d1 += d
        d2 += dd
        d3 += dd * d
        d4 += dd * dd
    return d1, d2, d3, d4


@njit(inline="always")
def difference_moments(lead, lead_scale, lead_offset, values, scale, offset):
    """Sums of the powers of ``d = (lead_scale * lead[k] + lead_offset) - (scale * values[k]
    + offset)``: the differences of two arms' rewards computed from their values."""
    d1 = d2 = d3 = d4 = 0.0
    for k in range(values.size):
        d = (lead_scale * lead[k] + lead_offset) - (scale * values[k] + offset)
        dd = d * d
        d1 += d
        d2 += dd
        d3 += dd * d
        d4 += dd * dd
    return d1, d2, d3, d4


@njit(inline="always")
def normal_required(n, s1, s2, s3, s4):
    """The number of draws the normal approximation of the mean of ``n`` values whose powers
    sum to ``s1 … s4`` needs before a race may trust it (Chen & Ghahramani 2016, Assumption 6
    of the Normal bound): infinite when their spread is nil (a sample that shows no variation
    says nothing about the variation it missed, e.g. a few terms that carry a difference between
    arms, still unseen); else more than ``28 + g₁²`` for their skewness ``g₁`` (the skewness of
    their mean at most 1; Cochran's base, see :data:`COCHRAN_SKEWNESS`) and at least ``k - 1``
    for their kurtosis ``k`` (the variance estimate, and the bound built on it, would otherwise
    be off by its own size). A few large values seen among many small ones raise both."""
    mean = s1 / n
    raw2 = s2 / n
    m2 = raw2 - mean * mean
    if not m2 > 1e-12 * raw2:
        return math.inf
    m3 = s3 / n - 3.0 * mean * raw2 + 2.0 * mean * mean * mean
    m4 = s4 / n - 4.0 * mean * s3 / n + 6.0 * mean * mean * raw2 - 3.0 * mean ** 4
    skewness2 = m3 * m3 / (m2 * m2 * m2)
    kurtosis = m4 / (m2 * m2)
    return max(math.floor(COCHRAN_BASE + COCHRAN_SKEWNESS * skewness2) + 1.0,
               KURTOSIS_FACTOR * (kurtosis - 1.0))


@njit(inline="always")
def normal_doubtful(n, s1, s2, s3, s4):
    """Whether ``n`` values whose powers sum to ``s1 … s4`` are too few for the normal
    approximation of their mean (:func:`normal_required`)."""
    return n < normal_required(n, s1, s2, s3, s4)
