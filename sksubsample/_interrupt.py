"""Ctrl-C during the chains: a request to stop, seen by every chain between two segments.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the process that
dispatched the chains and its joblib workers. Raised where it lands, a ``KeyboardInterrupt``
would cut a chain in the middle of its bookkeeping and lose every draw. Instead:

* while the chains run, the dispatching process's first SIGINT only *asks* them to stop
  (:class:`InterruptGuard`): a process-wide event for the chains running in its threads, and a
  flag in the file the chains report their progress through, for those in other processes;
* a worker process running a chain defers its own SIGINT the same way (:func:`run_one`; a
  Dask worker, whose chains run outside its main thread, through :func:`defer_sigint` for the
  whole run, see :mod:`sksubsample._dask_chains`);
* a chain sees the request at its next report (:meth:`ChainReport.__call__`, every ~0.2 s) as
  :class:`~sksubsample._utils.ChainInterrupted`: the MH driver stops there and returns the draws
  it finished; a chain that cannot stop early is reported as not run (``None``);
* when every chain has answered, the dispatcher raises :class:`ChainsInterrupted` with what
  they returned, and shuts loky's workers down (a Dask cluster's workers stay up). A second
  Ctrl-C, or chains that have not answered within :data:`GRACE_SECONDS`, raise at once (loky's
  workers are then killed, a Dask cluster's tasks cancelled, and the chains still running
  lost).

A worker process whose dispatcher died (SIGTERM, SIGKILL) exits within
:data:`_WATCH_SECONDS` rather than running a chain nobody will read.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time

from ._utils import ChainInterrupted

__all__ = ["GRACE_SECONDS", "ChainsInterrupted", "InterruptGuard", "defer_sigint",
           "restore_sigint", "run_one", "stop_requested", "watch_dispatcher"]

#: Seconds the chains have, after the first Ctrl-C, to return the draws they finished.
GRACE_SECONDS = 1.5

#: Set in a process whose chains were asked to stop (by its own SIGINT or its dispatcher's).
_STOP = threading.Event()

#: The thread of a worker process that watches for the death of the process that started it.
_WATCHED = [None]

#: Seconds between two looks at whether a worker process's dispatcher is still alive.
_WATCH_SECONDS = 0.5

#: In a Dask worker process: the SIGINT handler :func:`defer_sigint` replaced, the runs of
#: chains (by id) that asked for the deferral (runs from several clients may overlap), and
#: those whose :func:`restore_sigint` came first (``Client.run`` calls may arrive in any order).
_DEFERRED = {"previous": None, "runs": set(), "restored": set()}


class ChainsInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run of chains: ``results[c]`` is what chain c returned (its draws so
    far, or all of them), or None for a chain that did not run or was lost."""

    def __init__(self, results):
        super().__init__("the chains were interrupted")
        self.results = results


def stop_requested(flag=None):
    """Whether this process's chains were asked to stop (``flag``: the run's shared flag,
    a callable, read too)."""
    return _STOP.is_set() or (flag is not None and flag())


def _watch(dispatcher):
    while True:
        time.sleep(_WATCH_SECONDS)
        if os.getppid() != dispatcher:
            # Orphaned: no one will read this chain's draws, and it would hold its memory on.
            os._exit(1)


def watch_dispatcher(dispatcher):
    """In a worker process started by ``dispatcher`` (its parent), a daemon thread that exits
    the process once ``dispatcher`` has died (SIGTERM, SIGKILL): compiled chains and set-ups
    run long stretches the main thread cannot leave."""
    if _WATCHED[0] is None and os.getppid() == dispatcher:
        _WATCHED[0] = threading.Thread(target=_watch, args=(dispatcher,), daemon=True,
                                       name="sksubsample-dispatcher-watch")
        _WATCHED[0].start()


def _defer(signum, frame):
    _STOP.set()


def defer_sigint(run):
    """Defer this process's SIGINT (it then asks the chains to stop) for the run of chains
    ``run`` (an id), until its :func:`restore_sigint`; False where it cannot (not the main
    thread).

    For a Dask worker process, through ``Client.run``, which calls it on the worker's event
    loop, in its main thread: the chains run in the worker's other threads, where
    :func:`run_one` cannot set a signal handler, and the process, in the terminal's process
    group when its cluster is local, would otherwise die of Ctrl-C with the chains' draws.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    if run in _DEFERRED["restored"]:  # its restore_sigint came first
        _DEFERRED["restored"].discard(run)
        return False
    if not _DEFERRED["runs"]:
        _DEFERRED["previous"] = signal.signal(signal.SIGINT, _defer)
    _DEFERRED["runs"].add(run)
    return True


def restore_sigint(run):
    """End :func:`defer_sigint` for ``run``: the last run deferring puts the previous handler
    back."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if run not in _DEFERRED["runs"]:
        _DEFERRED["restored"].add(run)
        return False
    _DEFERRED["runs"].discard(run)
    if not _DEFERRED["runs"]:
        signal.signal(signal.SIGINT, _DEFERRED["previous"])
        _DEFERRED["previous"] = None
    return True


def run_one(chain_fn, dispatcher, args, kwargs):
    """``chain_fn(*args, **kwargs)`` for one chain, in whatever process runs it.

    In a worker process (not ``dispatcher``, the dispatching process's pid), SIGINT is
    deferred while the chain runs, and the dispatcher's death watched when it is this
    process's parent (:func:`watch_dispatcher`). A chain asked to stop before it starts, or
    that stops without a result (:class:`~sksubsample._utils.ChainInterrupted`), gives None.
    """
    worker = os.getpid() != dispatcher
    previous = None
    if worker:
        _STOP.clear()
        watch_dispatcher(dispatcher)
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, _defer)
    try:
        flag = kwargs.get("progress")
        if stop_requested(getattr(flag, "stop_requested", None)):
            return None
        return chain_fn(*args, **kwargs)
    except ChainInterrupted:
        return None
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def kill_workers():
    """Shut down loky's reusable workers (those joblib's process backend ran the chains on),
    so that an interrupted fit leaves no process behind."""
    try:
        from joblib.externals.loky import reusable_executor
    except ImportError:  # pragma: no cover - joblib without loky
        return
    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=False, kill_workers=True)


class InterruptGuard:
    """While the chains of one run are collected: the dispatching process's first SIGINT asks
    them to stop (``request``: also sets the run's shared flag); a second one, or
    :data:`GRACE_SECONDS` without every chain's answer, raises ``KeyboardInterrupt``.

    Only in the main thread, and only over Python's default handler (a handler of the user's
    own is left alone); ``cooperative=False`` (chains that never report) leaves SIGINT as it
    is.
    """

    def __init__(self, request, cooperative=True):
        self.request = request
        self.cooperative = cooperative
        self.stopped = False
        self._previous = None
        self._timer = None

    def __enter__(self):
        _STOP.clear()
        if (self.cooperative and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.stopped:
            raise KeyboardInterrupt
        self.stopped = True
        _STOP.set()
        self.request()
        # interrupt_main runs this handler again in the main thread, which then raises.
        self._timer = threading.Timer(GRACE_SECONDS, _thread.interrupt_main)
        self._timer.daemon = True
        self._timer.start()

    def __exit__(self, *exc):
        if self._timer is not None:
            self._timer.cancel()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        _STOP.clear()
        return False
