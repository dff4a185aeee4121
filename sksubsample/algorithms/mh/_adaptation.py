"""Warm-up adaptation of a chain's step size by dual averaging (Hoffman & Gelman 2014) and of
a Hamiltonian proposal's integration time by ChEES (Hoffman, Radul & Sountsov 2021)."""

from __future__ import annotations

import math

import numpy as np

from ..._utils import check_open_unit_interval, check_positive, check_probability
from .._numba import njit

__all__ = ["DualAveraging", "adaptation_statistic", "chees_path_length", "chees_restart",
           "chees_state", "chees_update", "dual_averaging_restart", "dual_averaging_state",
           "dual_averaging_update", "metric_adapt", "metric_state", "metric_update",
           "restart_steps"]


def dual_averaging_state(initial_step_size, gamma=0.05, t0=10.0, kappa=0.75,
                         max_step_size=math.inf):
    """The state ``[μ, t, H̄, log ε, log ε̄, γ, t0, κ, log ε_max]`` of
    :func:`dual_averaging_update`."""
    log_step = math.log(initial_step_size)
    return np.array([math.log(10.0) + log_step, 0.0, 0.0, log_step, 0.0, gamma, t0, kappa,
                     math.log(max_step_size)])


@njit
def dual_averaging_update(state, acceptance_probability, target):
    """One step of Hoffman & Gelman (2014), Algorithm 5, on the state of
    :func:`dual_averaging_state`: the only implementation of the recursion, for interpreted
    and compiled chains alike."""
    t = state[1] + 1.0
    gamma, t0, kappa = state[5], state[6], state[7]
    weight = 1.0 / (t + t0)
    h_bar = (1.0 - weight) * state[2] + weight * (target - acceptance_probability)
    # Bounded in log space so that a run of certain rejections cannot underflow ε, and above
    # by the proposal's largest useful step.
    log_step = min(max(state[0] - math.sqrt(t) / gamma * h_bar, -700.0), 700.0, state[8])
    decay = t ** (-kappa)
    state[1] = t
    state[2] = h_bar
    state[3] = log_step
    state[4] = decay * log_step + (1.0 - decay) * state[4]


@njit
def dual_averaging_restart(state):
    """Start the recursion afresh from the current ``ε̄`` (``μ = log(10 ε̄)``), keeping γ, t0,
    κ and the largest step."""
    log_step = state[4] if state[1] > 0 else state[3]
    state[0] = math.log(10.0) + log_step
    state[1] = 0.0
    state[2] = 0.0
    state[3] = min(log_step, state[8])
    state[4] = 0.0


@njit
def adaptation_statistic(log_ratio, accepted, barker):
    """``(α, rule)``: what dual averaging averages for one step, and whose target it meets.

    With an estimate ``Δ̂`` of the log acceptance ratio, ``α = min(1, e^{Δ̂})`` with the
    Metropolis target (``rule = 0``), whichever rule decided: Barker's probability
    ``expit(Δ̂)`` saturates at 1/2 for small moves, so it barely tells a good step size from a
    timid one, while the Metropolis probability of the same proposal does (and the optimal
    scales of the two rules are close: Agrawal et al. 2021). Without an estimate (NaN), the
    0/1 decision, with the target of the rule that decided (``rule = 1`` for Barker).
    """
    if log_ratio == log_ratio:
        return math.exp(min(0.0, log_ratio)), 0
    return (1.0 if accepted else 0.0), (1 if barker else 0)


#: Fractions of warm-up after which dual averaging restarts.
_RESTARTS = (0.15, 0.5)
#: The same when warm-up adapts the preconditioner, whose one window runs between the two
#: restarts: 60 % of warm-up for the covariance estimate (the more draws, the less noise in
#: it: a chain started near the posterior's bulk by the Laplace approximation needs no
#: sequence of short windows to find it), the last 25 % for ε and T to adapt to it.
_METRIC_RESTARTS = (0.15, 0.75)
#: Shortest warm-up that restarts (shorter ones adapt in one run).
_MIN_RESTARTING_WARMUP = 50


def restart_steps(n_warmup, metric=False):
    """Warm-up steps before which the step-size adaptation restarts from its current ``ε̄``.

    The first steps of a chain started away from the posterior's bulk see acceptance rates
    unlike those of the bulk, and the averages of dual averaging remember them: a chain can
    end warm-up with a step several times too small. Restarting once the chain has settled
    (after 15 % and 50 % of warm-up, as the windows of Stan's adaptation do) forgets the
    start; the final step size averages the last half of warm-up only. With ``metric`` (the
    preconditioner adapted in warm-up, :func:`metric_adapt`) the second restart comes after
    75 % of warm-up, when the preconditioner changes.
    """
    if n_warmup < _MIN_RESTARTING_WARMUP:
        return np.empty(0, dtype=np.int64)
    fractions = _METRIC_RESTARTS if metric else _RESTARTS
    return np.array([round(f * n_warmup) for f in fractions], dtype=np.int64)


