"""A memory map's file cut short during a fit: an error naming the file, not a dead process.

The window is the one a check before each read cannot close: the file is truncated right after
the check passed, so that the read itself meets the end of the file (see
``sksubsample.algorithms.stores._truncation``). The negative controls show that the same cut
kills a process whose reads are not watched.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sksubsample.algorithms.stores._truncation import watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="SIGBUS past the end of a mapped file is Linux's")

CHILD = Path(__file__).with_name("_truncated_map_child.py")
#: The child's import, set-up and chains (compiled kernels loaded from the cache or compiled).
CHILD_SECONDS = 600


def _guarded():
    watched = watch(np.zeros(1))
    if watched is None:
        return False
    watched.release()
    return True


def _child(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=CHILD_SECONDS)


def _read_past_the_end(folder, release):
    """A child that maps a file, watches it, truncates it and reads its last row."""
    path = str(folder / "x.npy")
    return _child(f"""
import mmap, os, numpy as np
from numpy.lib.array_utils import byte_bounds
from sksubsample.algorithms.stores._truncation import watch
np.save({path!r}, np.arange(100_000.0).reshape(-1, 10))
x = np.load({path!r}, mmap_mode="r")
watched = watch(x)
os.truncate({path!r}, 4096)
if {release}:
    watched.release()
last = x[-1].sum()
low = byte_bounds(x)[0]
page = watched.zeroed_from()
print(last, watched.faults(), (low + page) % mmap.PAGESIZE,
      page <= 9999 * 80 < page + mmap.PAGESIZE, flush=True)
""")


def test_a_watched_read_past_the_end_gives_zeros_and_counts_the_fault(tmp_path):
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    run = _read_past_the_end(tmp_path, release=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0.0", "1", "0", "True"]
    # Negative control: once released, the same read is handled as before, by the default
    # action, which kills the process.
    run = _read_past_the_end(tmp_path, release=True)
    assert run.returncode == -signal.SIGBUS, (run.returncode, run.stdout, run.stderr)


def test_rows_gathered_all_over_a_file_cut_short_fault_a_few_times_not_once_a_page(tmp_path):
    # Zeros are mapped from a fault's page to the end of the map: a page at a time would
    # split the map at every fault, up to the kernel's limit on maps (then a fault could not
    # be answered and would recur for ever).
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    path = str(tmp_path / "x.npy")
    run = _child(f"""
import os, numpy as np
from sksubsample.algorithms.stores._truncation import watch
np.save({path!r}, np.ones((2_000_000, 4)))
x = np.load({path!r}, mmap_mode="r")
watched = watch(x)
os.truncate({path!r}, 1 << 20)
rows = np.random.default_rng(0).permutation(x.shape[0])[:100_000]
total = x[rows].sum()
print(watched.faults(), int(total), flush=True)
""")
    assert run.returncode == 0, run.stderr
    faults, total = map(int, run.stdout.split())
    # The lowest row read so far falls below the zeros about log(100 000) times.
    assert 1 <= faults <= 40, faults
    assert total < 100_000 * 4  # rows past the end read as zeros


@pytest.mark.parametrize("released", [True, False])
def test_a_map_holding_zeros_is_refused_until_its_file_is_whole_again(tmp_path, released):
    # Released: the fit that met the cut ended. In force: a failed fit may still hold its
    # store (a notebook's last traceback) while the file is written again and fitted anew.
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    path = str(tmp_path / "x.npy")
    run = _child(f"""
import os, numpy as np
from sksubsample.algorithms.stores._rows import _memmap_location
from sksubsample.algorithms.stores._truncation import ZeroedMapError, watch
data = np.arange(100_000.0).reshape(-1, 10)
np.save({path!r}, data)
x = np.load({path!r}, mmap_mode="r")
watched = watch(x, location=_memmap_location(x))
os.truncate({path!r}, 4096)
assert x[-1].sum() == 0.0
if {released}:
    watched.release()  # the file still short: the zeros stay
try:
    watch(x, location=_memmap_location(x))
    print("accepted", flush=True)
