"""Small data: the default ``BayesianLogisticRegressionMH`` against NumPyro NUTS.

On large data the default leads its peers; this benchmark measures it where most
scikit-learn users are, against NumPyro NUTS as a new user would run it, and checks its
draws against a long NUTS reference of the same posterior.

Data sets (design ``[X, 1]``; prior N(0, 10²) on every coefficient and on the intercept, the
estimator's default ``prior_scale=10``; NUTS samples exactly that model):

* ``breast_cancer``: scikit-learn's breast cancer, standardised, N = 569, d = 30;
* ``digits_3v8``: scikit-learn's digits 3 vs 8, the pixels not constant within the pair,
  standardised, N = 357, d = 54 (both as ``logistic_panel.load_dataset`` builds them);
* ``synthetic_N{n}_d{d}``: d standard normal features, weights N(0, 20/d), intercept 0.5 in
  the logit (``logistic_grid.make_data``: at d = 20 the data of ``logistic_peers.py``, same
  draws); labels are far from separable (the logit has sd √20);
* ``separable_N{n}_d{d}``, *nearly separable*: d standard normal features, true weights
  ``s u`` with ``u`` a uniformly random unit vector and no intercept, where the norm
  ``s = SEPARABLE_NORM`` ≈ 55.3 is the one for which the expected share of labels on the wrong
  side of the true hyperplane, ``E[σ(−|z|)]`` with ``z ~ N(0, s²)``, is 1 %: about 99 % of
  the labels are linearly separable by the true hyperplane, and the likelihood alone barely
  bounds the weights' norm;
* ``peers_N1000000`` (``--large`` only): ``logistic_peers.make_data(10**6)``, d = 20.

Default grid (``--grid cross``): both real sets, and each synthetic kind at
N ∈ {10³, 10⁴, 10⁵} with d = 20 and at N = 10⁴ with d ∈ {5, 64}; ``--grid full`` runs every
N ∈ {10³, 10⁴, 10⁵} × d ∈ {5, 20, 64} of both kinds. The sets the targets below name
(``TARGET_SETS``) run first, and the results are written after every data set, so a run cut
short still reports them.

For each data set and each seed (``--seeds``, default 3) the parent runs, each in a fresh
process (``OMP_NUM_THREADS=1``, JAX on one thread, float64), side by side:

``ours``
    ``BayesianLogisticRegressionMH(random_state=seed)``, every other parameter at its default
    (4 chains, 500 warm-up steps, then ``n_draws="auto"``: 1 000 draws continued in rounds
    until every bulk and tail ESS reaches 400 and R-hat 1.01; chains one after the other),
    fitted twice: the first fit is the whole fit in a fresh process (the package's on-disk
    kernel cache is present: a priming process fits every data set once before any timing),
    the second, in
    the same process, the fit after the cache is loaded. Recorded: both wall times, min bulk
    and tail ESS, max split R-hat, every ConvergenceWarning's text, ``n_evaluations_``,
    ``fraction_data_touched_`` and ``plan_``.
``nuts``
    NumPyro NUTS with its defaults (diagonal mass matrix, target acceptance 0.8), 4 chains ×
    (500 warm-up + 1 000 draws), ``chain_method="vectorized"`` (``--chain-methods`` adds
    ``sequential``). Recorded: the wall time of ``MCMC.run`` until the draws are ready (the
    whole run: tracing, compilation, warm-up, sampling) and its compile time as JAX reports it:
    JAX's monitoring emits, for every program it builds, the durations of tracing to a jaxpr,
    lowering to MLIR and the backend compilation (``/jax/core/compile/*``); a listener
    registered with ``jax.monitoring.register_event_duration_secs_listener`` records each as
    an interval ending when it is reported, and the compile time is the length of the union of
    the intervals that fall inside the run (nested events are not counted twice). NumPyro
    builds its loop afresh on every ``run`` (a second run in the same process compiles again),
    so the time without compile is the whole run less that union.
``reference``
    A long NUTS run per data set: NumPyro NUTS float64 with a dense mass matrix and target
    acceptance 0.9, 4 chains × (1 000 warm-up + 5 000 draws) (2 500 draws at N·d > 10⁶),
    through ``logistic_panel.run_nuts``; its summary (per-parameter mean, sd and their Monte
    Carlo errors) is cached as ``benchmarks/results/_record_small_data_reference_*.json``. For
    ``peers_N1000000`` the importance-sampling reference of ``logistic_peers.py`` (its cached
    record is shared).

Reported per data set (medians over seeds):

* min-ESS/s: smallest bulk ESS over the parameters (rank-normalised split chains,
  :func:`sksubsample.diagnostics.effective_sample_size`) per second, ours over the fit after
  the kernel cache is loaded, NUTS over its run less the compile time; their ratio
  (ours / NUTS, > 1: ours faster);
* whole fit: ours in a fresh process over NUTS's whole run (compile included); < 1: ours faster;
* warnings: the seeds whose fit raised a ConvergenceWarning;
* accuracy against the reference, per parameter: ``z = (mean − ref) / sqrt(sd²/ESS + se_ref²)``
  with the ESS of the mean (``logistic_panel.compare``), and ``sd / sd_ref``; the largest
  ``|z|`` and the range of the sd ratios over parameters and seeds;
* the targets: min-ESS/s ratio ≥ 1, whole-fit ratio ≤ 1, no ConvergenceWarning on any seed,
  ``|z| ≤ 4.5`` and sd ratios within [0.9, 1.1].

Every finished process is cached as ``benchmarks/results/_record_small_data_*.json``
(scratch), keyed by the data, the seed and a hash of the ``sksubsample`` sources, so that an
interrupted run resumes, and a changed sampler is measured again side by side with NUTS;
``--rerun`` measures again anyway (the references are kept). Every record carries the
1-minute load averages before and after it: the machine is shared, so compare the ratios
measured in one run, not absolute times across runs.

Usage (``pip install -e ".[bench]"``; CPU only)::

    OMP_NUM_THREADS=1 python benchmarks/small_data.py                 # cross grid, 3 seeds
    OMP_NUM_THREADS=1 python benchmarks/small_data.py --large         # + the 10⁶-row data
    OMP_NUM_THREADS=1 python benchmarks/small_data.py --quick         # smoke run
    OMP_NUM_THREADS=1 python benchmarks/small_data.py --data breast_cancer --seeds 0 1

Results: ``benchmarks/results/small_data.json`` and ``.png`` (``--quick``:
``small_data_quick.*``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import logistic_grid
import logistic_panel
import logistic_peers
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
PRIOR_SCALE = 10.0
#: Norm of the true weights of the nearly separable sets: E[σ(−|z|)] = 1 % for z ~ N(0, s²).
SEPARABLE_NORM = 55.2816
REAL = ("breast_cancer", "digits_3v8")
#: The sets the targets name, run first: the rest of the grid follows.
TARGET_SETS = (*REAL, "separable_N10000_d20", "synthetic_N100000_d20")
GRID_N = (1_000, 10_000, 100_000)
GRID_D = (5, 20, 64)
KINDS = ("synthetic", "separable")
PEERS = "peers_N1000000"
QUICK = ("breast_cancer", "digits_3v8", "synthetic_N1000_d5")
NUTS_RUN = {"n_chains": 4, "n_warmup": 500, "n_draws": 1000}
REFERENCE = {"n_chains": 4, "n_warmup": 1000, "n_draws": 5000, "seed": 20261123,
             "dense_mass": True, "target_accept_prob": 0.9, "float64": True}
QUICK_REFERENCE = {**REFERENCE, "n_warmup": 500, "n_draws": 2000}
#: Above this N·d the reference keeps 2 500 draws per chain (its cost is linear in N·d).
REFERENCE_LONG_MAX = 1_000_000
TARGETS = {"ess_rate_ratio_min": 1.0, "whole_fit_ratio_max": 1.0, "abs_z_max": 4.5,
           "sd_ratio_range": (0.9, 1.1)}
JAX_ENV = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1", "OMP_NUM_THREADS": "1",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


# ----------------------------------------------------------------------------- data


def make_separable(n, d, seed=0):
    """Nearly separable labels: 1 % of them, in expectation, on the wrong side of the truth."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    u = rng.standard_normal(d)
    logit = X @ (SEPARABLE_NORM * u / np.linalg.norm(u))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return X, y


