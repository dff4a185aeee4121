"""Why the pair graph of 10⁶ records has a giant connected component: Splink's stages at 10⁶
records and the components of its predictions at several probability thresholds.

The records model (:mod:`sksubsample.cluster._records`) samples each connected component of
the pair graph of Splink's predictions (match probability ≥ 0.001), with dense per-component
comparison blocks up to 128 records and on the stored pairs alone beyond. This script runs
the pipeline of ``benchmarks/er_splink.py`` (same Splink
settings and training, :func:`sksubsample.datasets.make_person_records` at 10⁶ records, default
configuration) up to the predictions, with the wall time and the peak resident memory of the
process after each stage, then reports, for the predictions at thresholds 0.001 to 0.9, the
largest connected component (records, pairs, fraction of its pairs that are true links) and,
for the component at 0.001, the quantiles of its pairs' probabilities, the fraction of true
links among its pairs below 0.5 and the number of entities it joins. The fit itself is run by
``benchmarks/er_splink_1m.py``.

Run ``OMP_NUM_THREADS=1 python benchmarks/er_splink_giant.py`` (needs the ``splink`` extra;
about 16 GB of memory and several minutes). Writes ``benchmarks/results/er_splink_giant.json``.
"""

from __future__ import annotations

import json
import logging
import platform
import resource
import time
import warnings
from pathlib import Path

import numpy as np
from er_splink import person_settings, person_training
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from sksubsample.datasets import make_person_records

RESULTS = Path(__file__).resolve().parent / "results"
THRESHOLDS = (0.001, 0.01, 0.1, 0.5, 0.9)


def peak_gib():
    """Peak resident memory of this process so far, GiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def components(n, i, j):
    g = sparse.coo_matrix((np.ones(i.size), (i, j)), shape=(n, n))
    return connected_components(g, directed=False)[1]


def main():
    from splink import DuckDBAPI, Linker

    logging.getLogger("splink").setLevel(logging.ERROR)
    out = {"stages": {}}
    t = time.perf_counter()
    data = make_person_records(1_000_000, random_state=0)
    out["stages"]["generate"] = {"seconds": time.perf_counter() - t, "peak_gib": peak_gib()}
    t = time.perf_counter()
    linker = Linker(DuckDBAPI().register(data.frame), person_settings(),
                    log_level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        person_training(linker)
    out["stages"]["splink_train"] = {"seconds": time.perf_counter() - t, "peak_gib": peak_gib()}
    t = time.perf_counter()
    pred = linker.inference.predict(threshold_match_probability=0.001)
    frame = pred.as_pandas_dataframe()[["unique_id_l", "unique_id_r", "match_probability"]]
    out["stages"]["splink_predict"] = {"seconds": time.perf_counter() - t,
                                       "peak_gib": peak_gib()}
    ids = np.sort(data.frame["unique_id"].to_numpy())
    truth = data.target[np.argsort(data.frame["unique_id"].to_numpy())]
    i = np.searchsorted(ids, frame["unique_id_l"].to_numpy())
    j = np.searchsorted(ids, frame["unique_id_r"].to_numpy())
    p = frame["match_probability"].to_numpy()
    same = truth[i] == truth[j]
    out["n_records"], out["n_pairs"] = int(ids.size), int(p.size)
    out["thresholds"] = {}
    for thr in THRESHOLDS:
        keep = p >= thr
        label = components(ids.size, i[keep], j[keep])
        sizes = np.bincount(label)
        inside = keep & (label[i] == sizes.argmax())
        out["thresholds"][str(thr).replace(".", "_")] = {"largest_records": int(sizes.max()),
                                       "largest_pairs": int(inside.sum()),
                                       "largest_true_link_fraction": float(same[inside].mean())}
        print(f"p >= {thr}: largest component {sizes.max()} records, {inside.sum()} pairs, "
              f"{same[inside].mean():.3f} true links", flush=True)
    label = components(ids.size, i, j)
    giant = label == np.bincount(label).argmax()
    inside = giant[i]
    out["giant"] = {"records": int(giant.sum()), "entities": int(np.unique(truth[giant]).size),
                    "probability_quantiles_10_25_50_75": np.percentile(
                        p[inside], [10, 25, 50, 75]).tolist(),
                    "true_link_fraction_below_half": float(same[inside & (p < 0.5)].mean())}
    print(json.dumps(out["stages"]), json.dumps(out["giant"]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": platform.platform(), "python": platform.python_version()}
    (RESULTS / "er_splink_giant.json").write_text(json.dumps({"meta": meta, **out}, indent=1))


if __name__ == "__main__":
    main()
