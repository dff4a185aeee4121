"""Warm-up adaptation of the preconditioner (``run_kernel(adapt_preconditioner=...)``).

On the Gaussian posterior N(x̄, I/N) of :class:`~tests.algorithms.test_path_length.GaussD`
with a preconditioner ``diag(s²)/N`` that is wrong by the factors ``s``, the positions of the
window, whitened by the preconditioner, have variances ``1/s²``; the adapted preconditioner's
diagonal is then ``s² (n/s² + k)/(n + k)`` per unit ``1/N`` in expectation (the window's
unbiased sample variance, shrunk by ``k`` pseudo-draws toward 1), i.e. close to the
posterior's variance 1/N. The negative control: the same assertion rejects the preconditioner
warm-up started from.
"""

import math

import numpy as np
import pytest

from sksubsample.algorithms import build_kernel, run_kernel
from sksubsample.algorithms.mh._adaptation import METRIC_PRIOR_DRAWS, restart_steps
from sksubsample.diagnostics import effective_sample_size
from tests._stats import assert_mean_within
from tests.algorithms.test_path_length import GaussD
from tests.linear_model.test_logistic import _glm_kernel

N, D = 50, 3
SCALES = np.array([2.0, 0.5, 1.0])  # preconditioner sd over posterior sd, per coordinate
TARGET = GaussD(N, D)
N_WARMUP, N_DRAWS, CHAINS = 400, 400, 8


def _kernel():
    return build_kernel(TARGET, dim=D, test="metropolis", proposal="hamiltonian",
                        reference=TARGET.mean, preconditioner=SCALES**2 / N)


def _run(kernel, seed, **options):
    start = TARGET.mean + np.random.default_rng(seed).normal(size=D) / math.sqrt(N)
    return run_kernel(kernel, start, random_state=seed, **options)


@pytest.fixture(scope="module")
def adapted():
    kernel = _kernel()
    return [_run(kernel, seed, n_warmup=N_WARMUP, n_draws=N_DRAWS,
                 adapt_preconditioner="diagonal") for seed in range(CHAINS)]


def _variances(runs):
    """(chains, d): the diagonal of each run's preconditioner ``L Lᵀ``, in units of 1/N."""
    return np.array([np.diag(r.preconditioner @ r.preconditioner.T) * N for r in runs])


def _assert_means_are(values, expected):
    """Each column's mean over chains is within 5 standard errors (from the chains' spread:
    a t statistic on 7 degrees of freedom, two-sided false alarm 0.16 % per column)."""
    se = values.std(axis=0, ddof=1) / math.sqrt(values.shape[0])
    z = (values.mean(axis=0) - expected) / se
    assert np.all(np.abs(z) <= 5.0), f"means {values.mean(axis=0)} vs {expected}: z = {z}"


def test_the_adapted_preconditioner_is_the_posterior_covariance(adapted):
    restarts = restart_steps(N_WARMUP, True)
    n = restarts[1] - restarts[0]  # the window's positions
    expected = SCALES**2 * (n / SCALES**2 + METRIC_PRIOR_DRAWS) / (n + METRIC_PRIOR_DRAWS)
    variances = _variances(adapted)
    _assert_means_are(variances, expected)
    assert np.all(np.abs(expected - 1.0) < 0.1)  # i.e. about the posterior's variance, 1/N
    # Only the diagonal adapts: L stays diagonal as the preconditioner was.
    for run in adapted:
        np.testing.assert_array_equal(run.preconditioner, np.diag(np.diag(run.preconditioner)))


def test_negative_control_the_starting_preconditioner_is_rejected(adapted):
    with pytest.raises(AssertionError):
        _assert_means_are(_variances(adapted), SCALES**2)


def test_without_adaptation_the_preconditioner_stays():
    run = _run(_kernel(), 0, n_warmup=100, n_draws=5)
    np.testing.assert_array_equal(run.preconditioner, np.diag(SCALES / math.sqrt(N)))


def test_the_adapted_chains_sample_the_gaussian(adapted):
    """After warm-up the preconditioner is fixed: the draws follow N(x̄, I/N) (mean 0 and
    second moment 1 of the standardised draws, within 4 Monte-Carlo standard errors from the
    pooled chains' bulk ESS)."""
    z = np.stack([(r.draws - TARGET.mean) * math.sqrt(N) for r in adapted])
    ess = effective_sample_size(z, method="bulk")
    ess_sq = effective_sample_size(z**2, method="bulk")
    for j in range(D):
        assert_mean_within(z[:, :, j].ravel(), 0.0, sd=1.0, ess=ess[j], label=f"z{j}")
        # Var(z²) = 2 for a standard normal.
        assert_mean_within(z[:, :, j].ravel() ** 2, 1.0, sd=math.sqrt(2.0), ess=ess_sq[j],
                           label=f"z{j}²")


