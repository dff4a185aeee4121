"""Experiments of "A* sampling with probability matching" (§3, §5): A* vs A* without a bound
vs PM-A*, measured side by side in one run.

1. ``mixture``: the 1-D two-Gaussian mixture of §5.1, ``p(x) = N(x; -2, 1) + 2 N(x; 2, 1)``
   (the paper writes ``phi_P = -log(...)``: a sign slip), ``Q = N(0, 2^2)``. KS distance of
   each sampler's draws to the exact CDF, for several budgets (Fig. 2a).
2. ``counter``: the counter-example of §3, ``P ∝ (1 - 1e-5) N(-5, 1) + spike at 0 of mass 1e-5``,
   ``Q ∝ N(5, 1)`` on (-10, 10). The paper's spike (width 1e-405, height 1e400) is below
   float64; we keep its mass and use width 1e-300, height 1e295 (679 nats above the rest).
   A round is "suboptimal" when the region it refines contains the spike, whose Gumbel value
   is the largest with probability only 1e-5. Reports rounds on suboptimal regions and the
   best Gumbel value found vs rounds (Fig. 1b, 1c, 2b), averaged over runs.
3. ``clutter``: Minka's (2001) clutter problem, ``p(y|x) = (1-w) N(y; x, I) + w N(y; 0, 10 I)``,
   ``p(x) = N(0, 100 I)``, ``w = 0.5``, ``n = 20`` points, ``d in {5, 15, 20}``, ``Q = p(x)``.
   Best Gumbel value found vs likelihood evaluations (Fig. 3). A* uses a valid bound (sum of
   per-datum suprema on the box); PM-A* and A* without a bound need none.
4. ``logistic``: Bayesian logistic regression on scikit-learn's breast-cancer data (intercept
   + 2 standardised features, ``w ~ N(0, I)``, ``Q = p(w)``), compared with a long exact
   random-walk Metropolis-Hastings chain. A* gets an exact bound from L-BFGS-B (the
   log-likelihood is concave). Reports posterior mean errors in posterior standard deviations
   and the mean log-likelihood of the draws (Fig. 4b).

Every algorithm's cost is counted in rows passed to ``log_density`` (times ``n`` data terms
for likelihood evaluations). Writes ``benchmarks/results/astar_experiments.json`` and one PNG
per experiment. Usage::

    python benchmarks/astar_experiments.py            # default sizes, a few minutes
    python benchmarks/astar_experiments.py --quick    # smaller run
    python benchmarks/astar_experiments.py --only counter
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import optimize, stats
from scipy.special import log_expit

from sksubsample.algorithms import astar_sample, pm_astar_sample

RESULTS = Path(__file__).resolve().parent / "results"
LOG_2PI = math.log(2.0 * math.pi)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def quiet_astar(*args, **kwargs):
    """A* under a budget warns when the bound has not proved exactness; expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return astar_sample(*args, **kwargs)


