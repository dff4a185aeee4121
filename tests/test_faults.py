"""Faults during a fit: Ctrl-C at several moments, the fitting process killed.

Each case runs a fit in a child process of its own process group (as a terminal's foreground
job) and signals it as a terminal or a scheduler would; every wait has a time limit, so a hang
fails the test instead of stalling the suite.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="process groups and /proc")

CHILD = Path(__file__).with_name("_interrupt_child.py")
MODELS_CHILD = Path(__file__).with_name("_interrupt_child_models.py")
COMPILE_CHILD = Path(__file__).with_name("_compile_sigint_child.py")
#: The child's import, first fit and workers' start, on a loaded machine.
START_SECONDS = 300
#: What an interrupted or killed fit may take to give control back or exit.
STOP_SECONDS = 10


def _descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _left(pids, seconds):
    """Those of ``pids`` still alive after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def _read_line(proc, deadline):
    """The child's next line of output, failing the test at ``deadline``."""
    os.set_blocking(proc.stdout.fileno(), False)
    while time.monotonic() < deadline:
        if b"\n" in proc.pending:
            line, proc.pending = proc.pending.split(b"\n", 1)
            return line.decode()
        chunk = proc.stdout.read()
        if chunk:
            proc.pending += chunk
        elif proc.poll() is not None:
            break
        else:
            time.sleep(0.05)
    proc.errors.seek(0)
    pytest.fail(f"no line from the child in time (exit code {proc.poll()}); "
                f"stderr: {proc.errors.read()[-3000:]!r}")


def _start(tmp_path, *args, child=CHILD, **environ):
    env = dict(os.environ, PYTHONPATH=str(CHILD.parents[1]), **environ)
    errors = open(tmp_path / "stderr.txt", "w+")  # a file: a full pipe would block the child
    proc = subprocess.Popen([sys.executable, str(child), *args], stdout=subprocess.PIPE,
                            stderr=errors, env=env, start_new_session=True)
    proc.pending, proc.errors = b"", errors
    return proc


def _lines(proc, first, deadline):
    """Lines of the child until one starting with ``first``."""
    while True:
        line = _read_line(proc, deadline)
        if line.startswith(first):
            return line


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    proc.errors.close()


def _interrupt(proc):
    """Ctrl-C to the child's process group a second after its last line: the child's report
    and the processes it had then."""
    time.sleep(1.0)
    workers = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    sent = time.monotonic()
    report = json.loads(_lines(proc, "{", sent + STOP_SECONDS + 5))
    assert report["interrupted"]
    assert time.monotonic() - sent < STOP_SECONDS
    assert report.get("workers_left", []) == []  # (a Dask cluster's workers stay up)
    return report, workers


def _exits_leaving_nothing(proc, workers):
    proc.wait(timeout=STOP_SECONDS + 20)
    left = _left(workers, STOP_SECONDS)
    assert left == [], f"processes left behind: {left}"


@pytest.mark.parametrize(("backend", "n_jobs", "moment"), [
    ("loky", 1, "setup"),
    ("loky", 1, "draws"),
    ("loky", 2, "draws"),
    ("threading", 2, "warmup"),
])
def test_ctrl_c_keeps_the_draws_and_leaves_no_worker(tmp_path, backend, n_jobs, moment):
    proc = _start(tmp_path, backend, str(n_jobs), moment)
    try:
        _lines(proc, "setup" if moment == "setup" else "fitting",
               time.monotonic() + START_SECONDS)
        report, workers = _interrupt(proc)
        if moment == "setup":
            # Put back as it was: the previous fit whole, not the new classes with old draws.
            assert report["classes"] == [0, 1]
            assert report["same_coef_as_before"]
            assert report["predict"] == "ok"
        elif moment == "warmup":
            assert report["classes"] == [5, 7]
            assert report["completed"] == 0
            assert "interrupted" in report["predict"] and "sample_more" in report["predict"]
        else:
            assert report["classes"] == [5, 7]
            if report["completed"]:  # (none when Ctrl-C came before the chains' first draw)
                assert report["predict"] == "ok"
            continued = json.loads(_lines(proc, "{", time.monotonic() + START_SECONDS))
            assert continued["continued_bit_for_bit"]
        _exits_leaving_nothing(proc, workers)
    finally:
        _stop(proc)


