"""The cost model of ``CorefGibbsClusterer(method="auto")``: what a race of clusters costs.

A coreference update races some clusters (their factors subsampled) and evaluates the others
exactly. ``RACE_COST`` in ``sksubsample/cluster/_gibbs.py`` models a race as ``fixed`` plus,
per raced cluster, ``per_arm`` plus ``read`` per factor it reads (on top of the factor itself),
and an exact factor as ``factor``. This script measures them on this machine, inside compiled
loops (no Python call per race, as in the sweeps): races of ``R`` clusters of ``N`` Euclidean
mentions (well separated entities, so that the races end as soon as the guard of the normal
approximation lets them) timed against the exact sums of the same factors, in 8 and 32
dimensions; the race times are fitted by least squares to ``fixed + per_arm · R + (read +
factor) · reads``. It prints the fit, the exact cost per factor and, per configuration, the
measured and modelled race times.

Run ``OMP_NUM_THREADS=1 python benchmarks/coref_race_cost.py`` (about a minute). Writes
``benchmarks/results/coref_race_cost.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numba
import numpy as np

from sksubsample.cluster._potentials import FeaturePotentials, member_sum
from sksubsample.cluster._races import ClusterRewards, Racer, b_table, guarded_reads, race_clusters

RESULTS = Path(__file__).resolve().parent / "results"
CONFIGS = [(1, 50), (1, 400), (1, 2000), (4, 100), (10, 50), (10, 200), (10, 1000), (40, 100),
           (100, 50), (100, 200), (30, 2000)]


@numba.njit
def _races(racer, rewards, sizes, log_prior, inv_t, rng, k):
    used = 0
    for _ in range(k):
        _, u, _, _, _ = race_clusters(racer, rewards, sizes, log_prior, inv_t, rng)
        used += u
    return used


@numba.njit
def _exact(pot, members, k):
    s = 0.0
    for _ in range(k):
        s += member_sum(pot, 0, members)
    return s


def _problem(n_arms, size, dim, rng):
    sizes = np.array([0] + [size] * n_arms)
    y = np.concatenate([[0], np.repeat(np.arange(1, n_arms + 1), size)])
    X = rng.normal(size=(n_arms + 1, dim))[y] + 0.15 * rng.normal(size=(y.size, dim))
    members = np.arange(1, y.size)
    mstart = np.concatenate(([0, 0], np.cumsum(sizes[1:])[:-1]))
    return X, sizes, members, mstart


def measure(dim, seed=0, budget=0.3):
    rng = np.random.default_rng(seed)
    rows = []
    for n_arms, size in CONFIGS:
        X, sizes, members, mstart = _problem(n_arms, size, dim, rng)
        btable, rounds = b_table(0.05, X.shape[0], 3)
        racer = Racer(3, btable, rounds, guarded_reads(X.shape[0], 3), 0.0, 0.0, 0.0, True)
        pot = FeaturePotentials(X, 0.5)
        rewards = ClusterRewards(pot, 0, members, mstart, np.arange(n_arms + 1))
        log_prior = np.zeros(n_arms + 1)
        _races(racer, rewards, sizes, log_prior, 10.0, rng, 1)
        _exact(pot, members, 1)
        k = max(5, int(budget / (n_arms * size * 2e-8)))
        start = time.perf_counter()
        used = _races(racer, rewards, sizes, log_prior, 10.0, rng, k)
        race_ns = (time.perf_counter() - start) / k * 1e9
        k_exact = max(5, int(budget / (n_arms * size * 1e-8)))
        start = time.perf_counter()
        _exact(pot, members, k_exact)
        exact_ns = (time.perf_counter() - start) / k_exact * 1e9
        rows.append({"dim": dim, "n_arms": n_arms, "size": size, "race_ns": race_ns,
                     "reads": used / k, "exact_ns": exact_ns,
                     "factor_ns": exact_ns / (n_arms * size)})
    factor = float(np.median([r["factor_ns"] for r in rows]))
    # race_ns - factor · reads = fixed + per_arm · R + read · reads
    A = np.array([[1.0, r["n_arms"], r["reads"]] for r in rows])
    b = np.array([r["race_ns"] - factor * r["reads"] for r in rows])
    fixed, per_arm, read = np.linalg.lstsq(A, b, rcond=None)[0]
    for r in rows:
        r["model_ns"] = fixed + per_arm * r["n_arms"] + (read + factor) * r["reads"]
    return {"dim": dim, "factor_ns": factor, "fixed_ns": float(fixed),
            "per_arm_ns": float(per_arm), "read_ns": float(read), "rows": rows}


def main():
    out = {"numba": numba.__version__, "numpy": np.__version__, "fits": []}
    for dim in (8, 32):
        fit = measure(dim)
        out["fits"].append(fit)
        print(f"d = {dim}: factor {fit['factor_ns']:.2f} ns; race: fixed {fit['fixed_ns']:.0f} "
              f"ns, per arm {fit['per_arm_ns']:.0f} ns, per read {fit['read_ns']:.1f} ns + factor")
        for r in fit["rows"]:
            print(f"  R = {r['n_arms']:4d} N = {r['size']:5d}: race {r['race_ns'] / 1e3:8.1f} us "
                  f"(model {r['model_ns'] / 1e3:8.1f}), reads/arm {r['reads'] / r['n_arms']:7.1f}, "
                  f"exact {r['exact_ns'] / 1e3:8.1f} us")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "coref_race_cost.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
