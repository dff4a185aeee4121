import fcntl
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# Statistical tests are seeded; keep BLAS single-threaded so two pytest workers share 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Plans of speed (the Taylor-proxy plan) follow fixed costs in the tests, not costs measured on
# the machine: a seeded test draws the same on every machine and in every order of the tests.
# tests/algorithms/test_glm_plan.py turns measuring on, with a store of each test's own.
os.environ["SKSUBSAMPLE_MEASURE_COSTS"] = "0"

# Scripts that tests run in processes of their own, not test modules (importing them would run
# them).
collect_ignore = ["_compile_sigint_child.py", "_interrupt_child.py", "_interrupt_child_models.py",
                  "_warm_kernels.py"]


def pytest_configure(config):
    """Before the workers of a whole-suite ``pytest -n K`` start, compile the large kernels in
    one process per group, side by side (``_warm_kernels.py``), each kernel once: the workers'
    first tests would otherwise compile the same kernels at the same time. A no-op in the
    workers, in a run of selected tests and without ``-n``; with the kernel cache present it
    only loads it."""
    workers = getattr(config.option, "numprocesses", None)
    if (hasattr(config, "workerinput") or not isinstance(workers, int) or workers < 2
            or config.args_source != pytest.Config.ArgsSource.TESTPATHS):
        return
    from ._warm_kernels import GROUPS

    script = Path(__file__).with_name("_warm_kernels.py")
    groups = list(GROUPS)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    runs = [subprocess.Popen([sys.executable, str(script), group], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for group in groups]
    for group, run in zip(groups, runs, strict=True):
        _, err = run.communicate()
        if run.returncode != 0:  # the tests that use these kernels will fail and say why
            print(f"compiling the kernels of {group!r} failed:\n{err[-2000:]}", file=sys.stderr)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: fixed per test, different across tests."""
    seed = np.frombuffer(request.node.nodeid.encode(), dtype=np.uint8).astype(np.uint64)
    return np.random.default_rng([int(s) for s in seed[-32:]])


@pytest.fixture
def cost_store(tmp_path, monkeypatch):
    """A store of measured costs of the test's own, measuring on: the path of its file."""
    from sksubsample.algorithms import _calibration

    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    monkeypatch.setattr(_calibration, "_MEMO", {})
    return tmp_path / _calibration.STORE_NAME


@pytest.fixture(scope="session")
def computed_once(tmp_path_factory, worker_id):
    """``computed_once(name, compute)``: ``compute()`` run once per test session, whichever
    worker of ``pytest -n`` asks first, its value pickled to a folder the workers share and
    read by the others. For a costly, seeded module fixture (a module's tests may run on both
    workers, and each would compute it again: up to a minute for the largest)."""
    base = tmp_path_factory.getbasetemp()
    # (under xdist each worker's base folder is in the session's, which is the workers' shared
    # one; without xdist the base folder is the session's own)
    shared = base.parent if worker_id != "master" else base

    def get(name, compute):
        path = shared / f"computed-once-{name}.pickle"
        with open(shared / f"computed-once-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # (the other worker waits, then reads)
            if path.exists():
                return pickle.loads(path.read_bytes())
            value = compute()
            path.write_bytes(pickle.dumps(value))
            return value

    return get