class DualAveraging:
    """Step-size adaptation by dual averaging (Hoffman & Gelman 2014, Algorithm 5, Eq. 6).

    ``H̄_t = (1 - 1/(t + t0)) H̄_{t-1} + (δ - α_t)/(t + t0)``,
    ``log ε_t = μ - √t H̄_t / γ``,
    ``log ε̄_t = t^{-κ} log ε_t + (1 - t^{-κ}) log ε̄_{t-1}``.

    The recursion itself is :func:`dual_averaging_update`, shared with the compiled chains.

    Parameters
    ----------
    initial_step_size : float > 0
        ε0; the iterates shrink toward ``μ = log(10 ε0)`` (larger steps are tried early).
    target_accept : float in (0, 1)
        δ, the average acceptance probability aimed at.
    gamma, t0, kappa : float
        Hoffman & Gelman's defaults.
    max_step_size : float, default inf
        No iterate exceeds it (e.g. the stability limit of a leapfrog integrator).

    Examples
    --------
    >>> adaptation = DualAveraging(1.0, 0.5)
    >>> for _ in range(200):
    ...     adaptation.update(0.9 if adaptation.step_size < 2.0 else 0.1)
    >>> bool(1.0 < adaptation.final_step_size < 3.0)
    True
    """

    def __init__(self, initial_step_size, target_accept, *, gamma=0.05, t0=10.0, kappa=0.75,
                 max_step_size=math.inf):
        self.target_accept = check_open_unit_interval(target_accept, "target_accept")
        kappa = check_positive(kappa, "kappa")
        if kappa > 1.0:  # t^{-κ} must shrink, no faster than 1/t (Hoffman & Gelman, §3.2)
            raise ValueError(f"kappa must lie in (0, 1], got {kappa!r}")
        self.state = dual_averaging_state(
            check_positive(initial_step_size, "initial_step_size"),
            check_positive(gamma, "gamma"), check_positive(t0, "t0"), kappa,
            check_positive(max_step_size, "max_step_size", allow_inf=True))

    @property
    def t(self):
        """Updates so far."""
        return int(self.state[1])

    @property
    def step_size(self):
        """The step size to use at the next warm-up step."""
        return math.exp(self.state[3])

    @property
    def final_step_size(self):
        """``ε̄``: the step size frozen for sampling."""
        return math.exp(self.state[4]) if self.t else self.step_size

    def restart(self):
        """Start afresh from the current ``ε̄`` (:func:`dual_averaging_restart`)."""
        dual_averaging_restart(self.state)

    def update(self, acceptance_probability, target_accept=None):
        """Record the acceptance probability of the step just taken.

        Parameters
        ----------
        acceptance_probability : float in [0, 1]
            ``α_t``, the acceptance statistic of the step just taken.
        target_accept : float in (0, 1) or None, default None
            The δ of this update, e.g. the target of the rule that decided the step; None for
            the ``target_accept`` the adaptation was built with.
        """
        target = (self.target_accept if target_accept is None
                  else check_open_unit_interval(target_accept, "target_accept"))
        rate = check_probability(acceptance_probability, "acceptance_probability")
        dual_averaging_update(self.state, rate, target)


# ----------------------------------------------------------------------------- ChEES
#
# The state of :func:`chees_update` is one float array: a header, then the chain's whitened
# position z and the running mean z̄ of its warm-up positions (d entries each).
_LOG_T, _SECOND_MOMENT, _UPDATES, _LOG_T_BAR, _RATE, _BETA2, _LOG_T_MAX, _N_MEAN = range(8)
_CHEES_HEADER = 8
#: Adam's learning rate and second-moment decay, and no first moment: the settings of
#: Hoffman, Radul & Sountsov (2021), Section 3.2.
CHEES_LEARNING_RATE = 0.025
CHEES_BETA2 = 0.95
#: Exponent of the weights ``t^{-κ}`` of the averaged ``log T̄`` (as dual averaging's ε̄).
_CHEES_KAPPA = 0.75


