"""The main job: ``python -m sksubsample.demo``.

Draws from a discrete distribution over D = 10 states whose log-probability is a sum of
N = 100 000 factors, once exactly and many times by Racing-Normal, prints how much data racing
touched, its wall-time speed-up and a chi-square comparison with the exact distribution, and
writes ``racing_demo.png`` (arms eliminated round by round and the sampled distribution).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy import stats

from sksubsample.algorithms import race, sample_discrete
from sksubsample.datasets import make_racing_problem


def racing_demo(out_dir: Path, *, n_draws: int = 2000, seed: int = 0) -> dict:
    """Racing-Normal vs exact sampling on the §5.1 problem; returns the summary numbers."""
    problem = make_racing_problem(10, 100_000, "normal", 1e-4, random_state=seed)
    rng = np.random.default_rng(seed)
    draws = np.empty(n_draws, dtype=int)
    evaluations = 0
    start = time.perf_counter()
    for i in range(n_draws):
        result = sample_discrete(problem.factors, problem.n_population, n_states=10,
                                 delta=0.05, random_state=rng)
        draws[i] = result.sample
        evaluations += result.n_evaluations
    t_racing = (time.perf_counter() - start) / n_draws
    n_exact = 50
    start = time.perf_counter()
    for _ in range(n_exact):
        sample_discrete(problem.factors, problem.n_population, n_states=10, method="exact",
                        random_state=rng)
    t_exact = (time.perf_counter() - start) / n_exact
    counts = np.bincount(draws, minlength=10)
    chi2 = stats.chisquare(counts, n_draws * problem.pmf)
    fraction = evaluations / (n_draws * problem.log_factors.size)

    # One race in detail, for the picture.
    offsets = -np.log(np.random.default_rng(seed + 1).standard_exponential(10))
    shift = offsets / problem.n_population
    one = race(lambda arms, idx: problem.factors(arms, idx) + shift[arms, None], 10,
               problem.n_population, random_state=seed + 2)

    summary = {
        "fraction_of_data": fraction,
        "evaluation_speedup": 1.0 / fraction,
        "wall_speedup": t_exact / t_racing,
        "chi2_pvalue": float(chi2.pvalue),
        "ms_per_draw_racing": 1e3 * t_racing,
        "ms_per_draw_exact": 1e3 * t_exact,
    }
    print("Racing-Normal discrete sampling (Chen & Ghahramani 2016), D = 10, N = 100 000")
    print(f"  draws                     {n_draws}")
    print(f"  data touched per draw     {100 * fraction:.2f} % of N*D")
    print(f"  per draw                  {1e3 * t_racing:.2f} ms racing vs "
          f"{1e3 * t_exact:.2f} ms exact (x{t_exact / t_racing:.1f} wall, "
          f"x{1 / fraction:.1f} in evaluations)")
    print(f"  chi-square vs exact pmf   p = {chi2.pvalue:.3f} "
          f"(a correct sampler gives p ~ Uniform(0, 1))")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    totals = problem.log_factors.sum(axis=1) + offsets
    for rnd, alive in enumerate(one.survivors, start=1):
        ax1.scatter(np.full(alive.size, rnd), totals[alive], color="tab:red", s=18)
    ax1.set_xlabel("round (minibatch doubles each round)")
    ax1.set_ylabel("perturbed log-probability of surviving states")
    ax1.set_title(f"One race: best state {one.best}, "
                  f"{one.n_evaluations / problem.log_factors.size:.1%} of rewards")
    width = 0.4
    ax2.bar(np.arange(10) - width / 2, problem.pmf, width, label="exact p(X)")
    ax2.bar(np.arange(10) + width / 2, counts / n_draws, width, label="Racing-Normal draws")
    ax2.set_xlabel("state")
    ax2.set_ylabel("probability")
    ax2.set_title(f"{n_draws} draws, chi-square p = {chi2.pvalue:.2f}")
    ax2.legend()
    fig.tight_layout()
    path = out_dir / "racing_demo.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"  wrote {path}")
    return summary


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m sksubsample.demo", description=__doc__)
    parser.add_argument("--out", default=".", help="folder for the plots (default: here)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {"racing": racing_demo(out_dir, seed=args.seed)}


if __name__ == "__main__":
    main()
