"""The passes and gathers of a :class:`~._rows.RowStore` over Dask arrays.

A pass is one Dask computation: a task per chunk maps the chunk to a summary where the chunk
lives (in a cluster's worker, for a persisted array or one loaded by the workers), and
the summaries are combined in a tree of tasks, so only small summaries travel. A gather is a
task per chunk touched, each taking its rows with NumPy: a Dask array is never indexed with
scattered integers (its slow path), and a chain reading its minibatches pays one computation per
buffer of rows, not per step. Everything runs on the active scheduler: Dask's threads by
default, a ``dask.distributed`` client when one exists; from inside a task on a cluster's
worker (a chain run there), through the worker's client, with the task's thread handed back to
the worker while it waits.

Dask is imported here only, and only when a Dask array is given.
"""

from __future__ import annotations

import numpy as np

from ._rows import as_block

__all__ = ["aligned_columns", "compute", "fold_chunks", "take_chunks", "unique_values"]

#: Summaries combined by one task of the tree.
_FAN_IN = 8


def aligned_columns(X, y, w):
    """X with its columns in one chunk, and y and w chunked along the rows like X (a column
    given as a NumPy array becomes a Dask array of those chunks)."""
    import dask.array as da

    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    rows = X.chunks[0]

    def aligned(column):
        if column is None:
            return None
        if type(column).__module__.startswith("dask."):
            return column if column.chunks[0] == rows else column.rechunk((rows,))
        return da.from_array(np.asarray(column), chunks=(rows,))

    return X, aligned(y), aligned(w)


def compute(*collections):
    """``dask.compute(*collections)`` on the active scheduler; from inside a task on a
    cluster's worker, through the worker's client, the task's thread seceding while it waits
    (so that a chain waiting for its rows does not hold a thread the rows' tasks need)."""
    import dask

    try:
        from distributed import get_worker, worker_client

        get_worker()
    except (ImportError, ValueError):
        return dask.compute(*collections)
    with worker_client():
        return dask.compute(*collections)


def _delayed_chunks(store):
    """The chunks of X, y and w as lists of Delayed, and the first row of each chunk."""
    cached = store.__dict__.get("_chunks")
    if cached is None:
        X = store.X
        parts = list(X.to_delayed().ravel())
        columns = [None if column is None else list(column.values.to_delayed().ravel())
                   for column in (store._y, store._w)]
        starts = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
        cached = (parts, *columns, starts)
        store.__dict__["_chunks"] = cached
    return cached


def _fold_chunk(X, y, w, start, dtype, response, step, block_fn, args):
    """The summary of one chunk, checked (naming blocks of ``step`` rows; unchecked when
    ``step`` is 0), mapped by ``block_fn`` (with a single-threaded BLAS: the chunks run in
    parallel already)."""
    from threadpoolctl import threadpool_limits

    chunk = as_block(start, X, y, w, dtype, response, step)
    with threadpool_limits(1, user_api="blas"):
        return block_fn(chunk, *args)


def _combine_all(combine, *parts):
    total = parts[0]
    for part in parts[1:]:
        total = combine(total, part)
    return total


def fold_chunks(store, block_fn, combine, args, check=True):
    """:meth:`~._rows.RowStore.fold` of a store of Dask arrays: one task per chunk, then a tree
    of combining tasks (in row order, so the result does not depend on the scheduler)."""
    from dask import delayed

    X_parts, y_parts, w_parts, starts = _delayed_chunks(store)
    step = store.block_rows() if check else 0
    fold = delayed(_fold_chunk, pure=True)
    level = [fold(X_parts[k], None if y_parts is None else y_parts[k],
                  None if w_parts is None else w_parts[k], int(starts[k]), store.dtype,
                  store.response, step, block_fn, args)
             for k in range(len(X_parts))]
    merge = delayed(_combine_all, pure=True)
    while len(level) > 1:
        level = [merge(combine, *level[k:k + _FAN_IN]) if len(level[k:k + _FAN_IN]) > 1
                 else level[k] for k in range(0, len(level), _FAN_IN)]
    return compute(level[0])[0]


def _take_chunk(X, y, w, rows):
    return (np.take(X, rows, axis=0), None if y is None else np.take(y, rows),
            None if w is None else np.take(w, rows))


def take_chunks(store, rows):
    """The sorted ``rows`` of X, y and w, one task per chunk touched."""
    from dask import delayed

    X_parts, y_parts, w_parts, starts = _delayed_chunks(store)
    chunk_of = np.searchsorted(starts, rows, side="right") - 1
    bounds = np.flatnonzero(np.diff(chunk_of)) + 1
    take = delayed(_take_chunk, pure=True)
    tasks = []
    for group in np.split(np.arange(rows.size), bounds):
        if group.size == 0:
            continue
        k = int(chunk_of[group[0]])
        tasks.append(take(X_parts[k], None if y_parts is None else y_parts[k],
                          None if w_parts is None else w_parts[k], rows[group] - starts[k]))
    pieces = compute(*tasks)
    X = np.concatenate([p[0] for p in pieces])
    y = None if y_parts is None else np.concatenate([p[1] for p in pieces])
    w = None if w_parts is None else np.concatenate([p[2] for p in pieces])
    return X, y, w


def unique_values(column):
    """The distinct values of a Dask array, computed on the active scheduler."""
    import dask.array as da

    return np.asarray(compute(da.unique(column))[0])
