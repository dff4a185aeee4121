"""Compile the package's large kernels into its kernel cache, one group per process.

``python tests/_warm_kernels.py GROUP`` runs small fits of the public API that compile (or load)
the kernels of one group. ``conftest.py`` runs the groups side by side (more groups than cores:
the groups' compile times differ, and the cores share them) before the workers of
``pytest -n`` start: each kernel is then compiled once, where two workers
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


def _arch():
    """ARCH's sweeps."""
    from sksubsample.datasets import simulate_arch
    from sksubsample.time_series import ARCHOrderSelector

    ARCHOrderSelector(n_draws=20, random_state=0).fit(simulate_arch(500, random_state=0))


def _coreference():
    """Coreference's sweeps: on points, on a precomputed matrix with races, and the records
    model of compared record pairs on both of its layouts."""
    from sksubsample.cluster import CorefGibbsClusterer, RecordPairs

    rng = np.random.default_rng(0)
    CorefGibbsClusterer(random_state=0, n_draws=2).fit(rng.normal(size=(40, 2)))
    log_odds = np.triu(rng.normal(-0.3, 1.2, size=(5, 5)), 1)
    CorefGibbsClusterer(metric="precomputed", method="racing", n_draws=2,
                        random_state=0).fit(log_odds + log_odds.T)
    i, j = np.triu_indices(5, 1)
    exact = rng.random((i.size, 2)) < 0.5
    log_bf = np.where(exact, 2.0, -1.5)
    pairs = RecordPairs(ids=np.arange(5), pairs=np.column_stack([i, j]),
                        log_odds=log_bf.sum(1) - 2.0, proposed=np.ones(i.size, bool),
                        comparisons=("c0", "c1"), comparison_log_bf=log_bf, exact=exact,
                        null=np.zeros_like(exact), log_m_exact=np.log([0.9, 0.8]),
                        prior_log_odds=-2.0)
    CorefGibbsClusterer(metric="precomputed", n_draws=2, random_state=0).fit(pairs)
    # The sparse layout of large components, here for a small one (the sweeps' kernels of
    # that layout are as large as the dense layout's).
    from sksubsample.cluster import _records

    dense_up_to, _records.DENSE_UP_TO = _records.DENSE_UP_TO, 0
    try:
        CorefGibbsClusterer(metric="precomputed", n_draws=2, random_state=0).fit(pairs)
    finally:
        _records.DENSE_UP_TO = dense_up_to


GROUPS = {"logistic": _logistic, "arch": _arch, "coreference": _coreference}


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    GROUPS[sys.argv[1]]()
