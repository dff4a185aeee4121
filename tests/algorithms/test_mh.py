"""MH chains: stationary distribution of every test on a conjugate Gaussian posterior.

Design: K independent chains start from exact draws of the (tempered) posterior and run L steps
each; if the kernel leaves the posterior invariant, the K final states are i.i.d. draws from it,
so a KS test and mean/sd checks on them are exact-size tests with no autocorrelation or burn-in
caveat (no thinning heuristic needed). N = 1e5 data points; the temperature T = 1000 keeps the
minibatch variance small enough for the subsampled tests to use batches of hundreds (the
tempered posterior is still conjugate). The negative control (Barker's test fed the noisy Δ*
without correction, s² ≈ 9) must fail the same checks.
"""

import math

import numpy as np
import pytest
from scipy import linalg, special, stats

from sksubsample.algorithms.mh import (
    AcceptInfo,
    build_kernel,
    init_state,
    langevin_log_q_ratio,
    mh_step,
    sample_mh,
)

N = 100_000
T = 1000.0
K = 200
L = 25


class Gauss1D:
    """x_i ~ N(θ, 1), prior θ ~ N(0, 10²); derivatives and the range bound of Bardenet et al."""

    def __init__(self, n=N, seed=0):
        self.x = np.random.default_rng(seed).normal(0.5, 1.0, n)
        self.n_data = n
        self.prior_var = 100.0
        self.xmin, self.xmax = float(self.x.min()), float(self.x.max())
        self.calls = 0

    def log_prior(self, th):
        return -0.5 * float(th[0] ** 2) / self.prior_var

    def grad_log_prior(self, th):
        return -np.asarray(th) / self.prior_var

    def hess_log_prior(self, th):
        return -np.eye(1) / self.prior_var

    def loglik_terms(self, th, idx):
        self.calls += len(idx)
        return -0.5 * (self.x[idx] - th[0]) ** 2

    def grad_terms(self, th, idx):
        return (self.x[idx] - th[0])[:, None]

    def hess_terms(self, th, idx):
        return -np.ones((len(idx), 1, 1))

    def loglik_ratio_bound(self, th, th_new):
        a, b = float(th[0]), float(th_new[0])
        mid = 0.5 * (a + b)
        return abs(b - a) * max(abs(self.xmin - mid), abs(self.xmax - mid))

    def posterior(self, temperature):
        prec = 1.0 / self.prior_var + self.n_data / temperature
        return self.x.sum() / temperature / prec, prec**-0.5


TARGET = Gauss1D()


def _final_states(kernel, step, seed, n_chains=K, n_steps=L):
    mean, sd = TARGET.posterior(kernel.temperature)
    rng = np.random.default_rng(seed)
    finals = np.empty(n_chains)
    n_eval = 0
    for k in range(n_chains):
        state = init_state(kernel, [rng.normal(mean, sd)])
        for _ in range(n_steps):
            state, info = mh_step(rng, state, kernel, step)
            n_eval += info.n_evaluations
        finals[k] = state.theta[0]
    return finals, n_eval / (n_chains * n_steps)


def _check_posterior(finals, mean, sd, alpha=0.01):
    """KS at level alpha, mean within 4 se, sd within 4 se (se of an i.i.d. normal sd)."""
    k = finals.size
    p_ks = stats.kstest(finals, stats.norm(mean, sd).cdf).pvalue
    mean_ok = abs(finals.mean() - mean) <= 4 * sd / math.sqrt(k)
    sd_ok = abs(finals.std(ddof=1) - sd) <= 4 * sd / math.sqrt(2 * (k - 1))
    return p_ks >= alpha, mean_ok, sd_ok


# The published baselines need thousands of terms per step (that is the paper's point), so they
# run fewer, shorter chains (120 x 15 steps) with larger increments to fit the CI budget; the
# tolerances below scale with the number of chains.
TESTS = [
    # 5 K chains: the test of main interest gets the most power (KS at 1000 i.i.d. states).
    ("minibatch_barker", {"batch_size": 100}, 5 * K, L),
    ("austerity", {"batch_size": 500, "test_options": {"epsilon": 0.01}}, 120, 15),
    ("adaptive_subsampling", {"batch_size": 500}, 120, 15),
    ("racing-normal", {"batch_size": 100}, K, L),
    ("racing-ebs", {"batch_size": 100}, 120, 15),
]


