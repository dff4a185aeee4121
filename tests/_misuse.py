"""Feeding public callables bad arguments: the catalogue of bad values and the verdict.

A :class:`Misuse` names a public callable, a factory of valid keyword arguments and the kind of
each argument. Every argument is replaced in turn by each bad value of its kind's catalogue
(:data:`CATALOGUE`), the others staying valid, and the call must either

* raise ``ValueError`` or ``TypeError`` (scikit-learn's ``InvalidParameterError`` is a
  ``ValueError``) whose message names the argument, and that numba did not raise, or
* return a result in which every number is finite (NaN or inf only where the misuse declares
  the result may hold them).

Anything else fails: an ``AttributeError``, ``IndexError``, ``KeyError``,
``ZeroDivisionError`` or ``UnboundLocalError`` from inside the package, a NumPy or numba error
that does not say which argument is wrong, a NaN result.
"""

from __future__ import annotations

import copy
import math
import numbers
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, NamedTuple

import numpy as np
import pytest


class Bad(NamedTuple):
    """A bad value: ``make(valid_value)`` builds it from the argument's valid value."""

    label: str
    make: Callable[[Any], Any]


def value(label, bad):
    """A bad value that does not depend on the valid one."""
    return Bad(label, lambda _valid: copy.deepcopy(bad))


def derived(label, make):
    """A bad value built from the valid one (a shorter array, a NaN entry, ...)."""
    return Bad(label, lambda valid: make(copy.deepcopy(valid)))


def _with_entry(array, entry):
    out = np.array(array, dtype=np.float64)
    out.flat[0] = entry
    return out


def _returns(result):
    return lambda *args, **kwargs: result


#: Not a number at all.
_NOT_NUMBERS = [value("None", None), value("str", "3"), value("list-of-str", ["a", "b"])]
#: Numbers of the wrong kind or out of any sensible range.
_NON_FINITE = [value("nan", math.nan), value("inf", math.inf), value("-inf", -math.inf)]

CATALOGUE: dict[str, list[Bad]] = {
    # an int >= 1 (counts, sizes)
    "count": [*_NOT_NUMBERS, value("bool", True), value("float", 2.5), value("zero", 0),
              value("negative", -1), value("huge", 2**64), value("nan", math.nan)],
    # an int >= 0
    "index": [*_NOT_NUMBERS, value("bool", True), value("float", 2.5), value("negative", -1),
              value("huge", 2**64), value("nan", math.nan)],
    # a probability in (0, 1)
    "probability": [*_NOT_NUMBERS, value("bool", True), value("zero", 0.0), value("one", 1.0),
                    value("above-one", 1.5), value("negative", -0.5), *_NON_FINITE],
    # a real number > 0
    "positive": [*_NOT_NUMBERS, value("bool", True), value("zero", 0.0),
                 value("negative", -1.0), *_NON_FINITE],
    # any finite real number
    "real": [*_NOT_NUMBERS, *_NON_FINITE],
    "random_state": [value("str", "seed"), value("negative", -1), value("float", 1.5),
                     value("list-of-str", ["a"]), value("object", object())],
    # one of a set of strings
    "option": [value("unknown", "no-such-option"), value("None", None), value("int", 3),
               value("list", ["a"])],
    # a bool
    "flag": [value("str", "yes"), value("None", None), value("int", 3), value("float", 0.5)],
    # a callable
    "function": [value("None", None), value("int", 3), value("str", "f"),
                 value("returns-None", _returns(None)), value("returns-str", _returns("x"))],
    # a 1-d array of numbers
    "vector": [*_NOT_NUMBERS, derived("empty", lambda v: np.asarray(v)[:0]),
               derived("nan-entry", lambda v: _with_entry(v, math.nan)),
               derived("inf-entry", lambda v: _with_entry(v, math.inf)),
               derived("one-shorter", lambda v: np.asarray(v)[:-1]),
               derived("2d", lambda v: np.asarray(v)[:, None]),
               derived("scalar", lambda v: np.asarray(v)[0])],
    # a 2-d array of numbers (rows are observations)
    "matrix": [*_NOT_NUMBERS, value("str-matrix", [["a", "b"], ["c", "d"]]),
               derived("no-rows", lambda v: np.asarray(v)[:0]),
               derived("no-columns", lambda v: np.asarray(v)[:, :0]),
               derived("nan-entry", lambda v: _with_entry(v, math.nan)),
               derived("inf-entry", lambda v: _with_entry(v, math.inf)),
               derived("one-row-fewer", lambda v: np.asarray(v)[:-1]),
               derived("1d", lambda v: np.asarray(v)[:, 0]),
               derived("3d", lambda v: np.asarray(v)[..., None])],
}


