"""The guard of Racing-Normal's normal approximation: error at δ with and without it, and what it
reads.

Racing-Normal (Chen & Ghahramani 2016, Eq. 5 with the Normal bound) eliminates a state when the
mean of its sampled differences to the leader is far enough below zero *under a normal
approximation* of that mean. Where a state's advantage sits in a handful of factors, a sample
that has not met them shows no spread (or a few huge values among many small ones), and the
bound trusts it. The guard (``race(..., guard=True)``, the default) holds such eliminations back:
a race reads on while the sample behind an elimination has no spread, a mean whose skewness
exceeds 1, or fewer draws than its kurtosis asks for.

Part 1, adversarial problems (D = 20 states, N = 50 000 factors, δ = 0.05; state 0 is the
favoured one, exact probability about 0.13 unless said otherwise):

* ``spike k``: state 0's advantage is carried by ``k`` factors, the others are zero (or carry
  Gaussian noise of the stated size, the same for every state in law);
* ``reversal k``: state 0 is slightly worse on every ordinary factor and ``k`` spikes more than
  make up for it (the hardest case: a sample without spikes points the wrong way);
* ``Student-t 2.1``: heavy-tailed factors (infinite kurtosis) with small mean gaps;
* ``outliers``: Gaussian factors with a few gross outliers (3 terms, 0.1 % and 1 % of them).

Each problem draws ``--draws`` states with the guard off (``method="racing", guard=False``: the
bound as the paper states it), with the guard on (``method="racing"``) and with the default
(``method="auto"``), each against the exact draw of the same seed (same Gumbel perturbations):
the share of draws that differ is an upper bound on the total variation from the exact
distribution (a coupling), printed with its 95 % Clopper–Pearson upper limit. Also printed: the
empirical total variation against the exact probabilities and its Monte Carlo level (the mean
TV of as many exact draws), the favoured state's frequency, the proportion of the N × D factors
evaluated and the guard's triggers per draw.

Two cases are beyond any guard that reads only a sample, and the script shows them as such: a
few spikes hidden under per-factor noise (the sample looks normal because it has met none of
them), and three gross outliers among 50 000. Where such terms may exist, use
``method="exact"`` or the EBS bound with a range.

Part 2, the paper's §5.1 problems (``make_racing_problem``, D = 10, N = 1e5, Normal, Uniform
and LogNormal(0, 2) factors at three noise levels, δ = 0.05): the proportion of factors read
with and without the guard (target: at most 20 % more) and the error rates.

Part 3, ARCH order selection (``ARCHOrderSelector(method="racing")`` on a simulated ARCH(2)
series with Student-t innovations, N = 5 000): the proportion of terms read with and without the
guard (the guard cannot be switched off from the estimator; the script passes ``guard=False``
to the chain's race configuration) and the per-term cost of racing and exact terms.

Run ``OMP_NUM_THREADS=1 python benchmarks/racing_guard.py`` (about 6 minutes on a 2-core
machine; ``--quick`` for about 2). Writes ``benchmarks/results/racing_guard.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from sksubsample.algorithms import kernels, sample_discrete
from sksubsample.datasets import make_racing_problem, simulate_arch
from sksubsample.time_series import ARCHOrderSelector, _chain_model

RESULTS = Path(__file__).resolve().parent / "results"
D, N = 20, 50_000
P_FAVOURED = 0.13
SETTINGS = {
    "guard off": {"method": "racing", "guard": False},
    "guard on": {"method": "racing"},
    "default (auto)": {},
}


# ----------------------------------------------------------------------------- problems


def _advantage():
    """Total log advantage giving state 0 probability 0.13 against 19 equal states."""
    return np.log(P_FAVOURED * (D - 1) / (1 - P_FAVOURED))


def spike(k, noise, seed=0):
    rng = np.random.default_rng(seed)
    factors = noise * rng.standard_normal((D, N))
    factors[0, rng.choice(N, size=k, replace=False)] += _advantage() / k
    return factors


def reversal(k, noise, seed=0, deficit=2.0):
    """State 0 loses ``deficit`` nats over its ordinary factors and wins it back, and its
    advantage, on ``k`` spikes."""
    rng = np.random.default_rng(seed)
    factors = noise * rng.standard_normal((D, N))
    factors -= factors.mean(axis=1, keepdims=True)
    spikes = rng.choice(N, size=k, replace=False)
    factors[0] -= deficit / (N - k)
    factors[0, spikes] += (_advantage() + deficit) / k + deficit / (N - k)
    return factors


def student_t(seed=0):
    rng = np.random.default_rng(seed)
    factors = 0.01 * rng.standard_t(2.1, size=(D, N))
    factors += (np.linspace(0, 1.5, D) / N)[:, None] - factors.mean(axis=1, keepdims=True)
    return factors


def outliers(count, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    factors = 1e-3 * rng.standard_normal((D, N))
    where = rng.choice(N, size=count, replace=False)
    factors[:, where] += scale * rng.standard_normal((D, count))
    factors += (np.linspace(0, 2.0, D) / N)[:, None]
    return factors


def adversarial_problems():
    """``(name, factors, detectable)``: ``detectable`` is False where no sample-based guard can
    see the terms that matter."""
    return [
        ("spike 5", spike(5, 0.0), True),
        ("spike 25", spike(25, 0.0), True),
        ("spike 200", spike(200, 0.0), True),
        ("reversal 25", reversal(25, 0.0), True),
        ("reversal 500, noise 1e-4", reversal(500, 1e-4), True),
        ("spike 500, noise 1e-5", spike(500, 1e-5), True),
        ("Student-t 2.1", student_t(), True),
        ("outliers 0.1 %", outliers(50), True),
        ("outliers 1 %", outliers(500), True),
        ("spike 25, noise 1e-6 (hidden)", spike(25, 1e-6), False),
        ("3 gross outliers (hidden)", outliers(3, scale=1.0), False),
    ]


# ----------------------------------------------------------------------------- part 1


def tv_noise_level(p, n_draws, rng, reps=200):
    """Mean total variation between ``n_draws`` exact draws' frequencies and ``p``."""
    counts = rng.multinomial(n_draws, p, size=reps)
    return float(np.mean(0.5 * np.abs(counts / n_draws - p).sum(axis=1)))


