"""A chain's stream of stored rows: its draws do not depend on when or how they are fetched."""

import copy
import pickle
import time

import numpy as np
import pytest

from sksubsample.algorithms import GLMTarget
from sksubsample.algorithms.glm import _row_stream
from sksubsample.algorithms.glm._row_stream import RowStream, start_ahead
from sksubsample.algorithms.glm._stream_seeds import next_stream_seed, stream_seed
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
    # or from the 32 rows that hold twice the 11.5 expected)
    assert [w.size for w in written] == {"memmap": [4, 8, 16, 32, 64, 64], "dask": [64] * 6,
                                         "dask_expected": [32, 64, 64, 64, 64, 64]}[kind]


def _refilled_ids(stream, refills=4):
    ids = []
    for _ in range(refills):
        filled = stream.refill(stream.filled)
        ids.append(stream.ids[:filled].copy())
    return np.concatenate(ids)


@pytest.mark.parametrize("kind", ["memmap", "dask"])
def test_a_stream_started_ahead_gives_the_rows_it_would_have_gathered(stored, kind,
                                                                      monkeypatch):
    # The first stretches drawn before their streams are made (for chains still to run) are
    # gathered together, in one read, and adopted by the streams of their seeds: every
    # refill is what the stream would have gathered itself.
    memmap, X, signs = stored
    values = memmap if kind == "memmap" else da.from_array(X, chunks=(1_000, 3))
    target = GLMTarget(RowStore(values, signs), None, 1.0)
    seeds = [np.random.SeedSequence(9), np.random.SeedSequence(9, spawn_key=(1,))]
    with dask.config.set(scheduler="threads"):
        alone = []
        for seed in seeds:
            with RowStream(target, None, copy.deepcopy(seed), 64, 10.0) as stream:
                alone.append(_refilled_ids(stream))
        reads = []
        take = RowStore.take
        monkeypatch.setattr(RowStore, "take", lambda store, rows: reads.append(rows.size)
                            or take(store, rows))
        starts = [start_ahead(target, None, copy.deepcopy(seed), 64, 10.0) for seed in seeds]
        starts[1].launch()  # (the store's starts not yet launched, together)
        assert id(target.store) not in _row_stream._UNLAUNCHED
        first = 4 if kind == "memmap" else 32
        assert [s.pending.result()[0].size for s in starts] == [first] * 2
        assert reads == [2 * first]
        for seed, start, rows in zip(seeds, starts, alone, strict=True):
            pending, rng = start.pending, start.rng
            with RowStream(target, None, copy.deepcopy(seed), 64, 10.0) as stream:
                assert stream._pending is pending and stream.rng is rng
                # (the stretch is the stream's: the start holds it no longer)
                assert start.key not in _row_stream._STARTED and start.pending is None
                np.testing.assert_array_equal(_refilled_ids(stream), rows)
                np.testing.assert_array_equal(stream.X[:stream.filled],
                                              X[stream.ids[:stream.filled]])
            start.close()
    assert reads[1:] and reads[0] == 2 * first  # (the refills read on their own)


def test_a_start_no_stream_adopts_is_let_go(stored):
    # Closed unlaunched and unadopted, a start leaves the starts and is never gathered; a
    # stream of its seed made later gathers its rows itself, the same rows. A stream of
    # another seed, or of another buffer, adopts nothing; a stream that adopts a start not
    # yet launched launches it.
    memmap, _, signs = stored
    target = GLMTarget(RowStore(memmap, signs), None, 1.0)
    start = start_ahead(target, None, np.random.SeedSequence(9), 64)
    for seed, slots in ((np.random.SeedSequence(8), 64), (np.random.SeedSequence(9), 128)):
        with RowStream(target, None, seed, slots) as other:
            assert other._pending is None
    assert start.key in _row_stream._STARTED
    start.close()
    assert start.key not in _row_stream._STARTED and start.pending.cancelled()
    assert start not in _row_stream._UNLAUNCHED.get(id(target.store), [])
    with RowStream(target, None, np.random.SeedSequence(9), 64) as stream:
        assert stream._pending is None
        np.testing.assert_array_equal(_refilled_ids(stream, 1), start.rows)
    start = start_ahead(target, None, np.random.SeedSequence(9), 64)
    pending = start.pending
    with RowStream(target, None, np.random.SeedSequence(9), 64) as stream:
        assert stream._pending is pending and not _row_stream._UNLAUNCHED
        np.testing.assert_array_equal(_refilled_ids(stream, 1), start.rows)
    # A start made again for the same stream replaces the first, which is never gathered.
    first = start_ahead(target, None, np.random.SeedSequence(9), 64)
    again = start_ahead(target, None, np.random.SeedSequence(9), 64)
    assert first.pending.cancelled() and _row_stream._UNLAUNCHED[id(target.store)] == [again]
    again.close()
    assert not _row_stream._STARTED and not _row_stream._UNLAUNCHED


