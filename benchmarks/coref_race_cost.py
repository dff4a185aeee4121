"""The cost model of ``CorefGibbsClusterer(method="auto")``: what a race of clusters costs.

A coreference update races some clusters (their factors subsampled) and evaluates the others
exactly. ``ROUGH_COSTS`` in ``sksubsample/cluster/_sweep_costs.py`` (the costs used when they
are not measured on the user's machine) models a race as ``fixed`` plus,
per raced cluster, ``per_arm`` plus ``read`` per factor it reads (on top of the factor itself),
and counts its gain in what the exact part of the update saves per factor it does not read,
``saved``. This script measures them on this machine, inside compiled loops (no Python call per
race, as in the sweeps), in the conditions of a sweep: the raced clusters' mentions are
scattered among ``N_TOTAL`` mentions (the heavy-tailed benchmark's), and every race follows
the exact pass of its update (which streams all features through the cache), so that a race's
reads miss the cache as they do in a sweep: a race's time is that of the update less that of
the pass alone.

* Races on the guarded schedule that ``"auto"`` runs, of ``R`` clusters of ``N`` Euclidean
  mentions: well separated entities, whose races end as soon as the guard of the normal
  approximation lets them, and clusters of one entity, whose races read on (the reads per arm
  then vary, and the fit can tell a read's cost from an arm's). The race times are fitted by
  relative non-negative least squares to ``fixed + per_arm · R + (read + factor) · reads``,
  ``factor`` the cost per factor of the exact pass.
* The exact pass of an update over all mentions (``add_row_scores``) with and without the
  raced clusters skipped, fitted by non-negative least squares (relative to the pass) to
  ``saved · skipped - miss · n · min(p, 1 - p)``, ``p`` the share of the ``n`` mentions
  skipped: a skipped factor saves ``saved``, and since the skipped mentions are scattered the
  branch that skips them is mispredicted for about the minority of the mentions, at ``miss``
  each; a misprediction costs about a factor, so skipping a minority of the mentions saves
  about nothing.

It prints the fits and, per configuration, the measured and modelled race times. Run
``OMP_NUM_THREADS=1 python benchmarks/coref_race_cost.py`` (about two minutes). Writes
``benchmarks/results/coref_race_cost.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numba
import numpy as np
from scipy.optimize import nnls

from sksubsample.algorithms.kernels import GUARDED
from sksubsample.cluster._potentials import FeaturePotentials, add_row_scores
from sksubsample.cluster._races import ClusterRewards, Racer, b_table, guarded_reads, race_clusters

RESULTS = Path(__file__).resolve().parent / "results"
# (R, N, tied): tied clusters are mentions of one entity, so that their races read on.
CONFIGS = [(1, 50, False), (1, 400, False), (1, 2000, False), (4, 100, False), (10, 50, False),
           (10, 200, False), (10, 1000, False), (40, 100, False), (100, 50, False),
           (100, 200, False), (5, 2000, False), (2, 400, True), (2, 2000, True),
           (4, 1000, True), (10, 200, True), (10, 1000, True)]
# The mentions of the heavy-tailed benchmark problem (``benchmarks/coref_experiments.py``).
N_TOTAL = 20591


@numba.njit
def _races(racer, rewards, sizes, log_prior, inv_t, rng, labels, marks, scores, k):
    """``k`` updates of mention 0 as a racing sweep runs them: the exact pass that skips the
    raced clusters (it streams the features through the cache), then the race."""
    used = 0
    for _ in range(k):
        scores[:] = marks
        add_row_scores(rewards.pot, 0, labels, scores)
        _, u, _, _, _ = race_clusters(racer, rewards, sizes, log_prior, inv_t, rng)
        used += u
    return used


@numba.njit
def _passes(pot, labels, marks, scores, k):
    """``k`` exact passes of mention 0 over all mentions, the clusters marked NaN skipped."""
    n = 0
    for _ in range(k):
        scores[:] = marks
        n += add_row_scores(pot, 0, labels, scores)
    return n


def _problem(n_arms, size, dim, rng, tied=False):
    """Mention 0, ``n_arms`` clusters of ``size`` mentions (of distinct entities, or all of
    mention 0's when ``tied``) and other mentions up to ``N_TOTAL``, of 200 other entities,
    all shuffled; ``labels`` puts the others in cluster 0."""
    n = max(N_TOTAL, n_arms * size + 1)
    entity = np.concatenate([[0], np.repeat(np.arange(1, n_arms + 1), size),
                             n_arms + 1 + rng.integers(0, 200, n - 1 - n_arms * size)])
    if tied:
        entity[:1 + n_arms * size] = 0
    cluster = np.concatenate([[0], np.repeat(np.arange(1, n_arms + 1), size),
                              np.zeros(n - 1 - n_arms * size, dtype=np.int64)])
    perm = np.concatenate([[0], 1 + rng.permutation(n - 1)])  # where each mention is stored
    X = np.empty((n, dim))
    X[perm] = rng.normal(size=(n_arms + 201, dim))[entity] + 0.15 * rng.normal(size=(n, dim))
    labels = np.empty(n, dtype=np.int64)
    labels[perm] = cluster
    members = perm[1:1 + n_arms * size]
    sizes = np.array([0] + [size] * n_arms)
    mstart = np.concatenate(([0, 0], np.cumsum(sizes[1:])[:-1]))
    return X, sizes, members, mstart, labels


def _timed(function, args, k):
    function(*args, 1)
    start = time.perf_counter()
    out = function(*args, k)
    return (time.perf_counter() - start) / k * 1e9, out


def measure(dim, seed=0, budget=0.3):
    rng = np.random.default_rng(seed)
    rows = []
    for n_arms, size, tied in CONFIGS:
        X, sizes, members, mstart, labels = _problem(n_arms, size, dim, rng, tied)
        btable, rounds = b_table(0.05, X.shape[0], 3, GUARDED)
        racer = Racer(3, btable, rounds, guarded_reads(X.shape[0], 3, GUARDED), 0.0, 0.0, 0.0,
                      True, GUARDED)
        pot = FeaturePotentials(X, 0.5)
        rewards = ClusterRewards(pot, 0, members, mstart, np.arange(n_arms + 1))
        log_prior = np.zeros(n_arms + 1)
        marks = np.zeros(n_arms + 1)
        k_pass = max(5, int(budget / (X.shape[0] * 1.5e-8)))
        full_ns, n_full = _timed(_passes, (pot, labels, marks, np.zeros(n_arms + 1)), k_pass)
        marks[1:] = np.nan
        skip_ns, n_skip = _timed(_passes, (pot, labels, marks, np.zeros(n_arms + 1)), k_pass)
        skipped = (n_full - n_skip) / k_pass
        # A race's time: an update's less its pass.
        update_ns, used = _timed(_races, (racer, rewards, sizes, log_prior, 10.0, rng, labels,
                                          marks, np.zeros(n_arms + 1)), k_pass)
        k = k_pass
        race_ns = update_ns - skip_ns
        rows.append({"dim": dim, "n_arms": n_arms, "size": size, "tied": tied,
                     "n_mentions": int(X.shape[0]), "race_ns": race_ns, "reads": used / k,
                     "pass_ns": full_ns, "skipped": skipped, "skip_pass_ns": skip_ns,
                     "factor_ns": full_ns / (n_full / k_pass),
                     "saved_ns": (full_ns - skip_ns) / skipped})
    factor = float(np.median([r["factor_ns"] for r in rows]))
    # The pass with clusters skipped: pass_ns - skip_pass_ns = saved · skipped - miss ·
    # n · min(p, 1 - p), p the share of the mentions skipped: a skipped factor saves
    # ``saved``, and the skipped mentions are scattered, so the branch that skips them is
    # mispredicted for about the minority of the mentions, at ``miss`` each.
    skipped = np.array([r["skipped"] for r in rows])
    n_pass = np.array([r["n_mentions"] - 1.0 for r in rows])
    share = skipped / n_pass
    gained = np.array([r["pass_ns"] - r["skip_pass_ns"] for r in rows])
    P = np.column_stack([skipped, -n_pass * np.minimum(share, 1.0 - share)])
    saved, miss = nnls(P / n_pass[:, None], gained / n_pass)[0]
    # race_ns - factor · reads = fixed + per_arm · R + read · reads, in relative terms (each
    # row divided by its race time), so that the long races of tied clusters do not decide
    # the fit for the short ones the cost model mostly decides about.
    A = np.array([[1.0, r["n_arms"], r["reads"]] for r in rows])
    b = np.array([r["race_ns"] - factor * r["reads"] for r in rows])
    w = 1.0 / np.array([r["race_ns"] for r in rows])
    fixed, per_arm, read = nnls(A * w[:, None], b * w)[0]  # costs are not negative
    for r in rows:
        r["model_ns"] = fixed + per_arm * r["n_arms"] + (read + factor) * r["reads"]
    for r, model in zip(rows, P @ [saved, miss], strict=True):
        r["pass_model_ns"] = float(model)
    return {"dim": dim, "factor_ns": factor, "saved_ns": float(saved), "miss_ns": float(miss),
            "fixed_ns": float(fixed),
            "per_arm_ns": float(per_arm), "read_ns": float(read), "rows": rows}


def main():
    out = {"numba": numba.__version__, "numpy": np.__version__, "fits": []}
    for dim in (8, 32):
        fit = measure(dim)
        out["fits"].append(fit)
        print(f"d = {dim}: factor {fit['factor_ns']:.2f} ns; pass: {fit['saved_ns']:.2f} ns saved "
              f"per skipped factor, {fit['miss_ns']:.2f} ns per mispredicted skip; race: fixed "
              f"{fit['fixed_ns']:.0f} ns, per arm "
              f"{fit['per_arm_ns']:.0f} ns, per read {fit['read_ns']:.1f} ns + factor")
        for r in fit["rows"]:
            print(f"  R = {r['n_arms']:4d} N = {r['size']:5d}{' tied' if r['tied'] else '     '}"
                  f": race {r['race_ns'] / 1e3:8.1f} us (model {r['model_ns'] / 1e3:8.1f}), "
                  f"reads/arm {r['reads'] / r['n_arms']:7.1f}, pass {r['pass_ns'] / 1e3:7.1f} "
                  f"us, skipping saves {(r['pass_ns'] - r['skip_pass_ns']) / 1e3:6.1f} us "
                  f"(model {r['pass_model_ns'] / 1e3:6.1f})")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "coref_race_cost.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
