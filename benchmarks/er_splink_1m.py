"""The records model at 10⁶ records, from raw records to posterior clusters, against Splink.

The pipeline of ``benchmarks/er_splink.py`` (same Splink settings and training,
:func:`sksubsample.datasets.make_person_records`, default configuration) at 10⁶ records, with
the wall time, the peak resident memory of the process so far and its resident memory after
each stage: Splink's training, its predictions at match probability ≥ 0.001, Splink's own
clustering (connected components of the predictions above each threshold, read back as
Arrow), the records model's inputs (:func:`~sksubsample.cluster.pairwise_log_potentials`:
the predictions' numeric columns read as Arrow from DuckDB, the unproposed pairs of the
components of at most ``DENSE_UP_TO`` records scored by the linker, the layout built) and the
fit (``CorefGibbsClusterer(metric="precomputed", n_draws=200, random_state=0)``, one thread).
The components larger than ``DENSE_UP_TO`` records, the giant one among them, are sampled on
their stored pairs alone, their clusters cliques of the pair graph
(:mod:`sksubsample.cluster._records_sparse`). Reports B³ precision, recall and F1 of the
fit's ``labels_`` and of Splink's clusters at each threshold, and the layout's components.

DuckDB runs on one thread with a memory limit (``--duckdb-memory``), as the fit does, so that
the times compare on the same cores. Run ``OMP_NUM_THREADS=1 python
benchmarks/er_splink_1m.py`` (needs the ``splink`` extra; about 8 GB of memory and half an
hour). Writes ``benchmarks/results/er_splink_1m.json`` (``--n`` and ``--dense-up-to`` for
smaller checks, written under another name) and a plot of the stages beside it
(``--plot`` redraws it from the JSON).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import resource
import time
import warnings
from pathlib import Path

import numpy as np
from er_splink import person_settings, person_training

from sksubsample import CorefGibbsClusterer
from sksubsample.cluster import _records, pairwise_log_potentials
from sksubsample.datasets import make_person_records
from sksubsample.metrics import b_cubed_score

RESULTS = Path(__file__).resolve().parent / "results"
THRESHOLDS = (0.9, 0.99, 0.999)


def peak_gib():
    """Peak resident memory of this process so far, GiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def rss_gib():
    """Resident memory of this process now, GiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


class Stages:
    def __init__(self):
        self.out = {}

    def __call__(self, name, start):
        self.out[name] = {"seconds": time.perf_counter() - start, "peak_gib": peak_gib(),
                          "rss_gib": rss_gib()}
        print(name, json.dumps(self.out[name]), flush=True)


def splink_clusters(linker, pred, threshold, ids):
    """Splink's connected components above ``threshold``, labels in the order of ``ids``."""
    clusters = linker.clustering.cluster_pairwise_predictions_at_threshold(pred, threshold)
    table = clusters.as_duckdbpyrelation().select("unique_id, cluster_id").to_arrow_table()
    clusters.drop_table_from_database_and_remove_from_cache()  # DuckDB's memory back
    uid = table.column("unique_id").to_numpy()
    cid = table.column("cluster_id").to_numpy(zero_copy_only=False)
    labels = np.empty(ids.size, dtype=np.int64)
    labels[np.searchsorted(ids, uid)] = np.unique(cid, return_inverse=True)[1]
    return labels