def clopper_pearson_upper(k, n, level=0.95):
    return 1.0 if k >= n else float(stats.beta.ppf(level, k + 1, n - k))


def adversarial_row(name, factors, detectable, n_draws, delta):
    sums = factors.sum(axis=1)
    p = np.exp(sums - sums.max())
    p /= p.sum()

    def log_factors(states, idx):
        return factors[np.ix_(states, idx)]

    exact = [sample_discrete(log_factors, N, n_states=D, method="exact", random_state=s).sample
             for s in range(n_draws)]
    row = {"problem": name, "detectable": detectable, "exact_p_favoured": float(p[0]),
           "tv_noise_level": tv_noise_level(p, n_draws, np.random.default_rng(1)),
           "settings": {}}
    for label, options in SETTINGS.items():
        counts = np.zeros(D)
        differ = evaluations = guarded = raced = 0
        for s in range(n_draws):
            draw = sample_discrete(log_factors, N, n_states=D, delta=delta, random_state=s,
                                   **options)
            counts[draw.sample] += 1
            differ += draw.sample != exact[s]
            evaluations += draw.n_evaluations
            guarded += draw.n_guarded
            raced += draw.raced
        row["settings"][label] = {
            "coupled_error": differ / n_draws,
            "coupled_error_upper95": clopper_pearson_upper(differ, n_draws),
            "tv": float(0.5 * np.abs(counts / n_draws - p).sum()),
            "p_favoured": counts[0] / n_draws,
            "proportion_evaluated": evaluations / (n_draws * N * D),
            "guarded_per_draw": guarded / n_draws,
            "raced": raced / n_draws,
        }
        r = row["settings"][label]
        print(f"{name:<32} {label:<15} coupled error {r['coupled_error']:.3f} "
              f"(<= {r['coupled_error_upper95']:.3f})  TV {r['tv']:.3f} "
              f"(MC level {row['tv_noise_level']:.3f})  p0 {r['p_favoured']:.3f}/{p[0]:.3f}  "
              f"evaluated {r['proportion_evaluated']:.4f}  guarded {r['guarded_per_draw']:.1f}",
              flush=True)
    return row


