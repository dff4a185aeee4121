"""ChEES adaptation of the Hamiltonian proposal's integration time.

On a Gaussian posterior whose covariance is the preconditioner's, the whitened target is a
standard Gaussian, where the jittered ChEES criterion has a closed form: with a duration
``t = u T``, ``u ~ U(0, 1]``, exact Hamiltonian flow gives
``ChEES(T) ∝ E sin²(uT) = 1/2 - sin(2T) / (4T)``, maximal where ``tan 2T = 2T``
(``T* ≈ 2.2467``). A posterior ``s`` times wider than the preconditioner has ``T* s``: the
negative control that shows the adaptation responds to the target rather than staying put.
"""

import math

import numpy as np
import pytest
from scipy import optimize

from sksubsample.algorithms import build_kernel, run_kernel
from sksubsample.algorithms.mh._adaptation import (
    CHEES_LEARNING_RATE,
    chees_path_length,
    chees_restart,
    chees_state,
    chees_update,
)
from sksubsample.algorithms.mh._proposals import MAX_PATH_LENGTH
from sksubsample.diagnostics import effective_sample_size
from tests._stats import assert_mean_within

#: Argmax of 1/2 - sin(2T)/(4T): the root of tan 2T = 2T in (π/2, 3π/4).
T_STAR = 0.5 * optimize.brentq(lambda x: math.tan(x) - x, 4.0, 4.6)
N, D = 50, 5
K = 6  # chains per adaptation check


class GaussD:
    """x_i ~ N(θ, I_d), a nearly flat prior: the posterior is N(x̄, I/N), Gaussian, and the
    Laplace preconditioner at its mean is its covariance."""

    def __init__(self, n=N, d=D, seed=0):
        self.x = np.random.default_rng(seed).normal(0.5, 1.0, (n, d))
        self.n_data, self.d = n, d

    def log_prior(self, th):
        return -0.5 * float(th @ th) / 1e6

    def grad_log_prior(self, th):
        return -np.asarray(th) / 1e6

    def hess_log_prior(self, th):
        return -np.eye(self.d) / 1e6

    def loglik_terms(self, th, idx):
        return -0.5 * ((self.x[idx] - th) ** 2).sum(axis=1)

    def grad_terms(self, th, idx):
        return self.x[idx] - th

    def hess_terms(self, th, idx):
        return -np.broadcast_to(np.eye(self.d), (len(idx), self.d, self.d))

    @property
    def mean(self):
        return self.x.sum(axis=0) / (self.n_data + 1e-6)


TARGET = GaussD()


def _kernel(scale):
    """The Hamiltonian kernel whose preconditioner is ``scale²`` times the posterior's
    covariance: the whitened target is N(0, I / scale²)."""
    cov = np.eye(D) / N * scale**2
    return build_kernel(TARGET, dim=D, test="metropolis", proposal="hamiltonian",
                        reference=TARGET.mean, preconditioner=cov)


def _adapted(scale, seeds, **options):
    kernel = _kernel(scale)
    out = []
    for seed in seeds:
        start = TARGET.mean + np.random.default_rng(seed).normal(size=D) / math.sqrt(N)
        out.append(run_kernel(kernel, start, random_state=seed, **options))
    return out


def _effective_times(runs):
    # A trajectory of ceil(uT/ε) steps lasts uT + ε/2 on average: the T of the continuous
    # flow that the chain's T̄ stands for.
    return np.log([r.path_length + 0.5 * r.step_size for r in runs])


def _assert_lands_at(log_times, optimum):
    se = log_times.std(ddof=1) / math.sqrt(log_times.size)
    z = (log_times.mean() - math.log(optimum)) / se
    assert abs(z) <= 4.0, (
        f"mean adapted T {math.exp(log_times.mean()):.3f} vs ChEES optimum {optimum:.3f}: "
        f"{z:.2f} standard errors")


@pytest.fixture(scope="module")
def adapted_runs():
    # A high acceptance target keeps ε small, so that leapfrog follows the exact flow whose
    # ChEES optimum is known, and weighting by α barely matters.
    options = {"n_draws": 2000, "n_warmup": 1000, "target_accept": 0.95}
    return {scale: _adapted(scale, range(K), **options) for scale in (1.0, 0.5)}