def chees_state(initial_path_length, dim, max_path_length=math.inf,
                learning_rate=CHEES_LEARNING_RATE, beta2=CHEES_BETA2):
    """The state of :func:`chees_update` for a ``dim``-dimensional chain whose integration
    time starts at ``initial_path_length`` and never exceeds ``max_path_length``."""
    state = np.zeros(_CHEES_HEADER + 2 * int(dim))
    log_t = min(math.log(initial_path_length), math.log(max_path_length))
    state[_LOG_T] = log_t
    state[_LOG_T_BAR] = log_t
    state[_RATE] = learning_rate
    state[_BETA2] = beta2
    state[_LOG_T_MAX] = math.log(max_path_length)
    return state


@njit
def chees_path_length(state, final):
    """The integration time T of the next warm-up step, or (``final``) the averaged ``T̄``
    frozen for sampling."""
    if final and state[_UPDATES] > 0:
        return math.exp(state[_LOG_T_BAR])
    return math.exp(state[_LOG_T])


@njit
def chees_update(state, trajectory, acceptance_probability, accepted, step_size, learn):
    """One Adam step on ``log T`` up the ChEES criterion, then the chain's whitened position.

    ``trajectory`` is the record a Hamiltonian proposal leaves (:func:`~._proposals.
    hamiltonian_propose`, :func:`~._proposals.hamiltonian_log_q_ratio`): the end momentum
    ``p'`` in row 3, the whitened displacement ``Δz = L⁻¹(θ' - θ)`` in row 4 and the
    trajectory's duration ``t = n_steps ε`` (≈ ``u T``) at ``[5, 0]``. With ``a = z - z̄`` and
    ``a' = a + Δz`` in the whitened coordinates (z̄ the running mean of the chain's warm-up
    positions), the estimate of ``d ChEES / d log T`` is Hoffman, Radul & Sountsov (2021),
    Eq. 5 with the jitter's chain rule ``dθ'/d log T = t p'``:

    ``ĝ = α (|a'|² - |a|²) (a' · p') t``,

    ``α`` the acceptance probability (the rejected half of a move changes nothing, so the
    gradient of ``E[accepted ChEES]``). Adam without momentum (their Section 3.2) moves
    ``log T`` by about ``learning_rate`` per step whatever the gradient's scale, which varies
    over orders of magnitude from a Gaussian to a heavy-tailed posterior. T stays in
    ``[ε, T_max]``: a trajectory of at least one leapfrog step, and bounded work per proposal.
    ``log T̄`` averages the iterates with weights ``t^{-0.75}`` as dual averaging's ``ε̄``.
    Without ``learn``, only the position and its running mean move (T stays). The only
    implementation of the recursion, for interpreted and compiled chains alike.
    """
    d = (state.size - _CHEES_HEADER) // 2
    z = state[_CHEES_HEADER:_CHEES_HEADER + d]
    z_bar = state[_CHEES_HEADER + d:]
    momentum, displacement = trajectory[3], trajectory[4]
    duration = trajectory[5, 0]
    before, after, along = 0.0, 0.0, 0.0
    for j in range(d):
        a = z[j] - z_bar[j]
        a_new = a + displacement[j]
        before += a * a
        after += a_new * a_new
        along += a_new * momentum[j]
    gradient = acceptance_probability * (after - before) * along * duration
    # A proposal rejected for sure (e.g. a diverging trajectory, whose record may be partial)
    # says nothing of T: no update.
    if learn and acceptance_probability > 0.0 and math.isfinite(gradient):
        n = state[_UPDATES] + 1.0
        beta2 = state[_BETA2]
        v = beta2 * state[_SECOND_MOMENT] + (1.0 - beta2) * gradient * gradient
        v_hat = v / (1.0 - beta2 ** n)
        move = state[_RATE] * gradient / (math.sqrt(v_hat) + 1e-300) if v_hat > 0.0 else 0.0
        log_t = min(max(state[_LOG_T] + move, math.log(step_size)), state[_LOG_T_MAX])
        weight = n ** (-_CHEES_KAPPA)
        state[_LOG_T] = log_t
        state[_SECOND_MOMENT] = v
        state[_UPDATES] = n
        state[_LOG_T_BAR] = weight * log_t + (1.0 - weight) * state[_LOG_T_BAR]
    if accepted:
        for j in range(d):
            z[j] += displacement[j]
    k = state[_N_MEAN] + 1.0
    for j in range(d):
        z_bar[j] += (z[j] - z_bar[j]) / k
    state[_N_MEAN] = k


