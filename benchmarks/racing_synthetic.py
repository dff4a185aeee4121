"""Reproduce the synthetic experiments of Chen & Ghahramani (2016), §5.1 and App. C.1.

For D states with N factors each (``make_racing_problem``: Normal, Uniform or LogNormal(0, 2)
factor values rescaled to a fixed p(X) and noise sigma), every run draws Gumbel perturbations,
identifies the best arm with adapted lil'UCB, Racing-EBS or Racing-Normal, and compares it with
the exact argmax for the same perturbation. Reported per setting:

* the empirical best-arm error with a 95% Clopper-Pearson interval, against delta (Fig. 1b-d);
* the proportion of rewards evaluated (Fig. 1f-h);
* the D = 2 and D = 100 variants (Fig. 6-7) and the marginal-variance variant (Fig. 5);
* the uncertainty bounds themselves against T (Fig. 1e).

Wall time against evaluation counts is measured by ``benchmarks/racing_wall_time.py``.

Run ``python benchmarks/racing_synthetic.py`` (about 20 minutes on one core) or with
``--quick`` (a few minutes). The paper uses N = 1e5 and 1e4 draws per setting; the default
here is N = 2e4 with 200 draws (50 for lil'UCB), so errors below ~1% are not resolved.
Writes ``racing_synthetic.png``, ``racing_synthetic_variants.png``,
``racing_synthetic_bounds.png`` and ``racing_synthetic.json`` into ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from sksubsample.algorithms import b_ebs, b_normal, lil_ucb, race
from sksubsample.datasets import make_racing_problem

matplotlib.use("Agg")

ALGORITHMS = ("lil'UCB", "Racing-EBS", "Racing-Normal")
DISTRIBUTIONS = ("normal", "uniform", "lognormal")
MARKERS = {"normal": "x", "uniform": "o", "lognormal": "s"}
COLORS = {"lil'UCB": "tab:green", "Racing-EBS": "tab:blue", "Racing-Normal": "tab:red"}


def clopper_pearson(k, n, level=0.95):
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else stats.beta.ppf(a, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - a, k + 1, n - k)
    return float(lo), float(hi)


def run_algorithm(name, problem, delta, rng, variance="pairwise"):
    """One Gumbel-perturbed best-arm identification; returns (chosen arm, exact arm, evals)."""
    n_arms, n_pop = problem.log_factors.shape
    offsets = -np.log(rng.standard_exponential(n_arms))
    shift = offsets / n_pop
    table = problem.log_factors

    def rewards(arms, idx):
        return table[np.ix_(arms, idx)] + shift[arms, None]

    if name == "lil'UCB":
        res = lil_ucb(rewards, n_arms, n_pop, delta=delta,
                      reward_range=float(problem.reward_range.max()), random_state=rng)
    elif name == "Racing-EBS":
        res = race(rewards, n_arms, n_pop, delta=delta, bound="ebs", variance=variance,
                   first_batch=2, reward_range=problem.reward_range, random_state=rng)
    else:
        res = race(rewards, n_arms, n_pop, delta=delta, variance=variance, random_state=rng)
    exact = int(np.argmax(problem.exact_sums + offsets))
    return res.best, exact, res.n_evaluations


def error_study(n_arms, n_pop, noises, deltas, n_runs, seed, variance="pairwise",
                algorithms=ALGORITHMS):
    rows = []
    for noise in noises:
        for dist in DISTRIBUTIONS:
            problem = make_racing_problem(n_arms, n_pop, dist, noise, random_state=seed)
            object.__setattr__(problem, "exact_sums", problem.log_factors.sum(axis=1))
            for name in algorithms:
                # lil'UCB pulls one reward at a time in Python: fewer runs keep it affordable.
                runs = max(n_runs // 4, 10) if name == "lil'UCB" else n_runs
                for delta in deltas:
                    rng = np.random.default_rng([seed, len(rows)])
                    errors = evals = 0
                    for _ in range(runs):
                        best, exact, n_ev = run_algorithm(name, problem, delta, rng, variance)
                        errors += int(best != exact)
                        evals += n_ev
                    lo, hi = clopper_pearson(errors, runs)
                    rows.append({
                        "n_arms": n_arms, "n_population": n_pop, "noise": noise,
                        "distribution": dist, "algorithm": name, "variance": variance,
                        "delta": delta, "n_runs": runs, "errors": errors,
                        "error": errors / runs, "error_ci95": [lo, hi],
                        "proportion_evaluated": evals / (runs * n_arms * n_pop),
                    })
                    print(f"D={n_arms:<3} sigma={noise:.0e} {dist:<9} {name:<13} "
                          f"delta={delta:<6} error={errors / runs:.4f} "
                          f"[{lo:.4f}, {hi:.4f}] evaluated={rows[-1]['proportion_evaluated']:.4f}",
                          flush=True)
    return rows


def plot_errors(rows, noises, deltas, path, title):
    fig, axes = plt.subplots(2, len(noises), figsize=(4.2 * len(noises), 7.5), squeeze=False)
    for col, noise in enumerate(noises):
        ax_err, ax_prop = axes[0, col], axes[1, col]
        for name in ALGORITHMS:
            for dist in DISTRIBUTIONS:
                sel = [r for r in rows if r["noise"] == noise and r["algorithm"] == name
                       and r["distribution"] == dist]
                if not sel:
                    continue
                d = np.array([r["delta"] for r in sel])
                err = np.array([r["error"] for r in sel])
                ci = np.array([r["error_ci95"] for r in sel])
                shown = err > 0
                if shown.any():
                    ax_err.errorbar(d[shown], err[shown],
                                    yerr=[err[shown] - ci[shown, 0], ci[shown, 1] - err[shown]],
                                    marker=MARKERS[dist], color=COLORS[name], ls="-", ms=4,
                                    capsize=2, label=f"{name} {dist}")
                ax_prop.plot(d, [r["proportion_evaluated"] for r in sel], marker=MARKERS[dist],
                             color=COLORS[name], ms=4, label=f"{name} {dist}")
        ax_err.plot(deltas, deltas, "k--", lw=1, label="delta")
        for ax in (ax_err, ax_prop):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("delta")
        ax_err.set_title(f"{title}, sigma = {noise:.0e}")
        ax_err.set_ylabel("best-arm error (95% CI; none if no error)")
        ax_prop.set_ylabel("proportion of rewards evaluated")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=COLORS[n], label=n) for n in ALGORITHMS]
    handles += [Line2D([], [], color="k", marker=MARKERS[d], ls="", label=d)
                for d in DISTRIBUTIONS]
    handles.append(Line2D([], [], color="k", ls="--", label="delta"))
    axes[1, 0].legend(handles=handles, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bounds(path):
    """Fig. 1(e): the uncertainty bound on a mean gap against T for unit-variance rewards."""
    n_pop, first = 100_000, 50
    c = 2 * stats.norm.isf(1 / (2 * n_pop))  # range of N(0,1) rewards over 1e5 draws
    t = np.unique(np.geomspace(first, n_pop, 200).astype(int))
    delta = 0.05 / 9
    rounds = int(np.ceil(np.log2(n_pop / first))) + 1
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(t, b_normal(delta, first / n_pop) * np.sqrt((1 - (t - 1) / (n_pop - 1)) / t),
            color=COLORS["Racing-Normal"], label="Racing-Normal (Eq. 9)")
    ax.plot(t, b_ebs(delta / (rounds - 1), t, n_pop, 1.0, c), color=COLORS["Racing-EBS"],
            label="Racing-EBS (Eq. 6-7)")
    lil = 1.5 * np.sqrt(2 * (c / 2) ** 2 * np.log(np.maximum(np.log(t), 1) / (delta / 5)) / t)
    ax.plot(t, lil, color=COLORS["lil'UCB"], label="lil'UCB width (heuristic)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T (rewards per arm)")
    ax.set_ylabel("bound on the mean deviation")
    ax.set_title("Uncertainty bounds, sigma = 1, N = 1e5")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if args.quick:
        n_pop, n_runs, n_runs_variant, n_pop_variant = 10_000, 40, 30, 5_000
        deltas = [0.01, 0.1]
    else:
        n_pop, n_runs, n_runs_variant, n_pop_variant = 20_000, 200, 100, 10_000
        deltas = [0.001, 0.01, 0.05, 0.1]
    # sigma * N sets the difficulty: mean gaps are of order 1/N, the reward noise is sigma.
    noises = [1.0 / n_pop, 10.0 / n_pop, 100.0 / n_pop]
    started = time.time()
    results = {"settings": {"n_population": n_pop, "n_runs": n_runs, "deltas": deltas,
                            "noises": noises, "quick": args.quick, "seed": args.seed}}
    results["fig1_D10_pairwise"] = error_study(10, n_pop, noises, deltas, n_runs, args.seed)
    noises_v = [1.0 / n_pop_variant, 10.0 / n_pop_variant, 100.0 / n_pop_variant]
    results["fig5_D10_marginal"] = error_study(10, n_pop_variant, noises_v, deltas,
                                               n_runs_variant, args.seed, variance="marginal",
                                               algorithms=("Racing-EBS", "Racing-Normal"))
    results["fig6_D2_pairwise"] = error_study(2, n_pop_variant, noises_v, deltas,
                                              n_runs_variant, args.seed)
    results["fig7_D100_pairwise"] = error_study(100, n_pop_variant // 4, noises_v[:2],
                                                deltas[-2:], max(n_runs_variant // 4, 10),
                                                args.seed)
    results["seconds"] = time.time() - started

    plot_errors(results["fig1_D10_pairwise"], noises, deltas, out / "racing_synthetic.png",
                "D = 10")
    plot_errors(results["fig6_D2_pairwise"] + results["fig5_D10_marginal"], noises_v, deltas,
                out / "racing_synthetic_variants.png", "D = 2 pairwise + D = 10 marginal")
    plot_bounds(out / "racing_synthetic_bounds.png")
    (out / "racing_synthetic.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out}/racing_synthetic*.png and racing_synthetic.json "
          f"in {results['seconds']:.0f} s")
    return results


if __name__ == "__main__":
    main()
