"""Rows of a design matrix, its response and its case weights, wherever they are stored.

A :class:`RowStore` reads the rows of ``X`` (two-dimensional) together with ``y`` and the case
weights ``w`` (one value per row), without ever holding all of them at once: in *blocks* of
consecutive rows for the passes over the data (:meth:`RowStore.fold`), or *gathered* at given
rows (:meth:`RowStore.take`). It is the one way rows reach a model, wherever they are. X may be

* a NumPy array in memory, dense or SciPy CSR (its blocks are views: nothing is copied);
* a memory map of a file (:class:`numpy.memmap`, what ``np.load(path, mmap_mode="r")``
  returns): the file's pages are read as they are touched and stay in the operating system's
  page cache, not in the process's memory;
* a zarr array (any object with ``shape``, ``dtype``, ``chunks``, slicing and ``oindex``), read
  chunk by chunk;
* a Dask array: a pass is a Dask computation on whatever scheduler is active (a
  ``dask.distributed`` client when one exists), which maps the blocks of each chunk to a small
  summary where the chunk lives and combines the summaries in a tree (:mod:`._dask`).

Nothing is converted up front: a block is read in the store's own dtype (float32 stays
float32), and every block is checked for non-finite values as it is read, so that a NaN or an
infinity in the store raises an error that names its row and the block it was found in.

Data *in memory* (NumPy or CSR, :attr:`RowStore.in_memory`) can also be read row by row where
they are, by compiled code; data in a store (a memory map, zarr, Dask) are read in blocks or
gathered, so a chain reads them through a buffer of its own.
"""

from __future__ import annotations

import mmap
import os
import threading
from contextlib import closing

import numpy as np
from scipy import sparse

from ._blocks import Block, as_block, split_block, split_ranges
from ._checks import check_finite, check_weights, distinct_values
from ._files import FileStamp
from ._threads import mapped_in_order, single_threaded_blas
from ._truncation import watch
from ._zarr import ChunkStamp

__all__ = ["RowStore", "is_dask_array", "is_out_of_core", "is_zarr_array"]

#: Bytes of X (as float64) in a pass's read unit: 1/_UNITS of X within these bounds. Larger
#: units leave fewer summaries to combine in the calling thread, which contends with the
#: units' threads for the interpreter; _UNITS of them keep the cores busy.
_READ_BYTES, _UNITS = (1 << 24, 1 << 26), 32
#: Runs of rows in order up to which :meth:`RowStore.take` reads an array's rows as asked.
_DIRECT_RUNS = 64
#: Rows from which a gather from memory is split between two threads (:meth:`RowStore.take`).
_SPLIT_GATHER_ROWS = 1 << 16
#: Threads that fold blocks in a sequential pass (each with a single-threaded BLAS: the
#: products of a block are too small for BLAS's own threads, which only contend).
_WORKERS = max(1, min(4, os.cpu_count() or 1))


def is_dask_array(values):
    """Whether ``values`` is a Dask array (without importing Dask)."""
    module = type(values).__module__
    return module.startswith("dask.") and hasattr(values, "chunks") and hasattr(values,
                                                                                "to_delayed")


def is_zarr_array(values):
    """Whether ``values`` is a zarr array (without importing zarr)."""
    return type(values).__module__.startswith("zarr.") and hasattr(values, "oindex")


def is_out_of_core(values):
    """Whether ``values`` is stored out of the process's memory: a NumPy memory map, a zarr
    array or a Dask array."""
    return isinstance(values, np.memmap) or is_zarr_array(values) or is_dask_array(values)


def _kind(values):
    if sparse.issparse(values):
        return "csr"
    if is_dask_array(values):
        return "dask"
    if is_zarr_array(values):
        return "zarr"
    if isinstance(values, np.memmap):
        return "memmap"
    return "array"


