"""The one gateway to numba: how the package compiles, and the numba internals it relies on.

Every compiled function of the package is decorated with :func:`njit`: numba's ``njit`` with an
on-disk cache (the first call in a fresh environment compiles, later processes load the machine
code) and without the GIL, so chains run on joblib's threading backend in parallel.

Compiled functions take ``numpy.random.Generator`` objects as arguments: numba draws from the
generator's own bit generator, so a compiled and an interpreted caller given generators in the
same state consume the same stream.

Generic functions
-----------------
A law written once often has several users that differ only in one operation: a race's round
loop and the rewards it reads (a NumPy callable, a user's compiled function, an ARCH model, a
coreference potential), an MH chain and the model whose terms it sums. :func:`generic` makes a
function that compiled code *dispatches on the class of its first argument* (a
:class:`typing.NamedTuple`): each user registers its implementation with
``@generic_function.implement(ItsNamedTuple)``, and the law, compiled once per class, is cached
on disk like any other compiled function (numba resolves the call while typing, so no function
is passed as a value, which numba would refuse to cache).

Caches that follow the sources
------------------------------
numba checks a cached function against the source file it was written in, not against the
functions it calls: a cached race loop specialised for a model's rewards keeps the model's
code of the day it was compiled, even after that code changed. So the package keeps a stamp of
all its source files (size and modification time) beside its caches, and when the sources
differ from the stamp at import, it removes its cached machine code before anything is loaded
(:func:`clear_stale_caches`); an unchanged install loads every cache as usual.

Internals
---------
A few building blocks are not part of numba's public API (counting leading and trailing zero
bits, the bit generator's raw draws, the class of compiled functions). They are imported here
and nowhere else, for the numba versions :data:`SUPPORTED_NUMBA` that the package declares;
another version fails at import with a message that says so, rather than with an error deep
inside a compiled function.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
from pathlib import Path

import numba
from numba.extending import overload

__all__ = ["SUPPORTED_NUMBA", "Dispatcher", "clear_stale_caches", "generic",
           "leading_zeros", "next_uint64", "njit", "random_methods", "read_only",
           "sources_digest", "trailing_zeros"]

#: The numba releases whose internals the package is known to work with (also the bounds in
#: the package's requirements).
SUPPORTED_NUMBA = ((0, 60), (0, 70))


def _check_version(version):
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    low, high = SUPPORTED_NUMBA
    if not low <= major_minor < high:
        raise ImportError(
            f"sksubsample needs numba >= {low[0]}.{low[1]} and < {high[0]}.{high[1]} (it uses "
            f"numba internals that other releases may move); numba {version} is installed")


_check_version(numba.__version__)

try:
    from numba.core.dispatcher import Dispatcher
    from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros
    from numba.np.random import random_methods
except ImportError as exc:  # pragma: no cover - depends on the installed numba
    raise ImportError(
        f"numba {numba.__version__} lacks internals sksubsample relies on ({exc}); install a "
        f"numba release in the supported range") from exc

_PACKAGE = Path(__file__).resolve().parent.parent
_STAMP = _PACKAGE / "__pycache__" / "numba-sources.stamp"


def _sources_stamp(package=_PACKAGE):
    """Size and modification time of every source file of the package, as text."""
    lines = []
    for path in sorted(package.rglob("*.py")):
        stat = path.stat()
        lines.append(f"{path.relative_to(package)} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(lines)


def clear_stale_caches(package=_PACKAGE, stamp_file=_STAMP):
    """Remove the package's cached machine code when its sources changed since the caches were
    written (see the module docstring). Returns whether caches were removed. Nothing is done
    where the package's folders cannot be written (numba then caches elsewhere or not at all)."""
    stamp = _sources_stamp(package)
    try:
        if stamp_file.read_text() == stamp:
            return False
    except OSError:
        pass
    removed = False
    try:
        for cache in package.rglob("__pycache__/*.nb[ic]"):
            cache.unlink(missing_ok=True)
            removed = True
        stamp_file.parent.mkdir(exist_ok=True)
        temporary = stamp_file.with_suffix(f".{os.getpid()}")
        temporary.write_text(stamp)
        temporary.replace(stamp_file)
    except OSError:
        return removed
    return removed


clear_stale_caches()


@functools.cache
def sources_digest():
    """A short digest of the package's sources (the stamp of :func:`clear_stale_caches`):
    what a cache that must follow the sources, like the machine code, is keyed by."""
    return hashlib.sha256(_sources_stamp().encode()).hexdigest()[:16]

#: ``numba.njit`` as the package uses it: cached on disk, releasing the GIL.
njit = functools.partial(numba.njit, cache=True, nogil=True)


@njit(inline="always")
def next_uint64(rng):
    """The next 64 raw bits of a ``numpy.random.Generator``'s bit generator (compiled code
    only): one word of the caller's stream, e.g. to seed a faster generator of its own."""
    return random_methods.next_uint64(rng.bit_generator)


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


def generic(stub):
    """Turn ``stub`` into a function that compiled code dispatches on its first argument's class.

    ``stub`` documents the operation (its signature and docstring). Implementations are
    registered per
    :class:`typing.NamedTuple` class with ``@stub.implement(cls)`` on a compiled function of the
    same signature; a compiled caller of ``stub(value, ...)`` then calls the implementation of
    ``type(value)``, chosen while numba types the caller (a Python caller gets the same
    implementation, looked up when called).

    Examples
    --------
    >>> from typing import NamedTuple
    >>> import numba
    >>> @generic
    ... def area(shape):
    ...     '''The area of ``shape``.'''
    >>> class Square(NamedTuple):
    ...     side: float
    >>> @area.implement(Square)
    ... @numba.njit
    ... def _square_area(shape):
    ...     return shape.side * shape.side
    >>> @numba.njit
    ... def total_area(shape):
    ...     return area(shape)
    >>> total_area(Square(3.0)), area(Square(2.0))
    (9.0, 4.0)
    """
    implementations = {}

    def implement(cls):
        def register(function):
            implementations[cls] = function
            return function

        return register

    # The resolver and the call take the stub's own parameters (numba inlines a call to an
    # ``inline="always"`` implementation, and cannot inline through ``*args``).
    parameters = ", ".join(inspect.signature(stub).parameters)
    namespace = {"implementations": implementations}
    exec(
        f"def _resolve({parameters}):\n"
        f"    function = implementations.get(getattr({parameters.split(',')[0]}, "
        f"'instance_class', None))\n"
        f"    if function is None:\n"
        f"        return None\n"
        f"    def call({parameters}):\n"
        f"        return function({parameters})\n"
        f"    return call\n", namespace)
    _resolve = namespace["_resolve"]

    @functools.wraps(stub)
    def interpreted(*args):
        function = implementations.get(type(args[0]))
        if function is None:
            raise TypeError(
                f"{stub.__name__} has no implementation for {type(args[0]).__name__} (registered:"
                f" {', '.join(c.__name__ for c in implementations) or 'none'})")
        return function(*args)

    overload(interpreted)(_resolve)
    interpreted.implement = implement
    interpreted.implementations = implementations
    return interpreted
