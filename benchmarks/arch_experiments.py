"""Bayesian ARCH order selection (Chen & Ghahramani 2016, §5.2, Fig. 2, Appendix C.2).

Everything runs through the public API of :class:`sksubsample.ARCHOrderSelector` (``fit``,
``sample_more``, ``importance_log_evidence``, ``race_diagnostics`` and the fitted attributes).

* **Correctness** on a simulated ARCH(2) series of N = 20 000 (orders 0-5): the default fit,
  racing and exact, against an importance-sampling estimate of the evidences (two proposals
  built from the Laplace fits, pooled), with Monte Carlo errors; the default fit's wall time.
* **Fig. 2** on a simulated ARCH(3) series of 13 000 points (orders 0-5) and on daily S&P 500
  and NASDAQ returns (the ``arch`` package's data; orders 6-16, daily volatility has a long
  memory); the paper's Shanghai 5-minute series is not available. Per series and method: the
  Wang–Landau estimate of ``log p(q | r)`` against likelihood evaluations (Fig. 2b); then at
  fixed ``π̃`` the chains are continued in segments by ``sample_more``, exact and racing
  interleaved so that both see the same machine load, and after each segment ``p(q | r)`` and
  the smallest ESS of the order indicators are recorded against the segment's wall time
  (Fig. 2c-d). Reported: time per sweep, min-ESS per second and their ratios, ``p(q | r)``
  with delta-method and batch-means (per chain) standard errors, the total-variation
  distance between the two methods with its null distribution under Monte Carlo error alone,
  the reward variance of the Gibbs step with and without control variates, and the racing
  steps' empirical error rates.
* **NASDAQ**: independent repetitions of both methods (and of racing with δ = 0.01) to tell
  Monte Carlo error, mixing and a bias of racing apart.

Run ``OMP_NUM_THREADS=1 python benchmarks/arch_experiments.py`` (about 25 minutes on a loaded
2-core machine) or ``--quick`` (a few minutes). Writes ``arch_experiments[_quick].json`` and
``.png`` into ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from scipy import special, stats

from sksubsample import ARCHOrderSelector
from sksubsample.datasets import load_nasdaq_returns, load_sp500_returns, simulate_arch

matplotlib.use("Agg")

METHODS = ("exact", "racing")
COLORS = {"exact": "tab:blue", "racing": "tab:red"}
REAL_ORDERS = (6, 8, 10, 12, 14, 16)


def clopper_pearson(k, n, level=0.95):
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else stats.beta.ppf(a, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - a, k + 1, n - k)
    return [float(lo), float(hi)]


def finite(values):
    """A list with None for non-finite entries (valid JSON)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]


def quiet_fit(sel, r):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains warn; the diagnostics are reported
        return sel.fit(r)


def quiet_more(sel, n):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sel.sample_more(n)


def per_chain_posterior(sel):
    """``p(q | r)`` of each chain alone (common π̃): the batch means of the Monte Carlo error."""
    freq = np.stack([(sel.order_samples_ == q).mean(axis=1) for q in sel.orders_], axis=1)
    with np.errstate(divide="ignore"):
        log_post = np.log(freq) - sel.adjusted_log_prior_[None, :]
    return np.exp(log_post - special.logsumexp(log_post, axis=1, keepdims=True))


def batch_se(sel):
    per = per_chain_posterior(sel)
    return per.std(axis=0, ddof=1) / math.sqrt(per.shape[0])


def reference_evidence(sel, n_draws, seed):
    """Importance-sampling log evidences from the fit's Laplace approximations: the Gaussian
    and a wider multivariate t (df 5, scale 1.2), pooled by inverse variance."""
    g = sel.importance_log_evidence(n_draws, random_state=seed)
    t = sel.importance_log_evidence(n_draws, proposal="student", scale=1.2,
                                    random_state=seed + 1)
    w = np.stack([g["standard_error"], t["standard_error"]]) ** -2.0
    pooled = (w[0] * g["log_evidence"] + w[1] * t["log_evidence"]) / w.sum(axis=0)
    pooled_se = w.sum(axis=0) ** -0.5
    z = (g["log_evidence"] - t["log_evidence"]) / np.hypot(g["standard_error"],
                                                           t["standard_error"])
    post = np.exp(pooled - special.logsumexp(pooled))
    # Delta method: d p_j / d log E_k = p_j (δ_jk - p_k).
    jac = np.diag(post) - np.outer(post, post)
    post_se = np.sqrt((jac**2) @ pooled_se**2)
    return {"gaussian": {k: v.tolist() for k, v in g.items()},
            "student": {k: v.tolist() for k, v in t.items()},
            "proposals_z": z.tolist(), "pooled": pooled.tolist(), "pooled_se": pooled_se.tolist(),
            "relative": (pooled - pooled.max()).tolist(), "posterior": post.tolist(),
            "posterior_se": post_se.tolist()}


