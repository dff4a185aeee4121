"""Row stores: blocks, gathers and checks over NumPy arrays, memory maps, zarr and Dask arrays."""

import pickle
import re

import numpy as np
import pytest
from scipy import sparse

from sksubsample.algorithms.stores import RowStore, _rows, is_out_of_core
from sksubsample.algorithms.stores._checks import check_gathered, distinct_values

da = pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")


class _Doubled:
    """A picklable response map."""

    def __call__(self, y):
        return 2.0 * y


def _sums(block):
    return np.array([block.X.astype(np.float64).sum(), block.X.shape[0], block.y.sum(),
                     block.w.sum(), block.start * block.X.shape[0]])


def _add(a, b):
    return a + b


@pytest.fixture
def data(rng, tmp_path):
    n, d = 50_000, 3
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, 2, size=n).astype(np.int8)
    w = rng.random(n)
    np.save(tmp_path / "X.npy", X)
    zarr.create_array(store=str(tmp_path / "X.zarr"), data=X, chunks=(7000, d))
    return X, y, w, tmp_path


def _stores(X, y, w, path):
    memmap = np.load(path / "X.npy", mmap_mode="r")
    return {"array": X, "memmap": memmap,
            "zarr": zarr.open_array(str(path / "X.zarr"), mode="r"),
            "dask": da.from_array(memmap, chunks=(9_999, 3))}


def test_every_kind_folds_and_gathers_the_same_rows(data):
    X, y, w, path = data
    # Rows in a few increasing runs (an array's and a memory map's read as asked), and in more
    # than _DIRECT_RUNS (read in increasing order and put back).
    for rows in (np.array([4, 0, 4, 49_999, 13_000, 7_000, 6_999]),
                 np.arange(0, 50_000, 37)[::-1], np.arange(0, 50_000, 3)):
        for kind, values in {**_stores(X, y, w, path), "csr": sparse.csr_matrix(X)}.items():
            store = RowStore(values, y, w, response=_Doubled())
            assert store.kind == kind and store.dtype == np.float32
            block = store.take(rows)
            np.testing.assert_array_equal(
                block.X.toarray() if sparse.issparse(block.X) else block.X, X[rows])
            np.testing.assert_array_equal(block.y, 2.0 * y[rows])
            np.testing.assert_array_equal(block.w, w[rows])
    for values in _stores(X, y, w, path).values():
        store = RowStore(values, y, w, response=_Doubled())
        total = store.fold(_sums, _add)
        n = X.shape[0]
        # The blocks cover every row once, in order, with their own starts.
        np.testing.assert_allclose(total[:4], [X.astype(np.float64).sum(), n, 2 * y.sum(),
                                               w.sum()], rtol=1e-12)
        none = store.take(np.empty(0, dtype=np.int64))
        assert none.X.shape == (0, 3) and none.y.shape == none.w.shape == (0,)


class _DoubledInto(_Doubled):
    """A response map that can also write into a given array (counting those writes)."""

    calls = 0

    def into(self, y, out):
        type(self).calls += 1
        np.multiply(y, 2.0, out=out)
        return out


def test_a_pass_maps_y_into_scratch_with_the_same_sums(data, monkeypatch):
    # A response with ``into`` maps each read unit's y into the thread's scratch: every unit's
    # values are its own (the sums equal those of the plain response, unit by unit: a stale
    # or shared scratch would change them), and a gather keeps its own array. Units of a
    # compute block (16 384 rows) each, so that each thread maps several.
    monkeypatch.setattr(_rows, "_READ_BYTES", (1 << 16, 1 << 16))
    X, y, w, path = data
    for kind, values in _stores(X, y, w, path).items():
        plain = RowStore(values, y, w, response=_Doubled()).fold(_sums, _add)
        _DoubledInto.calls = 0
        store = RowStore(values, y, w, response=_DoubledInto())
        np.testing.assert_array_equal(store.fold(_sums, _add), plain)
        assert _DoubledInto.calls >= 3, kind  # (the units did go through ``into``)
        first, second = store.take(np.arange(10)), store.take(np.arange(10, 20))
        np.testing.assert_array_equal(first.y, 2.0 * y[:10])
        np.testing.assert_array_equal(second.y, 2.0 * y[10:20])