def plot(out, path):
    """Each stage's wall time (bars) and the peak resident memory so far (line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(out["stages"])
    seconds = [out["stages"][k]["seconds"] for k in names]
    peak = [out["stages"][k]["peak_gib"] for k in names]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(range(len(names)), seconds, color="tab:blue")
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("wall time, s")
    other = ax.twinx()
    other.plot(range(len(names)), peak, "o-", color="tab:red")
    other.axhline(8.0, color="tab:red", linestyle=":", linewidth=1)
    other.set_ylabel("peak resident memory so far, GiB", color="tab:red")
    other.set_ylim(0, max(9.0, max(peak) * 1.1))
    ax.set_title(f"{out['n_records']:,} records: B³ F1 {out['records_model']['f1']:.4f} "
                 f"(Splink's best {out['splink_best_f1']:.4f})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    import duckdb
    from splink import DuckDBAPI, Linker

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dense-up-to", type=int, default=None)
    parser.add_argument("--complete-up-to", type=int, default=None)
    parser.add_argument("--duckdb-memory", default="4GB")
    parser.add_argument("--duckdb-temp", default="/tmp/er_splink_1m_duckdb")
    parser.add_argument("--name", default=None)
    parser.add_argument("--plot", action="store_true",
                        help="only plot the results already written under --name")
    args = parser.parse_args()
    if args.plot:
        name = args.name or "er_splink_1m"
        out = json.loads((RESULTS / f"{name}.json").read_text())
        plot(out, RESULTS / f"{name}.png")
        return
    if args.dense_up_to is not None:
        _records.DENSE_UP_TO = args.dense_up_to
    logging.getLogger("splink").setLevel(logging.ERROR)
    stage = Stages()
    out = {"n_records": args.n, "dense_up_to": _records.DENSE_UP_TO, "stages": stage.out}
    t = time.perf_counter()
    data = make_person_records(args.n, random_state=0)
    stage("generate", t)
    t = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute(f"SET memory_limit = '{args.duckdb_memory}'")
    con.execute(f"SET temp_directory = '{args.duckdb_temp}'")  # spills past the limit
    linker = Linker(DuckDBAPI(con).register(data.frame), person_settings(),
                    log_level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        person_training(linker)
    stage("splink_train", t)
    t = time.perf_counter()
    pred = linker.inference.predict(threshold_match_probability=0.001)
    stage("splink_predict", t)
    raw = data.frame["unique_id"].to_numpy()
    ids = np.sort(raw)
    truth = data.target[np.argsort(raw)]
    del data
    splink = {}
    for thr in THRESHOLDS:
        key = str(thr).replace(".", "_")  # no dots in the keys: the docs' result paths
        t = time.perf_counter()
        labels = splink_clusters(linker, pred, thr, ids)
        stage(f"splink_cluster_{key}", t)
        p, r, f1 = b_cubed_score(truth, labels)
        splink[key] = {"threshold": thr, "precision": p, "recall": r, "f1": f1,
                       "seconds": stage.out[f"splink_cluster_{key}"]["seconds"],
                       "n_clusters": int(labels.max() + 1)}
        print(f"Splink at {thr}: B3 F1 {f1:.4f} (P {p:.4f}, R {r:.4f})", flush=True)
    out["splink_cc"] = splink
    best = max(splink, key=lambda k: splink[k]["f1"])
    out["splink_best_threshold"] = splink[best]["threshold"]
    out["splink_best_f1"] = splink[best]["f1"]
    t = time.perf_counter()
    if args.complete_up_to is not None:  # the linker completes other components than the layout
        dense_up_to, _records.DENSE_UP_TO = _records.DENSE_UP_TO, args.complete_up_to
    X = pairwise_log_potentials(pred, ids=ids, linker=linker)
    if args.complete_up_to is not None:
        _records.DENSE_UP_TO = dense_up_to
    stage("potentials", t)
    out["n_pairs_proposed"], out["n_pairs_stored"] = int(X.proposed.sum()), len(X.pairs)
    pred.drop_table_from_database_and_remove_from_cache()
    con.close()
    del pred, linker, con
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        est = CorefGibbsClusterer(metric="precomputed", n_draws=200, random_state=0,
                                  n_jobs=1).fit(X)
        stage("fit", t)
    model = est._records
    dense_sizes = np.diff(model.cstart)
    sparse_sizes = np.diff(model.scstart)
    out["layout"] = {"dense_components": int(dense_sizes.size),
                     "largest_dense": int(dense_sizes.max(initial=0)),
                     "dense_entries": int(model.adj.size),
                     "sparse_components": int(sparse_sizes.size),
                     "sparse_records": int(sparse_sizes.sum()),
                     "largest_sparse": int(sparse_sizes.max(initial=0)),
                     "sparse_entries": int(model.sp_nbr.size)}
    out["sweep_seconds"] = {"median": float(np.median(est.sweep_times_)),
                            "max": float(np.max(est.sweep_times_))}
    p, r, f1 = b_cubed_score(truth, est.labels_)
    out["records_model"] = {"precision": p, "recall": r, "f1": f1,
                            "n_clusters": int(est.n_clusters_)}
    s = stage.out
    splink_own = (s["splink_train"]["seconds"] + s["splink_predict"]["seconds"]
                  + s[f"splink_cluster_{best}"]["seconds"])
    ours = (s["splink_train"]["seconds"] + s["splink_predict"]["seconds"]
            + s["potentials"]["seconds"] + s["fit"]["seconds"])
    out["splink_pipeline_seconds"], out["pipeline_seconds"] = splink_own, ours
    out["pipeline_over_splink"] = ours / splink_own
    out["fit_over_splink_predict_cluster"] = ((s["potentials"]["seconds"] + s["fit"]["seconds"])
                                              / (s["splink_predict"]["seconds"]
                                                 + s[f"splink_cluster_{best}"]["seconds"]))
    out["peak_gib"] = peak_gib()
    print(f"records model: B3 F1 {f1:.4f} (P {p:.4f}, R {r:.4f}) | Splink best "
          f"{out['splink_best_f1']:.4f} at {out['splink_best_threshold']} | pipeline "
          f"{ours:.0f} s vs Splink's "
          f"{splink_own:.0f} s ({out['pipeline_over_splink']:.2f}) | peak "
          f"{out['peak_gib']:.1f} GiB | {json.dumps(out['layout'])}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": platform.platform(), "python": platform.python_version()}
    name = args.name or ("er_splink_1m" if args.n == 1_000_000 and args.dense_up_to is None
                         else f"er_splink_1m_check_{args.n}_{_records.DENSE_UP_TO}")
    (RESULTS / f"{name}.json").write_text(json.dumps({"meta": meta, **out}, indent=1))
    plot(out, RESULTS / f"{name}.png")


if __name__ == "__main__":
    main()
