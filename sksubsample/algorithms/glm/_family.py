"""How a generalised linear model's datum depends on its linear predictor: :class:`GLMFamily`.

A family gives the per-datum log-likelihood ``ℓ(z, y)`` of the linear predictor ``z = xᵀθ``,
its derivatives and the bounds on them that the control variates' residual bounds need.
:data:`BERNOULLI_LOGIT` (logistic regression) has compiled kernels (:mod:`._kernels`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import special

__all__ = ["BERNOULLI_LOGIT", "GLMFamily"]


class GLMFamily(NamedTuple):
    """A per-datum log-likelihood ``ℓ(z, y)`` of the linear predictor ``z = xᵀθ``.

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    loglik : callable
        ``loglik(z, y) -> ndarray``, elementwise.
    d1, d2 : callable
        ``∂ℓ/∂z`` and ``∂²ℓ/∂z²``, elementwise.
    lipschitz : float or None
        A constant ``L`` with ``|ℓ(z', y) - ℓ(z, y)| <= L |z' - z|`` for all y, if one exists.
    name : str
        Name of the family (``"bernoulli-logit"`` for :data:`BERNOULLI_LOGIT`).
    d3_bound : float or None, default None
        ``M3 >= sup_{z, y} |∂³ℓ/∂z³|``, if finite.
    d3 : callable or None, default None
        ``∂³ℓ/∂z³``, elementwise (third-order proxies need it).
    local_derivative_bound : callable or None, default None
        ``local_derivative_bound(k, z, radius) -> ndarray``: for ``k`` in {3, 4}, a bound of
        ``|∂^k ℓ|`` on ``[z - radius, z + radius]`` for every element of ``z`` (``radius`` may
        be ``inf``). The residual bounds of the control variates need it.
    kernel : str or None, default None
        ``"logistic"`` when the family's per-datum work runs in the compiled kernels.
    """

    loglik: Callable
    d1: Callable
    d2: Callable
    lipschitz: float | None
    name: str
    d3_bound: float | None = None
    d3: Callable | None = None
    local_derivative_bound: Callable | None = None
    kernel: str | None = None


def _log_sigmoid(z):
    """``log σ(z) = min(z, 0) - log1p(exp(-|z|))``: no overflow for any z."""
    out = np.exp(-np.abs(z))
    np.log1p(out, out=out)
    return np.minimum(z, 0.0) - out


def _bernoulli_logit_loglik(z, s):
    return _log_sigmoid(s * z)


def _bernoulli_logit_d1(z, s):
    return s * special.expit(-s * z)


def _bernoulli_logit_d2(z, s):
    return -special.expit(z) * special.expit(-z)


def _bernoulli_logit_d3(z, s):
    p = special.expit(s * z)
    return -s * p * (1.0 - p) * (1.0 - 2.0 * p)


def _log_sigmoid_derivative_abs(k, t):
    """``|d^k/dt^k log σ(t)|`` for k in {3, 4}: even functions of t."""
    p = special.expit(t)
    if k == 3:
        return p * (1.0 - p) * np.abs(1.0 - 2.0 * p)
    return p * (1.0 - p) * np.abs(1.0 - 6.0 * p + 6.0 * p * p)


#: Grid of the envelopes: |t| in [0, 60] with step 2⁻¹⁰.
_ENVELOPE_STEP = 2.0**-10
_ENVELOPE_END = 60.0


@lru_cache(maxsize=2)
def _log_sigmoid_envelope(k):
    """``E(t) >= sup_{t' >= t} |(log σ)^{(k)}(t')|`` tabulated on a grid of ``t >= 0``.

    A suffix maximum of the derivative on the grid, raised by its largest change between two
    neighbouring grid points (a bound of the derivative's variation inside a grid cell; the
    functions are smooth with slopes below 0.2). Beyond the grid the functions decrease, so
    the last grid value holds.
    """
    t = np.arange(0.0, _ENVELOPE_END + _ENVELOPE_STEP, _ENVELOPE_STEP)
    g = _log_sigmoid_derivative_abs(k, t)
    slope = np.abs(np.diff(g)).max()
    suffix = np.maximum.accumulate(g[::-1])[::-1]
    return suffix + 2.0 * slope


def _bernoulli_logit_local_bound(k, z, radius):
    """Bound of ``|∂^k ℓ|`` on ``[z - radius, z + radius]`` for ``ℓ = log σ(s z)``."""
    envelope = _log_sigmoid_envelope(k)
    nearest = np.maximum(np.abs(np.asarray(z, dtype=np.float64)) - radius, 0.0)
    cell = np.minimum(nearest / _ENVELOPE_STEP, envelope.size - 1).astype(np.int64)
    return envelope[cell]


#: Logistic regression with the response coded as a sign ``s = 2y - 1``: ``ℓ = log σ(s z)``;
#: log σ is 1-Lipschitz, and ``|∂³ log σ| = σ(1-σ)|1-2σ| <= 1/(6√3)`` (attained at
#: ``σ = (3 ± √3)/6``). (Module-level functions, so targets pickle for process backends.)
BERNOULLI_LOGIT = GLMFamily(_bernoulli_logit_loglik, _bernoulli_logit_d1, _bernoulli_logit_d2,
                            lipschitz=1.0, name="bernoulli-logit",
                            d3_bound=1.0 / (6.0 * np.sqrt(3.0)), d3=_bernoulli_logit_d3,
                            local_derivative_bound=_bernoulli_logit_local_bound,
                            kernel="logistic")
