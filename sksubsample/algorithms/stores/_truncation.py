"""Reads past the end of a memory-mapped file cut short: zeros and a count, not a dead process.

Linux delivers ``SIGBUS`` to a thread that touches a page of a memory map lying past the end of
its file, once the file was truncated after it was mapped; the default action kills the process,
and Python cannot catch it (its handlers run later, in the main thread, and the faulting
instruction would only fault again). A :class:`~._files.FileStamp` check before each read of a
store narrows the window to one read, but a pass over 10⁷ rows spends nearly all of its time
inside reads. So, as the Java virtual machine does for its mapped buffers, a handler of the
signal turns the fault into an error:

* while a memory map is *watched* (:func:`watch`: its column is being read by a fit), a fault at
  an address inside it maps a page of zeros over the page (``mmap`` with ``MAP_FIXED``), counts
  the fault in the map's slot of a table, and returns: the read resumes and completes with
  zeros, and the store's next check raises an error naming the file (the stamp's size no longer
  matches; :meth:`Watch.faults` tells the rest). No draw is kept from such a read: every read
  of a fit is followed by a check, the last one after the chains;
* a fault anywhere else restores the disposition the handler replaced and returns: the fault
  happens again and is handled as before (the default kills the process, ``faulthandler``
  prints the stacks first). Outside a fit, a program's own reads of a truncated map are never
  turned into zeros.

The handler runs in whichever thread faulted, inside compiled code, possibly without the GIL:
it is compiled by numba (:func:`~.._numba.compiled_callback`, cached like the package's
kernels) and calls only ``mmap`` and ``sigaction``. It reads the watched ranges from a table at
a fixed address (one page mapped there with ``MAP_FIXED_NOREPLACE``), so that its cached
machine code holds no address of this process. Where any of this is unavailable (not Linux on
x86-64 or ARM64, the address taken, a kernel older than 4.17), :func:`watch` returns None and
reads behave as before.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import signal
import sys
import threading
import weakref

import numpy as np
from numba import carray, types
from numpy.lib.array_utils import byte_bounds

from .._numba import c_function, compiled_callback, int64_pointer

__all__ = ["Watch", "watch"]

#: Where the table of watched ranges is mapped in every process: one page, below the 512 GB
#: that the smallest ARM64 address space (39 bits) allows, and far from where Linux places
#: programs (about two thirds of the way up) and their maps (at the top).
_TABLE_AT = 0x2E5B5B5B0000
#: Watched ranges at once (the columns of the stores being read by fits in this process).
_SLOTS = 64
#: int64 entries: the page size, then per slot its first and past-the-end addresses, its
#: faults and the first faulting address.
_ENTRIES = 1 + 4 * _SLOTS
#: Byte offset in the table page of the ``struct sigaction`` the handler replaced.
_PREVIOUS = 8 * _ENTRIES
#: Linux's constants (the same on x86-64 and ARM64).
_PROT_READ_WRITE = 0x3
_MAP_PRIVATE_ANONYMOUS = 0x22
_MAP_FIXED = 0x10
_MAP_FIXED_NOREPLACE = 0x100000
_SA_SIGINFO = 0x4
#: glibc's ``struct sigaction``: handler, a 128-byte mask, the flags, the restorer.
_SIGACTION_BYTES = 152
_FLAGS_AT = 136

_mmap = c_function("mmap", types.voidptr, types.voidptr, types.int64, types.int32, types.int32,
                   types.int32, types.int64)
_sigaction = c_function("sigaction", types.int32, types.int32, types.voidptr, types.voidptr)


def _on_sigbus(signum, info, context):
    """The handler (``SA_SIGINFO``): ``info[2]`` is ``si_addr``, the faulting address."""
    table = carray(int64_pointer(_TABLE_AT), (_ENTRIES,))
    address = info[2]
    for slot in range(_SLOTS):
        at = 1 + 4 * slot
        if table[at] <= address < table[at + 1]:
            page = address - address % table[0]
            _mmap((page, table[0], np.int32(_PROT_READ_WRITE),
                   np.int32(_MAP_PRIVATE_ANONYMOUS | _MAP_FIXED), np.int32(-1), 0))
            if table[at + 2] == 0:
                table[at + 3] = address
            table[at + 2] += 1
            return
    _sigaction((signum, _TABLE_AT + _PREVIOUS, 0))


_LOCK = threading.Lock()
#: The table (an int64 view of its page) once installed, False where it cannot be.
_STATE = {"table": None}


def _install():
    """Map the table, compile (or load) the handler and install it; the table, or None."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64", "arm64"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    at = libc.mmap(_TABLE_AT, mmap.PAGESIZE, _PROT_READ_WRITE,
                   _MAP_PRIVATE_ANONYMOUS | _MAP_FIXED_NOREPLACE, -1, 0)
    if at != _TABLE_AT:  # taken, or a kernel that took the flag for a hint
        if at not in (None, ctypes.c_void_p(-1).value):
            libc.munmap(at, mmap.PAGESIZE)
        return None
    table = np.ctypeslib.as_array((ctypes.c_int64 * _ENTRIES).from_address(_TABLE_AT))
    table[0] = mmap.PAGESIZE
    try:
        handler = compiled_callback(
            "void(int32, CPointer(int64), voidptr)")(_on_sigbus)
    except Exception:  # a compiler that fails leaves reads as they were
        return None
    _STATE["handler"] = handler  # (its machine code must outlive the installation)
    action = ctypes.create_string_buffer(_SIGACTION_BYTES)
    ctypes.c_void_p.from_buffer(action).value = handler.address
    ctypes.c_int.from_buffer(action, _FLAGS_AT).value = _SA_SIGINFO
    if libc.sigaction(signal.SIGBUS, action, _TABLE_AT + _PREVIOUS) != 0:
        return None
    return table


