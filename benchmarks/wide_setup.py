"""The set-up of a logistic fit on wide designs: the start subsample sized for the step from its
MAP, against a start subsample of a sixteenth of the rows alone.

Newton's method over all the rows starts from the MAP of a subsample of m rows, about
``δ = sqrt(d (N / m - 1))`` posterior standard deviations from the MAP; its first step ends
about ``START_RATE δ² / sqrt(N)`` from it, and a step that ends past half a standard deviation
takes a third pass over the rows. A sixteenth of the rows is near enough at d = 20 but not at
d = 100 and more, so the set-up sizes the start subsample for the step to end within
``START_LANDING`` (see ``sksubsample.algorithms.glm._setup``). Here, for each shape, in one
process and side by side (medians of five fits, alternating): the fit's set-up (until the
chains start) with the sized start subsample, and with the share alone (``START_LANDING``
infinite), with their passes over the rows and one read of the rows (float32, from the page
cache, on one thread) for scale.

Run ``OMP_NUM_THREADS=1 python benchmarks/wide_setup.py [--out PATH]`` (about two minutes;
the rows are written to a temporary folder and removed).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from out_of_core import _estimator_class, _SetupDone

import sksubsample.algorithms.glm._setup as setup_module

SHAPES = ((4_000_000, 20), (2_000_000, 50), (1_000_000, 100), (500_000, 200))
REPEATS = 5


def _rows(n, d, seed=0):
    """Standardized float32 features whose linear predictor has unit scale, and 0/1 labels."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    beta = rng.standard_normal(d) / math.sqrt(d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta + 0.3)))).astype(np.int8)
    return X, y


def _one_read(path):
    buffer = bytearray(1 << 26)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buffer):
                pass
        times.append(time.perf_counter() - start)
    return min(times)


def _setup(Timed, X, y, landing):
    """The fit's set-up seconds and its passes over the rows, the start subsample sized for
    ``landing`` (infinite: the share alone)."""
    from sksubsample.algorithms.glm import _target

    original, kept = _target.set_up, setup_module.START_LANDING
    passes = []

    def counted(*args, **kwargs):
        result = original(*args, **kwargs)
        passes.append(result.n_passes)
        return result

    setup_module.START_LANDING, _target.set_up = landing, counted
    try:
        fit = Timed(random_state=0)
        fit.setup_only = True
        try:
            fit.fit(X, y)
        except _SetupDone:
            pass
        return fit.setup_seconds_, passes[-1]
    finally:
        setup_module.START_LANDING, _target.set_up = kept, original


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "wide_setup.json")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    Timed = _estimator_class()
    sized_rule = setup_module.START_LANDING
    X, y = _rows(1 << 18, 20)
    _setup(Timed, X, y, sized_rule)  # (compiled code loaded)
    results = []
    print(f"{'N':>9} {'d':>4} {'read s':>7} {'share s':>8} {'passes':>6} {'sized s':>8} "
          f"{'passes':>6} {'sized/share':>11} {'sized/read':>10}")
    with tempfile.TemporaryDirectory() as folder:
        for n, d in SHAPES:
            X, y = _rows(n, d)
            path = Path(folder) / "X.npy"
            np.save(path, X)
            read = _one_read(path)
            _setup(Timed, X[: n // 2], y[: n // 2], sized_rule)  # (large-N code paths loaded)
            times = {"share": [], "sized": []}
            passes = {}
            for _ in range(REPEATS):
                for arm, landing in (("share", math.inf), ("sized", sized_rule)):
                    seconds, passes[arm] = _setup(Timed, X, y, landing)
                    times[arm].append(seconds)
            share, sized = (statistics.median(times[k]) for k in ("share", "sized"))
            row = {"n_rows": n, "n_features": d, "read_seconds": read,
                   "share_seconds": times["share"], "sized_seconds": times["sized"],
                   "share_passes": passes["share"], "sized_passes": passes["sized"],
                   "sized_over_share": sized / share, "sized_over_read": sized / read}
            results.append(row)
            print(f"{n:>9} {d:>4} {read:>7.3f} {share:>8.3f} {passes['share']:>6} "
                  f"{sized:>8.3f} {passes['sized']:>6} {sized / share:>11.2f} "
                  f"{sized / read:>10.1f}", flush=True)
            path.unlink()
    args.out.write_text(json.dumps({"meta": {"machine": platform.platform(),
                                             "python": platform.python_version()},
                                    "results": results}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
