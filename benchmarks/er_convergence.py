"""Convergence of the records model's draws at the defaults, 50 000 generated person records.

The pipeline of ``benchmarks/er_splink.py`` (same Splink settings and training,
:func:`sksubsample.datasets.make_person_records` at 50 000 records, default configuration,
predictions at match probability ≥ 0.001), then
``CorefGibbsClusterer(metric="precomputed", n_draws=200, random_state=seed)`` on its
:func:`~sksubsample.cluster.pairwise_log_potentials`, every other parameter at its default
(one chain, no warm-up: the draws follow the annealing), and:

* for seeds 0-5: the ``ConvergenceWarning`` (recorded, not silenced), split R-hat and bulk ESS
  of ``log_potential`` and ``n_clusters``, the mean log potential of the first 20 draws and of
  the last 100, B³ F1 of ``labels_``, the expected calibration error (10 bins) of
  ``coreference_matrix()`` on Splink's pairs and the fit's wall time; the same with
  ``n_sweeps=40`` (an annealing twice as long) and with ``n_draws=1000``;
* seed 0 with 2000 draws: R-hat and ESS of the first 200 draws with 0 to 100 of them
  discarded; from draw 300 on (past the transient), the fraction of windows of 200
  consecutive draws (every 50th start) that fail the check, R-hat and ESS of those 1700
  draws, the autocorrelation of their log potential;
* per connected component of the pair graph (the model's components are independent): the
  gain in log potential of the last draw over the same draw with the component's clusters of
  ``labels_`` put back (how far below the draws the annealed partition is), and the bulk ESS
  of the component's number of clusters over draws 300 to 2000.

Run ``OMP_NUM_THREADS=1 python benchmarks/er_convergence.py`` (needs the ``splink`` and
``coref`` extras; a few minutes). Writes ``benchmarks/results/er_convergence.json``.
"""

from __future__ import annotations

import json
import logging
import platform
import time
import warnings
from pathlib import Path

import numpy as np
from er_splink import ece, person_settings, person_training, warm_up
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from sksubsample import CorefGibbsClusterer
from sksubsample.cluster import pairwise_log_potentials
from sksubsample.datasets import make_person_records
from sksubsample.diagnostics import ConvergenceWarning, effective_sample_size, split_rhat
from sksubsample.metrics import b_cubed_score

RESULTS = Path(__file__).resolve().parent / "results"
SEEDS = range(6)
N_RECORDS = 50_000
STATIONARY_FROM = 300
WINDOW = 200


def potentials():
    """Splink's predictions of the generated records as the records model's input, the true
    entities in the order of ``X.ids`` and the indices of Splink's pairs in that order."""
    from splink import DuckDBAPI, Linker

    data = make_person_records(N_RECORDS, random_state=0)
    linker = Linker(DuckDBAPI().register(data.frame), person_settings(),
                    log_level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Splink's own training messages
        person_training(linker)
    pred = linker.inference.predict(threshold_match_probability=0.001)
    ids = data.frame["unique_id"].to_numpy()
    X = pairwise_log_potentials(pred, ids=ids, linker=linker)
    df = pred.as_pandas_dataframe()
    truth = data.target[np.argsort(ids)]
    i = np.searchsorted(X.ids, df["unique_id_l"].to_numpy())
    j = np.searchsorted(X.ids, df["unique_id_r"].to_numpy())
    return X, truth, i, j


def fit(X, seed, **params):
    """The fit with its warnings recorded, and its wall time."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        est = CorefGibbsClusterer(metric="precomputed", **{"n_draws": 200,
                                                            "random_state": seed, **params})
        est.fit(X)
        seconds = time.perf_counter() - t
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    return est, seconds, messages


def summary(est, seconds, messages, truth, i, j):
    lp = est._draws[0, :, 0]  # the chain's log potentials (one chain)
    ours = np.asarray(est.coreference_matrix()[i, j]).ravel()
    return {"warned": bool(messages), "message": messages[0] if messages else None,
            "rhat": est.rhat_.tolist(), "ess": est.ess_.tolist(),
            "lp_first20": float(lp[:20].mean()), "lp_last100": float(lp[-100:].mean()),
            "annealed_lp": float(est.log_potential_trace_[-1]),
            "f1": b_cubed_score(truth, est.labels_)[2],
            "ece": ece(ours, truth[i] == truth[j]), "fit_seconds": seconds}


def components(X):
    """The connected component of each record (in the order of ``X.ids``) and their sizes."""
    n = X.ids.size
    graph = sparse.coo_matrix((np.ones(len(X.pairs)), (X.pairs[:, 0], X.pairs[:, 1])),
                              shape=(n, n))
    _, comp = connected_components(graph, directed=False)
    return comp, np.bincount(comp)


def clusters_per_component(partitions, comp, n_comp):
    """Clusters of each component in each draw: ``(n_draws, n_comp)``."""
    out = np.zeros((partitions.shape[0], n_comp), dtype=np.int64)
    for t, labels in enumerate(partitions):
        keys = np.unique(comp * (labels.max() + 1) + labels)
        out[t] = np.bincount(keys // (labels.max() + 1), minlength=n_comp)
    return out


def annealed_gaps(est, comp, sizes):
    """For each component of 3 records or more whose clusters in ``labels_`` differ from the
    last draw's: the last draw's log potential minus that of the last draw with the
    component's clusters of ``labels_``."""
    last = est.partition_samples_[0, -1].astype(np.int64)
    annealed = est.labels_.astype(np.int64)
    lp_last = est.log_potential(last)
    order = np.argsort(comp, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)]
    gaps = []
    for c in np.flatnonzero(sizes >= 3):
        members = order[starts[c]:starts[c + 1]]
        pairs = set(zip(annealed[members], last[members], strict=True))
        if len(pairs) == np.unique(annealed[members]).size == np.unique(last[members]).size:
            continue  # the same clusters
        swapped = last.copy()
        swapped[members] = annealed[members] + last.max() + 1
        gaps.append((lp_last - est.log_potential(swapped), int(sizes[c])))
    gaps.sort(reverse=True)
    return gaps


