"""Arithmetic of the GLM kernels written for packed (SIMD) instructions.

numba compiles with LLVM's loop vectoriser on and its SLP vectoriser off, and without
fast-math: a loop whose iterations are independent is packed, a sum is not (reassociating it
would change its bits). :func:`lane_sums` is therefore written here: a row's linear predictor
``x_iᵀv`` is summed in four partial sums, partial sum ``l`` taking the columns ``j ≡ l (mod 4)``
in order (:func:`~._kernels.row_dot`, the one order of the package's kernels; a CSR row adds
its entries to the same partial sums). Those four sums are the four lanes of one vector of
doubles: the intrinsic adds the products of each block of four columns to them with one packed
multiply and one packed add, where numba's loop does four scalar multiplies and adds of the same
numbers. Each lane performs the same IEEE operations in the same order as the scalar partial
sum, so the results are the same bits; only the instruction count changes. It is emitted with
llvmlite: numba has no vector type to write it in. (The exponential and logarithm of the
logistic terms, in arithmetic only so that their loops pack too, are
:mod:`sksubsample.algorithms._elementary`.)

On the 357 × 54 design of digits 3 vs 8 the full-data gradient (:func:`~._kernels.grad_sum`)
went from about 13.4 to 8.7 µs with :func:`lane_sums` (the same bits), and to about 6.6 µs with
the arithmetic exponential (the bits of the sigmoids change by rounding).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["LANES", "ROWS", "lane_sums", "lane_sums_rows"]

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


def _lane_sums_codegen(n_rows):
    """The code of :func:`lane_sums` over ``n_rows`` consecutive rows: one packed partial sum
    per row, the rows' sums interleaved (independent chains of additions, which the processor
    overlaps), the column block of ``v`` loaded once for all of them."""

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
        offsets = [builder.mul(builder.add(row, ir.Constant(intp, r)),
                               p if x_contiguous else row_stride) for r in range(n_rows)]
        totals = [cgutils.alloca_once_value(builder, ir.Constant(double, None))  # +0.0 lanes
                  for _ in range(n_rows)]
        with cgutils.for_range(builder, builder.sdiv(p, ir.Constant(intp, LANES))) as loop:
            start = builder.mul(loop.index, ir.Constant(intp, LANES))
            vs = _vector(builder, context, v_array.data, context.get_data_type(v_type.dtype),
                         v_type.layout in "CF", ir.Constant(intp, 0), v_stride, start)
            if vs.type != double:
                vs = builder.fpext(vs, double)
            for offset, total in zip(offsets, totals, strict=True):
                xs = _vector(builder, context, x.data, context.get_data_type(x_type.dtype),
                             x_contiguous, offset, column_stride, start)
                if xs.type != double:
                    xs = builder.fpext(xs, double)
                builder.store(builder.fadd(builder.load(total), builder.fmul(xs, vs)), total)
        lanes = []
        for total in totals:
            total = builder.load(total)
            lanes += [builder.extract_element(total, ir.Constant(ir.IntType(32), lane))
                      for lane in range(LANES)]
        return context.make_tuple(builder, sig.return_type, lanes)

    return codegen


def _lane_sums_signature(X, i, v, n_rows):
    floats = (types.float32, types.float64)
    if not (isinstance(X, types.Array) and X.ndim == 2 and X.dtype in floats
            and isinstance(v, types.Array) and v.ndim == 1 and v.dtype in floats
            and isinstance(i, types.Integer)):
        return None
    return types.UniTuple(types.float64, LANES * n_rows)(X, i, v)


@intrinsic
def lane_sums(typingctx, X, i, v):
    """``(s_0, .., s_3)``: ``s_l = sum_b X[i, 4b + l] v[4b + l]`` over the whole blocks
    ``b < p // 4`` of the row's ``p`` columns, each lane summed in column order from +0.0 in
    float64 (a float32 ``X`` or ``v`` is widened exactly first)."""
    signature = _lane_sums_signature(X, i, v, 1)
    return None if signature is None else (signature, _lane_sums_codegen(1))


#: Rows whose dot products :func:`lane_sums_rows` interleaves.
ROWS = 4


@intrinsic
def lane_sums_rows(typingctx, X, i, v):
    """:func:`lane_sums` of the rows ``i .. i + 3`` (row ``i + r``'s lanes at ``4 r ..
    4 r + 3``): the same sums, bit for bit, as four calls, in a quarter of the chains of
    dependent additions."""
    signature = _lane_sums_signature(X, i, v, ROWS)
    return None if signature is None else (signature, _lane_sums_codegen(ROWS))
