"""A chain's stream of stored rows: its draws do not depend on when or how they are fetched."""

import copy

import numpy as np
import pytest

from sksubsample.algorithms import GLMTarget
from sksubsample.algorithms.glm._row_stream import RowStream
from sksubsample.algorithms.stores import RowStore

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


@pytest.fixture
def stored(tmp_path):
    rng = np.random.default_rng(4)
    n, d = 5_000, 3
    X = rng.normal(size=(n, d)).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    signs = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return np.load(tmp_path / "X.npy", mmap_mode="r"), X, signs


@pytest.mark.parametrize("kind", ["memmap", "dask", "dask_expected"])
def test_refills_write_the_stream_s_draws_in_order_and_fetch_ahead_once_worth_it(stored,
                                                                                 kind):
    # Each refill writes the stream's next rows, drawn in order from its own generator,
    # whichever stretches fetch them (a memory map's double from a sixteenth of the buffer and
    # are fetched ahead from the first refill; a Dask array's fill the buffer and are fetched
    # ahead from the second refill on, since a round of tasks that the chain never reads
    # costs the machine it shares with the cluster; given the rows the chain is expected to
    # read, a Dask array's first stretch is those rows up to a power of two, then doubles).
    memmap, X, signs = stored
    values = memmap if kind == "memmap" else da.from_array(X, chunks=(1_000, 3))
    target = GLMTarget(RowStore(values, signs), None, 1.0)
    written, pending = [], []
    expected = 11.5 if kind == "dask_expected" else None
    with dask.config.set(scheduler="threads"), \
            RowStream(target, None, [5], 64, expected) as stream:
        generator = copy.deepcopy(stream.rng)
        for _ in range(6):
            filled = stream.refill(stream.filled)
            written.append(stream.ids[:filled].copy())
            np.testing.assert_array_equal(stream.X[:filled], X[stream.ids[:filled]])
            np.testing.assert_array_equal(stream.signs[:filled], signs[stream.ids[:filled]])
            pending.append(stream._pending is not None)
    rows = np.concatenate(written)
    np.testing.assert_array_equal(rows, generator.integers(0, X.shape[0], size=rows.size))
    assert pending == ([True] * 6 if kind == "memmap" else [False] + [True] * 5)
    # (a memory map's stretches: 4, 8, ..., 64 rows; a Dask array's: the 64 slots each time,
    # or from the 16 rows that hold the 11.5 expected)
    assert [w.size for w in written] == {"memmap": [4, 8, 16, 32, 64, 64], "dask": [64] * 6,
                                         "dask_expected": [16, 32, 64, 64, 64, 64]}[kind]


def test_a_chain_s_expected_rows_are_the_plan_s():
    # Warm-up steps at the plan's warm-up rows, draws at its rows per step, both less the
    # exact stratum; unknown without a plan or without the chain's length.
    from types import SimpleNamespace

    from sksubsample.algorithms.glm._buffered import expected_rows

    kernel = SimpleNamespace(control_variates=True,
                             test=SimpleNamespace(compiled_law=("bounded_barker", 1.0)))
    plan = SimpleNamespace(warmup_rows_per_step=45.5, rows_per_step=4.5)
    expansion = SimpleNamespace(plan=plan, planned_terms=4.5,
                                strata=SimpleNamespace(exact=np.arange(2)))
    assert expected_rows(kernel, expansion, (500, 1500)) == 500 * 43.5 + 1500 * 2.5
    assert expected_rows(kernel, expansion, None) is None
    assert expected_rows(kernel, SimpleNamespace(plan=None), (500, 1500)) is None


def test_the_chain_s_steps_reach_only_a_target_that_takes_them():
    # A compiled_chain written before the steps were passed takes three arguments.
    from sksubsample.algorithms.mh._step import _steps_for

    def old(kernel, rng, resources):
        pass

    def new(kernel, rng, resources, steps=None):
        pass

    def keywords(kernel, rng, resources, **options):
        pass

    assert _steps_for(old, (5, 7)) == {}
    assert _steps_for(new, (5, 7)) == _steps_for(keywords, (5, 7)) == {"steps": (5, 7)}
    assert _steps_for(new, None) == {}
