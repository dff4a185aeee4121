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

Caches that cannot be written or read
-------------------------------------
The machine code is cached beside the sources (``__pycache__``), else in numba's user-wide
cache folder, else in the folder ``NUMBA_CACHE_DIR`` names when it is set. A read-only install
whose user has no writable home (or no home at all) has none of these: the package then caches
in a folder of the user's own in the temporary folder (:func:`choose_cache_folder`), and when
there is none either it compiles in memory (every process compiles again); each case with a
:class:`~sksubsample.exceptions.CompiledCacheWarning`. A cache file that cannot be read (cut
short by a full disk or a killed process, or otherwise corrupt) is removed with a warning and
the function compiled again: at import, every cache file of the package that does not end as a
pickle ends is removed (:func:`clear_corrupt_caches`); a file that still fails to load is
removed when it is loaded (:class:`_GuardedCache`).

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
import warnings
from pathlib import Path

import numba
import numpy as np
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload

from ..exceptions import CompiledCacheWarning
from ._compile_sigint import guarded_compile
from ._folders import private_temp_folder, replace_text, writable

__all__ = ["SUPPORTED_NUMBA", "Dispatcher", "as_read_only", "c_function", "choose_cache_folder",
           "clear_corrupt_caches", "clear_stale_caches", "compiled_callback", "generic",
           "int32_pointer", "int64_pointer", "leading_zeros", "next_uint64", "njit",
           "permutation_into", "random_methods", "read_only", "sources_digest", "trailing_zeros"]

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
    from llvmlite import ir
    from numba.core import cgutils, sigutils, types
    from numba.core.caching import FunctionCache, NullCache
    from numba.core.ccallback import CFunc
    from numba.core.dispatcher import Dispatcher
    from numba.core.extending import intrinsic
    from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros
    from numba.misc.appdirs import AppDirs
    from numba.np.random import random_methods
except ImportError as exc:  # pragma: no cover - depends on the installed numba
    raise ImportError(
        f"numba {numba.__version__} lacks internals sksubsample relies on ({exc}); install a "
        f"numba release in the supported range") from exc

_PACKAGE = Path(__file__).resolve().parent.parent
_STAMP_NAME = "numba-sources.stamp"
#: The last byte of every pickle (its STOP opcode): numba's cache files are pickles, and a file
#: cut short almost never ends with it.
_PICKLE_STOP = b"."


def _warn(message):
    warnings.warn(message, CompiledCacheWarning, stacklevel=3)


