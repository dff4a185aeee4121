"""Bayesian logistic regression: our MH samplers against NumPyro NUTS and BlackJAX SGLD-CV.

Synthetic problem: d = 20 standard-normal features + intercept, N rows, prior N(0, 10²) on every
coefficient, labels from a logistic model with N(0, 1) weights. Every sampler runs in its own
process (``--sampler NAME``) so imports, JIT caches and BLAS threads do not interfere; the parent
collects one JSON line per sampler and compares the draws with a long NUTS float64 reference:

* min-ESS/s: smallest bulk ESS over the 21 parameters (rank-normalised split chains, Vehtari et
  al. 2021; :func:`sksubsample._base.effective_sample_size`) divided by the wall time of the
  whole run (warm-up and JIT compilation included);
* worst |mean error| in reference sds, and min/median/max of sd / reference sd;
* time per iteration, and for ours its ratio to one minibatch log-likelihood evaluation
  (gather the rows of a random minibatch of the mean decision size, matrix-vector product,
  log-sigmoid), the cost floor of any subsampled step.

Usage (CPU only; ``pip install -e ".[bench]"``)::

    OMP_NUM_THREADS=1 python benchmarks/logistic_peers.py --n 100000
    OMP_NUM_THREADS=1 python benchmarks/logistic_peers.py --n 1000000

Results: ``benchmarks/results/logistic_peers_N{n}.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

D = 20
PRIOR_SCALE = 10.0
RESULTS = Path(__file__).resolve().parent / "results"
OURS = {
    # name: (test, proposal, control_variates, n_samples per chain, n_warmup)
    "ours_mb_barker_langevin": ("minibatch_barker", "langevin", True, 5000, 1000),
    "ours_mb_barker_rw": ("minibatch_barker", "random-walk", True, 5000, 1000),
    "ours_exact_mh_langevin": ("metropolis", "langevin", False, 400, 200),
}
PEERS = ["nuts_f32", "nuts_f64", "sgld_cv"]


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    w = rng.standard_normal(D)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w + 0.5)))).astype(np.int64)
    return X, y


# ----------------------------------------------------------------------------- samplers


def run_ours(name, X, y, seed):
    from sksubsample import BayesianLogisticRegressionMH

    test, proposal, cv, n_samples, n_warmup = OURS[name]
    clf = BayesianLogisticRegressionMH(prior_scale=PRIOR_SCALE, test=test, proposal=proposal,
                                       control_variates=cv, n_draws=n_samples,
                                       n_warmup=n_warmup, n_chains=4, n_jobs=1,
                                       random_state=seed)
    start = time.perf_counter()
    clf.fit(X, y)
    seconds = time.perf_counter() - start
    draws = np.concatenate([clf.coef_samples_, clf.intercept_samples_[:, :, None]], axis=2)
    n_iter = 4 * (n_samples + n_warmup)
    # Cost floor of a subsampled step: one minibatch log-likelihood of the mean decision size.
    rng = np.random.default_rng(seed)
    b = max(1, round(clf.mean_batch_size_))
    Xa = np.column_stack([X, np.ones(len(X))])
    sign = 2.0 * y - 1.0
    theta = np.concatenate([clf.coef_[0], clf.intercept_])
    reps = 2000
    idxs = [rng.choice(len(X), size=b, replace=False) for _ in range(reps)]
    t0 = time.perf_counter()
    for idx in idxs:
        z = sign[idx] * (Xa[idx] @ theta)
        np.minimum(z, 0.0) - np.log1p(np.exp(-np.abs(z)))
    t_minibatch = (time.perf_counter() - t0) / reps
    return draws, seconds, n_iter, {
        "mean_batch": clf.mean_batch_size_, "fraction_of_data": clf.fraction_data_touched_,
        "acceptance": clf.acceptance_rate_, "minibatch_loglik_seconds": t_minibatch,
    }


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
    from sklearn.linear_model import LogisticRegression

    n = len(X)
    Xa = np.column_stack([X, np.ones(n)])
    lr = LogisticRegression(C=PRIOR_SCALE**2, fit_intercept=False, solver="newton-cholesky",
                            tol=1e-10).fit(Xa, y)
    theta_map = lr.coef_.ravel()
    p = 1.0 / (1.0 + np.exp(-Xa @ theta_map))
    precision = (Xa.T * (p * (1 - p))) @ Xa + np.eye(D + 1) / PRIOR_SCALE**2
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
    compiled = run.lower(keys, theta0).compile()
    t_compile = time.perf_counter() - start
    paths = compiled(keys, theta0)
    jax.block_until_ready(paths)
    seconds = time.perf_counter() - start
    burn = n_iter // 5  # SGLD starts at the MAP; drop the first fifth as warm-up
    draws = np.asarray(paths, dtype=np.float64)[:, burn:]
    return draws, seconds, 4 * n_iter, {"step_size": step, "batch": batch,
                                        "compile_seconds": t_compile}


def run_one(name, n, seed):
    X, y = make_data(n)
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
    out = RESULTS / f"_draws_{name}_N{n}.npy"
    np.save(out, draws)
    return {"sampler": name, "n": n, "seconds": seconds, "n_iter": n_iter,
            "draws_file": str(out), **extra}


# ----------------------------------------------------------------------------- report


def summarise(record, reference):
    from sksubsample.diagnostics import effective_sample_size, split_rhat

    draws = np.load(record["draws_file"])
    ref_mean = reference.reshape(-1, reference.shape[2]).mean(axis=0)
    ref_sd = reference.reshape(-1, reference.shape[2]).std(axis=0)
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
        # JAX compiles once per shape; a long run amortises it, so report both rates.
        record["min_ess_per_s_excl_compile"] = float(
            ess.min() / (record["seconds"] - record["compile_seconds"]))
    if "minibatch_loglik_seconds" in record:
        record["iter_over_minibatch_loglik"] = (record["seconds"] / record["n_iter"]
                                                / record["minibatch_loglik_seconds"])
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampler", help="run one sampler in this process (internal)")
    parser.add_argument("--only", nargs="*", help="subset of samplers to run")
    parser.add_argument("--rerun", action="store_true", help="ignore cached sampler results")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.sampler:
        record = run_one(args.sampler, args.n, args.seed)
        (RESULTS / f"_record_{args.sampler}_N{args.n}.json").write_text(json.dumps(record))
        print(json.dumps(record))
        return None
    names = ["nuts_reference", *(args.only or [*OURS, *PEERS])]
    records = {}
    for name in names:
        # Finished samplers are cached (record + draws), so an interrupted run resumes.
        record_file = RESULTS / f"_record_{name}_N{args.n}.json"
        if record_file.exists() and not args.rerun:
            records[name] = json.loads(record_file.read_text())
            continue
        env = {**os.environ, "OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
               "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--sampler", name, "--n", str(args.n),
                               "--seed", str(args.seed)], capture_output=True, text=True,
                              env=env, check=False)
        if proc.returncode != 0:
            print(f"{name} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        records[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        record_file.write_text(json.dumps(records[name]))
        print(f"{name}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    reference = np.load(records["nuts_reference"]["draws_file"])
    rows = [summarise(records[k], reference) for k in names if k != "nuts_reference"
            and k in records]
    out = RESULTS / f"logistic_peers_N{args.n}.json"
    out.write_text(json.dumps({"n": args.n, "d": D, "prior_scale": PRIOR_SCALE,
                               "reference": "NumPyro NUTS float64, 4 x 5000 draws",
                               "results": rows}, indent=2))
    header = (f"{'sampler':<26}{'min-ESS/s':>10}{'worst |err|/sd':>15}{'sd ratio min/med/max':>22}"
              f"{'us/iter':>9}{'iter/mb-loglik':>15}")
    print(header)
    for r in rows:
        ratio = r.get("iter_over_minibatch_loglik")
        print(f"{r['sampler']:<26}{r['min_ess_per_s']:>10.1f}{r['worst_mean_error_sd']:>15.3f}"
              f"{r['sd_ratio_min']:>9.3f}/{r['sd_ratio_median']:.3f}/{r['sd_ratio_max']:.3f}"
              f"{r['us_per_iter']:>9.0f}{'' if ratio is None else f'{ratio:>15.1f}'}")
    _plot(rows, args.n)
    print(f"wrote {out}")
    return rows


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
    ax2.set_xlabel("posterior sd / NUTS reference sd (min, median, max)")
    ax2.legend(fontsize=8)
    fig.suptitle(f"Bayesian logistic regression, N = {n:,}, d = {D} + intercept")
    fig.tight_layout()
    fig.savefig(RESULTS / f"logistic_peers_N{n}.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
