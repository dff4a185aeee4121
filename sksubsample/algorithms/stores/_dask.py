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
from ._threads import single_threaded_blas

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


class _Running:
    """The keys of the tasks a local Dask scheduler was running when a computation failed
    (the task that raised among them): a ``dask.callbacks.Callback``'s ``finish``."""

    def __init__(self):
        self.keys = []

    def __call__(self, dsk, state, errored):
        if errored:
            self.keys = sorted(state.get("running", ()), key=str)


def _computed(store, collections, what):
    """:func:`compute` of ``collections``, a pass or a gather of ``store``'s rows (``what``
    says which); an error of the chunks' tasks is raised with a note naming the task that
    raised (on Dask's local schedulers: a ``dask.distributed`` cluster reports it itself) and
    the rows of its block when it is a chunk of X."""
    from dask.callbacks import Callback

    running = _Running()
    try:
        with Callback(finish=running):
            return compute(*collections)
    except Exception as exc:
        exc.add_note(f"(raised by the Dask computation of {what}"
                     f"{_blamed(store, running.keys)})")
        raise


def _blamed(store, keys):
    """``': the task ...'`` naming the tasks running when it failed, with the rows of X's
    chunks among them; empty when none is known."""
    if not keys:
        return ""
    starts = _delayed_chunks(store)[-1]
    name = store.X.name
    named = []
    for key in keys:
        text = repr(key)
        # A chunk of X: its key, or the key Dask's optimisation gives it when it fuses the
        # chunk's task with those it reads from (their names before X's).
        if (isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], str)
                and (key[0] == name or key[0].endswith(f"-{name}"))):
            k = int(key[1])
            text += f", block {k} of X: rows {starts[k]} to {starts[k + 1] - 1}"
        named.append(text)
    which = "the task that raised" if len(named) == 1 else "the tasks running, one raised"
    return f": {which}: " + "; ".join(named)


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


def _fold_chunk(X, y, w, start, shared):
    """The summary of one chunk, checked (naming blocks of ``step`` rows; unchecked when
    ``step`` is 0), mapped by ``block_fn`` (with a single-threaded BLAS: the chunks run in
    parallel already)."""
    dtype, response, step, block_fn, args = shared
    chunk = as_block(start, X, y, w, dtype, response, step)
    with single_threaded_blas():
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
    fold = delayed(_fold_chunk, pure=False)
    # One node of the graph holds what every chunk's task shares (the pass's arguments may
    # hold arrays): it is sent once to each worker, not once per chunk.
    shared = delayed((store.dtype, store.response, step, block_fn, args), pure=False,
                     traverse=False)
    level = [fold(X_parts[k], None if y_parts is None else y_parts[k],
                  None if w_parts is None else w_parts[k], int(starts[k]), shared)
             for k in range(len(X_parts))]
    merge = delayed(_combine_all, pure=False)
    while len(level) > 1:
        level = [merge(combine, *level[k:k + _FAN_IN]) if len(level[k:k + _FAN_IN]) > 1
                 else level[k] for k in range(0, len(level), _FAN_IN)]
    return _computed(store, [level[0]], f"a pass over the {store.n_rows} rows")[0]


def _take_chunk(X, y, w, rows):
    return (np.take(X, rows, axis=0), None if y is None else np.take(y, rows),
            None if w is None else np.take(w, rows))


def _take_chunks_here(parts, rows):
    """The rows ``rows[j]`` of the chunks ``parts[j] = (X, y, w)``: one task on the worker that
    holds them, for every chunk it holds."""
    return [_take_chunk(*part, r) for part, r in zip(parts, rows, strict=True)]


def _client():
    """The ``dask.distributed`` client a gather would run on, or None (Dask's local
    schedulers): the worker's own client inside a task on a cluster's worker."""
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:
        return None


