"""The exponential and log1p of the logistic terms in arithmetic only, against the C library."""

import math

import numpy as np
from numba import njit

from sksubsample.algorithms._elementary import exp_nonpositive, log1p_unit


def _elementwise(function):
    """A compiled ``out[i] = function(x[i])`` (the functions are inlined into compiled loops
    only)."""

    @njit
    def apply(x, out):
        for i in range(x.size):
            out[i] = function(x[i])

    def call(x):
        out = np.empty_like(x)
        apply(x, out)
        return out

    return call


def test_the_arithmetic_exponential_is_within_one_ulp_of_the_c_library():
    # Within one unit in the last place of math.exp on x <= 0, NaN for NaN, e^-708 below -708.
    exps = _elementwise(exp_nonpositive)
    rng = np.random.default_rng(4)
    x = np.concatenate([-np.abs(rng.normal(size=20_000)) * 10.0 ** rng.uniform(-12, 2.5, 20_000),
                        [0.0, -0.0, -1e-300, -5e-324, -0.5 * math.log(2.0), -707.9]])
    x = x[x > -708.0]
    expected = np.array([math.exp(v) for v in x])
    assert np.all(np.abs(exps(x) - expected) <= np.spacing(expected))
    out = exps(np.array([np.nan, -708.5, -1e4, -np.inf]))
    floor = math.exp(-708.0)
    assert np.isnan(out[0]) and np.all(np.abs(out[1:] - floor) <= np.spacing(floor))


def test_the_arithmetic_log1p_is_within_one_ulp_of_the_c_library():
    # log σ's log1p(e), e = exp(-|z|) in [0, 1]: within one unit in the last place of
    # math.log1p over the whole range, subnormal e included, at the boundary √2 - 1 where 1 + e
    # changes binade, and NaN for NaN. (A negative control: math.log of 1 + e is not, for
    # small e, where rounding 1 + e loses e's low bits.)
    logs = _elementwise(log1p_unit)
    rng = np.random.default_rng(5)
    edge = math.sqrt(2.0) - 1.0
    e = np.concatenate([rng.uniform(0.0, 1.0, 20_000), 10.0 ** rng.uniform(-323, 0, 20_000),
                        [0.0, 1.0, 5e-324, 2.0**-53, 2.0**-52, edge, np.nextafter(edge, 0.0),
                         np.nextafter(edge, 1.0), np.nextafter(1.0, 0.0)]])
    expected = np.array([math.log1p(v) for v in e])
    ulp = np.spacing(np.maximum(expected, 5e-324))
    assert np.all(np.abs(logs(e) - expected) <= ulp)
    naive = np.log(1.0 + e)
    assert np.mean(np.abs(naive - expected) > ulp) > 0.3
    assert np.isnan(logs(np.array([np.nan]))[0])