def test_y_and_weights_may_be_zarr_arrays_too(data):
    # A zarr array has a shape but no len(): y and the weights stored as zarr arrays are read
    # like X.
    X, y, w, path = data
    y_zarr = zarr.create_array(store=str(path / "y.zarr"), data=y, chunks=(7_000,))
    w_zarr = zarr.create_array(store=str(path / "w.zarr"), data=w, chunks=(7_000,))
    store = RowStore(X, y_zarr, w_zarr, response=_Doubled())
    ours = store.fold(_sums, _add)
    np.testing.assert_allclose(ours, RowStore(X, y, w, response=_Doubled()).fold(_sums, _add),
                               rtol=1e-12)
    rows = np.array([3, 49_999, 7_000, 6_999])
    block = store.take(rows)
    np.testing.assert_array_equal(block.y, 2.0 * y[rows])
    np.testing.assert_array_equal(block.w, w[rows])
    with pytest.raises(ValueError, match="one value per row"):
        RowStore(X, zarr.create_array(store=str(path / "short.zarr"), data=y[:-1],
                                      chunks=(7_000,)))


def test_a_large_gather_from_memory_on_two_threads_is_indexing(rng):
    # From 2^16 rows a gather from memory is split between two threads: the same values as
    # indexing, negative rows included, and a row out of bounds an IndexError.
    X = rng.standard_normal((200_000, 3)).astype(np.float32)
    y = rng.integers(0, 2, 200_000).astype(np.int8)
    store = RowStore(X, y)
    rows = rng.integers(-200_000, 200_000, size=70_001)
    block = store.take(rows)
    np.testing.assert_array_equal(block.X, X[rows])
    np.testing.assert_array_equal(block.y, y[rows])
    for bad in (200_000, -200_001):
        with pytest.raises(IndexError):
            store.take(np.append(rows, bad))


@pytest.mark.parametrize("as_sparse", [False, True])
def test_gathered_rows_name_the_bad_value_a_pass_meets_first(as_sparse):
    # Rows gathered out of order, two of them with a NaN: the error names the lowest of
    # those rows (and its lowest bad column), as a pass over the store would.
    X = np.ones((6, 3))
    X[0, 2] = X[2, 1] = X[2, 2] = np.nan
    rows = np.array([900, 30, 7, 12, 5, 400])
    with pytest.raises(ValueError, match=r"at row 7, column 1, in the block of rows 0 to 9"):
        check_gathered(sparse.csr_matrix(X) if as_sparse else X, rows, 10, 1000)
    check_gathered(np.ones((6, 3)), rows, 10, 1000)  # (finite: no error)


def test_blocks_start_where_the_previous_one_stopped(data):
    X, y, w, path = data
    store = RowStore(np.load(path / "X.npy", mmap_mode="r"), y, w)
    starts, stops = [], []
    for block in store.blocks():
        starts.append(block.start)
        stops.append(block.start + block.X.shape[0])
    assert starts[0] == 0 and stops[-1] == X.shape[0]
    assert starts[1:] == stops[:-1]
    assert max(b - a for a, b in zip(starts, stops, strict=True)) == store.block_rows()


def test_a_memory_map_pickles_by_its_file(data):
    X, _, _, path = data
    memmap = np.load(path / "X.npy", mmap_mode="r")
    for view, rows in ((memmap, slice(None)), (memmap[1000:], slice(1000, None))):
        store = RowStore(view, None)
        blob = pickle.dumps(store)
        assert len(blob) < 10_000  # the file's name, not its 600 kB
        back = pickle.loads(blob)
        assert back.kind == "memmap"
        np.testing.assert_array_equal(back.take(np.array([0, 5])).X, X[rows][[0, 5]])


def test_out_of_core_kinds_are_recognised(data):
    X, y, w, path = data
    kinds = _stores(X, y, w, path)
    assert not is_out_of_core(kinds["array"])
    assert all(is_out_of_core(kinds[k]) for k in ("memmap", "zarr", "dask"))


