"""Python objects that compiled code calls back, reached through integer handles.

A compiled law that serves interpreted users (a user's ``log_ratio_terms``, a Python gradient, a
Python MH step) holds a small NamedTuple with an integer ``handle``; its implementation of the
law's operation enters numba's object mode and calls :func:`call` with that handle. numba cannot
hold a Python object in compiled code, and a function passed as a value would make the law
uncachable, so the object itself stays here, in a registry, for the time of one call
(:func:`registered`).
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager

__all__ = ["call", "registered"]

_REGISTRY = {}
# Handles are never reused: a stale handle fails loudly instead of reaching another object.
_HANDLES = itertools.count(1)


@contextmanager
def registered(function):
    """Register ``function`` for the duration of the ``with`` block; yields its handle."""
    handle = next(_HANDLES)
    _REGISTRY[handle] = function
    try:
        yield handle
    finally:
        del _REGISTRY[handle]


def call(handle, *args):
    """``function(*args)`` for the function registered under ``handle``."""
    return _REGISTRY[handle](*args)
