"""Fits of ARCHOrderSelector or CorefGibbsClusterer to interrupt, run by tests/test_faults.py
in a process group of its own.

Arguments: ``estimator:backend:n_jobs`` for each estimator to run in turn, the estimator
"arch" or "coref" (one process for all: its start is most of the cost). Each fits once (the
previous fit, which also loads the kernels and starts the workers), then for each of its
moments prints the estimator's and the moment's name, starts a fit for the test to interrupt
and prints one JSON line of what it found after the interrupt; after an interrupt during the
draws, a second JSON line says whether ``sample_more`` continued them bit for bit.
"""

import json
import sys
import time
import warnings

import joblib
import numpy as np
from _processes import workers
from sklearn.datasets import make_blobs
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from sksubsample import ARCHOrderSelector, CorefGibbsClusterer
from sksubsample.datasets import simulate_arch


def run(estimator, backend, n_jobs):
    """Fit, then interrupt at each moment, one estimator on one joblib backend."""
    # One chain in one process: a second chain, run after the first, would have no draw when
    # the Ctrl-C comes, and the chains keep as many draws as each of them has.
    n_chains = 2 if n_jobs > 1 else 1

    if estimator == "arch":
        Estimator = ARCHOrderSelector
        X_old = simulate_arch(800, alpha=(0.2, 0.3), nu=6.0, random_state=0)
        X = simulate_arch(1000, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=1)
        settings = {"orders": (0, 1, 2), "n_chains": n_chains, "random_state": 4}
        small = {"n_warmup": 8, "n_draws": 20}
        # Warm-up (Wang-Landau) is the set-up of the sampling chains: interrupted, the estimator
        # is put back as it was.
        MOMENTS = {"setup": {"n_warmup": 10**7, "n_draws": 20},
                   "draws": {"n_warmup": 8, "n_draws": 10**6}}

        def summary(est):
            return [int(est.n_terms_), est.order_posterior_.tolist()]

        def draws(est):
            return est.sample_posterior(random_state=0)  # (a weighted resample of the draws)
    else:
        Estimator = CorefGibbsClusterer
        X_old = make_blobs(40, n_features=3, centers=3, random_state=0)[0]
        X = make_blobs(55, n_features=3, centers=4, random_state=1)[0]
        settings = {"n_chains": n_chains, "random_state": 3, "bandwidth": 2.0}
        small = {"n_sweeps": 3, "n_draws": 5}
        # The annealing runs in the chains: interrupted there, the new fit is kept with no draw.
        MOMENTS = {"setup": {"n_sweeps": 3, "n_draws": 5},
                   "draws": {"n_sweeps": 3, "n_draws": 10**6},
                   "warmup": {"n_sweeps": 10**5, "n_draws": 5}}

        def summary(est):
            return [int(est.n_features_in_), est.labels_.tolist()]

        def draws(est):
            return est.partition_samples_

        potentials = CorefGibbsClusterer._potentials

        def slow_potentials(self, X):
            time.sleep(60)
            return potentials(self, X)


    with joblib.parallel_config(backend=backend, n_jobs=n_jobs):
        est = Estimator(**small, **settings).fit(X_old)
        before = summary(est)
        for moment, params in MOMENTS.items():
            if estimator == "coref":
                Estimator._potentials = slow_potentials if moment == "setup" else potentials
            if moment == "draws":
                # Workers up (the set-up's Ctrl-C reached them too): the chains draw when it comes.
                Estimator(**small, **settings).fit(X_old)
            est.set_params(**params)
            print(estimator, moment, flush=True)
            began = time.perf_counter()
            try:
                est.fit(X)
                report = {"interrupted": False}
            except KeyboardInterrupt:
                report = {"interrupted": True, "seconds": time.perf_counter() - began}
            deadline = time.monotonic() + 5.0
            while workers() and backend == "loky" and n_jobs > 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            report["workers_left"] = workers() if backend == "loky" else []
            report["flag"] = getattr(est, "interrupted_", None)
            report["completed"] = getattr(est, "n_draws_completed_", None)
            try:
                check_is_fitted(est)
                report["restored"] = summary(est) == before
                report["fitted"] = "ok"
            except (AttributeError, NotFittedError) as exc:
                report["fitted"] = str(exc)
            print(json.dumps(report), flush=True)
            if moment == "draws" and report["interrupted"]:
                more = 7
                est.sample_more(more)
                whole = Estimator(**{**params, "n_draws": report["completed"] + more},
                                  **settings).fit(X)
                # (not n_evaluations_: it also counts the sweeps of draws a chain finished
                # beyond those every chain had, kept aside for sample_more)
                print(json.dumps({"continued_bit_for_bit": bool(
                    np.array_equal(draws(est), draws(whole))
                    and np.array_equal(est._draws, whole._draws))}), flush=True)
            if moment == "setup":
                # The next moments are fits of the new data, which the set-up never reached.
                before = None


warnings.simplefilter("ignore")  # (short chains: convergence warnings are expected)
for spec in sys.argv[1:]:
    name, backend, n_jobs = spec.split(":")
    run(name, backend, int(n_jobs))
