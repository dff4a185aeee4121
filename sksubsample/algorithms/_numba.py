"""How the package compiles its hot loops.

Every compiled function of the package is decorated with :func:`njit`: numba's ``njit`` with an
on-disk cache (the first call in a fresh environment compiles, later processes load the machine
code) and without the GIL, so chains run on joblib's threading backend in parallel.

Compiled functions take ``numpy.random.Generator`` objects as arguments: numba draws from the
generator's own bit generator, so a compiled and an interpreted caller given generators in the
same state consume the same stream.
"""

from __future__ import annotations

import functools

import numba

__all__ = ["njit", "read_only"]

#: ``numba.njit`` as the package uses it: cached on disk, releasing the GIL.
njit = functools.partial(numba.njit, cache=True, nogil=True)


def read_only(array):
    """``array`` itself when it is read-only, else a read-only view of it.

    numba compiles (and caches) one specialization per argument type, and a read-only array is
    another type than a writable one. joblib hands large arrays to worker processes as
    read-only memory maps and small ones as writable copies, so a compiled chain that only
    reads its data is given read-only arrays everywhere: one specialization serves the main
    process and the workers, and a first parallel fit compiles nothing more (before, each
    worker compiled a second one, about 15 s, the first time it saw a large data set).
    """
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view