# ----------------------------------------------------------------------------- part 2


def paper_row(distribution, noise, n_draws, delta):
    problem = make_racing_problem(10, 100_000, distribution, noise, random_state=0)
    row = {"distribution": distribution, "noise": noise}
    for label, guard in (("guard off", False), ("guard on", True)):
        evaluations = errors = 0
        for s in range(n_draws):
            draw = sample_discrete(problem.factors, problem.n_population,
                                   n_states=problem.n_arms, delta=delta, method="racing",
                                   guard=guard, random_state=s)
            exact = sample_discrete(problem.factors, problem.n_population,
                                    n_states=problem.n_arms, method="exact", random_state=s)
            evaluations += draw.n_evaluations
            errors += draw.sample != exact.sample
        row[label] = {"proportion_evaluated": evaluations / (n_draws * problem.n_population
                                                               * problem.n_arms),
                      "coupled_error": errors / n_draws}
    row["read_ratio"] = (row["guard on"]["proportion_evaluated"]
                         / row["guard off"]["proportion_evaluated"])
    print(f"§5.1 {distribution:<9} sigma={noise:.0e}  read with/without guard "
          f"{row['guard on']['proportion_evaluated']:.4f}/"
          f"{row['guard off']['proportion_evaluated']:.4f} = x{row['read_ratio']:.3f} "
          f"(target <= 1.2)  errors {row['guard on']['coupled_error']:.3f}/"
          f"{row['guard off']['coupled_error']:.3f}", flush=True)
    return row


# ----------------------------------------------------------------------------- part 3


def arch_rows(n_terms, n_draws):
    series = simulate_arch(n_terms, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=0)
    original = _chain_model.race_config
    rows = []
    with warnings.catch_warnings():  # compile (or load) the sweeps before timing them
        warnings.simplefilter("ignore")
        for method in ("racing", "exact"):
            ARCHOrderSelector(orders=range(6), method=method, n_draws=20, n_warmup=20,
                              n_chains=1, random_state=0).fit(series)
    try:
        for label, guard, method in (("guard off", False, "racing"),
                                     ("guard on", True, "racing"),
                                     ("exact", True, "exact")):
            _chain_model.race_config = functools.partial(kernels.race_config, guard=guard)
            c0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sel = ARCHOrderSelector(orders=range(6), method=method, n_draws=n_draws,
                                        n_warmup=300, n_chains=1, random_state=0).fit(series)
            cpu = time.process_time() - c0
            rows.append({"setting": label, "fraction_data_touched": sel.fraction_data_touched_,
                         "n_raced": sel.n_raced_, "n_guarded": sel.n_guarded_,
                         "n_updates": sel.n_updates_, "cpu_seconds": cpu,
                         "ns_per_evaluation": 1e9 * cpu / sel.n_evaluations_,
                         "order_posterior": sel.order_posterior_.tolist()})
            print(f"ARCH N={n_terms} {label:<10} touched {sel.fraction_data_touched_:.4f} "
                  f"guarded {sel.n_guarded_}/{sel.n_raced_} races  cpu {cpu:.2f} s "
                  f"({rows[-1]['ns_per_evaluation']:.0f} ns per term)", flush=True)
    finally:
        _chain_model.race_config = original
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--draws", type=int, default=None)
    args = parser.parse_args(argv)
    n_draws = args.draws or (150 if args.quick else 500)
    delta = 0.05
    t0 = time.time()
    adversarial = [adversarial_row(name, f, ok, n_draws, delta)
                   for name, f, ok in adversarial_problems()]
    paper = [paper_row(dist, noise, max(50, n_draws // 3), delta)
             for dist in ("normal", "uniform", "lognormal") for noise in (1e-5, 1e-4, 1e-3)]
    arch = arch_rows(5000, 300 if args.quick else 1000)
    out = {"settings": {"n_states": D, "n_factors": N, "delta": delta, "n_draws": n_draws,
                        "quick": args.quick},
           "adversarial": adversarial, "paper": paper, "arch": arch,
           "seconds": time.time() - t0}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "racing_guard.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path} ({out['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
