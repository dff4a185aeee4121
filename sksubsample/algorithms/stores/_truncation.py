"""Reads past the end of a memory-mapped file cut short: zeros and a count, not a dead process.

Linux delivers ``SIGBUS`` to a thread that touches a page of a memory map lying past the end of
its file, once the file was truncated after it was mapped; the default action kills the process,
and Python cannot catch it (its handlers run later, in the main thread, and the faulting
instruction would only fault again). A :class:`~._files.FileStamp` check before each read of a
store narrows the window to one read, but a pass over 10⁷ rows spends nearly all of its time
inside reads. So, as the Java virtual machine does for its mapped buffers, a handler of the
signal turns the fault into an error:

* while a memory map is *watched* (:func:`watch`: its column is being read by a fit), a fault at
  an address inside it maps zeros from the faulting page to the end of the map (``mmap`` with
  ``MAP_FIXED``: the pages after it lie past the end of the file too, so a process gathering
  rows all over a large file takes a few faults, not one per page), counts the fault in the
  map's slot of a table, and returns: the read resumes and completes with zeros, and the
  store's next check raises an error naming the file (the stamp's size no longer matches;
  :meth:`Watch.faults` tells the rest). No draw is kept from such a read: every read of a fit
  is followed by a check, the last one after the chains;
* when the watch ends, the zeroed pages are mapped from the file again if it is long enough
  again; until then the map (the user's own ``np.memmap``) is kept, and watching it again is
  an error (:class:`ZeroedMapError`) rather than a fit that would read its zeros;
* a fault anywhere else, a signal sent rather than raised by a fault, or a zero page that
  cannot be mapped, restores the disposition the handler replaced (raising a sent signal
  again): the fault happens again and is handled as before (the default kills the process,
  ``faulthandler`` prints the stacks first). Outside a fit, a program's own reads of a
  truncated map are never turned into zeros. A handler that was replaced since is installed
  again by the next watch.

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

from .._numba import c_function, compiled_callback, int32_pointer, int64_pointer

__all__ = ["Watch", "ZeroedMapError", "watch"]

#: Where the table of watched ranges is mapped in every process: one page, about 393 GB up,
#: within the smallest ARM64 address space (39 bits, 512 GB) and far from where Linux places
#: programs and their maps.
_TABLE_AT = 0x5B5B5B0000
#: Watched ranges at once (the columns of the stores being read by fits in this process).
_SLOTS = 64
#: int64 entries: the page size, then per slot (from ``_slot_at(slot)``) its first and
#: past-the-end addresses, its faults and the lowest page mapped with zeros, at these offsets.
_LOW, _HIGH, _FAULTS, _LOWEST_ZEROED = range(4)
_ENTRIES = 1 + 4 * _SLOTS
#: Byte offset in the table page of the ``struct sigaction`` the handler replaced.
_PREVIOUS = 8 * _ENTRIES
#: Linux's constants (the same on x86-64 and ARM64).
_PROT_READ, _PROT_READ_WRITE = 0x1, 0x3
_MAP_SHARED, _MAP_PRIVATE = 0x01, 0x02
_MAP_ANONYMOUS = 0x20
_MAP_FIXED = 0x10
_MAP_FIXED_NOREPLACE = 0x100000
_SA_SIGINFO = 0x4
#: glibc's ``struct sigaction``: handler, a 128-byte mask, the flags, the restorer.
_SIGACTION_BYTES = 152
_FLAGS_AT = 136

_mmap = c_function("mmap", types.voidptr, types.voidptr, types.int64, types.int32, types.int32,
                   types.int32, types.int64)
_sigaction = c_function("sigaction", types.int32, types.int32, types.voidptr, types.voidptr)
_raise = c_function("raise", types.int32, types.int32)
_errno_at = c_function("__errno_location", types.voidptr)


def _on_sigbus(signum, info, context):
    """The handler (``SA_SIGINFO``; ``info``, the address of the ``siginfo_t``, taken as an
    integer): its third int32 is ``si_code`` (above 0 for a fault the kernel raised), its
    third int64 ``si_addr``, the faulting address.

    A fault inside watched ranges maps zeros from its page to the end of each range it falls
    in, in one call: the pages after a fault past the end of a file lie past it too, so a
    read that walks on meets no more faults, and a process gathering rows all over a large
    file cut short takes a few faults, not one per page (each of which would split the map,
    up to the kernel's limit on maps). Anything else, or a zero page that cannot be mapped,
    restores the previous disposition and raises the signal again for it.
    """
    table = carray(int64_pointer(_TABLE_AT), (_ENTRIES,))
    errno = carray(int32_pointer(_errno_at(())), (1,))
    saved = errno[0]  # (the interrupted code may be about to read it)
    page_size = table[0]
    address = carray(int64_pointer(info), (3,))[2]
    code = carray(int32_pointer(info), (3,))[2]
    handled = False
    if code > 0:
        for slot in range(_SLOTS):
            at = 1 + 4 * slot  # (_slot_at, which the compiled handler cannot call)
            low, high = table[at + _LOW], table[at + _HIGH]
            if low != 0 and low <= address < high:
                page = address - (address & (page_size - 1))
                end = high + (-high & (page_size - 1))
                if _mmap((page, end - page, np.int32(_PROT_READ_WRITE),
                          np.int32(_MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED), np.int32(-1),
                          0)) == -1:
                    handled = False
                    break
                table[at + _FAULTS] += 1
                if table[at + _LOWEST_ZEROED] == 0 or page < table[at + _LOWEST_ZEROED]:
                    table[at + _LOWEST_ZEROED] = page
                handled = True
    if not handled:
        _sigaction((signum, _TABLE_AT + _PREVIOUS, 0))
        if code <= 0:  # sent, not a fault: it would not recur by itself
            _raise((signum,))
    errno[0] = saved


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
                   _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED_NOREPLACE, -1, 0)
    if at != _TABLE_AT:  # taken, or a kernel that took the flag for a hint
        if at not in (None, ctypes.c_void_p(-1).value):
            libc.munmap(at, mmap.PAGESIZE)
        return None
    table = np.ctypeslib.as_array((ctypes.c_int64 * _ENTRIES).from_address(_TABLE_AT))
    table[0] = mmap.PAGESIZE
    try:
        handler = compiled_callback(
            "void(int32, int64, voidptr)")(_on_sigbus)
    except Exception:  # a compiler that fails leaves reads as they were
        return None
    _STATE["handler"] = handler  # (its machine code must outlive the installation)
    _STATE["libc"] = libc
    if not _installed(libc, handler.address):
        return None
    return table


def _installed(libc, address):
    """Make the handler at ``address`` SIGBUS's, unless it already is (something else, e.g.
    ``faulthandler.enable()`` or the handler's own passing on of a fault, may have replaced
    it since); returns whether it is."""
    current = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if libc.sigaction(signal.SIGBUS, None, current) != 0:
        return False
    if ctypes.c_void_p.from_buffer(current).value == address:
        return True
    action = ctypes.create_string_buffer(_SIGACTION_BYTES)
    ctypes.c_void_p.from_buffer(action).value = address
    ctypes.c_int.from_buffer(action, _FLAGS_AT).value = _SA_SIGINFO
    return libc.sigaction(signal.SIGBUS, action, _TABLE_AT + _PREVIOUS) == 0


def _forget_watches():
    """In a child forked from a process whose fit was reading: the parent's watches are not the
    child's (its reads of the inherited maps are its own), so every slot is freed."""
    table = _STATE["table"]
    if table is not None and table is not False:
        table[1:] = 0
    _ACTIVE.clear()


