"""Time the compiled MH chain of the logistic estimator in two source trees, side by side.

Each tree runs in a worker process of its own (``PYTHONPATH`` set to the tree, so its package
shadows any other): the worker fits :class:`BayesianLogisticRegressionMH` with its defaults on
the data of ``logistic_peers.py`` (N = 10⁶ rows, 20 features and an intercept), then, on
request, continues its chain by ``--steps`` draws through the estimator's continuation function
(the chain alone: no diagnostics, no storage of the draws) and reports the wall time. The two
workers are asked in turn, ``--repeats`` times each, and the best time of each is compared, so
that both see the same machine load. The workers also report a digest of their draws: equal
digests mean bit-identical chains.

Usage::

    python benchmarks/mh_chain_speed.py --baseline /path/to/other/tree [--n 1000000]
        [--proposal hamiltonian|langevin|random-walk]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _digest(array):
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


def worker(n, seed, proposal):
    """Fit, print the digest of the fitted draws, then answer ``run K`` lines with
    ``<seconds> <digest of the K draws>``."""
    from logistic_peers import PRIOR_SCALE, make_data

    from sksubsample import BayesianLogisticRegressionMH

    X, y = make_data(n)
    # A short fit: what matters here is the chain's speed, not its convergence.
    warnings.filterwarnings("ignore", message="The chains have not converged")
    clf = BayesianLogisticRegressionMH(prior_scale=PRIOR_SCALE, n_draws=200, n_warmup=500,
                                       n_chains=1, n_jobs=1, random_state=seed,
                                       proposal=proposal).fit(X, y)
    sampler = clf._sampler
    state = sampler.states[0]
    print(_digest(clf._draws), flush=True)
    for line in sys.stdin:
        steps = int(line.split()[1])
        began = time.perf_counter()
        result = sampler.continue_fn(*sampler.args, steps, state)
        seconds = time.perf_counter() - began
        state = result.state
        print(f"{seconds:.6f} {_digest(result.draws)}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="the other source tree (required)")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--proposal", default="hamiltonian",
                        choices=("hamiltonian", "langevin", "random-walk"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.n, args.seed, args.proposal)
        return
    if args.baseline is None:
        parser.error("--baseline is required")
    trees = {"baseline": Path(args.baseline).resolve(), "this tree": HERE.parent}
    workers = {}
    for name, tree in trees.items():
        env = dict(os.environ, PYTHONPATH=str(tree))
        workers[name] = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--n", str(args.n), "--seed", str(args.seed),
             "--proposal", args.proposal],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=HERE)
    fitted = {name: w.stdout.readline().strip() for name, w in workers.items()}
    times = {name: [] for name in workers}
    digests = {name: [] for name in workers}
    for _ in range(args.repeats):
        for name, w in workers.items():
            w.stdin.write(f"run {args.steps}\n")
            w.stdin.flush()
            seconds, digest = w.stdout.readline().split()
            times[name].append(float(seconds))
            digests[name].append(digest)
    for w in workers.values():
        w.stdin.close()
        w.wait()
    best = {name: min(t) for name, t in times.items()}
    for name in workers:
        print(f"{name:>10}: best {best[name] / args.steps * 1e6:.3f} µs per iteration "
              f"(median {np.median(times[name]) / args.steps * 1e6:.3f}) over {args.repeats} "
              f"runs of {args.steps} draws, N = {args.n}, {args.proposal} proposal")
    print(f"ratio this tree / baseline (best): {best['this tree'] / best['baseline']:.3f}")
    identical = (fitted["baseline"] == fitted["this tree"]
                 and digests["baseline"] == digests["this tree"])
    print(f"draws bit-identical: {identical}")


if __name__ == "__main__":
    main()