def test_a_bad_row_fails_only_the_start_that_drew_it(stored):
    # Starts gathered together are checked each on its own rows: a row written over with NaN
    # after the set-up fails the stream that drew it, with its row, not the others.
    _, X, signs = stored
    values = X.copy()
    target = GLMTarget(RowStore(values, signs), None, 1.0)
    starts = [start_ahead(target, None, np.random.SeedSequence(s), 64) for s in (1, 2)]
    bad = int(np.setdiff1d(starts[1].rows, starts[0].rows)[0])
    values[bad, 1] = np.nan
    starts[0].launch()
    np.testing.assert_array_equal(starts[0].pending.result()[1], X[starts[0].rows])
    with pytest.raises(ValueError, match=f"row {bad}"):
        starts[1].pending.result()
    for start in starts:
        start.close()


def test_a_stream_s_seed_is_known_before_the_chain_runs():
    # The stream's seed is the next child of the chain's seed sequence: known ahead without
    # changing anything, spawned by the chain without a draw of its generator; the next run
    # of the chain (a later round of draws) gets the next child.
    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[1])
    untouched = copy.deepcopy(rng)
    ahead = next_stream_seed(rng)
    assert next_stream_seed(rng).spawn_key == ahead.spawn_key == (1, 0)
    seed = stream_seed(rng)
    assert (seed.entropy, seed.spawn_key) == (ahead.entropy, ahead.spawn_key)
    assert next_stream_seed(rng).spawn_key == (1, 1)
    np.testing.assert_array_equal(rng.integers(0, 2**62, 4), untouched.integers(0, 2**62, 4))
    # (a generator copied or pickled keeps its seed sequence: a chain's is, on each run)
    for moved in (copy.deepcopy(rng), pickle.loads(pickle.dumps(rng))):
        assert next_stream_seed(moved).spawn_key == (1, 1)
        assert next_stream_seed(moved).entropy == ahead.entropy
    legacy = np.random.Generator(np.random.RandomState(5)._bit_generator)  # (no seed sequence)
    assert next_stream_seed(legacy) is None
    assert isinstance(stream_seed(legacy), np.random.SeedSequence)


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


def test_a_start_adopted_before_its_gather_runs_is_gathered(stored, monkeypatch):
    # A chain may adopt its start as soon as it is launched, before the background gather has
    # begun: the gather still hands the stream its rows (it never reads the start again).
    import threading

    memmap, _, signs = stored
    target = GLMTarget(RowStore(memmap, signs), None, 1.0)
    began = threading.Event()
    take = RowStore.take

    def slow(store, rows):
        began.wait(5.0)
        return take(store, rows)

    monkeypatch.setattr(RowStore, "take", slow)
    start = start_ahead(target, None, np.random.SeedSequence(3), 64)
    start.launch()
    with RowStream(target, None, np.random.SeedSequence(3), 64) as stream:
        assert start.pending is None  # (adopted while the gather waits)
        began.set()
        rows = stream._pending.result(timeout=10.0)[0]
        np.testing.assert_array_equal(rows, start.rows)


def test_a_chain_that_ends_normally_leaves_no_gather_reading_the_store(stored, monkeypatch):
    # The stretch a stream gathers ahead is waited for when its chain ends normally, so that
    # no thread reads a memory map once the fit has returned (its file rewritten then had
    # killed the process with SIGBUS in that thread); a chain stopped by an error lets it go
    # (the negative control: the gather is still running when the stream is left).
    memmap, _, signs = stored
    target = GLMTarget(RowStore(memmap, signs), None, 1.0)
    running, fetched = [], _row_stream._fetched

    def slow(*args):
        running.append(True)
        try:
            time.sleep(0.3)
            return fetched(*args)
        finally:
            running.pop()

    monkeypatch.setattr(_row_stream, "_fetched", slow)
    with RowStream(target, None, [5], 64) as stream:
        stream.refill(stream.filled)
        assert stream._pending is not None  # (the next stretch, being gathered ahead)
    assert not running
    with pytest.raises(RuntimeError, match="stopped"):
        with RowStream(target, None, [6], 64) as stream:
            stream.refill(stream.filled)
            raise RuntimeError("stopped")
    assert running
    deadline = time.monotonic() + 10.0
    while running and time.monotonic() < deadline:  # (let the gather end before tmp_path goes)
        time.sleep(0.05)
