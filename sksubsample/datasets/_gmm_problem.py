"""The tempered two-dimensional Gaussian mixture of §6.1 of Seita et al. (2017), Eq. 22."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from .._utils import as_float_array, as_generator, check_int, check_positive, check_vector

__all__ = ["BinnedPosterior", "GaussianMixtureProblem", "make_gaussian_mixture_problem"]

# Prior variances of θ1 and θ2 and the variance of each mixture component (Eq. 22).
SIGMA1_SQ, SIGMA2_SQ, SIGMAX_SQ = 10.0, 1.0, 2.0
# log of the mixture weight 1/2 times the normal density's constant.
_LOG_NORM = math.log(0.5) - 0.5 * math.log(2 * math.pi * SIGMAX_SQ)
# The window of Table 2 and Fig. 2 of the paper.
THETA1_RANGE, THETA2_RANGE = (-1.5, 2.5), (-3.0, 3.0)


@dataclass(frozen=True)
class BinnedPosterior:
    """Posterior probabilities of a rectangular grid of bins, and the scores of draws on it.

    The parameters are also the attributes of the same names.

    Parameters
    ----------
    edges1, edges2 : ndarray
        Bin edges along ``θ1`` and ``θ2``.
    probs : ndarray of shape (len(edges1) - 1, len(edges2) - 1)
        ``P_j``: posterior probability of each bin (summing to 1 over the window).
    centres1, centres2 : ndarray
        The sub-grid on which the log density was evaluated.
    log_density : ndarray of shape (len(centres1), len(centres2))
        Unnormalised tempered log posterior on that sub-grid (for contour plots).
    """

    edges1: np.ndarray
    edges2: np.ndarray
    probs: np.ndarray
    centres1: np.ndarray
    centres2: np.ndarray
    log_density: np.ndarray

    def score(self, draws):
        """Eq. 23 Poisson log-likelihood and Pearson chi-square of binned draws.

        Draws outside the window form one more cell of expected count 0 (its rate is floored
        at 1e-300, so each such draw costs the Poisson score about 690). For the chi-square,
        cells with expected count below 5 are pooled into one.

        Parameters
        ----------
        draws : array of shape (n_draws, 2)

        Returns
        -------
        poisson : float
            ``sum_j [c_j log(n P_j) - n P_j - log c_j!]`` (Seita et al. Eq. 23).
        chi_square : float
        dof : int
            Number of pooled cells minus one.
        p_value : float
            ``P(χ²_dof >= chi_square)``, calibrated for independent draws only. Autocorrelated
            MCMC draws inflate the statistic by about the integrated autocorrelation time, so
            a small p-value for a chain does not by itself show bias: compare it with the
            statistic of an exact sampler run for as many draws.
        """
        draws = as_float_array(draws, "draws", finite=False)
        if draws.ndim != 2 or draws.shape[1] != 2 or draws.shape[0] == 0:
            raise ValueError(f"draws must have shape (n_draws, 2), got {draws.shape}")
        n = draws.shape[0]
        counts, _, _ = np.histogram2d(draws[:, 0], draws[:, 1], bins=[self.edges1, self.edges2])
        observed = np.append(counts.ravel(), n - counts.sum())
        expected = n * np.append(self.probs.ravel(), 0.0)
        rate = np.maximum(expected, 1e-300)
        poisson = float(np.sum(observed * np.log(rate) - rate - special.gammaln(observed + 1)))
        big = expected >= 5
        obs = np.append(observed[big], observed[~big].sum())
        exp = np.append(expected[big], expected[~big].sum())
        chi2 = float(np.sum((obs - exp) ** 2 / np.maximum(exp, 1e-12)))
        dof = int(obs.size - 1)
        return poisson, chi2, dof, float(stats.chi2.sf(chi2, dof))


class GaussianMixtureProblem:
    """Data of Eq. 22 and the per-datum log-likelihood, derivatives and range bound.

    ``x_i ~ ½ N(θ1, 2) + ½ N(θ1 + θ2, 2)`` with prior ``θ ~ N(0, diag(10, 1))``. The object
    is a target for :func:`sksubsample.algorithms.sample_mh`: it has ``n_data``,
    ``log_prior``, ``loglik_terms``, their gradients and Hessians (for Taylor control
    variates and gradient proposals) and ``loglik_ratio_bound`` (the range bound
    ``C_{θ,θ'}`` that MHSubLhd needs).

    Parameters
    ----------
    x : array_like of shape (n_data,)
        The data ``x_i``.
    theta_true : array_like of shape (2,)
        The parameter the data were drawn from.

    Attributes
    ----------
    x : ndarray of shape (n_data,)
    n_data : int
    theta_true : ndarray of shape (2,)
        The parameter the data were drawn from.
    """

    def __init__(self, x, theta_true):
        self.x = as_float_array(x, "x")
        if self.x.ndim != 1 or self.x.size < 2:
            raise ValueError(f"x must be a 1-d array of at least 2 observations, got shape "
                             f"{self.x.shape}")
        self.n_data = self.x.size
        self.theta_true = check_vector(theta_true, "theta_true", 2)
        self.xmin, self.xmax = float(self.x.min()), float(self.x.max())

    @staticmethod
    def _components(x, th):
        a = -((x - th[0]) ** 2) / (2 * SIGMAX_SQ)
        b = -((x - th[0] - th[1]) ** 2) / (2 * SIGMAX_SQ)
        return a, b

    def log_prior(self, th):
        return -0.5 * (th[0] ** 2 / SIGMA1_SQ + th[1] ** 2 / SIGMA2_SQ)

    def grad_log_prior(self, th):
        return -np.array([th[0] / SIGMA1_SQ, th[1] / SIGMA2_SQ])

    def hess_log_prior(self, th):
        return -np.diag([1 / SIGMA1_SQ, 1 / SIGMA2_SQ])

    def loglik_values(self, x, th):
        """``log p(x | θ)`` for arbitrary points ``x``.

        Parameters
        ----------
        x : float or array_like
            The points.
        th : array_like of shape (2,)
            The parameter θ.

        Returns
        -------
        ndarray or float
            ``log p(x | θ)`` at every point, of the shape of ``x``.
        """
        a, b = self._components(np.asarray(x, dtype=float), th)
        return _LOG_NORM + np.logaddexp(a, b)

    def loglik_terms(self, th, idx):
        return self.loglik_values(self.x[idx], th)

    def _parts(self, th, idx):
        x = self.x[idx]
        a, b = self._components(x, th)
        w1 = special.expit(a - b)  # responsibility of the first component
        d1 = (x - th[0]) / SIGMAX_SQ
        d2 = (x - th[0] - th[1]) / SIGMAX_SQ
        return w1, 1.0 - w1, d1, d2

    def grad_terms(self, th, idx):
        w1, w2, d1, d2 = self._parts(th, idx)
        return np.stack([w1 * d1 + w2 * d2, w2 * d2], axis=1)

    def hess_terms(self, th, idx):
        # For ℓ = logsumexp_k c_k: H = sum_k w_k (∇²c_k + ∇c_k ∇c_kᵀ) - ∇ℓ ∇ℓᵀ, with
        # ∇c_1 = (d1, 0), ∇c_2 = (d2, d2) and ∇²c_k = -∇m_k ∇m_kᵀ / σx² (m_k the component mean).
        w1, w2, d1, d2 = self._parts(th, idx)
        g = np.stack([w1 * d1 + w2 * d2, w2 * d2], axis=1)
        inv = 1.0 / SIGMAX_SQ
        h = np.empty((w1.size, 2, 2))
        h[:, 0, 0] = w1 * (d1 * d1 - inv) + w2 * (d2 * d2 - inv)
        h[:, 0, 1] = h[:, 1, 0] = w2 * (d2 * d2 - inv)
        h[:, 1, 1] = w2 * (d2 * d2 - inv)
        return h - g[:, :, None] * g[:, None, :]

    def loglik_ratio_bound(self, th, th_new):
        """``max_i |log p(x_i | θ') - log p(x_i | θ)|`` bounded from above without the data.

        ``|logaddexp(a', b') - logaddexp(a, b)| <= max(|a' - a|, |b' - b|)``, and each
        component's difference is affine in ``x``, so its maximum over the data is at
        ``min x`` or ``max x``.

        Parameters
        ----------
        th : array_like of shape (2,)
            The current state θ.
        th_new : array_like of shape (2,)
            The proposal θ'.

        Returns
        -------
        float
        """

        def component_bound(m, m_new):
            return max(abs((m - m_new) * (2 * x - m - m_new)) for x in (self.xmin, self.xmax)) / (
                2 * SIGMAX_SQ)

        return max(component_bound(th[0], th_new[0]),
                   component_bound(th[0] + th[1], th_new[0] + th_new[1]))

    def binned_posterior(self, temperature=1.0, bin_width=0.1, sub=4, x_bin=1e-3):
        """Probabilities ``P_j`` of the tempered posterior on bins over [-1.5, 2.5] x [-3, 3].

        The posterior ``p0(θ) Π p(x_i | θ)^{1/T}`` is evaluated on a ``sub x sub`` midpoint
        grid inside each bin (Seita et al. Table 2). The data enter through a histogram of
        ``x`` with bin width ``x_bin``: moving a point by at most ``x_bin / 2`` changes its
        log-likelihood by at most ``|∂ℓ/∂x| x_bin / 2``, so ``sum_i ℓ_i / T`` is exact to
        about ``N x_bin · E|∂ℓ/∂x| / (2T)`` (below 1e-5 at the paper's ``N/T = 100``, and
        smaller still by cancellation of the signed errors).

        Parameters
        ----------
        temperature : float > 0, default 1.0
        bin_width : float > 0, default 0.1
            Must divide both window lengths (4 and 6) into whole bins.
        sub : int >= 1, default 4
        x_bin : float > 0, default 1e-3

        Returns
        -------
        BinnedPosterior
        """
        temperature = check_positive(temperature, "temperature")
        bin_width = check_positive(bin_width, "bin_width")
        sub = check_int(sub, "sub", low=1)
        x_bin = check_positive(x_bin, "x_bin")
        n1 = (THETA1_RANGE[1] - THETA1_RANGE[0]) / bin_width
        n2 = (THETA2_RANGE[1] - THETA2_RANGE[0]) / bin_width
        if abs(n1 - round(n1)) > 1e-9 or abs(n2 - round(n2)) > 1e-9:
            raise ValueError(f"bin_width must divide 4 and 6 into whole bins, got {bin_width}")
        n1, n2 = round(n1), round(n2)
        edges1 = THETA1_RANGE[0] + bin_width * np.arange(n1 + 1)
        edges2 = THETA2_RANGE[0] + bin_width * np.arange(n2 + 1)
        h = bin_width / sub
        c1 = THETA1_RANGE[0] + h * (np.arange(n1 * sub) + 0.5)
        c2 = THETA2_RANGE[0] + h * (np.arange(n2 * sub) + 0.5)
        counts, xedges = np.histogram(self.x, bins=np.arange(self.xmin, self.xmax + x_bin, x_bin))
        xc = 0.5 * (xedges[:-1] + xedges[1:])
        keep = counts > 0
        xc, counts = xc[keep], counts[keep].astype(float)
        logp = np.empty((c1.size, c2.size))
        for i, t1 in enumerate(c1):
            a = -((xc[None, :] - t1) ** 2) / (2 * SIGMAX_SQ)
            b = -((xc[None, :] - t1 - c2[:, None]) ** 2) / (2 * SIGMAX_SQ)
            loglik = (_LOG_NORM + np.logaddexp(a, b)) @ counts
            logp[i] = loglik / temperature - 0.5 * (t1**2 / SIGMA1_SQ + c2**2 / SIGMA2_SQ)
        p = np.exp(logp - logp.max())
        p /= p.sum()
        probs = p.reshape(n1, sub, n2, sub).sum(axis=(1, 3))
        return BinnedPosterior(edges1, edges2, probs, c1, c2, logp)


def make_gaussian_mixture_problem(n_data=1_000_000, theta=(0.0, 1.0), random_state=None):
    """Draw the data of the Gaussian-mixture experiment of Seita et al. (2017), §6.1.

    ``x_i ~ ½ N(θ1, 2) + ½ N(θ1 + θ2, 2)`` (variance 2) with the true ``θ = (0, 1)`` and prior
    ``θ ~ N(0, diag(10, 1))`` (Eq. 22, from Welling & Teh 2011). The paper takes
    ``N = 10⁶`` and tempers the likelihood by ``T = 10⁴`` (pass ``temperature`` to the
    sampler and to :meth:`GaussianMixtureProblem.binned_posterior`), which gives the bimodal
    posterior of 100 points: modes near ``(0, 1)`` and ``(1, -1)``.

    Parameters
    ----------
    n_data : int >= 2, default 1000000
    theta : array_like of shape (2,), default (0.0, 1.0)
        The parameter the data are drawn from.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    GaussianMixtureProblem

    References
    ----------
    Seita, Pan, Chen & Canny (2017), An Efficient Minibatch Acceptance Test for
    Metropolis-Hastings, §6.1, Eq. 22-23, Table 2.

    Examples
    --------
    >>> prob = make_gaussian_mixture_problem(10_000, random_state=0)
    >>> prob.n_data, prob.loglik_terms(prob.theta_true, np.arange(3)).shape
    (10000, (3,))
    >>> binned = prob.binned_posterior(temperature=100.0, bin_width=0.5)
    >>> binned.probs.shape, bool(np.isclose(binned.probs.sum(), 1.0))
    ((8, 12), True)
    """
    n_data = check_int(n_data, "n_data", low=2)
    theta = as_float_array(theta, "theta", finite=False)
    if theta.shape != (2,) or not np.all(np.isfinite(theta)):
        raise ValueError(f"theta must be two finite numbers, got {theta!r}")
    rng = as_generator(random_state)
    first = rng.random(n_data) < 0.5
    means = np.where(first, theta[0], theta[0] + theta[1])
    x = means + rng.normal(0.0, math.sqrt(SIGMAX_SQ), n_data)
    return GaussianMixtureProblem(x, theta)
