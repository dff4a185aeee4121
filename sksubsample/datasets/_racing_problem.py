"""The synthetic discrete-sampling problem of §5.1 of Chen & Ghahramani (2016)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from .._utils import as_float_array, as_generator, check_int, check_positive

__all__ = ["RacingProblem", "make_racing_problem"]

_DISTRIBUTIONS = ("normal", "uniform", "lognormal")


@dataclass(frozen=True)
class RacingProblem:
    """A discrete distribution written as a product of ``N`` factors per state.

    The parameters are also the attributes of the same names.

    Parameters
    ----------
    log_factors : ndarray of shape (n_arms, n_population)
        ``log f_n(i)``; each row sums to ``log p(i)`` (up to rounding).
    pmf : ndarray of shape (n_arms,)
        The target distribution ``p``.
    reward_range : ndarray of shape (n_arms,)
        ``C_i = max_n log f_n(i) - min_n log f_n(i)`` (the tight range used for Racing-EBS).
    distribution : str
        Law of the raw factor values (``"normal"``, ``"uniform"`` or ``"lognormal"``, see
        :func:`make_racing_problem`).
    noise : float
        Standard deviation ``sigma`` of each state's factor values.
    """

    log_factors: np.ndarray
    pmf: np.ndarray
    reward_range: np.ndarray
    distribution: str
    noise: float

    @property
    def n_arms(self) -> int:
        return self.log_factors.shape[0]

    @property
    def n_population(self) -> int:
        return self.log_factors.shape[1]

    def factors(self, states, idx):
        """``log f_idx(states)``: the callable that ``sample_discrete`` expects.

        Parameters
        ----------
        states : array_like of int of shape (n_states,)
            States ``i`` in ``range(n_arms)``.
        idx : array_like of int of shape (n_idx,)
            Factor indices ``n`` in ``range(n_population)``.

        Returns
        -------
        ndarray of shape (n_states, n_idx)
            ``log f_n(i)`` for every pair of a state and a factor index.
        """
        # Broadcast indices gather the block directly; np.ix_ costs a few microseconds more
        # per call, which small race rounds feel.
        return self.log_factors[np.asarray(states)[:, None], np.asarray(idx)]


def default_pmf(n_arms: int) -> np.ndarray:
    """The fixed target ``p(X)``: log-probabilities linear in the state, from 0 down to -3.

    Fig. 1(a) of the paper shows a fixed ``p(X)`` whose values are not given in the text;
    this choice spreads the mass over all states (the most probable state is ``e^3 ≈ 20``
    times more likely than the least), so that every state is sampled in the experiments.
    """
    return special.softmax(np.linspace(0.0, -3.0, n_arms))


def make_racing_problem(
    n_arms: int = 10,
    n_population: int = 100_000,
    distribution: str = "normal",
    noise: float = 1e-4,
    random_state=None,
    *,
    pmf=None,
) -> RacingProblem:
    """Build the §5.1 problem: factor values with a given law, shifted to a fixed ``p(X)``.

    For each state ``i``, ``N`` raw values are drawn from ``N(0, 1)``, ``Uniform[0, 1]`` or
    ``LogNormal(0, 2)``, standardised to mean 0 and standard deviation ``noise``, and shifted by
    ``log p(i) / N`` so that ``sum_n log f_n(i) = log p(i)``. The ``noise`` controls the
    difficulty: racing must resolve mean gaps of order ``1/N`` against reward noise ``sigma``.

    Parameters
    ----------
    n_arms : int, default 10
        Number of states ``D``.
    n_population : int, default 100000
        Number of factors ``N``.
    distribution : {"normal", "uniform", "lognormal"}, default "normal"
        Law of the raw factor values (LogNormal(0, 2) has excess kurtosis ≈ 9e6 before
        standardisation and a very heavy right tail: the hard case for every bound).
    noise : float, default 1e-4
        Standard deviation ``sigma`` of the factor values of each state.
    random_state : None, int or numpy.random.Generator
    pmf : array of shape (n_arms,), optional
        Target distribution; :func:`default_pmf` by default.

    Returns
    -------
    RacingProblem

    References
    ----------
    Chen & Ghahramani (2016), §5.1, Fig. 1.

    Examples
    --------
    >>> prob = make_racing_problem(4, 1000, "uniform", 1e-3, random_state=0)
    >>> bool(np.allclose(special.softmax(prob.log_factors.sum(axis=1)), prob.pmf))
    True
    """
    n_arms = check_int(n_arms, "n_arms", low=1)
    n_population = check_int(n_population, "n_population", low=2)
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}")
    noise = check_positive(noise, "noise")
    rng = as_generator(random_state)
    pmf = default_pmf(n_arms) if pmf is None else as_float_array(pmf, "pmf")
    if pmf.shape != (n_arms,) or np.any(pmf <= 0):
        raise ValueError(f"pmf must be positive with shape ({n_arms},)")
    pmf = pmf / pmf.sum()
    size = (n_arms, n_population)
    if distribution == "normal":
        raw = rng.standard_normal(size)
    elif distribution == "uniform":
        raw = rng.uniform(size=size)
    else:
        raw = rng.lognormal(0.0, 2.0, size=size)
    raw -= raw.mean(axis=1, keepdims=True)
    raw *= noise / raw.std(axis=1, keepdims=True)
    raw -= raw.mean(axis=1, keepdims=True)  # re-centre after scaling, for exact row sums
    log_factors = raw + np.log(pmf)[:, None] / n_population
    reward_range = log_factors.max(axis=1) - log_factors.min(axis=1)
    return RacingProblem(log_factors, pmf, reward_range, distribution, noise)