def _sources_stamp(package=_PACKAGE):
    """Size and modification time of every source file of the package, as text."""
    lines = []
    for path in sorted(package.rglob("*.py")):
        stat = path.stat()
        lines.append(f"{path.relative_to(package)} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(lines)


def _user_wide_root():
    """numba's user-wide cache folder (None where it has no absolute path: no home folder)."""
    root = AppDirs(appname="numba", appauthor=False).user_cache_dir
    return Path(root) if os.path.isabs(root) else None


def _cache_locations(package=_PACKAGE):
    """``(stamp file, cache folders)`` of every place numba may cache the package's code:
    beside the sources, and under each cache root (numba's user-wide folder, the folder of
    ``NUMBA_CACHE_DIR``), in the sub-folder numba names after each source folder."""
    folders = sorted({path.parent for path in package.rglob("*.py")})
    yield package / "__pycache__" / _STAMP_NAME, [f / "__pycache__" for f in folders]
    roots = {root for root in (_user_wide_root(), numba.config.CACHE_DIR or None) if root}
    tag = hashlib.sha1(str(package).encode()).hexdigest()[:12]
    for root in sorted(Path(r) for r in roots):
        yield root / f"sksubsample-{tag}.stamp", [
            root / f"{f.name}_{hashlib.sha1(str(f).encode()).hexdigest()}" for f in folders]


def _cache_files(folders):
    for folder in folders:
        if folder.is_dir():
            yield from folder.glob("*.nb[ic]")


def clear_stale_caches(package=_PACKAGE):
    """Remove the package's cached machine code, wherever numba keeps it, when its sources
    changed since the caches were written (see the module docstring). Returns whether caches
    were removed. A place that cannot be written is left alone (numba caches elsewhere or not
    at all)."""
    stamp = _sources_stamp(package)
    removed = False
    for place, (stamp_file, folders) in enumerate(_cache_locations(package)):
        try:
            if stamp_file.read_text() == stamp:
                continue
        except OSError:
            pass
        try:
            if place == 0:  # beside the sources: stamped before numba writes there
                stamp_file.parent.mkdir(exist_ok=True)
            elif not stamp_file.parent.is_dir():
                continue  # a cache root never made: nothing cached there
            for cache in _cache_files(folders):
                cache.unlink(missing_ok=True)
                removed = True
            replace_text(stamp_file, stamp)
        except OSError:
            continue
    return removed


def clear_corrupt_caches(package=_PACKAGE):
    """Remove the package's cache files that cannot be whole pickles (empty, or not ending as
    a pickle ends: cut short), with a warning; numba then compiles those functions again.
    Returns the paths removed."""
    removed = []
    for _, folders in _cache_locations(package):
        for cache in _cache_files(folders):
            try:
                with open(cache, "rb") as handle:
                    whole = handle.seek(0, os.SEEK_END) > 0 and (
                        handle.seek(-1, os.SEEK_END) >= 0 and handle.read(1) == _PICKLE_STOP)
                if not whole:
                    cache.unlink()
                    removed.append(cache)
            except OSError:
                continue
    if removed:
        _warn(f"{len(removed)} of numba's cache files of sksubsample were cut short or empty "
              f"(e.g. {removed[0]}): removed; those functions are compiled again.")
    return removed


def choose_cache_folder():
    """Make sure numba has a folder to cache in: where neither ``NUMBA_CACHE_DIR``, the
    package's own folders nor numba's user-wide folder can be written, point numba to a
    folder of the user's own in the temporary folder (with a warning). Returns whether
    compiled code can be cached at all (False: compiled in memory, with a warning)."""
    candidates = [numba.config.CACHE_DIR or None, Path(__file__).parent / "__pycache__",
                  _user_wide_root()]
    if any(folder is not None and writable(folder) for folder in candidates):
        return True
    temp = private_temp_folder("sksubsample-numba")
    if temp is not None:
        numba.config.CACHE_DIR = str(temp)
        _warn(f"numba cannot cache sksubsample's compiled code beside its sources "
              f"({_PACKAGE}) nor in the user's cache folder: it is cached in {temp} instead "
              f"(set NUMBA_CACHE_DIR to choose the folder).")
        return True
    _warn("numba cannot cache sksubsample's compiled code: neither the package's folders, "
          "the user's cache folder nor the temporary folder can be written. It is compiled "
          "in memory: every process compiles again (set NUMBA_CACHE_DIR to a folder that can "
          "be written).")
    return False


_CACHING = choose_cache_folder()
clear_stale_caches()
clear_corrupt_caches()


@functools.cache
def sources_digest():
    """A short digest of the package's sources (the stamp of :func:`clear_stale_caches`):
    what a cache that must follow the sources, like the machine code, is keyed by."""
    return hashlib.sha256(_sources_stamp().encode()).hexdigest()[:16]


class _GuardedCache(FunctionCache):
    """numba's cache of one function, where a file that fails to load is removed (with a
    warning) and the function compiled again, instead of the error reaching the caller."""

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # a corrupt pickle can raise nearly anything
            self._discard(exc)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except Exception as exc:  # an unreadable index met while saving; a full disk
            self._discard(exc)

    def _discard(self, exc):
        base = self._impl.filename_base
        folder = Path(self._cache_path)
        for path in (folder / f"{base}.nbi", *folder.glob(f"{base}.*.nbc")):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
        _warn(f"numba's cache of {self._name} in {folder} could not be used "
              f"({type(exc).__name__}: {exc}): removed; the function is compiled again.")


def njit(function=None, **options):
    """``numba.njit`` as the package uses it: cached on disk (through :class:`_GuardedCache`;
    in memory when nothing can be written, see :func:`choose_cache_folder`) and releasing
    the GIL, unless ``options`` say otherwise (``cache=False``, ``nogil=False``); Ctrl-C
    during a compile in the main thread raises when the compiler can (see
    :mod:`._compile_sigint`)."""
    options = {"nogil": True, **options}
    cache = options.pop("cache", True)

    def compile_(function):
        dispatcher = numba.njit(**options)(function)
        # An instance attribute: numba calls ``self.compile`` both for a call from Python and
        # while typing a compiled caller.
        dispatcher.compile = guarded_compile(dispatcher.compile)
        if cache and _CACHING:
            try:
                dispatcher._cache = _GuardedCache(dispatcher.py_func)
            except RuntimeError:  # no folder numba can cache this function in
                dispatcher._cache = NullCache()
        return dispatcher

    return compile_ if function is None else compile_(function)


def compiled_callback(signature):
    """Compile a function into a C function pointer (numba's ``cfunc``; its ``address``), with
    the cache of :func:`njit`'s functions (loaded, not compiled, by a later process).

    Parameters
    ----------
    signature : str or numba signature
        The C signature, e.g. ``"void(int32, CPointer(int64), voidptr)"``.
    """
    def compile_(function):
        callback = CFunc(function, sigutils.normalize_signature(signature), locals={},
                         options={"nopython": True})
        if _CACHING:
            try:
                callback._cache = _GuardedCache(function)
            except RuntimeError:  # no folder numba can cache this function in
                pass
        callback.compile()
        return callback

    return compile_


_LLVM_TYPES = {types.int32: ir.IntType(32), types.int64: ir.IntType(64),
               types.voidptr: ir.IntType(8).as_pointer()}


def c_function(name, restype, *argtypes):
    """An intrinsic that calls the C library's function ``name`` (resolved by the dynamic
    linker when the machine code is loaded, so that a cached caller stays valid in every
    process, unlike a ctypes function pointer, whose address numba would freeze into it).

    ``restype`` and ``argtypes`` are numba's ``int32``, ``int64`` or ``voidptr``. The intrinsic
    takes the arguments as one tuple, a pointer as an ``int64`` address, and returns a
    pointer as an ``int64`` too: ``mmap((address, size, ...))``.
    """
    as_int = tuple(types.int64 if t is types.voidptr else t for t in argtypes)
    returns = types.int64 if restype is types.voidptr else restype

    @intrinsic
    def call(typingctx, arguments):
        def codegen(context, builder, sig, values):
            function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
                _LLVM_TYPES[restype], [_LLVM_TYPES[t] for t in argtypes]), name)
            given = [builder.extract_value(values[0], i) for i in range(len(argtypes))]
            given = [builder.inttoptr(v, _LLVM_TYPES[t]) if t is types.voidptr else v
                     for v, t in zip(given, argtypes, strict=True)]
            result = builder.call(function, given)
            return (builder.ptrtoint(result, _LLVM_TYPES[types.int64])
                    if restype is types.voidptr else result)

        return returns(types.Tuple(as_int)), codegen

    return call