@dataclass(frozen=True)
class Misuse:
    """A public callable and how to call it validly.

    Parameters
    ----------
    name : str
        Test id of the callable.
    call : callable
        ``call(**kwargs)``: calls the public callable and returns what must be finite.
    valid : callable
        ``valid() -> dict``: fresh valid keyword arguments of ``call``, one per argument
        that ``kinds`` names.
    kinds : dict of str -> str or list of Bad
        The kind of each argument (a key of :data:`CATALOGUE`) or its own bad values.
    names : dict of str -> tuple of str
        Other names a message may use for an argument (default: its own name).
    extra : dict of str -> list of Bad
        Bad values added to an argument's catalogue.
    nonfinite : bool
        Whether the result may hold NaN or inf (the callable's documented answer to
        non-finite input).
    """

    name: str
    call: Callable[..., Any]
    valid: Callable[[], dict]
    kinds: Mapping[str, Any]
    names: Mapping[str, tuple] = field(default_factory=dict)
    extra: Mapping[str, list] = field(default_factory=dict)
    nonfinite: bool = False

    def cases(self, known=None):
        """``(id, misuse, argument, bad)`` for every argument and every bad value; the ids in
        ``known`` (id -> the defect) are strict xfails, so a fix shows as an unexpected pass."""
        known = known or {}
        for arg, kind in self.kinds.items():
            bads = list(CATALOGUE[kind] if isinstance(kind, str) else kind)
            bads += self.extra.get(arg, [])
            for bad in bads:
                case_id = f"{self.name}-{arg}-{bad.label}"
                marks = ([pytest.mark.xfail(strict=True, reason=known[case_id])]
                         if case_id in known else [])
                yield pytest.param(self, arg, bad, id=case_id, marks=marks)


def cases(misuses, known=None):
    """Every case of every misuse (see :meth:`Misuse.cases`)."""
    return [case for misuse in misuses for case in misuse.cases(known)]


def load_known(path):
    """``id -> defect`` from a text file of lines ``id<TAB>defect`` (``#`` starts a comment)."""
    known = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            case_id, _, defect = line.partition("\t")
            known[case_id.strip()] = defect.strip() or "known defect"
    return known


#: Errors the message check applies to; anything else raised is a failure.
CLEAR_ERRORS = (ValueError, TypeError)


def _named(message, names):
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message)
               for n in names)


def assert_finite(result, where="result"):
    """Every number reachable from ``result`` (tuples, dataclasses, dicts, arrays) is finite."""
    if result is None or isinstance(result, str | bool | np.bool_):
        return
    if isinstance(result, numbers.Number):
        assert np.isfinite(result), f"{where} = {result!r} is not finite"
    elif isinstance(result, np.ndarray):
        if result.dtype.kind in "fc":
            assert np.isfinite(result).all(), f"{where} holds NaN or inf: {result!r}"
        elif result.dtype == object:
            for k, item in enumerate(result.flat):
                assert_finite(item, f"{where}.flat[{k}]")
    elif isinstance(result, tuple) and hasattr(result, "_fields"):
        for name in result._fields:
            assert_finite(getattr(result, name), f"{where}.{name}")
    elif is_dataclass(result) and not isinstance(result, type):
        for f in fields(result):
            assert_finite(getattr(result, f.name), f"{where}.{f.name}")
    elif isinstance(result, list | tuple):
        for k, item in enumerate(result):
            assert_finite(item, f"{where}[{k}]")
    elif isinstance(result, Mapping):
        for key, item in result.items():
            assert_finite(item, f"{where}[{key!r}]")


def check(misuse, arg, bad):
    """The verdict on one misuse (see the module docstring)."""
    kwargs = misuse.valid()
    kwargs[arg] = bad.make(kwargs[arg])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = misuse.call(**kwargs)
    except CLEAR_ERRORS as exc:
        message = f"{type(exc).__name__}: {exc}"
        assert not type(exc).__module__.startswith("numba"), (
            f"numba's error reached the user: {message}")
        names = misuse.names.get(arg, (arg,))
        assert _named(str(exc), names), (
            f"{misuse.name}({arg}={bad.label}) raised an error that does not name "
            f"{' or '.join(names)}: {message}")
    else:
        if not misuse.nonfinite:
            assert_finite(result, f"{misuse.name}({arg}={bad.label})")
