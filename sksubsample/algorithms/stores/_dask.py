"""The passes and gathers of a :class:`~._rows.RowStore` over Dask arrays.

Rows are mapped where they live, and only summaries or the rows asked for travel. On a
``dask.distributed`` cluster holding the arrays persisted, a pass is one task per worker
holding chunks, which maps its chunks to summaries on its threads, the summaries then combined
in a tree by the caller (while they are small enough to be held together: see
:func:`fold_chunks`); a gather is one task per worker holding chunks touched, each taking
its rows with NumPy (a task per chunk would cost the scheduler more than the work, on a small
cluster). Otherwise a pass is one Dask computation, a task per chunk mapping the chunk to a
summary and the summaries combined in a tree of tasks; a gather from a cluster is a task per
thread of the cluster, each computing its share of the chunks touched from their own task graphs
and taking their rows (when no two chunks share a task or a large value, and none reads a
persisted chunk; else a task per chunk touched), and with Dask's local schedulers a task per
chunk touched.
Either way the tree and its order are the same, so a pass's result depends neither on the
scheduler nor on where the chunks are. A Dask array is never indexed with scattered integers
(its slow path), and a chain reading its minibatches pays one computation per buffer of rows,
not per step. Everything runs on the active scheduler: Dask's threads by default, a
``dask.distributed`` client when one exists; from inside a task on a cluster's worker (a chain
run there), through the worker's client, with the task's thread handed back to the worker
while it waits.

Dask is imported here only, and only when a Dask array is given.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._blocks import as_block
from ._checks import distinct_values
from ._threads import single_threaded_blas

__all__ = ["aligned_columns", "compute", "fold_chunks", "take_chunks", "unique_values"]

#: Summaries combined by one task of the tree.
_FAN_IN = 8
#: Bytes of the chunks' summaries a pass may gather to the caller (see :func:`fold_chunks`).
_GATHERED_BYTES = 1 << 28
#: Bytes of a value that the chunks' graphs share and that each group of chunks' task is sent
#: (see :func:`_chunk_graphs`).
_SHARED_VALUE_BYTES = 1 << 20
#: Each worker process's threads that map the chunks of a pass's task, kept from pass to pass
#: (the threads' scratch arrays with them): by their number.
_POOLS = {}


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
    chunk = as_block(start, X, y, w, dtype, response, step, reuse=True)
    with single_threaded_blas():
        return block_fn(chunk, *args)


def _combine_all(combine, *parts):
    total = parts[0]
    for part in parts[1:]:
        total = combine(total, part)
    return total


def fold_chunks(store, block_fn, combine, args, check=True):
    """:meth:`~._rows.RowStore.fold` of a store of Dask arrays, the chunks' summaries combined
    in a tree in row order (so the result depends neither on the scheduler nor on where the
    chunks are). On a cluster holding the arrays persisted: one task per worker holding
    chunks, mapping them where they are, and the tree combined by the caller, which then holds
    every chunk's summary at once: only while ``block_fn.summary_bytes(*args)`` (an upper bound
    of a summary's bytes, when ``block_fn`` has one; small otherwise) times the chunks is at
    most :data:`_GATHERED_BYTES`. Otherwise: one task per chunk, then the tree's combining
    tasks, on the workers."""
    from dask import delayed

    X_parts, y_parts, w_parts, starts = _delayed_chunks(store)
    step = store.block_rows() if check else 0
    shared = (store.dtype, store.response, step, block_fn, args)
    client = _client()
    futures = None if client is None else _persisted(store, client)
    hint = getattr(block_fn, "summary_bytes", None)
    gathered = (len(starts) - 1) * (0 if hint is None else hint(*args))
    if futures is not None and gathered <= _GATHERED_BYTES:
        # (a task per chunk costs the scheduler a millisecond or two: more than mapping a chunk
        # of a few megabytes, on a small cluster)
        chunks = list(range(len(futures)))
        try:
            parts = _in_worker_client(lambda c: _on_holders(
                c, futures, chunks, _fold_chunks_here, [int(a) for a in starts[:-1]], shared),
                client)
        except Exception as exc:
            exc.add_note(f"(raised by a pass over the {store.n_rows} rows, mapped by the "
                         f"workers holding their chunks)")
            raise
        return _tree(combine, _per_chunk(parts, len(chunks)))
    fold = delayed(_fold_chunk, pure=False)
    # One node of the graph holds what every chunk's task shares (the pass's arguments may
    # hold arrays): it is sent once to each worker, not once per chunk.
    shared = delayed(shared, pure=False, traverse=False)
    level = [fold(X_parts[k], None if y_parts is None else y_parts[k],
                  None if w_parts is None else w_parts[k], int(starts[k]), shared)
             for k in range(len(X_parts))]
    merge = delayed(_combine_all, pure=False)
    root = _tree(combine, level, merge)
    return _computed(store, [root], f"a pass over the {store.n_rows} rows")[0]


def _tree(combine, level, merge=_combine_all):
    """The summaries ``level`` (in row order) combined in a tree of fan-in :data:`_FAN_IN`, in
    row order: ``merge(combine, *group)`` of each group of more than one (a task of the tree
    for a delayed ``merge``, the sum itself otherwise). The caller's tree and the tasks' are
    this one, so a pass's sums are the same bit for bit whichever computes them."""
    while len(level) > 1:
        level = [merge(combine, *level[k:k + _FAN_IN]) if len(level[k:k + _FAN_IN]) > 1
                 else level[k] for k in range(0, len(level), _FAN_IN)]
    return level[0]


