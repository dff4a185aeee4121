"""How arrays reach the compiled GLM kernels (:mod:`._kernels`): their dtypes, layouts and
read-only flags, and the empty arrays of the arguments a design does not use.

numba compiles a kernel once per combination of argument types, and a dtype, a memory layout or
a read-only flag is part of a type. Every caller, interpreted or compiled, hands the kernels
their arrays through these helpers, so that rows in memory, in a memory map and in a chain's
buffer reach one compiled specialization (the largest kernels take 13 to 30 s each to compile).
"""

from __future__ import annotations

import numpy as np

from .._numba import kernel_array

__all__ = ["FLOAT64_COPY_BYTES", "NO_ROWS", "NO_VALUES", "as_indices", "kernel_array",
           "kernel_dtype"]


def as_indices(idx):
    """``idx`` as a flat C-contiguous int64 array (what the kernels index rows with)."""
    return np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)


#: The empty values and rows of the kernels' unused arguments (the weights of unweighted rows,
#: a dense design's CSR arrays), read-only as :func:`~.._numba.kernel_array` gives arrays.
NO_VALUES = kernel_array(np.empty(0))
NO_ROWS = kernel_array(np.empty(0, dtype=np.int64), np.int64)


#: Dense float32 rows of up to this many bytes reach the compiled kernels as a float64 copy (rows
#: in memory, and a chain's buffer of a store's rows): the same values and, the
#: kernels summing in float64 either way, the same sums bit for bit, so the same draws. One
#: compiled chain then serves float32 and float64 data, where a float32 chain of its own costs
#: a minute or more of compiling on a first fit; above this size the rows are read as stored,
#: a copy then costing memory that matters.
FLOAT64_COPY_BYTES = 16 * 2**20


def kernel_dtype(dtype, n_values):
    """The dtype in which ``n_values`` dense values of ``dtype`` reach the kernels (see
    :data:`FLOAT64_COPY_BYTES`)."""
    dtype = np.dtype(dtype)
    if dtype == np.float32 and dtype.itemsize * n_values <= FLOAT64_COPY_BYTES:
        return np.dtype(np.float64)
    return dtype
