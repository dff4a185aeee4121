"""Compile the package's large kernels into its kernel cache, one group per process.

``python tests/_warm_kernels.py GROUP`` runs small fits of the public API that compile (or load)
the kernels of one group. ``conftest.py`` runs the groups side by side before the workers of
``pytest -n`` start: each kernel is then compiled once, on its own core, where two workers
starting on tests of the same estimator would each compile the same kernels at the same time
(numba writes a kernel's cache only when its compile ends). A group's kernels do not depend on
another group's, so the groups never compile the same kernel twice either. With the cache
present, a group only loads it (a few seconds).

Not a test module: it asserts nothing; the tests check what these fits compute.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np


def _logistic():
    """The logistic chain on rows in memory and on rows read through a memory map, and A*
    exact draws."""
    from sksubsample.linear_model import BayesianLogisticRegressionMH

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + rng.normal(size=400) > 0).astype(int)
    fitted = BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, n_chains=1,
                                          random_state=0).fit(X, y)
    fitted.sample_exact(2, random_state=0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "X.npy"
        np.save(path, X)
        BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, n_chains=1, random_state=0).fit(
            np.load(path, mmap_mode="r"), y)


def _others():
    """ARCH's sweeps and coreference's sweeps. (The float32 chain of a memory map is left to
    the one test that needs it: compiled here, it lengthened this group more than it
    shortened the tests.)"""
    from sksubsample.cluster import CorefGibbsClusterer
    from sksubsample.datasets import simulate_arch
    from sksubsample.time_series import ARCHOrderSelector

    ARCHOrderSelector(n_draws=20, random_state=0).fit(simulate_arch(500, random_state=0))
    rng = np.random.default_rng(0)
    points = rng.normal(size=(40, 2))
    CorefGibbsClusterer(random_state=0, n_draws=2).fit(points)


GROUPS = {"logistic": _logistic, "others": _others}


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    GROUPS[sys.argv[1]]()