# ------------------------------------------------------------------------------ 1. mixture
def mixture_experiment(quick, seed):
    q = stats.norm(0.0, 2.0)
    comps = ((-2.0, 0.0), (2.0, math.log(2.0)))

    def log_p(x):
        x = x[:, 0]
        return np.logaddexp(stats.norm.logpdf(x, -2.0), math.log(2.0) + stats.norm.logpdf(x, 2.0))

    def cdf(x):
        return (stats.norm.cdf(x, -2.0) + 2.0 * stats.norm.cdf(x, 2.0)) / 3.0

    def bound(lower, upper):
        terms = []
        for mu, log_w in comps:
            x = min(max(4.0 * mu / 3.0, lower[0]), upper[0])
            terms.append(log_w - 0.5 * (x - mu) ** 2 + x * x / 8.0 + math.log(2.0))
        return float(np.logaddexp.reduce(terms))

    n = 400 if quick else 1500
    budgets = [1, 2, 4, 8, 16]
    out = {"n_draws": n, "budgets": budgets, "ks": {}, "evaluations_per_draw": {}}
    exact = astar_sample(log_p, q, bound=bound, n_draws=n, random_state=seed)
    out["ks"]["A*"] = float(stats.kstest(exact.samples[:, 0], cdf).statistic)
    out["evaluations_per_draw"]["A*"] = exact.n_evaluations / n
    draws = {"A*": exact.samples[:, 0]}
    for name in ("A* without bound", "PM-A*"):
        out["ks"][name], out["evaluations_per_draw"][name] = [], []
        for t in budgets:
            if name == "PM-A*":
                res = pm_astar_sample(
                    log_p, q, n_iter=t, n_draws=n, n_particles=4, random_state=seed
                )
            else:
                res = astar_sample(log_p, q, n_draws=n, max_iter=t, random_state=seed)
            out["ks"][name].append(float(stats.kstest(res.samples[:, 0], cdf).statistic))
            out["evaluations_per_draw"][name].append(res.n_evaluations / n)
            if t == 4:
                draws[name] = res.samples[:, 0]
    out["ks_critical_1pct"] = float(stats.kstwo.ppf(0.99, n))
    print(
        f"[mixture] KS distance to the exact CDF (n={n}; 1% critical value "
        f"{out['ks_critical_1pct']:.3f})"
    )
    print(
        f"  A* (exact, {out['evaluations_per_draw']['A*']:.1f} evaluations/draw): "
        f"{out['ks']['A*']:.3f}"
    )
    for name in ("A* without bound", "PM-A*"):
        cells = "  ".join(f"T={t}: {v:.3f}" for t, v in zip(budgets, out["ks"][name], strict=True))
        print(f"  {name:17s} {cells}")

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    grid = np.linspace(-6, 6, 400)
    dens = (stats.norm.pdf(grid, -2) + 2 * stats.norm.pdf(grid, 2)) / 3
    axes[0].plot(grid, dens, "k", label="target")
    for name, x in draws.items():
        label = name if name == "A*" else f"{name} (T=4)"
        axes[0].hist(x, bins=60, density=True, histtype="step", label=label)
    axes[0].set_title("§5.1 mixture: draws")
    axes[0].legend(fontsize=7)
    for name in ("A* without bound", "PM-A*"):
        axes[1].plot(budgets, out["ks"][name], "o-", label=name)
    axes[1].axhline(out["ks"]["A*"], color="k", ls=":", label="A* (exact)")
    axes[1].axhline(out["ks_critical_1pct"], color="r", ls="--", lw=0.8, label="1% KS critical")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("rounds T")
    axes[1].set_ylabel("KS distance")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "astar_mixture.png", dpi=110)
    plt.close(fig)
    return out


# ------------------------------------------------------------------------------ 2. counter
SPIKE_WIDTH = 1e-300
SPIKE_LOG_HEIGHT = math.log(1e-5) - math.log(SPIKE_WIDTH)  # mass 1e-5, as in the paper
LOG_MAIN = math.log1p(-1e-5)


def counter_problem():
    q = stats.truncnorm(-15.0, 5.0, loc=5.0, scale=1.0)  # N(5, 1) on (-10, 10)
    log_zq = math.log(stats.norm.cdf(5.0) - stats.norm.cdf(-15.0))

    def log_p(x):
        x = x[:, 0]
        main = LOG_MAIN - 0.5 * (x + 5.0) ** 2 - 0.5 * LOG_2PI
        spike = np.where(np.abs(x) <= 0.5 * SPIKE_WIDTH, SPIKE_LOG_HEIGHT, -np.inf)
        return np.logaddexp(main, spike)

    def bound(lower, upper):
        # log N(x; -5, 1) - log N(x; 5, 1) = -10 x decreases: its sup is at the lower end;
        # the spike adds at most its height over the smallest q on it.
        value = LOG_MAIN - 10.0 * lower[0] + log_zq
        if lower[0] <= 0.5 * SPIKE_WIDTH and upper[0] >= -0.5 * SPIKE_WIDTH:
            q_min = -0.5 * (0.5 * SPIKE_WIDTH + 5.0) ** 2 - 0.5 * LOG_2PI - log_zq
            value = float(np.logaddexp(value, SPIKE_LOG_HEIGHT - q_min))
        return value

    return log_p, q, bound


