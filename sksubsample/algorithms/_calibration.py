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
``~/.cache/sksubsample``); the package's own folders are never written, so a read-only install
measures as well as any. When the store cannot be written, the measurements last as long as
the process. The file records the digest of the sources and the machine it was measured on:
after an upgrade of the package, or on another machine sharing the home folder, the costs are
measured again. Deleting the file re-measures them.

Setting :data:`MEASURE_ENV` to ``0`` turns measuring off: choices are then made on fixed rough
costs, the same on every machine (so that a seed gives the same draws everywhere, at some cost
in speed).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from pathlib import Path

from ._numba import sources_digest

__all__ = ["CACHE_ENV", "MEASURE_ENV", "STORE_NAME", "machine_key", "measured",
           "measuring", "store_paths"]

#: The name of the file of measured costs.
STORE_NAME = "measured-costs.json"
#: The environment variable naming the folder of the store.
CACHE_ENV = "SKSUBSAMPLE_CACHE_DIR"
#: The environment variable that turns measuring off when set to ``0``.
MEASURE_ENV = "SKSUBSAMPLE_MEASURE_COSTS"

# The measurements this process made or read, by key.
_MEMO = {}


def store_paths():
    """Where the store may live, in the order tried: the folder :data:`CACHE_ENV` names, else
    the user's cache folder."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sksubsample"
    return [Path(folder) / STORE_NAME]


def measuring():
    """Whether costs are measured (:data:`MEASURE_ENV` is not ``0``), else planned on fixed
    rough costs."""
    return os.environ.get(MEASURE_ENV, "1").strip() != "0"


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


def _read(path):
    """The entries of the store at ``path`` measured with these sources ({} otherwise)."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(content, dict) or content.get("sources") != sources_digest():
        return {}
    entries = content.get("entries")
    return entries if isinstance(entries, dict) else {}


def _write(key, value):
    """Add ``key: value`` to the first store that can be written (atomically: a reader never
    sees half a file). Returns whether one could."""
    for path in store_paths():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            entries = _read(path)
            entries[key] = value
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"sources": sources_digest(), "entries": entries},
                                            indent=0, sort_keys=True), encoding="utf-8")
            temporary.replace(path)
            return True
        except OSError:
            continue
    return False


@contextlib.contextmanager
def _exclusive():
    """Hold the store's lock (a lock file beside the first store that can be written), so that
    two processes needing the same measurement at once make it once: the second waits, then
    reads what the first stored. Without ``fcntl`` or a folder to lock in, no lock."""
    lock = None
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        fcntl = None
    for path in store_paths() if fcntl is not None else ():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(path.with_suffix(".lock"), "a")  # held across the yield
            fcntl.flock(lock, fcntl.LOCK_EX)
            break
        except OSError:
            if lock is not None:
                lock.close()
                lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.close()


def measured(key, measure):
    """The stored measurement of ``key``, or ``measure()`` run once and stored.

    Parameters
    ----------
    key : str
        What the measurement depends on (the machine is added: :func:`machine_key`).
    measure : callable
        ``measure() -> value``, a JSON-serialisable value (a dict of floats and lists).

    Returns
    -------
    value : object
        The stored value, or the one just measured.
    seconds : float
        The time this call spent measuring (0 when the value was stored).
    """
    key = f"{machine_key()}|{key}"
    if key in _MEMO:
        return _MEMO[key], 0.0
    with _exclusive():
        for path in store_paths():
            entries = _read(path)
            if key in entries:
                _MEMO[key] = entries[key]
                return entries[key], 0.0
        began = time.perf_counter()
        value = measure()
        seconds = time.perf_counter() - began
        # Kept as JSON reads it back, so that this process and later ones use the same numbers.
        value = json.loads(json.dumps(value))
        _write(key, value)
    _MEMO[key] = value
    return value, seconds
