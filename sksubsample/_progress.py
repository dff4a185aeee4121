"""The progress bar of the estimators' chains, and the parallel loop that feeds it.

:func:`run_tasks` runs one task per chain through :class:`joblib.Parallel` and, when the chains
report their steps, advances a tqdm bar over the draws as they run (also from worker
processes, through a small file mapped in memory: :class:`ProgressCounts`), without changing
the draws.
"""

from __future__ import annotations

import inspect
import os
import tempfile
import threading
import time
import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from ._dask_chains import (
    clear_stop_event,
    dask_client,
    dask_results,
    new_stop_event,
    set_stop_event,
    stop_event_is_set,
)
from ._interrupt import (
    ChainsInterrupted,
    InterruptGuard,
    kill_workers,
    run_one,
    stop_requested,
)
from ._utils import ChainInterrupted
from .diagnostics import CostWarning

__all__ = ["ChainProgress", "NoOpProgress", "Pace", "ProgressCounts", "in_chain_order",
           "progress_bar", "run_tasks", "takes_progress"]


class NoOpProgress:
    """Stands in for tqdm when ``progress=False`` (as emcee's ``_NoOpPBar``)."""

    n = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def refresh(self):
        pass

    def set_postfix_str(self, s, refresh=True):
        pass


def progress_bar(progress, total, desc, unit="chain"):
    """tqdm when ``progress`` is true, a no-op otherwise; ``progress="notebook"`` asks for the
    Jupyter widget, which needs ipywidgets (imported here, so that its absence is told before
    any work rather than as tqdm's ``IProgress not found`` after it)."""
    if not progress:
        return NoOpProgress()
    if progress == "notebook":
        try:
            import ipywidgets  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "progress='notebook' draws a Jupyter widget and needs ipywidgets; install it "
                "with `pip install sksubsample[notebook]` (or `pip install ipywidgets`), or "
                "use progress=True for a text bar"
            ) from exc
        from tqdm.notebook import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit)


class ProgressCounts:
    """Steps finished by each chain, in a small file mapped in memory, so that chains running
    in other processes (loky, a local dask cluster) report as they run, without a server
    process and without sending anything back with the tasks.

    Each chain adds to its own slot only, so writers never race; one more slot is the run's
    stop flag (Ctrl-C), set by the dispatching process only. Where the file cannot be opened
    (a worker on another machine) reports are dropped, and the bar advances when the chain's
    result arrives; the stop flag is then read from ``stop_event``, the name of a Dask event
    the dispatcher sets with the file's flag (:mod:`sksubsample._dask_chains`), when the
    chains run on a Dask cluster.
    """

    def __init__(self, n_chains, stop_event=None):
        fd, self.path = tempfile.mkstemp(prefix="sksubsample-progress-")
        os.close(fd)
        self.n_chains = n_chains
        self.stop_event = stop_event
        self._failed = False
        self._counts = np.memmap(self.path, dtype=np.int64, mode="w+", shape=(n_chains + 1,))

    def __getstate__(self):
        return {"path": self.path, "n_chains": self.n_chains, "stop_event": self.stop_event}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._failed = False
        self._counts = None

    def _open(self):
        if self._counts is None and not self._failed:
            try:
                self._counts = np.memmap(self.path, dtype=np.int64, mode="r+",
                                         shape=(self.n_chains + 1,))
            except (OSError, ValueError):
                self._failed = True
        return self._counts

    def add(self, chain, n):
        counts = self._open()
        if counts is not None:
            counts[chain] += n

    def counts(self):
        return np.array(self._counts[:self.n_chains])

    def request_stop(self):
        self._counts[self.n_chains] = 1
        if self.stop_event is not None:
            set_stop_event(self.stop_event)

    def stop_requested(self):
        counts = self._open()
        if counts is not None:
            return bool(counts[self.n_chains])
        return self.stop_event is not None and stop_event_is_set(self.stop_event)

    def close(self):
        self._counts = None
        if self.stop_event is not None:
            clear_stop_event(self.stop_event)
        try:
            os.remove(self.path)
        except OSError:  # pragma: no cover - e.g. still mapped by a worker on Windows
            pass


class ChainProgress:
    """The ``progress`` callable handed to chain ``chain``: calling it with n adds n steps to
    the chain's count, and raises :class:`~sksubsample._utils.ChainInterrupted` when the run
    was asked to stop (see :mod:`sksubsample._interrupt`)."""

    def __init__(self, counts, chain):
        self.counts = counts
        self.chain = chain

    def stop_requested(self):
        return self.counts.stop_requested()

    def __call__(self, n):
        self.counts.add(self.chain, int(n))
        if stop_requested(self.stop_requested):
            raise ChainInterrupted


