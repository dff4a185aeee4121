"""Uncertainty bounds for racing on a finite reward population.

All bounds are one-sided: with probability at least ``1 - delta`` the running mean of ``n``
rewards drawn *without replacement* from a population of ``N`` does not exceed the population
mean by more than the bound. They are the ``G`` functions of Alg. 1 in Chen & Ghahramani (2016).

References
----------
.. [1] Y. Chen and Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
   ICML 2016. §3.3.1 (Eq. 6-7), §3.3.2 (Eq. 8-9, Cor. 4), App. B (Table 1), App. C.3 (Eq. 27).
.. [2] R. Bardenet and O.-A. Maillard. Concentration inequalities for sampling without
   replacement. Bernoulli, 2015 (the empirical Bernstein-Serfling bound).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, special

from ..._utils import as_float_array, check_int, check_open_unit_interval
from .._numba import njit

__all__ = [
    "b_ebs",
    "b_ebs_scalar",
    "b_normal",
    "b_normal_union",
    "doubling_schedule",
    "g_normal",
    "g_normal_scalar",
    "normal_crossing_probability",
]

_SQRT_2PI = math.sqrt(2.0 * math.pi)

#: kappa of the empirical Bernstein-Serfling bound, Eq. 6.
EBS_KAPPA = 7.0 / 3.0 + 3.0 / math.sqrt(2.0)


def doubling_schedule(first_batch: int, n_population: int) -> np.ndarray:
    """Cumulative sample sizes ``T^(t)`` of the doubling schedule of Alg. 1.

    ``T^(1) = first_batch``, ``T^(t) = min(2 T^(t-1), N)``; the last entry is exactly ``N``, so
    the schedule has ``t* = ceil(log2(N / first_batch)) + 1`` entries (§3.3).

    Examples
    --------
    >>> doubling_schedule(50, 1000).tolist()
    [50, 100, 200, 400, 800, 1000]
    """
    return np.asarray(_doubling(first_batch, n_population), dtype=np.int64)


def _doubling(first, end):
    """``[first, min(2 first, end), ...]`` up to and including ``end`` (ints or fractions)."""
    sizes = [first]
    while sizes[-1] < end:
        sizes.append(min(2 * sizes[-1], end))
    return sizes


def _standardised_walk_correlations(first_fraction: float) -> np.ndarray:
    """Lag-one correlations of the standardised running means of Cor. 4.

    With ``pi_t = T^(t)/N`` the marginal variance of the running mean is proportional to
    ``(1 - pi_t)/pi_t`` (Remark 5, up to the common factor ``N/(N-1)``); nested samples give
    ``cov(mean_s, mean_t) = var(mean_t)`` for ``s < t``, hence
    ``corr(z_{t-1}, z_t) = sd_t / sd_{t-1}`` and the standardised means ``z_t`` form a Gaussian
    AR(1) chain. Only the ``t* - 1`` rounds before ``T = N`` matter (``G = 0`` at ``T = N``).
    """
    fractions = np.asarray(_doubling(first_fraction, 1.0)[:-1])  # the rounds with T < N
    scale = np.sqrt((1.0 - fractions) / fractions)
    return scale[1:] / scale[:-1]


def _crossing_probability_ar1(bound: float, correlations: np.ndarray, n_grid: int = 401) -> float:
    """``P(exists t: z_t > bound)`` for a standard Gaussian AR(1) chain, by quadrature.

    The density of ``z_t`` restricted to the no-crossing event is propagated on a Simpson grid
    over ``[L, bound]``; the crossing probability is accumulated as a sum of first-passage
    terms ``int f_{t-1}(x) P(z_t > bound | x) dx``, so no ``1 - survival`` cancellation limits
    the accuracy at small ``delta``. The integrands are smooth on the grid (the truncation
    sits at its end point), so Simpson's rule with 401 nodes is accurate to ~1e-8 relative.
    """
    lower = min(bound - 12.0, -9.0)
    x = np.linspace(lower, bound, n_grid)
    h = x[1] - x[0]
    weights = np.full(n_grid, 2.0)
    weights[1::2] = 4.0
    weights[0] = weights[-1] = 1.0
    weights *= h / 3.0
    crossing = special.ndtr(-bound)
    density = np.exp(-0.5 * x * x) / _SQRT_2PI
    for rho in correlations:
        s = math.sqrt(1.0 - rho * rho)
        mass = density * weights
        crossing += mass @ special.ndtr((rho * x - bound) / s)
        z = (x[:, None] - rho * x[None, :]) / s
        density = (np.exp(-0.5 * z * z) @ mass) / (s * _SQRT_2PI)
    return float(crossing)


def normal_crossing_probability(bound: float, first_fraction: float) -> float:
    """``E(B)`` of §3.3.2: the probability that the Gaussian random walk of Cor. 4 crosses ``B``.

    Parameters
    ----------
    bound : float
        The constant ``B``; each round's standardised mean is compared with it.
    first_fraction : float
        ``pi_T(1) = m^(1) / N`` of the doubling schedule.

    Returns
    -------
    float
        ``P(exists t < t*: z_t > B)``.
    """
    correlations = _standardised_walk_correlations(first_fraction)
    return _crossing_probability_ar1(float(bound), correlations)


@lru_cache(maxsize=4096)
def _b_normal_cached(delta: float, first_fraction: float) -> float:
    if first_fraction >= 1.0:
        return 0.0  # the first batch is the whole population: every mean is exact
    correlations = _standardised_walk_correlations(first_fraction)

    def excess(b):
        return _crossing_probability_ar1(b, correlations) - delta

    # The union bound (Eq. 27) over the t* - 1 = len(correlations) + 1 rounds is an upper
    # bracket and the single-round quantile a lower one.
    hi = b_normal_union(delta, len(correlations) + 2) + 1e-9
    lo = float(-special.ndtri(delta)) - 1e-9  # the single-round quantile
    if excess(lo) <= 0.0:
        return float(lo)
    return float(optimize.brentq(excess, lo, hi, xtol=1e-7, rtol=1e-10))


def b_normal(delta: float, first_fraction: float) -> float:
    """``B_Normal(delta, pi_T(1)) = E^-1(delta)`` for the doubling schedule (§3.3.2, App. B).

    Solves ``E(B) = delta`` where ``E(B)`` is the probability that the standardised running
    means of sampling without replacement, approximated by the Gaussian random walk of
    Cor. 4 (Eq. 8), exceed ``B`` in any round before the last. The walk is computed exactly
    up to quadrature error (see :func:`normal_crossing_probability`); results are cached.

    Parameters
    ----------
    delta : float in (0, 1)
        Error probability of one (one-sided) race comparison.
    first_fraction : float in (0, 1]
        ``pi_T(1) = m^(1) / N``, the first minibatch as a fraction of the population.

    Returns
    -------
    float
        ``B_Normal``; ``0.0`` when ``first_fraction == 1`` (nothing is left to race).

    References
    ----------
    Chen & Ghahramani (2016), Eq. 8-9, Cor. 4, App. B Table 1.

    Examples
    --------
    >>> round(b_normal(0.05, 1e-3), 2)  # Table 1: 2.46819
    2.47
    """
    delta = check_open_unit_interval(delta, "delta")
    first_fraction = float(as_float_array(first_fraction, "first_fraction"))
    if not 0.0 < first_fraction <= 1.0:
        raise ValueError(f"first_fraction must lie in (0, 1], got {first_fraction!r}")
    return _b_normal_cached(delta, first_fraction)


def b_normal_union(delta, n_rounds):
    """The simpler bound of Eq. 27: ``Phi^-1(1 - delta / (t* - 1))``, a union bound over rounds.

    Parameters
    ----------
    delta : float in (0, 1), or an array of them
        The error allowed to the comparison.
    n_rounds : int >= 1, or an array of them
        ``t*``, the number of rounds including the final exact one (with ``t* = 1`` every
        mean is exact after the first round: the bound is 0).

    Returns
    -------
    float, or an ndarray of the broadcast shape of ``delta`` and ``n_rounds``

    Examples
    --------
    >>> round(b_normal_union(0.05, 2), 4)  # one round to union over: the 95% quantile
    1.6449
    >>> b_normal_union(0.05, np.array([1, 2, 3])).round(4).tolist()
    [0.0, 1.6449, 1.96]
    """
    if np.ndim(delta) or np.ndim(n_rounds):
        delta = as_float_array(delta, "delta")
        n_rounds = as_float_array(n_rounds, "n_rounds")
        if np.any(n_rounds != np.round(n_rounds)):
            raise ValueError(f"n_rounds must hold whole numbers, got {n_rounds!r}")
        delta, n_rounds = np.broadcast_arrays(delta, n_rounds.astype(np.int64))
        if not (np.all((delta > 0) & (delta < 1)) and np.all(n_rounds >= 1)):
            raise ValueError("b_normal_union needs every delta in (0, 1) and every n_rounds "
                             ">= 1")
        return _union_quantile(delta, n_rounds)
    delta = check_open_unit_interval(delta, "delta")
    n_rounds = check_int(n_rounds, "n_rounds", low=1)
    return _b_normal_union_cached(delta, n_rounds)


def _union_quantile(delta, n_rounds):
    """``-Phi^-1(delta / (t* - 1))``, 0 where ``t* = 1`` (elementwise). ``-ndtri(p)`` is how
    ``scipy.stats.norm.isf`` computes the upper quantile (the same float, bit for bit), without
    the ~0.1 ms of argument handling of the distribution object."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -special.ndtri(delta / (n_rounds - 1))
    return np.where(n_rounds > 1, out, 0.0)


