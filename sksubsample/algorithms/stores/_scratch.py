"""Each thread's scratch arrays for the products of a block of rows, kept from block to block.

A pass maps blocks of a few thousand rows, and a block's products (its rows scaled, whitened or
sorted by bin, whether its values are finite) take a megabyte or more. A fresh array that large
costs the page faults of its memory every time where the allocator hands large blocks back to
the system at once: Dask's workers set glibc's ``MALLOC_TRIM_THRESHOLD_``, which also turns off
glibc's adaptive mmap threshold, and a pass's tasks there ran 2.4 times slower with fresh arrays
per block than the same pass in the client. Scratch arrays are kept per thread (a pass maps its
blocks on several threads) and grow to the largest block asked for.
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["scratch"]

_SCRATCH = threading.local()


def scratch(name, shape, dtype):
    """A C-contiguous array of ``shape`` and ``dtype`` from this thread's scratch ``name``: its
    values are whatever was left there, and it is overwritten by the next call of the same name
    and dtype in this thread (use it before then; never return it).

    Parameters
    ----------
    name : str
    shape : tuple of int
    dtype : numpy.dtype

    Returns
    -------
    ndarray
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape)
    buffers = _SCRATCH.__dict__.setdefault("buffers", {})
    buffer = buffers.get((name, dtype))
    if buffer is None or buffer.size < size:
        buffer = buffers[(name, dtype)] = np.empty(size, dtype=dtype)
    return buffer[:size].reshape(shape)
