"""The default test against the exact Metropolis test, fit for fit, where N is small.

The default ``BayesianLogisticRegressionMH`` (the bounded Barker test with planned Taylor
control variates, ``gradient="auto"``, ``n_draws="auto"``) should never cost more than the same
fit with ``test="metropolis"`` (every step reads all N rows; full-data gradients): where a
minibatch cannot repay the proxies' overhead, the bounded test's minibatch is all N and it
makes the exact decision. For each cell of N ∈ {10⁴, 10⁵} (``--n``), d = 20, a dense or a
sparse (CSR, entries kept with probability 0.25) design, and labels far from separable
(``logistic_grid.make_data``) or nearly separable (1 % on the wrong side of the true
hyperplane, ``small_data.make_separable``; sparse: the same construction on the sparse design),
and two kinds nobody tuned the plan on: rare events (``--kinds rare``: the true logit ``x_0 -
5``, about 1 % positives, whose intercept's posterior is far from the Laplace approximation at
small N) and a wide sparse design (``--kinds wide``: d = 200, 2 % of the entries kept, whatever
``--layouts``), each seed fits both ways in turn in one process (a first, untimed fit of each
compiles the kernels and lets the default measure its costs), everything else at the defaults,
and records the process CPU time of the whole fit (the machine is shared: CPU time is steadier
than wall time), the smallest bulk ESS, CPU seconds per effective draw, data rows read per
effective draw (``n_evaluations_ / min ESS``) and the warnings. The ratio to read: default /
metropolis of CPU seconds per effective draw (goal at most 1.1), and of whole-fit CPU time.

Run ``OMP_NUM_THREADS=1 python benchmarks/plan_vs_exact.py [--n 10000] [--seeds 0 1]``;
writes ``benchmarks/results/plan_vs_exact.json`` (cells merged into what is there; ``--out``
for another file, e.g. to run the script against an older tree on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from logistic_grid import DENSITY, make_data
from scipy import sparse
from small_data import SEPARABLE_NORM, make_separable

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.diagnostics import ConvergenceWarning

RESULTS = Path(__file__).resolve().parent / "results"
OUT = RESULTS / "plan_vs_exact.json"
D = 20
METHODS = {"default": {}, "metropolis": {"test": "metropolis"}}


def make_sparse_separable(n, d, seed=0):
    """``small_data.make_separable`` on a sparse design (entries kept with probability
    :data:`logistic_grid.DENSITY`; the weights' norm scaled by 1/√DENSITY so that the logit
    has the dense set's spread)."""
    rng = np.random.default_rng(seed)
    X = sparse.csr_matrix(rng.standard_normal((n, d)) * (rng.random((n, d)) < DENSITY))
    u = rng.standard_normal(d)
    logit = X @ (SEPARABLE_NORM / np.sqrt(DENSITY) * u / np.linalg.norm(u))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return X, y


#: Columns and density of the wide sparse kind.
WIDE_D, WIDE_DENSITY = 200, 0.02
#: The rare-event kind's intercept: about 1 % positives.
RARE_OFFSET = 5.0


def make_rare(n, layout, seed=0):
    """Rare events: ``P(y = 1) = σ(x_0 - RARE_OFFSET)`` on a standard normal design (dense, or
    sparse with entries kept with probability :data:`logistic_grid.DENSITY`)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    if layout == "sparse":
        X = sparse.csr_matrix(X * (rng.random((n, D)) < DENSITY))
    logit = np.asarray(X[:, [0]].todense()).ravel() if sparse.issparse(X) else X[:, 0]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(logit - RARE_OFFSET)))).astype(np.int64)
    return X, y


def make_wide(n, seed=0):
    """A wide sparse design: :data:`WIDE_D` columns, :data:`WIDE_DENSITY` of the entries kept,
    standard normal weights."""
    rng = np.random.default_rng(seed)
    X = sparse.random(n, WIDE_D, density=WIDE_DENSITY, format="csr", random_state=seed,
                      data_rvs=rng.standard_normal)
    logit = X @ rng.standard_normal(WIDE_D)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return X, y


def data(n, layout, kind):
    if kind == "rare":
        return make_rare(n, layout)
    if kind == "wide":
        return make_wide(n)
    if kind == "synthetic":
        return make_data(n, D, layout)
    return make_separable(n, D) if layout == "dense" else make_sparse_separable(n, D)


def fit(X, y, seed, options):
    cpu, wall = time.process_time(), time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        clf = BayesianLogisticRegressionMH(random_state=seed, **options).fit(X, y)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ess = float(clf.ess_.min())
    return {"cpu_seconds": cpu, "wall_seconds": wall, "min_bulk_ess": ess,
            "n_draws_": clf.n_draws_, "cpu_per_ess": cpu / ess,
            "rows_per_ess": clf.n_evaluations_ / ess,
            "fraction_data_touched": clf.fraction_data_touched_,
            "plan": None if clf.plan_ is None else clf.plan_._asdict(),
            "warnings": [str(w.message)[:200] for w in caught
                         if issubclass(w.category, ConvergenceWarning)]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--layouts", nargs="+", default=["dense", "sparse"])
    parser.add_argument("--kinds", nargs="+", default=["synthetic", "separable"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    out = args.out
    results = json.loads(out.read_text()) if out.exists() else {}
    for n in args.n:
        for layout in args.layouts:
            for kind in args.kinds:
                if kind == "wide" and layout != args.layouts[0]:
                    continue  # (one layout: sparse)
                layout = "sparse" if kind == "wide" else layout
                X, y = data(n, layout, kind)
                # Untimed: the kernels' compilation, and the default's measurement of its
                # costs (made once per machine and kind of data, by a fit of the default's
                # length: a short fit plans on rough costs and would leave it to the next).
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for options in METHODS.values():
                        BayesianLogisticRegressionMH(random_state=99, **options).fit(X, y)
                for seed in args.seeds:
                    row = {name: fit(X, y, seed, options) for name, options in METHODS.items()}
                    a, b = row["default"], row["metropolis"]
                    row["cpu_per_ess_ratio"] = a["cpu_per_ess"] / b["cpu_per_ess"]
                    row["cpu_ratio"] = a["cpu_seconds"] / b["cpu_seconds"]
                    row["rows_per_ess_ratio"] = a["rows_per_ess"] / b["rows_per_ess"]
                    results[f"N={n} {layout} {kind} seed={seed}"] = row
                    print(f"N={n} {layout} {kind} seed {seed}: CPU s per effective draw, "
                          f"default/metropolis {row['cpu_per_ess_ratio']:.2f} "
                          f"({a['cpu_per_ess'] * 1e3:.1f} / {b['cpu_per_ess'] * 1e3:.1f} ms); "
                          f"whole fit {row['cpu_ratio']:.2f} ({a['cpu_seconds']:.1f} / "
                          f"{b['cpu_seconds']:.1f} s); rows per effective draw "
                          f"{row['rows_per_ess_ratio']:.2f}; warnings "
                          f"{len(a['warnings'])}/{len(b['warnings'])}", flush=True)
                    out.parent.mkdir(exist_ok=True)
                    out.write_text(json.dumps(results, indent=1))
    ratios = [r["cpu_per_ess_ratio"] for r in results.values()]
    print(f"largest default/metropolis CPU per effective draw over {len(ratios)} fits: "
          f"{max(ratios):.2f} (goal at most 1.10)")


if __name__ == "__main__":
    main()
