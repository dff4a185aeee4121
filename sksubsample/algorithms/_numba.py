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

__all__ = ["njit"]

#: ``numba.njit`` as the package uses it: cached on disk, releasing the GIL.
njit = functools.partial(numba.njit, cache=True, nogil=True)