def _forget_watches():
    """In a child forked from a process whose fit was reading: the parent's watches are not the
    child's (its reads of the inherited maps are its own), so every slot is freed."""
    table = _STATE["table"]
    if table is not None and table is not False:
        table[1:] = 0


os.register_at_fork(after_in_child=_forget_watches)


def _table():
    with _LOCK:
        if _STATE["table"] is None:
            _STATE["table"] = _install()
            if _STATE["table"] is None:
                _STATE["table"] = False
        return _STATE["table"]


class Watch:
    """A memory map's slot in the table while it is watched (see :func:`watch`)."""

    def __init__(self, table, slot, start):
        self._table, self._at, self.start = table, 1 + 4 * slot, start
        self._finalizer = None

    def faults(self):
        """Pages read past the end of the file since the watch began."""
        return int(self._table[self._at + 2])

    def first_fault(self):
        """Offset in bytes, from the map's first byte, of the first fault (None without)."""
        return int(self._table[self._at + 3]) - self.start if self.faults() else None

    def release(self):
        """Stop watching: a later fault in the map is handled as by the process's own
        handler again."""
        with _LOCK:
            # (past-the-end first: a range is matched only while it is whole)
            self._table[self._at + 1] = 0
            self._table[self._at] = 0
        if self._finalizer is not None:
            self._finalizer.detach()


def watch(values, owner=None):
    """Watch the memory map ``values`` (an array whose memory is a mapped file) until
    :meth:`Watch.release`, or until ``owner`` is collected.

    Returns
    -------
    Watch or None
        None where faults cannot be handled (see the module's docstring), or when every slot
        is taken.
    """
    table = _table()
    if table is False:
        return None
    low, high = byte_bounds(values)
    with _LOCK:
        free = [s for s in range(_SLOTS) if table[2 + 4 * s] == 0]
        if not free:
            return None
        at = 1 + 4 * free[0]
        table[at + 2] = table[at + 3] = 0
        table[at] = low
        table[at + 1] = high
    watched = Watch(table, free[0], low)
    if owner is not None:
        watched._finalizer = weakref.finalize(owner, watched.release)
    return watched