def _persisted(store, client):
    """The futures on ``client`` of every chunk of X, y and w (a list of per-chunk tuples), or
    None when the arrays are not all persisted on its cluster. Futures are made for this
    client from the chunks' keys (a store sent to a worker carries futures bound to no client
    there)."""
    from distributed import Future, futures_of

    cached = store.__dict__.get("_futures")
    if cached is not None and cached[0] == id(client):
        return cached[1]
    columns = [store.X, *(None if c is None else c.values for c in (store._y, store._w))]
    per_column = []
    for column in columns:
        if column is None:
            per_column.append(None)
            continue
        persisted = {f.key for f in futures_of(column)}
        keys = list(column.__dask_keys__())
        keys = [k for chunk in keys for k in (chunk if isinstance(chunk, list) else [chunk])]
        if not persisted or any(k not in persisted for k in keys):
            return None
        per_column.append([Future(k, client) for k in keys])
    futures = [tuple(None if c is None else c[k] for c in per_column)
               for k in range(len(per_column[0]))]
    store.__dict__["_futures"] = (id(client), futures)
    return futures


def _take_by_worker(client, futures, groups):
    """The rows of persisted chunks, one task per worker holding chunks touched (``groups``:
    pairs ``(chunk, local rows)``), pieces in the order of ``groups``."""
    owners = client.who_has([futures[k][0] for k, _ in groups])
    by_worker = {}
    for position, (k, rows) in enumerate(groups):
        holders = owners.get(futures[k][0].key) or ("",)
        by_worker.setdefault(sorted(holders)[0], []).append((position, k, rows))
    tasks, order = [], []
    for worker, items in by_worker.items():
        placement = {"workers": [worker], "allow_other_workers": True} if worker else {}
        tasks.append(client.submit(_take_chunks_here, [futures[k] for _, k, _ in items],
                                   [rows for _, _, rows in items], pure=False, **placement))
        order.extend(position for position, _, _ in items)
    pieces = [p for result in client.gather(tasks) for p in result]
    out = [None] * len(groups)
    for position, piece in zip(order, pieces, strict=True):
        out[position] = piece
    return out


def take_chunks(store, rows):
    """The sorted ``rows`` of X, y and w: on a cluster holding the arrays persisted, one task
    per worker that holds chunks touched (the rows gathered where they are); otherwise one
    task per chunk touched."""
    from dask import delayed

    X_parts, y_parts, w_parts, starts = _delayed_chunks(store)
    chunk_of = np.searchsorted(starts, rows, side="right") - 1
    bounds = np.flatnonzero(np.diff(chunk_of)) + 1
    groups = [(int(chunk_of[g[0]]), rows[g] - starts[int(chunk_of[g[0]])])
              for g in np.split(np.arange(rows.size), bounds) if g.size]
    client = _client()
    futures = None if client is None else _persisted(store, client)
    if futures is not None:
        pieces = _in_worker_client(lambda c: _take_by_worker(c, futures, groups), client)
    else:
        take = delayed(_take_chunk, pure=True)
        pieces = _computed(store, [take(X_parts[k], None if y_parts is None else y_parts[k],
                                        None if w_parts is None else w_parts[k], local)
                                   for k, local in groups],
                           f"{rows.size} rows gathered from row {rows[0]} to row {rows[-1]}")
    X = np.concatenate([p[0] for p in pieces])
    y = None if y_parts is None else np.concatenate([p[1] for p in pieces])
    w = None if w_parts is None else np.concatenate([p[2] for p in pieces])
    return X, y, w


def _in_worker_client(function, client):
    """``function(client)``; inside a task on a cluster's worker, with the worker's client and
    the task's thread seceding while it waits (as :func:`compute`)."""
    try:
        from distributed import get_worker, worker_client

        get_worker()
    except (ImportError, ValueError):
        return function(client)
    with worker_client() as inner:
        return function(inner)


def unique_values(column):
    """The distinct values of a Dask array, computed on the active scheduler."""
    import dask.array as da

    return np.asarray(compute(da.unique(column))[0])