def summary(sel, ref_post=None):
    out = {"order_posterior": sel.order_posterior_.tolist(),
           "order_posterior_se": sel.order_posterior_se_.tolist(),
           "order_posterior_se_batch": batch_se(sel).tolist(),
           "log_evidence": sel.log_evidence_.tolist(),
           "log_evidence_se": sel.log_evidence_se_.tolist(),
           "ess_indicators": sel.order_ess_.tolist(), "min_ess": float(sel.order_ess_.min()),
           "visit_frequency": [float((sel.order_samples_ == q).mean()) for q in sel.orders_],
           "fraction_data_touched": float(sel.fraction_data_touched_),
           "acceptance_rate": float(sel.acceptance_rate_),
           "n_draws_per_chain": int(sel.order_samples_.shape[1])}
    if ref_post is not None:
        out["tv_to_reference"] = float(0.5 * np.abs(sel.order_posterior_ - ref_post).sum())
    return out


def tv_with_null(a, b, n_boot, rng):
    """TV between two fits' ``p(q | r)`` and its distribution under Monte Carlo error alone.

    Under the null both estimates scatter around one posterior (their pooled mean) with their
    batch-means covariances; the bootstrap draws both, renormalises and takes the TV.
    """
    pa, pb = per_chain_posterior(a), per_chain_posterior(b)
    ma, mb = a.order_posterior_, b.order_posterior_
    centre = 0.5 * (ma + mb)
    ca = np.cov(pa.T, ddof=1) / pa.shape[0]
    cb = np.cov(pb.T, ddof=1) / pb.shape[0]
    draws = []
    for _ in range(n_boot):
        xa = np.clip(rng.multivariate_normal(centre, ca, method="eigh"), 0.0, None)
        xb = np.clip(rng.multivariate_normal(centre, cb, method="eigh"), 0.0, None)
        draws.append(0.5 * np.abs(xa / xa.sum() - xb / xb.sum()).sum())
    draws = np.array(draws)
    se = np.sqrt(np.diag(ca) + np.diag(cb))
    z = (ma - mb) / np.maximum(se, 1e-300)
    return {"tv": float(0.5 * np.abs(ma - mb).sum()), "tv_null_mean": float(draws.mean()),
            "tv_null_q95": float(np.quantile(draws, 0.95)),
            "tv_p_value": float(np.mean(draws >= 0.5 * np.abs(ma - mb).sum())),
            "z_per_order": z.tolist()}


# ----------------------------------------------------------------------------- experiments


def correctness(args):
    """ARCH(2), N = 20 000: the default estimator against importance sampling."""
    n = 20_000 if not args.quick else 6_000
    r = simulate_arch(n, alpha=(0.2, 0.3, 0.2), nu=6.0, random_state=args.seed)
    out = {"name": f"simulated ARCH(2), N={n}", "n": n, "orders": list(range(6)),
           "alpha": [0.2, 0.3, 0.2], "nu": 6.0, "methods": {}}
    fits = {}
    for method in METHODS:
        # (4 000 draws: the settings of the committed results, before n_draws="auto")
        options = {"n_draws": 4000} if not args.quick else {"n_draws": 1500, "n_warmup": 400}
        sel = ARCHOrderSelector(method=method, n_jobs=args.jobs, random_state=args.seed,
                                **options)
        start = time.perf_counter()
        quiet_fit(sel, r)
        seconds = time.perf_counter() - start
        fits[method] = sel
        out["methods"][method] = {"fit_seconds": seconds, **summary(sel)}
        print(f"  {method}: fit {seconds:.1f} s, log evidence {np.round(sel.log_evidence_, 2)}"
              f" ± {np.round(sel.log_evidence_se_, 2)}", flush=True)
    out["reference"] = reference_evidence(fits["racing"], args.is_draws, args.seed + 7)
    ref = out["reference"]
    for method in METHODS:
        sel = fits[method]
        rel = np.array(ref["relative"])
        se = np.hypot(sel.log_evidence_se_, np.array(ref["pooled_se"]))
        best = int(np.argmax(rel))
        se[best] = 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (sel.log_evidence_ - rel) / se
        out["methods"][method]["log_evidence_z_vs_reference"] = np.where(
            np.isfinite(z), z, 0.0).tolist()
        out["methods"][method]["tv_to_reference"] = float(
            0.5 * np.abs(sel.order_posterior_ - np.array(ref["posterior"])).sum())
    print(f"  IS log evidence {np.round(ref['relative'], 2)}", flush=True)
    out["tv_exact_racing"] = tv_with_null(fits["racing"], fits["exact"], 2000,
                                          np.random.default_rng(args.seed))
    return out