def _continues(kernel, start, compiled):
    """A run of 300 draws is a run of 120 then, from its last draw with its frozen step size,
    integration time and preconditioner and the same generator, one of 180: bit for bit.
    Without the adapted preconditioner the continuation is another chain."""
    options = {"n_warmup": 200, "compiled": compiled, "adapt_preconditioner": "diagonal"}
    one = run_kernel(kernel, start, n_draws=300, random_state=np.random.default_rng(5),
                     **options)
    rng = np.random.default_rng(5)
    first = run_kernel(kernel, start, n_draws=120, random_state=rng, **options)
    state = rng.bit_generator.state
    frozen = {"n_warmup": 0, "step_size": first.step_size, "path_length": first.path_length,
              "compiled": compiled}
    second = run_kernel(kernel, first.draws[-1], n_draws=180, random_state=rng,
                        preconditioner=first.preconditioner, **frozen)
    np.testing.assert_array_equal(np.vstack([first.draws, second.draws]), one.draws)
    np.testing.assert_array_equal(second.preconditioner, one.preconditioner)
    assert not np.array_equal(first.preconditioner, kernel.chol)
    rng.bit_generator.state = state
    other = run_kernel(kernel, first.draws[-1], n_draws=180, random_state=rng, **frozen)
    assert not np.array_equal(other.draws, second.draws)


def test_an_adapted_chain_continues_bit_for_bit_interpreted():
    _continues(_kernel(), TARGET.mean, False)


def test_an_adapted_chain_continues_bit_for_bit_compiled():
    _continues(*_glm_kernel("bounded_barker", "hamiltonian", "proxy"), True)


def test_compiled_and_interpreted_chains_adapt_alike():
    """One law: the compiled chain adapts the preconditioner as the interpreted one does (the
    same decisions; factors and draws equal up to rounding, which the two chains' gradients,
    summed in different orders, start at about 1e-12 and the chain amplifies: a different law
    would differ by the draws' scale, about 0.05)."""
    kernel, start = _glm_kernel("metropolis", "langevin", "exact")
    runs = [run_kernel(kernel, start, n_draws=100, n_warmup=200, compiled=flag,
                       random_state=np.random.default_rng(5), adapt_preconditioner="diagonal")
            for flag in (True, False)]
    np.testing.assert_array_equal(runs[0].accepted, runs[1].accepted)
    np.testing.assert_allclose(runs[0].preconditioner, runs[1].preconditioner, rtol=1e-5)
    np.testing.assert_allclose(runs[0].draws, runs[1].draws, rtol=0, atol=1e-4)
    assert not np.array_equal(runs[0].preconditioner, kernel.chol)


def _runs_by_mode(kernel, modes, seeds=range(3)):
    return {mode: [_run(kernel, seed, n_warmup=N_WARMUP, n_draws=20, adapt_preconditioner=mode)
                   for seed in seeds] for mode in modes}


def _same(first, second):
    return all(np.array_equal(a.preconditioner, b.preconditioner)
               and np.array_equal(a.draws, b.draws) for a, b in zip(first, second, strict=True))


def test_auto_adapts_the_dense_covariance_where_the_base_misses_the_scales():
    """The preconditioner wrong by the factors 2, 1/2 and 1: the window's whitened variances
    are 1/4, 4 and 1 (root mean square of their logs 1.13, above DENSE_ABOVE), so ``"auto"``
    adapts the dense covariance: the same factor and draws as ``"dense"``, not as
    ``"diagonal"``."""
    runs = _runs_by_mode(_kernel(), ("auto", "dense", "diagonal"))
    assert _same(runs["auto"], runs["dense"])
    assert not _same(runs["auto"], runs["diagonal"])


def test_auto_keeps_to_the_diagonal_where_the_base_has_the_scales():
    """The posterior's own covariance as the preconditioner: the whitened variances are 1 up
    to the window's noise, so ``"auto"`` adapts the diagonal only (the same factor and draws
    as ``"diagonal"``, not as ``"dense"``)."""
    kernel = build_kernel(TARGET, dim=D, test="metropolis", proposal="hamiltonian",
                          reference=TARGET.mean, preconditioner=np.ones(D) / N)
    runs = _runs_by_mode(kernel, ("auto", "dense", "diagonal"))
    assert _same(runs["auto"], runs["diagonal"])
    assert not _same(runs["auto"], runs["dense"])
    for run in runs["auto"]:
        np.testing.assert_array_equal(run.preconditioner, np.diag(np.diag(run.preconditioner)))
