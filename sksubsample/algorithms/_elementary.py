"""``exp`` and ``log1p`` on the ranges of the logistic terms, in arithmetic only.

numba compiles without fast-math, so a call to the C library's ``exp`` or ``log1p`` stays one
scalar call a value, and a loop that makes such a call is not packed into SIMD instructions.
The logistic terms of the package need both on known ranges only: ``e = exp(-|z|)`` of a
linear predictor (``x <= 0``) and ``log σ(z) = min(z, 0) - log1p(e)`` (``0 <= e <= 1``). Written
here as reductions and polynomials, with selects rather than branches, the loops over rows
that call them are packed, and each is within one unit in the last place of the C library's
(tested):

* :func:`exp_nonpositive`: ``x = k ln 2 + r``, ``e^r`` by its Taylor polynomial, ``2^k`` from
  its exponent bits;
* :func:`log1p_unit`: ``1 + e = 2^k m`` with ``m`` in ``[√2/2, √2]``, ``log m`` by the
  ``atanh`` series of ``s = (m - 1) / (m + 1)`` with the minimax coefficients of fdlibm's
  ``log`` (Sun Microsystems, 1993), and the rounding of ``1 + e`` added back as a first-order
  correction, as fdlibm's ``log1p`` does.

The C library's ``log1p`` took about 16 ns of the 35 ns a row of the set-up's pass over a
10^7 x 20 design cost (:func:`~sksubsample.algorithms.glm._pass_kernels.logistic_rows`).
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._numba import njit

__all__ = ["exp_nonpositive", "log1p_unit"]


@intrinsic
def _bits_as_float(typingctx, bits):
    """The float64 whose bits are the int64 ``bits``."""
    if bits != types.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _float_bits(typingctx, x):
    """The bits of the float64 ``x`` as an int64."""
    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


# x / ln 2 rounded to an integer k in the low bits of a float: adding 1.5 * 2^52 leaves no
# fraction bits (for |x / ln 2| < 2^51).
_ROUNDING_SHIFT = 1.5 * 2.0**52
_INV_LN2 = 1.0 / math.log(2.0)
# ln 2 in two parts (Cody & Waite): the first has 32 significant bits, so k * _LN2_HI is exact
# for |k| < 2^21.
_LN2_HI = 0.6931471803691238
_LN2_LO = 1.9082149292705877e-10
# The Taylor coefficients 1/m! of e^r for |r| <= ln 2 / 2, m = 13 .. 0 (Horner's order; the
# first term left out is below 2^-57 of e^r).
_TAYLOR = tuple(1.0 / math.factorial(m) for m in range(13, -1, -1))
# Below it e^x is no normal float: x is taken there (e^-708 ≈ 3.3e-308 stands for any smaller
# value, which a sum of logistic terms cannot tell from zero).
_SMALLEST = -708.0


@njit(inline="always")
def exp_nonpositive(x):
    """``e^x`` for ``x <= 0`` (``e^-708`` below -708, NaN for NaN), within one unit in the
    last place of ``math.exp``: ``x = k ln 2 + r`` with ``|r| <= ln 2 / 2``, ``e^r`` by its
    Taylor polynomial of degree 13 and ``2^k`` from its exponent bits. No branch and no call,
    so a loop of them is packed."""
    x = _SMALLEST if x < _SMALLEST else x  # (NaN stays NaN)
    shifted = x * _INV_LN2 + _ROUNDING_SHIFT
    k = shifted - _ROUNDING_SHIFT
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = 0.0
    for c in _TAYLOR:
        p = p * r + c
    # The low bits of ``shifted`` are k (two's complement): k + 1023 in the exponent field.
    return p * _bits_as_float((_float_bits(shifted) + 1023) << 52)


# ln 2 in fdlibm's two parts (the first with its low 32 bits zero, so k * _LN2_HI_LOG is exact).
_LN2_HI_LOG = 6.93147180369123816490e-01
_LN2_LO_LOG = 1.90821492927058770002e-10
# fdlibm's minimax coefficients of (log(1 + f) - f + f²/2 - s f) / s³ in z = s², s = f / (2 + f)
# (e_log.c, Lg7 .. Lg1 in Horner's order): error below 2^-58.45 on [√2/2 - 1, √2 - 1].
_LG = (1.479819860511658591e-01, 1.531383769920937332e-01, 1.818357216161805012e-01,
       2.222219843214978396e-01, 2.857142874366239149e-01, 3.999999999940941908e-01,
       6.666666666666735130e-01)
_SQRT2 = math.sqrt(2.0)


@njit(inline="always")
def log1p_unit(e):
    """``log(1 + e)`` for ``0 <= e <= 1`` (NaN for NaN), within one unit in the last place of
    ``math.log1p``. ``u = 1 + e`` is ``2^k m`` with ``k`` 0 or 1 and ``m`` in ``[√2/2, √2]``;
    ``log m = f - (f²/2 - s (f²/2 + R(s²)))`` with ``f = m - 1`` (exact), ``s = f / (2 + f)``
    and fdlibm's polynomial ``R``; ``c = (e - (u - 1)) / u`` adds back what rounding ``1 + e``
    lost (``u - 1`` is exact). No branch and no call, so a loop of them is packed."""
    u = 1.0 + e
    halve = u > _SQRT2
    k = 1.0 if halve else 0.0
    f = (0.5 * u if halve else u) - 1.0
    c = (e - (u - 1.0)) / u
    s = f / (2.0 + f)
    z = s * s
    r = 0.0
    for coefficient in _LG:
        r = r * z + coefficient
    r *= z
    half_square = 0.5 * f * f
    return k * _LN2_HI_LOG - ((half_square - (s * (half_square + r) + (k * _LN2_LO_LOG + c)))
                              - f)