def series_list(args):
    sim = simulate_arch(13_000, alpha=(0.2, 0.25, 0.15, 0.1), nu=6.0, random_state=0)
    out = [("simulated ARCH(3), N=13000", sim, tuple(range(6)))]
    out.append(("S&P 500 daily", load_sp500_returns(), REAL_ORDERS))
    out.append(("NASDAQ daily", load_nasdaq_returns(), REAL_ORDERS))
    return out


def fig2(name, r, orders, args, seed):
    """Wang–Landau trace, then interleaved timed segments at fixed π̃."""
    print(f"== {name}: N = {r.shape[0]}, orders {orders}", flush=True)
    out = {"name": name, "n": int(r.shape[0]), "orders": list(orders), "methods": {}}
    fits, traces, seconds = {}, {m: [] for m in METHODS}, dict.fromkeys(METHODS, 0.0)
    for method in METHODS:
        sel = ARCHOrderSelector(orders=orders, method=method, n_draws=args.first,
                                n_warmup=args.warmup, n_chains=args.chains, n_jobs=1,
                                random_state=seed)
        start = time.perf_counter()
        quiet_fit(sel, r)
        out["methods"][method] = {"fit_seconds": time.perf_counter() - start}
        fits[method] = sel
        wl = sel.adaptation_log_posterior_[0]
        ev = sel.adaptation_n_evaluations_[0]
        keep = np.unique(np.geomspace(1, wl.shape[0], 40).astype(int)) - 1
        out["methods"][method]["warmup_trace"] = {"evaluations": ev[keep].tolist(),
                                                  "log_posterior": wl[keep].tolist()}
    out["n_terms"] = int(fits["racing"].n_terms_)
    for k in range(args.segments):
        for method in METHODS if k % 2 == 0 else METHODS[::-1]:
            sel = fits[method]
            start = time.perf_counter()
            quiet_more(sel, args.segment)
            seconds[method] += time.perf_counter() - start
            traces[method].append({"seconds": seconds[method],
                                   "sweeps": int(sel.order_samples_.shape[1]),
                                   "min_ess": float(sel.order_ess_.min()),
                                   "log_posterior": finite(sel.log_evidence_ + np.log(
                                       sel.order_posterior_.max()))})
    out["reference"] = reference_evidence(fits["racing"], args.is_draws, seed + 5)
    ref_post = np.array(out["reference"]["posterior"])
    out["reference_posterior"] = out["reference"]["posterior"]
    timed_sweeps = args.chains * args.segments * args.segment
    for method in METHODS:
        sel = fits[method]
        m = out["methods"][method]
        m.update(summary(sel, ref_post))
        m["trace"] = traces[method]
        m["sample_seconds"] = seconds[method]
        m["ms_per_sweep"] = 1e3 * seconds[method] / timed_sweeps
        # ESS gained over the timed segments (the first draws came with the fit).
        m["min_ess_per_second"] = (traces[method][-1]["min_ess"] - 0.0) / seconds[method]
        print(f"  {method}: {m['ms_per_sweep']:.3f} ms/sweep, touched "
              f"{m['fraction_data_touched']:.3f}, min ESS {m['min_ess']:.0f}, ESS/s "
              f"{m['min_ess_per_second']:.1f}, p(q|r) {np.round(sel.order_posterior_, 3)}, "
              f"TV to IS {m['tv_to_reference']:.4f}", flush=True)
    ex, ra = out["methods"]["exact"], out["methods"]["racing"]
    out["speedup"] = {"per_sweep": ex["ms_per_sweep"] / ra["ms_per_sweep"],
                      "min_ess_per_second": ra["min_ess_per_second"] / ex["min_ess_per_second"]}
    out["tv_exact_racing"] = tv_with_null(fits["racing"], fits["exact"], 2000,
                                          np.random.default_rng(seed))
    out["reference_tv_exact_racing"] = out["tv_exact_racing"]["tv"]
    diag = fits["racing"].race_diagnostics(args.error_states, random_state=seed + 3)
    n_states, n_tests = diag["n_states"], diag["mh_tests"]
    out["racing_errors"] = {
        "n_trials": n_states, "gibbs_errors": diag["gibbs_errors"],
        "gibbs_rate": diag["gibbs_errors"] / n_states,
        "gibbs_ci95": clopper_pearson(diag["gibbs_errors"], n_states),
        "mh_tests": n_tests, "mh_errors": diag["mh_errors"],
        "mh_rate": diag["mh_errors"] / max(n_tests, 1),
        "mh_ci95": clopper_pearson(diag["mh_errors"], max(n_tests, 1)),
        "gibbs_fraction": diag["gibbs_fraction"]}
    raw, cv = diag["per_order_variance_raw"], diag["per_order_variance_cv"]
    out["reward_variance"] = {
        "per_order_raw": raw.tolist(), "per_order_cv": cv.tolist(),
        "per_order_reduction": (raw / cv).tolist(),
        "pairwise_median_raw": diag["pairwise_variance_raw"],
        "pairwise_median_cv": diag["pairwise_variance_cv"],
        "pairwise_median_reduction": diag["pairwise_variance_raw"]
        / diag["pairwise_variance_cv"]}
    tv = out["tv_exact_racing"]
    print(f"  speed-up per sweep {out['speedup']['per_sweep']:.1f}x, min-ESS/s "
          f"{out['speedup']['min_ess_per_second']:.1f}x; TV exact-racing "
          f"{tv['tv']:.4f} (null mean {tv['tv_null_mean']:.4f},"
          f" q95 {tv['tv_null_q95']:.4f}); race errors Gibbs "
          f"{diag['gibbs_errors']}/{n_states}, MH {diag['mh_errors']}/{n_tests}; pairwise "
          f"variance reduction {out['reward_variance']['pairwise_median_reduction']:.3g}",
          flush=True)
    return out


