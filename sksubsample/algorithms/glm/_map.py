"""The MAP of a GLM's posterior by Newton's method: on a subsample in memory, then over every row.

One routine, :func:`newton`, serves both: it steps from a point by ``s = P⁻¹ g`` (``P`` the
Laplace precision, ``g`` the gradient of the tempered log posterior, both from one call of
``sums_at``, a pass over the rows at that point), halving a step that lowered the posterior after
a step of more than one posterior standard deviation (outside Newton's quadratic region), and
stops as its ``stop`` rule says:

* on a subsample in memory (cheap passes), when the step is below ``tol`` standard deviations
  or rounds to nothing (:func:`subsample_map`);
* over all rows (a pass each), at the first point within ``center_tol`` standard deviations of
  the MAP at which the MAP itself is known to ``tol``: Newton's method converges quadratically,
  ``δ' ≈ r δ²`` for the Newton decrement ``δ = sqrt(sᵀ P s)`` (the step's size in posterior
  standard deviations), and the rate ``r`` observed over the last full step predicts the error
  of the point plus its step (``r δ²``). That point is the expansion point of the control
  variates (at half a standard deviation from the MAP it adds at most a quarter to
  ``E‖θ - θ̂‖²``, which is ``d`` under the posterior), and the pass that would only polish it
  is saved.

Every point is rounded to single precision, so that the passes, hence the proxies and the draws,
do not depend on the last bits of the arithmetic that led there.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
from scipy import linalg

__all__ = ["NewtonResult", "laplace_precision", "newton", "single"]


def laplace_precision(hess, prior_precision, factor=1.0):
    """The Laplace precision ``-factor H + prior_precision I`` of a log-likelihood whose
    Hessian is ``hess`` (``factor``: the likelihood's scale over its temperature), made exactly
    symmetric.

    Parameters
    ----------
    hess : ndarray of shape (d, d)
    prior_precision : float
    factor : float, default 1.0

    Returns
    -------
    ndarray of shape (d, d)
    """
    precision = -factor * hess + prior_precision * np.eye(hess.shape[0])
    return 0.5 * (precision + precision.T)


def single(value):
    """A point rounded to single precision (the precision of every point a pass is at)."""
    return np.asarray(value, dtype=np.float32).astype(np.float64)


class NewtonResult(NamedTuple):
    """Where :func:`newton` stopped.

    Attributes
    ----------
    map : ndarray of shape (d,)
        The last point plus its Newton step.
    center : ndarray of shape (d,)
        The last point (the expansion point of the control variates).
    sums : object
        The last pass's sums (at ``center``).
    precision : ndarray of shape (d, d)
        The Laplace precision at ``center``.
    n_passes : int
    """

    map: np.ndarray
    center: np.ndarray
    sums: object
    precision: np.ndarray
    n_passes: int


def newton(sums_at, start, prior_precision, *, scale=1.0, temperature=1.0, tol=1e-3,
           center_tol=None, max_passes=50, name="Newton's method for the MAP"):
    """The MAP of ``π(θ) ∝ N(θ; 0, I / prior_precision) exp(scale · ℓ(θ) / T)``.

    Parameters
    ----------
    sums_at : callable
        ``sums_at(point, n_pass) -> sums`` with ``loglik``, ``grad`` and ``hess`` of the
        log-likelihood ``ℓ`` at ``point`` (``n_pass`` counts from 1).
    start : ndarray of shape (d,)
    prior_precision : float
    scale : float, default 1.0
        Multiplies the log-likelihood (a subsample standing for all the rows).
    temperature : float > 0, default 1.0
    tol : float, default 1e-3
        In posterior standard deviations (see the module docstring).
    center_tol : float or None, default None
        None: stop when the step is at most ``tol``; else the rule of passes over all rows.
    max_passes : int, default 50
    name : str
        What the warning names.

    Returns
    -------
    NewtonResult

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When ``max_passes`` passes do not reach ``tol``.
    """
    from sklearn.exceptions import ConvergenceWarning

    factor = scale / temperature
    point = single(start)
    previous = None  # (point, objective, decrement)
    halved = False  # whether this pass follows a halved step (no rate to observe)
    for n_pass in range(1, max_passes + 1):
        sums = sums_at(point, n_pass)
        objective = factor * sums.loglik - 0.5 * prior_precision * float(point @ point)
        if previous is not None and previous[2] > 1.0 and objective < previous[1]:
            point = single(previous[0] + 0.5 * (point - previous[0]))
            halved = True
            continue
        precision = laplace_precision(sums.hess, prior_precision, factor)
        gradient = factor * sums.grad - prior_precision * point
        step = linalg.cho_solve(linalg.cho_factor(precision, lower=True), gradient)
        decrement = math.sqrt(max(float(step @ gradient), 0.0))
        # Newton's quadratic rate as the last full step shows it: δ = rate · δ_previous².
        rate = None if previous is None or halved else decrement / previous[2] ** 2
        halved = False
        if center_tol is None:
            known = decrement <= tol
        else:
            known = decrement <= tol or (rate is not None and decrement <= center_tol
                                         and rate * decrement**2 <= tol)
        if known or np.array_equal(single(point + step), point):
            return NewtonResult(point + step, point, sums, precision, n_pass)
        previous = (point, objective, decrement)
        point = single(point + step)
    warnings.warn(f"{name} did not reach {tol} posterior standard deviations in {max_passes} "
                  f"passes over the data (last step {previous[2]:.3g})", ConvergenceWarning,
                  stacklevel=3)
    sums = sums_at(point, max_passes + 1)
    return NewtonResult(point, point, sums, laplace_precision(sums.hess, prior_precision,
                                                              factor), max_passes + 1)
