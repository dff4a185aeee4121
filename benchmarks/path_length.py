"""Min bulk ESS per second and per draw of ``BayesianLogisticRegressionMH()`` at its defaults.

Data: scikit-learn's breast cancer (569 × 30) and digits 3 vs 8 (357 × 64 pixels, constant
columns dropped: 54), standardized, and a synthetic N = 10⁵ × 20 set (standard-normal
features, N(0, 1) weights, logistic labels). One line of JSON per (data set, seed): fit wall
time, min bulk and tail ESS over the parameters (:func:`sksubsample.diagnostics`), their ratio
to the draws, the data terms read per unit of min bulk ESS (``data_terms_per_min_bulk_ess``:
at N = 10⁵ the bounded test's rows per effective draw), max R-hat, ConvergenceWarnings raised,
and the adapted path lengths when the fit reports them. On a machine shared with other work,
the CPU time of the process (``cpu_seconds``, ``min_bulk_ess_per_cpu_s``) and the data terms
evaluated are steadier than the wall time. Run the same script against another checkout with
its ``PYTHONPATH`` to compare (a first fit per data set, discarded, fills the kernel cache)::

    PYTHONPATH=. python benchmarks/path_length.py --seeds 0 1 2

``--adapt-preconditioner`` compares the ways warm-up can adapt the preconditioner (the chains
run in this process, so the choice reaches them)::

    for a in none diagonal dense auto; do PYTHONPATH=. python benchmarks/path_length.py \
        --seeds 0 1 2 --n-draws 1000 --adapt-preconditioner $a --label preconditioner-$a; done

Results: ``benchmarks/results/path_length.jsonl``, one line per run, by ``label``.
"""

import argparse
import json
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import StandardScaler

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.diagnostics import ConvergenceWarning, effective_sample_size, split_rhat


def datasets():
    X, y = load_breast_cancer(return_X_y=True)
    yield "breast_cancer", StandardScaler().fit_transform(X), y
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    X, y = X[keep], (y[keep] == 8).astype(int)
    X = X[:, X.std(axis=0) > 0]
    yield "digits_3v8", StandardScaler().fit_transform(X), y
    rng = np.random.default_rng(12345)
    X = rng.standard_normal((100_000, 20))
    w = rng.standard_normal(20)
    y = (rng.random(100_000) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(int)
    yield "synthetic_1e5x20", X, y


def measure(name, X, y, seed, options):
    clf = BayesianLogisticRegressionMH(random_state=seed, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        began, cpu = time.perf_counter(), time.process_time()
        clf.fit(X, y)
        seconds = time.perf_counter() - began
        cpu_seconds = time.process_time() - cpu
    draws = clf._flat_draws()
    bulk = effective_sample_size(draws, method="bulk")
    tail = effective_sample_size(draws, method="tail")
    n = draws.shape[0] * draws.shape[1]
    row = {"data": name, "seed": seed, "seconds": round(seconds, 3), "draws": n,
           "min_bulk_ess": round(float(bulk.min()), 1),
           "min_tail_ess": round(float(tail.min()), 1),
           "bulk_ess_per_draw": round(float(bulk.min()) / n, 3),
           "min_bulk_ess_per_s": round(float(bulk.min()) / seconds, 1),
           "cpu_seconds": round(cpu_seconds, 3),
           "min_bulk_ess_per_cpu_s": round(float(bulk.min()) / cpu_seconds, 1),
           "n_evaluations": int(clf.n_evaluations_),
           "data_terms_per_min_bulk_ess": round(clf.n_evaluations_ / float(bulk.min()), 1),
           "max_rhat": round(float(split_rhat(draws).max()), 4),
           "warnings": sum(issubclass(w.category, ConvergenceWarning) for w in caught),
           "step_size": [round(float(s), 3) for s in clf.step_size_]}
    for attr in ("path_length_", "convergence_"):
        value = getattr(clf, attr, None)
        if value is not None:
            row[attr] = (value if isinstance(value, dict)
                         else [round(float(v), 3) for v in np.ravel(value)])
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--n-draws", default=None, help='an int or "auto"')
    parser.add_argument("--label", default="")
    parser.add_argument("--adapt-preconditioner", choices=("auto", "diagonal", "dense", "none"),
                        help="how the chains adapt their preconditioner in warm-up (default: "
                             "the estimator's)")
    args = parser.parse_args()
    if args.adapt_preconditioner is not None:
        from sksubsample.linear_model import _mh_chains

        _mh_chains.ADAPT_PRECONDITIONER = (None if args.adapt_preconditioner == "none"
                                           else args.adapt_preconditioner)
    options = {}
    if args.n_draws is not None:
        options["n_draws"] = args.n_draws if args.n_draws == "auto" else int(args.n_draws)
    for name, X, y in datasets():
        measure(name, X, y, 999, {**options, "n_draws": 10, "n_warmup": 10})  # the cache
        for seed in args.seeds:
            row = measure(name, X, y, seed, options)
            row["label"] = args.label
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
