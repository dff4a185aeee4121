"""Chains as tasks of a Dask cluster (joblib's ``dask`` backend), waited for so that Ctrl-C and
a cluster without workers give control back.

Under joblib's ``dask`` backend each chain is one task of its own, submitted to the backend's
client (joblib's batches of tasks may wait forever for a chain whose worker died). Three
things keep the dispatching process in control while it waits:

* the wait is a loop of short sleeps (:data:`POLL_SECONDS`), never one blocking
  ``Future.result()``: the main thread then sees Ctrl-C's ``KeyboardInterrupt`` (raised by
  :class:`~sksubsample._interrupt.InterruptGuard`) at once, and the chains' tasks are
  cancelled on the way out;
* while the chains run, the workers' own SIGINT is deferred (:func:`defer_sigint`, run on each
  worker by ``Client.run``): a local cluster's worker processes share the terminal's process
  group, and a Ctrl-C that killed them would lose every chain's draws. Deferred, it asks their
  chains to stop, as in a loky worker (:func:`~sksubsample._interrupt.run_one`), and the
  workers stay up for ``sample_more``;
* a cluster that has had no running worker for :data:`NO_WORKERS_SECONDS` (its workers died
  or were closed), or whose client closed, is an error naming the chain waited for: the
  scheduler itself would keep the task waiting for a worker forever.

A Ctrl-C reaches a remote worker neither as a signal nor through the file the chains report
to (:class:`~sksubsample._progress.ProgressCounts`, which only processes of the dispatching
machine can open): the run's request to stop is also a ``distributed.Event``
(:func:`new_stop_event`), set by the dispatcher (:func:`set_stop_event`) and read by chains
that cannot open the file (:func:`stop_event_is_set`, at most every :data:`EVENT_SECONDS`), so
that they too return the draws they finished.
"""

from __future__ import annotations

import threading
import time
import uuid

from ._interrupt import defer_sigint, restore_sigint, run_one

__all__ = ["EVENT_SECONDS", "NO_WORKERS_SECONDS", "POLL_SECONDS", "clear_stop_event",
           "dask_client", "dask_results", "new_stop_event", "set_stop_event",
           "stop_event_is_set"]

#: Seconds between two looks at whether the chain waited for has finished.
POLL_SECONDS = 0.05

#: Seconds between two questions to the scheduler about its workers, and the longest one may
#: take (an unreachable scheduler counts as one without workers).
_ASK_SECONDS = 1.0

#: Seconds a cluster may have no running worker, while a chain waits, before the fit stops
#: with an error naming the chain (the ``distributed.scheduler.no-workers-timeout`` setting,
#: where set, instead: an adaptive cluster may take longer to start its first worker).
NO_WORKERS_SECONDS = 10.0


#: Seconds between two looks of a chain at its run's stop event (a request to the scheduler).
EVENT_SECONDS = 0.2

#: In the dispatching process: the client of each run's stop event, by the event's name.
_EVENT_CLIENTS = {}

#: In the dispatching process: the stop events that were set (the scheduler holds an event
#: only once it is set, so only those need clearing).
_EVENTS_SET = set()

#: In a worker process: per stop event, ``[event, time of the last look, what it read]``.
_EVENT_LOOKS = {}


def new_stop_event():
    """The name of a new run's stop event when the chains run on a Dask cluster (joblib's
    ``dask`` backend), else None."""
    client = dask_client()
    if client is None:
        return None
    name = f"sksubsample-stop-{uuid.uuid4().hex}"
    _EVENT_CLIENTS[name] = client
    return name


def _on_event(name, method):
    """``Event(name).method()`` on the run's client, in a daemon thread: called from a SIGINT
    handler and on the way out of a run, it must not wait on a cluster that does not answer."""
    client = _EVENT_CLIENTS.get(name)
    if client is None or client.status != "running":
        return

    def call():
        from distributed import Event

        try:
            getattr(Event(name, client=client), method)()
        except Exception:  # a closing client or an unreachable scheduler
            pass

    threading.Thread(target=call, daemon=True, name="sksubsample-stop-event").start()


def set_stop_event(name):
    """Ask the chains of the run whose stop event is ``name`` to stop (dispatching process)."""
    _EVENTS_SET.add(name)
    _on_event(name, "set")


def clear_stop_event(name):
    """End the run's stop event: the scheduler forgets a set event once it is cleared (one
    never set it never held)."""
    if name in _EVENTS_SET:
        _EVENTS_SET.discard(name)
        _on_event(name, "clear")
    _EVENT_CLIENTS.pop(name, None)


def stop_event_is_set(name):
    """Whether the stop event ``name`` is set, read in a Dask worker's task at most every
    :data:`EVENT_SECONDS` (False outside a Dask worker, or when the scheduler does not
    answer)."""
    look = _EVENT_LOOKS.get(name)
    now = time.monotonic()
    if look is not None and now - look[1] < EVENT_SECONDS:
        return look[2]
    event, value = None if look is None else look[0], False
    try:
        if event is None:
            from distributed import Event, get_client

            event = Event(name, client=get_client())
        value = bool(event.is_set())
    except Exception:  # not in a worker, no distributed, a closing scheduler
        pass
    if look is None and len(_EVENT_LOOKS) >= 64:
        _EVENT_LOOKS.clear()  # the events of past runs
    _EVENT_LOOKS[name] = [event, now, value]
    return value