class Pace:
    """Warn once, while the chains run, when the steps they have reported put the whole run
    far beyond what a user would wait for without being told.

    The projection is measured, not predicted from the data's shape: from the first report
    of steps on (what came before, compiling kernels and starting workers, is not a step's
    cost), the steps reported over at least :data:`FIRST_LOOK_SECONDS` give a rate, and the
    steps left at that rate the rest of the run; a run projected past :data:`WARN_SECONDS`
    in all gets a :class:`~sksubsample.diagnostics.CostWarning` saying how long and why.
    Whatever makes the steps slow (many parameters, an expensive model, a loaded machine),
    the user is told within seconds, not after hours; a run that will end soon is never
    warned about. Chains that cannot report (a worker on another machine) give no rate and
    no warning.
    """

    #: Seconds of reported steps before the first projection (a few of the chains'
    #: segments, past their first, short ones).
    FIRST_LOOK_SECONDS = 20.0
    #: A run projected to take longer than this in all is warned about.
    WARN_SECONDS = 1800.0

    def __init__(self, total_steps, desc):
        self.total_steps, self.desc = int(total_steps), desc
        self.began = time.monotonic()
        self.first = None  # (time, steps) of the first report seen
        self.warned = False

    def look(self, steps_done):
        """Project from ``steps_done`` (over all chains) and warn once when the run is
        projected past :data:`WARN_SECONDS`; returns whether it warned now."""
        now = time.monotonic()
        if self.warned or steps_done <= 0:
            return False
        if self.first is None:
            self.first = (now, steps_done)
            return False
        since, steps_then = self.first
        measured, steps = now - since, steps_done - steps_then
        if measured < self.FIRST_LOOK_SECONDS or steps <= 0:
            return False
        per_step = measured / steps
        projected = (now - self.began) + per_step * (self.total_steps - steps_done)
        if projected <= self.WARN_SECONDS:
            return False
        self.warned = True
        warnings.warn(
            f"{self.desc}: the chains have run {steps_done} of their {self.total_steps} steps, "
            f"the last {steps} in {measured:.0f} s ({per_step:.3g} s a step over all chains), "
            f"so this run would take about {_duration(projected)} in all. Ctrl-C stops it and "
            f"keeps the draws finished so far (sample_more continues them); fewer steps "
            f"(n_warmup, n_draws), fewer parameters, or more cores (n_jobs) make it shorter.",
            CostWarning, stacklevel=2)
        return True


def _duration(seconds):
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


#: Exceptions (by class name) of a task lost with the process that ran it: Dask's scheduler
#: gives up on a task whose workers died ``allowed-failures`` times, loky on a dead worker.
_LOST_TASK = frozenset({"KilledWorker", "TerminatedWorkerError", "FutureCancelledError",
                        "CancelledError", "BrokenProcessPool"})


def in_chain_order(results):
    """The results of the chains' tasks, in chain order; an error names its chain.

    A chain lost with its worker raises a ``RuntimeError`` naming it, and the fit stops there
    (no partial result); any other error of chain c is raised as it is, with a note naming c.
    """
    chain = 0
    try:
        for result in results:
            yield result
            chain += 1
    except Exception as exc:
        if type(exc).__name__ in _LOST_TASK:
            raise RuntimeError(
                f"chain {chain} was lost: the worker running it died ({type(exc).__name__}: "
                f"{exc}), and the fit stops without the chains' draws. A chain is a function "
                f"of its seed, so fitting again gives the same draws (on a Dask cluster, the "
                f"scheduler retries a task whose worker dies up to the "
                f"'distributed.scheduler.allowed-failures' setting)") from exc
        exc.add_note(f"(raised by chain {chain})")
        raise


