"""Real-data panel: every acceptance test of `BayesianLogisticRegressionMH` against NUTS.

Every binary problem scikit-learn ships offline, plus one large synthetic set, each sampled by
:class:`sksubsample.BayesianLogisticRegressionMH` with every acceptance test (the estimator's
default, i.e. no ``test`` argument; ``"metropolis"``, exact; ``"racing"``; ``"austerity"``;
``"adaptive_subsampling"``) and compared with a long NumPyro NUTS float64 reference of the same
posterior.

Data sets (features standardised to zero mean and unit variance, intercept fitted):

* ``breast_cancer``: N = 569, 30 features, prior N(0, 2.5²);
* ``digits_AvB``: two classes of ``load_digits`` (3 vs 8, 1 vs 7, 4 vs 9, 5 vs 6), the pixels
  that are not constant within the pair standardised, prior N(0, 1);
* ``wine_K_vs_rest`` (K = 0, 1, 2) and ``iris_NAME_vs_rest`` (setosa, versicolor, virginica),
  prior N(0, 2.5²); setosa vs rest is linearly separable, so its posterior exists only
  because the prior is proper; versicolor vs rest is not separable;
* ``synthetic_heavy``: N = 100 000, d = 20 multivariate Student-t features (3 degrees of
  freedom, AR(1) correlation 0.6, so whole rows are outlying), labels from a logistic model
  with 1 % of them flipped (label outliers), prior N(0, 2.5²).

The prior N(0, τ² I) covers the coefficients *and* the intercept, as in the estimator
(``GLMTarget`` puts ``prior_scale`` on every column of the design ``[X, 1]``), and the
reference samples exactly that model: θ = (coef, intercept), y ~ Bernoulli(σ([X, 1] θ)).

Reference: NumPyro NUTS in float64 (``jax_enable_x64``), dense mass matrix, target acceptance
0.9, 4 chains × (1 000 warm-up + 5 000 draws), cached in ``benchmarks/results/reference_cache``
as a small JSON file (per-coordinate means, sds, Monte Carlo standard errors and ESS, no
draws) keyed by the data set name, a hash of its arrays and the sampler settings.

Comparison (per data set and acceptance test, 4 chains, fixed seed; per coordinate j):

* mean error in reference sds, ``e_j = (m_j - m_ref,j) / s_ref,j``, and its Monte Carlo z-score
  ``z_j = (m_j - m_ref,j) / sqrt(se_j² + se_ref,j²)`` with ``se = s / sqrt(ESS_mean)``, the
  ESS of the mean (:func:`sksubsample.diagnostics.effective_sample_size`, ``method="mean"``,
  Vehtari et al. 2021, Section 3.2) of each set of chains;
* sd ratio ``r_j = s_j / s_ref,j`` and its Monte Carlo error. Choice: the delta method on the
  variance estimate, with the autocorrelation of the squared deviations taken into account.
  With ``u_t = (x_t - m)²``, ``s² = mean(u)`` has standard error ``sd(u) / sqrt(ESS_u)``, where
  ``ESS_u`` is the ESS of the mean of ``u`` (same estimator as above) and
  ``var(u) = s⁴ (κ - 1)`` (κ the kurtosis); hence
  ``se(s) = s · sqrt((κ - 1) / (4 ESS_u))``, the estimate ArviZ calls ``mcse_sd``. This is
  the formula ``s · sqrt((κ - 1) / (4 ESS))`` with the ESS of the squared deviations rather
  than of the draws: it holds for any kurtosis and any autocorrelation of ``u`` (batch means
  would need a batch length chosen per chain, the ESS route does not). The errors of the two
  sd estimates are independent, so ``se(r) = r · sqrt((se(s)/s)² + (se(s_ref)/s_ref)²)``;
* pass = every coordinate has ``|z_j| <= 4`` and ``|r_j - 1| <= 0.03 + 4 se(r_j)``;
* mixed = max split R-hat <= 1.01 and min bulk ESS >= 100 per chain (the thresholds of the
  estimator's convergence check). Both Monte Carlo errors above come from ESS estimates, which
  are themselves unreliable when the chains have not mixed: a fit can then pass only because
  its errors are wide, so the report counts "passed and mixed" separately;
* min ESS/s: the smallest bulk ESS over the coordinates divided by the wall time of ``fit``
  (MAP, proxies, warm-up and sampling, chains one after the other, ``n_jobs=1``);
* fraction of data touched: ``fraction_data_touched_`` of the estimator (likelihood terms
  evaluated over N × steps, 1 for exact MH).

Usage (``pip install -e ".[bench]"``; CPU only)::

    OMP_NUM_THREADS=1 python benchmarks/logistic_panel.py --references-only   # NUTS, cached
    OMP_NUM_THREADS=1 python benchmarks/logistic_panel.py                      # full panel
    OMP_NUM_THREADS=1 python benchmarks/logistic_panel.py --quick              # smoke run
    OMP_NUM_THREADS=1 python benchmarks/logistic_panel.py --datasets breast_cancer \\
        --tests default metropolis --n-draws 5000

Results: ``benchmarks/results/logistic_panel.json`` (one record per data set × test, written
after every fit, so an interrupted run resumes) and ``logistic_panel.md``, which the
documentation's logistic benchmark page includes. A record is reused only when its settings
and the hash of the ``sksubsample`` sources it ran with match the current ones
(``--reuse-stale`` keeps older records, ``--rerun`` recomputes).
``--quick`` writes ``logistic_panel_quick.*``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = RESULTS / "reference_cache"

TESTS = ("default", "metropolis", "racing", "austerity", "adaptive_subsampling")
DIGIT_PAIRS = ((3, 8), (1, 7), (4, 9), (5, 6))
IRIS_NAMES = ("setosa", "versicolor", "virginica")
DATASETS = (
    "breast_cancer",
    *(f"digits_{a}v{b}" for a, b in DIGIT_PAIRS),
    *(f"wine_{k}_vs_rest" for k in range(3)),
    *(f"iris_{name}_vs_rest" for name in IRIS_NAMES),
    "synthetic_heavy",
)
QUICK_DATASETS = ("breast_cancer", "wine_0_vs_rest", "iris_versicolor_vs_rest")

# Acceptance criteria (every coordinate): |z| <= Z_MAX and |sd ratio - 1| <= SD_SLACK + Z_MAX se.
Z_MAX = 4.0
SD_SLACK = 0.03
# Mixing (Vehtari et al. 2021, Section 4.3): the z-scores and sd bands rest on ESS estimates,
# which are only trustworthy when the chains have mixed; a row that passes with unmixed chains
# passes because its Monte Carlo errors are large, so the report counts it apart.
RHAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100


def mixed(record):
    """Max split R-hat <= 1.01 and min bulk ESS >= 100 per chain."""
    return (record["max_rhat"] <= RHAT_MAX
            and record["min_ess_bulk"] >= ESS_PER_CHAIN_MIN * record["n_chains"])

REFERENCE = {"n_chains": 4, "n_warmup": 1000, "n_draws": 5000, "seed": 20261123,
             "dense_mass": True, "target_accept_prob": 0.9, "float64": True}
QUICK_REFERENCE = {**REFERENCE, "n_warmup": 500, "n_draws": 1000}


# ----------------------------------------------------------------------------- data sets


def _standardise(X):
    """Zero mean, unit variance per column; constant columns must be dropped by the caller."""
    sd = X.std(axis=0)
    if np.any(sd == 0):
        raise ValueError("constant column left in the design")
    return (X - X.mean(axis=0)) / sd


def _synthetic_heavy(n=100_000, d=20, seed=0):
    """Multivariate-t (3 df) rows with AR(1) correlation, logistic labels, 1 % flipped."""
    rng = np.random.default_rng(seed)
    corr = 0.6 ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    gauss = rng.standard_normal((n, d)) @ np.linalg.cholesky(corr).T
    # One chi-square scale per row: heavy-tailed, correlated features with outlying rows.
    X = gauss / np.sqrt(rng.chisquare(3, size=n) / 3)[:, None]
    X = _standardise(X)
    w = rng.standard_normal(d) / np.sqrt(d) * 2.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w - 0.5)))).astype(np.int64)
    flip = rng.random(n) < 0.01
    y[flip] = 1 - y[flip]
    return X, y


def load_dataset(name):
    """``(X, y, prior_scale, feature_names)`` of a panel data set, ``y`` in {0, 1}."""
    from sklearn import datasets

    if name == "breast_cancer":
        data = datasets.load_breast_cancer()
        return (_standardise(data.data), data.target.astype(np.int64), 2.5,
                [f"f{j}" for j in range(data.data.shape[1])])
    if name.startswith("digits_"):
        a, b = (int(c) for c in name.removeprefix("digits_").split("v"))
        data = datasets.load_digits()
        keep = np.isin(data.target, (a, b))
        X = data.data[keep]
        varying = X.std(axis=0) > 0
        return (_standardise(X[:, varying]), (data.target[keep] == b).astype(np.int64), 1.0,
                [f"px{j}" for j in np.flatnonzero(varying)])
    if name.startswith("wine_"):
        k = int(name.split("_")[1])
        data = datasets.load_wine()
        return (_standardise(data.data), (data.target == k).astype(np.int64), 2.5,
                [f"f{j}" for j in range(data.data.shape[1])])
    if name.startswith("iris_"):
        k = IRIS_NAMES.index(name.split("_")[1])
        data = datasets.load_iris()
        return (_standardise(data.data), (data.target == k).astype(np.int64), 2.5,
                [f"f{j}" for j in range(data.data.shape[1])])
    if name == "synthetic_heavy":
        X, y = _synthetic_heavy()
        return X, y, 2.5, [f"f{j}" for j in range(X.shape[1])]
    raise ValueError(f"unknown data set {name!r}; choose from {', '.join(DATASETS)}")


def data_hash(X, y, prior_scale):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(y, dtype=np.int64).tobytes())
    h.update(repr(float(prior_scale)).encode())
    return h.hexdigest()[:16]


def source_hash():
    """Hash of the ``sksubsample`` sources imported by this process (records depend on it)."""
    import sksubsample

    root = Path(sksubsample.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


# ----------------------------------------------------------------------------- summaries


def summarise_draws(draws):
    """Per-coordinate mean, sd and their Monte Carlo errors from draws (chains, draws, d).

    ``mcse_mean = sd / sqrt(ESS_mean)``; ``mcse_sd = sd · sqrt((κ - 1) / (4 ESS_u))`` with
    ``u = (x - mean)²`` (delta method on the variance estimate, see the module docstring).
    """
    from sksubsample.diagnostics import effective_sample_size, split_rhat

    draws = np.asarray(draws, dtype=np.float64)
    flat = draws.reshape(-1, draws.shape[2])
    mean = flat.mean(axis=0)
    sd = flat.std(axis=0, ddof=1)
    ess_mean = effective_sample_size(draws, method="mean")
    ess_bulk = effective_sample_size(draws, method="bulk")
    dev2 = (draws - mean) ** 2
    ess_sq = effective_sample_size(dev2, method="mean")
    kurtosis = (dev2.reshape(-1, draws.shape[2]) ** 2).mean(axis=0) / (sd**2) ** 2
    return {
        "mean": mean, "sd": sd,
        "mcse_mean": sd / np.sqrt(ess_mean),
        "mcse_sd": sd * np.sqrt(np.maximum(kurtosis - 1.0, 0.0) / (4.0 * ess_sq)),
        "ess_mean": ess_mean, "ess_bulk": ess_bulk, "ess_sq": ess_sq, "kurtosis": kurtosis,
        "rhat": split_rhat(draws),
    }


def _jsonable(summary):
    return {k: (np.asarray(v, dtype=np.float64).tolist() if isinstance(v, np.ndarray) else v)
            for k, v in summary.items()}


def compare(ours, ref):
    """Per-coordinate errors of ``ours`` against ``ref`` (both from :func:`summarise_draws`)."""
    ref = {k: np.asarray(v, dtype=np.float64) for k, v in ref.items()
           if k in ("mean", "sd", "mcse_mean", "mcse_sd")}
    diff = ours["mean"] - ref["mean"]
    err_sd = diff / ref["sd"]
    z = diff / np.sqrt(ours["mcse_mean"] ** 2 + ref["mcse_mean"] ** 2)
    ratio = ours["sd"] / ref["sd"]
    se_ratio = ratio * np.sqrt((ours["mcse_sd"] / ours["sd"]) ** 2
                               + (ref["mcse_sd"] / ref["sd"]) ** 2)
    half_band = SD_SLACK + Z_MAX * se_ratio
    mean_ok = np.abs(z) <= Z_MAX
    sd_ok = np.abs(ratio - 1.0) <= half_band
    return {"err_sd": err_sd, "z": z, "sd_ratio": ratio, "se_sd_ratio": se_ratio,
            "sd_half_band": half_band, "mean_ok": mean_ok, "sd_ok": sd_ok}


# ----------------------------------------------------------------------------- reference


def reference_path(name, X, y, prior_scale, settings):
    key = hashlib.sha256(json.dumps({"data": data_hash(X, y, prior_scale), **settings},
                                    sort_keys=True).encode()).hexdigest()[:12]
    return CACHE / f"{name}_{key}.json"


def reference_id(reference):
    """Identifies a reference summary: its data and its sampler settings."""
    return hashlib.sha256(json.dumps({"data": reference["data_hash"],
                                      **reference["settings"]},
                                     sort_keys=True).encode()).hexdigest()[:12]


def run_nuts(X, y, prior_scale, settings):
    """NumPyro NUTS draws (chains, draws, d + 1) of θ = (coef, intercept), float64."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the NUTS reference needs the 'bench' extra: "
                          "pip install -e '.[bench]'") from exc
    jax.config.update("jax_enable_x64", bool(settings["float64"]))
    dtype = jnp.float64 if settings["float64"] else jnp.float32
    design = jnp.asarray(np.column_stack([X, np.ones(len(X))]), dtype=dtype)
    labels = jnp.asarray(y, dtype=dtype)
    dim = design.shape[1]

    def model(design, labels):
        # Same prior on every column of [X, 1], the intercept included (as GLMTarget).
        theta = numpyro.sample("theta", dist.Normal(jnp.zeros(dim, dtype), prior_scale)
                               .to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=design @ theta), obs=labels)

    kernel = NUTS(model, dense_mass=settings["dense_mass"],
                  target_accept_prob=settings["target_accept_prob"])
    mcmc = MCMC(kernel, num_warmup=settings["n_warmup"], num_samples=settings["n_draws"],
                num_chains=settings["n_chains"], chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(settings["seed"]), design, labels,
             extra_fields=("diverging", "num_steps"))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"], dtype=np.float64)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    return draws, {"divergences": int(np.asarray(extra["diverging"]).sum()),
                   "mean_leapfrog_steps": float(np.asarray(extra["num_steps"]).mean())}