def dask_client():
    """The ``dask.distributed`` client of an active joblib ``dask`` backend, or None."""
    from joblib.parallel import get_active_backend

    backend = get_active_backend()[0]
    return getattr(backend, "client", None) if type(backend).__name__ == (
        "DaskDistributedBackend") else None


def _task_name(chain_fn, extra):
    """The name in a chain's task key: its function's (for a job ``(fn, arguments)`` run
    through a dispatcher, ``fn``'s), so that the scheduler's tasks say what they run."""
    inner = extra[0] if extra and callable(extra[0]) else chain_fn
    return getattr(inner, "__name__", "chain")


def _no_workers_seconds():
    import dask
    from dask.utils import parse_timedelta

    setting = dask.config.get("distributed.scheduler.no-workers-timeout", None)
    return NO_WORKERS_SECONDS if setting is None else parse_timedelta(setting, "s")


def _running_workers(client):
    """How many running workers the scheduler has; 0 when it does not answer in time."""
    if client.status != "running":
        return 0
    try:
        return len(client.sync(client.scheduler.ncores_running, callback_timeout=_ASK_SECONDS))
    except (OSError, TimeoutError, RuntimeError):  # comm closed, no answer, loop closed
        return 0


def _wait(client, future, chain, limit):
    """Return once ``future`` (chain ``chain``'s task) is done; raise a ``RuntimeError``
    naming the chain once the cluster has had no running worker for ``limit`` seconds."""
    next_look = time.monotonic() + _ASK_SECONDS
    without = None  # since when the cluster has had no running worker
    while not future.done():
        # A short sleep, not a blocking result(): the main thread's KeyboardInterrupt lands
        # between two of them.
        time.sleep(POLL_SECONDS)
        now = time.monotonic()
        if now < next_look:
            continue
        if client.status in ("closing", "closed"):
            raise RuntimeError(f"chain {chain} cannot finish: the Dask client was closed "
                               f"while the chain waited for its result")
        if _running_workers(client):
            without = None
        elif without is None:
            without = now
        elif now - without >= limit:
            raise RuntimeError(
                f"chain {chain} cannot run: the Dask cluster has had no running worker for "
                f"{limit:g} s (its workers died or were closed; a Ctrl-C in a terminal also "
                f"reaches a local cluster's worker processes outside a fit). Start workers and "
                f"fit again: a chain is a function of its seed, so the draws are the same "
                f"(the wait is the 'distributed.scheduler.no-workers-timeout' setting, "
                f"{NO_WORKERS_SECONDS:g} s where unset)")
        next_look = time.monotonic() + _ASK_SECONDS


#: Seconds the workers have to defer their SIGINT before the chains are submitted (a worker's
#: first call imports this package), and to put it back after them.
_DEFER_SECONDS, _RESTORE_SECONDS = 60.0, 5.0


def _on_workers(client, fn, run, seconds):
    """``fn(run)`` on every worker of ``client`` that answers within ``seconds``: one that does
    not is left as it is (a late call is matched by ``run``, see
    :func:`~sksubsample._interrupt.defer_sigint`)."""
    if client.status != "running":
        return
    try:
        client.run(fn, run, on_error="ignore", callback_timeout=seconds)
    except (OSError, TimeoutError, RuntimeError):  # unreachable workers, a closing client
        pass


def dask_results(client, chain_fn, dispatcher, args, per_chain, keywords):
    """``run_one(chain_fn, dispatcher, (*args, *per_chain[c]), keywords(c))`` for every
    chain c, one task a chain on ``client``'s cluster, in chain order.

    A generator: it submits every chain when first advanced; on its way out (done, an error,
    Ctrl-C) it cancels the chains' unfinished tasks and puts the workers' SIGINT back.

    Raises
    ------
    RuntimeError
        Naming the chain waited for, when the cluster has had no running worker for
        :data:`NO_WORKERS_SECONDS` or the client closed. An error of a chain's task (e.g.
        ``KilledWorker`` once the scheduler gives up on it) is raised as it is.
    """
    limit = _no_workers_seconds()
    run = uuid.uuid4().hex
    futures = []
    try:
        _on_workers(client, defer_sigint, run, _DEFER_SECONDS)
        for c, extra in enumerate(per_chain):
            futures.append(client.submit(
                run_one, chain_fn, dispatcher, (*args, *extra), keywords(c), pure=False,
                key=f"{_task_name(chain_fn, extra)}-chain{c}-{run}"))
        for c, future in enumerate(futures):
            _wait(client, future, c, limit)
            yield future.result()
    finally:
        pending = [f for f in futures if not f.done()]
        if pending and client.status == "running":
            client.cancel(pending)
        _on_workers(client, restore_sigint, run, _RESTORE_SECONDS)

