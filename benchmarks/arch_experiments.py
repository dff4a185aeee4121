"""Bayesian ARCH order selection (Chen & Ghahramani 2016, §5.2, Fig. 2, Appendix C.2).

The paper's Shanghai 5-minute series is not available; this script uses daily S&P 500 and
NASDAQ returns (the ``arch`` package's offline data, orders 6-16: daily volatility has a long
memory) and a simulated 13 000-point ARCH(3) series (orders 0-5). For each series:

* **Wang–Landau phase (Fig. 2b)**: one chain per method adapts ``π̃`` from the same start;
  the estimate ``log p(q | r) ∝ -log π̃_q`` is recorded against likelihood evaluations and
  CPU time.
* **Fixed-π̃ phase (Fig. 2c-d)**: with one common ``π̃`` and step sizes (from the racing
  warm-up) each method runs ``--draws`` sweeps; reported against CPU time: the running
  ``p(q | r)`` estimate, the ESS of the order indicators (and ESS per second), the fraction of
  data touched, and the final ``p(q | r)`` with its total-variation distance to an
  importance-sampling estimate of the evidences (Laplace Gaussian and multivariate-t proposals).
* **Reward variance with and without control variates**: at states of the racing chain, the
  variance over terms of the Gibbs rewards ``ℓ_t(x^(j))`` and of their control-variate
  residuals, per order and for pairs of orders (what the race sees).
* **Empirical error of the races**: racing Gibbs draws against the exact draw with the same
  Gumbel perturbations, and racing MH decisions against the exact decision with the same
  uniform, at states of the chain (paper: 4e-4 and 2e-3 with δ = 0.05).

Run ``OMP_NUM_THREADS=1 python benchmarks/arch_experiments.py`` (about 25 minutes on one core)
or ``--quick`` (a few minutes). Writes ``arch_experiments.json`` and ``arch_experiments.png``
into ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from scipy import special, stats

from sksubsample.algorithms import init_state
from sksubsample.datasets._arch_data import (
    load_nasdaq_returns,
    load_sp500_returns,
    simulate_arch,
)
from sksubsample.diagnostics import effective_sample_size
from sksubsample.time_series._arch_target import ARCHTarget, arch_design, inverse_softplus
from sksubsample.time_series._carlin_chib import _Chain, build_sweep, gibbs_order, laplace_fit
from sksubsample.time_series._evidence import importance_log_evidence

matplotlib.use("Agg")

METHODS = ("exact", "racing")
COLORS = {"exact": "tab:blue", "racing": "tab:red"}


def series_list(quick):
    sim = simulate_arch(13_000, alpha=(0.2, 0.25, 0.15, 0.1), nu=6.0, random_state=0)
    out = [("simulated ARCH(3), N=13000", sim, (0, 1, 2, 3, 4, 5))]
    real_orders = (6, 8, 10, 12, 14, 16)
    out.append(("S&P 500 daily", load_sp500_returns(), real_orders))
    if not quick:
        out.append(("NASDAQ daily", load_nasdaq_returns(), real_orders))
    return out


def setup(r, orders):
    r = r - r.mean(axis=0)
    y, z = arch_design(r, max(orders))
    targets = [ARCHTarget(y, z, q) for q in orders]
    var = float(r.var())
    fits = [laplace_fit(t, inverse_softplus(np.r_[0.42 * var, np.full(q, 0.3 / max(q, 1)),
                                                  5.0]))
            for q, t in zip(orders, targets, strict=True)]
    return targets, fits


def reference_evidence(targets, fits, n_draws, seed):
    """Importance-sampling log evidences (two proposals, inverse-variance pooled)."""
    rows = []
    for k, (t, f) in enumerate(zip(targets, fits, strict=True)):
        g = importance_log_evidence(t, f.mean, f.cov, n_draws=n_draws, random_state=seed + k)
        s = importance_log_evidence(t, f.mean, f.cov, n_draws=n_draws, proposal="student",
                                    scale=1.2, random_state=seed + 100 + k)
        w = np.array([g.standard_error, s.standard_error]) ** -2.0
        rows.append({"gaussian": g._asdict(), "student": s._asdict(),
                     "pooled": float((w[0] * g.log_evidence + w[1] * s.log_evidence) / w.sum()),
                     "pooled_se": float(w.sum() ** -0.5), "laplace": f.log_evidence})
    return rows


def wang_landau(sweep, n_sweeps, seed, n_checkpoints=40):
    """The adaptation phase with its trajectory of ``-log π̃`` (Fig. 2b)."""
    chain = _Chain(sweep, np.random.default_rng(seed))
    log_pi = sweep.log_adjusted_prior0.copy()
    log_eps = np.array([math.log(k.proposal.default_step_size(t.dim))
                        for k, t in zip(chain.kernels, sweep.targets, strict=True)])
    n_upd = np.zeros(len(log_pi))
    tail, tail_n = np.zeros(len(log_pi)), np.zeros(len(log_pi))
    checkpoints = set(np.unique(np.geomspace(10, n_sweeps, n_checkpoints).astype(int)))
    trace, evaluations, cpu = [], 0, 0.0
    for t in range(1, n_sweeps + 1):
        start = time.process_time()
        q, _, _, info, ev = chain.sweep_once(log_pi, log_eps)
        log_pi[q] -= 1.0 / (1.0 + t / 100.0)
        log_pi -= special.logsumexp(log_pi)
        n_upd[q] += 1
        log_eps[q] += (float(info.accepted) - 0.574) / n_upd[q] ** 0.6
        if t > n_sweeps // 2:
            tail[q] += log_eps[q]
            tail_n[q] += 1
        cpu += time.process_time() - start
        evaluations += ev
        if t in checkpoints:
            est = -log_pi - special.logsumexp(-log_pi)
            trace.append({"sweep": t, "evaluations": evaluations, "cpu": cpu,
                          "log_posterior": est.tolist()})
    seen = tail_n > 0
    log_eps[seen] = tail[seen] / tail_n[seen]
    return log_pi, log_eps, trace


def fixed_phase(sweep, log_pi, log_eps, n_sweeps, seed, n_checkpoints=25):
    """Sweeps at fixed π̃: per-sweep order, CPU time and evaluations; running estimates."""
    chain = _Chain(sweep, np.random.default_rng(seed))
    n_burn = max(10, n_sweeps // 20)
    qs = np.empty(n_sweeps, dtype=int)
    cpu = np.empty(n_sweeps)
    evals = np.empty(n_sweeps)
    states = []
    for t in range(n_burn + n_sweeps):
        start = time.process_time()
        q, _, _, _, ev = chain.sweep_once(log_pi, log_eps)
        elapsed = time.process_time() - start
        if t >= n_burn:
            i = t - n_burn
            qs[i], cpu[i], evals[i] = q, elapsed, ev
            if i % max(1, n_sweeps // 60) == 0:
                states.append([x.copy() for x in chain.xs])
    k = len(log_pi)
    indicators = (qs[:, None] == np.arange(k)).astype(float)
    trace = []
    for n in np.unique(np.geomspace(50, n_sweeps, n_checkpoints).astype(int)):
        freq = indicators[:n].mean(axis=0)
        with np.errstate(divide="ignore"):
            log_post = np.log(freq) - log_pi
        log_post -= special.logsumexp(log_post)
        ess = effective_sample_size(indicators[None, :n], method="mean")
        trace.append({"sweeps": int(n), "cpu": float(cpu[:n].sum()),
                      "log_posterior": log_post.tolist(), "min_ess": float(np.nanmin(ess))})
    return qs, cpu, evals, trace, states


def reward_variance(sweep, states):
    """Per-order and pairwise variance over terms of raw and control-variate rewards."""
    every = np.arange(sweep.n_terms)
    per_order_raw, per_order_cv, pair_raw, pair_cv = [], [], [], []
    for xs in states:
        raw = np.stack([t.loglik_terms(x, every) for t, x in zip(sweep.targets, xs,
                                                                  strict=True)])
        res = np.stack([p.residual_at(x, every) for p, x in zip(sweep.proxies, xs, strict=True)])
        per_order_raw.append(raw.var(axis=1))
        per_order_cv.append(res.var(axis=1))
        i, j = np.triu_indices(len(xs), 1)
        pair_raw.append((raw[i] - raw[j]).var(axis=1))
        pair_cv.append((res[i] - res[j]).var(axis=1))
    per_raw, per_cv = np.median(per_order_raw, axis=0), np.median(per_order_cv, axis=0)
    p_raw, p_cv = np.median(pair_raw, axis=0), np.median(pair_cv, axis=0)
    return {"per_order_raw": per_raw.tolist(), "per_order_cv": per_cv.tolist(),
            "per_order_reduction": (per_raw / per_cv).tolist(),
            "pairwise_median_raw": float(np.median(p_raw)),
            "pairwise_median_cv": float(np.median(p_cv)),
            "pairwise_median_reduction": float(np.median(p_raw / p_cv))}


def clopper_pearson(k, n, level=0.95):
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else stats.beta.ppf(a, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - a, k + 1, n - k)
    return [float(lo), float(hi)]


def racing_errors(sweep_racing, sweep_exact, log_pi, log_eps, states, n_trials, seed):
    """Racing decisions against exact ones with shared randomness, at the chain's states."""
    rng = np.random.default_rng(seed)
    chain = _Chain(sweep_racing, rng)
    gibbs_err = 0
    mh_err = mh_full_mismatch = 0
    for trial in range(n_trials):
        xs = states[trial % len(states)]
        s = int(rng.integers(1 << 31))
        a = gibbs_order(sweep_racing, xs, log_pi, np.random.default_rng(s)).sample
        b = gibbs_order(sweep_exact, xs, log_pi, np.random.default_rng(s)).sample
        gibbs_err += a != b
        # MH: propose as the kernel does, then decide with the racing test and with the exact
        # rule on the same uniform (the racing test's first draw is log u = -Exp(1)).
        q = trial % len(xs)
        kernel = chain.kernels[q]
        state = init_state(kernel, xs[q])
        eps = math.exp(log_eps[q])
        new, aux = kernel.proposal.propose(rng, state, eps, kernel.chol)
        lp_new = kernel.target.log_prior(new)
        rest = (lp_new - state.log_prior
                + kernel.proposal.log_q_ratio(state, new, None, aux, eps, kernel.chol)
                + kernel.proxy.sum_diff(state.theta, new))
        if not np.isfinite(rest):
            continue
        every = np.arange(sweep_racing.n_terms)
        full = kernel.proxy.residual_terms(state.theta, new, every)
        delta_exact = full.sum() + rest
        g = np.random.default_rng(int(rng.integers(1 << 31)))
        log_u = -copy.deepcopy(g).standard_exponential()
        info = kernel.test(lambda idx, full=full: full[idx], sweep_racing.n_terms, float(rest), g)
        exact_decision = log_u < delta_exact
        mh_err += info.accepted != exact_decision
        if info.exact and info.accepted != exact_decision:
            mh_full_mismatch += 1
    return {"n_trials": n_trials, "gibbs_errors": int(gibbs_err),
            "gibbs_rate": gibbs_err / n_trials, "gibbs_ci95": clopper_pearson(gibbs_err, n_trials),
            "mh_errors": int(mh_err), "mh_rate": mh_err / n_trials,
            "mh_ci95": clopper_pearson(mh_err, n_trials),
            "mh_full_data_mismatches": int(mh_full_mismatch)}


