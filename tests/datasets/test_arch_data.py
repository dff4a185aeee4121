"""Tests of the ARCH data: the seeded simulator (innovations, recursion) and the loaders."""

import builtins

import numpy as np
import pytest
from scipy import stats

from sksubsample.datasets._arch_data import (
    load_nasdaq_returns,
    load_sp500_returns,
    simulate_arch,
)
from tests._stats import assert_ks_cdf


def test_simulate_arch_innovations_are_scale_one_student_t():
    """r_t / σ_t must be t_ν(0, 1) draws (KS test) with σ_t² from the ARCH recursion."""
    alpha, nu = np.array([0.2, 0.3, 0.2]), 5.0
    r = simulate_arch(5000, alpha=alpha, nu=nu, burn_in=0, random_state=0)[:, 0]
    sigma2 = alpha[0] + alpha[1] * r[1:-1] ** 2 + alpha[2] * r[:-2] ** 2
    assert_ks_cdf(r[2:] / np.sqrt(sigma2), stats.t(nu).cdf, label="standardised returns")
    # Negative control: the unit-variance t (arch's convention) is rejected by the same test.
    with pytest.raises(AssertionError):
        assert_ks_cdf(r[2:] / np.sqrt(sigma2), stats.t(nu, scale=np.sqrt((nu - 2) / nu)).cdf)


def test_simulate_arch_is_seeded_and_shaped():
    a = simulate_arch(200, alpha=(0.5,), n_series=3, random_state=1)
    b = simulate_arch(200, alpha=(0.5,), n_series=3, random_state=1)
    assert a.shape == (200, 3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, simulate_arch(200, alpha=(0.5,), n_series=3, random_state=2))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"alpha": (0.0, 0.3)}, ValueError), ({"alpha": (0.2, -0.1)}, ValueError),
     ({"alpha": ()}, ValueError), ({"nu": -1.0}, ValueError), ({"n_series": 0}, ValueError),
     ({"burn_in": 1.5}, TypeError)],
)
def test_simulate_arch_rejects_bad_input(kwargs, error):
    with pytest.raises(error):
        simulate_arch(10, **kwargs)


@pytest.mark.parametrize("loader", [load_sp500_returns, load_nasdaq_returns])
def test_loaders_return_percent_log_returns(loader):
    pytest.importorskip("arch")
    r = loader()
    assert r.shape == (5030, 1) and np.all(np.isfinite(r))
    # Daily percentage returns of an index: sd between 0.5% and 3%.
    assert 0.5 < r.std() < 3.0
    frame = loader(as_frame=True)
    np.testing.assert_allclose(frame.to_numpy(), r)


def test_loader_names_the_extra_when_arch_is_missing(monkeypatch):
    real_import = builtins.__import__

    def no_arch(name, *args, **kwargs):
        if name == "arch" or name.startswith("arch."):
            raise ImportError("no arch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_arch)
    with pytest.raises(ImportError, match=r"sksubsample\[arch\]"):
        load_sp500_returns()