def _memmap_location(values):
    """``(path, byte offset of values[0, 0])`` of a C-contiguous memory map, or None.

    A view of a memory map keeps the ``filename`` and ``offset`` of the map it was taken from;
    its own place in the file follows from its address in the mapping.
    """
    mapping = getattr(values, "_mmap", None)
    path = getattr(values, "filename", None)
    if mapping is None or path is None or not values.flags.c_contiguous:
        return None
    try:
        base = np.frombuffer(mapping, dtype=np.uint8).ctypes.data
    except (TypeError, ValueError):  # pragma: no cover - a closed mapping
        return None
    start = values.offset - values.offset % mmap.ALLOCATIONGRANULARITY
    return os.fspath(path), start + (values.ctypes.data - base)


def _reopened(path, offset, dtype, shape):
    """A read-only memory map of ``shape`` at byte ``offset`` of ``path``."""
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


_WATCH_LOCK = threading.Lock()


class _Column:
    """One stored column (X, y or w) and how it pickles: a memory map by its file, so that a
    chain sent to another process reopens the file instead of carrying its bytes. A memory
    map's file (:class:`~._files.FileStamp`) and a zarr array's stored chunks
    (:class:`~._zarr.ChunkStamp`) are stamped when the column is made, and checked before
    its rows are read (:meth:`check`)."""

    def __init__(self, values, name="X", stamp=None, chunks=None):
        self.values = values
        self.kind = _kind(values)
        self.name = name
        path = getattr(values, "filename", None) if self.kind == "memmap" else None
        self.stamp = stamp if stamp is not None or path is None else FileStamp.of(path)
        if chunks is None and self.kind == "zarr":
            chunks = ChunkStamp.of(values)
        self.chunks = chunks
        self._watch = None

    def check(self, rows, where):
        """Raise ``RuntimeError`` naming the file or the chunk and the rows when a memory
        map's file or a zarr array's chunks holding the rows have changed since the column
        was made (``rows`` describes them, ``where`` is a slice of rows or the rows, in any
        order). A memory map is watched from its first check on (:mod:`._truncation`): a
        read past the end of its file cut short gives zeros, and this check raises."""
        if self.stamp is not None:
            with _WATCH_LOCK:  # (one watch per column, whichever thread reads first)
                if self._watch is None:
                    self._watch = watch(self.values, owner=self,
                                        location=_memmap_location(self.values)) or False
            self.stamp.check(rows, self.name)
            if self._watch and self._watch.faults():
                # (another thread's read met the end of the file after this check's stat)
                self.stamp.check(rows, self.name)
                row = max(0, self._watch.zeroed_from()) // max(1, self.values.strides[0])
                raise RuntimeError(
                    f"{self.name} was read past the end of its file, {self.stamp.path}, from "
                    f"about row {row}: the file was cut short during the fit (and has its "
                    f"first size again), so the rows read are not the data. Keep the file "
                    f"unchanged during a fit (write a new file and fit again)")
        if self.chunks is not None:
            self.chunks.check(where, self.name)

    def unwatch(self):
        """Stop watching a memory map's reads (a fit's reads are over; see :meth:`check`)."""
        if self._watch:
            self._watch.release()
        self._watch = None

    def __reduce__(self):
        values = self.values
        if self.kind == "memmap":
            location = _memmap_location(values)
            if location is not None:
                return _column_from_memmap, (*location, values.dtype.str, values.shape,
                                             self.name, self.stamp)
        return _Column, (values, self.name, self.stamp, self.chunks)


def _column_from_memmap(path, offset, dtype, shape, name="X", stamp=None):
    if stamp is not None:
        stamp.check("its rows (opening the file in a worker process)", name)
    return _Column(_reopened(path, offset, np.dtype(dtype), shape), name, stamp)