@pytest.mark.parametrize("kind", ["array", "memmap", "zarr", "dask"])
def test_a_non_finite_value_names_its_row_and_block(kind, tmp_path):
    X = np.ones((40_000, 2))
    X[33_333, 1] = np.inf
    np.save(tmp_path / "X.npy", X)
    values = {"array": lambda: X,
              "memmap": lambda: np.load(tmp_path / "X.npy", mmap_mode="r"),
              "zarr": lambda: zarr.create_array(store=str(tmp_path / "X.zarr"), data=X,
                                                chunks=(5000, 2)),
              "dask": lambda: da.from_array(X, chunks=(6000, 2))}[kind]()
    store = RowStore(values)
    with pytest.raises(ValueError, match="row 33333, column 1, in the block of rows") as info:
        store.fold(_count, _add)
    first, last = map(int, re.search(r"block of rows (\d+) to (\d+)", str(info.value)).groups())
    assert first <= 33_333 <= last and last - first < store.block_rows()


def _count(block):
    return block.X.shape[0]


def test_negative_weights_are_refused_with_their_row():
    w = np.ones(1000)
    w[777] = -1.0
    with pytest.raises(ValueError, match="negative at row 777"):
        RowStore(np.ones((1000, 2)), None, w).fold(_count, _add)


def test_lengths_and_shapes_are_checked_before_reading(tmp_path):
    class Unreadable:
        shape, dtype = (100, 3), np.dtype(np.float32)

        def __getitem__(self, key):
            raise AssertionError("read before the shapes were checked")

    with pytest.raises(ValueError, match="one value per row of X: X has 100 rows"):
        RowStore(Unreadable(), np.zeros(99))
    with pytest.raises(ValueError, match="two-dimensional"):
        RowStore(np.zeros(5))
    with pytest.raises(ValueError, match="real numbers"):
        RowStore(np.array([["a"]]))


def test_scratch_arrays_are_kept_per_thread_and_name():
    from concurrent.futures import ThreadPoolExecutor

    from sksubsample.algorithms.stores import scratch

    a = scratch("test-a", (100, 3), np.float64)
    assert a.shape == (100, 3) and a.flags.c_contiguous
    # The same name and dtype in the same thread: the same memory (no new array), a smaller
    # shape a view of it, a larger one a new array.
    assert np.shares_memory(scratch("test-a", (10, 3), np.float64), a)
    assert not np.shares_memory(scratch("test-a", (100, 3), np.float32), a)
    assert not np.shares_memory(scratch("test-b", (100, 3), np.float64), a)
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(scratch, "test-a", (100, 3), np.float64).result()
    assert not np.shares_memory(other, a)
    assert not np.shares_memory(scratch("test-a", (1000, 3), np.float64), a)


def test_a_zeroed_scratch_array_is_zeros_whatever_was_written_before():
    # The slices marked written are zeroed at the next call, in the same shape or another (a
    # pass's bins change with the width of the design), and a call that stopped between
    # marking and writing leaves nothing behind; unmarked slices are never written (they are
    # zero already), so the call does not clear the whole array.
    from sksubsample.algorithms.stores import zeroed_scratch

    values, written = zeroed_scratch("test-z", (50, 4, 4))
    assert not values.any() and written.shape == (50,) and not written.any()
    written[[3, 7]] = True
    values[3] = 1.5
    values[7, 0, 1] = -2.0
    again, written = zeroed_scratch("test-z", (50, 4, 4))
    assert np.shares_memory(again, values) and not again.any() and not written.any()
    written[10] = True
    again[10] = 4.0
    other, written = zeroed_scratch("test-z", (20, 3, 3))  # (another shape, same memory)
    assert np.shares_memory(other, values) and not other.any() and not written.any()
    written[19] = True
    other[19] = 1.0
    wider, written = zeroed_scratch("test-z", (60, 4, 4))  # (more than it holds: new memory)
    assert not wider.any() and written.shape == (60,)
    # Negative control: a slice written without its mark is left as it was.
    wider[5] = 3.0
    kept, _ = zeroed_scratch("test-z", (60, 4, 4))
    assert np.all(kept[5] == 3.0)