def get_reference(name, *, quick=False, compute=True):
    """Cached NUTS summary of a data set (computed and stored when missing)."""
    X, y, prior_scale, _ = load_dataset(name)
    settings = QUICK_REFERENCE if quick else REFERENCE
    # A quick run borrows the full reference when it is cached: it is strictly better.
    for path in (reference_path(name, X, y, prior_scale, REFERENCE),
                 reference_path(name, X, y, prior_scale, settings)):
        if path.exists():
            return json.loads(path.read_text())
    if not compute:
        return None
    start = time.perf_counter()
    draws, extra = run_nuts(X, y, prior_scale, settings)
    seconds = time.perf_counter() - start
    summary = summarise_draws(draws)
    record = {"dataset": name, "n": int(X.shape[0]), "d": int(X.shape[1] + 1),
              "prior_scale": prior_scale, "data_hash": data_hash(X, y, prior_scale),
              "settings": settings, "seconds": seconds, **extra,
              "max_rhat": float(np.max(summary["rhat"])),
              "min_ess_bulk": float(np.min(summary["ess_bulk"])),
              "min_ess_mean": float(np.min(summary["ess_mean"])),
              **_jsonable(summary)}
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    print(f"reference {name}: {seconds:.0f} s, max R-hat {record['max_rhat']:.4f}, "
          f"min bulk ESS {record['min_ess_bulk']:.0f}, divergences {record['divergences']}",
          flush=True)
    return record