def test_adapted_time_lands_at_the_chees_optimum_of_a_standard_gaussian(adapted_runs):
    _assert_lands_at(_effective_times(adapted_runs[1.0]), T_STAR)


def test_a_wider_posterior_gets_a_longer_time(adapted_runs):
    """Negative control: twice the scale, twice the optimum; the standard one is rejected."""
    wide = _effective_times(adapted_runs[0.5])
    _assert_lands_at(wide, 2.0 * T_STAR)
    with pytest.raises(AssertionError):
        _assert_lands_at(wide, T_STAR)


def test_adapted_chains_sample_the_gaussian(adapted_runs):
    """After warm-up T is fixed and the jittered move reversible: the draws follow N(0, I)
    in the whitened coordinates (mean 0 and second moment 1, within 4 Monte-Carlo standard
    errors from each chain's bulk ESS)."""
    for run in adapted_runs[1.0][:3]:
        z = (run.draws - TARGET.mean) * math.sqrt(N)
        ess = effective_sample_size(z[None], method="bulk")
        for j in range(D):
            assert_mean_within(z[:, j], 0.0, sd=1.0, ess=ess[j], label=f"z{j}")
            # Var(z²) = 2 for a standard normal; the ESS of z² is at most that of z's ranks.
            ess_sq = effective_sample_size(z[None, :, j:j + 1] ** 2, method="bulk")[0]
            assert_mean_within(z[:, j] ** 2, 1.0, sd=math.sqrt(2.0), ess=ess_sq,
                               label=f"z{j}²")


def test_the_adapted_moves_decorrelate_the_draws(adapted_runs):
    """Exact flow of duration uT moves z to z cos(uT) + p sin(uT): the lag-1 autocorrelation
    of z is E cos(uT) = sin(T)/T (about 0.35 at T*, against 0.45 at the former fixed T = 2)
    and that of z² is E cos²(uT). Check the chains are near these, for each chain's T̄ (the
    rejected 5 % and the leapfrog error only raise them a little)."""
    for run in adapted_runs[1.0]:
        z = (run.draws - TARGET.mean) * math.sqrt(N)
        rho = np.mean([np.corrcoef(z[:-1, j], z[1:, j])[0, 1] for j in range(D)])
        t = run.path_length + 0.5 * run.step_size
        assert rho < math.sin(t) / t + 0.15


def test_time_is_capped_on_a_very_wide_posterior():
    """A whitened posterior 20 times wider than the preconditioner would take T ≈ 45: the
    cap keeps a proposal's leapfrog count bounded."""
    runs = _adapted(0.05, [0], n_draws=10, n_warmup=1000)
    assert runs[0].path_length <= MAX_PATH_LENGTH
    assert runs[0].path_length > 0.5 * MAX_PATH_LENGTH


def test_one_adam_step_moves_log_time_by_the_learning_rate():
    """Exact: the first bias-corrected Adam step without momentum is ``rate · sign(ĝ)``, and
    ĝ = α (|a'|² - |a|²)(a'·p') t with a = z - z̄, a' = a + Δz."""
    state = chees_state(2.0, 2, max_path_length=10.0)
    trajectory = np.zeros((6, 2))
    # First call: z̄ becomes z = 0; a = 0, a' = Δz = (1, 0), p' = (1, 0): ĝ = α·1·1·t > 0.
    trajectory[3] = [1.0, 0.0]
    trajectory[4] = [1.0, 0.0]
    trajectory[5, 0] = 1.5
    chees_update(state, trajectory, 0.8, True, 0.1, True)
    assert chees_path_length(state, False) == pytest.approx(2.0 * math.exp(CHEES_LEARNING_RATE))
    # Accepted: z moved by Δz to (1, 0), and z̄, the mean of the positions after each step
    # (one so far), is (1, 0).
    assert state[8:10].tolist() == [1.0, 0.0]
    assert state[10:12].tolist() == [1.0, 0.0]
    # Moving back towards the mean with momentum pointing away: a = 0, a' = (-1, 0),
    # p' = (1, 0): (|a'|² - |a|²) = 1, a'·p' = -1, so ĝ < 0 and log T goes down.
    before = chees_path_length(state, False)
    trajectory[4] = [-1.0, 0.0]
    chees_update(state, trajectory, 1.0, False, 0.1, True)
    assert chees_path_length(state, False) < before
    # A proposal rejected for sure teaches nothing (only the running mean counts the step).
    frozen = state.copy()
    trajectory[4] = [np.inf, 0.0]
    chees_update(state, trajectory, 0.0, False, 0.1, True)
    np.testing.assert_array_equal(state[:7], frozen[:7])
    # Before the chain settles, T stays while the position is tracked.
    trajectory[4] = [0.5, 0.0]
    chees_update(state, trajectory, 1.0, True, 0.1, False)
    np.testing.assert_array_equal(state[:3], frozen[:3])
    assert state[8] == frozen[8] + 0.5


