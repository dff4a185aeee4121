"""The rows one chain reads of a GLM's data that are not in memory, fetched ahead in one read.

A :class:`RowStream` is the Python side of a chain's
:class:`~sksubsample.algorithms.mh.PrefetchedMinibatches` and
:class:`~._buffered.BufferedGLMModel`. It owns the chain's local buffer: the exact
stratum's rows, then ``n_slots`` slots filled from a stream of independent uniform draws of the
sampled stratum (every row not in the exact stratum), drawn with a NumPy generator of the
chain's own and gathered with one :meth:`~sksubsample.algorithms.stores.RowStore.take` per
refill (the compiled step computes a row's proxy coefficients from the row, as it reads it).

The buffer is filled in stretches that double, from a sixteenth of its slots to all of them: a
short chain does not pay for rows it never reads (on a disk, every gathered row is a random
read), a long one soon refills a whole buffer at a time. A Dask array's first stretch is twice
the rows the chain is expected to read, up to a power of two (the whole buffer when that is not
known), and the stretches double from there: each gather costs a round of tasks whatever the
rows it takes (on a cluster, one per worker holding chunks of a persisted array, or one per
thread computing the chunks of one that is not; with Dask's local schedulers, one per chunk
touched: tens of milliseconds either way), and a chain should pay for one, but the rows cost
too (65 536 random rows of 10⁸ not persisted took 0.22 s to gather, 4 096 rows 0.06 s), and
a short chain reads few. The stream's entries and the slots
a minibatch reads do not depend on the stretches (the draws come in order from the stream's
generator), so neither does the law; nor do the draws, but for a minibatch that needs more
than half of the buffer's slots at a refill, which is drawn by selection sampling (below)
when the stretches left it fewer.

The next stretch of the stream is drawn, gathered and prepared by a background thread while the
chain runs (the compiled chain holds no lock; NumPy releases it while it copies, and a gather
from a cluster waits on the network), so a refill only copies it into the buffer. For a Dask
array this starts at the second refill: its first stretch holds the rows the plan expects the
chain to read (which the plan overestimates: a chain at 10⁷ or 10⁸ rows read a third to a half of
them), and a stretch fetched ahead that the chain never reads costs a round of tasks, and
the CPU of the machine the chain shares with the cluster. The stream
does not depend on when it is fetched: its entries are drawn in order from their own generator,
by one thread at a time. (A chain that runs as a task on a cluster's worker gathers a Dask
array's rows itself when its buffer runs out: it lends its thread back to the worker while it
waits, which the rows' tasks may need; a background thread's wait would not.)

The stream's seed is a child of the chain's seed sequence
(:func:`~._stream_seeds.stream_seed`), known before the chain runs: chains run one after the
other in this process have their first stretches drawn before they run and gathered ahead
(:func:`start_ahead`), the first chain's alone and the others' together while it runs; a
stream adopts its start when it is made. On a cluster a round of chains thus waits for the
first chain's round of tasks only.

It also answers what the buffer cannot serve, with passes over the store: the sums over every
row or over the whole sampled stratum (the steps whose test is exact), the full-data gradient,
and a minibatch too large for the buffer, drawn by *selection sampling*: the rows are scanned in
order, and the number of the minibatch's rows in each block is hypergeometric given the number
still to draw and the rows still to scan (then those rows are a uniformly random subset of the
block's sampled rows), which makes the minibatch a uniformly random set of distinct rows of the
sampled stratum.
"""

from __future__ import annotations

import math
import threading
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait

import numpy as np

from ..stores import check_gathered, let_go
from ._chain_sums import add, gradient_sum, rows_sum, terms_sum
from ._kernel_args import kernel_dtype
from ._stream_seeds import stream_generators

__all__ = ["RowStream", "StreamStart", "selected", "start_ahead"]

_NO_ROWS = np.empty(0, dtype=np.int64)
#: NumPy's hypergeometric draws need fewer good and bad items than this.
_HYPERGEOMETRIC_LIMIT = 10**9
#: Rows a minibatch drawn in one pass gathers at a time (20 MB of float32 rows at d = 20).
_SELECTION_ROWS = 1 << 18


