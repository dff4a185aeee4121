"""Stores that change or fail during a fit: a zarr chunk deleted, written or rewritten, a Dask
chunk whose computation raises. Each must be an error naming the block and its rows, never
rows read as the fill value or a hang."""

import os
import time

import numpy as np
import pytest

from sksubsample.algorithms.stores import RowStore

zarr = pytest.importorskip("zarr")

N, D = 1000, 3


def _values():
    values = np.random.default_rng(0).normal(size=(N, D))
    values[400:500] = 0.0  # one chunk of fill values, which zarr does not write
    return values


def _local(path, **layout):
    array = zarr.create_array(store=str(path), shape=(N, D), dtype="f8", fill_value=0.0,
                              **layout)
    array[:] = _values()
    return array


def test_an_unchanged_zarr_array_with_an_unwritten_chunk_reads_as_written(tmp_path):
    """The negative control: a chunk absent from the start is the fill value, not an error."""
    array = _local(tmp_path / "X.zarr", chunks=(100, D))
    assert not os.path.exists(tmp_path / "X.zarr" / "c" / "4" / "0")
    store = RowStore(array, np.zeros(N))
    np.testing.assert_array_equal(store.read(0, N).X, _values())
    np.testing.assert_array_equal(store.take(np.array([450, 3, 999])).X,
                                  _values()[[450, 3, 999]])


@pytest.mark.parametrize("layout", [{"chunks": (100, D)},
                                    {"chunks": (50, D), "shards": (100, D)}],
                         ids=["chunks", "shards"])
def test_a_deleted_zarr_chunk_is_an_error_naming_the_block_and_rows(tmp_path, layout):
    array = _local(tmp_path / "X.zarr", **layout)
    store = RowStore(array)
    store.read(0, 100)  # what the set-up reads
    os.remove(tmp_path / "X.zarr" / "c" / "2" / "0")
    store.read(0, 200)  # rows of other blocks are still read
    with pytest.raises(RuntimeError, match=r"'c/2/0', rows 200 to 299, was stored when the "
                                           r"fit began and is missing now"):
        store.read(150, 250)
    with pytest.raises(RuntimeError, match=r"'c/2/0', rows 200 to 299"):
        store.take(np.array([7, 250]))


def test_a_rewritten_or_newly_written_zarr_chunk_is_an_error(tmp_path):
    array = _local(tmp_path / "X.zarr", chunks=(100, D))
    store = RowStore(array)
    time.sleep(0.01)  # (a new modification time even on a coarse clock)
    array[120:130] = 5.0
    with pytest.raises(RuntimeError, match=r"'c/1/0', rows 100 to 199, was rewritten"):
        store.read(100, 200)
    array[410] = 1.0  # into the chunk that held only fill values
    with pytest.raises(RuntimeError, match=r"'c/4/0', rows 400 to 499, was written since"):
        store.take(np.array([410]))


def test_a_deleted_chunk_of_a_zarr_array_in_memory_is_an_error():
    array = zarr.create_array(store={}, shape=(N, D), chunks=(100, D), dtype="f8",
                              fill_value=0.0)
    array[:] = _values()
    store = RowStore(array)
    store.read(0, N)
    del array.store._store_dict["c/9/0"]  # as a deletion by another writer
    with pytest.raises(RuntimeError, match=r"'c/9/0', rows 900 to 999, was stored"):
        store.read(800, N)


# ------------------------------------------------------------------ a failing Dask chunk


def _flaky_dask(broken):
    """X as a Dask array whose block 3 (rows 300 to 399) raises while ``broken["on"]``."""
    da = pytest.importorskip("dask.array")

    def read(block, block_info=None):
        if broken["on"] and block_info[0]["chunk-location"][0] == 3:
            raise OSError("block unreadable")
        return block

    return da.from_array(_values(), chunks=(100, D)).map_blocks(read, dtype=np.float64)


def _sum_rows(block):
    return block.X.sum(axis=0)


def _add(a, b):
    return a + b


def test_a_failing_dask_chunk_in_a_pass_is_an_error_naming_the_block():
    import dask

    broken = {"on": False}
    store = RowStore(_flaky_dask(broken), np.zeros(N))
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(store.fold(_sum_rows, _add), _values().sum(axis=0))
        broken["on"] = True
        with pytest.raises(OSError, match="block unreadable") as info:
            store.fold(_sum_rows, _add)
    assert "a pass over the 1000 rows" in str(info.value.__notes__)
    assert "block 3 of X: rows 300 to 399" in str(info.value.__notes__)


def test_a_failing_dask_chunk_in_a_chain_refill_is_an_error_naming_the_block():
    import dask

    from sksubsample.algorithms.glm import GLMTarget
    from sksubsample.algorithms.glm._row_stream import RowStream

    broken = {"on": False}
    y = (np.arange(N) % 2).astype(float)
    with dask.config.set(scheduler="threads"):
        stream = RowStream(GLMTarget(RowStore(_flaky_dask(broken), y), None, 1.0), None, [0],
                           64)
        stream._fetch(200)  # (rows of block 3 among them)
        broken["on"] = True
        with pytest.raises(OSError, match="block unreadable") as info:
            stream._fetch(200)
    stream.close()
    assert "200 rows gathered" in str(info.value.__notes__)
    assert "block 3 of X: rows 300 to 399" in str(info.value.__notes__)


def test_a_fit_whose_dask_chunk_fails_in_the_set_up_stops_with_the_block_named():
    import dask

    from sksubsample import BayesianLogisticRegressionMH

    y = (_values().sum(axis=1) > 0).astype(int)
    began = time.monotonic()
    with dask.config.set(scheduler="threads"), pytest.raises(OSError) as info:
        BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, n_chains=1).fit(
            _flaky_dask({"on": True}), y)
    assert "block 3 of X: rows 300 to 399" in str(info.value.__notes__)
    assert time.monotonic() - began < 60  # (an error, not a wait: the suite's budget)