if hasattr(os, "register_at_fork"):  # (not on Windows, where nothing is watched)
    os.register_at_fork(after_in_child=_forget_watches)


def _table():
    with _LOCK:
        if _STATE["table"] is None:
            _STATE["table"] = _install()
            if _STATE["table"] is None:
                _STATE["table"] = False
        elif _STATE["table"] is not False and not _installed(_STATE["libc"],
                                                             _STATE["handler"].address):
            return False
        return _STATE["table"]


class Watch:
    """A memory map's slot in the table while it is watched (see :func:`watch`)."""

    def __init__(self, table, slot, values, bounds, location):
        self._table, self._at = table, _slot_at(slot)
        self.start, self.end = bounds  # (byte_bounds(values))
        # (the map itself: its pages stay where they are until the zeros are replaced)
        self._values, self._location = values, location
        self._pid = os.getpid()
        self._finalizer = None

    def faults(self):
        """Faults inside the map (reads past the end of its file) since the watch began."""
        return int(self._table[self._at + _FAULTS]) if self._pid == os.getpid() else 0

    def _lowest_zeroed(self):
        """The lowest page mapped with zeros in this watch's map, 0 for none."""
        return int(self._table[self._at + _LOWEST_ZEROED])

    def zeroed_from(self):
        """Offset in bytes, from the map's first byte, of the lowest page mapped with zeros
        (None without a fault; 0 once they were mapped from the file again)."""
        if not self.faults():
            return None
        lowest = self._lowest_zeroed()
        return lowest - self.start if lowest else 0

    def release(self):
        """Stop watching: a later fault in the map is handled as by the process's own
        handler again. Pages mapped with zeros are mapped from the file again once it is
        long enough (until then the map is kept, and :func:`watch` refuses it)."""
        if self._pid != os.getpid():  # (a forked child's copy: the slot is not its own)
            return
        with _LOCK:
            if _ACTIVE.get(self._at) is not self:  # (released already)
                return
            del _ACTIVE[self._at]
            zeroed = self._lowest_zeroed()
            # (past-the-end first: a range is matched only while it is whole)
            self._table[self._at + _HIGH] = 0
            self._table[self._at + _LOW] = 0
            self._table[self._at + _FAULTS] = self._table[self._at + _LOWEST_ZEROED] = 0
            if zeroed:
                _ZEROED.append((self, zeroed))
            _repair()
        if self._finalizer is not None:
            self._finalizer.detach()

    def _map_file_again(self, zeroed):
        """Map the file over the pages mapped with zeros from page ``zeroed`` on, if it covers
        them now; whether the map is whole again."""
        if self._location is None:
            return False
        path, offset = self._location
        page = mmap.PAGESIZE
        end = self.end + (-self.end % page)
        try:
            if os.stat(path).st_size < offset + (self.end - self.start):
                return False
        except OSError:
            return False
        mode = getattr(self._values, "mode", "r")
        writable = mode in ("r+", "w+")
        prot = _PROT_READ_WRITE if writable or mode == "c" else _PROT_READ
        flags = (_MAP_PRIVATE if mode == "c" else _MAP_SHARED) | _MAP_FIXED
        fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        try:
            at = _STATE["libc"].mmap(zeroed, end - zeroed, prot, flags, fd,
                                     offset + (zeroed - self.start))
        finally:
            os.close(fd)
        return at == zeroed


