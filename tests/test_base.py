"""Tests of the shared estimator machinery: diagnostics, warnings, chains, seeding, ArviZ."""

import inspect
import os
import pickle
import sys
import types
import warnings

import numpy as np
import pytest
from joblib import Parallel, delayed, parallel_config
from sklearn.exceptions import NotFittedError

from sksubsample._arviz import arviz_from_dict
from sksubsample._base import ChainResult, MCMCEstimator, run_chains
from sksubsample._progress import ChainProgress, ProgressCounts
from sksubsample.diagnostics import (
    ConvergenceWarning,
    check_convergence,
    effective_sample_size,
    split_rhat,
)


def _ar1(rng, phi, n_chains, n_draws, offsets=None):
    """Stationary Gaussian AR(1) chains with unit marginal variance."""
    x = np.empty((n_chains, n_draws))
    x[:, 0] = rng.standard_normal(n_chains)
    innov = rng.standard_normal((n_chains, n_draws)) * np.sqrt(1 - phi**2)
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + innov[:, t]
    if offsets is not None:
        x += np.asarray(offsets)[:, None]
    return x


# ----------------------------------------------------------------------------- diagnostics


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_ess_matches_ar1_theory(phi):
    # ESS of the mean of an AR(1) chain is S (1 - φ) / (1 + φ); the estimator's relative
    # error is O(sqrt(τ / S)) — with S = 40 000 and τ <= 19 a 15 % band is > 5 standard errors.
    rng = np.random.default_rng(12)
    x = _ar1(rng, phi, 4, 10_000)
    expected = x.size * (1 - phi) / (1 + phi)
    for method in ("mean", "bulk"):
        ess = effective_sample_size(x, method=method)
        assert abs(ess / expected - 1) < 0.15, (method, ess, expected)


def test_rhat_detects_separated_chains():
    rng = np.random.default_rng(3)
    good = _ar1(rng, 0.3, 4, 2000)
    bad = _ar1(rng, 0.3, 4, 2000, offsets=[0.0, 0.0, 0.0, 1.0])
    assert split_rhat(good) < 1.01
    assert split_rhat(good, method="split") < 1.01
    assert split_rhat(bad) > 1.1
    # Split R-hat also catches a single chain whose halves differ (a trend).
    trend = rng.standard_normal((1, 2000)) + np.linspace(0, 2, 2000)
    assert split_rhat(trend) > 1.1


def test_diagnostics_vectorise_over_parameter_shape():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 500, 2, 4))
    assert split_rhat(x).shape == (2, 4)
    assert effective_sample_size(x, method="tail").shape == (2, 4)
    const = np.ones((2, 100))
    assert effective_sample_size(const) == 200.0


def test_diagnostics_reject_bad_input():
    with pytest.raises(ValueError, match="draws"):
        split_rhat(np.ones(10))
    with pytest.raises(ValueError, match="at least 4"):
        effective_sample_size(np.ones((2, 3)))
    with pytest.raises(ValueError, match="method"):
        effective_sample_size(np.ones((2, 10)), method="median")
    with pytest.raises(ValueError, match="method"):
        split_rhat(np.ones((2, 10)), method="folded")


def test_diagnostics_agree_with_arviz():
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(7)
    x = _ar1(rng, 0.7, 4, 501, offsets=[0.0, 0.1, -0.1, 0.05])  # odd length: split drops one
    np.testing.assert_allclose(split_rhat(x), float(az.rhat(x)), rtol=1e-10)
    np.testing.assert_allclose(split_rhat(x, method="split"),
                               float(az.rhat(x, method="split")), rtol=1e-10)
    for method in ("bulk", "mean", "tail"):
        np.testing.assert_allclose(effective_sample_size(x, method=method),
                                   float(az.ess(x, method=method)), rtol=1e-8)


# ----------------------------------------------------------------------------- chains


def _noisy_chain(scale, rng):
    return scale * rng.standard_normal(5)


def test_run_chains_is_identical_across_n_jobs_and_backends():
    ref = run_chains(_noisy_chain, (2.0,), n_chains=4, random_state=11)
    assert len(ref) == 4 and not np.array_equal(ref[0], ref[1])
    for n_jobs in (1, 2):
        out = run_chains(_noisy_chain, (2.0,), n_chains=4, random_state=11, n_jobs=n_jobs)
        np.testing.assert_array_equal(np.stack(out), np.stack(ref))
    with parallel_config(backend="threading", n_jobs=2):
        out = run_chains(_noisy_chain, (2.0,), n_chains=4, random_state=11)
    np.testing.assert_array_equal(np.stack(out), np.stack(ref))
    other = run_chains(_noisy_chain, (2.0,), n_chains=4, random_state=12)
    assert not np.array_equal(np.stack(other), np.stack(ref))