def run_series(name, r, orders, args, seed):
    print(f"== {name}: N = {r.shape[0]}, orders {orders}", flush=True)
    targets, fits = setup(r, orders)
    sweeps = {m: build_sweep(targets, fits, method=m, delta=args.delta, batch_size=50,
                             control_variates=True) for m in METHODS}
    out = {"name": name, "n": int(r.shape[0]), "orders": list(orders),
           "n_terms": sweeps["racing"].n_terms}
    out["reference"] = reference_evidence(targets, fits, args.is_draws, seed)
    ref = np.array([row["pooled"] for row in out["reference"]])
    ref_post = np.exp(ref - special.logsumexp(ref))
    out["reference_posterior"] = ref_post.tolist()
    out["wang_landau"] = {}
    for m in METHODS:
        log_pi, log_eps, trace = wang_landau(sweeps[m], args.warmup, seed + 1)
        out["wang_landau"][m] = trace
        if m == "racing":
            common_pi, common_eps = log_pi, log_eps
    out["fixed"] = {}
    states = None
    for m in METHODS:
        qs, cpu, evals, trace, st = fixed_phase(sweeps[m], common_pi, common_eps, args.draws,
                                                seed + 2)
        indicators = (qs[:, None] == np.arange(len(orders))).astype(float)[None]
        ess = effective_sample_size(indicators, method="mean")
        freq = indicators[0].mean(axis=0)
        with np.errstate(divide="ignore"):
            log_post = np.log(freq) - common_pi
        log_post -= special.logsumexp(log_post)
        post = np.exp(log_post)
        exact_per_sweep = sweeps[m].exact_evaluations_per_sweep()
        out["fixed"][m] = {
            "trace": trace, "cpu_seconds": float(cpu.sum()),
            "cpu_ms_per_sweep": float(1e3 * cpu.mean()),
            "fraction_data_touched": float(evals.sum() / (exact_per_sweep * len(evals))),
            "ess_indicators": ess.tolist(), "min_ess": float(np.nanmin(ess)),
            "min_ess_per_cpu_second": float(np.nanmin(ess) / cpu.sum()),
            "order_posterior": post.tolist(), "log_evidence": (log_post - log_post.max()).tolist(),
            "tv_to_reference": float(0.5 * np.abs(post - ref_post).sum()),
            "visit_frequency": freq.tolist()}
        print(f"  {m}: {1e3 * cpu.mean():.2f} ms/sweep, touched "
              f"{out['fixed'][m]['fraction_data_touched']:.3f}, min ESS {np.nanmin(ess):.0f}, "
              f"ESS/s {out['fixed'][m]['min_ess_per_cpu_second']:.1f}, p(q|r) {np.round(post, 3)}"
              f", TV to IS {out['fixed'][m]['tv_to_reference']:.4f}", flush=True)
        if m == "racing":
            states = st
    out["reference_tv_exact_racing"] = float(0.5 * np.abs(
        np.array(out["fixed"]["exact"]["order_posterior"])
        - np.array(out["fixed"]["racing"]["order_posterior"])).sum())
    out["reward_variance"] = reward_variance(sweeps["racing"], states[:20])
    rv = out["reward_variance"]
    print(f"  reward variance reduction by control variates: per order "
          f"{np.round(rv['per_order_reduction'], 0)}, pairwise median "
          f"{rv['pairwise_median_reduction']:.3g}", flush=True)
    out["racing_errors"] = racing_errors(sweeps["racing"], sweeps["exact"], common_pi,
                                         common_eps, states, args.error_trials, seed + 3)
    e = out["racing_errors"]
    print(f"  race errors: Gibbs {e['gibbs_errors']}/{e['n_trials']}, MH {e['mh_errors']}/"
          f"{e['n_trials']}", flush=True)
    return out