def nasdaq_investigation(args):
    """Independent repetitions on NASDAQ: Monte Carlo error, mixing, or a bias of racing?"""
    r = load_nasdaq_returns()
    variants = {"exact": {"method": "exact"}, "racing": {"method": "racing"},
                "racing_delta_0.01": {"method": "racing", "delta": 0.01}}
    out = {"n_repeats": args.repeats, "n_draws": args.repeat_draws, "variants": {}}
    for key, params in variants.items():
        rows = []
        for k in range(args.repeats):
            sel = ARCHOrderSelector(orders=REAL_ORDERS, n_draws=args.repeat_draws,
                                    n_warmup=args.warmup, n_chains=args.chains, n_jobs=args.jobs,
                                    random_state=1000 + k, **params)
            quiet_fit(sel, r)
            rows.append({"order_posterior": sel.order_posterior_.tolist(),
                         "order_posterior_se": sel.order_posterior_se_.tolist(),
                         "order_posterior_se_batch": batch_se(sel).tolist(),
                         "visit_frequency": [float((sel.order_samples_ == q).mean())
                                             for q in REAL_ORDERS],
                         "adjusted_log_prior": sel.adjusted_log_prior_.tolist(),
                         "ess_indicators": sel.order_ess_.tolist()})
        post = np.array([row["order_posterior"] for row in rows])
        se = np.array([row["order_posterior_se"] for row in rows])
        out["variants"][key] = {
            "repeats": rows, "mean": post.mean(axis=0).tolist(),
            "sd_across_repeats": post.std(axis=0, ddof=1).tolist(),
            "mean_reported_se": se.mean(axis=0).tolist(),
            "se_of_mean": (post.std(axis=0, ddof=1) / math.sqrt(len(rows))).tolist()}
        print(f"  NASDAQ {key}: mean p(q|r) {np.round(post.mean(axis=0), 3)}, sd across "
              f"repeats {np.round(post.std(axis=0, ddof=1), 3)}, mean reported se "
              f"{np.round(se.mean(0), 3)}", flush=True)
    ex = out["variants"]["exact"]
    for key in ("racing", "racing_delta_0.01"):
        va = out["variants"][key]
        diff = np.array(va["mean"]) - np.array(ex["mean"])
        se = np.hypot(va["se_of_mean"], ex["se_of_mean"])
        out["variants"][key]["difference_to_exact"] = diff.tolist()
        out["variants"][key]["difference_z"] = (diff / np.maximum(se, 1e-300)).tolist()
        out["variants"][key]["tv_of_means_to_exact"] = float(0.5 * np.abs(diff).sum())
        print(f"  {key} - exact: {np.round(diff, 3)}, z {np.round(diff / se, 2)}", flush=True)
    return out