def _fold_chunks_here(parts, starts, shared):
    """The summaries of the chunks ``parts[j] = (X, y, w)`` of first rows ``starts[j]``: one
    task on the worker that holds them, mapping them on the worker's threads."""
    items = [(*part, start, shared) for part, start in zip(parts, starts, strict=True)]
    threads = _worker_threads()
    if threads == 1 or len(items) == 1:
        return [_fold_chunk(*item) for item in items]
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads)
    return [f.result() for f in [pool.submit(_fold_chunk, *item) for item in items]]


def _worker_threads():
    """The threads of the worker running this task (1 outside a worker)."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


def _take_chunk(X, y, w, rows):
    """The rows ``rows`` of one chunk's parts (a task of Dask's local schedulers)."""
    return _take_chunks_here([(X, y, w)], [rows])


def _take_chunks_here(parts, rows):
    """The rows ``rows[j]`` of the chunks ``parts[j] = (X, y, w)``: one task on the worker that
    holds them, for every chunk it holds, one after another in one array per column."""
    # (one array per column: many small arrays cost the transfer more than their bytes; each
    # chunk's rows taken straight into it, not taken apart and then joined: a worker's fresh
    # memory costs its page faults every time, MALLOC_TRIM_THRESHOLD_ giving freed memory
    # back at once)
    total = sum(r.size for r in rows)
    columns = []
    for j, first in enumerate(parts[0]):
        if first is None:
            columns.append(None)
            continue
        out = np.empty((total, *np.shape(first)[1:]), dtype=first.dtype)
        at = 0
        for part, r in zip(parts, rows, strict=True):
            # (mode "wrap": the rows are the chunk's; the default "raise" would copy through
            # a buffer as large as the rows taken)
            np.take(np.asarray(part[j]), r, axis=0, out=out[at:at + r.size], mode="wrap")
            at += r.size
        columns.append(out)
    return tuple(columns)


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
    cached = store.__dict__.get("_futures")
    if cached is not None and cached[0] == id(client):
        return cached[1]
    columns = [store.X, *(None if c is None else c.values for c in (store._y, store._w))]
    per_column = [None if column is None else _column_futures(column, client)
                  for column in columns]
    if any(c is None for c, column in zip(per_column, columns, strict=True)
           if column is not None):
        return None
    futures = [tuple(None if c is None else c[k] for c in per_column)
               for k in range(len(per_column[0]))]
    store.__dict__["_futures"] = (id(client), futures)
    return futures


def _column_futures(column, client):
    """The futures on ``client`` of the chunks of the Dask array ``column``, in order, or None
    when it is not persisted on its cluster."""
    from distributed import Future, futures_of

    persisted = {f.key for f in futures_of(column)}
    keys = _flat_keys(column)
    if not persisted or any(k not in persisted for k in keys):
        return None
    return [Future(k, client) for k in keys]


def _on_holders(client, futures, chunks, function, per_chunk, *shared):
    """``function(parts, items, *shared)`` run by one task per worker holding chunks among
    ``chunks`` (by the holder of each chunk's first part, X's for a store), on the parts
    ``(X, y, w)`` of its chunks and their ``per_chunk`` items.

    Returns
    -------
    list of (list of int, object)
        Per task, the positions in ``chunks`` of the chunks it mapped, and its result.
    """
    owners = client.who_has([futures[k][0] for k in chunks])
    by_worker = {}
    for position, k in enumerate(chunks):
        holders = owners.get(futures[k][0].key) or ("",)
        by_worker.setdefault(sorted(holders)[0], []).append(position)
    tasks, positions = [], list(by_worker.values())
    for worker, mine in by_worker.items():
        placement = {"workers": [worker], "allow_other_workers": True} if worker else {}
        tasks.append(client.submit(function, [futures[chunks[p]] for p in mine],
                                   [per_chunk[p] for p in mine], *shared, pure=False,
                                   **placement))
    return list(zip(positions, _gathered(client, tasks), strict=True))


def _gathered(client, futures):
    """``client.gather(futures)``, read from the workers directly when the client's cluster
    runs on this machine (a ``LocalCluster`` it was made from, whose workers it can reach):
    through the scheduler, each result crossed two connections, and the summaries of a pass
    over 10^7 rows with the bound's bins (about 45 MB) reached the caller 0.10 s after the
    workers' tasks ended, against 0.06 s directly. Otherwise as the client is configured
    (``Client(direct_to_workers=...)``; inside a task, directly)."""
    return client.gather(futures, direct=True if _local_cluster(client) else None)


def _local_cluster(client):
    """Whether ``client`` was made from a ``LocalCluster`` (whose workers run on this machine)."""
    try:
        from distributed import LocalCluster
    except ImportError:
        return False
    return isinstance(getattr(client, "cluster", None), LocalCluster)


def _per_chunk(results, n):
    """The per-chunk results of :func:`_on_holders`'s tasks (each a list, one per chunk), in
    the order of its ``n`` chunks."""
    out = [None] * n
    for positions, pieces in results:
        for position, piece in zip(positions, pieces, strict=True):
            out[position] = piece
    return out


def take_chunks(store, rows, order=None):
    """The sorted ``rows`` of X, y and w, each put at its place ``order`` (the i-th row at
    ``order[i]``; in the order of ``rows`` when None): on a cluster holding the arrays
    persisted, one task per worker that holds chunks touched (the rows gathered where they
    are); on a cluster that does not, one task per thread of the cluster, each computing its
    share of the chunks touched from their graphs (:func:`_chunk_graphs`; else one task per
    chunk touched); with Dask's local schedulers, one task per chunk touched. The tasks'
    rows are written at their places as they arrive (a copy in sorted order, then one in the
    order asked, had copied a start subsample's 40 MB twice)."""
    from dask import delayed

    X_parts, y_parts, w_parts, starts = _delayed_chunks(store)
    if rows.size == 0:
        return (np.empty((0, store.n_features), dtype=store.X.dtype),
                *(None if c is None else np.empty(0, dtype=c.values.dtype)
                  for c in (store._y, store._w)))
    chunk_of = np.searchsorted(starts, rows, side="right") - 1
    bounds = np.flatnonzero(np.diff(chunk_of)) + 1
    groups = [(int(chunk_of[g[0]]), rows[g] - starts[int(chunk_of[g[0]])])
              for g in np.split(np.arange(rows.size), bounds) if g.size]
    client = _client()
    futures = None if client is None else _persisted(store, client)
    if futures is not None:
        results = _in_worker_client(lambda c: _on_holders(
            c, futures, [k for k, _ in groups], _take_chunks_here, [r for _, r in groups]),
            client)
        return _assembled(results, [r.size for _, r in groups], order)
    graphs = None if client is None else _chunk_graphs(store)
    if graphs is not None:
        return _in_worker_client(
            lambda c: _take_computed(c, store, graphs, groups, order), client)
    take = delayed(_take_chunk, pure=True)
    pieces = _computed(store, [take(X_parts[k], None if y_parts is None else y_parts[k],
                                    None if w_parts is None else w_parts[k], local)
                               for k, local in groups],
                       f"{rows.size} rows gathered from row {rows[0]} to row {rows[-1]}")
    # (each chunk's rows written at their places: joined first, they were copied twice)
    return _assembled([([k], piece) for k, piece in enumerate(pieces)],
                      [r.size for _, r in groups], order)


def _assembled(results, sizes, order=None):
    """X, y and w of the groups of rows of sizes ``sizes``, in order (each row ``i`` at
    ``order[i]`` when given), from tasks that each took the rows of some groups, one after
    another (``results``: per task, the groups' positions and its X, y and w)."""
    ends = np.cumsum(sizes)
    out = [None, None, None]
    for positions, columns in results:
        into = np.concatenate([np.arange(ends[p] - sizes[p], ends[p]) for p in positions])
        if order is not None:
            into = order[into]
        for j, values in enumerate(columns):
            if values is not None:
                if out[j] is None:
                    out[j] = np.empty((int(ends[-1]), *values.shape[1:]), dtype=values.dtype)
                out[j][into] = values
    return tuple(out)


class _Graph:
    """A task graph carried as a task's argument (not a part of the task's own graph)."""

    def __init__(self, graph, keys):
        self.graph, self.keys = graph, keys


def _chunk_graphs(store):
    """Per chunk, the task graph computing its parts (X's, y's and w's chunk) and their keys,
    or None when two chunks share a task or a large value (a chunk computed from all the rows,
    or an array in memory that every chunk slices: computing chunks apart would repeat the
    shared work or send the value with every group; a small value, such as the handle of a
    zarr array, is copied into each group's graph) or when the arrays read chunks persisted
    on the cluster (a slice of a persisted array: those chunks are where they are, not in the
    graph)."""
    cached = store.__dict__.get("_chunk_graphs")
    if cached is None:
        from dask.optimization import cull
        from distributed import futures_of

        columns = [store.X, *(None if c is None else c.values for c in (store._y, store._w))]
        if any(futures_of(column) for column in columns if column is not None):
            store.__dict__["_chunk_graphs"] = (None,)
            return None
        graph = {}
        for column in columns:
            if column is not None:
                graph.update(column.__dask_graph__())
        keys = [[None] * len(store.X.chunks[0]) if column is None else _flat_keys(column)
                for column in columns]
        per_chunk, seen, small = [], set(), {}
        for parts in zip(*keys, strict=True):
            culled = cull(graph, [key for key in parts if key is not None])[0]
            shared = seen.intersection(culled)
            for key in shared.difference(small):  # (each shared value judged once)
                small[key] = _small_value(graph[key])
            if not all(small[key] for key in shared) or any(
                    key not in graph for node in culled.values()
                    for key in getattr(node, "dependencies", ())):
                per_chunk = None
                break
            seen.update(culled)
            per_chunk.append((culled, list(parts)))
        cached = store.__dict__["_chunk_graphs"] = (per_chunk,)
    return cached[0]


def _small_value(value):
    """Whether a node of a graph that chunks share is a small value, not a task (the handle
    of a zarr array on a file, which every chunk of ``da.from_zarr`` reads from): a copy of it
    goes with each group's task. Its size is what it pickles to (a zarr array in memory
    pickles to its data, though ``dask.sizeof`` counts only the handle)."""
    import pickle

    from dask.core import istask

    if istask(value):
        return False
    sink = _CappedSink(_SHARED_VALUE_BYTES)
    try:
        # (written to a sink that stops past the cap: a large value is never copied whole)
        pickle.Pickler(sink, protocol=5).dump(value)
    except Exception:  # (past the cap, or what does not pickle: not sent apart)
        return False
    return True


class _CappedSink:
    """A file that counts the bytes written to it and raises ``OverflowError`` past ``cap``."""

    def __init__(self, cap):
        self.cap, self.written = cap, 0

    def write(self, data):
        self.written += memoryview(data).nbytes
        if self.written > self.cap:
            raise OverflowError("past the cap")
        return memoryview(data).nbytes


def _flat_keys(column):
    """The keys of a Dask array's chunks along the rows (its columns in one chunk)."""
    keys = column.__dask_keys__()
    return [k[0] if isinstance(k, list) else k for k in keys]


def _take_computed(client, store, graphs, groups, order):
    """:func:`take_chunks` of arrays not persisted on ``client``'s cluster: a task per group of
    consecutive chunks touched (as many groups as the cluster has threads), each computing its
    chunks from their graphs and taking their rows (a task per chunk, and one per part of it,
    cost the scheduler more than reading the rows: 0.9 s against 0.1 s for 65 536 rows of 100
    chunks of memory maps, on a two-worker cluster)."""
    n_threads = max(1, sum(client.nthreads().values()))
    batches = np.array_split(np.arange(len(groups)), min(n_threads, len(groups)))
    tasks = []
    for batch in batches:
        chunks = [groups[p][0] for p in batch]
        graph = {}
        for k in chunks:
            graph.update(graphs[k][0])
        tasks.append(client.submit(
            _take_computed_here, _Graph(graph, [graphs[k][1] for k in chunks]),
            [groups[p][1] for p in batch], pure=False))
    try:
        results = _gathered(client, tasks)
    except Exception as exc:
        starts = _delayed_chunks(store)[-1]
        failed = [batch for batch, task in zip(batches, tasks, strict=True)
                  if task.status == "error"] or batches
        exc.add_note("(raised by the task computing the chunks of rows " + "; ".join(
            f"{starts[groups[b[0]][0]]} to {starts[groups[b[-1]][0] + 1] - 1}" for b in failed)
            + " from the arrays' task graphs, to gather rows of them)")
        raise
    return _assembled(list(zip([list(b) for b in batches], results, strict=True)),
                      [r.size for _, r in groups], order)


def _take_computed_here(graph, rows):
    """The rows ``rows[j]`` of chunks computed from ``graph`` (one task: the chunks' parts
    computed here, one after another, then their rows taken and concatenated)."""
    from dask.local import get_sync

    flat = [key for parts in graph.keys for key in parts if key is not None]
    computed = dict(zip(flat, get_sync(graph.graph, flat), strict=True))
    parts = [tuple(None if key is None else computed[key] for key in keys)
             for keys in graph.keys]
    return _take_chunks_here(parts, rows)


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
    """The distinct values of a Dask array: on a cluster holding it persisted, one task per
    worker holding chunks; otherwise computed on the active scheduler."""
    import dask.array as da

    client = _client()
    futures = None if client is None else _column_futures(column, client)
    if futures is None:
        return np.asarray(compute(da.unique(column))[0])
    per_chunk = [(f,) for f in futures]
    results = _in_worker_client(lambda c: _on_holders(
        c, per_chunk, list(range(len(per_chunk))), _distinct_here, [None] * len(per_chunk)),
        client)
    return functools.reduce(np.union1d, [found for _, found in results])


def _distinct_here(parts, _):
    """The distinct values of the chunks ``parts[j] = (values,)`` (one task on the worker that
    holds them)."""
    return functools.reduce(np.union1d, [distinct_values(np.asarray(part[0])) for part in parts])
