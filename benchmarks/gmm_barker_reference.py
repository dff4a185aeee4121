"""Is the minibatch Barker chain's chi-square on the GMM a bias or the Barker function's mixing?

Runs the *exact* full-data Barker test and the minibatch Barker test with the same random-walk
proposals on the Seita et al. §6.1 mixture at N = 1e5, T = 1e3 (N/T = 100 as in the paper),
three seeds each, 2000 iterations, and prints the chi-square against the binned true posterior
(0.25 x 0.25 bins). If the minibatch test were biased it would be worse than the exact Barker
test; Barker's lower acceptance rate (vs Metropolis) slows mode switching for both.

Usage::

    python benchmarks/gmm_barker_reference.py
"""

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from gmm_minibatch_mh import GaussianMixtureTarget, binned_posterior, sample_quality

from sksubsample.algorithms.mh import sample_mh


def main():
    n, temperature = 100_000, 1e3
    target = GaussianMixtureTarget(n)
    edges1, edges2, probs, _ = binned_posterior(target, temperature, bin_width=0.25)
    for var in (0.15, 0.0225):
        for test in ("barker", "minibatch_barker"):
            chis, acc = [], []
            for seed in range(3):
                res = sample_mh(target, [0.0, 1.0], n_draws=2000, n_warmup=0,
                                step_size=math.sqrt(var), preconditioner="identity", test=test,
                                temperature=temperature, random_state=seed)
                chis.append(sample_quality(res.draws, edges1, edges2, probs)[1])
                acc.append(res.acceptance_rate)
            print(f"proposal var {var:<7} {test:17s} chi-square {np.round(chis, 1)} "
                  f"acceptance {np.mean(acc):.3f}", flush=True)


if __name__ == "__main__":
    main()