def test_a_pass_s_sums_do_not_depend_on_its_scratch_arrays():
    # Two passes on one thread (the scratch arrays reused, with the first pass's values left
    # in them) give the sums of a pass on fresh arrays in another thread.
    from concurrent.futures import ThreadPoolExecutor

    from sksubsample.algorithms.glm._bins import Binning
    from sksubsample.algorithms.glm._family import BERNOULLI_LOGIT
    from sksubsample.algorithms.glm._pass import PassRequest, pass_sums
    from sksubsample.algorithms.stores import as_block

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30_000, 6)).astype(np.float32)
    y = np.where(rng.random(30_000) < 0.4, 1.0, -1.0)
    block = as_block(0, X, y, None, np.float32)
    inverse = np.linalg.inv(np.linalg.cholesky(np.eye(7) * 3000.0))
    points = rng.standard_normal((2, 7)) * 0.1
    # The first pass's kind (a Hessian, leverages), then the last's (bins, leverages).
    hessian = PassRequest(points[0], BERNOULLI_LOGIT, True, inverse=inverse, capacity=50)
    binned = PassRequest(points[1], BERNOULLI_LOGIT, True, inverse=inverse, capacity=50,
                         binning=Binning(4.0, 8))

    def in_one_thread():
        return [pass_sums(block, r) for r in (hessian, binned, hessian, binned)]

    def fresh(request):
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(pass_sums, block, request).result()

    with ThreadPoolExecutor(1) as pool:
        reused = pool.submit(in_one_thread).result()
    for again, request in zip(reused[2:], (hessian, binned), strict=True):
        alone = fresh(request)
        for name in ("loglik", "grad", "hess", "largest"):
            np.testing.assert_array_equal(getattr(again, name), getattr(alone, name))
        np.testing.assert_array_equal(np.sort(again.top.rows), np.sort(alone.top.rows))
    np.testing.assert_array_equal(reused[3].binned.grams, fresh(binned).binned.grams)
    # The negative control: the two points' sums differ.
    assert not np.array_equal(reused[0].grad, reused[1].grad)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_, np.int16, np.float32])
def test_the_distinct_values_of_a_column_are_numpys(rng, dtype):
    values = rng.integers(-128 if dtype == np.int8 else 0, 2 if dtype == np.bool_ else 120,
                          size=5000).astype(dtype)
    found = distinct_values(values)
    np.testing.assert_array_equal(found, np.unique(values))
    assert found.dtype == values.dtype


_SPANS = [(0, 0), (0, 1), (1, 0), (0, 2), (5, 1), (-1, 1)]


@pytest.mark.parametrize("dtype, low, span", [
    (dtype, low, span) for dtype in (np.int8, np.uint8, np.bool_, np.int64, np.uint64)
    for low, span in _SPANS
    if not (low < 0 and np.dtype(dtype).kind in "ub") and not (dtype == np.bool_
                                                                 and low + span > 1)])
def test_labels_of_a_span_of_one_are_found_by_their_extremes(rng, dtype, low, span):
    # Integers whose least and largest differ by at most one are those two (both occur);
    # a span of two (the negative control: the middle value may be missing) is counted.
    values = rng.integers(low, low + span + 1, size=5000).astype(dtype)
    if span == 2:
        values[values == low + 1] = low  # no middle value
    found = distinct_values(values)
    np.testing.assert_array_equal(found, np.unique(values))
    assert found.dtype == values.dtype
    assert distinct_values(values[:0]).size == 0
    extremes = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max])
    np.testing.assert_array_equal(distinct_values(extremes), extremes)


def _row_order(block):
    """The block's first row and size: combined, the list of every unit in the fold's order."""
    return [(block.start, block.X.shape[0], float(block.X.astype(np.float64).sum()))]


def _float_sum(block):
    return float(np.add.reduce(block.X, axis=None, dtype=np.float64)) / 3.0


def _large_sum(block):
    return _float_sum(block)


# (summaries said too large to be held together by the caller: combined by the workers' tasks)
_large_sum.summary_bytes = lambda: 1 << 40