def separable_error(norm=SEPARABLE_NORM):
    """``E[σ(−|z|)]``, z ~ N(0, norm²): the expected share of labels the truth misclassifies."""
    from scipy import integrate, special, stats

    return 2.0 * integrate.quad(lambda z: stats.norm.pdf(z, scale=norm) * special.expit(-z),
                                0.0, np.inf)[0]


def grid(kind):
    """Data set names of a grid: ``cross`` (through N = 10⁴, d = 20) or ``full``."""
    cells = [(n, d) for n in GRID_N for d in GRID_D
             if kind == "full" or d == 20 or n == 10_000]
    names = [f"{k}_N{n}_d{d}" for k in KINDS for n, d in cells]
    return [*TARGET_SETS, *(name for name in names if name not in TARGET_SETS)]


def load_data(name):
    """``(X, y)`` of a data set, ``y`` in {0, 1}."""
    if name in REAL:
        return logistic_panel.load_dataset(name)[:2]
    if name == PEERS:
        return logistic_peers.make_data(1_000_000)
    kind, n, d = name.split("_")
    if kind in KINDS and n[:1] == "N" and d[:1] == "d":
        if kind == "synthetic":
            return logistic_grid.make_data(int(n[1:]), int(d[1:]), "dense")
        return make_separable(int(n[1:]), int(d[1:]))
    raise ValueError(f"unknown data set {name!r}")