except ZeroedMapError as exc:
    print("refused", flush=True)
np.save({path!r}, data)  # the file whole again (the same inode)
again = watch(x, location=_memmap_location(x))
print(again is not None, np.array_equal(x, data), flush=True)
""")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["refused", "True", "True"]


def test_a_sigbus_sent_to_the_process_is_not_swallowed():
    # A SIGBUS sent with kill does not fault again: passed on, it must be raised again.
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    run = _child("""
import os, signal, numpy as np
from sksubsample.algorithms.stores._truncation import watch
watched = watch(np.zeros(10))
os.kill(os.getpid(), signal.SIGBUS)
print("survived", flush=True)
""")
    assert run.returncode == -signal.SIGBUS, (run.returncode, run.stdout, run.stderr)


def test_a_released_watch_frees_its_slot_for_the_next():
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    values = np.zeros(1000)
    # (more watches, one after the other, than the table has slots)
    for _ in range(200):
        watched = watch(values)
        assert watched is not None and watched.faults() == 0
        watched.release()


@pytest.mark.parametrize("moment", ["setup", "chains"])
def test_a_file_cut_short_during_a_fit_is_an_error_naming_the_file(tmp_path, moment):
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    run = subprocess.run([sys.executable, str(CHILD), str(tmp_path), moment, "watched"],
                         capture_output=True, text=True, timeout=CHILD_SECONDS,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["error"] is not None, found
    assert found["error"]["type"] == "RuntimeError", found
    assert "X.npy" in found["error"]["message"], found
    assert "truncated" in found["error"]["message"], found
    # Negative control: the same cut, the reads not watched: the process dies.
    run = subprocess.run([sys.executable, str(CHILD), str(tmp_path), moment, "unwatched"],
                         capture_output=True, text=True, timeout=CHILD_SECONDS,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == -signal.SIGBUS, (run.returncode, run.stdout, run.stderr[-3000:])


def test_a_forked_child_does_not_inherit_the_parents_watches():
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    values = np.zeros(1000)
    watched = watch(values)
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: is any slot still taken?
            from sksubsample.algorithms.stores import _truncation

            os.write(write, b"1" if _truncation._STATE["table"][1:].any() else b"0")
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(read, 1) == b"0"
        assert watched.faults() == 0 and _guarded()
    finally:
        watched.release()


def test_predicting_from_a_file_cut_short_during_the_last_read_is_an_error(tmp_path,
                                                                            monkeypatch):
    # The last block's read meets the end of the file after its check: its rows would be
    # zeros, and no later read would see the change but the check after the blocks.
    if not _guarded():
        pytest.skip("faults cannot be handled on this system")
    import warnings

    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.algorithms.stores import _files

    rng = np.random.default_rng(0)
    n = 20_000
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + rng.logistic(size=n) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, random_state=0).fit(
            X[:2000], y[:2000])
    path = tmp_path / "X.npy"
    np.save(path, X)
    stored = np.load(path, mmap_mode="r")
    expected = est.decision_function(X)
    np.testing.assert_allclose(est.decision_function(stored), expected)  # unchanged: quiet
    check = _files.FileStamp.check

    def check_then_cut(self, rows, what="X"):
        check(self, rows, what)
        if rows.endswith(f"to {n - 1}"):  # the last block's check has passed
            os.truncate(self.path, 4096)

    monkeypatch.setattr(_files.FileStamp, "check", check_then_cut)
    # Negative control: without the check after the blocks, the answer comes back, its last
    # block's rows read as zeros.
    from sksubsample.algorithms.stores import RowStore

    with monkeypatch.context() as patched:
        patched.setattr(RowStore, "check_unchanged", lambda self: None)
        silent = est.decision_function(stored)
    assert not np.allclose(silent, expected)
    np.save(path, X)  # the file whole again
    stored = np.load(path, mmap_mode="r")
    with pytest.raises(RuntimeError, match=r"X\.npy.*truncated"):
        est.decision_function(stored)