def counter_experiment(quick, seed):
    log_p, q, bound = counter_problem()
    runs = 30 if quick else 100
    rounds = 300 if quick else 500
    results = {
        "A*": quiet_astar(
            log_p,
            q,
            bound=bound,
            n_draws=runs,
            max_iter=rounds,
            record_trace=True,
            random_state=seed,
        ),
        "A* without bound": astar_sample(
            log_p, q, n_draws=runs, max_iter=rounds, record_trace=True, random_state=seed
        ),
        "PM-A*": pm_astar_sample(
            log_p,
            q,
            n_iter=rounds,
            n_draws=runs,
            n_particles=8,
            record_trace=True,
            random_state=seed,
        ),
    }
    out = {"runs": runs, "rounds": rounds, "spike_width": SPIKE_WIDTH, "algorithms": {}}
    curves = {}
    for name, res in results.items():
        tr = res.trace
        on_spike = (tr.selected_lower[:, :, 0] <= 0.0) & (tr.selected_upper[:, :, 0] >= 0.0)
        # regions that contain the run's final draw: the optimal region as the run sees it
        final = res.samples[:, 0][:, None]
        on_best = (tr.selected_lower[:, :, 0] <= final) & (tr.selected_upper[:, :, 0] >= final)
        valid = np.isfinite(tr.best_gumbel)
        best = np.where(valid, tr.best_gumbel, np.nan)
        # a search that stopped early (A* proved exactness) keeps its final value
        best = np.where(valid, best, res.max_gumbel[:, None])
        curves[name] = (
            on_spike.cumsum(axis=1).mean(axis=0),
            on_best.cumsum(axis=1).mean(axis=0),
            best.mean(axis=0),
        )
        out["algorithms"][name] = {
            "rounds_on_spike_mean": float(on_spike.sum(axis=1).mean()),
            "rounds_on_spike_fraction": float(on_spike.sum() / valid.sum()),
            "rounds_on_final_region_mean": float(on_best.sum(axis=1).mean()),
            "final_best_gumbel_mean": float(res.max_gumbel.mean()),
            "final_best_gumbel_se": float(res.max_gumbel.std(ddof=1) / math.sqrt(runs)),
            "n_evaluations_per_run": res.n_evaluations / runs,
            "draw_in_spike_fraction": float(np.mean(np.abs(res.samples[:, 0]) <= SPIKE_WIDTH)),
            "draw_mean": float(res.samples[:, 0].mean()),
        }
    a = out["algorithms"]
    out["ratio_spike_rounds_astar_over_pm"] = (
        a["A*"]["rounds_on_spike_mean"] / a["PM-A*"]["rounds_on_spike_mean"]
    )
    print(f"[counter] §3 counter-example, {runs} runs x {rounds} rounds")
    print(
        f"  {'':17s} {'rounds on spike':>16} {'(fraction)':>10} {'best Gumbel':>16} "
        f"{'evals/run':>10} {'draw mean':>9}"
    )
    for name, r in a.items():
        print(
            f"  {name:17s} {r['rounds_on_spike_mean']:>16.1f}"
            f" {r['rounds_on_spike_fraction']:>10.3f}"
            f" {r['final_best_gumbel_mean']:>9.3f} ± {r['final_best_gumbel_se']:.3f}"
            f" {r['n_evaluations_per_run']:>10.0f} {r['draw_mean']:>9.3f}"
        )
    print(
        f"  rounds on suboptimal (spike) regions, A* / PM-A*: "
        f"{out['ratio_spike_rounds_astar_over_pm']:.1f}x"
    )

    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    grid = np.linspace(-9.9, 9.9, 500)
    axes[0].plot(grid, LOG_MAIN - 0.5 * (grid + 5) ** 2, label="log p (spike at 0 not drawn)")
    axes[0].plot(grid, q.logpdf(grid), label="log q")
    axes[0].annotate(
        f"spike: +{SPIKE_LOG_HEIGHT:.0f} nats,\nwidth {SPIKE_WIDTH:g}", (0, -20), fontsize=7
    )
    axes[0].legend(fontsize=7)
    axes[0].set_title("counter-example")
    t = np.arange(1, rounds + 1)
    for name, (spike, _, best) in curves.items():
        axes[1].plot(t, spike, label=name)
        axes[2].plot(t, best, label=name)
    axes[1].set_title("rounds on regions containing the spike")
    axes[1].set_xlabel("round")
    axes[2].set_title("best Gumbel value found")
    axes[2].set_xlabel("round")
    axes[2].set_xscale("log")
    for ax in axes[1:]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "astar_counter_example.png", dpi=110)
    plt.close(fig)
    return out


