"""A fit to interrupt, run by tests/test_faults.py in a process group of its own.

Arguments: backend ("loky", "threading" or "dask": joblib's Dask backend on a local cluster of
two worker processes, started here as a user's script would; "dask-remote": the same, its
workers unable to open the file the chains report to, as on another machine), n_jobs, moment
("setup", "warmup" or "draws"). It fits once (the previous fit, which also compiles the kernels and
starts the workers), prints ``fitting``, starts a second fit for the test to interrupt (on Dask
also printing ``drawing`` as its chains are submitted), and prints one JSON line of what it
found after the interrupt; then, for an interrupt during the draws, whether ``sample_more``
continued them bit for bit; on Dask, last, whether ``sample_more`` on a cluster left without
workers is an error naming a chain.
"""

import contextlib
import json
import os
import sys
import time

import joblib
import numpy as np
from _processes import workers
from sklearn.exceptions import NotFittedError

from sksubsample import BayesianLogisticRegressionMH, _dask_chains, _progress
from sksubsample._interrupt import defer_sigint
from sksubsample.linear_model import _logistic


def _on(backend, stack):
    """Enter joblib's ``backend`` on ``stack``; the Dask client where it is "dask"."""
    if not backend.startswith("dask"):
        stack.enter_context(joblib.parallel_config(backend=backend))
        return None
    import distributed

    if backend == "dask-remote":
        made = _progress.ProgressCounts.__init__

        def unreachable(self, *args):
            # The dispatcher keeps its mapping; the workers, like a remote machine's, cannot
            # open the file by its path.
            made(self, *args)
            os.remove(self.path)

        _progress.ProgressCounts.__init__ = unreachable

    cluster = stack.enter_context(distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None))
    client = stack.enter_context(distributed.Client(cluster))
    stack.enter_context(joblib.parallel_backend("dask"))
    on_workers = _dask_chains._on_workers

    def deferring(client, fn, *args):
        on_workers(client, fn, *args)
        if fn is defer_sigint:  # the workers defer Ctrl-C, the chains come next
            print("drawing", flush=True)

    _dask_chains._on_workers = deferring
    return client


def _without_workers(client, est):
    """``sample_more`` on the cluster once its workers are gone: the error and its time."""
    client.cluster.scale(0)
    deadline = time.monotonic() + 30
    while client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.1)
    _dask_chains.NO_WORKERS_SECONDS = 1.0
    began = time.perf_counter()
    try:
        est.sample_more(10)
        return {"no_workers_error": None}
    except RuntimeError as exc:
        return {"no_workers_error": str(exc), "seconds": time.perf_counter() - began}


def main(backend, n_jobs, moment):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = (X.sum(axis=1) + rng.logistic(size=2000) > 0).astype(int)
    settings = {"n_chains": 2, "n_jobs": n_jobs, "random_state": 1, "test": "metropolis"}

    with contextlib.ExitStack() as stack:
        client = _on(backend, stack)
        est = BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, **settings).fit(X, y)
        old_coef = est.coef_.copy()
        X_new, y_new = X[:1500], np.where(y[:1500] == 1, 5, 7)  # other classes_, to see a mix
        if moment == "setup":
            plan = _logistic.BayesianLogisticRegressionMH._plan

            def slow_plan(self, proxy):
                print("setup", flush=True)
                time.sleep(60)
                return plan(self, proxy)

            _logistic.BayesianLogisticRegressionMH._plan = slow_plan
            n_warmup, n_draws = 20, 20
        elif moment == "warmup":
            n_warmup, n_draws = 10**7, 10
        else:
            n_warmup, n_draws = 20, 10**7
        est.set_params(n_warmup=n_warmup, n_draws=n_draws)
        print("fitting", flush=True)
        began = time.perf_counter()
        try:
            est.fit(X_new, y_new)
            report = {"interrupted": False}
        except KeyboardInterrupt:
            report = {"interrupted": True, "seconds": time.perf_counter() - began}
        if client is None:
            deadline = time.monotonic() + 5.0
            while workers() and time.monotonic() < deadline:
                time.sleep(0.1)
            report["workers_left"] = workers()
        else:  # the cluster's workers outlive the Ctrl-C, as loky's workers do not
            report["cluster_workers"] = len(client.scheduler_info()["workers"])
        report["classes"] = [int(c) for c in est.classes_]
        report["completed"] = getattr(est, "n_draws_completed_", None)
        # (no coef_ at all after chains interrupted before their first draw)
        report["same_coef_as_before"] = bool(np.array_equal(getattr(est, "coef_", None),
                                                            old_coef))
        try:
            est.predict(X_new[:5])
            report["predict"] = "ok"
        except NotFittedError as exc:
            report["predict"] = str(exc)
        print(json.dumps(report), flush=True)
        if moment == "draws" and report["interrupted"] and backend != "dask-remote":
            more = 30
            est.sample_more(more)
            whole = BayesianLogisticRegressionMH(
                n_draws=report["completed"] + more, n_warmup=n_warmup, **settings).fit(X_new,
                                                                                       y_new)
            print(json.dumps({"continued_bit_for_bit": bool(np.array_equal(
                est.sample_posterior(), whole.sample_posterior()))}), flush=True)
            if backend == "dask":
                print(json.dumps(_without_workers(client, est)), flush=True)


if __name__ == "__main__":  # (a guard: Dask's worker processes import this module again)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
