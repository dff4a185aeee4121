"""A memory map's pages mapped ahead of a pass, by a thread of their own.

The first read of a memory map's page by a process costs a page fault, which maps the page
(and, by the kernel's fault-around, a few of its neighbours) from the page cache: about half a
second for 7.6 GB on a machine that reads them in 1.3 s. The set-up of a fit spends its first
moments on one core (the start subsample's Newton steps), and its first pass over all rows
then pays those faults on every core. :func:`mapped_ahead` maps the pages meanwhile, on the
idle core, front to back as the pass will read them: ``madvise(MADV_POPULATE_READ)`` (Linux
5.14 and later) maps a range's pages without a fault each, reading from disk any that the page
cache lacks, and fails (rather than raising SIGBUS) past the end of a truncated file.

Mapping stops when the block ends: a file larger than the memory is not read ahead of the pass
further than the block's time allows. Elsewhere (another system, an older kernel, an array in
memory) nothing is done, and the pass maps its pages itself, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import sys
import threading

import numpy as np

__all__ = ["mapped_ahead"]

#: ``MADV_POPULATE_READ`` of Linux's ``<asm-generic/mman-common.h>``.
_POPULATE_READ = 22
#: Bytes mapped per call: the thread sees a stop within one call (milliseconds from the page
#: cache; from a slow disk, the time to read this much).
_STEP = 1 << 26


@contextlib.contextmanager
def mapped_ahead(values):
    """Within the block, map the pages of the memory map ``values`` in a background thread,
    from its first row on; the thread is stopped and joined when the block ends.

    Parameters
    ----------
    values : array
        X as stored: a ``numpy.memmap`` (or a view of one) is mapped; anything else is left.

    Yields
    ------
    None
    """
    span = _span(values)
    stop = threading.Event()
    thread = None
    if span is not None:
        thread = threading.Thread(target=_populate, args=(values, *span, stop), daemon=True,
                                  name="sksubsample-map-ahead")
        try:
            thread.start()
        except RuntimeError:  # (no thread to be had: the pass maps its pages itself)
            thread = None
    if thread is None:
        yield
        return
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _span(values):
    """``(first page's address, bytes)`` of a contiguous memory map on Linux, else None."""
    if not (sys.platform.startswith("linux") and isinstance(values, np.memmap)
            and getattr(values, "_mmap", None) is not None  # (a copy keeps the class only)
            and values.flags.c_contiguous and values.nbytes > 0):
        return None
    start = values.ctypes.data
    first = start - start % mmap.PAGESIZE
    return first, start + values.nbytes - first


def _populate(values, first, size, stop):
    """Map ``size`` bytes from address ``first`` in calls of :data:`_STEP` bytes until done,
    stopped, or refused (an older kernel, a file cut short: the pass then says so itself).
    ``values`` is held so that the mapping stays open meanwhile."""
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    done = 0
    while done < size and not stop.is_set():
        length = min(_STEP, size - done)
        if madvise(first + done, length, _POPULATE_READ) != 0:
            return
        done += length