@lru_cache(maxsize=4096)
def _b_normal_union_cached(delta: float, n_rounds: int) -> float:
    # A race computes this once, and a Gibbs sweep runs one race per update with a handful of
    # distinct (delta, t*) pairs, so the cache answers almost every call.
    return float(_union_quantile(np.float64(delta), np.int64(n_rounds)))


@njit(error_model="numpy")
def g_normal_scalar(n, n_population, sigma_hat, b):
    """:func:`g_normal` for one set of scalars: the implementation both share.

    Compiled so that the racing kernels evaluate the same expression as the NumPy interface.
    """
    fpc = 1.0 - (n - 1.0) / (n_population - 1.0) if n_population > 1 else 0.0
    return sigma_hat / math.sqrt(n) * math.sqrt(max(fpc, 0.0)) * b


@njit(error_model="numpy")
def b_ebs_scalar(delta, n, n_population, sigma_hat, reward_range):
    """:func:`b_ebs` for one set of scalars: the implementation both share."""
    if n <= n_population / 2.0:
        rho = 1.0 - (n - 1.0) / n_population
    else:
        rho = (1.0 - n / n_population) * (1.0 + 1.0 / n)
    log_term = math.log(5.0 / delta)
    return sigma_hat * math.sqrt(2.0 * rho * log_term / n) + (
        EBS_KAPPA * reward_range * log_term / n
    )