@pytest.mark.parametrize(("test", "options", "n_chains", "n_steps"), TESTS,
                         ids=[t[0] for t in TESTS])
def test_subsampled_chain_keeps_the_posterior(test, options, n_chains, n_steps):
    kernel = build_kernel(TARGET, dim=1, test=test, temperature=T, **options)
    mean, sd = TARGET.posterior(T)
    finals, per_step = _final_states(kernel, step=1.5 * sd, seed=3, n_chains=n_chains,
                                     n_steps=n_steps)
    assert all(_check_posterior(finals, mean, sd)), (test, finals.mean(), finals.std())
    assert per_step < N / 4  # subsampling saved work


def test_minibatch_barker_with_control_variates_at_temperature_one():
    # T = 1: without control variates s² ~ N / b would force full-data batches; with the
    # Taylor proxy the Gaussian residuals vanish and the test needs one minibatch.
    mean, sd = TARGET.posterior(1.0)
    kernel = build_kernel(TARGET, dim=1, test="minibatch_barker", temperature=1.0,
                          control_variates=True, reference=[mean], proposal="langevin")
    finals, per_step = _final_states(kernel, step=1.0, seed=4)
    assert all(_check_posterior(finals, mean, sd))
    assert per_step <= 100


class NaiveBarker:
    """Negative control: Barker's test on the noisy Δ* of a fixed batch, no correction."""

    name = "naive"

    def __init__(self, batch):
        self.batch = batch

    def __call__(self, terms, n_data, rest, rng, *, term_bound=None):
        idx = rng.choice(n_data, self.batch, replace=False)
        delta_star = n_data * float(np.mean(terms(idx))) + rest
        accepted = bool(math.log(rng.random()) < special.log_expit(delta_star))
        return AcceptInfo(accepted, self.batch, self.batch, delta_star, False, 1)


def test_negative_control_barker_without_correction_is_detected():
    mean, sd = TARGET.posterior(T)
    step = 3.0 * sd
    # s² = N² var(l) / b with var(l) ≈ step² / T² (x has unit variance): choose b so that
    # s² ≈ 9 at a typical step, far outside what the correction can absorb (σ² = 1)
    b = int(N * (step / T) ** 2 * N / 9.0) + 2
    kernel = build_kernel(TARGET, dim=1, test=NaiveBarker(b), temperature=T)
    finals, _ = _final_states(kernel, step=step, seed=5)
    assert not all(_check_posterior(finals, mean, sd))


def test_exact_metropolis_chain_and_counts():
    small = Gauss1D(n=2000, seed=1)
    mean, _ = small.posterior(1.0)
    res = sample_mh(small, [mean], n_draws=3000, n_warmup=500, test="metropolis",
                    proposal="random-walk", random_state=0)
    assert res.draws.shape == (3000, 1)
    # every step that was not rejected before data costs N terms, 2N log-lik evaluations
    per_draw = res.evaluations_per_draw
    assert per_draw.sum() == small.n_data * np.count_nonzero(per_draw)
    assert small.calls == 2 * res.n_evaluations
    assert res.mean_batch_size == small.n_data
    # correlated draws: use batch means for the Monte Carlo error of the mean
    batch_means = res.draws[:, 0].reshape(30, 100).mean(axis=1)
    se = batch_means.std(ddof=1) / math.sqrt(30)
    assert abs(res.draws.mean() - mean) <= 4 * se
    assert 0.15 < res.acceptance_rate < 0.35  # adapted toward 0.234


def test_langevin_with_exact_test_and_preconditioner():
    small = Gauss1D(n=2000, seed=2)
    mean, sd = small.posterior(1.0)
    kernel = build_kernel(small, dim=1, test="barker", proposal="langevin", reference=[0.3])
    # Laplace preconditioner from the proxy equals the posterior variance for a Gaussian
    assert (kernel.chol @ kernel.chol.T)[0, 0] == pytest.approx(sd**2)
    rng = np.random.default_rng(6)
    finals = []
    for _ in range(K):
        state = init_state(kernel, [rng.normal(mean, sd)])
        for _ in range(5):
            state, _ = mh_step(rng, state, kernel, 1.0)
        finals.append(state.theta[0])
    assert all(_check_posterior(np.array(finals), mean, sd))


