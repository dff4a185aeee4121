"""The threads that read and map units of rows ahead of the caller, and how they are let go.

A pass over a store maps its units on a few threads, and a chain's row stream gathers its
next rows on one; both must give control back at once when the caller stops early (Ctrl-C,
an error), whatever those threads are doing. Leaving a ``with ThreadPoolExecutor(...)`` block
waits for every task (``shutdown(wait=True)``): the one running and all those queued behind
it. The first call of a compiled kernel compiles it (seconds, minutes on a loaded machine) in
the thread that calls it, so a Ctrl-C during a set-up's pass waited for the compile and then
for the units queued behind it. A pool left early is instead let go (:func:`let_go`): its
queued tasks are cancelled and the running ones are not waited for. They end on their own,
and the interpreter still joins them when it exits (``concurrent.futures`` joins its threads
at exit), so a process that exits after a Ctrl-C still waits for a compile under way, but for
nothing queued behind it, and the caller has control back at once.

The units are all mapped by the pool's threads, the calling thread only waiting for their
results: a lock wait, which Ctrl-C interrupts at once. A compile run in the calling thread (the
first unit mapped there) would hold Ctrl-C until its compiler pass ends (up to a few seconds
for a large function's machine code, see :mod:`sksubsample.algorithms._compile_sigint`).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

__all__ = ["let_go", "mapped_in_order", "single_threaded_blas"]

#: The process's ``threadpoolctl.ThreadpoolController``, made at the first pass.
_CONTROLLER = []


def single_threaded_blas():
    """A context in which BLAS runs on one thread (a pass's blocks run on threads or Dask tasks
    of their own already, and their products are too small for BLAS's threads, which only
    contend). The process's libraries are looked up once, at the first call: a lookup
    (``threadpoolctl.threadpool_limits``) costs about 2 ms, which a Dask pass paid in each
    chunk's task."""
    from threadpoolctl import ThreadpoolController

    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def let_go(pool):
    """Shut ``pool`` down without waiting: its queued tasks are cancelled, the running ones
    end on their own.

    Parameters
    ----------
    pool : concurrent.futures.ThreadPoolExecutor or None
        Nothing is done for None.
    """
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def mapped_in_order(fn, items, *, workers, ahead):
    """``fn(*item)`` of each of ``items``, computed by ``workers`` threads and yielded in the
    items' order, ``ahead`` calls under way while the caller works on the one yielded.

    Leaving early (an exception in ``fn`` or in the caller, Ctrl-C while waiting for a result,
    the generator closed) lets the pool go (:func:`let_go`): nothing queued runs, and nothing
    running is waited for. The results do not depend on the threads: each is ``fn`` of its
    item, and they come in the items' order.

    Parameters
    ----------
    fn : callable
    items : sequence of tuple
        The arguments of each call.
    workers : int
        Threads of the pool.
    ahead : int
        Calls queued or running at most, besides the result the caller holds (memory stays
        ``ahead + 1`` results).

    Yields
    ------
    object
        ``fn(*item)``, in the order of ``items``.
    """
    if not items:
        return
    rest = iter(items)
    pending, pool = deque(), ThreadPoolExecutor(workers)
    try:

        def top_up():
            while len(pending) < ahead and (item := next(rest, None)) is not None:
                pending.append(pool.submit(fn, *item))

        top_up()
        while pending:
            result = pending.popleft().result()  # (Ctrl-C interrupts this wait at once)
            top_up()
            yield result
    finally:
        # (not `with ThreadPoolExecutor`: its exit would wait for the running and queued calls)
        let_go(pool)
