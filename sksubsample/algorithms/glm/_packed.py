"""Arithmetic of the GLM kernels written for packed (SIMD) instructions.

numba compiles with LLVM's loop vectoriser on and its SLP vectoriser off, and without
fast-math: a loop whose iterations are independent is packed, a sum is not (reassociating it
would change its bits), and a call to the C library's ``exp`` stays one scalar call a value.
Two pieces of the full-data gradient are therefore written here:

* :func:`lane_sums`: a row's linear predictor ``x_iᵀv`` is summed in four partial sums,
  partial sum ``l`` taking the columns ``j ≡ l (mod 4)`` in order (:func:`~._kernels.row_dot`,
  the one order of the package's kernels; a CSR row adds its entries to the same partial sums).
  Those four sums are the four lanes of one vector of doubles: the intrinsic adds the products
  of each block of four columns to them with one packed multiply and one packed add, where
  numba's loop does four scalar multiplies and adds of the same numbers. Each lane performs the
  same IEEE operations in the same order as the scalar partial sum, so the results are the same
  bits; only the instruction count changes. It is emitted with llvmlite: numba has no vector
  type to write it in.
* :func:`exp_nonpositive`: ``e^x`` for ``x <= 0`` in arithmetic only (a reduction by
  ``ln 2`` and a polynomial, within one unit in the last place of the C library's ``exp``), so
  that the gradient's loop over its rows' sigmoids is packed; the library's ``exp`` took about
  a third of the compiled time of a default fit of digits 3 vs 8.

On the 357 × 54 design of digits 3 vs 8 the full-data gradient (:func:`~._kernels.grad_sum`)
went from about 13.4 to 8.7 µs with :func:`lane_sums` (the same bits), and to about 6.6 µs with
:func:`exp_nonpositive` (the bits of the sigmoids change by rounding).
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .._numba import njit

__all__ = ["LANES", "exp_nonpositive", "lane_sums"]

#: The partial sums of a row's dot product (the lanes of one packed vector of doubles).
LANES = 4


def _vector(builder, context, data, elem, contiguous, offset, stride, start):
    """The ``LANES`` entries ``start ..`` of an array from its data pointer: one vector load
    where the entries are contiguous (``offset``, ``start`` in entries), else scalar loads
    (``offset``, ``stride`` in bytes)."""
    if contiguous:
        pointer = builder.gep(data, [builder.add(offset, start)])
        pointer = builder.bitcast(pointer, ir.VectorType(elem, LANES).as_pointer())
        return builder.load(pointer, align=context.get_abi_sizeof(elem))
    intp = offset.type
    base = builder.add(builder.ptrtoint(data, intp), offset)
    vector = ir.Constant(ir.VectorType(elem, LANES), None)
    for lane in range(LANES):
        column = builder.add(start, ir.Constant(intp, lane))
        address = builder.add(base, builder.mul(column, stride))
        value = builder.load(builder.inttoptr(address, elem.as_pointer()))
        vector = builder.insert_element(vector, value, ir.Constant(ir.IntType(32), lane))
    return vector


@intrinsic
def lane_sums(typingctx, X, i, v):
    """``(s_0, .., s_3)``: ``s_l = sum_b X[i, 4b + l] v[4b + l]`` over the whole blocks
    ``b < p // 4`` of the row's ``p`` columns, each lane summed in column order from +0.0 in
    float64 (a float32 ``X`` or ``v`` is widened exactly first)."""
    floats = (types.float32, types.float64)
    if not (isinstance(X, types.Array) and X.ndim == 2 and X.dtype in floats
            and isinstance(v, types.Array) and v.ndim == 1 and v.dtype in floats
            and isinstance(i, types.Integer)):
        return None
    signature = types.UniTuple(types.float64, LANES)(X, i, v)

    def codegen(context, builder, sig, args):
        x_type, i_type, v_type = sig.args
        x = context.make_array(x_type)(context, builder, args[0])
        v_array = context.make_array(v_type)(context, builder, args[2])
        row = context.cast(builder, args[1], i_type, types.intp)
        _, p = cgutils.unpack_tuple(builder, x.shape, 2)
        row_stride, column_stride = cgutils.unpack_tuple(builder, x.strides, 2)
        (v_stride,) = cgutils.unpack_tuple(builder, v_array.strides, 1)
        intp = context.get_value_type(types.intp)
        double = ir.VectorType(ir.DoubleType(), LANES)
        x_contiguous = x_type.layout == "C"
        # Row i starts at entry i p of a C-contiguous X, else at byte i * stride.
        offset = builder.mul(row, p if x_contiguous else row_stride)
        total = cgutils.alloca_once_value(builder, ir.Constant(double, None))  # +0.0 lanes
        with cgutils.for_range(builder, builder.sdiv(p, ir.Constant(intp, LANES))) as loop:
            start = builder.mul(loop.index, ir.Constant(intp, LANES))
            xs = _vector(builder, context, x.data, context.get_data_type(x_type.dtype),
                         x_contiguous, offset, column_stride, start)
            vs = _vector(builder, context, v_array.data, context.get_data_type(v_type.dtype),
                         v_type.layout in "CF", ir.Constant(intp, 0), v_stride, start)
            if xs.type != double:
                xs = builder.fpext(xs, double)
            if vs.type != double:
                vs = builder.fpext(vs, double)
            builder.store(builder.fadd(builder.load(total), builder.fmul(xs, vs)), total)
        total = builder.load(total)
        lanes = [builder.extract_element(total, ir.Constant(ir.IntType(32), lane))
                 for lane in range(LANES)]
        return context.make_tuple(builder, sig.return_type, lanes)

    return signature, codegen


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
# value, which a sum of gradient terms cannot tell from zero).
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