# ------------------------------------------------------------------------------ 3. clutter
def clutter_problem(d, n, rng, w=0.5, outlier_var=10.0, prior_var=100.0):
    x_true = np.full(d, 2.0)
    outlier = rng.random(n) < w
    y = np.where(
        outlier[:, None],
        rng.normal(0.0, math.sqrt(outlier_var), (n, d)),
        rng.normal(x_true, 1.0, (n, d)),
    )
    log_w_in, log_w_out = math.log1p(-w), math.log(w)
    out_term = (
        log_w_out - 0.5 * d * (LOG_2PI + math.log(outlier_var)) - 0.5 * (y**2).sum(1) / outlier_var
    )
    prior = [stats.norm(0.0, math.sqrt(prior_var))] * d

    def loglik(x):  # (m, d) -> (m,)
        sq = ((y[None, :, :] - x[:, None, :]) ** 2).sum(axis=2)
        inlier = log_w_in - 0.5 * d * LOG_2PI - 0.5 * sq
        return np.logaddexp(inlier, out_term[None, :]).sum(axis=1)

    def log_density(x):
        return (
            loglik(x)
            - 0.5 * (x**2).sum(axis=1) / prior_var
            - 0.5 * d * (LOG_2PI + math.log(prior_var))
        )

    def bound(lower, upper):
        # o = log-likelihood (Q is the prior); the sup of a sum is at most the sum of sups,
        # and each term is largest at the point of the box closest to y_i.
        nearest = np.clip(y, lower, upper)
        sq = ((y - nearest) ** 2).sum(axis=1)
        inlier = log_w_in - 0.5 * d * LOG_2PI - 0.5 * sq
        return float(np.logaddexp(inlier, out_term).sum())

    def laplace(inflate=2.0):
        """Independent normals at the MAP, sds from BFGS's inverse Hessian, inflated."""
        start = np.median(y, axis=0)
        res = optimize.minimize(lambda x: -log_density(x[None])[0], start, method="BFGS")
        sd = inflate * np.sqrt(np.clip(np.diag(res.hess_inv), 1e-4, None))
        return [stats.norm(m, s) for m, s in zip(res.x, sd, strict=True)]

    return log_density, prior, bound, laplace