def test_nan_proposals_are_rejected():
    class NaNPrior(Gauss1D):
        def log_prior(self, th):
            return math.nan if th[0] > 0.6 else super().log_prior(th)

    target = NaNPrior(n=500)
    kernel = build_kernel(target, dim=1, test="metropolis")
    rng = np.random.default_rng(8)
    state = init_state(kernel, [0.5])
    n_early = 0
    for _ in range(300):
        state, info = mh_step(rng, state, kernel, 0.3)
        assert state.theta[0] <= 0.6
        n_early += info.n_evaluations == 0
    assert n_early > 50  # NaN priors were met, and rejected without data
    # a NaN drift (overflowing gradient) is rejected as well
    kernel = build_kernel(target, dim=1, test="metropolis")
    state, info = mh_step(0, init_state(kernel, [0.5]), kernel, math.inf)
    assert not info.accepted and info.n_evaluations == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="proposal"):
        build_kernel(TARGET, dim=1, proposal="hmc")
    with pytest.raises(ValueError, match="temperature"):
        build_kernel(TARGET, dim=1, temperature=0.0)
    with pytest.raises(ValueError, match="batch_size"):
        build_kernel(TARGET, dim=1, batch_size=1)
    with pytest.raises(ValueError, match="batch_size"):
        build_kernel(TARGET, dim=1, batch_size=N + 1)
    with pytest.raises(ValueError, match="delta"):
        build_kernel(TARGET, dim=1, delta=1.0)
    with pytest.raises(ValueError, match="sigma"):
        build_kernel(TARGET, dim=1, test_options={"sigma": 1.9})
    with pytest.raises(ValueError, match="reference"):
        build_kernel(TARGET, dim=1, control_variates=True)
    with pytest.raises(ValueError, match="theta"):
        init_state(build_kernel(TARGET, dim=1, test="metropolis"), [math.nan])
    with pytest.raises(TypeError, match="target"):
        build_kernel(object(), dim=1)
    with pytest.raises(ValueError, match="preconditioner"):
        build_kernel(TARGET, dim=1, test="metropolis", preconditioner=np.array([-1.0]))


class Linear2D:
    """y_i = a_iᵀθ + N(0, 1) with correlated a_i: a 2-D Gaussian posterior, non-diagonal."""

    def __init__(self, n=2000, seed=3):
        rng = np.random.default_rng(seed)
        z = rng.normal(size=(n, 2))
        self.a = np.column_stack([z[:, 0], 0.9 * z[:, 0] + 0.3 * z[:, 1]])
        self.y = self.a @ np.array([0.5, -1.0]) + rng.normal(size=n)
        self.n_data = n

    def log_prior(self, th):
        return -0.5 * float(th @ th) / 100.0

    def grad_log_prior(self, th):
        return -np.asarray(th) / 100.0

    def hess_log_prior(self, th):
        return -np.eye(2) / 100.0

    def loglik_terms(self, th, idx):
        return -0.5 * (self.y[idx] - self.a[idx] @ th) ** 2

    def grad_terms(self, th, idx):
        return (self.y[idx] - self.a[idx] @ th)[:, None] * self.a[idx]

    def hess_terms(self, th, idx):
        return -self.a[idx][:, :, None] * self.a[idx][:, None, :]

    def posterior(self):
        prec = self.a.T @ self.a + np.eye(2) / 100.0
        cov = np.linalg.inv(prec)
        return cov @ (self.a.T @ self.y), cov


@pytest.mark.parametrize("test", ["metropolis", "minibatch_barker"])
def test_langevin_two_dimensional_correlated_posterior(test):
    target = Linear2D()
    mean, cov = target.posterior()
    kernel = build_kernel(target, dim=2, test=test, proposal="langevin",
                          control_variates=True, reference=mean + 0.01)
    # The Laplace covariance is the exact covariance here.
    np.testing.assert_allclose(kernel.chol @ kernel.chol.T, cov, rtol=1e-8)
    rng = np.random.default_rng(9)
    finals = np.empty((K, 2))
    for k in range(K):
        state = init_state(kernel, rng.multivariate_normal(mean, cov))
        for _ in range(5):
            state, _ = mh_step(rng, state, kernel, 1.2)
        finals[k] = state.theta
    # whiten with the exact covariance: i.i.d. N(0, I) coordinates if the kernel is right;
    # Bonferroni over the two coordinates
    white = np.linalg.solve(np.linalg.cholesky(cov), (finals - mean).T).T
    for j in range(2):
        assert all(_check_posterior(white[:, j], 0.0, 1.0, alpha=0.005)), j