#: ``(watch, lowest zeroed page)`` of released watches whose maps still hold zeros (their
#: files still short).
_ZEROED = []
#: Watches in force, by their slot's place in the table.
_ACTIVE = {}


def _repair():
    """Map the files again where they are long enough again (under ``_LOCK``): over the
    zeros of released watches, and of watches in force (a fit that failed on its truncated
    file may still hold its store while the file is written again and fitted anew)."""
    _ZEROED[:] = [(w, lowest) for w, lowest in _ZEROED if not w._map_file_again(lowest)]
    for w in _ACTIVE.values():
        lowest = w._lowest_zeroed()
        if lowest and w._map_file_again(lowest):
            # (its faults stay counted: its own fit still raises)
            w._table[w._at + _LOWEST_ZEROED] = 0


def _zeroed_overlap(low, high):
    """A watch whose map holds zeros within ``[low, high)``, or None."""
    zeroed = [w for w, _ in _ZEROED] + [w for w in _ACTIVE.values() if w._lowest_zeroed()]
    return next((w for w in zeroed if w.start < high and low < w.end), None)


def _slot_at(slot):
    """Where slot ``slot`` begins in the table."""
    return 1 + 4 * slot


class ZeroedMapError(RuntimeError):
    """A memory map holds pages of zeros where an earlier read met the end of its file."""


def watch(values, owner=None, location=None):
    """Watch the memory map ``values`` (an array whose memory is a mapped file) until
    :meth:`Watch.release`, or until ``owner`` is collected.

    Parameters
    ----------
    values : array
        The map (or a view of one).
    owner : object, optional
        The watch is released when it is collected.
    location : (str, int), optional
        The file and the byte offset of ``values``' first byte in it: pages mapped with zeros
        are mapped from the file again once it is long enough.

    Returns
    -------
    Watch or None
        None where faults cannot be handled (see the module's docstring), or when every slot
        is taken.

    Raises
    ------
    ZeroedMapError
        When ``values`` holds pages of zeros from a read past the end of its file (during an
        earlier fit) and the file is still too short to map them again.
    """
    table = _table()
    if table is False:
        return None
    low, high = byte_bounds(values)
    with _LOCK:
        _repair()
        old = _zeroed_overlap(low, high)
        if old is not None:
            raise ZeroedMapError(
                f"this memory map of {old._location[0] if old._location else 'a file'} was "
                f"read past the end of its file during an earlier fit, and holds zeros there "
                f"while the file is short: load it again (np.load(path, mmap_mode='r')) once "
                f"the file is whole")
        free = [s for s in range(_SLOTS) if _slot_at(s) not in _ACTIVE]
        if not free:
            return None
        at = _slot_at(free[0])
        table[at + _FAULTS] = table[at + _LOWEST_ZEROED] = 0
        table[at + _LOW] = low  # (the first address first: see Watch.release)
        table[at + _HIGH] = high
        watched = Watch(table, free[0], values, (low, high), location)
        _ACTIVE[at] = watched
    if owner is not None:
        watched._finalizer = weakref.finalize(owner, watched.release)
    return watched