# ----------------------------------------------------------------------------- our sampler


def run_ours(name, test, *, n_draws, n_warmup, seed, reference):
    """Fit the estimator (4 chains, one after the other) and compare with the reference."""
    from sksubsample import BayesianLogisticRegressionMH

    X, y, prior_scale, features = load_dataset(name)
    options = {} if test == "default" else {"test": test}
    clf = BayesianLogisticRegressionMH(prior_scale=prior_scale, n_draws=n_draws,
                                       n_warmup=n_warmup, n_chains=4, n_jobs=1,
                                       random_state=seed, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        clf.fit(X, y)
        seconds = time.perf_counter() - start
    convergence = [str(w.message) for w in caught
                   if w.category.__name__ == "ConvergenceWarning"]
    draws = np.concatenate([clf.coef_samples_, clf.intercept_samples_[:, :, None]], axis=2)
    ours = summarise_draws(draws)
    cmp = compare(ours, reference)
    names = [*features, "intercept"]
    worst_z = int(np.argmax(np.abs(cmp["z"])))
    sd_excess = np.abs(cmp["sd_ratio"] - 1.0) / cmp["sd_half_band"]
    worst_sd = int(np.argmax(sd_excess))
    resolved = clf.get_params()["test"]
    return {
        "dataset": name, "test": test,
        "resolved_test": resolved if isinstance(resolved, str) else repr(resolved),
        "n": int(X.shape[0]), "d": int(X.shape[1] + 1), "prior_scale": prior_scale,
        "n_draws": n_draws, "n_warmup": n_warmup, "n_chains": 4, "seed": seed,
        "seconds": seconds,
        "min_ess_bulk": float(ours["ess_bulk"].min()),
        "min_ess_per_s": float(ours["ess_bulk"].min() / seconds),
        "max_rhat": float(np.max(ours["rhat"])),
        "worst_err_sd": float(np.max(np.abs(cmp["err_sd"]))),
        "worst_abs_z": float(np.abs(cmp["z"][worst_z])),
        "worst_z_coordinate": names[worst_z],
        "err_sd_at_worst_z": float(cmp["err_sd"][worst_z]),
        "sd_ratio_min": float(cmp["sd_ratio"].min()),
        "sd_ratio_max": float(cmp["sd_ratio"].max()),
        "sd_half_band_min": float(cmp["sd_half_band"].min()),
        "sd_half_band_max": float(cmp["sd_half_band"].max()),
        "worst_sd_coordinate": names[worst_sd],
        "worst_sd_ratio": float(cmp["sd_ratio"][worst_sd]),
        "worst_sd_half_band": float(cmp["sd_half_band"][worst_sd]),
        "n_mean_fail": int((~cmp["mean_ok"]).sum()),
        "n_sd_fail": int((~cmp["sd_ok"]).sum()),
        "mean_ok": bool(cmp["mean_ok"].all()),
        "sd_ok": bool(cmp["sd_ok"].all()),
        "passed": bool(cmp["mean_ok"].all() and cmp["sd_ok"].all()),
        "fraction_data_touched": float(clf.fraction_data_touched_),
        "acceptance_rate": float(clf.acceptance_rate_),
        "mean_batch_size": float(clf.mean_batch_size_),
        "step_size": np.asarray(clf.step_size_, dtype=np.float64).tolist(),
        "convergence_warnings": convergence,
        # Per coordinate, rounded: enough to see which parameters fail, small on disk.
        "z": np.round(cmp["z"], 3).tolist(),
        "sd_ratio": np.round(cmp["sd_ratio"], 4).tolist(),
        "sd_half_band": np.round(cmp["sd_half_band"], 4).tolist(),
    }


# ----------------------------------------------------------------------------- report


def _fmt_test(record):
    if record["test"] == "default":
        return f"default ({record['resolved_test']})"
    return record["test"]


def _order(record):
    """Rows in the order of DATASETS, then of TESTS."""
    return (DATASETS.index(record["dataset"]) if record["dataset"] in DATASETS else len(DATASETS),
            TESTS.index(record["test"]) if record["test"] in TESTS else len(TESTS))


def render_markdown(results):
    """Markdown of the panel: settings, a pass count per test, and one row per fit."""
    settings = results["settings"]
    records = sorted(results["records"].values(), key=_order)
    ref = settings["reference"]
    lines = [
        f"Each fit: `BayesianLogisticRegressionMH`, 4 chains × ({settings['n_warmup']:,} "
        f"warm-up + {settings['n_draws']:,} draws), `random_state={settings['seed']}`, "
        f"`n_jobs=1`; sksubsample sources `{settings['source_hash']}`"
        f"{' (' + settings['source_label'] + ')' if settings.get('source_label') else ''}. "
        f"Reference: NumPyro NUTS float64, {ref['n_chains']} chains × ({ref['n_warmup']:,} "
        f"warm-up + {ref['n_draws']:,} draws), dense mass, target acceptance "
        f"{ref['target_accept_prob']}.",
        "",
        f"Pass = every coordinate has |z| ≤ {Z_MAX:g} and |sd ratio − 1| ≤ {SD_SLACK:g} + "
        f"{Z_MAX:g} se(sd ratio). |err|/sd: worst |mean error| in reference sds; z: its "
        "Monte Carlo z-score (the coordinate with the largest |z|); sd band: the half-widths "
        "0.03 + 4 se of the sd-ratio bands over the coordinates; ESS/s: min bulk ESS over the "
        "wall time of `fit`; data: `fraction_data_touched_`; mixed: max split R-hat ≤ "
        f"{RHAT_MAX:g} and min bulk ESS ≥ {ESS_PER_CHAIN_MIN} per chain (without it the "
        "Monte Carlo errors, hence the pass, are not reliable); s: seconds of `fit`.",
        "",
    ]
    by_test = {}
    for r in records:
        by_test.setdefault(_fmt_test(r), []).append((r["passed"], mixed(r)))
    lines.append("| test | passed | passed and mixed |")
    lines.append("|---|---|---|")
    for test, flags in by_test.items():
        lines.append(f"| {test} | {sum(p for p, _ in flags)} / {len(flags)} | "
                     f"{sum(p and m for p, m in flags)} / {len(flags)} |")
    lines += ["", "| data (N, d) | test | pass | mixed | worst \\|err\\|/sd | worst \\|z\\| "
              "(coord) | sd ratio min – max | sd band ± | min ESS | ESS/s | data | R-hat | s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        verdict = "pass" if r["passed"] else "**fail** (" + ", ".join(
            part for part, bad in (("mean", not r["mean_ok"]), ("sd", not r["sd_ok"])) if bad
        ) + ")"
        stale = "" if r.get("source_hash") == settings["source_hash"] else " †"
        lines.append(
            f"| {r['dataset']} ({r['n']:,}, {r['d']}) | {_fmt_test(r)}{stale} | {verdict} | "
            f"{'yes' if mixed(r) else 'no'} | "
            f"{r['worst_err_sd']:.3f} | {r['worst_abs_z']:.1f} ({r['worst_z_coordinate']}) | "
            f"{r['sd_ratio_min']:.3f} – {r['sd_ratio_max']:.3f} | "
            f"{r['sd_half_band_min']:.3f} – {r['sd_half_band_max']:.3f} | "
            f"{r['min_ess_bulk']:.0f} | {r['min_ess_per_s']:.1f} | "
            f"{r['fraction_data_touched']:.3g} | {r['max_rhat']:.3f} | {r['seconds']:.0f} |")
    if any(r.get("source_hash") != settings["source_hash"] for r in records):
        lines += ["", "† record computed with other sksubsample sources (`--reuse-stale`)."]
    refs = results.get("references", {})
    if refs:
        lines += ["", "References (NUTS float64):", "",
                  "| data | s | max R-hat | min bulk ESS | divergences |", "|---|---|---|---|---|"]
        for name in DATASETS:
            if name in refs:
                x = refs[name]
                lines.append(f"| {name} | {x['seconds']:.0f} | {x['max_rhat']:.4f} | "
                             f"{x['min_ess_bulk']:.0f} | {x['divergences']} |")
    return "\n".join(lines) + "\n"


def print_table(results):
    header = (f"{'data':<24}{'test':<34}{'pass':<6}{'mixed':<6}{'|err|/sd':>9}{'|z|':>7}"
              f"{'sd min':>8}{'sd max':>8}{'band±':>13}{'ESS/s':>9}{'data':>9}{'s':>6}")
    print(header)
    for r in sorted(results["records"].values(), key=_order):
        print(f"{r['dataset']:<24}{_fmt_test(r)[:33]:<34}{'yes' if r['passed'] else 'NO':<6}"
              f"{'yes' if mixed(r) else 'no':<6}"
              f"{r['worst_err_sd']:>9.3f}{r['worst_abs_z']:>7.1f}{r['sd_ratio_min']:>8.3f}"
              f"{r['sd_ratio_max']:>8.3f}"
              f"{r['sd_half_band_min']:>6.3f}-{r['sd_half_band_max']:<6.3f}"
              f"{r['min_ess_per_s']:>9.1f}{r['fraction_data_touched']:>9.3g}"
              f"{r['seconds']:>6.0f}")


# ----------------------------------------------------------------------------- main


def _save(path, results, new_key=None):
    """Write ``results`` atomically, keeping records another run wrote to ``path`` meanwhile.

    Two runs over different data sets may share the file: each reloads it, adds its own new
    record and replaces the file in one rename, so neither drops the other's records.
    """
    if path.exists():
        on_disk = json.loads(path.read_text())["records"]
        records = {**results["records"], **on_disk}
        if new_key is not None:
            records[new_key] = results["records"][new_key]
        results = {**results, "records": records}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(path)
    return results


def _settings_key(record):
    return (record["n_draws"], record["n_warmup"], record["seed"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="3 small data sets, 4 x (500 + 1000) draws, short references")
    parser.add_argument("--n-draws", type=int, help="draws per chain (10 000; quick 1 000)")
    parser.add_argument("--n-warmup", type=int, help="warm-up per chain (1 000; quick 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, metavar="NAME",
                        help=f"subset of: {', '.join(DATASETS)}")
    parser.add_argument("--tests", nargs="+", choices=TESTS, metavar="TEST",
                        help=f"subset of: {', '.join(TESTS)}")
    parser.add_argument("--references-only", action="store_true",
                        help="compute and cache the NUTS references, fit nothing")
    parser.add_argument("--rerun", action="store_true", help="recompute the selected records")
    parser.add_argument("--reuse-stale", action="store_true",
                        help="keep records computed with other sksubsample sources")
    parser.add_argument("--source-label", default="",
                        help="free text shown next to the source hash (e.g. a commit)")
    args = parser.parse_args(argv)
    for name in ("n_draws", "n_warmup"):
        value = getattr(args, name)
        if value is not None and value < (1 if name == "n_draws" else 0):
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
    n_draws = args.n_draws or (1000 if args.quick else 10_000)
    n_warmup = args.n_warmup if args.n_warmup is not None else (500 if args.quick else 1000)
    datasets = args.datasets or (QUICK_DATASETS if args.quick else DATASETS)
    tests = args.tests or TESTS
    stem = "logistic_panel_quick" if args.quick else "logistic_panel"
    out_json, out_md = RESULTS / f"{stem}.json", RESULTS / f"{stem}.md"
    RESULTS.mkdir(parents=True, exist_ok=True)

    # References first: JAX runs before any of our fits, so it does not share their timing.
    references = {}
    for name in datasets:
        references[name] = get_reference(name, quick=args.quick)
    if args.references_only:
        return references

    src = source_hash()
    results = json.loads(out_json.read_text()) if out_json.exists() else {"records": {}}
    results["settings"] = {
        "n_draws": n_draws, "n_warmup": n_warmup, "seed": args.seed, "source_hash": src,
        "source_label": args.source_label,
        "reference": QUICK_REFERENCE if args.quick else REFERENCE,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}",
        "python": sys.version.split()[0],
    }
    results["references"] = {
        **results.get("references", {}),
        **{name: {k: ref[k] for k in ("seconds", "max_rhat", "min_ess_bulk", "min_ess_mean",
                                      "divergences", "settings", "data_hash")}
           for name, ref in references.items()}}
    for name in datasets:
        for test in tests:
            key = f"{name}|{test}"
            old = results["records"].get(key)
            if (old is not None and not args.rerun
                    and _settings_key(old) == (n_draws, n_warmup, args.seed)
                    and old.get("reference_id") == reference_id(references[name])
                    and (old.get("source_hash") == src or args.reuse_stale)):
                continue
            record = run_ours(name, test, n_draws=n_draws, n_warmup=n_warmup, seed=args.seed,
                              reference=references[name])
            record["source_hash"] = src
            record["reference_id"] = reference_id(references[name])
            results["records"][key] = record
            results = _save(out_json, results, key)
            print(f"{name:<24}{_fmt_test(record)[:40]:<42}"
                  f"{'pass' if record['passed'] else 'FAIL'}  |err|/sd "
                  f"{record['worst_err_sd']:.3f}  |z| {record['worst_abs_z']:.1f}  sd "
                  f"{record['sd_ratio_min']:.3f}-{record['sd_ratio_max']:.3f}  ESS/s "
                  f"{record['min_ess_per_s']:.1f}  {record['seconds']:.0f} s", flush=True)
    # The table shows every record of the current settings (other data sets and tests too).
    shown = {k: r for k, r in results["records"].items()
             if _settings_key(r) == (n_draws, n_warmup, args.seed)}
    view = {**results, "records": shown}
    _save(out_json, results)
    markdown = render_markdown(view)
    out_md.write_text(markdown)
    print_table(view)
    print(f"wrote {out_json} and {out_md}")
    return view


if __name__ == "__main__":
    main()