def _gaussian_langevin_log_q(kernel, to, frm, grad_frm, step_size):
    """log q(to | frm) of the Langevin proposal by a triangular solve (up to a constant)."""
    chol = kernel.chol
    mean = frm + 0.5 * step_size * step_size * (chol @ (chol.T @ grad_frm))
    z = linalg.solve_triangular(chol, to - mean, lower=True)
    return -0.5 * float(z @ z) / (step_size * step_size)


def test_langevin_closed_form_ratio_matches_the_proposal_density():
    # mh_step computes log q(θ|θ') - log q(θ'|θ) from ξ and two products with Lᵀ; it must equal
    # the difference of the Gaussian proposal log-densities (triangular solves) it replaces.
    target = Linear2D()
    mean, _ = target.posterior()
    kernel = build_kernel(target, dim=2, test="metropolis", proposal="langevin",
                          control_variates=True, reference=mean + 0.01)
    rng = np.random.default_rng(3)
    for step in (0.1, 0.7, 2.5):
        theta = mean + rng.normal(size=2)
        grad, grad_new = rng.normal(size=2) * 5, rng.normal(size=2) * 5
        xi = rng.normal(size=2)
        drift = 0.5 * step * (kernel.chol.T @ grad)
        theta_new = theta + step * (kernel.chol @ (xi + drift))
        expected = (_gaussian_langevin_log_q(kernel, theta, theta_new, grad_new, step)
                    - _gaussian_langevin_log_q(kernel, theta_new, theta, grad, step))
        work = np.zeros((4, 2))
        work[0], work[1] = xi, drift  # what the proposal leaves for its ratio
        got = langevin_log_q_ratio(step, kernel.chol, grad_new, work)
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)


# ----------------------------------------------------------------------------- warm-up


def test_dual_averaging_recovers_from_a_bad_initial_step_size():
    """Warm-up that cannot strand a chain: from ε0 a thousand times too small or too large,
    dual averaging ends within a factor 1.5 of the step size a well-started chain finds, and
    the sampling phase's acceptance rate is near the target (binomial band + adaptation noise)."""
    small = Gauss1D(n=2000, seed=7)
    mean, sd = small.posterior(1.0)
    kernel = build_kernel(small, dim=1, test="metropolis", proposal="random-walk",
                          preconditioner=np.array([sd**2]))
    from sksubsample.algorithms.mh import run_kernel

    steps = {}
    for eps0 in (2.38, 2.38e-3, 2.38e3):
        res = run_kernel(kernel, [mean], n_draws=2000, n_warmup=1000, step_size=eps0,
                         target_accept=0.44, random_state=1)
        steps[eps0] = res.step_size
        assert abs(res.acceptance_rate - 0.44) < 0.08
    assert max(steps.values()) / min(steps.values()) < 1.5


def test_dual_averaging_converges_on_a_known_response():
    from sksubsample.algorithms import DualAveraging

    # acceptance falls linearly in log ε: α = 0.9 - 0.2 log ε, so α = 0.5 at ε = e².
    adaptation = DualAveraging(0.01, 0.5)
    for _ in range(2000):
        alpha = min(1.0, max(0.0, 0.9 - 0.2 * math.log(adaptation.step_size)))
        adaptation.update(alpha)
    assert adaptation.final_step_size == pytest.approx(math.e**2, rel=0.05)


def test_a_test_that_returns_a_bool_gets_a_clear_type_error():
    def decide(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None):
        return True

    kernel = build_kernel(Gauss1D(n=100), dim=1, test=decide)
    with pytest.raises(TypeError, match="must return an AcceptInfo"):
        mh_step(0, init_state(kernel, [0.5]), kernel, 0.1)
