"""The MAP and Laplace approximation of one ARCH order's posterior (softplus coordinates).

They give each order its Carlin–Chib pseudo-prior (Chen & Ghahramani 2016, Appendix C.2), the
reference point of its control variates (§3.4) and a Laplace estimate of its evidence.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import linalg, optimize

__all__ = ["LaplaceFit", "laplace_fit"]

_LOG_2PI = math.log(2.0 * math.pi)


class LaplaceFit(NamedTuple):
    """MAP and Laplace approximation of one order's posterior in softplus coordinates.

    Attributes
    ----------
    mean : ndarray of shape (d,)
        The MAP ``x̂``.
    cov : ndarray of shape (d, d)
        ``(-∇² log p(x̂ | r))⁻¹``.
    chol : ndarray of shape (d, d)
        Lower Cholesky factor of ``cov``.
    log_evidence : float
        Laplace estimate ``log p(r, x̂) + d/2 log 2π + ½ log |cov|`` of ``log p(r | q)``.
    n_iter : int
        Iterations of the optimiser.
    """

    mean: np.ndarray
    cov: np.ndarray
    chol: np.ndarray
    log_evidence: float
    n_iter: int


def laplace_fit(target, x0):
    """MAP of ``target``'s posterior by a trust-region Newton method, and its Laplace Gaussian.

    Parameters
    ----------
    target : ARCHTarget
    x0 : ndarray of shape (d,)
        Starting point.

    Returns
    -------
    LaplaceFit

    Raises
    ------
    RuntimeError
        When the optimiser fails or the Hessian at the optimum is not negative definite.
    """
    def sums(x):
        loglik, grad, hess = target.derivative_sums(x)
        return (-(loglik + target.log_prior(x)), -(grad + target.grad_log_prior(x)),
                -(hess + target.hess_log_prior(x)))

    res = optimize.minimize(lambda x: sums(x)[0], x0, jac=lambda x: sums(x)[1],
                            hess=lambda x: sums(x)[2], method="trust-exact",
                            options={"gtol": 1e-8, "maxiter": 500})
    f, _, h = sums(res.x)
    if not (np.isfinite(f) and np.all(np.isfinite(h))):
        raise RuntimeError(f"MAP search of ARCH({target.order}) failed: {res.message}")
    try:
        chol_prec = linalg.cholesky(0.5 * (h + h.T), lower=True)
    except linalg.LinAlgError as exc:
        raise RuntimeError(
            f"the posterior of ARCH({target.order}) has no negative definite Hessian at the "
            f"optimiser's end point ({res.message}); the Laplace pseudo-prior is undefined"
        ) from exc
    inv = linalg.solve_triangular(chol_prec, np.eye(res.x.size), lower=True)
    cov = inv.T @ inv
    cov = 0.5 * (cov + cov.T)
    chol = linalg.cholesky(cov, lower=True)
    d = res.x.size
    log_ev = float(-f + 0.5 * d * _LOG_2PI + np.sum(np.log(np.diag(chol))))
    return LaplaceFit(res.x, cov, chol, log_ev, int(res.nit))
