"""Bayesian logistic regression: our MH samplers against NumPyro NUTS and BlackJAX SGLD-CV.

Synthetic problem: d = 20 standard-normal features + intercept, N rows, prior N(0, 10²) on every
coefficient, labels from a logistic model with N(0, 1) weights. Every sampler runs in its own
process (``--sampler NAME``) so imports, JIT caches and BLAS threads do not interfere; the parent
collects one JSON line per sampler (with the 1-minute load average of the machine before and
after it) and compares the draws with a reference posterior mean and sd:

* min-ESS/s: smallest bulk ESS over the 21 parameters (rank-normalised split chains, Vehtari et
  al. 2021; :func:`sksubsample.diagnostics.effective_sample_size`) divided by the wall time of
  the whole run (for ours the whole ``fit``: MAP, proxy set-up, warm-up; for SGLD-CV the
  sampling including JIT compilation, but not its MAP and set-up). Like for like, also: ours
  without its set-up (the time of a 4-step fit, measured after the run), SGLD-CV without the
  compilation, and SGLD-CV with its MAP and set-up;
* worst |mean error| in reference sds, and min/median/max of sd / reference sd;
* time per iteration, and for ours its ratio to one minibatch log-likelihood evaluation
  (gather the rows of a random minibatch of the mean decision size, matrix-vector product,
  log-sigmoid), the cost floor of any subsampled step; mean decision minibatch and fraction of
  the data touched per step.

Two references (``--reference``):

``nuts`` (default)
    NumPyro NUTS in float64, 4 chains x (1 000 warm-up + 5 000 draws); its Monte-Carlo error on
    a mean is sd / sqrt(ESS). About 10 minutes at N = 1e5 on a 2-core machine and linear in N.
``importance``
    Self-normalised importance sampling (e.g. Owen 2013, *Monte Carlo theory, methods and
    examples*, Ch. 9) from a multivariate Student-t with ``IS_DF`` = 7 degrees of freedom
    centred at the MAP with the Laplace covariance (inverse Hessian of the negative
    log-posterior at the MAP) as scale matrix; the MAP is scikit-learn's ``LogisticRegression``
    with ``C = prior_scale²`` on the design with a column of ones, i.e. the intercept penalised
    like the prior. ``IS_PROPOSALS`` = 24 000 i.i.d. proposals; the exact log-posterior of each
    is computed on all N rows (chunks of rows times all proposals, one BLAS product per chunk).
    The reference means and sds are the weighted ones. It is exact up to Monte-Carlo error,
    which the weights measure: the Kish effective sample size (Σw)² / Σw² is reported, and the
    Monte-Carlo standard error of each weighted mean is the delta-method one,
    sqrt(Σ w̃ᵢ² (θᵢ − μ̂)²) with normalised weights w̃ (Owen 2013, Eq. 9.8), that of each sd
    likewise from the weighted second moment. The heavy tails keep the weights bounded where
    the posterior is wider than its Laplace approximation. ``--check-reference`` computes both
    references at the given N (NUTS is run if not cached) and compares them, parameter by
    parameter, in units of the combined Monte-Carlo error.

Usage (CPU only; ``pip install -e ".[bench]"``)::

    OMP_NUM_THREADS=1 python benchmarks/logistic_peers.py --n 100000
    OMP_NUM_THREADS=1 python benchmarks/logistic_peers.py --n 100000 --check-reference
    OMP_NUM_THREADS=1 python benchmarks/logistic_peers.py --n 1000000 --reference importance \
        --only ours_default ours_mb_barker_langevin sgld_cv

Finished samplers are cached as ``benchmarks/results/_record_{name}_N{n}_run{k}.json`` and
``_draws_{name}_N{n}_run{k}.npy`` (scratch files), so an interrupted run resumes; ``--rerun``
runs the selected samplers once more as run k + 1 (the references are never rerun: delete their
records to rebuild them). The table shows the last run; the JSON lists every run's min-ESS/s.

Results: ``benchmarks/results/logistic_peers_N{n}.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

D = 20
PRIOR_SCALE = 10.0
IS_DF = 7
IS_PROPOSALS = 24_000
RESULTS = Path(__file__).resolve().parent / "results"
OURS = {
    # name: (estimator options other than the common ones, n_draws per chain, n_warmup)
    # The estimator's defaults: bounded Barker test, Hamiltonian proposal, control variates,
    # gradient="auto" (the proxy's gradient at these N).
    "ours_default": ({}, 20000, 500),
    "ours_mb_barker_langevin": ({"test": "minibatch_barker", "proposal": "langevin"}, 5000, 1000),
    "ours_mb_barker_rw": ({"test": "minibatch_barker", "proposal": "random-walk"}, 5000, 1000),
    "ours_exact_mh_langevin": ({"test": "metropolis", "proposal": "langevin",
                                "control_variates": False}, 400, 200),
}
PEERS = ["nuts_f32", "nuts_f64", "sgld_cv"]
REFERENCES = {"nuts": "nuts_reference", "importance": "is_reference"}


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    w = rng.standard_normal(D)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w + 0.5)))).astype(np.int64)
    return X, y


def map_and_laplace(X, y):
    """MAP of the posterior (intercept as a penalised column of ones) and the Hessian there."""
    from sklearn.linear_model import LogisticRegression

    Xa = np.column_stack([X, np.ones(len(X))])
    # sklearn minimises ½|θ|² + C Σ log-loss: with C = τ² that is the negative log-posterior.
    lr = LogisticRegression(C=PRIOR_SCALE**2, fit_intercept=False, solver="newton-cholesky",
                            tol=1e-10).fit(Xa, y)
    theta_map = lr.coef_.ravel()
    p = 1.0 / (1.0 + np.exp(-Xa @ theta_map))
    precision = (Xa.T * (p * (1 - p))) @ Xa + np.eye(D + 1) / PRIOR_SCALE**2
    return Xa, theta_map, precision


# ----------------------------------------------------------------------------- samplers


def run_ours(name, X, y, seed):
    from sksubsample import BayesianLogisticRegressionMH

    options, n_samples, n_warmup = OURS[name]

    def fit(n_draws, n_chains=4, data=(X, y), warmup=n_warmup):
        clf = BayesianLogisticRegressionMH(prior_scale=PRIOR_SCALE, n_draws=n_draws,
                                           n_warmup=warmup, n_chains=n_chains, n_jobs=1,
                                           random_state=seed, **options)
        start = time.perf_counter()
        clf.fit(*data)
        return clf, time.perf_counter() - start

    # The compiled kernels' first call in this process (compiled, or loaded from numba's
    # cache), on a short fit of the same data, so that no timing below includes it: the set-up
    # at this N takes paths a small problem does not (third-order proxies, high-leverage
    # rows summed exactly), whose kernels a cold cache would otherwise compile in the
    # first timed fit.
    _, first_call = fit(20, n_chains=1, warmup=20)
    clf, seconds = fit(n_samples)
    draws = np.concatenate([clf.coef_samples_, clf.intercept_samples_[:, :, None]], axis=2)
    n_iter = 4 * (n_samples + n_warmup)
    # The cost of one MH iteration, set-up excluded: the difference of two fit lengths, each
    # the fastest of three alternating runs (the machine is shared; the set-up, seconds long at
    # large N, varies with its load more than the sampling does).
    short = n_samples // 5
    long_runs, short_runs = [seconds], []
    for _ in range(3):
        short_runs.append(fit(short)[1])
        if len(long_runs) < 3:
            long_runs.append(fit(n_samples)[1])
    seconds_per_iter = (min(long_runs) - min(short_runs)) / (4 * (n_samples - short))
    # Cost floor of a subsampled step: one minibatch log-likelihood of the mean decision size.
    rng = np.random.default_rng(seed)
    b = max(1, round(clf.mean_batch_size_))
    Xa = np.column_stack([X, np.ones(len(X))])
    sign = 2.0 * y - 1.0
    theta = np.concatenate([clf.coef_[0], clf.intercept_])
    reps = max(20, min(2000, 200_000 // b))  # ~0.2 M rows in all, whatever the batch
    idxs = [rng.choice(len(X), size=b, replace=False) for _ in range(reps)]
    t0 = time.perf_counter()
    for idx in idxs:
        z = sign[idx] * (Xa[idx] @ theta)
        np.minimum(z, 0.0) - np.log1p(np.exp(-np.abs(z)))
    t_minibatch = (time.perf_counter() - t0) / reps
    stats = {"options": options, "n_draws": n_samples, "n_warmup": n_warmup,
             "mean_batch": clf.mean_batch_size_, "fraction_of_data": clf.fraction_data_touched_,
             "acceptance": clf.acceptance_rate_, "step_size": clf.step_size_.tolist(),
             "minibatch_loglik_seconds": t_minibatch, "seconds_per_iter": seconds_per_iter,
             "fit_seconds_long": long_runs, "fit_seconds_short": short_runs,
             "first_call_seconds": first_call}
    # Set-up (validation, MAP, control-variate proxies) as the time of a 4-step fit (refitting
    # overwrites the fitted attributes, hence last), so that the sampling rate can be compared
    # with SGLD-CV's, whose MAP is timed apart.
    _, stats["setup_seconds"] = fit(4, n_chains=1, warmup=0)
    return draws, seconds, n_iter, stats


def _jax_setup(f64):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", f64)
    return jax


def run_nuts(X, y, seed, *, f64, n_samples=500, n_warmup=500):
    jax = _jax_setup(f64)
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    dtype = jnp.float64 if f64 else jnp.float32
    Xj, yj = jnp.asarray(X, dtype=dtype), jnp.asarray(y, dtype=dtype)

    def model(X, y):
        w = numpyro.sample("w", dist.Normal(jnp.zeros(D, dtype), PRIOR_SCALE))
        b = numpyro.sample("b", dist.Normal(jnp.asarray(0.0, dtype), PRIOR_SCALE))
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)

    mcmc = MCMC(NUTS(model), num_warmup=n_warmup, num_samples=n_samples, num_chains=4,
                chain_method="sequential", progress_bar=False)
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), Xj, yj, extra_fields=("num_steps",))
    samples = mcmc.get_samples(group_by_chain=True)
    jax.block_until_ready(samples)
    seconds = time.perf_counter() - start
    draws = np.concatenate([np.asarray(samples["w"], dtype=np.float64),
                            np.asarray(samples["b"], dtype=np.float64)[:, :, None]], axis=2)
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    return draws, seconds, 4 * (n_samples + n_warmup), {"mean_leapfrog_steps":
                                                        float(steps.mean())}


def run_sgld_cv(X, y, seed, *, n_iter=20_000, batch=100):
    jax = _jax_setup(False)
    import blackjax
    import jax.numpy as jnp

    n = len(X)
    start_setup = time.perf_counter()
    Xa, theta_map, precision = map_and_laplace(X, y)
    # Euler step well inside stability (ε λ_max = 0.1): SGLD's bias grows with ε λ.
    step = 0.1 / float(np.linalg.eigvalsh(precision)[-1])
    data = (jnp.asarray(Xa, jnp.float32), jnp.asarray(2.0 * y - 1.0, jnp.float32))

    def logprior(theta):
        return -0.5 * jnp.sum(theta**2) / PRIOR_SCALE**2

    def loglik(theta, row):
        x, s = row
        return jax.nn.log_sigmoid(s * (x @ theta))

    grad_est = blackjax.sgmcmc.gradients.grad_estimator(logprior, loglik, n)
    cv_grad = blackjax.sgmcmc.gradients.control_variates(
        grad_est, jnp.asarray(theta_map, jnp.float32), data)
    sgld = blackjax.sgld(cv_grad)

    def one_chain(key, theta0):
        def body(theta, key):
            k_batch, k_step = jax.random.split(key)
            # With replacement (randint): choice without replacement permutes all N per step.
            idx = jax.random.randint(k_batch, (batch,), 0, n)
            theta = sgld.step(k_step, theta, (data[0][idx], data[1][idx]), step)
            return theta, theta

        _, path = jax.lax.scan(body, theta0, jax.random.split(key, n_iter))
        return path

    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    theta0 = jnp.tile(jnp.asarray(theta_map, jnp.float32), (4, 1))
    run = jax.jit(jax.vmap(one_chain))
    start = time.perf_counter()
    t_setup = start - start_setup  # MAP, Hessian, data to device: not in `seconds`
    compiled = run.lower(keys, theta0).compile()
    t_compile = time.perf_counter() - start
    paths = compiled(keys, theta0)
    jax.block_until_ready(paths)
    seconds = time.perf_counter() - start
    burn = n_iter // 5  # SGLD starts at the MAP; drop the first fifth as warm-up
    draws = np.asarray(paths, dtype=np.float64)[:, burn:]
    return draws, seconds, 4 * n_iter, {"step_size": step, "batch": batch,
                                        "compile_seconds": t_compile,
                                        "setup_seconds": t_setup}


def log_posterior_rows(Xa, sign, thetas, chunk=256):
    """Exact log-posterior (up to a constant) of every row of ``thetas`` over all data rows.

    Chunks of data rows times all parameter vectors, one BLAS product each; log σ(z) is
    −log1p(exp(−z)), exact in float64 for z > −700, with the stable form as a fallback.
    """
    out = -0.5 * np.sum(thetas**2, axis=1) / PRIOR_SCALE**2
    z = np.empty((chunk, len(thetas)))
    for lo in range(0, len(Xa), chunk):
        rows = -sign[lo:lo + chunk, None] * Xa[lo:lo + chunk]  # rows of −s x, so z holds −s xᵀθ
        zc = z[:len(rows)]
        np.matmul(rows, thetas.T, out=zc)
        if zc.max() < 700.0:
            np.exp(zc, out=zc)
            np.log1p(zc, out=zc)
            out -= zc.sum(axis=0)
        else:
            out -= np.logaddexp(0.0, zc).sum(axis=0)
    return out


def run_is_reference(X, y, seed, *, n_proposals=IS_PROPOSALS, df=IS_DF):
    """Self-normalised importance sampling from a Student-t around the Laplace approximation."""
    start = time.perf_counter()
    Xa, theta_map, precision = map_and_laplace(X, y)
    sign = 2.0 * y - 1.0
    d = len(theta_map)
    chol_cov = np.linalg.cholesky(np.linalg.inv(precision))
    rng = np.random.default_rng(seed + 200)
    z = rng.standard_normal((n_proposals, d))
    u = rng.chisquare(df, n_proposals) / df
    thetas = theta_map + (z @ chol_cov.T) / np.sqrt(u)[:, None]
    # Multivariate t log-density up to a constant: −(ν + d)/2 log(1 + q/ν), q = |z|²/u.
    log_q = -0.5 * (df + d) * np.log1p(np.sum(z**2, axis=1) / u / df)
    log_w = log_posterior_rows(Xa, sign, thetas) - log_q
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    mean = w @ thetas
    centred = thetas - mean
    var = w @ centred**2
    sd = np.sqrt(var)
    # Delta-method standard errors of the self-normalised estimates (Owen 2013, Eq. 9.8).
    se_mean = np.sqrt(w**2 @ centred**2)
    se_sd = np.sqrt(w**2 @ (centred**2 - var) ** 2) / (2.0 * sd)
    seconds = time.perf_counter() - start
    out = RESULTS / f"_draws_is_reference_N{len(X)}.npz"
    np.savez(out, thetas=thetas, log_w=log_w)
    return {"sampler": "is_reference", "n": len(X), "seconds": seconds, "draws_file": str(out),
            "n_proposals": n_proposals, "df": df, "kish_ess": float(1.0 / np.sum(w**2)),
            "max_weight": float(w.max()), "mean": mean.tolist(), "sd": sd.tolist(),
            "se_mean": se_mean.tolist(), "se_sd": se_sd.tolist()}


def run_one(name, n, seed, run, is_proposals=IS_PROPOSALS):
    X, y = make_data(n)
    if name == "is_reference":
        return run_is_reference(X, y, seed, n_proposals=is_proposals)
    if name in OURS:
        draws, seconds, n_iter, extra = run_ours(name, X, y, seed)
    elif name == "nuts_f32":
        draws, seconds, n_iter, extra = run_nuts(X, y, seed, f64=False)
    elif name == "nuts_f64":
        draws, seconds, n_iter, extra = run_nuts(X, y, seed, f64=True)
    elif name == "nuts_reference":
        draws, seconds, n_iter, extra = run_nuts(X, y, seed + 100, f64=True, n_samples=5000,
                                                 n_warmup=1000)
    elif name == "sgld_cv":
        draws, seconds, n_iter, extra = run_sgld_cv(X, y, seed)
    else:
        raise ValueError(f"unknown sampler {name!r}")
    out = RESULTS / f"_draws_{name}_N{n}_run{run}.npy"
    np.save(out, draws)
    return {"sampler": name, "n": n, "seconds": seconds, "n_iter": n_iter,
            "draws_file": str(out), **extra}


# ----------------------------------------------------------------------------- report


def reference_moments(record):
    """Mean, sd and their Monte-Carlo standard errors of a reference record."""
    if record["sampler"] == "is_reference":
        return tuple(np.asarray(record[k]) for k in ("mean", "sd", "se_mean", "se_sd"))
    from sksubsample.diagnostics import effective_sample_size

    draws = np.load(record["draws_file"])
    flat = draws.reshape(-1, draws.shape[2])
    ess = effective_sample_size(draws, method="bulk")
    sd = flat.std(axis=0)
    return flat.mean(axis=0), sd, sd / np.sqrt(ess), sd / np.sqrt(2.0 * ess)


def summarise(record, ref_mean, ref_sd):
    from sksubsample.diagnostics import effective_sample_size, split_rhat

    draws = np.load(record["draws_file"])
    flat = draws.reshape(-1, draws.shape[2])
    ess = effective_sample_size(draws, method="bulk")
    sd_ratio = flat.std(axis=0) / ref_sd
    record.update({
        "min_ess": float(ess.min()),
        "min_ess_per_s": float(ess.min() / record["seconds"]),
        "max_rhat": float(np.max(split_rhat(draws))),
        "worst_mean_error_sd": float(np.max(np.abs(flat.mean(axis=0) - ref_mean) / ref_sd)),
        "sd_ratio_min": float(sd_ratio.min()),
        "sd_ratio_median": float(np.median(sd_ratio)),
        "sd_ratio_max": float(sd_ratio.max()),
        "us_per_iter": 1e6 * record["seconds"] / record["n_iter"],
    })
    if "compile_seconds" in record:
        # JAX compiles once per shape; a long run amortises it, so report both rates, and the
        # rate with the MAP/set-up included, as ours includes it.
        record["min_ess_per_s_excl_compile"] = float(
            ess.min() / (record["seconds"] - record["compile_seconds"]))
        record["min_ess_per_s_incl_setup"] = float(
            ess.min() / (record["seconds"] + record["setup_seconds"]))
    elif "setup_seconds" in record:
        # Ours: `seconds` is the whole fit; without the set-up it compares with SGLD-CV's.
        record["min_ess_per_s_excl_setup"] = float(
            ess.min() / (record["seconds"] - record["setup_seconds"]))
    if "seconds_per_iter" in record:
        # The long-run rate: every iteration (warm-up included) at the per-iteration cost of
        # two fits' difference, set-up excluded, as SGLD-CV's rate without its compilation.
        record["min_ess_per_s_long_run"] = float(
            ess.min() / (record["seconds_per_iter"] * record["n_iter"]))
        record["iter_over_minibatch_loglik"] = (record["seconds_per_iter"]
                                                / record["minibatch_loglik_seconds"])
        record["us_per_iter"] = 1e6 * record["seconds_per_iter"]
    elif "minibatch_loglik_seconds" in record:
        record["iter_over_minibatch_loglik"] = (record["seconds"] / record["n_iter"]
                                                / record["minibatch_loglik_seconds"])
    return record


def _run_files(name, n):
    runs = []
    for f in RESULTS.glob(f"_record_{name}_N{n}_run*.json"):
        match = re.fullmatch(rf"_record_{name}_N{n}_run(\d+)\.json", f.name)
        if match:
            runs.append((int(match.group(1)), f))
    return [f for _, f in sorted(runs)]


def _collect(name, n, seed, *, rerun, is_proposals=IS_PROPOSALS):
    """All cached runs of one sampler, after running it once more if asked (or if none)."""
    files = _run_files(name, n)
    if files and not rerun:
        return [json.loads(f.read_text()) for f in files]
    run = len(files) + 1
    env = {**os.environ, "OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--sampler", name, "--n", str(n),
                           "--seed", str(seed), "--run", str(run),
                           "--is-proposals", str(is_proposals)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode != 0:
        print(f"{name} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return [json.loads(f.read_text()) for f in files]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    # The machine is shared: keep its 1-minute load average around every run.
    record.update({"run": run, "load_before": list(load_before),
                   "load_after": list(os.getloadavg())})
    (RESULTS / f"_record_{name}_N{n}_run{run}.json").write_text(json.dumps(record))
    print(f"{name} run {run}: done in {time.perf_counter() - t0:.0f} s (load "
          f"{load_before[0]:.2f} -> {record['load_after'][0]:.2f})", flush=True)
    return [json.loads(f.read_text()) for f in files] + [record]


def check_reference(n, seed):
    """Compare the importance-sampling reference with the NUTS one at the same N."""
    nuts = _collect("nuts_reference", n, seed, rerun=False)[0]
    imp = _collect("is_reference", n, seed, rerun=False)[0]
    m_n, s_n, se_m_n, se_s_n = reference_moments(nuts)
    m_i, s_i, se_m_i, se_s_i = reference_moments(imp)
    z_mean = np.abs(m_i - m_n) / np.hypot(se_m_i, se_m_n)
    z_sd = np.abs(s_i - s_n) / np.hypot(se_s_i, se_s_n)
    check = {"n": n, "kish_ess": imp["kish_ess"], "is_seconds": imp["seconds"],
             "nuts_seconds": nuts["seconds"],
             "worst_abs_mean_diff_sd": float(np.max(np.abs(m_i - m_n) / s_n)),
             "worst_mean_diff_z": float(z_mean.max()),
             "median_mean_diff_z": float(np.median(z_mean)),
             "typical_mean_se_sd": float(np.median(np.hypot(se_m_i, se_m_n) / s_n)),
             "sd_ratio_min": float(np.min(s_i / s_n)), "sd_ratio_max": float(np.max(s_i / s_n)),
             "worst_sd_diff_z": float(z_sd.max())}
    (RESULTS / f"_record_reference_check_N{n}.json").write_text(json.dumps(check, indent=2))
    print(json.dumps(check, indent=2))
    return check


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampler", help="run one sampler in this process (internal)")
    parser.add_argument("--run", type=int, default=1, help="run number (internal)")
    parser.add_argument("--only", nargs="*", help="subset of samplers to run")
    parser.add_argument("--rerun", action="store_true",
                        help="run the selected samplers once more (not the reference)")
    parser.add_argument("--reference", choices=sorted(REFERENCES), default="nuts")
    parser.add_argument("--check-reference", action="store_true",
                        help="compare the importance-sampling and NUTS references at this N")
    parser.add_argument("--is-proposals", type=int, default=IS_PROPOSALS,
                        help="proposals of the importance-sampling reference")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.sampler:
        record = run_one(args.sampler, args.n, args.seed, args.run, args.is_proposals)
        print(json.dumps(record))
        return None
    if args.check_reference:
        return check_reference(args.n, args.seed)
    ref_record = _collect(REFERENCES[args.reference], args.n, args.seed, rerun=False,
                          is_proposals=args.is_proposals)[0]
    ref_mean, ref_sd, ref_se_mean, _ = reference_moments(ref_record)
    names = args.only or [*OURS, *PEERS]
    rows = []
    for name in names:
        runs = _collect(name, args.n, args.seed, rerun=args.rerun)
        if not runs:
            continue
        for r in runs:
            summarise(r, ref_mean, ref_sd)
        row = dict(runs[-1])
        row["runs"] = [{k: r[k] for k in (
            "run", "seconds", "setup_seconds", "compile_seconds", "min_ess_per_s",
            "min_ess_per_s_excl_compile", "min_ess_per_s_incl_setup",
            "min_ess_per_s_excl_setup", "min_ess_per_s_long_run", "seconds_per_iter",
            "load_before", "load_after") if k in r} for r in runs]
        rows.append(row)
    if args.reference == "importance":
        reference = (f"self-normalised importance sampling, multivariate t (df {ref_record['df']})"
                     f" at the MAP with the Laplace covariance, {ref_record['n_proposals']} "
                     f"proposals, Kish ESS {ref_record['kish_ess']:.0f}")
    else:
        reference = "NumPyro NUTS float64, 4 x 5000 draws"
    out = RESULTS / f"logistic_peers_N{args.n}.json"
    ratios = ratios_to_sgld_cv(rows)
    out.write_text(json.dumps({
        "n": args.n, "d": D, "prior_scale": PRIOR_SCALE, "reference": reference,
        "reference_seconds": ref_record["seconds"],
        "reference_mean_se_in_sd": {"median": float(np.median(ref_se_mean / ref_sd)),
                                    "max": float(np.max(ref_se_mean / ref_sd))},
        "ratios_to_sgld_cv": ratios, "results": rows}, indent=2))
    for key, value in ratios.items():
        print(f"{key}: {value:.2f}")
    print(f"reference: {reference}; MC s.e. of its means in sds: median "
          f"{np.median(ref_se_mean / ref_sd):.4f}, max {np.max(ref_se_mean / ref_sd):.4f}")
    print(format_table(rows))
    _plot(rows, args.n)
    print(f"wrote {out}")
    return rows


def ratios_to_sgld_cv(rows):
    """The default's min-ESS/s over SGLD-CV's, as each accounts its time: long run (ours: the
    per-iteration cost of two fits' difference; SGLD-CV: without its compilation), whole fit
    against sampling with compilation, and everything included (ours: the fit; SGLD-CV: its
    MAP, set-up and compilation too); and the default's iteration over one minibatch
    log-likelihood of its mean decision batch."""
    by_name = {r["sampler"]: r for r in rows}
    ours, sgld = by_name.get("ours_default"), by_name.get("sgld_cv")
    out = {}
    if ours and sgld:
        out["long_run"] = ours["min_ess_per_s_long_run"] / sgld["min_ess_per_s_excl_compile"]
        out["fit_vs_sampling_with_compilation"] = ours["min_ess_per_s"] / sgld["min_ess_per_s"]
        out["everything_included"] = ours["min_ess_per_s"] / sgld["min_ess_per_s_incl_setup"]
    if ours:
        out["iteration_over_minibatch_loglik"] = ours["iter_over_minibatch_loglik"]
    return out


def format_table(rows):
    """Markdown table of the rows (last run of each sampler; earlier runs' min-ESS/s after)."""
    lines = ["| sampler | iterations | min-ESS/s (all runs) | worst \\|mean err\\| / sd | "
             "sd ratio min / median / max | µs / iter | iter / mb-loglik | mean batch | "
             "data / step |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rates = ", ".join(f"{x['min_ess_per_s']:.1f}" for x in r["runs"])
        for key, label in (("min_ess_per_s_excl_setup", "excl. MAP/set-up"),
                           ("min_ess_per_s_long_run", "long run"),
                           ("min_ess_per_s_excl_compile", "excl. JIT"),
                           ("min_ess_per_s_incl_setup", "incl. MAP/set-up")):
            values = [f"{x[key]:.1f}" for x in r["runs"] if key in x]
            if values:
                rates += f"; {label}: " + ", ".join(values)
        ratio = r.get("iter_over_minibatch_loglik")
        batch = r.get("mean_batch", r.get("batch"))
        frac = r.get("fraction_of_data")
        lines.append(
            f"| {r['sampler']} | {r['n_iter']} | {rates} | {r['worst_mean_error_sd']:.3f} | "
            f"{r['sd_ratio_min']:.3f} / {r['sd_ratio_median']:.3f} / {r['sd_ratio_max']:.3f} | "
            f"{r['us_per_iter']:.0f} | {'–' if ratio is None else f'{ratio:.1f}'} | "
            f"{'–' if batch is None else f'{batch:.1f}'} | "
            f"{'–' if frac is None else f'{100 * frac:.3f} %'} |")
    return "\n".join(lines)


def _plot(rows, n):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    names = [r["sampler"] for r in rows]
    ax1.barh(names, [r["min_ess_per_s"] for r in rows], color="tab:blue")
    ax1.set_xscale("log")
    ax1.set_xlabel("min-ESS / s (log scale)")
    for i, r in enumerate(rows):
        ax2.plot([r["sd_ratio_min"], r["sd_ratio_max"]], [i, i], color="tab:gray")
        ax2.plot(r["sd_ratio_median"], i, "o", color="tab:red")
    ax2.axvspan(0.95, 1.05, color="tab:green", alpha=0.15, label="target [0.95, 1.05]")
    ax2.set_yticks(range(len(rows)), names)
    ax2.set_xlabel("posterior sd / reference sd (min, median, max)")
    ax2.legend(fontsize=8)
    fig.suptitle(f"Bayesian logistic regression, N = {n:,}, d = {D} + intercept")
    fig.tight_layout()
    fig.savefig(RESULTS / f"logistic_peers_N{n}.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