def takes_progress(chain_fn):
    try:
        return "progress" in inspect.signature(chain_fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False


def _chain_results(chain_fn, args, per_chain, n_jobs, keywords=None):
    """``chain_fn(*args, *per_chain[c], **keywords(c))`` for every chain c, in chain order,
    each through :func:`~sksubsample._interrupt.run_one`.

    Through :class:`joblib.Parallel`, except under joblib's ``dask`` backend: there each chain
    is one task of its own on the backend's client, waited for in chain order (see
    :mod:`sksubsample._dask_chains`): a chain whose worker dies is run again by the scheduler
    or reported, by name, as soon as the scheduler gives up on it (joblib's batches of tasks
    may wait for it forever), and Ctrl-C or a cluster left without workers give control back.
    """
    keywords = keywords or (lambda c: {})
    client = dask_client()
    here = os.getpid()
    if client is None:
        tasks = (delayed(run_one)(chain_fn, here, (*args, *extra), keywords(c))
                 for c, extra in enumerate(per_chain))
        return Parallel(n_jobs=n_jobs, return_as="generator")(tasks)
    return dask_results(client, chain_fn, here, args, per_chain, keywords)


def _started_ahead(chain_fn, args, per_chain, n_jobs):
    """``chain_fn.start_ahead(*args, *per_chain[c])`` for every chain c, when the chains run
    one after the other in this process and ``chain_fn`` has it: what a chain gathers before
    its first step (its first rows from a store) is then gathered while the chains before it
    run. Yields each result that is not None: an object with ``launch``, which the caller
    calls for the first chain's at once and for the others' once they are all made (what
    they gather can then be gathered together, while the first chain runs), and ``close``,
    which it calls when the chains are done."""
    start = getattr(chain_fn, "start_ahead", None)
    if start is None or dask_client() is not None or effective_n_jobs(n_jobs) != 1:
        return
    for extra in per_chain:
        started = start(*args, *extra)
        if started is not None:
            yield started


def run_tasks(chain_fn, args, per_chain, *, n_jobs, progress, desc, steps_per_chain):
    """``chain_fn(*args, *per_chain[c])`` for every chain c, in parallel, in chain order.

    With ``steps_per_chain`` and a ``chain_fn`` that takes ``progress``, the bar counts the
    chains' steps as they report them (a background thread reads the shared counts every
    0.1 s); otherwise it counts finished chains. A ``chain_fn`` with a ``start_ahead``
    attribute has it called for every chain first, when the chains run one after the other
    here (:func:`_started_ahead`).

    Raises
    ------
    ChainsInterrupted
        On Ctrl-C (see :mod:`sksubsample._interrupt`), once every chain has returned what it
        finished (or :data:`~sksubsample._interrupt.GRACE_SECONDS` have passed): its
        ``results`` hold each chain's result, or None for a chain that did not run.
    """
    n_chains = len(per_chain)
    reports = takes_progress(chain_fn)
    by_steps = bool(progress) and steps_per_chain is not None and reports
    pace = (Pace(n_chains * steps_per_chain, desc)
            if reports and steps_per_chain is not None else None)
    total = n_chains * steps_per_chain if by_steps else n_chains
    # The shared counts also carry the stop flag: chains that report get them even unshown.
    counts = ProgressCounts(n_chains, new_stop_event()) if reports else None
    finished = np.zeros(n_chains, dtype=np.int64)
    results = [None] * n_chains
    done = threading.Event()
    guard = InterruptGuard(counts.request_stop if reports else None, cooperative=reports)
    starts = []
    try:
        # (one by one: a Ctrl-C among them leaves those started to the finally clause; the
        # first chain's launched alone, as the first chain waits for it, the others' together)
        for start in _started_ahead(chain_fn, args, per_chain, n_jobs):
            starts.append(start)
            if len(starts) == 1:
                start.launch()
        for start in starts[1:]:
            start.launch()
        with guard, progress_bar(progress, total, desc,
                                 unit="draw" if by_steps else "chain") as bar:
            lock = threading.Lock()

            def refresh():
                with lock:
                    steps = int(np.maximum(counts.counts(), finished).sum())
                    if by_steps and steps > bar.n:
                        bar.update(steps - bar.n)
                    if pace is not None:
                        pace.look(steps)

            def poll():
                while not done.wait(0.1):
                    refresh()

            watcher = (threading.Thread(target=poll, daemon=True)
                       if by_steps or pace is not None else None)
            if watcher is not None:
                watcher.start()
            try:
                keywords = (lambda c: {"progress": ChainProgress(counts, c)}) if reports else None
                for c, result in enumerate(in_chain_order(_chain_results(
                        chain_fn, args, per_chain, n_jobs, keywords))):
                    results[c] = result
                    if by_steps:
                        finished[c] = steps_per_chain
                        refresh()
                    else:
                        bar.update(1)
            except Exception:
                # A worker killed by the same Ctrl-C loses its chain, not the others' draws.
                if not guard.stopped:
                    raise
            finally:
                done.set()
                if watcher is not None:
                    watcher.join()
    except KeyboardInterrupt:
        kill_workers()
        raise ChainsInterrupted(results) from None
    finally:
        for start in starts:
            start.close()
        if counts is not None:
            counts.close()
    if guard.stopped:
        kill_workers()
        raise ChainsInterrupted(results)
    return results
