"""Fixed cost of racing arms with independent populations, against exact evaluation.

A coreference-like discrete draw: ``n_arms`` states (clusters) whose factor counts follow a
power law between ``--min-size`` and ``--max-size`` (log-uniform sizes, density ``∝ 1/N``),
each factor a stored value (one gather, about 0.02 µs: the cheapest reward there is, so the
per-round overhead of racing is fully exposed). Most clusters repel the new mention (factor
mean -0.5) and a few attract it (+0.5), so racing eliminates most arms after its first
minibatch of ``first_batch`` factors. ``sample_discrete(..., variance="independent")``
(racing, App. C.3 of Chen & Ghahramani 2016) is timed against ``method="exact"`` on the same
problems, interleaved, and the script prints:

* µs per draw for racing and for exact sampling, and their ratio (racing / exact);
* the factor evaluations of each and their ratio (exact / racing);
* the arm-rounds of racing (calls of ``log_factors``, one per surviving arm per round) and
  the µs of racing per arm-round (all of racing's time divided by its arm-rounds).

Times are medians over the draws (means are printed too): on a shared machine a few draws
are stretched by preemption, which would dominate the means of draws this short.

Run ``OMP_NUM_THREADS=1 python benchmarks/racing_independent_overhead.py`` (a few seconds).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sksubsample.algorithms import sample_discrete


def make_problem(n_arms, min_size, max_size, n_attracting, rng):
    """Per-arm factor values of a coreference-like draw (log-uniform cluster sizes)."""
    sizes = np.exp(rng.uniform(np.log(min_size), np.log(max_size + 1), n_arms))
    sizes = np.clip(sizes.astype(np.int64), min_size, max_size)
    means = np.full(n_arms, -0.5)
    means[rng.choice(n_arms, n_attracting, replace=False)] = 0.5
    values = [rng.normal(m, 1.0, n) for m, n in zip(means, sizes, strict=True)]
    return sizes, values


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-arms", type=int, default=100)
    parser.add_argument("--min-size", type=int, default=3)
    parser.add_argument("--max-size", type=int, default=2000)
    parser.add_argument("--n-attracting", type=int, default=3)
    parser.add_argument("--first-batch", type=int, default=3)
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--n-draws", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    sizes, values = make_problem(args.n_arms, args.min_size, args.max_size,
                                 args.n_attracting, rng)
    calls = [0]

    def log_factors(states, idx):
        calls[0] += 1
        return values[states[0]][idx][None, :]

    times = {"racing": [], "exact": []}
    evals = {"racing": 0, "exact": 0}
    arm_rounds = 0
    for draw in range(args.n_draws + 1):  # draw 0 warms caches up and is not timed
        for method in ("racing", "exact"):
            calls[0] = 0
            start = time.perf_counter()
            result = sample_discrete(log_factors, sizes, method=method, delta=args.delta,
                                     variance="independent", first_batch=args.first_batch,
                                     random_state=args.seed + draw)
            elapsed = time.perf_counter() - start
            if draw == 0:
                continue
            times[method].append(elapsed)
            evals[method] += result.n_evaluations
            if method == "racing":
                arm_rounds += calls[0]

    n = args.n_draws
    # Medians: on a shared machine a few draws are stretched by preemption, which would
    # dominate the means of draws this short.
    us = {m: 1e6 * np.median(times[m]) for m in times}
    mean_us = {m: 1e6 * np.mean(times[m]) for m in times}
    rounds_per_draw = arm_rounds / n
    print(f"{args.n_arms} arms, sizes {sizes.min()}..{sizes.max()} (sum {sizes.sum()}), "
          f"first_batch={args.first_batch}, delta={args.delta}, {n} draws")
    print(f"exact : {us['exact']:9.1f} us/draw (median; mean {mean_us['exact']:.1f}), "
          f"{evals['exact'] / n:9.1f} evaluations/draw")
    print(f"racing: {us['racing']:9.1f} us/draw (median; mean {mean_us['racing']:.1f}), "
          f"{evals['racing'] / n:9.1f} evaluations/draw, {rounds_per_draw:.1f} arm-rounds/draw, "
          f"{us['racing'] / rounds_per_draw:.2f} us/arm-round")
    print(f"evaluations exact/racing = {evals['exact'] / evals['racing']:.1f}; "
          f"wall time racing/exact = {us['racing'] / us['exact']:.2f} (medians)")


if __name__ == "__main__":
    main()
