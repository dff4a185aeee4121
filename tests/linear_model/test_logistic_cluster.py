"""Chains on a Dask cluster over data that stay on its workers, and a worker killed mid-fit."""

import os
import re
import threading
import time
import warnings

import numpy as np
import pytest

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.diagnostics import ConvergenceWarning

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")
distributed = pytest.importorskip("distributed")
joblib = pytest.importorskip("joblib")

# Chains long enough (about 1.5 s each on an idle core, longer on a worker that gathers its
# rows through the scheduler) to be killed in the middle.
SETTINGS = dict(n_draws=200_000, n_warmup=1000, n_chains=2, random_state=7)

@pytest.fixture(scope="module")
def zarr_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster")
    rng = np.random.default_rng(3)
    n, d = 40_000, 4
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ np.array([0.5, -0.3, 0.2, 0.1])))).astype(
        np.int8)
    zarr.create_array(store=str(path / "X.zarr"), data=X, chunks=(10_000, d))
    zarr.create_array(store=str(path / "y.zarr"), data=y, chunks=(10_000,))
    return str(path / "X.zarr"), str(path / "y.zarr")

def _arrays(zarr_data):
    return da.from_zarr(zarr_data[0]), da.from_zarr(zarr_data[1])

def _fit(X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return BayesianLogisticRegressionMH(**SETTINGS).fit(X, y)

@pytest.fixture(scope="module")
def reference(zarr_data):
    """The fit in this process, on Dask's threads."""
    with dask.config.set(scheduler="threads"):
        return _fit(*_arrays(zarr_data))

def _chain_keys(client):
    """The keys of the chains' tasks, in the order they were submitted."""
    keys = client.run_on_scheduler(lambda dask_scheduler: [str(k) for k in
                                                           dask_scheduler.tasks])
    return [k for k in keys if "mh_chain" in k]

def _fit_killing_a_worker(client, X, y):
    """Fit with the chains on the cluster; once a chain has run for a while, kill its worker.
    Returns the fit (or the error it raised), the killed chain's index and whether the
    scheduler saw the chain's worker die."""
    outcome = {}

    def run():
        try:
            with joblib.parallel_config(backend="dask"):
                outcome["fit"] = _fit(X, y)
        except Exception as exc:  # the test inspects it
            outcome["error"] = exc

    fitting = threading.Thread(target=run)
    fitting.start()
    victim = chain = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline:
        for worker, keys in client.processing().items():
            running = [str(k) for k in keys if "mh_chain-chain" in str(k)]
            if running:  # the task keys name the chains
                victim = worker
                chain = int(re.search(r"-chain(\d+)-", running[0]).group(1))
                break
        time.sleep(0.05)
    assert victim is not None, "no chain started on the cluster"
    time.sleep(0.3)  # the chain is running (it takes over a second)
    still = [str(k) for k in client.processing().get(victim, ())]
    assert any(f"-chain{chain}-" in k for k in still), "the chain finished before the kill"
    with pytest.raises(Exception):  # noqa: B017 - the worker dies before answering
        client.run(os._exit, 1, workers=[victim])
    fitting.join(timeout=300)
    assert not fitting.is_alive(), "the fit hung after the worker died"
    return outcome, chain

def test_chains_on_the_cluster_over_arrays_not_persisted_give_the_same_draws(zarr_data,
                                                                            reference):
    # Each chain, a task on a worker, gathers its rows by tasks that read the zarr chunks
    # (a task per worker thread, through the worker's client): the rows, hence the draws, of
    # the fit on Dask's threads.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster), joblib.parallel_config(backend="dask"):
        fit = _fit(*_arrays(zarr_data))
    np.testing.assert_array_equal(fit._draws, reference._draws)

def test_a_killed_workers_chain_runs_again_to_the_same_draws(zarr_data, reference):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        X, y = (a.persist() for a in _arrays(zarr_data))  # loaded by the workers
        distributed.wait([X, y])
        outcome, _ = _fit_killing_a_worker(client, X, y)
    assert "error" not in outcome, outcome.get("error")
    np.testing.assert_array_equal(outcome["fit"]._draws, reference._draws)

def test_a_chain_lost_for_good_is_named(zarr_data):
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        X, y = (a.persist() for a in _arrays(zarr_data))
        distributed.wait([X, y])
        outcome, chain = _fit_killing_a_worker(client, X, y)
    assert "fit" not in outcome  # no partial result
    error = outcome["error"]
    assert isinstance(error, RuntimeError)
    assert type(error.__cause__).__name__ == "KilledWorker"
    # The killed worker's chain, or one that was reading rows from it (its gathering task died
    # with the worker): the first chain in order that the scheduler gave up on.
    named = int(re.search(r"chain (\d+) was lost", str(error)).group(1))
    assert named == chain or named < chain