@njit
def _g_normal_fill(n, n_population, sigma_hat, b, out):
    for i in range(out.size):
        out[i] = g_normal_scalar(n[i], n_population[i], sigma_hat[i], b[i])


@njit
def _b_ebs_fill(delta, n, n_population, sigma_hat, reward_range, out):
    for i in range(out.size):
        out[i] = b_ebs_scalar(delta, n[i], n_population[i], sigma_hat[i], reward_range[i])


def _bound_arguments(n, n_population, sigma_hat, scale, scale_name):
    """The arguments of :func:`g_normal` and :func:`b_ebs` checked (``1 <= n <= N``,
    ``sigma_hat >= 0``, a scale ``B`` or ``C`` >= 0) and broadcast to one shape, as flat
    contiguous float64 arrays, and the shape."""
    n = as_float_array(n, "n")
    n_population = as_float_array(n_population, "n_population")
    sigma_hat = as_float_array(sigma_hat, "sigma_hat")
    scale = as_float_array(scale, scale_name)
    if (n < 1).any() or (n != np.round(n)).any():
        raise ValueError(f"n must be whole numbers >= 1 (rewards drawn), got {n}")
    if (n_population < 1).any() or (n_population != np.round(n_population)).any():
        raise ValueError(f"n_population must be whole numbers >= 1, got {n_population}")
    if (sigma_hat < 0).any():
        raise ValueError(f"sigma_hat must be >= 0, got {sigma_hat}")
    if (scale < 0).any():
        raise ValueError(f"{scale_name} must be >= 0, got {scale}")
    arrays = np.broadcast_arrays(n, n_population, sigma_hat, scale)
    if (arrays[0] > arrays[1]).any():
        raise ValueError("n must be at most n_population (rewards are drawn without "
                         "replacement)")
    return [np.ascontiguousarray(a).ravel() for a in arrays], arrays[0].shape