def test_time_stays_between_the_step_and_the_cap():
    state = chees_state(2.0, 1, max_path_length=3.0)
    trajectory = np.zeros((6, 1))
    trajectory[3, 0] = trajectory[4, 0] = 1.0
    trajectory[5, 0] = 1.0
    for _ in range(200):
        chees_update(state, trajectory, 1.0, False, 0.1, True)
        state[8:] = 0.0  # a and a' as above at every step: ĝ > 0 throughout
    assert chees_path_length(state, False) == pytest.approx(3.0)
    trajectory[4, 0] = -1.0
    for _ in range(400):
        chees_update(state, trajectory, 1.0, False, 0.1, True)
        state[8:] = 0.0
    assert chees_path_length(state, False) == pytest.approx(0.1, True)
    chees_restart(state)
    assert chees_path_length(state, True) == chees_path_length(state, False)


def test_continuing_with_the_frozen_time_gives_the_same_draws():
    kernel = _kernel(1.0)
    rng = np.random.default_rng(3)
    whole = run_kernel(kernel, TARGET.mean, n_draws=60, n_warmup=200, random_state=rng)
    rng = np.random.default_rng(3)
    first = run_kernel(kernel, TARGET.mean, n_draws=30, n_warmup=200, random_state=rng)
    rest = run_kernel(kernel, first.draws[-1], n_draws=30, n_warmup=0,
                      step_size=first.step_size, path_length=first.path_length,
                      random_state=rng)
    np.testing.assert_array_equal(np.vstack([first.draws, rest.draws]), whole.draws)
    assert rest.path_length == first.path_length == whole.path_length


def test_a_move_takes_the_gradients_the_plan_counts():
    """``expected_gradients`` is the mean number of gradients a Hamiltonian move takes (one per
    leapfrog step, ``⌈u T / ε⌉`` of them): counted over moves of the proposal itself, within
    four standard errors of the mean at each step size; the count at a neighbouring step size
    (negative control) lies outside them. Langevin takes one, a random walk none."""
    from types import SimpleNamespace

    from sksubsample.algorithms.mh import HAMILTONIAN, expected_gradients

    d, moves = 3, 3000
    rng = np.random.default_rng(0)
    state = SimpleNamespace(theta=np.zeros(d), grad=np.zeros(d))
    chol = np.eye(d)
    for step_size, neighbour in ((0.8, 0.7), (0.5, 0.6), (0.3, 0.35)):
        counts = []
        for _ in range(moves):
            calls = []
            HAMILTONIAN.propose(rng, state, step_size, chol,
                                lambda at, calls=calls: calls.append(1) or -at)
            counts.append(len(calls))
        counts = np.asarray(counts, dtype=float)
        se = counts.std() / math.sqrt(moves)
        expected = expected_gradients("hamiltonian", step_size)
        assert abs(counts.mean() - expected) <= 4 * se, (step_size, counts.mean(), expected)
        assert abs(counts.mean() - expected_gradients("hamiltonian", neighbour)) > 4 * se
    assert expected_gradients("langevin") == 1.0 and expected_gradients("random-walk") == 0.0