def test_ctrl_c_on_a_local_dask_cluster_keeps_the_draws_and_leaves_no_process(tmp_path):
    """Chains on joblib's Dask backend, on a local cluster whose worker processes get the
    same Ctrl-C: the fit stops promptly with the draws its chains finished, the workers stay
    up for ``sample_more``, a cluster left without workers is an error naming a chain (not a
    wait for ever), and the child's exit leaves no process behind."""
    pytest.importorskip("distributed")
    proc = _start(tmp_path, "dask", "2", "draws")
    try:
        _lines(proc, "fitting", time.monotonic() + START_SECONDS)
        _lines(proc, "drawing", time.monotonic() + START_SECONDS)  # the chains are submitted
        report, workers = _interrupt(proc)
        assert report["classes"] == [5, 7]
        assert report["cluster_workers"] == 2, "the Ctrl-C killed the cluster's workers"
        assert report["completed"] > 0 and report["predict"] == "ok"
        continued = json.loads(_lines(proc, "{", time.monotonic() + START_SECONDS))
        assert continued["continued_bit_for_bit"]
        lost = json.loads(_lines(proc, "{", time.monotonic() + 60))
        assert "chain 0 cannot run" in lost["no_workers_error"]
        assert lost["seconds"] < STOP_SECONDS
        _exits_leaving_nothing(proc, workers)
    finally:
        _stop(proc)


def test_ctrl_c_reaches_dask_workers_that_cannot_read_the_stop_file(tmp_path):
    """Chains on Dask workers that neither get the Ctrl-C (only the dispatching process is
    signalled, as when the workers are on other machines) nor can open the file the chains
    report to: the request to stop reaches them through the run's Dask event, and the fit
    keeps the draws they finished (without it, the grace period ends and they are lost).
    ``sample_more`` continuing them is tested on the local cluster above."""
    pytest.importorskip("distributed")
    proc = _start(tmp_path, "dask-remote", "2", "draws")
    try:
        _lines(proc, "fitting", time.monotonic() + START_SECONDS)
        _lines(proc, "drawing", time.monotonic() + START_SECONDS)
        time.sleep(1.0)
        workers = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGINT)  # the dispatcher only
        sent = time.monotonic()
        report = json.loads(_lines(proc, "{", sent + STOP_SECONDS + 5))
        assert report["interrupted"] and time.monotonic() - sent < STOP_SECONDS
        assert report["cluster_workers"] == 2
        assert report["completed"] > 0 and report["predict"] == "ok"
        _exits_leaving_nothing(proc, workers)
    finally:
        _stop(proc)


#: The estimators the models' child runs in turn, each on a joblib backend, and the moments
#: of their fits it interrupts. ARCH's chain runs in the dispatching process (where a Ctrl-C
#: must stop compiled sweeps); the coreference chains in threads, two at once (finishing
#: different numbers of draws).
MODEL_RUNS = {"arch:loky:1": ("setup", "draws"), "coref:threading:2": ("setup", "draws",
                                                                      "warmup")}


