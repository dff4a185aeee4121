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
import uuid

import numpy as np
from joblib import Parallel, delayed

__all__ = ["ChainProgress", "NoOpProgress", "ProgressCounts", "in_chain_order", "progress_bar",
           "run_tasks", "takes_progress"]


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

    Each chain adds to its own slot only, so writers never race. Where the file cannot be
    opened (a worker on another machine) reports are dropped: the bar then advances when the
    chain's result arrives.
    """

    def __init__(self, n_chains):
        fd, self.path = tempfile.mkstemp(prefix="sksubsample-progress-")
        os.close(fd)
        self.n_chains = n_chains
        self._failed = False
        self._counts = np.memmap(self.path, dtype=np.int64, mode="w+", shape=(n_chains,))

    def __getstate__(self):
        return {"path": self.path, "n_chains": self.n_chains}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._failed = False
        self._counts = None

    def _open(self):
        if self._counts is None and not self._failed:
            try:
                self._counts = np.memmap(self.path, dtype=np.int64, mode="r+",
                                         shape=(self.n_chains,))
            except (OSError, ValueError):
                self._failed = True
        return self._counts

    def add(self, chain, n):
        counts = self._open()
        if counts is not None:
            counts[chain] += n

    def counts(self):
        return np.array(self._counts)

    def close(self):
        self._counts = None
        try:
            os.remove(self.path)
        except OSError:  # pragma: no cover - e.g. still mapped by a worker on Windows
            pass


class ChainProgress:
    """The ``progress`` callable handed to chain ``chain``: calling it with n adds n steps to
    the chain's count."""

    def __init__(self, counts, chain):
        self.counts = counts
        self.chain = chain

    def __call__(self, n):
        self.counts.add(self.chain, int(n))


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


def _dask_client():
    """The ``dask.distributed`` client of an active joblib ``dask`` backend, or None."""
    from joblib.parallel import get_active_backend

    backend = get_active_backend()[0]
    return getattr(backend, "client", None) if type(backend).__name__ == (
        "DaskDistributedBackend") else None


def _chain_results(chain_fn, args, per_chain, n_jobs, keywords=None):
    """``chain_fn(*args, *per_chain[c], **keywords(c))`` for every chain c, in chain order.

    Through :class:`joblib.Parallel`, except under joblib's ``dask`` backend: there each chain
    is one task of its own, submitted to the backend's client and waited for in chain order, so
    that a chain whose worker dies is run again by the scheduler or reported, by name, as
    soon as the scheduler gives up on it (joblib's batches of tasks may wait for it forever).
    """
    keywords = keywords or (lambda c: {})
    client = _dask_client()
    if client is None:
        tasks = (delayed(chain_fn)(*args, *extra, **keywords(c))
                 for c, extra in enumerate(per_chain))
        return Parallel(n_jobs=n_jobs, return_as="generator")(tasks)
    run = uuid.uuid4().hex
    futures = [client.submit(chain_fn, *args, *extra, **keywords(c), pure=False,
                             key=f"{getattr(chain_fn, '__name__', 'chain')}-chain{c}-{run}")
               for c, extra in enumerate(per_chain)]
    return _in_order(client, futures)


def _in_order(client, futures):
    try:
        for future in futures:
            yield future.result()
    finally:
        client.cancel([f for f in futures if not f.done()])


def run_tasks(chain_fn, args, per_chain, *, n_jobs, progress, desc, steps_per_chain):
    """``chain_fn(*args, *per_chain[c])`` for every chain c, in parallel, in chain order.

    With ``steps_per_chain`` and a ``chain_fn`` that takes ``progress``, the bar counts the
    chains' steps as they report them (a background thread reads the shared counts every
    0.1 s); otherwise it counts finished chains.
    """
    n_chains = len(per_chain)
    by_steps = bool(progress) and steps_per_chain is not None and takes_progress(chain_fn)
    if not by_steps:
        results = []
        with progress_bar(progress, n_chains, desc) as bar:
            # The results come in submission order as they complete, so the bar advances
            # during the run without changing which chain gets which stream.
            for result in in_chain_order(_chain_results(chain_fn, args, per_chain, n_jobs)):
                results.append(result)
                bar.update(1)
        return results
    counts = ProgressCounts(n_chains)
    finished = np.zeros(n_chains, dtype=np.int64)
    done = threading.Event()
    try:
        with progress_bar(progress, n_chains * steps_per_chain, desc, unit="draw") as bar:
            lock = threading.Lock()

            def refresh():
                with lock:
                    shown = int(np.maximum(counts.counts(), finished).sum())
                    if shown > bar.n:
                        bar.update(shown - bar.n)

            def poll():
                while not done.wait(0.1):
                    refresh()

            watcher = threading.Thread(target=poll, daemon=True)
            watcher.start()
            results = []
            try:
                for c, result in enumerate(in_chain_order(_chain_results(
                        chain_fn, args, per_chain, n_jobs,
                        lambda c: {"progress": ChainProgress(counts, c)}))):
                    results.append(result)
                    finished[c] = steps_per_chain
                    refresh()
            finally:
                done.set()
                watcher.join()
    finally:
        counts.close()
    return results
