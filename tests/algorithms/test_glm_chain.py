"""The compiled MH chain of a logistic GLM runs the law of the interpreted step.

For the same kernel and generator state, ``run_kernel(..., compiled=True)`` and the step-by-step
``mh_step`` path must draw the same chain: the same random numbers are consumed in the same
order, and every per-datum quantity comes from the same kernels, so the two differ only by
floating-point rounding in the proposal's linear algebra (BLAS against compiled loops). Over a
few dozen steps that is far below any decision's margin.
"""

import itertools

import numpy as np
import pytest
from scipy import sparse, special
from sklearn.linear_model import LogisticRegression

from sksubsample.algorithms import GLMTarget, TaylorProxy, build_kernel, run_kernel


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    n = 3000
    X = np.column_stack([rng.standard_normal((n, 3)), np.ones(n)])
    y = (rng.random(n) < special.expit(X @ np.array([0.5, -1.0, 0.3, 0.2]))).astype(float)
    ref = LogisticRegression(C=100.0, fit_intercept=False, tol=1e-10).fit(X, y).coef_.ravel()
    return X, 2.0 * y - 1.0, ref


CASES = [case for case in itertools.product(
    ("metropolis", "barker", "bounded_barker"), ("random-walk", "langevin", "hamiltonian"),
    (True, False), ("proxy", "exact"), (False, True))
    if not (case[1] == "random-walk" and case[3] == "exact")]


@pytest.mark.parametrize(("test", "proposal", "cv", "gradient", "csr"), CASES)
def test_compiled_chain_draws_the_interpreted_chain(model, test, proposal, cv, gradient, csr):
    X, s, ref = model
    target = GLMTarget(sparse.csr_matrix(X) if csr else X, s, 10.0)
    proxy = TaylorProxy(target, ref)
    kernel = build_kernel(target, dim=4, test=test, proposal=proposal, proxy=proxy,
                          control_variates=cv, gradient=gradient)
    # Without warm-up: with it, the step size feeds every rounding difference back into the
    # chain, which then drifts apart like any two floating-point runs of one chaotic map.
    runs = [run_kernel(kernel, ref, n_draws=80, n_warmup=0, step_size=0.5, random_state=5,
                       compiled=c) for c in (True, False)]
    np.testing.assert_allclose(runs[0].draws, runs[1].draws, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(runs[0].accepted, runs[1].accepted)
    np.testing.assert_array_equal(runs[0].batch_sizes, runs[1].batch_sizes)
    np.testing.assert_array_equal(runs[0].evaluations_per_draw > 0,
                                  runs[1].evaluations_per_draw > 0)
    assert runs[0].accepted.any() and not runs[0].accepted.all()  # both decisions occurred


def test_warm_up_adapts_alike(model):
    """Warm-up runs the same adaptation: the frozen step sizes (and integration times) agree
    to rounding."""
    X, s, ref = model
    target = GLMTarget(X, s, 10.0)
    for proposal in ("random-walk", "langevin", "hamiltonian"):
        kernel = build_kernel(target, dim=4, test="bounded_barker", proposal=proposal,
                              proxy=TaylorProxy(target, ref), control_variates=True)
        runs = [run_kernel(kernel, ref, n_draws=1, n_warmup=40, random_state=2, compiled=c)
                for c in (True, False)]
        assert runs[0].step_size == pytest.approx(runs[1].step_size, rel=1e-8)
        # and the integration time of the Hamiltonian move (NaN for the others)
        np.testing.assert_allclose(runs[0].path_length, runs[1].path_length, rtol=1e-8)
        assert np.isfinite(runs[0].path_length) == (proposal == "hamiltonian")


def test_a_different_stream_gives_a_different_chain(model):
    """Negative control: the comparison above can fail."""
    X, s, ref = model
    target = GLMTarget(X, s, 10.0)
    kernel = build_kernel(target, dim=4, test="bounded_barker", proposal="hamiltonian",
                          proxy=TaylorProxy(target, ref), control_variates=True)
    a = run_kernel(kernel, ref, n_draws=40, n_warmup=0, step_size=0.5, random_state=5,
                   compiled=True)
    b = run_kernel(kernel, ref, n_draws=40, n_warmup=0, step_size=0.5, random_state=6,
                   compiled=False)
    assert np.abs(a.draws - b.draws).max() > 1e-3


def test_compiled_true_refuses_what_has_no_compiled_law(model):
    X, s, ref = model
    target = GLMTarget(X, s, 10.0)
    kernel = build_kernel(target, dim=4, test="minibatch_barker", proposal="random-walk",
                          proxy=TaylorProxy(target, ref), control_variates=True)
    with pytest.raises(ValueError, match="compiled=True"):
        run_kernel(kernel, ref, n_draws=5, n_warmup=0, random_state=0, compiled=True)


def test_every_plan_passes_the_chain_arguments_of_one_type(monkeypatch):
    # numba compiles the chain once per tuple of argument types: plans with and without
    # control variates, strata or a bound, dense or CSR, must all pass the same types, or a
    # first fit of another kind of data compiles for several seconds (also in each worker).
    import numba

    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.algorithms.mh import _chain

    calls = []
    original = _chain.run_segment

    def record(*args):
        calls.append(tuple(numba.typeof(a) for a in args))
        return original(*args)

    monkeypatch.setattr(_chain, "run_segment", record)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 3))
    y = (rng.random(400) < special.expit(X @ np.array([1.0, -0.5, 0.2]))).astype(int)
    settings = {"n_draws": 10, "n_warmup": 10, "n_chains": 1, "n_jobs": 1, "random_state": 0}
    for options in ({}, {"control_variates": False}, {"test": "metropolis"},
                    {"prior_scale": 0.1}):
        BayesianLogisticRegressionMH(**options, **settings).fit(X, y)
    BayesianLogisticRegressionMH(**settings).fit(sparse.csr_matrix(X), y)
    assert len(calls) >= 5
    assert len(set(calls)) == 1, set(calls)
