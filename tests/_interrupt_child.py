"""A fit to interrupt, run by tests/test_faults.py in a process group of its own.

Arguments: backend, n_jobs, moment ("setup", "warmup" or "draws"). It fits once (the previous
fit, which also compiles the kernels and starts the workers), prints ``fitting``, starts a
second fit for the test to interrupt, and prints one JSON line of what it found after the
interrupt; then, for an interrupt during the draws, whether ``sample_more`` continued them bit
for bit.
"""

import json
import sys
import time

import joblib
import numpy as np
from _processes import workers
from sklearn.exceptions import NotFittedError

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.linear_model import _logistic

backend, n_jobs, moment = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 3))
y = (X.sum(axis=1) + rng.logistic(size=2000) > 0).astype(int)
settings = {"n_chains": 2, "n_jobs": n_jobs, "random_state": 1, "test": "metropolis"}


with joblib.parallel_config(backend=backend):
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
    deadline = time.monotonic() + 5.0
    while workers() and time.monotonic() < deadline:
        time.sleep(0.1)
    report["workers_left"] = workers()
    report["classes"] = [int(c) for c in est.classes_]
    report["completed"] = getattr(est, "n_draws_completed_", None)
    # (no coef_ at all after chains interrupted before their first draw)
    report["same_coef_as_before"] = bool(np.array_equal(getattr(est, "coef_", None), old_coef))
    try:
        est.predict(X_new[:5])
        report["predict"] = "ok"
    except NotFittedError as exc:
        report["predict"] = str(exc)
    print(json.dumps(report), flush=True)
    if moment == "draws" and report["interrupted"]:
        more = 30
        est.sample_more(more)
        whole = BayesianLogisticRegressionMH(
            n_draws=report["completed"] + more, n_warmup=n_warmup, **settings).fit(X_new, y_new)
        print(json.dumps({"continued_bit_for_bit": bool(np.array_equal(
            est.sample_posterior(), whole.sample_posterior()))}), flush=True)