class RowStream:
    """A chain's buffer of rows and the stream of row draws that fills it.

    Parameters
    ----------
    target : GLMTarget
        A target whose rows are in a store.
    expansion : GLMTaylorExpansion or None
        The control variates' expansion (None without control variates: the buffer then holds
        no proxy coefficients and the exact stratum is empty).
    seed : numpy.random.SeedSequence or array_like of int
        Seed of the stream's generators (:func:`~._stream_seeds.stream_seed`: a child of the
        chain's).
    n_slots : int
        Slots of the stream in the buffer.
    expected : float or None, default None
        Rows the chain is expected to read from the stream (a Dask array's first stretch: see
        the module docstring), or None.

    Attributes
    ----------
    X, signs, weights : ndarray
        The buffer (rows as stored, without the intercept's column; signs; case weights or
        empty): the exact stratum's ``k`` rows, then the slots.
    ids : ndarray of int64 of shape (n_slots,)
        The row of each slot.
    exact : ndarray of int64
        The exact stratum's rows, sorted.
    n_sampled : int
    """

    #: The first refill fills this fraction of the slots; each next one twice as many.
    FIRST_STRETCH_FRACTION = 16

    def __init__(self, target, expansion, seed, n_slots, expected=None):
        store = target.store
        self.target, self.store = target, store
        self.residuals = expansion is not None
        self.exact, self._shift, self.n_sampled = _sampled_stratum(target, expansion)
        self.order = 2 if expansion is None else int(expansion.order)
        self.reference = (np.zeros(target.n_features) if expansion is None
                          else expansion.reference)
        k = self.exact.size
        shape = (k + n_slots, store.n_features)
        self.X = np.empty(shape, dtype=kernel_dtype(store.dtype, shape[0] * shape[1]))
        self.signs = np.zeros(k + n_slots)
        self.weights = np.zeros(k + n_slots) if store.has_weights else np.empty(0)
        self.ids = np.zeros(n_slots, dtype=np.int64)
        self.n_slots = n_slots
        self.filled = 0
        # The stream's generator, and the one of selection sampling (another thread may draw
        # the stream ahead).
        self.rng, self.selection_rng = stream_generators(seed)
        self._staged = []  # fetched stretches of the stream, in order
        self._stretch = _first_stretch(store, n_slots, expected)  # the next refill's
        self._fetcher = (None if store.kind == "dask" and _in_a_worker_task()
                         else ThreadPoolExecutor(1))
        self._pending = None
        adopted = _adopted(store, seed, self._shift, self._stretch)
        if adopted is not None:
            # The first stretch was drawn, and is being gathered, ahead (start_ahead).
            self.rng, self._pending = adopted
        self._ahead = store.kind != "dask"  # fetch ahead (for a Dask array: once refilled)
        if k:
            self._write(0, _prepared(expansion.exact_block, _NO_ROWS))

    def __call__(self, what, *args):
        """What the compiled chain calls back: ``what`` names the method."""
        return getattr(self, what)(*args)

    def close(self, wait=False):
        """Stop fetching ahead (the chain is done).

        With ``wait`` (a chain that ended normally), a stretch being gathered from a memory
        map, zarr or an array is waited for, so that no thread reads the store once the fit
        has returned: a memory map's file rewritten after the fit had killed the process with
        SIGBUS in the thread of a stretch gathered ahead for a chain that was done. A chain
        stopped by Ctrl-C or an error, or a Dask array's stream (whose gather may wait on a
        cluster that is going away), lets it go.
        """
        fetcher, pending = self._fetcher, self._pending
        self._fetcher = self._pending = None
        if wait and self.store.kind != "dask":
            if pending is not None:
                futures_wait([pending])
            if fetcher is not None:
                fetcher.shutdown(wait=True, cancel_futures=True)
        else:
            let_go(fetcher)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(wait=exc_type is None)
        return False

    def _write(self, position, prepared):
        """Put prepared rows at local positions ``position, ...``."""
        _, X, signs, weights = prepared
        rows = slice(position, position + X.shape[0])
        self.X[rows] = X
        self.signs[rows] = signs
        if self.weights.size:
            self.weights[rows] = weights

    def draw_rows(self, m):
        """``m`` independent uniform draws of the sampled stratum (the stream's next)."""
        return _drawn_rows(self.rng, self._shift, self.n_sampled, m)

    def _fetch(self, m):
        """The stream's next ``m`` rows, gathered and prepared."""
        return _fetched(self.store, self.rng, self._shift, self.n_sampled, m)

    def _next(self, m):
        """The stream's next ``m <= n_slots`` prepared rows (fetching the next stretch ahead
        in the background, when the store allows it)."""
        while (staged := sum(part[0].size for part in self._staged)) < m:
            if self._pending is not None:
                self._staged.append(self._pending.result())
                self._pending = None
            else:
                self._staged.append(self._fetch(m - staged))
        parts, taken = [], 0
        while taken < m:
            part = self._staged[0]
            use = min(m - taken, part[0].size)
            parts.append(tuple(None if v is None else v[:use] for v in part))
            if use == part[0].size:
                self._staged.pop(0)
            else:
                self._staged[0] = tuple(None if v is None else v[use:] for v in part)
            taken += use
        if self._fetcher is not None and self._pending is None and self._ahead:
            self._pending = self._fetcher.submit(self._fetch, self._stretch)
        self._ahead = True
        if len(parts) == 1:
            return parts[0]
        return tuple(None if parts[0][j] is None else np.concatenate([p[j] for p in parts])
                     for j in range(4))

    def refill(self, keep_from):
        """Keep the slots from ``keep_from`` on (moved to the front) and fill the next stretch
        of the others (at most all) with the stream's next rows. Returns the filled slots."""
        k = self.exact.size
        kept = self.filled - keep_from
        if kept and keep_from:
            for values in (self.X, self.signs, self.weights):
                if values.size:
                    values[k:k + kept] = values[k + keep_from:k + self.filled]
            self.ids[:kept] = self.ids[keep_from:self.filled]
        m = min(self.n_slots - kept, self._stretch)
        self._stretch = min(self.n_slots, 2 * self._stretch)
        prepared = self._next(m)
        self._write(k + kept, prepared)
        self.ids[kept:kept + m] = prepared[0]
        self.filled = kept + m
        return self.filled

    def _fold(self, function, args):
        return self.store.fold(function, add, args)

    def all(self, theta, theta_new, residuals):
        """``sum_i l_i`` over every row (ratios, or residuals when ``residuals``)."""
        return float(self._fold(terms_sum, self._terms_args(theta, theta_new, residuals,
                                                            _NO_ROWS)))

    def sampled(self, theta, theta_new, residuals):
        """``sum_i l_i`` over every row of the sampled stratum."""
        return float(self._fold(terms_sum, self._terms_args(theta, theta_new, residuals,
                                                            self.exact)))

    def _terms_args(self, theta, theta_new, residuals, exact):
        target = self.target
        return (np.array(theta, dtype=np.float64), np.array(theta_new, dtype=np.float64),
                self.reference, target.family, target.intercept, self.order, bool(residuals),
                exact)

    def gradient(self, theta, out):
        """Write ``sum_i ∇ℓ_i(θ)`` over every row into ``out``."""
        out[:] = self._fold(gradient_sum, (np.array(theta, dtype=np.float64),
                                           self.target.intercept))

    def selection(self, theta, theta_new, size, residuals):
        """``sum_i l_i`` over a uniformly random set of ``size`` distinct rows of the sampled
        stratum, drawn by selection sampling in one pass (see the module docstring)."""
        if self.n_sampled >= _HYPERGEOMETRIC_LIMIT:
            raise NotImplementedError(
                f"a minibatch of {size} rows (more than a quarter of the chain's buffer) is "
                f"drawn in one pass over the data, which needs fewer than 10^9 rows; the data "
                f"have {self.n_sampled}")
        theta = np.array(theta, dtype=np.float64)
        theta_new = np.array(theta_new, dtype=np.float64)
        total = 0.0
        # The rows are chosen first, block by block as a scan would meet them (no row read),
        # then gathered in batches of at most _SELECTION_ROWS and summed block by block in the
        # order chosen: the same rows and the same sums as a scan reading every block, for the
        # cost of a gather of the chosen rows (a scan of a Dask array on a cluster brought every
        # chunk to this process: seconds for one step).
        batch, chosen_rows = [], 0
        for part in self._chosen_by_block(size):
            batch.append(part)
            chosen_rows += part.size
            if chosen_rows >= _SELECTION_ROWS:
                total = self._selection_sum(batch, total, theta, theta_new, residuals)
                batch, chosen_rows = [], 0
        return self._selection_sum(batch, total, theta, theta_new, residuals)

    def _chosen_by_block(self, size):
        """The rows of a uniformly random set of ``size`` distinct rows of the sampled stratum
        (selection sampling, :func:`selected`), block by block of :meth:`RowStore.blocks`, in
        the order drawn."""
        rng = self.selection_rng
        population, needed = self.n_sampled, int(size)
        for start, stop in self.store.block_ranges():
            if needed == 0:
                return
            n = stop - start
            lo, hi = np.searchsorted(self.exact, [start, stop])
            rows = np.arange(n)
            if hi > lo:
                rows = np.setdiff1d(rows, self.exact[lo:hi] - start, assume_unique=True)
            m = rows.size
            if m == 0:
                continue
            chosen = selected(rng, population, needed, m)
            if chosen.size:
                yield start + rows[chosen]
            population -= m
            needed -= chosen.size

    def _selection_sum(self, parts, total, theta, theta_new, residuals):
        """``total`` plus the sums of the rows of ``parts`` (one gather), part by part."""
        if not parts:
            return total
        target = self.target
        rows = np.concatenate(parts)
        _, X, y, w = _checked(self.store, self.store.take(rows), rows, slice(None))
        at = 0
        for part in parts:
            local = np.arange(at, at + part.size)
            total += rows_sum(X, target.intercept, y, w, theta, theta_new, self.reference,
                              target.family, self.order, residuals, local)
            at += part.size
        return total


