"""Input validation and random-state helpers shared by every module.

Every public function of the library takes ``random_state`` (None, int, ``SeedSequence``,
``np.random.Generator`` or, as scikit-learn accepts it, a legacy ``np.random.RandomState``) and
raises a ``ValueError``/``TypeError`` naming the offending argument
before doing any work.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

__all__ = [
    "ChainInterrupted",
    "as_float_array",
    "as_generator",
    "as_real",
    "check_flag",
    "check_int",
    "check_numeric",
    "check_open_unit_interval",
    "check_options",
    "check_per_item",
    "check_point",
    "check_positive",
    "check_probability",
    "check_rows",
    "check_vector",
    "seed_from_random_state",
    "spawn_generators",
]

class ChainInterrupted(KeyboardInterrupt):
    """Raised by a chain's progress callback when the run was asked to stop (Ctrl-C).

    It is raised between two segments of the chain's steps only, never inside one, so a chain
    driver that catches it stops with a consistent state and returns the steps it finished;
    a chain that does not catch it is reported as not run. A ``KeyboardInterrupt``, so that
    code not aware of it stops as it would on Ctrl-C.
    """


_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def as_generator(random_state=None) -> np.random.Generator:
    """Return a ``np.random.Generator`` for ``random_state``.

    Parameters
    ----------
    random_state : None, int, np.random.SeedSequence, np.random.Generator or RandomState
        ``None`` draws fresh OS entropy; an int or a ``SeedSequence`` seeds a new PCG64
        generator; a ``Generator`` is returned unchanged (so callers can share a stream); a
        ``RandomState`` seeds a new generator from four 32-bit words it draws
        (:func:`seed_from_random_state`), so the same RandomState state gives the same stream.

    Returns
    -------
    numpy.random.Generator
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(seed_from_random_state(random_state))
    if random_state is None or isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng(int(random_state))
    raise TypeError(
        "random_state must be None, an int, a np.random.SeedSequence, a np.random.Generator or "
        f"a np.random.RandomState, got {type(random_state).__name__}"
    )


def seed_from_random_state(random_state: np.random.RandomState) -> np.random.SeedSequence:
    """A ``SeedSequence`` from four 32-bit words drawn from a legacy ``RandomState``.

    Like scikit-learn's use of a RandomState, this advances it: two fits with the same instance
    differ, two fits with instances in the same state are identical.
    """
    words = random_state.randint(0, 2**32, size=4, dtype=np.uint64)
    return np.random.SeedSequence([int(w) for w in words])


def spawn_generators(random_state, n: int) -> list[np.random.Generator]:
    """Independent generators for ``n`` chains or workers.

    Streams come from ``SeedSequence.spawn`` so that results do not depend on how the work is
    scheduled (number of jobs, joblib backend).
    """
    if isinstance(random_state, np.random.Generator):
        seed_seq = random_state.bit_generator.seed_seq.spawn(1)[0]
    elif isinstance(random_state, np.random.SeedSequence):
        seed_seq = random_state
    elif isinstance(random_state, np.random.RandomState):
        seed_seq = seed_from_random_state(random_state)
    else:
        as_generator(random_state)  # validates the type
        seed_seq = np.random.SeedSequence(random_state)
    return [np.random.default_rng(child) for child in seed_seq.spawn(n)]


