"""The default ``method="auto"`` against racing and exact sampling: CPU time and evaluations.

``method="auto"`` races, and stops a race when the rewards it would still read, projected from
those it has read, cost more than the exact sums of its surviving arms; with compiled rewards
whose exact sums cost little more than a race's set-up it samples exactly from the start. The
costs it weighs (an exact term, a raced term, a race's set-up) are measured once per kind of
compiled reward function on the machine and stored (``sksubsample.algorithms._race_costs``);
NumPy callables and the ARCH sampler use fixed rough ratios (the latter measured by
``benchmarks/racing_guard.py``). Its goal: never more than 10 % slower than exact, and as fast
as racing where racing pays.

Problems (δ = 0.05 throughout):

* the paper's §5.1 problem (``make_racing_problem``, D = 10, N = 1e5, Normal factors at
  σ = 1e-5, 1e-4, 1e-3: a table lookup per factor), a NumPy callable and compiled rewards;
* a Gaussian log-likelihood of one number per factor (D = 10, N = 1e5: the cheapest computed
  factor), NumPy and compiled;
* logistic rewards ``log sigmoid(y_n x_nᵀ w_i)`` (D = 10, N = 1e5, 20 features), NumPy and
  compiled;
* the README's example (a Student-t(3) location over a grid of 21 candidates given 1e6
  observations, NumPy);
* ARCH order selection (``ARCHOrderSelector``, orders 0-5, on a simulated ARCH(2) series of
  5 000 terms and, with the ``arch`` extra, on the S&P 500 daily returns), whole fits.

For ``sample_discrete`` each seed is drawn by the three methods in turn, each timed three times
(the fastest kept, in process CPU time: the machine is shared); for the estimators whole fits
alternate between the methods, the fastest of two kept. The ratios are what to read: CPU time
of the default over exact (goal at most 1.10) and over racing, evaluations of each.

Run ``OMP_NUM_THREADS=1 python benchmarks/racing_auto.py`` (about 5 minutes; ``--quick`` for
about 2). Writes ``benchmarks/results/racing_auto.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from racing_wall_time import N_FACTORS, N_STATES, problems

from sksubsample.algorithms import sample_discrete
from sksubsample.datasets import simulate_arch
from sksubsample.time_series import ARCHOrderSelector

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("auto", "racing", "exact")


def readme_problem():
    """The README's example: a Student-t(3) location over 21 candidates, 1e6 observations."""
    rng = np.random.default_rng(0)
    data = 2.0 + rng.standard_t(3, size=1_000_000)
    locations = np.linspace(1.5, 2.5, 21)

    def log_factors(states, idx):
        z = data[idx][None, :] - locations[states][:, None]
        return -2.0 * np.log1p(z * z / 3.0)

    return log_factors, data.size, locations.size


def discrete_row(name, log_factors, n_factors, n_states, n_draws, repeats=3):
    for method in METHODS:  # compilation, caches, first-touch page faults
        sample_discrete(log_factors, n_factors, n_states=n_states, method=method,
                        random_state=0)
    cpu = dict.fromkeys(METHODS, 0.0)
    evaluations = dict.fromkeys(METHODS, 0)
    raced = 0
    for seed in range(n_draws):
        for method in METHODS:
            best = np.inf
            for _ in range(repeats):
                c0 = time.process_time()
                draw = sample_discrete(log_factors, n_factors, n_states=n_states,
                                       method=method, random_state=seed)
                best = min(best, time.process_time() - c0)
            cpu[method] += best
            evaluations[method] += draw.n_evaluations
            if method == "auto":
                raced += draw.raced
    row = {"problem": name, "kind": "sample_discrete", "n_draws": n_draws,
           "cpu_ms": {m: 1e3 * cpu[m] / n_draws for m in METHODS},
           "proportion_evaluated": {m: evaluations[m] / (n_draws * n_factors * n_states)
                                    for m in METHODS},
           "auto_over_exact": cpu["auto"] / cpu["exact"],
           "auto_over_racing": cpu["auto"] / cpu["racing"],
           "racing_over_exact": cpu["racing"] / cpu["exact"],
           "auto_raced": raced / n_draws}
    _print(row)
    return row


def arch_row(name, series, n_draws):
    cpu = dict.fromkeys(METHODS, np.inf)
    fits = {}
    for _ in range(2):
        for method in METHODS:
            c0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fits[method] = ARCHOrderSelector(orders=range(6), method=method,
                                                 n_draws=n_draws, n_warmup=300, n_chains=1,
                                                 random_state=0).fit(series)
            cpu[method] = min(cpu[method], time.process_time() - c0)
    auto = fits["auto"]
    row = {"problem": name, "kind": "ARCHOrderSelector", "n_draws": n_draws,
           "cpu_ms": {m: 1e3 * cpu[m] for m in METHODS},
           "proportion_evaluated": {m: fits[m].fraction_data_touched_ for m in METHODS},
           "auto_over_exact": cpu["auto"] / cpu["exact"],
           "auto_over_racing": cpu["auto"] / cpu["racing"],
           "racing_over_exact": cpu["racing"] / cpu["exact"],
           "auto_raced": auto.n_raced_ / auto.n_updates_,
           "auto_finished_exactly": auto.n_finished_exactly_,
           "order_posterior": {m: fits[m].order_posterior_.tolist() for m in METHODS}}
    _print(row)
    return row


def _print(row):
    cpu, ev = row["cpu_ms"], row["proportion_evaluated"]
    print(f"{row['problem']:<30} cpu ms auto {cpu['auto']:9.3f} racing {cpu['racing']:9.3f} "
          f"exact {cpu['exact']:9.3f}  auto/exact {row['auto_over_exact']:.2f} (goal <= 1.10) "
          f"auto/racing {row['auto_over_racing']:.2f}  evaluated auto {ev['auto']:.4f} "
          f"racing {ev['racing']:.4f}  raced {row['auto_raced']:.2f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n_draws = 10 if args.quick else 30
    t0 = time.time()
    # racing_wall_time's "README" problem is the Gaussian one of an earlier README.
    rows = [discrete_row(name.replace("README", "Gaussian"), f, N_FACTORS, N_STATES, n_draws)
            for name, f in problems((1e-5, 1e-4, 1e-3))]
    log_factors, n_factors, n_states = readme_problem()
    rows.append(discrete_row("README (Student-t location)", log_factors, n_factors, n_states,
                             max(5, n_draws // 3)))
    arch_draws = 300 if args.quick else 1000
    rows.append(arch_row("ARCH simulated N=5000",
                         simulate_arch(5000, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=0),
                         arch_draws))
    try:
        from sksubsample.datasets import load_sp500_returns
        returns = load_sp500_returns()
    except ImportError as error:
        print(f"skipping the S&P 500 series: {error}")
    else:
        rows.append(arch_row(f"ARCH S&P 500 N={len(returns)}", returns, arch_draws))
    out = {"settings": {"delta": 0.05, "n_draws": n_draws, "quick": args.quick,
                        "timing": "process CPU time, fastest of 3 per draw (2 per fit)"},
           "rows": rows, "seconds": time.time() - t0}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "racing_auto.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path} ({out['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