def clutter_experiment(quick, seed):
    dims = [5, 15, 20]
    n = 20
    runs = 6 if quick else 10
    pm_rounds = 100 if quick else 200
    rng = np.random.default_rng(seed)
    out = {"n": n, "runs": runs, "pm_rounds": pm_rounds, "dims": {}}
    plt = _plt()
    fig, axes = plt.subplots(1, len(dims), figsize=(12, 3.4))
    print(f"[clutter] best Gumbel value at equal log-density evaluations ({runs} runs)")
    for ax, d in zip(axes, dims, strict=True):
        log_density, prior, bound, laplace = clutter_problem(d, n, rng)
        pm_is = pm_astar_sample(
            log_density,
            prior,
            n_iter=pm_rounds,
            n_draws=runs,
            n_particles=8,
            importance=laplace(),
            record_trace=True,
            random_state=seed,
        )
        pm = pm_astar_sample(
            log_density,
            prior,
            n_iter=pm_rounds,
            n_draws=runs,
            n_particles=8,
            record_trace=True,
            random_state=seed,
        )
        budget = math.ceil(pm.n_evaluations / runs)  # A*: one evaluation per round
        t0 = time.perf_counter()
        nob = astar_sample(
            log_density,
            prior,
            n_draws=runs,
            max_iter=budget,
            record_trace=True,
            random_state=seed,
        )
        t1 = time.perf_counter()
        ast = quiet_astar(
            log_density,
            prior,
            bound=bound,
            n_draws=runs,
            max_iter=budget,
            record_trace=True,
            random_state=seed,
        )
        t2 = time.perf_counter()
        row = {"evaluation_budget_per_run": budget, "likelihood_terms_per_run": budget * n}
        algos = (
            ("A*", ast),
            ("A* without bound", nob),
            ("PM-A*", pm),
            ("PM-A* (Laplace IS)", pm_is),
        )
        for name, res in algos:
            tr = res.trace
            evals = np.nanmean(tr.n_evaluations, axis=0) * n
            best = np.where(np.isfinite(tr.best_gumbel), tr.best_gumbel, res.max_gumbel[:, None])
            ax.plot(evals, best.mean(axis=0), label=name)
            row[name] = {
                "final_best_gumbel_mean": float(res.max_gumbel.mean()),
                "final_best_gumbel_se": float(res.max_gumbel.std(ddof=1) / math.sqrt(runs)),
                "converged_fraction": float(res.converged.mean()),
                "evaluations_per_run": res.n_evaluations / runs,
            }
        row["A*"]["seconds"] = t2 - t1
        row["A* without bound"]["seconds"] = t1 - t0
        row["pm_minus_astar"] = (
            row["PM-A*"]["final_best_gumbel_mean"] - row["A*"]["final_best_gumbel_mean"]
        )
        row["pm_is_minus_astar"] = (
            row["PM-A* (Laplace IS)"]["final_best_gumbel_mean"]
            - row["A*"]["final_best_gumbel_mean"]
        )
        row["pm_minus_nobound"] = (
            row["PM-A*"]["final_best_gumbel_mean"]
            - row["A* without bound"]["final_best_gumbel_mean"]
        )
        out["dims"][str(d)] = row
        print(
            f"  d={d:2d} ({budget * n} likelihood terms/run): "
            + "  ".join(
                f"{k}: {row[k]['final_best_gumbel_mean']:.2f}"
                f" ± {row[k]['final_best_gumbel_se']:.2f}"
                for k, _ in algos
            )
        )
        ax.set_title(f"clutter, d={d}, n={n}")
        ax.set_xlabel("likelihood evaluations")
        ax.set_xscale("log")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("best Gumbel value (mean over runs)")
    fig.tight_layout()
    fig.savefig(RESULTS / "astar_clutter.png", dpi=110)
    plt.close(fig)
    return out


# ------------------------------------------------------------------------------ 4. logistic
def logistic_problem():
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    names = ["mean radius", "mean texture"]
    cols = [list(data.feature_names).index(c) for c in names]
    x = data.data[:, cols]
    x = (x - x.mean(0)) / x.std(0)
    x = np.column_stack([np.ones(len(x)), x])
    s = 2.0 * data.target - 1.0  # labels in {-1, +1}
    sx = s[:, None] * x
    logistic_problem.sx = sx  # the MH reference needs the design for its Laplace scale
    d = x.shape[1]
    prior = [stats.norm(0.0, 1.0)] * d

    def loglik(w):  # (m, d) -> (m,)
        return log_expit(w @ sx.T).sum(axis=1)

    def log_density(w):
        return loglik(w) - 0.5 * (w**2).sum(axis=1) - 0.5 * d * LOG_2PI

    counter = {"bound_terms": 0}

    def bound(lower, upper):
        # o = log-likelihood, concave: its sup on the box is a bounded convex problem.
        def neg(w):
            z = sx @ w
            counter["bound_terms"] += len(z)
            return -log_expit(z).sum(), -(sx.T @ (1.0 - np.exp(log_expit(z))))

        lo = np.where(np.isfinite(lower), lower, None)
        hi = np.where(np.isfinite(upper), upper, None)
        start = np.clip(
            np.zeros(d), np.nan_to_num(lower, neginf=-1e3), np.nan_to_num(upper, posinf=1e3)
        )
        res = optimize.minimize(
            neg,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(lo, hi, strict=True)),
            options={"ftol": 1e-12, "gtol": 1e-9},
        )
        # the optimiser's value is a lower estimate of the sup; pad by its tolerance
        return float(-res.fun + 1e-6)

    return log_density, loglik, prior, bound, counter, len(s), names


