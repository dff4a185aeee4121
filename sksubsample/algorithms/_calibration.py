"""Costs measured on this machine, measured once and kept in the user's cache folder.

A choice made for speed alone (every alternative is correct, one is faster) is best made on
what the alternatives cost on the machine that runs them, and the surest way to know is to
time them. But timings are noisy: a choice that followed each new timing could flip between two
runs of the same fit, and when the choice changes the random stream's use (a Taylor-proxy plan
does), the same seed would give other draws. So a cost is measured once per *key* (what it
depends on: the kind of data, the machine) and stored; every later call, in this process or
another, reads the stored value. The same inputs then make the same choice, and a seed gives
the same draws, on a given machine and install.

Where: the file :data:`STORE_NAME` in the folder named by the environment variable
:data:`CACHE_ENV`, else in the user's cache folder (``$XDG_CACHE_HOME/sksubsample``,
``~/.cache/sksubsample``); where that folder cannot be written (a read-only home, or no home at
all: ``HOME`` unset and no entry in the password database), in a folder of the user's own in
the temporary folder, with a :class:`~sksubsample.exceptions.CostCacheWarning` that says so.
The package's own folders are never written, so a read-only install measures as well as any.
When no folder can be written, the measurements last as long as the process. The file records
the digest of the sources and each key names the machine it was measured on: after an upgrade
of the package, or on another machine sharing the home folder, the costs are measured again.
Deleting the file re-measures them.

Shared by processes: two processes that need the same measurement at once make it once (the
second waits on a lock, then reads what the first stored); a process waits at most
:data:`LOCK_SECONDS`, then measures on its own with a warning. The file is replaced whole
(written beside it, then renamed), so a reader never sees half of it. Every stored value is
checked before it is used (:func:`check_measurement`): a corrupt file or entry (not JSON, wrong
types, missing fields, lists of different lengths, NaN, infinite or negative seconds) is never
used: a warning says so, and the costs are measured again and stored in its place.

Setting :data:`MEASURE_ENV` to ``0`` turns measuring off: choices are then made on fixed rough
costs, the same on every machine (so that a seed gives the same draws everywhere, at some cost
in speed).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
import platform
import time
import warnings
from pathlib import Path

from ..exceptions import CostCacheWarning
from ._folders import private_temp_folder, replace_text, user_cache_folder, writable
from ._numba import sources_digest

__all__ = ["CACHE_ENV", "LOCK_SECONDS", "MEASURE_ENV", "SECONDS", "SERIES", "SIZES",
           "STORE_NAME", "check_measurement", "fastest", "machine_key", "measured", "measuring",
           "store_paths"]

#: The name of the file of measured costs.
STORE_NAME = "measured-costs.json"
#: The environment variable naming the folder of the store.
CACHE_ENV = "SKSUBSAMPLE_CACHE_DIR"
#: The environment variable that turns measuring off when set to ``0``.
MEASURE_ENV = "SKSUBSAMPLE_MEASURE_COSTS"
#: Seconds a process waits for another's measurement before it measures on its own (a process
#: stopped while it holds the lock must not stop every other fit on the machine).
LOCK_SECONDS = 300.0
#: The kinds of field a measurement's schema names (:func:`check_measurement`): seconds (a
#: finite number >= 0), a series of seconds (one per size), the sizes (ascending counts > 0).
SECONDS, SERIES, SIZES = "seconds", "series", "sizes"

# The measurements this process made or read, by key.
_MEMO = {}
# What this process has already warned of (each said once, not at every fit).
_WARNED = set()


def _warn(message, topic=None):
    topic = message if topic is None else topic
    if topic not in _WARNED:
        _WARNED.add(topic)
        warnings.warn(message, CostCacheWarning, stacklevel=4)


def _primary_folder():
    """The folder :data:`CACHE_ENV` names, else the user's cache folder's ``sksubsample``
    (None when there is no home folder)."""
    folder = os.environ.get(CACHE_ENV)
    if folder:
        return Path(folder)
    user = user_cache_folder()
    return None if user is None else user / "sksubsample"


def _temp_folder():
    """The fallback: this user's own folder in the temporary folder."""
    return private_temp_folder("sksubsample")


def store_paths():
    """Where the store may live, in the order tried: the folder :data:`CACHE_ENV` names, else
    the user's cache folder; then a folder of the user's own in the temporary folder (when it
    can be had)."""
    folders = [_primary_folder()]
    if folders[0] is None or not writable(folders[0]):
        folders.append(_temp_folder())
    return [folder / STORE_NAME for folder in folders if folder is not None]