def check_open_unit_interval(value, name: str) -> float:
    """Validate a probability strictly inside (0, 1) such as ``delta``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1), got {type(value).__name__}")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}")
    return value


def as_float_array(value, name: str, *, allow_inf: str = "", finite: bool = True
                   ) -> np.ndarray:
    """``value`` as a float64 array whose entries are finite, or ``-inf``/``+inf`` where
    ``allow_inf`` holds ``"-"``/``"+"``, or anything a float holds (NaN too) when not
    ``finite``; otherwise a ``TypeError``/``ValueError`` naming it."""
    if isinstance(value, str | bytes):  # NumPy would read "3" as 3.0
        raise TypeError(f"{name} must be a real number or an array of real numbers, got "
                        f"{type(value).__name__}")
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number or an array of real numbers, got "
                        f"{type(value).__name__}") from None
    if finite and not np.isfinite(out).all():
        bad = np.isnan(out)
        if "+" not in allow_inf:
            bad |= np.isposinf(out)
        if "-" not in allow_inf:
            bad |= np.isneginf(out)
        if bad.any():
            allowed = {"": "finite", "-": "finite or -inf", "+": "finite or +inf"}.get(
                allow_inf, "real numbers, not NaN")
            raise ValueError(f"{name} must be {allowed}, got {float(out[bad].flat[0])!r} "
                             f"(None and NaN are not numbers)")
    return out


def check_rows(X, name: str, *, columns=None) -> np.ndarray:
    """A dense 2-d float64 array with at least one row and one column, all entries finite (a
    ``TypeError``/``ValueError`` naming ``name`` otherwise); ``columns`` fixes their number."""
    X = as_float_array(X, name)
    if X.ndim != 2 or 0 in X.shape:
        raise ValueError(f"{name} must be a 2-d array with at least one row and one column, "
                         f"got shape {X.shape}")
    if columns is not None and X.shape[1] != columns:
        raise ValueError(f"{name} must have {columns} columns, got {X.shape[1]}")
    return X


def check_vector(v, name: str, length: int, *, allow_inf: str = "", per: str | None = None
                 ) -> np.ndarray:
    """A 1-d float64 array of ``length`` entries (one per row of the array named ``per``, if
    given), finite but for ``allow_inf`` (see :func:`as_float_array`), or a
    ``TypeError``/``ValueError`` naming ``name``."""
    v = as_float_array(v, name, allow_inf=allow_inf)
    if v.shape != (length,):
        rows = f" (one per row of {per})" if per else ""
        raise ValueError(f"{name} must be a 1-d array of {length} entries{rows}, got shape "
                         f"{v.shape}")
    return v


def as_real(value, name: str, *, finite: bool = True) -> float:
    """A real number as a float (finite unless not ``finite``), or a ``TypeError``/
    ``ValueError`` naming ``name``: no string, None, bool or array stands for one."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if finite and not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def check_numeric(value, name: str) -> None:
    """Raise a ``TypeError`` naming ``name`` when ``value`` is text, or a list or array whose
    entries are not numbers (what scikit-learn's checks would report as a string that could
    not be converted, without naming the argument); anything else is left to those checks."""
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} must be an array of numbers, got {type(value).__name__}")
    if not isinstance(value, list | tuple | np.ndarray):
        return
    try:
        kind = np.asarray(value).dtype.kind
    except ValueError:  # ragged: the later checks say so
        return
    if kind in "USO":
        try:
            np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an array of numbers: {exc}") from None


def check_point(value, name: str) -> np.ndarray:
    """A point of a parameter space: a 1-d float64 array of at least one entry, all finite,
    or a ``TypeError``/``ValueError`` naming ``name`` (before any work is spent on it)."""
    out = as_float_array(value, name)
    if out.ndim != 1 or out.size == 0:
        raise ValueError(f"{name} must be a 1-d array of at least one entry, got shape "
                         f"{out.shape}")
    return out


def check_options(value, name: str) -> dict:
    """A dict of keyword options (None: none), or a ``TypeError`` naming ``name``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"{name} must be a dict of options by name, got "
                        f"{type(value).__name__}")
    return dict(value)


def check_per_item(value, name: str, length: int, *, items: str = "item") -> np.ndarray:
    """A real number for every one of ``length`` items, or one per item: a 1-d float64 array of
    ``length`` finite entries (a new array), or a ``TypeError``/``ValueError`` naming
    ``name``."""
    out = as_float_array(value, name)
    if out.ndim == 0:
        return np.full(length, float(out))
    if out.shape != (length,):
        raise ValueError(f"{name} must be a number or a 1-d array of {length} entries (one per "
                         f"{items}), got shape {out.shape}")
    return out.copy()


def check_flag(value, name: str) -> bool:
    """Validate a bool (Python's or NumPy's): no truthy string, number or None stands for one."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_probability(value, name: str) -> float:
    """Validate a probability in the closed interval [0, 1] such as an acceptance rate."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {type(value).__name__}")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return value


def check_positive(value, name: str, *, allow_inf: bool = False) -> float:
    """Validate a strictly positive (finite unless ``allow_inf``) real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive real number, got {type(value).__name__}")
    value = float(value)
    if not value > 0.0 or (np.isinf(value) and not allow_inf) or np.isnan(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Validate an integer in ``[low, high]`` (either end optional)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not _INT64_MIN <= value <= _INT64_MAX:  # compiled code and array sizes hold int64
        raise ValueError(f"{name} must fit in a 64-bit signed integer, got {value}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value