def _pointer_to(kind):
    @intrinsic
    def pointer(typingctx, address):
        def codegen(context, builder, sig, values):
            return builder.inttoptr(values[0], context.get_value_type(sig.return_type))

        return types.CPointer(kind)(types.int64), codegen

    return pointer


#: The integer address as a pointer to int64, or to int32 (for :func:`numba.carray`).
int64_pointer = _pointer_to(types.int64)
int32_pointer = _pointer_to(types.int32)


@njit(inline="always")
def next_uint64(rng):
    """The next 64 raw bits of a ``numpy.random.Generator``'s bit generator (compiled code
    only): one word of the caller's stream, e.g. to seed a faster generator of its own."""
    return random_methods.next_uint64(rng.bit_generator)


@njit(inline="always")
def permutation_into(rng, out, n):
    """``out[:n]`` made ``rng.permutation(n)``: the same draws from the caller's stream (numba's
    ``permutation`` is ``arange`` then ``shuffle``, one bounded draw per position from the
    last down), without allocating the array and the swap buffer that ``shuffle`` makes: the
    records model draws a permutation per component and per split-merge attempt, thousands a
    sweep."""
    for i in range(n):
        out[i] = i
    for i in range(n - 1, 0, -1):
        j = np.int64(random_methods.random_interval(rng.bit_generator, i))
        if i != j:
            out[i], out[j] = out[j], out[i]
    return out[:n]


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


def kernel_array(array, dtype=np.float64):
    """``array`` as compiled kernels are given the arrays they only read: C-contiguous, of
    ``dtype`` (None: its own), read-only (:func:`read_only`), so that every caller,
    interpreted or compiled, passes one type and each kernel is compiled once for rows in
    memory, in a memory map and in a chain's buffer."""
    return read_only(np.ascontiguousarray(array, dtype=dtype))


@intrinsic
def as_read_only(typingctx, array):
    """``array`` seen as a read-only array in compiled code (the same data, no copy): for a
    compiled caller that hands a kernel rows it only reads, some of them arrays it writes
    elsewhere, so that the kernel is compiled for read-only arrays only (as :func:`read_only`
    does for arrays from Python). A kernel as large as a GLM's residual sum takes about 20 s to
    compile for each combination of read-only and writable arguments."""
    if not isinstance(array, numba.types.Array):
        return None
    seen = array.copy(readonly=True)

    def codegen(context, builder, signature, args):
        # (both types have the same data model: the value is the array's own structure)
        return impl_ret_borrowed(context, builder, seen, args[0])

    return seen(array), codegen


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