def rw_mh(log_density, x0, scale, n_steps, rng):
    x, lp = x0.copy(), log_density(x0[None])[0]
    chain = np.empty((n_steps, x0.size))
    accepted = 0
    for t in range(n_steps):
        prop = x + scale * rng.standard_normal(x.size)
        lp_prop = log_density(prop[None])[0]
        if math.log(rng.random()) < lp_prop - lp:
            x, lp = prop, lp_prop
            accepted += 1
        chain[t] = x
    return chain, accepted / n_steps


SHORT_NAMES = {
    "A* (L-BFGS-B bound)": "A*",
    "A* without bound": "A* no bound",
    "PM-A*": "PM-A*",
    "PM-A* (Laplace IS)": "PM-A* IS",
    "RW-MH, same budget": "short MH",
}


def logistic_experiment(quick, seed):
    log_density, loglik, prior, bound, counter, n, names = logistic_problem()
    rng = np.random.default_rng(seed)
    d = len(prior)
    # Exact reference: long random-walk MH from the MAP with a Laplace-scaled proposal.
    map_ = optimize.minimize(lambda w: -log_density(w[None])[0], np.zeros(d)).x
    sx = logistic_problem.sx
    prob = np.exp(log_expit(sx @ map_))
    hess = (sx * (prob * (1.0 - prob))[:, None]).T @ sx + np.eye(d)  # prior precision 1
    cov = np.linalg.inv(hess)
    chol = np.linalg.cholesky(cov)
    n_mh = 20_000 if quick else 100_000
    x, lp = map_.copy(), log_density(map_[None])[0]
    steps = 2.4 / math.sqrt(d) * (rng.standard_normal((n_mh, d)) @ chol.T)
    chain = np.empty((n_mh, d))
    acc = 0
    for t in range(n_mh):
        prop = x + steps[t]
        lp_prop = log_density(prop[None])[0]
        if math.log(rng.random()) < lp_prop - lp:
            x, lp, acc = prop, lp_prop, acc + 1
        chain[t] = x
    chain = chain[n_mh // 10 :]
    ref_mean, ref_sd = chain.mean(0), chain.std(0)
    ref_loglik = float(loglik(chain[:: max(1, len(chain) // 5000)]).mean())

    runs = 10 if quick else 30
    rounds = 150 if quick else 400
    pm = pm_astar_sample(
        log_density,
        prior,
        n_iter=rounds,
        n_draws=runs,
        n_particles=8,
        record_trace=True,
        random_state=seed,
    )
    budget = math.ceil(pm.n_evaluations / runs)
    laplace = [stats.norm(m, 2.0 * math.sqrt(v)) for m, v in zip(map_, np.diag(cov), strict=True)]
    pm_is = pm_astar_sample(
        log_density,
        prior,
        n_iter=rounds,
        n_draws=runs,
        n_particles=8,
        importance=laplace,
        record_trace=True,
        random_state=seed,
    )
    nob = astar_sample(
        log_density, prior, n_draws=runs, max_iter=budget, record_trace=True, random_state=seed
    )
    counter["bound_terms"] = 0
    t0 = time.perf_counter()
    ast = quiet_astar(
        log_density,
        prior,
        bound=bound,
        n_draws=runs,
        max_iter=200 if quick else 1000,
        record_trace=True,
        random_state=seed,
    )
    t_astar = time.perf_counter() - t0
    # A short MH chain from the prior with the same evaluation budget as one PM-A* draw.
    short = []
    for _ in range(runs):
        c, _ = rw_mh(log_density, prior[0].rvs(d, random_state=rng), 0.1, budget, rng)
        short.append(c[-1])
    short = np.array(short)

    out = {
        "n": n,
        "features": names,
        "runs": runs,
        "pm_rounds": rounds,
        "evaluation_budget_per_draw": budget,
        "mh_reference": {
            "steps": n_mh,
            "acceptance": acc / n_mh,
            "mean": ref_mean.tolist(),
            "sd": ref_sd.tolist(),
            "mean_loglik": ref_loglik,
        },
        "algorithms": {},
    }
    print(
        f"[logistic] breast cancer (n={n}, d={d}: intercept + {', '.join(names)}); "
        f"MH reference {n_mh} steps, acceptance {acc / n_mh:.2f}"
    )
    print(
        f"  reference posterior mean {np.round(ref_mean, 3).tolist()}, sd "
        f"{np.round(ref_sd, 3).tolist()}, mean log-lik {ref_loglik:.2f}"
    )
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for name, res in (
        ("A* (L-BFGS-B bound)", ast),
        ("A* without bound", nob),
        ("PM-A*", pm),
        ("PM-A* (Laplace IS)", pm_is),
        ("RW-MH, same budget", None),
    ):
        samples = short if res is None else res.samples
        z = (samples.mean(0) - ref_mean) / (ref_sd / math.sqrt(runs))
        ll = loglik(samples)
        row = {
            "mean_error_in_standard_errors": z.tolist(),
            "max_abs_z": float(np.abs(z).max()),
            "mean_loglik": float(ll.mean()),
            "mean_loglik_se": float(ll.std(ddof=1) / math.sqrt(runs)),
            "evaluations_per_draw": budget if res is None else res.n_evaluations / runs,
        }
        if res is not None and name.startswith("A* (L"):
            row["converged_fraction"] = float(res.converged.mean())
            row["bound_likelihood_terms_per_draw"] = counter["bound_terms"] / runs
            row["seconds"] = t_astar
        out["algorithms"][name] = row
        print(
            f"  {name:20s} mean log-lik {row['mean_loglik']:8.2f} ± {row['mean_loglik_se']:.2f}"
            f"  |z| max {row['max_abs_z']:5.2f}  evals/draw {row['evaluations_per_draw']:.0f}"
            + (
                f"  converged {row['converged_fraction']:.2f}, bound terms/draw "
                f"{row['bound_likelihood_terms_per_draw']:.0f}"
                if "converged_fraction" in row
                else ""
            )
        )
        if res is not None:
            tr = res.trace
            evals = np.nanmean(tr.n_evaluations, axis=0)
            best = np.where(np.isfinite(tr.best_gumbel), tr.best_gumbel, res.max_gumbel[:, None])
            axes[0].plot(evals, best.mean(axis=0), label=name)
        axes[1].errorbar(
            [SHORT_NAMES[name]],
            [row["mean_loglik"]],
            yerr=[2 * row["mean_loglik_se"]],
            fmt="o",
        )
    axes[1].axhline(ref_loglik, color="k", ls=":", label="exact MH posterior")
    axes[1].set_ylabel("mean log-likelihood of draws")
    axes[1].tick_params(axis="x", labelsize=7)
    axes[1].legend(fontsize=7)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("log-density evaluations")
    axes[0].set_ylabel("best Gumbel value (mean)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "astar_logistic.png", dpi=110)
    plt.close(fig)
    return out


EXPERIMENTS = {
    "mixture": mixture_experiment,
    "counter": counter_experiment,
    "clutter": clutter_experiment,
    "logistic": logistic_experiment,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller run")
    parser.add_argument("--only", choices=sorted(EXPERIMENTS), action="append")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "astar_experiments.json"
    report = json.loads(path.read_text()) if path.exists() and args.only else {}
    for name in args.only or EXPERIMENTS:
        t0 = time.perf_counter()
        report[name] = EXPERIMENTS[name](args.quick, args.seed)
        report[name]["seconds"] = time.perf_counter() - t0
        report[name]["quick"] = args.quick
        print(f"  ({report[name]['seconds']:.0f} s)")
    path.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