@pytest.mark.parametrize("made_from_the_cluster", [True, False])
def test_a_local_clusters_results_are_read_from_its_workers(data, made_from_the_cluster):
    # A client made from a LocalCluster (its workers on this machine) reads the tasks' results
    # from the workers directly; a client given only the scheduler's address is left as it is
    # configured (through the scheduler by default). The rows are the same either way.
    distributed = pytest.importorskip("distributed")
    X, y, _, _ = data
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster if made_from_the_cluster
                               else cluster.scheduler_address) as client:
        persisted = client.persist([da.from_array(X, chunks=(2_000, 3)),
                                    da.from_array(y, chunks=2_000)])
        distributed.wait(persisted)
        asked, gather = [], client.gather

        def recorded(futures, **kwargs):
            asked.append(kwargs.get("direct"))
            return gather(futures, **kwargs)

        client.gather = recorded
        rows = np.array([49_999, 3, 3, 20_000, 7])
        block = RowStore(*persisted, response=_Doubled()).take(rows)
    np.testing.assert_array_equal(block.X, X[rows])
    np.testing.assert_array_equal(block.y, 2.0 * y[rows])
    assert asked == [True if made_from_the_cluster else None]


@pytest.mark.parametrize("threads", [1, 2])
def test_persisted_arrays_are_folded_and_gathered_on_the_workers_that_hold_them(data, threads):
    # On a cluster holding the arrays, a pass is a task per worker and a gather one per worker
    # touched: the same blocks, the same tree of sums (bit for bit) and the same rows as Dask's
    # threads give, whichever worker holds which chunk.
    distributed = pytest.importorskip("distributed")
    X, y, w, _ = data
    arrays = [da.from_array(X, chunks=(2_000, 3)), da.from_array(y, chunks=2_000),
              da.from_array(w, chunks=2_000)]
    rng = np.random.default_rng(5)
    rows = np.sort(rng.integers(0, X.shape[0], size=3_000))
    rows[:3] = rows[3]  # (repeats)
    local = RowStore(*arrays, response=_Doubled())
    expected_sum = local.fold(_float_sum, _add)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=threads, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        persisted = client.persist(arrays)
        distributed.wait(persisted)
        holders = client.who_has(persisted[0])
        assert len({h[0] for h in holders.values()}) == 2  # chunks on both workers
        store = RowStore(*persisted, response=_Doubled())
        with distributed.get_task_stream(client) as stream:
            units = store.fold(_row_order, _add)
            assert store.fold(_float_sum, _add) == expected_sum
            block = store.take(rows)
            found = store.unique_response()
        with distributed.get_task_stream(client) as tree:
            assert store.fold(_large_sum, _add) == expected_sum
        shuffled = rng.permutation(rows)  # (gathered sorted, each row put at its place)
        block_shuffled = store.take(shuffled)
        empty = store.take(np.empty(0, dtype=np.int64))
    assert [u[:2] for u in units] == [(a, 2_000) for a in range(0, X.shape[0], 2_000)]
    np.testing.assert_allclose([u[2] for u in units],
                               X.astype(np.float64).reshape(-1, 2_000 * 3).sum(axis=1))
    np.testing.assert_array_equal(block.X, X[rows])
    np.testing.assert_array_equal(block.y, 2.0 * y[rows])
    np.testing.assert_array_equal(block.w, w[rows])
    np.testing.assert_array_equal(block_shuffled.X, X[shuffled])
    np.testing.assert_array_equal(block_shuffled.y, 2.0 * y[shuffled])
    np.testing.assert_array_equal(block_shuffled.w, w[shuffled])
    np.testing.assert_array_equal(found, np.unique(y))
    # A task per worker, not per chunk (the 25 chunks' would be more than 8), unless the
    # summaries are too large to gather: then a task per chunk and the tree's.
    assert len(stream.data) <= 4 * 2 and len(tree.data) == 25 + 4 + 1
    assert empty.X.shape == (0, 3) and empty.X.dtype == np.float32
    assert empty.y.shape == empty.w.shape == (0,)


def _chunk_of(X, start, stop, fail=False):
    if fail:
        raise OSError(f"chunk at row {start} unreadable")
    return X[start:stop]


def _delayed_rows(X, rows, fail_at=None):
    """A Dask array whose chunks are computed apart (each from its own task)."""
    from dask import delayed

    read = delayed(_chunk_of, pure=True)
    return da.concatenate([
        da.from_delayed(read(X, a, min(X.shape[0], a + rows), a == fail_at),
                        shape=(min(X.shape[0], a + rows) - a, *X.shape[1:]), dtype=X.dtype)
        for a in range(0, X.shape[0], rows)])