class _LoggedStart:
    def __init__(self, log):
        self.log = log

    def launch(self):
        self.log.append("launched")

    def close(self):
        self.log.append("closed")


def _chain_failing_second(log, fault, rng):
    log.append("ran")
    if log.count("ran") == 2:
        raise fault
    return rng.standard_normal(2)


def _start_logged(log, fault, rng):
    log.append("started")
    return _LoggedStart(log)


_chain_failing_second.start_ahead = _start_logged


@pytest.mark.parametrize("fault", [ValueError("a chain failed"), KeyboardInterrupt()])
def test_what_chains_start_ahead_is_closed_however_they_end(fault):
    # Chains run one after the other have what they gather started and launched before the
    # first runs (the first chain's at once, the others' once all are started), and it is
    # closed however the run ends; chains run at once start nothing ahead.
    log = []
    with pytest.raises(type(fault)):
        run_chains(_chain_failing_second, (log, fault), n_chains=3, random_state=0)
    assert log == ["started", "launched"] + ["started"] * 2 + ["launched"] * 2 + ["ran"] * 2 \
        + ["closed"] * 3
    log = []
    run_chains(_chain_failing_second, (log, None), n_chains=1, random_state=0)
    assert log == ["started", "launched", "ran", "closed"]
    log = []
    with parallel_config(backend="threading"):
        run_chains(_chain_failing_second, (log, None), n_chains=1, random_state=0, n_jobs=2)
    assert log == ["ran"]


def test_run_chains_progress_bar(capsys):
    out = run_chains(_noisy_chain, (1.0,), n_chains=3, random_state=0, progress=True,
                     desc="unit")
    err = capsys.readouterr().err
    assert "unit" in err and "3/3" in err
    quiet = run_chains(_noisy_chain, (1.0,), n_chains=3, random_state=0, progress=False)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(np.stack(out), np.stack(quiet))


def test_run_chains_validates_n_chains():
    with pytest.raises(ValueError, match="n_chains"):
        run_chains(_noisy_chain, (1.0,), n_chains=0, random_state=0)
    with pytest.raises(TypeError, match="random_state"):
        run_chains(_noisy_chain, (1.0,), n_chains=2, random_state="seed")


# ----------------------------------------------------------------------------- mixin


def _toy_chain(offset_scale, n_draws, n_warmup, rng):
    """Independent normal draws of 4 parameters; each chain shifted by offset_scale * N(0, 1)."""
    draws = rng.standard_normal((n_draws, 4)) + offset_scale * rng.standard_normal()
    stats = {"acceptance_rate": np.ones(n_draws)}
    return ChainResult(draws, stats, n_evaluations=10 * (n_draws + n_warmup), step_size=1.0)


class _Toy(MCMCEstimator):
    """A minimal estimator on the shared base: a vector 'w' (3,) and a scalar 'b'."""

    def __init__(self, *, offset_scale=0.0, n_draws=50, n_warmup=0, n_chains=2, n_jobs=None,
                 random_state=0, progress=False):
        self.offset_scale = offset_scale
        self.n_draws = n_draws
        self.n_warmup = n_warmup
        self.n_chains = n_chains
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    def fit(self, X=None, y=None):
        draws = self._sample(_toy_chain, (self.offset_scale,), names=["f0", "f1", "f2", "b"],
                             n_data=10)
        self.w_, self.b_ = draws[:, :, :3], draws[:, :, 3]
        return self

    def _posterior_variables(self):
        return {"w": self.w_, "b": self.b_}

    def _posterior_dims(self):
        return {"w": ["feature"]}, {"feature": ["f0", "f1", "f2"]}