@pytest.mark.parametrize("handler", ["default", "counting"])
def test_ctrl_c_while_numba_generates_machine_code_reaches_the_handler(tmp_path, handler):
    """Ctrl-C while a kernel's first compile, in the main thread, generates machine code (the
    handler then runs inside llvmlite's ctypes callback, which drops exceptions): Python's
    handler raises KeyboardInterrupt from the compile, a user's handler runs once, and the
    kernel compiles and runs when called again."""
    proc = _start(tmp_path, handler, child=COMPILE_CHILD,
                  NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    try:
        _lines(proc, "generating", time.monotonic() + START_SECONDS)
        os.killpg(proc.pid, signal.SIGINT)
        report = json.loads(_lines(proc, "{", time.monotonic() + START_SECONDS))
        assert report["waited"]
        assert report["interrupted"] == (handler == "default")
        assert report["handler_calls"] == (handler == "counting")
        assert math.isfinite(report["second_call"])
        assert proc.wait(timeout=STOP_SECONDS + 20) == 0
    finally:
        _stop(proc)


def test_ctrl_c_in_arch_and_coreference_fits(tmp_path):
    """One child for both estimators, interrupted at each moment in turn (its start is most
    of the cost)."""
    proc = _start(tmp_path, *MODEL_RUNS, child=MODELS_CHILD)
    try:
        workers = []
        for run, moments in MODEL_RUNS.items():
            for moment in moments:
                _lines(proc, f"{run.split(':')[0]} {moment}", time.monotonic() + START_SECONDS)
                report, seen = _interrupt(proc)
                workers += seen
                if moment == "setup":
                    # Put back as it was: the previous fit whole, not marked interrupted.
                    assert report["restored"] and report["fitted"] == "ok", (run, report)
                    assert report["flag"] is False
                elif moment == "warmup":
                    assert report["flag"] and report["completed"] == 0, (run, report)
                    assert "interrupted" in report["fitted"]
                    assert "sample_more" in report["fitted"]
                else:
                    assert report["flag"] and report["completed"] > 0, (run, report)
                    assert report["fitted"] == "ok"
                    continued = json.loads(_lines(proc, "{",
                                                  time.monotonic() + START_SECONDS))
                    assert continued["continued_bit_for_bit"], run
        _exits_leaving_nothing(proc, workers)
    finally:
        _stop(proc)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_killed_fit_leaves_no_loky_worker(tmp_path, signum):
    proc = _start(tmp_path, "loky", "2", "draws")
    try:
        _lines(proc, "fitting", time.monotonic() + START_SECONDS)
        time.sleep(1.0)
        workers = _descendants(proc.pid)
        assert workers, "the fit started no worker"
        proc.send_signal(signum)  # the fitting process only, as a scheduler or OOM killer
        proc.wait(timeout=STOP_SECONDS)
        left = _left(workers, STOP_SECONDS)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert left == [], f"workers orphaned by {signal.Signals(signum).name}: {left}"
    finally:
        _stop(proc)


# ------------------------------------------------------------------ stores that change


def _stored_fit_target(path, n=3000, d=4):
    import numpy as np

    from sksubsample.algorithms.stores import RowStore

    rng = np.random.default_rng(0)
    np.save(path, rng.normal(size=(n, d)))
    return RowStore(np.load(path, mmap_mode="r"), rng.integers(0, 2, n).astype(float))


@pytest.mark.parametrize("change", ["truncate", "overwrite", "replace"])
def test_a_changed_memory_map_is_an_error_naming_the_file_and_rows(tmp_path, change):
    import numpy as np

    path = tmp_path / "X.npy"
    store = _stored_fit_target(path)
    store.read(0, 100)  # what the set-up reads
    if change == "truncate":
        os.truncate(path, os.path.getsize(path) // 2)  # reading past the end: SIGBUS
    elif change == "overwrite":
        time.sleep(0.01)  # (a new modification time even on a coarse clock)
        np.save(path, np.zeros((3000, 4)))  # in place, same size
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    else:
        np.save(tmp_path / "other.npy", np.zeros((3000, 4)))
        os.replace(tmp_path / "other.npy", path)
    with pytest.raises(RuntimeError, match=r"X\.npy.*rows 0 to 99"):
        store.read(0, 100)
    with pytest.raises(RuntimeError, match=r"X\.npy.*3 rows from row 5 to row 7"):
        store.take(np.array([7, 5, 6]))


def test_nan_rows_written_during_the_chains_are_an_error_naming_the_row(tmp_path):
    import numpy as np

    from sksubsample.algorithms.glm import GLMTarget
    from sksubsample.algorithms.glm._row_stream import RowStream

    path = tmp_path / "X.npy"
    store = _stored_fit_target(path)
    target = GLMTarget(store, None, 1.0)
    stream = RowStream(target, None, [0], 64)
    stream._fetch(32)
    stamp = os.stat(path)
    writer = np.load(path, mmap_mode="r+")
    writer[:] = np.nan
    writer.flush()
    del writer
    # A writer through a shared mapping may leave the file's stamp as it was.
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with pytest.raises(ValueError, match=r"NaN or infinity .* at row \d+"):
        stream._fetch(32)
    stream.close()


def test_a_nan_written_into_x_in_memory_while_the_chains_run_is_an_error(tmp_path):
    # X in memory is read where it is: a value written into it after the set-up read every
    # row finite reaches the chains. The fit (and sample_more) raise naming the row, store no
    # draws, and the same fit of unchanged rows is quiet (the negative control).
    import warnings

    import numpy as np

    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.diagnostics import ConvergenceWarning

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 3))
    y = (X[:, 0] + rng.normal(size=3000) > 0).astype(int)
    spoil = {"row": None}

    class Spoiled(BayesianLogisticRegressionMH):
        def _sample(self, *args, **kwargs):  # after the set-up, before the chains
            if spoil["row"] is not None:
                X[spoil["row"], 1] = np.nan
            return super()._sample(*args, **kwargs)

    options = dict(n_draws=60, n_warmup=60, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clean = Spoiled(**options).fit(X, y)
        assert clean.n_draws_ == 60
        spoil["row"] = 1717
        with pytest.raises(ValueError, match=r"changed during the fit.*row 1717, column 1"):
            Spoiled(**options).fit(X, y)
        X[1717, 1] = 0.5
        X[2024, 0] = np.inf
        with pytest.raises(ValueError, match=r"changed during the fit.*row 2024, column 0"):
            clean.sample_more(10)
    assert clean.n_draws_ == 60


def test_more_parameters_than_rows_warns_of_the_cost_before_any_work(monkeypatch):
    import numpy as np

    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.algorithms.glm import GLMTarget
    from sksubsample.diagnostics import CostWarning

    def no_work(self, *args, **kwargs):
        raise RuntimeError("set-up reached")

    monkeypatch.setattr(GLMTarget, "set_up", no_work)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 1200)), rng.integers(0, 2, 50)
    with pytest.warns(CostWarning, match="1201 parameters for 50 rows") as record:
        with pytest.raises(RuntimeError, match="set-up reached"):
            BayesianLogisticRegressionMH().fit(X, y)
    assert record[0].filename == __file__


