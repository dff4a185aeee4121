import numpy as np
import pytest
from scipy import stats

from sksubsample.algorithms import gumbel, truncated_gumbel, truncated_gumbel_cdf
from tests._stats import assert_ks_cdf


def test_gumbel_matches_standard_gumbel_cdf():
    draws = gumbel(1.5, size=4000, random_state=0)
    assert_ks_cdf(draws, stats.gumbel_r(loc=1.5).cdf)


@pytest.mark.parametrize(("loc", "upper"), [(0.0, 0.0), (2.0, -1.0), (-3.0, 4.0), (6.0, -6.0)])
def test_truncated_gumbel_matches_truncated_cdf(loc, upper):
    draws = truncated_gumbel(np.full(4000, loc), upper, random_state=1)
    assert np.all(draws <= upper)
    assert np.all(np.isfinite(draws))
    assert_ks_cdf(draws, lambda x: truncated_gumbel_cdf(x, loc, upper))


def test_truncated_gumbel_negative_control_ignoring_truncation_fails():
    # Draws that ignore the truncation point are not from the truncated law: KS must reject.
    draws = gumbel(0.0, size=4000, random_state=2)
    with pytest.raises(AssertionError):
        assert_ks_cdf(draws, lambda x: truncated_gumbel_cdf(x, 0.0, 0.5))


def test_truncated_gumbel_is_stable_hundreds_of_nats_from_its_bound():
    loc = np.array([700.0, -700.0, 0.0])
    upper = np.array([-700.0, 700.0, -745.0])
    draws = truncated_gumbel(loc, upper, random_state=4)
    assert np.all(np.isfinite(draws)) and np.all(draws <= upper)
    # far above the bound the law collapses on the bound; far below, it is untruncated
    assert draws[0] == upper[0] and draws[2] == upper[2]
    assert abs(draws[1] - (-700.0)) < 20
    cdf = truncated_gumbel_cdf([-700.0 - 1e-9, -700.0], 700.0, -700.0)
    assert np.all(np.isfinite(cdf)) and cdf[1] == 1.0


def test_truncated_gumbel_infinite_upper_is_gumbel():
    draws = truncated_gumbel(np.zeros(4000), np.inf, random_state=3)
    assert_ks_cdf(draws, stats.gumbel_r.cdf)


def test_truncated_gumbel_rejects_nan():
    with pytest.raises(ValueError, match="NaN"):
        truncated_gumbel(np.nan, 0.0)