# ----------------------------------------------------------------------------- figure


def plot(results, path):
    series = results["series"]
    n = len(series)
    fig, axes = plt.subplots(n, 4, figsize=(18, 3.6 * n), squeeze=False)
    for row, res in zip(axes, series, strict=True):
        ref = np.array(res["reference_posterior"])
        best = int(np.argmax(ref))
        for method in METHODS:
            m = res["methods"][method]
            wl = m["warmup_trace"]
            row[0].plot(wl["evaluations"], np.maximum(np.array(wl["log_posterior"]), -30),
                        color=COLORS[method], lw=1, alpha=0.8)
            tr = m["trace"]
            row[1].plot([c["seconds"] for c in tr],
                        [np.nan if c["log_posterior"][best] is None else c["log_posterior"][best]
                         for c in tr],
                        color=COLORS[method], label=method)
            row[2].plot([c["seconds"] for c in tr], [c["min_ess"] for c in tr],
                        color=COLORS[method], label=method)
        for v in np.log(np.maximum(ref, 1e-300)):
            row[0].axhline(max(v, -30), color="k", ls=":", lw=0.6)
        row[0].set(xscale="log", ylim=(-31, 1), xlabel="likelihood evaluations",
                   ylabel="log p(q|r), Wang-Landau", title=res["name"])
        row[1].axhline(np.log(ref[best]), color="k", ls=":", label="importance sampling")
        row[1].set(xscale="log", xlabel="wall seconds (fixed π̃)",
                   ylabel=f"log p(q={res['orders'][best]}|r)")
        row[2].set(xscale="log", yscale="log", xlabel="wall seconds (fixed π̃)",
                   ylabel="min ESS, order indicators")
        rv = res["reward_variance"]
        x = np.arange(len(res["orders"]))
        row[3].bar(x - 0.2, rv["per_order_raw"], 0.4, label="raw ℓ_t")
        row[3].bar(x + 0.2, rv["per_order_cv"], 0.4, label="control-variate residual")
        row[3].set(yscale="log", xticks=x, xticklabels=res["orders"], xlabel="order q",
                   ylabel="variance over terms")
        row[1].legend(fontsize=8)
        row[3].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="n_jobs of the untimed fits")
    args = parser.parse_args()
    quick = args.quick
    args.warmup = 300 if quick else 1000
    args.chains = 4
    args.first = 200 if quick else 500
    args.segments = 4 if quick else 10
    args.segment = 250 if quick else 600
    args.is_draws = 2000 if quick else 8000
    args.error_states = 300 if quick else 2000
    args.repeats = 2 if quick else 5
    args.repeat_draws = 1000 if quick else 4000
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    print("== correctness: simulated ARCH(2)", flush=True)
    results = {"correctness": correctness(args)}
    results["series"] = [fig2(name, r, orders, args, args.seed + 1000 * k)
                         for k, (name, r, orders) in enumerate(series_list(args))]
    print("== NASDAQ repetitions", flush=True)
    results["nasdaq_investigation"] = nasdaq_investigation(args)
    suffix = "_quick" if quick else ""
    results["settings"] = {
        "quick": quick, "delta": 0.05, "warmup": args.warmup, "chains": args.chains,
        "first_draws": args.first, "segments": args.segments, "segment_sweeps": args.segment,
        "is_draws": args.is_draws, "error_states": args.error_states, "repeats": args.repeats,
        "repeat_draws": args.repeat_draws, "seed": args.seed, "jobs": args.jobs,
        "command": "OMP_NUM_THREADS=1 python benchmarks/arch_experiments.py"
                   + (" --quick" if quick else ""),
        "argv": sys.argv[1:], "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "seconds": time.perf_counter() - began}
    (out / f"arch_experiments{suffix}.json").write_text(json.dumps(results, indent=1))
    plot(results, out / f"arch_experiments{suffix}.png")
    print(f"done in {time.perf_counter() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