def test_arrays_not_persisted_are_gathered_by_a_task_per_thread_of_the_cluster(data):
    # Chunks computed each from their own tasks (or sharing only a small value: the zarr
    # array's handle): a gather is a task per thread of the cluster, each computing its chunks
    # and taking their rows (not a task per chunk and part). Chunks that share a task (here
    # the columns' means) or that read a persisted array are gathered a task per chunk, as
    # Dask would: the same rows either way.
    distributed = pytest.importorskip("distributed")
    X, y, w, path = data
    zarr_path = str(path / "X.zarr")  # (chunks of 7 000 rows, all reading one array handle)
    rng = np.random.default_rng(6)
    rows = np.sort(rng.integers(0, X.shape[0], size=3_000))
    rows[:3] = rows[3]  # (repeats)
    Xd, yd, wd = _delayed_rows(X, 2_000), _delayed_rows(y, 2_000), _delayed_rows(w, 2_000)
    centred = Xd - Xd.mean(axis=0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        persisted = client.persist(da.from_array(X, chunks=(2_000, 3)))
        distributed.wait(persisted)
        with distributed.get_task_stream(client) as grouped:
            block = RowStore(Xd, yd, wd, response=_Doubled()).take(rows)
        shuffled = rng.permutation(rows)  # (gathered sorted, each row put at its place)
        block_shuffled = RowStore(Xd, yd, wd, response=_Doubled()).take(shuffled)
        with distributed.get_task_stream(client) as shared:
            block_centred = RowStore(centred, yd).take(rows)
        sliced = RowStore(persisted[:40_000], yd[:40_000]).take(rows[rows < 40_000])
        with distributed.get_task_stream(client) as from_zarr:
            block_zarr = RowStore(da.from_zarr(zarr_path), y).take(rows)
        only_weights = RowStore(Xd, None, wd).take(rows)
    np.testing.assert_array_equal(block.X, X[rows])
    np.testing.assert_array_equal(block.y, 2.0 * y[rows])
    np.testing.assert_array_equal(block.w, w[rows])
    np.testing.assert_array_equal(block_shuffled.X, X[shuffled])
    np.testing.assert_array_equal(block_shuffled.y, 2.0 * y[shuffled])
    np.testing.assert_array_equal(block_shuffled.w, w[shuffled])
    np.testing.assert_array_equal(only_weights.w, w[rows])
    np.testing.assert_allclose(block_centred.X, (X - X.astype(np.float64).mean(axis=0))[rows],
                               atol=1e-5)
    np.testing.assert_array_equal(sliced.X, X[rows[rows < 40_000]])
    np.testing.assert_array_equal(block_zarr.X, X[rows])
    assert len(grouped.data) == len(from_zarr.data) == 2
    assert len(shared.data) > 25  # (negative control: a task per chunk and more)


def test_a_chunk_that_fails_on_the_cluster_names_its_rows(data):
    distributed = pytest.importorskip("distributed")
    X, y, _, _ = data
    Xd = _delayed_rows(X, 2_000, fail_at=30_000)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        with pytest.raises(OSError, match="unreadable") as info:
            RowStore(Xd, y).take(np.array([5, 31_000, 49_000]))
    first, last = map(int, re.search(r"chunks of rows (\d+) to (\d+)",
                                     "\n".join(info.value.__notes__)).groups())
    assert first <= 30_000 and 31_999 <= last


def test_a_zarr_array_in_memory_is_not_sent_with_every_group(rng):
    # Its handle, which every chunk reads, pickles to its data (1.2 MB here): the gather takes
    # a task per chunk rather than a copy of the array per group's task.
    distributed = pytest.importorskip("distributed")
    X = rng.standard_normal((100_000, 3)).astype(np.float32)
    in_memory = zarr.create_array(store=zarr.storage.MemoryStore(), shape=X.shape,
                                  dtype=X.dtype, chunks=(10_000, 3))
    in_memory[:] = X
    rows = np.sort(rng.integers(0, X.shape[0], size=500))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream:
            block = RowStore(da.from_zarr(in_memory)).take(rows)
    np.testing.assert_array_equal(block.X, X[rows])
    assert len(stream.data) > 2