# ------------------------------------------------------------------ a pass stopped by Ctrl-C


def test_ctrl_c_during_a_pass_waits_for_no_unit_under_way(monkeypatch):
    """A pass over a store stopped by Ctrl-C gives control back at once: the units queued are
    never mapped, and those under way (a kernel's first compile, say) are not waited for. (A
    child compiling its kernels from an empty cache would take tens of seconds on a loaded
    machine, and where its Ctrl-C lands varies from run to run: units that sleep stand for the
    compile.)"""
    import functools
    import threading

    import numpy as np

    from sksubsample.algorithms.stores import RowStore, _rows

    rows = 16384  # a unit of 3 columns (its compute block's rows)
    monkeypatch.setattr(_rows, "_READ_BYTES", (8 * 3 * rows, 8 * 3 * rows))
    X = np.random.default_rng(0).normal(size=(8 * rows, 3))
    store = RowStore(X, None)

    def column_sums(unit):
        return unit.X.sum(axis=0)

    # The units' summaries are combined in row order, whichever thread mapped them.
    expected = functools.reduce(np.add, [column_sums(u) for u in store.units(check=False)])
    assert np.array_equal(store.fold(column_sums, np.add), expected)

    started = []

    def slow(unit):
        started.append(unit.start)
        time.sleep(2.0)
        return 1

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    ctrl_c = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        began = time.monotonic()
        ctrl_c.start()
        with pytest.raises(KeyboardInterrupt):
            store.fold(slow, np.add)
        took = time.monotonic() - began
        ctrl_c.join()
    finally:
        ctrl_c.cancel()
        signal.signal(signal.SIGINT, previous)
    # Ctrl-C came 0.3 s in; the units under way sleep till 2 s, those queued till 4 s or more.
    assert took < 1.5, took
    running = len(started)
    time.sleep(2.5)  # the units under way end; none queued starts after them
    assert len(started) == running <= _rows._WORKERS
