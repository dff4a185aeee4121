"""BayesianLogisticRegressionMH on data out of core: memory maps, zarr and Dask arrays."""

import warnings

import numpy as np
import pytest

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.algorithms.glm import GLMTarget
from sksubsample.diagnostics import ConvergenceWarning, effective_sample_size

da = pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")
dask = pytest.importorskip("dask")

SETTINGS = dict(n_draws=1500, n_warmup=500, n_chains=4, random_state=0)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """50 000 rows of 5 float32 features on disk (.npy and zarr), labels in memory."""
    path = tmp_path_factory.mktemp("stored")
    rng = np.random.default_rng(20)
    n, d = 50_000, 5
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:10] *= 20.0  # high-leverage rows: the plan sets them apart
    theta = np.array([0.8, -0.5, 0.3, 0.0, 0.2])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ theta) + 0.4))).astype(np.int8)
    np.save(path / "X.npy", X)
    np.save(path / "y.npy", y)
    zarr.create_array(store=str(path / "X.zarr"), data=X, chunks=(4096, d))
    return path, X, y


def _memmap(path):
    return np.load(path / "X.npy", mmap_mode="r")


def _fit(X, y, **settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return BayesianLogisticRegressionMH(**{**SETTINGS, **settings}).fit(X, y)


def assert_same_posterior(a, b, n_sigma=4.5):
    """Each parameter's posterior mean and standard deviation agree between two fits.

    The means differ by at most ``n_sigma`` Monte-Carlo standard errors of their difference
    (``sd / sqrt(ESS)`` each, bulk ESS); the log ratio of the standard deviations by at most
    ``n_sigma`` of its standard error, ``sqrt(1 / (2 ESS_a) + 1 / (2 ESS_b))`` (the large-sample
    standard error of a log standard deviation, with the ESS for the sample size).
    """
    ess_a, ess_b = effective_sample_size(a), effective_sample_size(b)
    flat_a, flat_b = a.reshape(-1, a.shape[2]), b.reshape(-1, b.shape[2])
    mean_a, mean_b = flat_a.mean(axis=0), flat_b.mean(axis=0)
    sd_a, sd_b = flat_a.std(axis=0, ddof=1), flat_b.std(axis=0, ddof=1)
    z_mean = np.abs(mean_a - mean_b) / np.sqrt(sd_a**2 / ess_a + sd_b**2 / ess_b)
    z_sd = np.abs(np.log(sd_a / sd_b)) / np.sqrt(0.5 / ess_a + 0.5 / ess_b)
    assert z_mean.max() <= n_sigma, f"means differ by {z_mean.round(2)} standard errors"
    assert z_sd.max() <= n_sigma, f"sds differ by {z_sd.round(2)} standard errors"


def test_memmap_and_dask_fits_sample_the_in_memory_posterior(stored):
    path, X, y = stored
    in_memory = _fit(X.astype(np.float64), y)
    memmap = _fit(_memmap(path), y)
    with dask.config.set(scheduler="threads"):
        dask_fit = _fit(da.from_array(_memmap(path), chunks=(7000, 5)),
                        da.from_array(y, chunks=7000))
    for fit in (memmap, dask_fit):
        assert_same_posterior(fit._draws, in_memory._draws)
        np.testing.assert_allclose(fit.map_, in_memory.map_, atol=1e-7)
        assert fit.mean_batch_size_ < 0.01 * X.shape[0]
        # the same plan: the same rows set apart
        assert (fit._sampler.args[0].proxy.expansion.strata.exact.size
                == in_memory._sampler.args[0].proxy.expansion.strata.exact.size)


def test_the_comparison_tells_a_different_posterior(stored):
    # Negative control: the tempered posterior (T = 1.6) is wider by sqrt(1.6).
    path, _, y = stored
    with pytest.raises(AssertionError, match="differ by"):
        assert_same_posterior(_fit(_memmap(path), y, temperature=1.6)._draws,
                              _fit(_memmap(path), y)._draws)


def test_a_zarr_array_gives_the_memmaps_draws(stored):
    path, _, y = stored
    readonly = zarr.open_array(str(path / "X.zarr"), mode="r")
    np.testing.assert_array_equal(_fit(readonly, y, n_draws=300, n_chains=2)._draws,
                                  _fit(_memmap(path), y, n_draws=300, n_chains=2)._draws)


def test_stored_labels_and_weights(stored):
    path, X, y = stored
    weights = np.random.default_rng(1).integers(0, 3, X.shape[0]).astype(np.float64)
    fit = _fit(_memmap(path), np.load(path / "y.npy", mmap_mode="r"), n_draws=300,
               n_chains=2)
    assert fit.classes_.tolist() == [0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = BayesianLogisticRegressionMH(**{**SETTINGS, "n_draws": 300}).fit(
            _memmap(path), y, sample_weight=weights)
        in_memory = BayesianLogisticRegressionMH(**{**SETTINGS, "n_draws": 300}).fit(
            X.astype(np.float64), y, sample_weight=weights)
    np.testing.assert_allclose(weighted.map_, in_memory.map_, atol=1e-7)


def test_predictions_continuation_and_export(stored):
    path, X, y = stored
    fit = _fit(_memmap(path), y, n_draws=200, n_chains=2)
    np.testing.assert_allclose(fit.predict_proba(_memmap(path)[:500]),
                               fit.predict_proba(X[:500].astype(np.float64)), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit.sample_more(50)
    assert fit.coef_samples_.shape == (2, 250, 5)
    arviz = pytest.importorskip("arviz")
    data = fit.to_inference_data(log_likelihood=100, random_state=0)
    assert data.log_likelihood["y"].shape == (2, 250, 100)
    assert arviz is not None


def test_the_exact_tests_run_on_stored_data(stored):
    path, _, y = stored
    small = _memmap(path)[:3000]
    fit = _fit(small, y[:3000], test="metropolis", n_draws=100, n_warmup=50, n_chains=1)
    assert fit.mean_batch_size_ == 3000
    assert np.isfinite(fit._draws).all()


def test_nan_in_the_store_names_its_row_block(stored, tmp_path):
    _, X, y = stored
    bad = X.copy()
    bad[31_234, 2] = np.nan
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(ValueError, match=r"row 31234, column 2, in the block of rows \d+ to"):
        _fit(np.load(tmp_path / "bad.npy", mmap_mode="r"), y)


def test_lengths_are_checked_before_any_work(stored, monkeypatch):
    path, _, y = stored

    def no_work(*args, **kwargs):
        raise AssertionError("the data were read before their lengths were checked")

    monkeypatch.setattr(GLMTarget, "set_up", no_work)
    monkeypatch.setattr(GLMTarget, "rows", no_work)
    with pytest.raises(ValueError, match="one value per row of X: X has 50000 rows"):
        _fit(_memmap(path), y[:-1])


def test_tests_without_a_compiled_law_are_refused(stored):
    path, _, y = stored
    with pytest.raises(ValueError, match="compiled chain only"):
        _fit(_memmap(path), y, test="minibatch_barker")


def test_chains_run_one_after_another_gather_their_first_rows_ahead(stored, monkeypatch):
    # Run one after the other, every chain (and its next round of draws) adopts the first
    # stretch gathered for it before it ran, and its draws are those of chains run at once on
    # threads, which gather their own; no start is left behind.
    from joblib import parallel_config

    from sksubsample.algorithms.glm import _row_stream

    path, _, y = stored
    adopted = []
    original = _row_stream._adopted

    def recording(*args):
        start = original(*args)
        adopted.append(start is not None)
        return start

    monkeypatch.setattr(_row_stream, "_adopted", recording)
    ahead = _fit(_memmap(path), y, n_draws=300, n_chains=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ahead.sample_more(100)
    assert adopted == [True] * 6 and not _row_stream._STARTED
    adopted.clear()
    with parallel_config(backend="threading"):
        at_once = _fit(_memmap(path), y, n_draws=300, n_chains=3, n_jobs=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            at_once.sample_more(100)
    assert adopted == [False] * 6
    np.testing.assert_array_equal(ahead._draws, at_once._draws)