def _fitted_toy(**params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 50 draws are few on purpose
        return _Toy(**params).fit()


def test_base_stores_counts_and_diagnostics():
    toy = _fitted_toy(n_warmup=5)
    assert toy.n_evaluations_ == 2 * 10 * 55
    assert toy.fraction_data_touched_ == pytest.approx(1.0)
    assert toy.rhat_.shape == (4,) and toy.ess_.shape == (4,)
    assert list(toy.posterior_names_) == ["f0", "f1", "f2", "b"]
    # parameters are validated once, by scikit-learn's constraints
    with pytest.raises(ValueError, match="n_draws"):
        _Toy(n_draws=0)._validate_params()


def test_fit_warns_when_chains_have_not_converged():
    # Chains shifted by N(0, 3²) offsets cannot mix: R-hat is far above 1.01.
    with pytest.warns(ConvergenceWarning, match=r"R-hat above 1.01.*worst: "):
        _Toy(offset_scale=3.0, n_draws=500, n_chains=4).fit()
    # Too short to reach 100 bulk ESS per chain: warned, naming parameters.
    with pytest.warns(ConvergenceWarning, match=r"bulk ESS below 400"):
        _Toy(n_draws=60, n_chains=4).fit()
    with pytest.warns(ConvergenceWarning, match="too few to check"):
        _Toy(n_draws=3).fit()
    # Negative control: independent draws that mix raise no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        _Toy(n_draws=2000, n_chains=4).fit()


def test_check_convergence_names_the_worst_parameters():
    rng = np.random.default_rng(1)
    draws = rng.standard_normal((4, 1000, 3))
    draws[3, :, 2] += 2.0  # only the third parameter's last chain is off
    with pytest.warns(ConvergenceWarning) as record:
        rhat, _ = check_convergence(draws, ["a", "b", "c"])
    message = str(record[0].message)
    assert "c (" in message and "a (" not in message
    assert rhat[2] > 1.1 and rhat[0] < 1.01


def test_sample_posterior_shapes_and_pooling():
    toy = _fitted_toy()
    all_draws = toy.sample_posterior()
    assert all_draws.shape == (100, 4)
    np.testing.assert_array_equal(all_draws[:50, :3], toy.w_[0])
    np.testing.assert_array_equal(all_draws[50:, 3], toy.b_[1])
    few = toy.sample_posterior(30, random_state=1)
    assert few.shape == (30, 4)
    # Without replacement when possible: 30 distinct rows of the pool.
    assert len({tuple(r) for r in few}) == 30
    np.testing.assert_array_equal(few, toy.sample_posterior(30, random_state=1))
    many = toy.sample_posterior(500, random_state=1)
    assert many.shape == (500, 4)
    with pytest.raises(ValueError, match="n_samples"):
        toy.sample_posterior(0)
    with pytest.raises(NotFittedError):
        _Toy().sample_posterior()


def test_to_inference_data_with_arviz():
    pytest.importorskip("arviz")
    toy = _fitted_toy()
    idata = toy.to_inference_data()
    post = idata.posterior
    assert post["w"].shape == (2, 50, 3) and post["b"].shape == (2, 50)
    assert list(post["w"].coords["feature"].values) == ["f0", "f1", "f2"]
    np.testing.assert_array_equal(post["w"].values, toy.w_)
    assert idata.sample_stats["acceptance_rate"].shape == (2, 50)


def test_to_inference_data_without_arviz_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # makes `import arviz` fail
    with pytest.raises(ImportError, match=r"sksubsample\[arviz\]"):
        _fitted_toy().to_inference_data()


def test_arviz_1x_calling_convention():
    # ArviZ 1.x (Python >= 3.12) takes one dict of groups; 0.x takes the groups as keywords.
    calls = {}

    def from_dict_1x(data, *, name=None, sample_dims=None, coords=None, dims=None):
        calls["1x"] = (data, coords, dims)
        return "tree"

    def from_dict_0x(posterior=None, *, sample_stats=None, coords=None, dims=None):
        calls["0x"] = (posterior, sample_stats, coords, dims)
        return "idata"

    groups = {"posterior": {"a": np.zeros((1, 4))}, "sample_stats": {}}
    assert arviz_from_dict(types.SimpleNamespace(from_dict=from_dict_1x), groups,
                            {"c": [0]}, {"a": []}) == "tree"
    assert set(calls["1x"][0]) == {"posterior"}  # empty groups are dropped
    assert arviz_from_dict(types.SimpleNamespace(from_dict=from_dict_0x), groups,
                            {"c": [0]}, {"a": []}) == "idata"
    assert calls["0x"][1] is None and calls["0x"][2] == {"c": [0]}


def test_random_state_instance_is_accepted_and_reproducible():
    """A legacy RandomState, as scikit-learn accepts it: same state, same draws."""
    from sksubsample import BayesianLogisticRegressionMH

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
    kw = {"n_draws": 20, "n_warmup": 10, "n_chains": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = BayesianLogisticRegressionMH(random_state=np.random.RandomState(3), **kw).fit(X, y)
        b = BayesianLogisticRegressionMH(random_state=np.random.RandomState(3), **kw).fit(X, y)
        c = BayesianLogisticRegressionMH(random_state=np.random.RandomState(4), **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_samples_, b.coef_samples_)
    assert not np.array_equal(a.coef_samples_, c.coef_samples_)


# ----------------------------------------------------------------------------- continuation


def _ar_steps(x, n, rng, progress):
    """n steps of x_t = 0.5 x_{t-1} + N(0, I), reporting each to ``progress``."""
    out = np.empty((n, x.size))
    for t in range(n):
        x = 0.5 * x + rng.standard_normal(x.size)
        out[t] = x
        if progress is not None:
            progress(1)
    return out


def _ar_chain(dim, n_draws, n_warmup, rng, progress=None):
    draws = _ar_steps(np.zeros(dim), n_warmup + n_draws, rng, progress)[n_warmup:]
    stats = {"accepted": np.ones(n_draws, dtype=bool)}
    return ChainResult(draws, stats, 3 * (n_warmup + n_draws), 1.0, (draws[-1], rng))


def _ar_continue(dim, n_draws, state, progress=None):
    draws = _ar_steps(state[0], n_draws, state[1], progress)
    return ChainResult(draws, {"accepted": np.ones(n_draws, dtype=bool)}, 3 * n_draws, 1.0,
                       (draws[-1], state[1]))


class _ContinuingToy(_Toy):
    """Chains that can continue (AR(1) steps of 4 parameters)."""

    def fit(self, X=None, y=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            draws = self._sample(_ar_chain, (4,), names=["f0", "f1", "f2", "b"], n_data=3,
                                 continue_fn=_ar_continue)
        self.w_, self.b_ = draws[:, :, :3], draws[:, :, 3]
        return self

    def _after_sampling(self):
        self.mean_ = self._draws.mean(axis=(0, 1))


def test_sample_more_appends_the_draws_of_one_longer_run():
    kw = {"n_warmup": 7, "n_chains": 3, "random_state": 5}
    long = _ContinuingToy(n_draws=500, **kw).fit()
    for n_jobs in (1, 2):
        toy = _ContinuingToy(n_draws=200, n_jobs=n_jobs, **kw).fit()
        # The diagnostics are run again on the longer chains and warn from this line.
        with pytest.warns(ConvergenceWarning) as record:
            toy.sample_more(100)
        assert record[0].filename == __file__
        toy.sample_more(200)
        np.testing.assert_array_equal(toy._draws, long._draws)
        np.testing.assert_array_equal(toy.mean_, long.mean_)  # the estimator's hook ran
        assert toy.n_evaluations_ == long.n_evaluations_ == 3 * 3 * 507
        assert toy.fraction_data_touched_ == pytest.approx(1.0)
        np.testing.assert_array_equal(toy.ess_, long.ess_)
        assert toy._stats["accepted"].shape == (3, 500) and toy.acceptance_rate_ == 1.0
    # Chains without a final state cannot continue; an unpickled estimator has no sampler.
    with pytest.raises(NotImplementedError, match="cannot continue"):
        _fitted_toy().sample_more(5)
    with pytest.raises(RuntimeError, match="not pickled"):
        pickle.loads(pickle.dumps(long)).sample_more(5)


def test_run_chains_progress_over_steps_does_not_change_the_draws(capsys):
    ref = run_chains(_ar_chain, (2, 40, 10), n_chains=3, random_state=1)
    for n_jobs in (1, 2):
        out = run_chains(_ar_chain, (2, 40, 10), n_chains=3, random_state=1, n_jobs=n_jobs,
                         progress=True, desc="unit", steps_per_chain=50)
        err = capsys.readouterr().err
        assert "unit" in err and "150/150" in err and "draw" in err, err
        for a, b in zip(out, ref, strict=True):
            np.testing.assert_array_equal(a.draws, b.draws)


def _report_from_worker(reporter, n):
    reporter(n)
    return os.getpid()


def test_progress_counts_reach_the_parent_from_worker_processes():
    """Chains in loky worker processes report into the parent's counts as they run."""
    counts = ProgressCounts(2)
    try:
        pids = Parallel(n_jobs=2, backend="loky")(
            delayed(_report_from_worker)(ChainProgress(counts, c), n)
            for c, n in ((0, 7), (1, 5), (0, 3)))
        assert os.getpid() not in pids
        np.testing.assert_array_equal(counts.counts(), [10, 5])
    finally:
        counts.close()
    assert not os.path.exists(counts.path)


def test_notebook_progress_without_ipywidgets_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # makes `import ipywidgets` fail
    calls = []

    def chain(rng):
        calls.append(1)

    with pytest.raises(ImportError, match=r"sksubsample\[notebook\]"):
        run_chains(chain, (), n_chains=2, random_state=0, progress="notebook")
    assert not calls  # told before any work


def test_notebook_progress_in_a_fresh_kernel(tmp_path):
    """progress="notebook" draws its widget in a Jupyter kernel (the notebook extra)."""
    pytest.importorskip("ipywidgets")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "import warnings, numpy as np\n"
        "from sksubsample import BayesianLogisticRegressionMH\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)\n"
        "warnings.simplefilter('ignore')\n"
        "clf = BayesianLogisticRegressionMH(n_draws=30, n_warmup=20, n_chains=2,\n"
        "                                   progress='notebook', random_state=0).fit(X, y)\n"
        "clf.sample_more(10).coef_samples_.shape"))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"], outputs
    kinds = [key for o in outputs for key in o.get("data", {})]
    assert "application/vnd.jupyter.widget-view+json" in kinds, outputs
    assert any("(2, 40, 2)" in o.get("data", {}).get("text/plain", "") for o in outputs)


# ----------------------------------------------------------------------------- ArviZ export


def test_to_inference_data_names_what_an_estimator_cannot_provide():
    pytest.importorskip("arviz")
    toy = _fitted_toy()
    idata = toy.to_inference_data()  # the posterior and the statistics, nothing else
    assert set(idata.groups()) == {"posterior", "sample_stats"}
    for request in ({"log_likelihood": True}, {"posterior_predictive": 5}, {"lp": True}):
        name = next(iter(request))
        with pytest.raises(NotImplementedError, match=f"_Toy does not provide {name}"):
            toy.to_inference_data(**request)


def _arviz_1x_stand_in():
    """``arviz.from_dict`` as ArviZ 1.x (arviz-base) defines it: one dict of groups, an
    ``xarray.DataTree`` back, groups named ``*data*`` without the sample dimensions."""
    xr = pytest.importorskip("xarray")
    if not hasattr(xr, "DataTree"):
        pytest.skip("xarray without DataTree")

    def from_dict(data, *, name=None, sample_dims=None, coords=None, dims=None, **kwargs):
        datasets = {}
        for group, variables in data.items():
            leading = [] if "data" in group else ["chain", "draw"]
            arrays = {}
            for var, values in variables.items():
                values = np.asarray(values)
                own = list((dims or {}).get(var, []))
                extra = [f"{var}_dim_{k}" for k in range(values.ndim - len(leading) - len(own))]
                names = leading + own + extra
                arrays[var] = xr.DataArray(values, dims=names, coords={
                    d: coords[d] for d in names if coords and d in coords})
            datasets[group] = xr.Dataset(arrays)
        return xr.DataTree.from_dict(datasets, name=name)

    return types.SimpleNamespace(from_dict=from_dict)


def test_to_inference_data_through_arviz_1x(monkeypatch):
    """The groups reach an ArviZ 1.x ``from_dict`` (Python >= 3.12 only, so a stand-in of its
    documented convention here) with the same values and dimensions as through 0.x."""
    from sksubsample import BayesianLogisticRegressionMH

    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 2))
    y = (X[:, 0] + rng.logistic(size=150) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegressionMH(n_draws=40, n_warmup=20, n_chains=2,
                                           random_state=0).fit(X, y)
    monkeypatch.setitem(sys.modules, "arviz", _arviz_1x_stand_in())
    tree = clf.to_inference_data(log_likelihood=30, posterior_predictive=True, random_state=2)
    assert set(tree.children) == {"posterior", "sample_stats", "observed_data",
                                  "log_likelihood", "posterior_predictive"}
    assert tree["posterior"]["coef"].dims == ("chain", "draw", "feature")
    assert tree["observed_data"]["y"].dims == ("obs_id",)
    assert tree["log_likelihood"]["y"].dims == ("chain", "draw", "obs_id")
    assert tree["log_likelihood"]["y"].shape == (2, 40, 30)
    assert {"acceptance_rate", "step_size", "lp"} <= set(tree["sample_stats"].data_vars)
    monkeypatch.undo()
    az = pytest.importorskip("arviz")
    if "posterior" in inspect.signature(az.from_dict).parameters:  # 0.x installed: compare
        idata = clf.to_inference_data(log_likelihood=30, posterior_predictive=True,
                                      random_state=2)
        for group in ("observed_data", "log_likelihood", "posterior_predictive"):
            np.testing.assert_array_equal(tree[group]["y"].values, idata[group]["y"].values)
            np.testing.assert_array_equal(tree[group]["obs_id"].values,
                                          idata[group]["obs_id"].values)
