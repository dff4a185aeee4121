"""The same workloads timed on two source trees of the package, side by side in one run.

A change of the package's insides (a refactoring, a new index law) must keep its speed. This
script times workloads written against the public API (so that both trees run the same code of
their callers) in fresh processes, alternating the trees round after round so that a slow
spell of a shared machine hits both, and prints each workload's best time on each tree and
their ratio (``new / old``; above 1 is slower).

Workloads (each timed after a first call that loads or compiles its kernels):

* ``racing``: draws of :func:`~sksubsample.algorithms.sample_discrete` by racing and exactly,
  on the §5.1 problem of Chen & Ghahramani (D = 10, N = 10⁵, σ = 10⁻⁴), on the README's
  Gaussian problem, and with compiled rewards (a :class:`~sksubsample.algorithms.CompiledRewards`
  logistic reward over 20 features);
* ``logistic``: the chain of the default ``BayesianLogisticRegressionMH`` at N = 10⁶ rows × 20
  features, timed alone by :meth:`sample_more` (no set-up), its whole fit (200 + 200 steps),
  and the chain on scikit-learn's breast-cancer data (569 rows, every row read at every step);
* ``arch``: a racing and an exact ``ARCHOrderSelector`` fit (orders 0-5, 5 000 returns);
* ``coref``: racing and exact ``CorefGibbsClusterer`` fits on heavy-tailed entity sizes (8
  features) and on sparse blocked potentials.

Run ``OMP_NUM_THREADS=1 python benchmarks/compare_trees.py OLD_TREE [NEW_TREE]`` (NEW_TREE
defaults to this checkout; a tree is a directory holding the ``sksubsample`` package, e.g. a
``git worktree add /tmp/old <commit>``). About ten minutes with the default three rounds.
Writes ``benchmarks/results/compare_trees.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

WORKLOADS = ("racing", "logistic", "arch", "coref")

_CHILD = r'''
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
workloads = sys.argv[1].split(",")
out = {}

def best(f, repeat=3):
    f()  # loads or compiles the kernels
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)

if "racing" in workloads:
    import numba
    from sksubsample.algorithms import CompiledRewards, sample_discrete
    from sksubsample.datasets import make_racing_problem
    problem = make_racing_problem(10, 100_000, "normal", 1e-4, random_state=0)
    rng = np.random.default_rng(0)
    data = rng.normal(size=100_000)
    means = np.linspace(-0.1, 0.1, 10)

    def readme_factors(states, idx):
        return -0.5 * (data[idx][None, :] - means[states][:, None]) ** 2

    X = rng.normal(size=(100_000, 20))
    y = np.where(rng.random(100_000) < 0.5, 1.0, -1.0)
    W = rng.normal(0.0, 0.05, size=(10, 20))

    @numba.njit
    def logistic_reward(data, arm, n):
        X, y, W = data
        z = 0.0
        for j in range(X.shape[1]):
            z += X[n, j] * W[arm, j]
        z *= y[n]
        return min(z, 0.0) - np.log1p(np.exp(-abs(z)))

    compiled = CompiledRewards(logistic_reward, (X, y, W))
    cases = {"section_5_1": (problem.factors, 100_000), "readme": (readme_factors, 100_000),
             "logistic_compiled": (compiled, 100_000)}
    for name, (factors, n) in cases.items():
        for method in ("racing", "exact"):
            def draws(factors=factors, n=n, method=method):
                for seed in range(20):
                    sample_discrete(factors, n, n_states=10, method=method, random_state=seed)
            out[f"racing/{name}/{method}"] = best(draws) / 20

if "logistic" in workloads:
    from sksubsample import BayesianLogisticRegressionMH
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1_000_000, 20))
    w = rng.normal(0.0, 0.5, size=20)
    y = (rng.random(1_000_000) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(int)
    clf = BayesianLogisticRegressionMH(n_draws=100, n_warmup=500, n_chains=1, n_jobs=1,
                                       random_state=0).fit(X, y)
    out["logistic/iteration"] = best(lambda: clf.sample_more(2000)) / 2000
    # Small data, where the test reads every row at every step (and so does the gradient).
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler
    Xb, yb = load_breast_cancer(return_X_y=True)
    small = BayesianLogisticRegressionMH(n_draws=100, n_warmup=500, n_chains=1, n_jobs=1,
                                         random_state=0).fit(StandardScaler().fit_transform(Xb),
                                                             yb)
    out["logistic/breast_cancer_iteration"] = best(lambda: small.sample_more(1000)) / 1000
    # The whole fit (set-up included) at N = 1e6.
    out["logistic/fit_1e6"] = best(lambda: BayesianLogisticRegressionMH(
        n_draws=200, n_warmup=200, n_chains=1, n_jobs=1, random_state=0).fit(X, y), repeat=2)

if "arch" in workloads:
    from sksubsample import ARCHOrderSelector
    from sksubsample.datasets import simulate_arch
    r = simulate_arch(5000, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=0)
    for method in ("racing", "exact"):
        out[f"arch/{method}"] = best(lambda method=method: ARCHOrderSelector(
            orders=range(0, 6), method=method, n_draws=400, n_warmup=200, n_chains=1,
            n_jobs=1, random_state=0).fit(r), repeat=2)

if "coref" in workloads:
    from scipy import sparse
    from sksubsample import CorefGibbsClusterer
    rng = np.random.default_rng(2)
    sizes = np.maximum(1, (400 / np.arange(1, 41) ** 0.79).astype(int))
    labels = np.repeat(np.arange(sizes.size), sizes)
    X = rng.normal(size=(sizes.size, 8))[labels] + 0.5 * rng.normal(size=(labels.size, 8))
    n = 4000
    zipf = np.minimum(rng.zipf(2.0, size=n), 200)
    ent = np.repeat(np.arange(n), zipf)[:n]
    rows, cols = [], []
    for k in range(n):
        partners = rng.integers(0, n, size=5)
        same = np.flatnonzero(ent == ent[k])[:10]
        rows += [k] * (partners.size + same.size)
        cols += list(partners) + list(same)
    rows, cols = np.array(rows), np.array(cols)
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    values = np.where(ent[rows] == ent[cols], rng.uniform(1, 6, rows.size),
                      rng.uniform(-6, -1, rows.size))
    S = sparse.coo_matrix((values, (rows, cols)), shape=(n, n)).tocsr()
    S = ((S + S.T) / 2).tocsr()
    S.sum_duplicates()
    for method in ("racing", "exact"):
        out[f"coref/heavy/{method}"] = best(lambda method=method: CorefGibbsClusterer(
            method=method, n_sweeps=20, random_state=0).fit(X), repeat=2)
        out[f"coref/sparse/{method}"] = best(lambda method=method: CorefGibbsClusterer(
            metric="precomputed", method=method, n_sweeps=20, random_state=0).fit(S),
            repeat=2)

print(json.dumps(out))
'''


def run_tree(tree, workloads):
    """Best times of the workloads in a fresh process importing the package of ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", _CHILD, ",".join(workloads)], env=env,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="the tree to compare against (holds sksubsample/)")
    parser.add_argument("new", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    best = {"old": {}, "new": {}}
    started = time.time()
    for round_ in range(args.rounds):
        order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
        for which in order:
            for key, value in run_tree(trees[which], args.workloads).items():
                best[which][key] = min(value, best[which].get(key, float("inf")))
            print(f"round {round_ + 1}: {which} done ({time.time() - started:.0f} s)",
                  flush=True)
    rows = []
    print(f"\n{'workload':38s} {'old (s)':>11s} {'new (s)':>11s} {'new/old':>8s}")
    for key in sorted(best["old"]):
        ratio = best["new"][key] / best["old"][key]
        rows.append({"workload": key, "old": best["old"][key], "new": best["new"][key],
                     "ratio": ratio})
        print(f"{key:38s} {best['old'][key]:11.4g} {best['new'][key]:11.4g} {ratio:8.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"trees": {k: str(v) for k, v in trees.items()}, "rounds": args.rounds,
              "rows": rows, "seconds": time.time() - started}
    (out / "compare_trees.json").write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