class RowStore:
    """The rows of ``X`` with their response and case weights, read in blocks or gathered.

    Parameters
    ----------
    X : array of shape (n_rows, d)
        A NumPy array or memory map, a SciPy sparse matrix (kept as CSR), a zarr array or a Dask
        array, of real numbers.
    y : array of shape (n_rows,) or None, default None
        The response, stored likewise (or in memory); None for none.
    weights : array of shape (n_rows,) or None, default None
        Non-negative case weights, stored likewise; None for none.
    response : callable or None, default None
        Applied to every block (and gathered set) of ``y`` before it is returned, e.g. class
        labels to signs; picklable, since Dask may run it on a cluster's workers. Its
        ``into(y, out)``, when it has one, writes the mapped y into the float64 array ``out``
        and returns it: a pass's read units then map y into scratch (:func:`as_block`).

    Attributes
    ----------
    n_rows, n_features : int
    dtype : numpy.dtype
        The dtype blocks of X are read in (the store's: float32 stays float32; other numbers
        are read as float64).
    kind : {"array", "csr", "memmap", "zarr", "dask"}
        How X is stored.

    Raises
    ------
    ValueError
        Before reading anything: when X is not two-dimensional, has no rows or columns or no
        real dtype, or when y or the weights do not have one value per row of X.
    """

    def __init__(self, X, y=None, weights=None, *, response=None):
        if sparse.issparse(X):
            X = sparse.csr_matrix(X)
            X.sum_duplicates()  # (canonical rows: a row's entries in column order)
            X.sort_indices()
        shape = tuple(getattr(X, "shape", ()))
        if len(shape) != 2:
            raise ValueError(f"X must be a two-dimensional array, got shape {shape}")
        n_rows, n_features = (int(s) for s in shape)
        if n_rows < 1 or n_features < 1:
            raise ValueError(f"X must have at least one row and one column, got shape {shape}")
        dtype = np.dtype(X.dtype)
        if dtype.kind not in "fiub":
            raise ValueError(f"X must hold real numbers, got dtype {dtype}")
        for name, column in (("y", y), ("sample_weight", weights)):
            if column is None:
                continue
            # (a zarr array has a shape but no len: the default is not to be evaluated)
            column_shape = tuple(column.shape) if hasattr(column, "shape") else (len(column),)
            if column_shape != (n_rows,):
                raise ValueError(
                    f"{name} must hold one value per row of X: X has {n_rows} rows, {name} has "
                    f"shape {column_shape}")
        self.n_rows, self.n_features = n_rows, n_features
        self.dtype = np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)
        self.kind = _kind(X)
        if self.kind == "dask":
            from ._dask import aligned_columns

            X, y, weights = aligned_columns(X, y, weights)
        self._X = _Column(X)
        self._y = None if y is None else _Column(y if _kind(y) != "array" else np.asarray(y), "y")
        self._w = None if weights is None else _Column(
            weights if _kind(weights) != "array" else np.asarray(weights, dtype=np.float64),
            "sample_weight")
        self.response = response

    def __getstate__(self):
        # Futures belong to one client, chunk graphs grow with the chunks: remade where it goes.
        return {k: v for k, v in self.__dict__.items() if k not in ("_futures", "_chunk_graphs")}

    @property
    def has_weights(self):
        return self._w is not None

    @property
    def in_memory(self):
        """Whether X is a NumPy array or a CSR matrix of this process's memory (whose rows
        compiled code can read where they are)."""
        return self.kind in ("array", "csr")

    @property
    def y(self):
        """The stored y itself (before ``response``), or None."""
        return None if self._y is None else self._y.values

    @property
    def weights(self):
        """The stored case weights themselves, or None."""
        return None if self._w is None else self._w.values

    @property
    def X(self):
        """The stored X itself."""
        return self._X.values

    def block_rows(self):
        """Rows per compute block: about 2 MB of float64 values, which stay in cache (the
        blocks of :meth:`sksubsample.algorithms.glm.GLMTarget.row_blocks`)."""
        return max(256, min(16384, (1 << 18) // self.n_features))

    # ------------------------------------------------------------------ reading

    def _read(self, column, start, stop):
        column.check(f"rows {start} to {stop - 1}", slice(start, stop))
        values = column.values[start:stop]
        return values if column.kind == "csr" else np.asarray(values)

    def read(self, start, stop, *, check=True, reuse=False):
        """The :class:`Block` of rows ``start`` to ``stop - 1``, checked for non-finite values.

        Parameters
        ----------
        start, stop : int
            The rows ``[start, stop)``.
        check : bool, default True
            Whether to check the values (non-finite X or weights, negative weights).
        reuse : bool, default False
            Whether y mapped by ``response`` is written into this thread's scratch, overwritten
            by its next such read (:func:`as_block`).

        Returns
        -------
        Block
        """
        return as_block(start, self._read(self._X, start, stop),
                        None if self._y is None else self._read(self._y, start, stop),
                        None if self._w is None else self._read(self._w, start, stop),
                        self.dtype, self.response, self.block_rows() if check else 0, reuse)

    def check_unchanged(self):
        """Raise when the rows may have changed since the store was made (after a fit's
        chains): a ``RuntimeError`` when a memory map's file or a zarr array's chunks are not
        those stamped, a ``ValueError`` when X or the case weights in memory hold a value that
        is not finite (the set-up read every value finite: it was written while the chains
        ran). A value changed to another finite value in memory is not seen."""
        columns = [c for c in (self._X, self._y, self._w) if c is not None]
        try:
            for column in columns:
                column.check("its rows, after the chains", slice(0, self.n_rows))
        finally:
            for column in columns:
                column.unwatch()
        if not self.in_memory:
            return
        step = self.block_rows()
        try:
            for start, stop in self._read_ranges(0, self.n_rows):
                check_finite(self._X.values[start:stop], "X", start, step)
                if self._w is not None:
                    check_weights(self._w.values[start:stop], start, step)
        except ValueError as exc:
            raise ValueError(
                f"X or sample_weight changed during the fit: every value was finite when the "
                f"fit began, and the chains may have read the new ones, so their draws are not "
                f"kept. Keep the arrays unchanged during a fit (fit a copy). {exc}") from None

    def unit_rows(self):
        """Rows of a read unit (:data:`_READ_BYTES`), in whole compute blocks. The units depend
        on the shape of X only, not on its dtype or its storage, so that a pass sums the same
        rows in the same order whatever holds them (zarr chunks are read across units)."""
        step, row = self.block_rows(), 8 * self.n_features
        size = min(_READ_BYTES[1], max(_READ_BYTES[0], row * self.n_rows // _UNITS))
        return max(step, size // row // step * step)

    def _read_ranges(self, start, stop):
        """``[a, b)`` read units covering ``[start, stop)`` for a sequential pass."""
        unit = self.unit_rows()
        return [(a, min(stop, a + unit)) for a in range(start, stop, unit)]

    def units(self, start=0, stop=None, *, check=True):
        """The read units covering rows ``start`` to ``stop``, as :class:`Block` s: about
        :data:`_READ_BYTES` of X each (whole chunks of a zarr array), checked as they are read.

        The next unit is read in a background thread while the caller works on the current one
        (NumPy and zarr release the GIL while they copy and decompress), so a pass reads the
        disk and computes at once; a caller that stops early does not wait for it. Rows in
        memory are not read: a unit is a view.

        Parameters
        ----------
        start : int, default 0
        stop : int or None, default None
            ``n_rows`` when None.
        check : bool, default True
            Whether each unit is checked as it is read (:meth:`read`).

        Yields
        ------
        Block
        """
        stop = self.n_rows if stop is None else stop
        ranges = self._read_ranges(start, stop)
        if not ranges:
            return
        if self.in_memory:
            for a, b in ranges:
                yield self.read(a, b, check=check)
            return
        yield from mapped_in_order(lambda a, b: self.read(a, b, check=check), ranges,
                                   workers=1, ahead=1)

    def block_ranges(self, start=0, stop=None):
        """The rows ``(a, b)``, ``[a, b)``, of each :class:`Block` that :meth:`blocks` yields
        for the same arguments, without reading them."""
        stop = self.n_rows if stop is None else stop
        step = self.block_rows()
        for a, b in self._read_ranges(start, stop):
            yield from split_ranges(a, b, step)

    def blocks(self, start=0, stop=None):
        """The :class:`Block` s of ``block_rows()`` rows covering rows ``start`` to ``stop``
        (the read units of :meth:`units`, split).

        Parameters
        ----------
        start : int, default 0
        stop : int or None, default None
            ``n_rows`` when None.

        Yields
        ------
        Block
        """
        step = self.block_rows()
        for unit in self.units(start, stop):
            yield from split_block(unit, step)

    def fold(self, block_fn, combine, args=(), *, check=True):
        """``combine`` over ``block_fn(unit, *args)`` of every read unit, in row order.

        With a Dask array a unit is a chunk, mapped where the chunk is, and the chunks' results
        are combined in a tree, as one computation on the active scheduler; otherwise the
        units (:meth:`units`, a few megabytes each) are read and mapped by a few threads, each
        unit by one (NumPy, BLAS, zarr and the compiled kernels release the GIL, and a memory
        map's pages are read where they are touched), their summaries combined in row order.
        A pass stopped early (Ctrl-C, an error) returns at once: the units queued are not
        mapped, and those under way (a kernel's first compile, say) are not waited for
        (:mod:`._threads`).
        ``block_fn`` and ``combine`` must be module-level (picklable) functions, ``combine``
        associative; ``block_fn`` may split its unit in blocks of its own (:func:`split_block`).
        ``combine.into``, when ``combine`` has it, is used in its place here: the same sum into
        the first summary's arrays, which the fold owns (the Dask path keeps the chunks'
        summaries unchanged and combines them with ``combine``).

        Parameters
        ----------
        block_fn : callable
            ``block_fn(unit, *args) -> summary`` of one :class:`Block`.
        combine : callable
            ``combine(a, b) -> summary`` of two summaries (``a`` of earlier rows).
        args : tuple, default ()
            Further arguments of ``block_fn`` (picklable).
        check : bool, default True
            Whether every unit is checked as it is read (non-finite X or weights, negative
            weights: a ValueError naming the row and its block), or left to ``block_fn``.

        Returns
        -------
        object
            The summary of all rows.
        """
        if self.kind == "dask":
            from ._dask import fold_chunks

            return fold_chunks(self, block_fn, combine, args, check)
        units = [(start, stop, check, block_fn, args)
                 for start, stop in self._read_ranges(0, self.n_rows)]
        # A pass stopped early waits for no unit (mapped_in_order). Units in flight at most
        # twice the workers: memory stays O(unit). The summaries are combined in row order, so
        # the total does not depend on the threads.
        with single_threaded_blas(), closing(mapped_in_order(
                self._map_unit, units, workers=_WORKERS, ahead=2 * _WORKERS - 1)) as parts:
            total = None
            for part in parts:
                total = _combined(total, part, combine)
            return total

    def _map_unit(self, start, stop, check, block_fn, args):
        # (the unit is the block function's alone: its mapped y may live in scratch)
        return block_fn(self.read(start, stop, check=check, reuse=True), *args)

    def take(self, rows):
        """The rows ``rows`` of X, y and w, in that order (repeats allowed), as one read.

        The rows are read in increasing order (a memory map then touches its pages in file
        order; a zarr array reads each chunk once; a Dask array runs one small task per chunk
        touched) and put back in the order asked; an array's or a memory map's rows asked in
        at most :data:`_DIRECT_RUNS` runs in order are read as asked (in as many sweeps).

        Parameters
        ----------
        rows : ndarray of int of shape (m,)

        Returns
        -------
        Block
            With ``start = -1``; the values are not checked (the passes check every row).
        """
        rows = np.asarray(rows, dtype=np.int64)
        descents = np.count_nonzero(rows[1:] < rows[:-1])
        direct = descents == 0 or (descents < _DIRECT_RUNS and self.kind in ("array", "memmap"))
        order = None if direct else np.argsort(rows, kind="stable")
        read = rows if order is None else rows[order]
        if self.kind == "dask":
            from ._dask import take_chunks

            X, y, w = take_chunks(self, read, order)
            order = None  # (each row put at its place already)
        else:
            X = self._gather(self._X, read)
            y = None if self._y is None else self._gather(self._y, read)
            w = None if self._w is None else self._gather(self._w, read)

        def in_order(values, dtype=None):  # (rows read as asked: as they are)
            if order is None:
                return np.asarray(values, dtype=dtype or values.dtype)
            out = np.empty((rows.size, *values.shape[1:]), dtype=dtype or values.dtype)
            out[order] = values
            return out

        if self.kind != "csr":
            X = in_order(np.asarray(X), self.dtype)
        else:  # (as asked)
            X = (X if order is None else X[np.argsort(order, kind="stable")]).astype(
                self.dtype, copy=False)
        if y is not None:
            y = in_order(np.asarray(y))
            y = y if self.response is None else self.response(y)
        w = None if w is None else in_order(np.asarray(w), np.float64)
        return Block(-1, X, y, w)

    @staticmethod
    def _gather(column, rows):
        if rows.size:
            column.check(f"{rows.size} rows from row {rows.min()} to row {rows.max()}", rows)
        if column.kind == "zarr":
            return column.values.oindex[rows]
        if column.kind == "array" and _WORKERS > 1 and rows.size >= _SPLIT_GATHER_ROWS:
            return _gathered_on_two_threads(column.values, rows)
        return column.values[rows]

    def unique_response(self):
        """The distinct raw values of y (before ``response``), in one pass over y only."""
        column = self._y.values
        if self.kind == "dask":
            from ._dask import unique_values

            return unique_values(column)
        step = max(1 << 20, self.block_rows())
        found = None
        for start in range(0, self.n_rows, step):
            values = distinct_values(np.asarray(column[start:start + step]))
            found = values if found is None else np.union1d(found, values)
        return found


def _combined(total, part, combine):
    """``combine(total, part)``, or ``combine.into(total, part)`` when ``combine`` has one: a
    fold owns its running total (the first unit's summary, then what combining returned), so
    ``into`` may sum into its arrays rather than copy them at every unit."""
    if total is None:
        return part
    into = getattr(combine, "into", None)
    return combine(total, part) if into is None else into(total, part)


def _gathered_on_two_threads(values, rows):
    """``values[rows]`` of an array in memory, the second half of the rows gathered by a thread
    of its own (NumPy's take releases the interpreter): the copy and the page faults of the
    fresh array, a start subsample's 40 MB at 10^7 rows, run on two cores."""
    n = values.shape[0]
    if rows.max() >= n or rows.min() < -n:
        raise IndexError(f"rows out of bounds for {n} rows (from {rows.min()} to {rows.max()})")
    out = np.empty((rows.size, *values.shape[1:]), dtype=values.dtype)
    half = rows.size // 2
    raised = []

    # (mode "wrap" is indexing's own within [-n, n), checked above; the default "raise" would
    # copy through a buffer as large as the output)
    def second_half():
        try:
            np.take(values, rows[half:], axis=0, out=out[half:], mode="wrap")
        except BaseException as exc:  # (raised again by the caller)
            raised.append(exc)

    helper = threading.Thread(target=second_half, daemon=True)
    helper.start()
    try:
        np.take(values, rows[:half], axis=0, out=out[:half], mode="wrap")
    finally:
        helper.join()
    if raised:
        raise raised[0]
    return out
