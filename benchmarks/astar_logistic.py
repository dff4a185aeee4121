"""Exact posterior draws of Bayesian logistic regression: A*, PM-A* and the MH default.

For breast cancer and wine (class 0 against the rest) on their first k standardised features
plus an intercept, and a synthetic set (N = 1000, Gaussian features), this measures per
method: draws per second and data terms read per draw (``BayesianLogisticRegressionMH
.sample_exact`` reports them for A* and PM-A*; for MH, ``n_evaluations_`` over all draws,
warm-up included, divided by the retained draws, and per effective draw), and agreement by a
two-sample KS test per coordinate with an independent reference, NumPyro's NUTS (the
``bench`` extra; 4 chains of 2500 draws, thinned by 5), and with the MH default. The run
over d = 2..7 on breast cancer gives the cost growth the threshold of ``sample_exact`` is set
from.

    python benchmarks/astar_logistic.py            # ~25 min on 2 cores
    python benchmarks/astar_logistic.py --quick    # a smoke run

Results: ``benchmarks/results/astar_logistic.json`` and ``astar_logistic_cost.png``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.preprocessing import StandardScaler

from sksubsample import BayesianLogisticRegressionMH

RESULTS = Path(__file__).parent / "results"


def dataset(name, k, seed=0):
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "wine":
        X, y = load_wine(return_X_y=True)
        y = (y == 0).astype(int)
    else:
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((1000, k))
        w = rng.standard_normal(k)
        y = (rng.random(1000) < 1 / (1 + np.exp(-(X @ w) - 0.5))).astype(int)
    return StandardScaler().fit_transform(X[:, :k]), y


def nuts_reference(X, y, prior_scale=10.0, seed=0, n_draws=2500):
    """Independent reference: NumPyro NUTS on the same posterior (4 chains, thinned by 5)."""
    import jax
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    jax.config.update("jax_enable_x64", True)
    design = np.column_stack([X, np.ones(len(X))])

    def model(design, y):
        theta = numpyro.sample("theta", dist.Normal(0.0, prior_scale).expand([design.shape[1]])
                               .to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=design @ theta), obs=y)

    mcmc = MCMC(NUTS(model), num_warmup=1000, num_samples=n_draws, num_chains=4,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), design, y.astype(float))
    return np.asarray(mcmc.get_samples()["theta"])[::5]


def ks_min(a, b):
    return float(min(stats.ks_2samp(a[:, j], b[:, j]).pvalue for j in range(a.shape[1])))


def lag1(x):
    x = x - x.mean(axis=0)
    return (np.sum(x[1:] * x[:-1], axis=0) / np.sum(x * x, axis=0)).tolist()


def run_case(name, k, n_exact, methods, reference=True, seed=0):
    X, y = dataset(name, k, seed)
    row = {"data": name, "n_samples": len(y), "n_params": k + 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        clf = BayesianLogisticRegressionMH(random_state=seed).fit(X, y)
        mh_seconds = time.perf_counter() - start
    mh = clf.sample_posterior()
    n_mh = mh.shape[0]
    row["mh"] = {"draws_per_s": n_mh / mh_seconds,
                 "evaluations_per_draw": clf.n_evaluations_ / n_mh,
                 "evaluations_per_effective_draw": clf.n_evaluations_ / float(np.min(clf.ess_)),
                 "min_ess": float(np.min(clf.ess_))}
    ref = nuts_reference(X, y, seed=seed) if reference else None
    if ref is not None:
        row["mh"]["ks_min_p_vs_nuts"] = ks_min(mh, ref)
    for method in methods:
        draws = clf.sample_exact(n_exact, method=method, random_state=seed + 1, n_jobs=2)
        out = {"n_draws": n_exact,
               "draws_per_s": n_exact / clf.exact_seconds_,
               "evaluations_per_draw": float(clf.exact_evaluations_per_draw_.mean()),
               "density_evaluations_per_draw": float(
                   clf.exact_density_evaluations_per_draw_.mean()),
               "bound_passes_per_draw": float(clf.exact_bound_passes_per_draw_.mean()),
               "rounds_per_draw": float(clf.exact_rounds_per_draw_.mean()),
               "all_certified": bool(clf.exact_converged_.all()),
               "ks_min_p_vs_mh": ks_min(draws, mh),
               "lag1": lag1(draws),
               "lag1_se": 1 / np.sqrt(n_exact)}
        if ref is not None:
            out["ks_p_vs_nuts"] = [float(stats.ks_2samp(draws[:, j], ref[:, j]).pvalue)
                                   for j in range(draws.shape[1])]
            out["ks_min_p_vs_nuts"] = min(out["ks_p_vs_nuts"])
        row[method] = out
    return row


def table(rows):
    lines = [f"{'data':14s} {'d':>2s} {'method':9s} {'draws/s':>9s} {'evals/draw':>11s} "
             f"{'rounds':>7s} {'KS p vs NUTS':>13s} {'KS p vs MH':>11s}"]
    for r in rows:
        for method in ("astar", "pm-astar", "mh"):
            if method not in r:
                continue
            m = r[method]
            lines.append(
                f"{r['data']:14s} {r['n_params']:2d} {method:9s} {m['draws_per_s']:9.1f} "
                f"{m['evaluations_per_draw']:11.3g} {m.get('rounds_per_draw', float('nan')):7.1f} "
                f"{m.get('ks_min_p_vs_nuts', float('nan')):13.3f} "
                f"{m.get('ks_min_p_vs_mh', float('nan')):11.3f}")
    return "\n".join(lines)


def plot(growth, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for name in sorted({g["data"] for g in growth}):
        gs = [g for g in growth if g["data"] == name]
        d = [g["n_params"] for g in gs]
        axes[0].semilogy(d, [g["astar"]["evaluations_per_draw"] for g in gs], "o-",
                         label=f"A*, {name}")
        axes[0].semilogy(d, [g["mh"]["evaluations_per_effective_draw"] for g in gs], "s--",
                         label=f"MH default per effective draw, {name}")
        axes[1].semilogy(d, [g["astar"]["draws_per_s"] for g in gs], "o-", label=f"A*, {name}")
    axes[0].set(xlabel="parameters d (intercept included)", ylabel="data terms per draw",
                title="cost per independent draw")
    axes[1].set(xlabel="parameters d (intercept included)", ylabel="draws per second",
                title="A* draws per second (2 jobs)")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 100 if args.quick else 1000
    cases = [("breast_cancer", 3), ("wine", 3), ("synthetic", 3), ("breast_cancer", 5),
             ("wine", 5)]
    if args.quick:
        cases = cases[:1]
    rows = []
    for name, k in cases:
        # d = 6 costs ~10 times d = 4 per draw (see the growth run): fewer draws there
        rows.append(run_case(name, k, n if k <= 3 else n // 10, ("astar", "pm-astar"),
                             reference=not args.quick))
        print(table(rows[-1:]), flush=True)
    growth = []
    for name in ("breast_cancer", "synthetic"):
        for k in range(1, 4 if args.quick else 7):
            growth.append(run_case(name, k, 20 if k >= 4 else 50, ("astar",),
                                   reference=False))
            print(f"{name} d={k + 1}: {growth[-1]['astar']['evaluations_per_draw']:.3g} "
                  f"terms/draw, {growth[-1]['astar']['draws_per_s']:.2f} draws/s", flush=True)
    suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"astar_logistic{suffix}.json", "w") as f:
        json.dump({"cases": rows, "growth": growth}, f, indent=1)
    plot(growth, RESULTS / f"astar_logistic_cost{suffix}.png")
    print(table(rows))


if __name__ == "__main__":
    main()