@njit
def chees_restart(state):
    """Forget the first steps of warm-up: Adam's moments and the average restart from the
    averaged ``log T̄`` (as dual averaging restarts from ``ε̄``), and the running mean from the
    current position."""
    d = (state.size - _CHEES_HEADER) // 2
    if state[_UPDATES] > 0:
        state[_LOG_T] = state[_LOG_T_BAR]
    state[_SECOND_MOMENT] = 0.0
    state[_UPDATES] = 0.0
    state[_LOG_T_BAR] = state[_LOG_T]
    state[_N_MEAN] = 1.0
    for j in range(d):
        state[_CHEES_HEADER + d + j] = state[_CHEES_HEADER + j]


# ----------------------------------------------------------------------------- metric
#
# The state of :func:`metric_update` is one float array: a header, the base factor L0 (d × d,
# row-major), the running mean of the whitened warm-up positions w = L0⁻¹θ (d), their sums of
# squared deviations (d × d; only the lower triangle, or only the diagonal, is kept), and
# scratch (a whitened position, d, and a factor, d × d).
_M_DIM, _M_DENSE, _M_PRIOR, _M_COUNT = range(4)
_METRIC_HEADER = 4
#: Pseudo-draws of the identity (the base preconditioner) in the regularised covariance: the
#: weight of the base grows as the window's draws get fewer (Stan shrinks its sample
#: covariance by ``n / (n + 5)`` toward a small multiple of the identity). A dense covariance
#: has d(d+1)/2 entries to estimate, not d: it takes ``max(5, d)``.
METRIC_PRIOR_DRAWS = 5.0
#: The fewest draws from which a window's covariance replaces the preconditioner.
_MIN_METRIC_DRAWS = 20
#: ``kind="auto"`` (:func:`metric_state`) adapts the whole covariance when the root mean
#: square of the logs of the window's whitened variances exceeds this: where the base (the
#: Laplace approximation) already has the posterior's scales, those variances are 1 up to the
#: window's noise, and a dense covariance, d(d+1)/2 entries from a few hundred autocorrelated
#: draws, only adds noise; where it does not, the posterior's correlations are not the base's
#: either. Measured with 500 warm-up steps (a window of 300): 0.18-0.21 on a synthetic
#: 10⁵ × 20 set (Laplace exact; there a dense covariance read 1.2-1.4 times the data per
#: effective draw of the diagonal), 0.51-0.56 on breast cancer (dense and diagonal alike) and
#: 0.55-0.61 on digits 3 vs 8 (dense 0.75 times the diagonal's data per effective draw).
DENSE_ABOVE = 0.35
#: The code of each kind of :func:`metric_state` in the state's header (above 0: the whole
#: covariance is collected).
_METRIC_KINDS = {"diagonal": 0.0, "dense": 1.0, "auto": 2.0}
_AUTO = _METRIC_KINDS["auto"]


def metric_state(base_chol, kind="diagonal", prior_draws=None):
    """The state of :func:`metric_update` and :func:`metric_adapt` around the base
    preconditioner ``M0 = L0 L0ᵀ`` (``base_chol`` = L0, lower triangular); ``kind`` adapts
    the whole covariance of the whitened positions (``"dense"``), its diagonal
    (``"diagonal"``), or either (``"auto"``: the whole covariance where the window shows the
    base to be a poor fit of the posterior's scales, see :data:`DENSE_ABOVE`).
    ``prior_draws``: the pseudo-draws of the base (None: :data:`METRIC_PRIOR_DRAWS`, at least
    d for a dense covariance)."""
    if kind not in _METRIC_KINDS:
        raise ValueError(f"kind must be one of {sorted(_METRIC_KINDS)}, got {kind!r}")
    base = np.ascontiguousarray(base_chol, dtype=np.float64)
    d = base.shape[0]
    if prior_draws is None:
        prior_draws = (max(METRIC_PRIOR_DRAWS, float(d)) if kind == "dense"
                       else METRIC_PRIOR_DRAWS)
    state = np.zeros(_METRIC_HEADER + 3 * d * d + 2 * d)
    state[_M_DIM] = d
    state[_M_DENSE] = _METRIC_KINDS[kind]
    state[_M_PRIOR] = prior_draws
    state[_METRIC_HEADER:_METRIC_HEADER + d * d] = base.ravel()
    return state


@njit
def _poor_base(state, squares, d, n):
    """Whether the window's whitened positions show the base a poor fit of the posterior's
    scales: the root mean square of the logs of their variances (each 1 where the base has
    the posterior's covariance) above :data:`DENSE_ABOVE`."""
    total = 0.0
    for j in range(d):
        variance = state[squares + j * d + j] / (n - 1.0)
        if not variance > 0.0:
            return False
        total += math.log(variance) ** 2
    return math.sqrt(total / d) > DENSE_ABOVE


