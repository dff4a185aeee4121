"""The demo's breast-cancer fit for seeds 0-9: does every seed mix?

Fits ``make_pipeline(StandardScaler(), BayesianLogisticRegressionMH(prior_scale=1.0,
n_draws=1000, n_warmup=500, n_chains=4))`` exactly as ``python -m sksubsample.demo`` does, for
``random_state`` 0 to 9, and prints the minimum bulk ESS, the maximum R-hat, whether ``fit``
warned, and the time. The criterion is min ESS >= 400 and max R-hat <= 1.01 for every seed.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/demo_breast_cancer_seeds.py [--seeds 10]

Results: ``benchmarks/results/demo_breast_cancer_seeds.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from sklearn.datasets import load_breast_cancer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.diagnostics import ConvergenceWarning

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args(argv)
    data = load_breast_cancer()
    rows = []
    print(f"{'seed':>4}{'min ESS':>9}{'max R-hat':>11}{'warned':>8}{'seconds':>9}")
    for seed in range(args.seeds):
        pipe = make_pipeline(StandardScaler(), BayesianLogisticRegressionMH(
            prior_scale=1.0, n_draws=1000, n_warmup=500, n_chains=4, n_jobs=args.n_jobs,
            random_state=seed))
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            pipe.fit(data.data, data.target)
        seconds = time.perf_counter() - start
        clf = pipe[-1]
        warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
        rows.append({"seed": seed, "min_ess": float(clf.ess_.min()),
                     "max_rhat": float(clf.rhat_.max()), "warned": warned,
                     "seconds": seconds})
        print(f"{seed:>4}{clf.ess_.min():>9.0f}{clf.rhat_.max():>11.4f}{warned!s:>8}"
              f"{seconds:>9.1f}")
    ok = all(r["min_ess"] >= 400 and r["max_rhat"] <= 1.01 for r in rows)
    print(f"every seed: min ESS >= 400 and max R-hat <= 1.01: {ok}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "demo_breast_cancer_seeds.json"
    path.write_text(json.dumps({"rows": rows, "all_pass": ok}, indent=1))
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
