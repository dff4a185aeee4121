"""Ctrl-C while numba compiles in the main thread: held until the compiler can raise it.

Python runs a SIGINT handler at the first bytecode the main thread executes after the signal.
While numba generates a function's machine code (LLVM's MCJIT, a long call into C), that
first bytecode is llvmlite's object-cache hook: a ctypes callback, which LLVM calls with the
machine code it made. An exception raised in a ctypes callback cannot reach the caller:
ctypes reports it ("Exception ignored on calling ctypes callback function") and drops it. So
the ``KeyboardInterrupt`` of Python's default handler was lost whenever Ctrl-C came while
machine code was generated (4 of 38 Ctrl-C spread over a small kernel's cold compile), and a
cold fit ran on to its end. Finalizers of llvmlite's objects, run in the middle of the
compiler, would drop an exception the same way.

So while a compiled function of the package compiles, or loads from the cache, in the main
thread (:func:`guarded_compile`), SIGINT is only recorded, and the handler it replaced is
called where an exception propagates: between two of numba's compiler passes (each function
compiled, numba's own included, runs a few dozen of them; the longest is the one that
generates a function's machine code: a few seconds for a chain's largest functions on a
loaded machine, mostly inside LLVM, which Python cannot interrupt) and when the compile ends.
That handler decides what Ctrl-C does: Python's default raises ``KeyboardInterrupt``, the
chains' guard asks them to stop, a handler of the user's own does what it does. A compile in
another thread is left alone: the main thread then waits for a result or a lock, where Ctrl-C
raises at once.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading

from numba.core import event
from numba.core.compiler_lock import global_compiler_lock

__all__ = ["guarded_compile"]

#: The main thread's compile under way: how deep compiles nest in it (a function's compile
#: compiles the functions it calls), the SIGINT handler replaced, and the SIGINTs recorded.
_STATE = {"depth": 0, "previous": None, "pending": 0}


def _record(signum, frame):
    _STATE["pending"] += 1


def _deliver():
    """Call the replaced handler once for each SIGINT recorded (it may raise)."""
    while _STATE["pending"]:
        _STATE["pending"] -= 1
        _STATE["previous"](signal.SIGINT, sys._getframe(1))


class _PassBoundaries(event.Listener):
    """Delivers the recorded SIGINTs at the start and the end of each compiler pass.

    Registered only while the main thread holds numba's compiler lock, so only its passes
    call it."""

    def on_start(self, event):
        _deliver()

    def on_end(self, event):
        _deliver()


_LISTENER = _PassBoundaries()


def _outermost(compile_, sig):
    # Waiting for the lock (another thread compiling) with the handler untouched: Ctrl-C
    # interrupts that wait at once.
    with global_compiler_lock:
        _STATE["previous"] = signal.signal(signal.SIGINT, _record)
        _STATE["depth"] = 1
        event.register("numba:run_pass", _LISTENER)
        try:
            return compile_(sig)
        finally:
            event.unregister("numba:run_pass", _LISTENER)
            _STATE["depth"] = 0
            if signal.getsignal(signal.SIGINT) is _record:
                signal.signal(signal.SIGINT, _STATE["previous"])
            try:
                _deliver()
            finally:
                _STATE["previous"], _STATE["pending"] = None, 0


def guarded_compile(compile_):
    """Wrap a numba dispatcher's ``compile`` method so that Ctrl-C during it reaches the
    SIGINT handler where an exception can propagate (see the module docstring).

    Parameters
    ----------
    compile_ : callable
        The dispatcher's bound ``compile(sig)``: compiles one signature, or loads it from the
        cache; returns its entry point.

    Returns
    -------
    callable
        ``compile_`` for the main thread, SIGINT deferred to the compiler's pass boundaries
        while it runs. Unchanged elsewhere: in other threads, inside a compile already guarded,
        and where SIGINT's handler is not a Python function (ignored, or the system's).
    """

    @functools.wraps(compile_)
    def compile_guarded(sig):
        if threading.current_thread() is not threading.main_thread():
            return compile_(sig)
        if _STATE["depth"]:
            _STATE["depth"] += 1
            try:
                return compile_(sig)
            finally:
                _STATE["depth"] -= 1
        if not callable(signal.getsignal(signal.SIGINT)):
            return compile_(sig)
        return _outermost(compile_, sig)

    return compile_guarded