def _sampled_stratum(target, expansion):
    """``(exact, shift, n_sampled)``: the exact stratum's rows (sorted), the shifts that map
    the sampled stratum's ``j``-th row to ``j`` plus the number of exact rows ``e_m`` with
    ``e_m - m <= j`` (``e_m - m`` counts the sampled rows before ``e_m``), and the sampled
    stratum's size."""
    strata = None if expansion is None else expansion.strata
    exact = _NO_ROWS if strata is None else np.asarray(strata.exact, dtype=np.int64)
    return exact, exact - np.arange(exact.size), target.n_data - exact.size


def _first_stretch(store, n_slots, expected):
    """Rows of a stream's first refill (see the module docstring)."""
    if store.kind == "dask":
        return _dask_stretch(n_slots, expected)
    return max(1, n_slots // RowStream.FIRST_STRETCH_FRACTION)


def _drawn_rows(rng, shift, n_sampled, m):
    """``m`` independent uniform draws of the sampled stratum, as rows of the data."""
    j = rng.integers(0, n_sampled, size=m)
    return j + np.searchsorted(shift, j, side="right")


def _prepared(block, rows, part=slice(None)):
    """``(rows, X, signs, weights)`` of gathered rows (those of ``block`` at ``part``), as a
    buffer holds them."""
    return (rows, *(None if values is None else values[part]
                    for values in (block.X, block.y, block.w)))


def _fetched(store, rng, shift, n_sampled, m):
    """A stream's next ``m`` rows, drawn with ``rng``, gathered and prepared."""
    rows = _drawn_rows(rng, shift, n_sampled, m)
    return _checked(store, store.take(rows), rows, slice(None))


def _checked(store, block, rows, part):
    """The prepared rows ``rows`` gathered at ``part`` of ``block``, checked."""
    prepared = _prepared(block, rows, part)
    # A row written over with NaN after the set-up checked it would change the draws without
    # a word: a check costs little beside the gather itself.
    check_gathered(prepared[1], rows, store.block_rows(), store.n_rows)
    return prepared


class StreamStart:
    """The first stretch of a chain's row stream, drawn before the chain runs and gathered in
    the background (:func:`start_ahead`), until the chain's :class:`RowStream` adopts it or
    it is closed.

    Attributes
    ----------
    key : tuple
        What identifies the stream: its store, seed, sampled stratum and first stretch.
    store : RowStore
    rng : numpy.random.Generator or None
        The stream's generator, past the stretch's draws (None once adopted: the stream's).
    rows : ndarray of int64
        The stretch's rows.
    pending : concurrent.futures.Future or None
        The stretch, prepared as :meth:`RowStream.refill` takes it (None once adopted).
    """

    def __init__(self, key, store, rng, rows):
        self.key, self.store, self.rng, self.rows = key, store, rng, rows
        self.pending = Future()

    def launch(self):
        """Gather, in a background thread, the stretches of every start of this store not yet
        launched (this one's included), in one read: chains run one after the other then pay
        one round of tasks on a cluster for their first stretches together (in which each
        chunk of an array not persisted is computed once), not one each."""
        with _STARTED_LOCK:
            # (rows and futures taken under the lock: a stream may adopt a start meanwhile)
            batch = [(s.rows, s.pending) for s in _UNLAUNCHED.pop(id(self.store), [])]
        _gather_in_background(self.store, batch)

    def close(self):
        """Let the gather go unless a stream adopted it (it is then the stream's)."""
        with _STARTED_LOCK:
            unadopted = _STARTED.get(self.key) is self
            if unadopted:
                del _STARTED[self.key]
            _unqueue(self)
        if unadopted:
            self.pending.cancel()


def _gather_in_background(store, starts):
    """:func:`_gather_starts` in a thread of its own, which ends with it."""
    if starts:
        pool = ThreadPoolExecutor(1)
        pool.submit(_gather_starts, store, starts)
        pool.shutdown(wait=False)


def _unqueue(start):
    """Take ``start`` out of the starts not yet launched (the lock held); True if it was."""
    waiting = _UNLAUNCHED.get(id(start.store))
    if not waiting or start not in waiting:
        return False
    waiting.remove(start)
    if not waiting:
        del _UNLAUNCHED[id(start.store)]
    return True


def _gather_starts(store, starts):
    """Gather the stretches ``starts`` (``(rows, future)`` pairs) in one read and hand each
    its own, checked: a bad row goes to the start that drew it, an error of the read to every
    start."""
    live = [(rows, future) for rows, future in starts if future.set_running_or_notify_cancel()]
    if not live:
        return
    try:
        block = store.take(np.concatenate([rows for rows, _ in live]))
    except BaseException as exc:  # (each stream raises it at its first refill)
        for _, future in live:
            future.set_exception(exc)
        return
    at = 0
    for rows, future in live:
        part = slice(at, at + rows.size)
        at = part.stop
        try:
            future.set_result(_checked(store, block, rows, part))
        except ValueError as exc:
            future.set_exception(exc)


#: The starts not yet adopted (:func:`start_ahead`), by key; those not yet launched, by
#: store; and their lock (chains may run on threads).
_STARTED = {}
_UNLAUNCHED = {}
_STARTED_LOCK = threading.Lock()


def _start_key(store, seed, shift, first):
    """What a stream's start is found by: the store, the seed (whole), the sampled stratum
    (its exact rows' shifts) and the first stretch."""
    entropy = seed.entropy
    entropy = tuple(np.ravel(entropy).tolist()) if not isinstance(entropy, int) else entropy
    return (id(store), entropy, tuple(seed.spawn_key), seed.pool_size, shift.size,
            zlib.crc32(np.ascontiguousarray(shift)), first)


def start_ahead(target, expansion, seed, n_slots, expected=None):
    """Draw the first stretch of the row stream that ``RowStream(target, expansion, seed,
    n_slots, expected)`` will be, and return its :class:`StreamStart`, to be gathered in the
    background once launched (:meth:`StreamStart.launch`: with the other starts of the store
    not yet launched, in one read) or when the stream adopts it (None where the stream would
    not gather in a thread of its own: in a task of a Dask worker). The stream's rows and
    draws are those it would have gathered itself, earlier. Chains run one after the other
    then wait for the first chain's first rows only, and the others' are gathered in one read
    while it runs (on a cluster, one round of tasks, of tens of milliseconds, in which each
    chunk of an array not persisted is computed once), not one read each.

    Parameters
    ----------
    target, expansion, seed, n_slots, expected
        As the stream's (see :class:`RowStream`); ``seed`` a ``SeedSequence``.

    Returns
    -------
    StreamStart or None
        Its owner closes it when the chains are done (which lets an unadopted gather go).
    """
    store = target.store
    if store.kind == "dask" and _in_a_worker_task():
        return None
    _, shift, n_sampled = _sampled_stratum(target, expansion)
    first = _first_stretch(store, n_slots, expected)
    rng, _ = stream_generators(seed)
    start = StreamStart(_start_key(store, seed, shift, first), store, rng,
                        _drawn_rows(rng, shift, n_sampled, first))
    with _STARTED_LOCK:
        replaced = _STARTED.get(start.key)
        if replaced is not None:
            _unqueue(replaced)
        _STARTED[start.key] = start
        _UNLAUNCHED.setdefault(id(store), []).append(start)
    if replaced is not None:
        replaced.pending.cancel()
    return start


def _adopted(store, seed, shift, first):
    """``(rng, pending)`` of this stream's :class:`StreamStart` (taken out of the starts,
    launched alone if it was not, and left holding neither: its stretch is the stream's), or
    None."""
    if not isinstance(seed, np.random.SeedSequence):
        return None
    with _STARTED_LOCK:
        start = _STARTED.pop(_start_key(store, seed, shift, first), None)
        if start is None:
            return None
        alone = _unqueue(start)
        adopted = start.rng, start.pending
        start.rng = start.pending = None
    if alone:
        _gather_in_background(store, [(start.rows, adopted[1])])
    return adopted


def _dask_stretch(n_slots, expected):
    """A Dask array's first stretch: twice the ``expected`` rows up to a power of two, within
    the buffer's ``n_slots`` (all of them when ``expected`` is None).

    ``expected`` is a mean: a chain that reads past its first stretch waits for a second round
    of tasks (tens of milliseconds), while twice the rows cost little more to gather (at 10⁸
    rows not persisted, 4 096 random rows took 0.06 s and 65 536 took 0.22 s). A chain of 500
    draws expected to read about 450 rows read past the 512 of its stretch, and waited 0.07 to
    0.15 s for 1 024 more."""
    if expected is None or not np.isfinite(expected):
        return n_slots
    return int(min(n_slots, 1 << max(0, math.ceil(math.log2(max(1.0, 2.0 * expected))))))


def _in_a_worker_task():
    """Whether this thread runs a task of a ``dask.distributed`` worker."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def selected(rng, population, needed, m):
    """Selection sampling, one block: which of the next ``m`` rows of a scan a uniformly random
    set of ``needed`` distinct rows among the ``population`` rows still to scan takes.

    The number taken is hypergeometric (``m`` rows of the ``population``, ``needed`` drawn) and,
    given it, the rows taken are a uniformly random subset of the block.

    Parameters
    ----------
    rng : numpy.random.Generator
    population : int
        Rows still to scan (the block's included), fewer than 10⁹.
    needed : int
        Rows still to take.
    m : int
        Rows of the block.

    Returns
    -------
    ndarray of int
        Positions in the block.
    """
    count = needed if population == m else int(rng.hypergeometric(m, population - m, needed))
    return rng.choice(m, count, replace=False)