def plot(results, path):
    n = len(results)
    fig, axes = plt.subplots(n, 3, figsize=(14, 3.6 * n), squeeze=False)
    for row, res in zip(axes, results, strict=True):
        ref = np.array(res["reference_posterior"])
        best = int(np.argmax(ref))
        for m in METHODS:
            wl = res["wang_landau"][m]
            row[0].plot([c["evaluations"] for c in wl],
                        [np.array(c["log_posterior"]) for c in wl], color=COLORS[m], lw=1,
                        alpha=0.8)
            fx = res["fixed"][m]["trace"]
            row[1].plot([c["cpu"] for c in fx], [c["log_posterior"][best] for c in fx],
                        color=COLORS[m], label=m)
            row[2].plot([c["cpu"] for c in fx], [c["min_ess"] for c in fx], color=COLORS[m],
                        label=m)
        for v in np.log(np.maximum(ref, 1e-300)):
            row[0].axhline(max(v, -30), color="k", ls=":", lw=0.6)
        row[0].set(xscale="log", ylim=(-30, 1), xlabel="likelihood evaluations",
                   ylabel="log p(q|r) (Wang-Landau)", title=res["name"])
        row[1].axhline(np.log(ref[best]), color="k", ls=":", label="importance sampling")
        row[1].set(xscale="log", xlabel="CPU seconds (fixed π̃)",
                   ylabel=f"log p(q={res['orders'][best]}|r)")
        row[2].set(xscale="log", yscale="log", xlabel="CPU seconds (fixed π̃)",
                   ylabel="min ESS of order indicators")
        row[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delta", type=float, default=0.05)
    args = parser.parse_args()
    args.warmup = 400 if args.quick else 1000
    args.draws = 1500 if args.quick else 6000
    args.is_draws = 2000 if args.quick else 8000
    args.error_trials = 300 if args.quick else 2000
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = [run_series(name, r, orders, args, args.seed + 1000 * k)
               for k, (name, r, orders) in enumerate(series_list(args.quick))]
    suffix = "_quick" if args.quick else ""
    meta = {"quick": args.quick, "delta": args.delta, "warmup": args.warmup,
            "draws": args.draws, "is_draws": args.is_draws, "error_trials": args.error_trials}
    (out / f"arch_experiments{suffix}.json").write_text(
        json.dumps({"settings": meta, "series": results}, indent=1))
    plot(results, out / f"arch_experiments{suffix}.png")


if __name__ == "__main__":
    main()
