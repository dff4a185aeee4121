"""Each thread's scratch arrays for the products of a block of rows, kept from block to block.

A pass maps blocks of a few thousand rows, and a block's products (its rows scaled, whitened or
sorted by bin, whether its values are finite) take a megabyte or more. A fresh array that large
costs the page faults of its memory every time where the allocator hands large blocks back to
the system at once: Dask's workers set glibc's ``MALLOC_TRIM_THRESHOLD_``, which also turns off
glibc's adaptive mmap threshold, and a pass's tasks there ran 2.4 times slower with fresh arrays
per block than the same pass in the client. Scratch arrays are kept per thread (a pass maps its
blocks on several threads) and grow to the largest block asked for.

A sum kept in scratch (:func:`zeroed_scratch`, a pass's Gram matrices by bin) starts each read
unit at zero: only the slices the unit before wrote are zeroed again, since clearing the whole
array cost a read unit as much as summing it in wide designs (32 MB of bins at 100 columns,
three times per unit with the scans for the bins in use, where a unit's rows use a few dozen
of some four hundred bins).
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["scratch", "zeroed_scratch"]

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


def zeroed_scratch(name, shape):
    """A float64 array of ``shape`` from this thread's scratch ``name``, all zeros, and the
    mask of its slices along the first axis that the caller writes: the caller sets
    ``written[k]`` *before* it writes slice ``k`` (so that a call stopped by an error leaves
    no written slice unmarked), and the next call of ``name`` in this thread zeroes those
    slices only. Like :func:`scratch`, it is overwritten by the next call of the same name in
    this thread (use it before then; never return it).

    Parameters
    ----------
    name : str
    shape : tuple of int

    Returns
    -------
    values : ndarray of float64 of shape ``shape``
    written : ndarray of bool of shape ``(shape[0],)``
    """
    kept = _SCRATCH.__dict__.setdefault("zeroed", {})
    size = math.prod(shape)
    entry = kept.get(name)
    if entry is None or entry[0].size < size or entry[1].size < shape[0]:
        # (fresh: zeros, and no slice written)
        entry = kept[name] = (np.zeros(size), np.zeros(shape[0], dtype=bool), shape)
    values, written, last = entry
    if last != shape:
        # (another shape over the same memory: its written slices lie elsewhere)
        values[:math.prod(last)].reshape(last)[written[:last[0]]] = 0.0
        written[:] = False
        kept[name] = entry = (values, written, shape)
    out = values[:size].reshape(shape)
    mask = written[:shape[0]]
    out[mask] = 0.0
    mask[:] = False
    return out, mask