def g_normal(n, n_population, sigma_hat, b):
    """The Normal uncertainty bound of Eq. 9: ``sigma_hat / sqrt(n) * sqrt(1 - (n-1)/(N-1)) * B``.

    Vectorised over every argument (a float for scalar arguments). It is exactly 0 when
    ``n == N`` (the mean is then exact), as Alg. 1 requires.

    Parameters
    ----------
    n : int or array of int
        Rewards drawn so far, ``1 <= n <= N``.
    n_population : int or array of int
        The population size ``N``.
    sigma_hat : float or array
        Estimated standard deviation of the rewards (or of their pairwise differences).
    b : float or array
        The constant ``B`` (:func:`b_normal`, :func:`b_normal_union`).

    Returns
    -------
    float or ndarray
        ``G`` of the broadcast shape of the arguments.

    Examples
    --------
    >>> float(g_normal(100, 100, 2.0, 3.0))
    0.0
    """
    flat, shape = _bound_arguments(n, n_population, sigma_hat, b, "b")
    out = np.empty(shape)
    _g_normal_fill(*flat, out.reshape(-1))
    return out[()]


def b_ebs(delta, n, n_population, sigma_hat, reward_range):
    """Empirical Bernstein-Serfling bound ``B_EBS(delta, n, sigma_hat, C)`` of Eq. 6.

    ``sigma_hat * sqrt(2 rho_n log(5/delta) / n) + kappa C log(5/delta) / n`` with
    ``rho_n = 1 - (n-1)/N`` for ``n <= N/2`` and ``(1 - n/N)(1 + 1/n)`` above; ``sigma_hat`` is
    the biased (1/n) standard deviation estimate. Vectorised over every argument but ``delta``
    (a float for scalar arguments). Note that the second term does not vanish at ``n = N``:
    racing sets ``G = 0`` there itself (Alg. 1).

    Parameters
    ----------
    delta : float in (0, 1)
        The error allowed to the bound.
    n : int or array of int
        Rewards drawn so far, ``1 <= n <= N``.
    n_population : int or array of int
        The population size ``N``.
    sigma_hat : float or array
        The biased (``1/n``) standard deviation of the rewards drawn.
    reward_range : float or array
        The range ``C`` of the rewards.

    Returns
    -------
    float or ndarray
        The bound, of the broadcast shape of the arguments but ``delta``.

    References
    ----------
    Chen & Ghahramani (2016), Eq. 6; Bardenet & Maillard (2015), Thm. 3.
    """
    delta = check_open_unit_interval(delta, "delta")
    flat, shape = _bound_arguments(n, n_population, sigma_hat, reward_range, "reward_range")
    out = np.empty(shape)
    _b_ebs_fill(delta, *flat, out.reshape(-1))
    return out[()]