def reference_settings(X, quick):
    settings = dict(QUICK_REFERENCE if quick else REFERENCE)
    if X.shape[0] * (X.shape[1] + 1) > REFERENCE_LONG_MAX:
        settings["n_draws"] = min(settings["n_draws"], 2500)
    return settings


# ----------------------------------------------------------------------------- workers


def _summary(draws):
    """Per-parameter moments and diagnostics of draws (chains, draws, params), for JSON."""
    from sksubsample.diagnostics import effective_sample_size

    summary = logistic_panel.summarise_draws(draws)
    return {"min_ess_bulk": float(summary["ess_bulk"].min()),
            "min_ess_tail": float(effective_sample_size(draws, method="tail").min()),
            "max_rhat": float(summary["rhat"].max()),
            **logistic_panel._jsonable({k: summary[k] for k in
                                        ("mean", "sd", "mcse_mean", "mcse_sd")})}


def work_ours(name, seed):
    """The default estimator, fitted twice in this fresh process (see the module docstring)."""
    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.diagnostics import ConvergenceWarning

    X, y = load_data(name)

    def fit():
        clf = BayesianLogisticRegressionMH(random_state=seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            clf.fit(X, y)
            seconds = time.perf_counter() - start
        return clf, seconds, [str(w.message) for w in caught
                              if issubclass(w.category, ConvergenceWarning)]

    _, first_seconds, first_warnings = fit()
    clf, seconds, fit_warnings = fit()
    draws = np.concatenate([clf.coef_samples_, clf.intercept_samples_[:, :, None]], axis=2)
    return {"fit_seconds": seconds, "first_fit_seconds": first_seconds,
            "convergence_warnings": fit_warnings,
            "first_fit_convergence_warnings": first_warnings,
            "n_evaluations": int(clf.n_evaluations_),
            "fraction_data_touched": float(clf.fraction_data_touched_),
            "mean_batch_size": float(clf.mean_batch_size_),
            "acceptance_rate": float(clf.acceptance_rate_),
            "plan": logistic_grid._plan_record(clf) if clf.plan_ is not None else None,
            **_summary(draws)}


#: The compile stages JAX's monitoring reports for every program it builds.
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")


def _union_length(intervals):
    total, end = 0.0, -np.inf
    for lo, hi in sorted(intervals):
        total += max(0.0, hi - max(lo, end))
        end = max(end, hi)
    return total


def work_nuts(name, seed, chain_method):
    """NumPyro NUTS at its defaults; the whole run and the compile time JAX reports."""
    jax = logistic_peers._jax_setup(True)
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax import monitoring
    from numpyro.infer import MCMC, NUTS

    spans = []

    def listener(event, seconds, **_):
        if event in COMPILE_EVENTS:
            now = time.perf_counter()
            spans.append((now - seconds, now))

    monitoring.register_event_duration_secs_listener(listener)
    X, y = load_data(name)
    design = jnp.asarray(np.column_stack([X, np.ones(len(X))]), dtype=jnp.float64)
    labels = jnp.asarray(y, dtype=jnp.float64)
    scale = jnp.full(design.shape[1], PRIOR_SCALE)

    def logistic(design, labels):
        coef = numpyro.sample("theta", dist.Normal(0.0, scale).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=design @ coef), obs=labels)

    mcmc = MCMC(NUTS(logistic), num_warmup=NUTS_RUN["n_warmup"],
                num_samples=NUTS_RUN["n_draws"], num_chains=NUTS_RUN["n_chains"],
                chain_method=chain_method, progress_bar=False)
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), design, labels, extra_fields=("num_steps",))
    draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True)["theta"])
    end = time.perf_counter()
    compile_seconds = _union_length([(max(lo, start), min(hi, end)) for lo, hi in spans
                                     if hi > start and lo < end])
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    return {"chain_method": chain_method, "seconds": end - start,
            "compile_seconds": compile_seconds, "compile_events": len(spans),
            "mean_leapfrog_steps": float(steps.mean()),
            **_summary(np.asarray(draws, dtype=np.float64))}