def long_run(X, comp, sizes):
    est, seconds, messages = fit(X, 0, n_draws=2000)
    draws = est._draws
    first = {f"drop_{k}": {"rhat": split_rhat(draws[:, k:WINDOW]).tolist(),
                      "ess": effective_sample_size(draws[:, k:WINDOW]).tolist()}
             for k in (0, 10, 20, 50, 100)}
    fails = []
    for start in range(STATIONARY_FROM, draws.shape[1] - WINDOW + 1, 50):
        w = draws[:, start:start + WINDOW]
        fails.append(bool(np.max(split_rhat(w)) > 1.01
                          or np.min(effective_sample_size(w)) < 100))
    tail = draws[:, STATIONARY_FROM:]
    x = tail[0, :, 0] - tail[0, :, 0].mean()
    acf = {f"lag_{lag}": float(x[:-lag] @ x[lag:] / (x @ x)) for lag in (1, 2, 5, 10, 20, 50)}
    ncl = clusters_per_component(est.partition_samples_[0, STATIONARY_FROM:], comp,
                                 sizes.size).astype(float)
    varying = np.flatnonzero(ncl.std(0) > 0)
    ess = np.array([effective_sample_size(ncl[None, :, c:c + 1])[0] for c in varying])
    gaps = annealed_gaps(est, comp, sizes)
    return {"fit_seconds": seconds, "warned": bool(messages),
            "first_window_discarding": first,
            "stationary_windows": len(fails), "stationary_windows_failing": float(np.mean(fails)),
            "stationary_rhat": split_rhat(tail).tolist(),
            "stationary_ess": effective_sample_size(tail).tolist(),
            "stationary_n_draws": int(tail.shape[1]), "stationary_lp_acf": acf,
            "components": int(sizes.size), "components_varying": int(varying.size),
            "components_ess_below_100": int(np.sum(ess < 100)),
            "components_ess_below_50": int(np.sum(ess < 50)),
            "slowest_components": [{"records": int(sizes[varying[k]]), "ess": float(ess[k])}
                                   for k in np.argsort(ess)[:10]],
            "annealed_gaps_over_5": sum(g > 5 for g, _ in gaps),
            "annealed_gaps_over_10": sum(g > 10 for g, _ in gaps),
            "annealed_gap_total_over_5": float(sum(g for g, _ in gaps if g > 5)),
            "annealed_gaps_largest": [{"gap": float(g), "records": s} for g, s in gaps[:10]]}


def main():
    logging.getLogger("splink").setLevel(logging.ERROR)
    warm_up()
    X, truth, i, j = potentials()
    comp, sizes = components(X)
    configs = {"defaults": {}, "n_sweeps_40": {"n_sweeps": 40}, "n_draws_1000": {"n_draws": 1000}}
    out = {key: {} for key in configs}
    for seed in SEEDS:
        for key, params in configs.items():
            s = summary(*fit(X, seed, **params), truth, i, j)
            out[key][f"seed_{seed}"] = s
            print(f"{key} seed {seed}: R-hat {np.round(s['rhat'], 3)} ESS "
                  f"{np.round(s['ess'], 1)} warned {s['warned']} F1 {s['f1']:.4f} ECE "
                  f"{s['ece']:.4f} fit {s['fit_seconds']:.1f} s", flush=True)
    for key in configs:
        runs = out[key].values()
        out[key + "_warned"] = sum(r["warned"] for r in runs)
        out[key + "_mean_fit_seconds"] = float(np.mean([r["fit_seconds"] for r in runs]))
    out["long_run"] = long_run(X, comp, sizes)
    print(json.dumps(out["long_run"], indent=1), flush=True)
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": platform.platform(), "python": platform.python_version()}
    (RESULTS / "er_convergence.json").write_text(json.dumps({"meta": meta, **out}, indent=1))


if __name__ == "__main__":
    main()