def _store_to_write():
    """The store that writes go to (the first whose folder can be written), or None; warns
    when it is not the usual one."""
    primary = _primary_folder()
    if primary is not None and writable(primary):
        return primary / STORE_NAME
    where = ("there is no home folder (HOME is unset and the user has no entry in the "
             "password database)" if primary is None else f"{primary} cannot be written")
    temp = _temp_folder()
    if temp is not None:
        _warn(f"The measured costs cannot be stored in the usual folder: {where}. They are "
              f"stored in {temp} instead (set {CACHE_ENV} to choose the folder).", "moved")
        return temp / STORE_NAME
    _warn(f"The measured costs cannot be stored: {where}, and no folder of the user's own "
          f"can be made in the temporary folder. Costs measured in this process are kept for "
          f"it only (set {CACHE_ENV} to a folder that can be written).", "nowhere")
    return None


def measuring():
    """Whether costs are measured (:data:`MEASURE_ENV` is not ``0``), else planned on fixed
    rough costs."""
    return os.environ.get(MEASURE_ENV, "1").strip() != "0"


# Read once per process: a choice asked at every draw must not read /proc/cpuinfo each time.
@functools.cache
def machine_key():
    """What names this machine in a key: processor model, architecture and cores (the
    host name is left out: containers get a new one at every start)."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next((line.split(":", 1)[1].strip() for line in info
                          if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}|{platform.machine()}|{os.cpu_count()}"


# ----------------------------------------------------------------------------- validation


def _is_seconds(value):
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _field_problem(name, value, kind):
    """Why ``value`` is not a field of ``kind`` (None when it is)."""
    if kind == SECONDS:
        return None if _is_seconds(value) else f"{name} = {value!r} is not seconds >= 0"
    if not isinstance(value, list) or not value:
        return f"{name} is not a non-empty list"
    if kind == SIZES:
        if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in value):
            return f"{name} holds a value that is not a count > 0"
        if any(b <= a for a, b in itertools.pairwise(value)):
            return f"{name} is not ascending"
        return None
    bad = next((s for s in value if not _is_seconds(s)), None)
    return None if bad is None else f"{name} holds {bad!r}, not seconds >= 0"


def check_measurement(value, schema=None):
    """Why ``value`` cannot be used as a measurement; None when it can.

    Parameters
    ----------
    value : object
        A value as JSON reads it back.
    schema : dict of str -> str or None, default None
        The fields the measurement must have and their kinds (:data:`SECONDS`,
        :data:`SERIES`, :data:`SIZES`); None: whatever fields it has, lists taken as series.
        Every list must have the same length (a series has one entry per size).

    Returns
    -------
    str or None
        What is wrong, in words.
    """
    if not isinstance(value, dict) or not value:
        return f"a {type(value).__name__} where a non-empty JSON object was expected"
    if schema is None:
        schema = {name: SERIES if isinstance(field, list) else SECONDS
                  for name, field in value.items()}
    missing = sorted(set(schema) - set(value))
    if missing:
        return f"missing {', '.join(missing)}"
    for name, kind in schema.items():
        problem = _field_problem(name, value[name], kind)
        if problem is not None:
            return problem
    lengths = {name: len(value[name]) for name, kind in schema.items() if kind != SECONDS}
    if len(set(lengths.values())) > 1:
        return "lists of different lengths (" + ", ".join(
            f"{name}: {length}" for name, length in lengths.items()) + ")"
    return None


# ----------------------------------------------------------------------------- the store


class _Unreadable(Exception):
    """A store file that exists but cannot be used as a whole (its reason is the message)."""


def _read(path):
    """The entries of the store at ``path`` measured with these sources ({} when there is no
    file or it is of other sources); raises :class:`_Unreadable` for a corrupt file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise _Unreadable(f"cannot be read: {exc}") from None
    try:
        content = json.loads(text)
    except ValueError as exc:
        raise _Unreadable(f"is not valid JSON: {exc}") from None
    if not isinstance(content, dict):
        raise _Unreadable(f"holds a {type(content).__name__}, not a JSON object")
    if content.get("sources") != sources_digest():
        return {}
    entries = content.get("entries")
    if not isinstance(entries, dict):
        raise _Unreadable("has no object of entries")
    return entries