def work_reference(name, quick):
    """The long NUTS reference's summary (``logistic_panel.run_nuts``)."""
    X, y = load_data(name)
    settings = reference_settings(X, quick)
    start = time.perf_counter()
    draws, extra = logistic_panel.run_nuts(X, y, PRIOR_SCALE, settings)
    return {"settings": settings, "seconds": time.perf_counter() - start, **extra,
            **_summary(draws)}


def work_prime(names):
    """Fit the default once on every data set, so that its kernels are cached on disk."""
    from sksubsample import BayesianLogisticRegressionMH

    warnings.simplefilter("ignore")
    for name in names:
        BayesianLogisticRegressionMH(random_state=0).fit(*load_data(name))
    return {"primed": list(names)}


# ----------------------------------------------------------------------------- parent


def _record_path(kind, name, seed, key):
    return RESULTS / f"_record_small_data_{kind}_{name}_seed{seed}_{key}.json"


def _spawn(args):
    """Run a worker in a fresh process; its record with the load averages around it."""
    load_before = os.getloadavg()
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          env={**os.environ, **JAX_ENV}, check=False)
    if proc.returncode != 0:
        print(f"worker {' '.join(args)} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return None
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    record.update({"load_before": list(load_before), "load_after": list(os.getloadavg())})
    return record


def collect(kind, name, seed, key, *, rerun, args=()):
    """The cached record of one worker, after running it if missing (or if ``rerun``)."""
    path = _record_path(kind, name, seed, key)
    if path.exists() and not rerun:
        return json.loads(path.read_text())
    start = time.perf_counter()
    record = _spawn(["--worker", kind, "--data", name, "--seed", str(seed), *args])
    if record is None:
        return None
    record.update({"kind": kind, "data": name, "seed": seed, "key": key})
    path.write_text(json.dumps(record))
    print(f"  {kind:<16} {name} seed {seed}: {time.perf_counter() - start:.0f} s (load "
          f"{record['load_before'][0]:.2f} -> {record['load_after'][0]:.2f})", flush=True)
    return record


def reference(name, X, y, quick):
    """Moments of the reference posterior: ``(record, {mean, sd, mcse_mean, mcse_sd})``."""
    if name == PEERS:
        record = logistic_peers._collect("is_reference", len(X), 0, rerun=False)[0]
        moments = dict(zip(("mean", "sd", "mcse_mean", "mcse_sd"),
                           logistic_peers.reference_moments(record), strict=True))
        return {"method": "importance sampling (logistic_peers.py)",
                "seconds": record["seconds"], "kish_ess": record["kish_ess"]}, moments
    settings = reference_settings(X, quick)
    key = logistic_panel.reference_id({"data_hash": logistic_panel.data_hash(X, y, PRIOR_SCALE),
                                       "settings": settings})
    record = collect("reference", name, 0, key, rerun=False,
                     args=["--quick"] if quick else [])
    if record is None:
        raise RuntimeError(f"the reference of {name} failed")
    return ({"method": "NumPyro NUTS float64, dense mass, target acceptance 0.9",
             "settings": settings, "seconds": record["seconds"],
             "min_ess_bulk": record["min_ess_bulk"], "max_rhat": record["max_rhat"],
             "divergences": record.get("divergences")},
            {k: np.asarray(record[k]) for k in ("mean", "sd", "mcse_mean", "mcse_sd")})


def accuracy(record, ref):
    """Largest |z| of the means and the sd ratios' range of a run against the reference."""
    cmp = logistic_panel.compare(
        {k: np.asarray(record[k]) for k in ("mean", "sd", "mcse_mean", "mcse_sd")}, ref)
    return {"max_abs_z": float(np.max(np.abs(cmp["z"]))),
            "sd_ratio_min": float(cmp["sd_ratio"].min()),
            "sd_ratio_max": float(cmp["sd_ratio"].max())}


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def summarise(name, n, d, ours, nuts, ref_info):
    """One data set's row: medians over seeds, warnings, accuracy and the targets."""
    row = {"data": name, "n": n, "d": d, "seeds": [r["seed"] for r in ours],
           "reference": ref_info}
    for r in ours:
        r["min_ess_per_s"] = r["min_ess_bulk"] / r["fit_seconds"]
    row["ours"] = {
        "fit_seconds": _median([r["fit_seconds"] for r in ours]),
        "first_fit_seconds": _median([r["first_fit_seconds"] for r in ours]),
        "min_ess_bulk": _median([r["min_ess_bulk"] for r in ours]),
        "min_ess_tail": _median([r["min_ess_tail"] for r in ours]),
        "max_rhat": max((r["max_rhat"] for r in ours), default=None),
        "min_ess_per_s": _median([r["min_ess_per_s"] for r in ours]),
        "fraction_data_touched": _median([r["fraction_data_touched"] for r in ours]),
        "warning_seeds": [r["seed"] for r in ours if r["convergence_warnings"]],
        "warnings": {str(r["seed"]): r["convergence_warnings"] for r in ours
                     if r["convergence_warnings"]},
        "plans": sorted({json.dumps(r["plan"], sort_keys=True) for r in ours
                         if r["plan"] is not None}),
        "max_abs_z": max((r["max_abs_z"] for r in ours), default=None),
        "sd_ratio_min": min((r["sd_ratio_min"] for r in ours), default=None),
        "sd_ratio_max": max((r["sd_ratio_max"] for r in ours), default=None)}
    row["nuts"] = {}
    for method, runs in nuts.items():
        for r in runs:
            r["sampling_seconds"] = r["seconds"] - r["compile_seconds"]
            r["min_ess_per_s"] = r["min_ess_bulk"] / r["sampling_seconds"]
        row["nuts"][method] = {
            "seconds": _median([r["seconds"] for r in runs]),
            "compile_seconds": _median([r["compile_seconds"] for r in runs]),
            "sampling_seconds": _median([r["sampling_seconds"] for r in runs]),
            "min_ess_bulk": _median([r["min_ess_bulk"] for r in runs]),
            "min_ess_tail": _median([r["min_ess_tail"] for r in runs]),
            "max_rhat": max(r["max_rhat"] for r in runs),
            "min_ess_per_s": _median([r["min_ess_per_s"] for r in runs]),
            "mean_leapfrog_steps": _median([r["mean_leapfrog_steps"] for r in runs]),
            "max_abs_z": max(r["max_abs_z"] for r in runs),
            "sd_ratio_min": min(r["sd_ratio_min"] for r in runs),
            "sd_ratio_max": max(r["sd_ratio_max"] for r in runs)}
    peer = row["nuts"].get("vectorized")
    o = row["ours"]
    if peer and o["min_ess_per_s"]:
        by_seed = {r["seed"]: r for r in nuts["vectorized"]}
        pairs = [(r["min_ess_per_s"] / by_seed[r["seed"]]["min_ess_per_s"],
                  r["first_fit_seconds"] / by_seed[r["seed"]]["seconds"])
                 for r in ours if r["seed"] in by_seed]
        row["ess_rate_ratio"] = o["min_ess_per_s"] / peer["min_ess_per_s"]
        row["whole_fit_ratio"] = o["first_fit_seconds"] / peer["seconds"]
        row["ess_rate_ratio_by_seed"] = [p[0] for p in pairs]
        row["whole_fit_ratio_by_seed"] = [p[1] for p in pairs]
    lo, hi = TARGETS["sd_ratio_range"]
    row["targets"] = {
        "ess_rate": (None if "ess_rate_ratio" not in row
                     else row["ess_rate_ratio"] >= TARGETS["ess_rate_ratio_min"]),
        "whole_fit": (None if "whole_fit_ratio" not in row
                      else row["whole_fit_ratio"] <= TARGETS["whole_fit_ratio_max"]),
        "no_warning": not o["warning_seeds"],
        "means": o["max_abs_z"] is not None and o["max_abs_z"] <= TARGETS["abs_z_max"],
        "sds": (o["sd_ratio_min"] is not None
                and lo <= o["sd_ratio_min"] and o["sd_ratio_max"] <= hi)}
    return row


def run(names, seeds, *, chain_methods, nuts_max_n, quick, rerun, write):
    RESULTS.mkdir(parents=True, exist_ok=True)
    key = logistic_panel.source_hash()
    if rerun or any(not _record_path("ours", name, seed, key).exists()
                    for name in names for seed in seeds):
        print("priming the package's kernel cache (one default fit per data set)", flush=True)
        _spawn(["--worker", "prime", "--data", *names])
    rows, runs = [], []
    for name in names:
        X, y = load_data(name)
        n, d = X.shape
        print(f"{name}: N = {n}, d = {d}", flush=True)
        ref_info, ref = reference(name, X, y, quick)
        ours, nuts = [], {m: [] for m in chain_methods if n <= nuts_max_n}
        for seed in seeds:
            record = collect("ours", name, seed, key, rerun=rerun)
            if record is not None:
                ours.append({**record, **accuracy(record, ref)})
            for method in nuts:
                record = collect(f"nuts_{method}", name, seed, key, rerun=rerun,
                                 args=["--chain-method", method])
                if record is not None:
                    nuts[method].append({**record, **accuracy(record, ref)})
        if not ours:
            continue
        rows.append(summarise(name, n, d, ours, {m: r for m, r in nuts.items() if r},
                              ref_info))
        heavy = ("mean", "sd", "mcse_mean", "mcse_sd")
        runs.extend({k: v for k, v in r.items() if k not in heavy}
                    for r in ours + [r for v in nuts.values() for r in v])
        write(rows, runs)
    return rows, runs


# ----------------------------------------------------------------------------- report


def format_table(stem, section="main"):
    """Markdown of the documentation's table of ``{stem}.json`` (``results_tables.small_data``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
    import results_tables

    table = results_tables.small_data(section, experiment=stem, results=RESULTS)
    lines = [table.title, "", "| " + " | ".join(table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if "ess_rate_ratio" in r]
    if not rows:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.35 * len(rows) + 1.6), sharey=True)
    labels = [f"{r['data']}" for r in rows]
    for ax, key, title in (
            (axes[0], "ess_rate_ratio", "min-ESS/s, ours (kernels loaded) / NUTS (no compile)"),
            (axes[1], "whole_fit_ratio", "whole fit, ours (fresh process) / NUTS (compile)")):
        for i, r in enumerate(rows):
            per_seed = r[f"{key}_by_seed"]
            ax.plot(per_seed, [i] * len(per_seed), "o", color="tab:gray", ms=3)
            ax.plot(r[key], i, "D", color="tab:blue" if key == "ess_rate_ratio" else "tab:red")
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
    axes[0].invert_yaxis()  # shared: the first data set on top
    axes[0].set_xlabel("ratio (> 1: ours faster); diamonds: medians, dots: seeds", fontsize=8)
    axes[1].set_xlabel("ratio (< 1: ours faster)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="*", help="data sets (default: the grid)")
    parser.add_argument("--grid", choices=("cross", "full"), default="cross")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--large", action="store_true",
                        help=f"add {PEERS} (NUTS runs only with --nuts-max-n 1000000)")
    parser.add_argument("--nuts-max-n", type=int, default=100_000,
                        help="no timed NUTS runs on data sets with more rows")
    parser.add_argument("--chain-methods", nargs="*", default=["vectorized"],
                        choices=("vectorized", "sequential"))
    parser.add_argument("--quick", action="store_true",
                        help="one seed, the small sets, a short reference (a smoke run)")
    parser.add_argument("--rerun", action="store_true", help="measure every run again")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--chain-method", default="vectorized", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        name = args.data[0] if args.data else None
        if args.worker == "ours":
            record = work_ours(name, args.seed)
        elif args.worker.startswith("nuts_"):
            record = work_nuts(name, args.seed, args.chain_method)
        elif args.worker == "reference":
            record = work_reference(name, args.quick)
        elif args.worker == "prime":
            record = work_prime(args.data)
        else:
            raise ValueError(f"unknown worker {args.worker!r}")
        print(json.dumps(record))
        return None
    names = args.data or (list(QUICK) if args.quick else grid(args.grid))
    if args.large and PEERS not in names:
        names.append(PEERS)
    seeds = args.seeds[:1] if args.quick else args.seeds
    start, load_start = time.perf_counter(), os.getloadavg()
    stem = "small_data_quick" if args.quick else "small_data"
    out = RESULTS / f"{stem}.json"

    def write(rows, runs):
        out.write_text(json.dumps({
            "prior_scale": PRIOR_SCALE, "separable_norm": SEPARABLE_NORM,
            "separable_error": separable_error(), "nuts_run": NUTS_RUN, "seeds": seeds,
            "targets": TARGETS, "source_hash": logistic_panel.source_hash(),
            "load_start": list(load_start), "load_end": list(os.getloadavg()),
            "wall_seconds": time.perf_counter() - start,
            "results": rows, "runs": runs}, indent=1))
        plot(rows, RESULTS / f"{stem}.png")
        print(format_table(stem).splitlines()[-1], flush=True)

    rows, _ = run(names, seeds, chain_methods=args.chain_methods, nuts_max_n=args.nuts_max_n,
                  quick=args.quick, rerun=args.rerun, write=write)
    print(format_table(stem))
    print(format_table(stem, "details"))
    print(f"wrote {out}")
    return rows


if __name__ == "__main__":
    main()