@njit(inline="always")
def _metric_offsets(state):
    # (d, base, mean, squares, position, factor): where each part starts.
    d = int(state[_M_DIM])
    base = _METRIC_HEADER
    mean = base + d * d
    squares = mean + d
    position = squares + d * d
    return d, base, mean, squares, position, position + d


@njit
def metric_update(state, theta):
    """Add the position θ to the window: Welford's update of the mean and the sums of squared
    deviations of ``w = L0⁻¹θ``, the position in the base preconditioner's whitened
    coordinates (a forward substitution with L0)."""
    d, base, mean, squares, position, _ = _metric_offsets(state)
    dense = state[_M_DENSE] > 0.0  # "auto" keeps the whole covariance until it chooses
    for j in range(d):
        s = theta[j]
        for k in range(j):
            s -= state[base + j * d + k] * state[position + k]
        state[position + j] = s / state[base + j * d + j]
    n = state[_M_COUNT] + 1.0
    state[_M_COUNT] = n
    # With δ = w - (old mean), the sums grow by δ (w - new mean)ᵀ = δ δᵀ (n - 1) / n.
    for j in range(d):
        delta = state[position + j] - state[mean + j]
        state[mean + j] += delta / n
        state[position + j] = delta
    shrink = (n - 1.0) / n
    for j in range(d):
        scaled = state[position + j] * shrink
        if dense:
            for k in range(j + 1):
                state[squares + j * d + k] += scaled * state[position + k]
        else:
            state[squares + j * d + j] += scaled * state[position + j]


@njit
def metric_adapt(state, chol):
    """End a window: set the preconditioner's factor ``chol`` to ``L0 A``, with ``A Aᵀ`` the
    regularised covariance of the window's whitened positions, and empty the window.

    The covariance is Stan's windowed estimate (Stan Reference Manual, "HMC algorithm
    parameters: adaptation"): the sample covariance ``S`` of the window's positions, shrunk
    as ``(n S + k I) / (n + k)`` (k = ``prior_draws``) toward the identity, which in these
    coordinates is the base preconditioner itself: a window of few draws barely moves it,
    and where the base (e.g. the Laplace approximation) fits the posterior, ``S ≈ I`` and the
    factor stays ``≈ L0``. ``A`` is the Cholesky factor of that matrix (dense) or the square
    root of its diagonal; ``L0 A`` is lower triangular, the form the proposals read, and
    ``(L0 A)(L0 A)ᵀ = L0 (A Aᵀ) L0ᵀ`` is the window's covariance in θ. A window of fewer than
    ``_MIN_METRIC_DRAWS`` positions, or whose matrix is not positive definite, leaves
    ``chol`` as it is. Returns whether ``chol`` changed.
    """
    d, base, mean, squares, _, factor = _metric_offsets(state)
    n = state[_M_COUNT]
    dense = state[_M_DENSE] > 0.0
    prior = state[_M_PRIOR]
    changed = n >= _MIN_METRIC_DRAWS
    if changed and state[_M_DENSE] == _AUTO:
        dense = _poor_base(state, squares, d, n)
        if dense:
            prior = max(prior, float(d))
    if changed:
        # The regularised covariance (lower triangle) into the factor's place.
        for j in range(d):
            for k in range(j + 1):
                value = state[squares + j * d + k] if (dense or k == j) else 0.0
                value = value / (n - 1.0) * n / (n + prior)
                if k == j:
                    value += prior / (n + prior)
                state[factor + j * d + k] = value
        # In place: its Cholesky factor (dense), or the square roots of its diagonal.
        for j in range(d):
            if not changed:
                break
            if not dense:
                state[factor + j * d + j] = math.sqrt(state[factor + j * d + j])
                continue
            for k in range(j + 1):
                s = state[factor + j * d + k]
                for m in range(k):
                    s -= state[factor + j * d + m] * state[factor + k * d + m]
                if k < j:
                    state[factor + j * d + k] = s / state[factor + k * d + k]
                elif s > 0.0 and math.isfinite(s):
                    state[factor + j * d + j] = math.sqrt(s)
                else:
                    changed = False
            if not changed:
                break
    if changed:
        for j in range(d):
            for k in range(j + 1):
                s = 0.0
                for m in range(k, j + 1):
                    if dense or m == k:
                        s += state[base + j * d + m] * state[factor + m * d + k]
                chol[j, k] = s
    state[_M_COUNT] = 0.0
    for j in range(d):
        state[mean + j] = 0.0
    for j in range(d * d):
        state[squares + j] = 0.0
    return changed
