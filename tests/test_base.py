"""Tests of the shared estimator machinery: diagnostics, chains, seeding, ArviZ export."""

import sys
import types

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from sksubsample._base import (
    PosteriorSamplerMixin,
    _arviz_from_dict,
    effective_sample_size,
    run_chains,
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


class _Toy(PosteriorSamplerMixin, BaseEstimator):
    """A fitted stand-in: 2 chains, 50 draws, a vector 'w' (3,) and a scalar 'b'."""

    def __init__(self, fitted=True):
        self.fitted = fitted
        if fitted:
            rng = np.random.default_rng(0)
            self.w_ = rng.standard_normal((2, 50, 3))
            self.b_ = rng.standard_normal((2, 50))

    def fit(self, X=None, y=None):  # check_is_fitted needs an estimator-like object
        return self

    def _posterior_variables(self):
        return {"w": self.w_, "b": self.b_}

    def _posterior_dims(self):
        return {"w": ["feature"]}, {"feature": ["f0", "f1", "f2"]}

    def _sample_stats(self):
        return {"accepted": np.ones((2, 50), dtype=bool)}


def test_sample_posterior_shapes_and_pooling():
    toy = _Toy()
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
        _Toy(fitted=False).sample_posterior()


def test_to_inference_data_with_arviz():
    pytest.importorskip("arviz")
    idata = _Toy().to_inference_data()
    post = idata.posterior
    assert post["w"].shape == (2, 50, 3) and post["b"].shape == (2, 50)
    assert list(post["w"].coords["feature"].values) == ["f0", "f1", "f2"]
    np.testing.assert_array_equal(post["w"].values, _Toy().w_)
    assert idata.sample_stats["accepted"].shape == (2, 50)


def test_to_inference_data_without_arviz_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # makes `import arviz` fail
    with pytest.raises(ImportError, match=r"sksubsample\[arviz\]"):
        _Toy().to_inference_data()


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
    assert _arviz_from_dict(types.SimpleNamespace(from_dict=from_dict_1x), groups,
                            {"c": [0]}, {"a": []}) == "tree"
    assert set(calls["1x"][0]) == {"posterior"}  # empty groups are dropped
    assert _arviz_from_dict(types.SimpleNamespace(from_dict=from_dict_0x), groups,
                            {"c": [0]}, {"a": []}) == "idata"
    assert calls["0x"][1] is None and calls["0x"][2] == {"c": [0]}
