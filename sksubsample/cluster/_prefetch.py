"""Prefetching a record's rows of the records model's dense comparison blocks.

A component of ``m`` records keeps ``(F, m, m)`` blocks of ``a``, ``e^a`` and exact agreement
(:class:`~._records.RecordsModel`), about 120 MB at 50 000 records, far beyond the processor's
caches. The split-merge moves allocate a proposal's records one after the other in an order
drawn beforehand, and each allocation reads the allocated record's row of every slot: with
those rows asked of memory a couple of records ahead (:func:`prefetch_rows`), the reads no
longer wait for them (the split-merge moves of a sweep took about 0.8 of their time at 50 000
records). A prefetch reads nothing into the computation, so every draw is the same bits.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..algorithms.kernels import njit

__all__ = ["prefetch", "prefetch_rows"]

#: Bytes of a cache line: a row is asked for one line at a time.
LINE = 64


@intrinsic
def prefetch(typingctx, array, index):
    """Ask the processor to bring entry ``index`` of the 1-d ``array`` into its caches (LLVM's
    ``llvm.prefetch``, a read kept in every cache level); computes nothing."""
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        index_ = context.cast(builder, args[1], signature.args[1], types.intp)
        byte = ir.IntType(8).as_pointer()
        address = builder.bitcast(builder.gep(ary.data, [index_]), byte)
        i32 = ir.IntType(32)
        # (llvmlite names the intrinsic for its pointer type, as the LLVM it binds expects)
        hint = builder.module.declare_intrinsic(
            "llvm.prefetch", [byte], ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]))
        builder.call(hint, [address, ir.Constant(i32, 0), ir.Constant(i32, 3),
                            ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(inline="always")
def prefetch_rows(md, base, m, r):
    """Prefetch record ``r``'s row (local index) of every slot of the blocks ``a``, ``e^a``
    and exact agreement of the component of ``m`` records whose blocks start at ``base``:
    what scoring ``r`` against a cluster of the component and adding it read."""
    adj, bexp, exm = md.adj, md.bexp, md.exm
    step = LINE // 8
    for f in range(md.n_comparisons):
        row = base + (f * m + r) * m
        # A line at every step and the row's last entry: a row need not start a line.
        for q in range(0, m, step):
            prefetch(adj, row + q)
            prefetch(bexp, row + q)
        prefetch(adj, row + m - 1)
        prefetch(bexp, row + m - 1)
        for q in range(0, m, LINE):
            prefetch(exm, row + q)
        prefetch(exm, row + m - 1)