def _stored(key, schema):
    """The valid stored value of ``key`` (None when there is none), warning of any corrupt
    file or entry met on the way (which is then not used)."""
    for path in store_paths():
        try:
            entries = _read(path)
        except _Unreadable as exc:
            _warn(f"The store of measured costs {path} {exc}: it is not used; the costs are "
                  f"measured again and the store is written anew.")
            continue
        if key not in entries:
            continue
        problem = check_measurement(entries[key], schema)
        if problem is None:
            return entries[key]
        _warn(f"The stored costs {key!r} in {path} are corrupt ({problem}): they are not "
              f"used; the costs are measured again and stored in their place.")
    return None


def _write(path, key, value):
    """Add ``key: value`` to the store at ``path``, replacing the file whole. Returns whether
    it could."""
    try:
        entries = _read(path)
    except _Unreadable:
        entries = {}  # replaced: its corruption was reported when it was read
    entries[key] = value
    try:
        replace_text(path, json.dumps({"sources": sources_digest(), "entries": entries},
                                      indent=0, sort_keys=True))
    except OSError as exc:
        _warn(f"The measured costs could not be written to {path} ({exc}): they are kept for "
              f"this process only.")
        return False
    return True


@contextlib.contextmanager
def _exclusive(path):
    """Hold the lock of the store at ``path`` (a lock file beside it), so that two processes
    needing the same measurement at once make it once: the second waits, then reads what the
    first stored. Waits at most :data:`LOCK_SECONDS`; without a lock to take (no ``fcntl``, a
    file system that refuses locks) the caller goes on without one, with a warning."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        fcntl = None
    lock = None
    if path is not None and fcntl is not None:
        try:
            lock = open(path.with_suffix(".lock"), "a")  # held across the yield
            _acquire(fcntl, lock, path)
        except (OSError, TimeoutError) as exc:
            if lock is not None:
                lock.close()
                lock = None
            _warn(f"The lock of the store of measured costs {path} could not be taken "
                  f"({exc}): two processes may measure the same costs at once, and plan "
                  f"differently.", "lock")
    try:
        yield
    finally:
        if lock is not None:
            lock.close()


def _acquire(fcntl, lock, path):
    """Wait for ``lock`` at most :data:`LOCK_SECONDS` (TimeoutError after that)."""
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"another process has held it for over {LOCK_SECONDS:g} "
                                   f"s") from None
            time.sleep(0.02)


def fastest(run, rounds, warm_up=None):
    """The fastest of ``rounds`` timed calls of ``run()``, as ``(seconds, what it returned)``.

    The fastest, not the mean: the slower timings met interruptions (other processes, page
    faults), which are not the cost being measured. ``warm_up()`` (``run`` when None) is called
    once first, untimed, so that caches and compilation are not timed either.

    Parameters
    ----------
    run : callable
    rounds : int >= 1
    warm_up : callable or None, default None

    Returns
    -------
    tuple of (float, object)
    """
    (run if warm_up is None else warm_up)()
    best, value = math.inf, None
    for _ in range(rounds):
        began = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - began
        if seconds < best:
            best, value = seconds, result
    return best, value


def measured(key, measure, schema=None):
    """The stored measurement of ``key``, or ``measure()`` run once and stored.

    Parameters
    ----------
    key : str
        What the measurement depends on (the machine is added: :func:`machine_key`).
    measure : callable
        ``measure() -> value``, a JSON object of seconds and lists of seconds.
    schema : dict of str -> str or None, default None
        The fields of a valid value and their kinds (see :func:`check_measurement`): a stored
        value that does not match it is not used (a warning, then a new measurement).

    Returns
    -------
    value : dict
        The stored value, or the one just measured.
    seconds : float
        The time this call spent measuring (0 when the value was stored).

    Raises
    ------
    RuntimeError
        When ``measure()`` itself returns an invalid value (the store is then left as it was).
    """
    key = f"{machine_key()}|{key}"
    if key in _MEMO:
        return _MEMO[key], 0.0
    target = _store_to_write()
    with _exclusive(target):
        value = _stored(key, schema)
        if value is not None:
            _MEMO[key] = value
            return value, 0.0
        began = time.perf_counter()
        value = measure()
        seconds = time.perf_counter() - began
        # Kept as JSON reads it back, so that this process and later ones use the same numbers.
        value = json.loads(json.dumps(value, sort_keys=True))
        problem = check_measurement(value, schema)
        if problem is not None:
            raise RuntimeError(f"the measurement of {key!r} is invalid: {problem}")
        if target is not None:
            _write(target, key, value)
    _MEMO[key] = value
    return value, seconds
