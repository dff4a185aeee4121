"""``ARCHOrderSelector``'s ``n_draws="auto"`` against the former fixed 4 000 sweeps per chain.

On a simulated ARCH(2) series (5 000 terms) and, with the ``arch`` extra, the S&P 500 daily
returns, orders 0-5, each seed fits with ``n_draws="auto"`` and with ``n_draws=4000`` in turn
(everything else at its default), and the script prints per fit the wall time, the sweeps
kept, how the rounds stopped, the worst bulk/tail ESS and R-hat of the diagnosed quantities,
the ConvergenceWarnings raised, and the largest difference between the two order posteriors
(with the larger of their Monte Carlo standard errors), then the time ratio auto / fixed.

Run ``OMP_NUM_THREADS=1 python benchmarks/arch_auto_draws.py`` (about 3 minutes); writes
``benchmarks/results/arch_auto_draws.json``.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from sksubsample import ARCHOrderSelector
from sksubsample.datasets import load_sp500_returns, simulate_arch
from sksubsample.diagnostics import ConvergenceWarning, effective_sample_size

RESULTS = Path(__file__).resolve().parent / "results"
SEEDS = (0, 1)


def series():
    out = {"simulated ARCH(2), 5 000 terms": simulate_arch(5000, (0.2, 0.3, 0.2),
                                                            random_state=0)}
    try:
        out["S&P 500 daily returns"] = load_sp500_returns()
    except ImportError as exc:
        print(f"S&P 500 skipped: {exc}")
    return out


def fit(X, n_draws, seed):
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        sel = ARCHOrderSelector(orders=range(6), n_draws=n_draws, random_state=seed).fit(X)
    seconds = time.perf_counter() - start
    return sel, {
        "seconds": seconds, "n_draws_": sel.n_draws_, "stopped": sel.convergence_["stopped"],
        "rounds": sel.convergence_["rounds"], "min_bulk_ess": float(sel.ess_.min()),
        "min_tail_ess": float(effective_sample_size(sel._draws, method="tail").min()),
        "max_rhat": float(sel.rhat_.max()),
        "warnings": [str(w.message)[:200] for w in caught
                     if issubclass(w.category, ConvergenceWarning)],
        "order_posterior": sel.order_posterior_.round(4).tolist()}


def main():
    rows = []
    for name, X in series().items():
        X = np.asarray(X, dtype=float).reshape(len(X), -1)
        for seed in SEEDS:
            auto, a = fit(X, "auto", seed)
            fixed, f = fit(X, 4000, seed)
            diff = float(np.max(np.abs(auto.order_posterior_ - fixed.order_posterior_)))
            se = float(np.max(np.maximum(auto.order_posterior_se_, fixed.order_posterior_se_)))
            row = {"series": name, "seed": seed, "auto": a, "fixed_4000": f,
                   "time_ratio": a["seconds"] / f["seconds"],
                   "max_order_posterior_difference": diff, "max_order_posterior_se": se}
            rows.append(row)
            print(f"{name}, seed {seed}: auto {a['seconds']:.1f} s ({a['n_draws_']} sweeps, "
                  f"{a['stopped']}, min bulk/tail ESS {a['min_bulk_ess']:.0f}/"
                  f"{a['min_tail_ess']:.0f}, R-hat {a['max_rhat']:.4f}, "
                  f"{len(a['warnings'])} warnings); fixed 4000: {f['seconds']:.1f} s "
                  f"({len(f['warnings'])} warnings); time auto/fixed {row['time_ratio']:.2f}; "
                  f"order posterior max |diff| {diff:.4f} (max se {se:.4f})", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "arch_auto_draws.json").write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
