"""The compiled model a logistic :class:`~._target.GLMTarget` lends the MH step.

:func:`glm_model` packs the target's data, prior, temperature and control variates into a
:class:`GLMModel`, whose class implements the model operations of
:mod:`sksubsample.algorithms.mh` (``log_prior_at``, ``log_pi_gradient``, ``terms_sum``,
``proxy_sum``, ``variance_bound``) with the compiled kernels of :mod:`._kernels`. The MH laws
(proposals, tests, step, chain driver) are those of :mod:`sksubsample.algorithms.mh`: this
module only says how the logistic model computes what they read.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._numba import as_read_only, njit
from ..mh import log_pi_gradient, log_prior_at, proxy_sum, terms_sum, variance_bound
from . import _kernels as kernels
from ._expansion import GLMTaylorExpansion
from ._kernel_args import NO_VALUES, kernel_array
from ._plan import ResidualBound

__all__ = ["GLMModel", "assembled_model", "glm_model", "lent_expansion", "uses_gram"]


class GLMModel(NamedTuple):
    """The tempered logistic posterior as the compiled MH step reads it (arrays contiguous and
    read-only, as the kernels want, except the scratch)."""

    X: np.ndarray
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    sparse: bool
    intercept: bool
    signs: np.ndarray
    weights: np.ndarray
    n_data: int
    prior_precision: float
    log_norm: float
    temperature: float
    # The Taylor proxies' expansion point and sums (the proxy gradient, the proxies' exact sum),
    # and whether gradients are instead summed over all data.
    reference: np.ndarray
    grad_sum: np.ndarray
    hess_sum: np.ndarray
    exact_gradient: bool
    # The control variates: the proxies' order (their coefficients are computed from each row
    # read) and third-order sum, and the bound on the residuals (when ``has_bound``).
    order: int
    cubic_coef: np.ndarray
    has_bound: bool
    bound: tuple  # a ResidualBound
    # The Lipschitz bound of the raw terms (without control variates): L and Xᵀ W² X (zeros
    # when the test does not read it).
    lipschitz: float
    gram: np.ndarray
    # Two rows of scratch (offsets from the reference point).
    scratch: np.ndarray


@njit(inline="always")
def _ratio_sum(model, theta, theta_new, rows, n_all):
    return kernels.loglik_ratio_sum(model.X, model.data, model.indices, model.indptr,
                                    model.sparse, model.intercept, model.signs, model.weights,
                                    theta, theta_new, rows, n_all)


@njit(inline="always")
def _residual_sum(model, theta, theta_new, rows, n_all):
    return kernels.residual_sum(model.X, model.data, model.indices, model.indptr, model.sparse,
                                model.intercept, model.signs, model.weights, model.reference,
                                model.order, theta, theta_new, rows, n_all)


@njit(inline="always")
def _mat_vec(matrix, v, out):
    d = v.size
    for j in range(d):
        s = 0.0
        for k in range(d):
            s += matrix[j, k] * v[k]
        out[j] = s


@log_prior_at.implement(GLMModel)
@njit
def _log_prior(model, theta):
    total = 0.0
    for j in range(theta.size):
        total += theta[j] * theta[j]
    return model.log_norm - 0.5 * model.prior_precision * total


@log_pi_gradient.implement(GLMModel)
@njit
def _log_pi_gradient(model, rng, theta, out):
    """``∇ log π_T`` from all N data or from the Taylor proxies (``G + H (θ - θ̂)``)."""
    if model.exact_gradient:
        kernels.grad_sum(model.X, model.data, model.indices, model.indptr, model.sparse,
                         model.intercept, model.signs, model.weights, theta, model.n_data, out)
        for j in range(theta.size):
            out[j] = out[j] / model.temperature - model.prior_precision * theta[j]
        return model.n_data
    offset = model.scratch[0]
    for j in range(theta.size):
        offset[j] = theta[j] - model.reference[j]
    _mat_vec(model.hess_sum, offset, out)
    for j in range(theta.size):
        out[j] = ((model.grad_sum[j] + out[j]) / model.temperature
                  - model.prior_precision * theta[j])
    return 0


@terms_sum.implement(GLMModel)
@njit
def _terms_sum(model, theta, theta_new, rows, every_row, residuals):
    n_all = model.n_data if every_row else 0
    # (the rows come from a minibatch's writable buffer or from read-only index arrays: the
    # kernels are compiled for the one kind, see as_read_only)
    rows = as_read_only(rows)
    if residuals:
        return _residual_sum(model, theta, theta_new, rows, n_all)
    return _ratio_sum(model, theta, theta_new, rows, n_all)


@proxy_sum.implement(GLMModel)
@njit
def _proxy_sum(model, theta):
    """The proxies' sum at θ (``GLMTaylorExpansion.sum_diff`` takes differences of it)."""
    offset = model.scratch[0]
    for j in range(theta.size):
        offset[j] = theta[j] - model.reference[j]
    return kernels.proxy_value(model.grad_sum, model.hess_sum, model.cubic_coef, model.order,
                               offset)


@variance_bound.implement(GLMModel)
@njit
def _variance_bound(model, theta, theta_new, residuals):
    """The residuals' bound of :func:`~._kernels.residual_bound` over the sampled rows, or
    ``V = L² (θ' - θ)ᵀ (Xᵀ W² X / N) (θ' - θ)`` for the raw ratios of an L-Lipschitz family
    (``|ℓ_i(θ') - ℓ_i(θ)| <= w_i L |x_iᵀ(θ' - θ)|``)."""
    a, a_new = model.scratch[0], model.scratch[1]
    if residuals:
        if not model.has_bound:
            return math.nan
        for j in range(theta.size):
            a[j] = theta[j] - model.reference[j]
            a_new[j] = theta_new[j] - model.reference[j]
        bound = model.bound
        return kernels.residual_bound(bound.order, bound.rho, bound.chol, bound.radii,
                                      bound.grams, a, a_new) / bound.n_sampled
    if not model.lipschitz > 0.0:
        return math.nan
    for j in range(theta.size):
        a[j] = theta_new[j] - theta[j]
    return model.lipschitz**2 * kernels.quadratic_form(model.gram, a) / model.n_data


def lent_expansion(target, kernel):
    """The target's own :class:`GLMTaylorExpansion` that ``kernel`` uses, None when it uses
    none, or False when no compiled model can serve the kernel: the family has no compiled
    kernels, or the kernel needs a Taylor proxy that is not the target's own."""
    if not target.compiled:
        return False
    proxy = kernel.proxy
    expansion = None if proxy is None else proxy.expansion
    if not (proxy is not None and proxy.target is target
            and isinstance(expansion, GLMTaylorExpansion)):
        expansion = None
    needs_proxy = kernel.control_variates or (kernel.proposal.uses_gradient
                                              and not kernel.exact_gradient)
    if needs_proxy and expansion is None:
        return False
    return expansion


def _proxy_fields(kernel, expansion, d):
    """The fields of a :class:`GLMModel` that come from the expansion: ``(reference, grad_sum,
    hess_sum, order, cubic_coef, has_bound, bound)``, read-only placeholders for what the
    kernel lacks (see :func:`glm_model`)."""
    if expansion is not None:
        reference, grad_sum, hess_sum = map(kernel_array, (
            expansion.reference, expansion.grad_sum, expansion.hess_sum))
    else:
        reference, grad_sum, hess_sum = map(kernel_array, (
            np.zeros(d), np.zeros(d), np.zeros((d, d))))
    bound = ResidualBound(2, 0.0, kernel_array(np.zeros((d, d))), NO_VALUES,
                          kernel_array(np.zeros((1, d, d))), 1)
    order, cubic_coef = 2, NO_VALUES
    has_bound = False
    if kernel.control_variates:
        order = int(expansion.order)
        cubic_coef = kernel_array(expansion.cubic_sum)
        if expansion.bound is not None:
            b = expansion.bound
            bound = ResidualBound(int(b.order), float(b.rho), kernel_array(b.chol),
                                  kernel_array(b.radii), kernel_array(b.grams),
                                  int(b.n_sampled))
            has_bound = True
    return reference, grad_sum, hess_sum, order, cubic_coef, has_bound, bound


def uses_gram(kernel):
    """Whether ``kernel``'s test bounds the raw ratios with the Lipschitz bound (the bounded
    test without control variates), which reads the target's ``Xᵀ W² X``."""
    law = getattr(kernel.test, "compiled_law", None)
    return law is not None and law[0] == "bounded_barker" and not kernel.control_variates


def assembled_model(target, kernel, expansion, rows):
    """The :class:`GLMModel` of ``kernel`` reading ``rows`` (its first eight fields: the design
    in the kernels' six arguments, the signs and the case weights); the constants are the
    target's, the kernel's and the expansion's (:func:`lent_expansion`), and the Lipschitz
    bound's ``Xᵀ W² X`` when the test reads it (zeros otherwise)."""
    d = target.n_features
    reference, grad_sum, hess_sum, order, cubic_coef, has_bound, bound = _proxy_fields(
        kernel, expansion, d)
    gram = kernel_array(target.gram if uses_gram(kernel) else np.zeros((d, d)))
    return GLMModel(*rows, int(target.n_data), float(target.prior_precision),
                    float(target.log_norm), float(kernel.temperature), reference, grad_sum,
                    hess_sum, bool(kernel.exact_gradient), order, cubic_coef, has_bound,
                    bound, float(target.family.lipschitz or 0.0), gram, np.empty((2, d)))


def glm_model(target, kernel):
    """The :class:`GLMModel` of ``kernel`` (a kernel of the logistic ``target``), or None.

    None when the family has no compiled kernels, or when the kernel needs a Taylor proxy
    (control variates, a proxy gradient) that is not this target's own expansion.
    Placeholders stand for what the kernel lacks; they are read-only like the arrays they stand
    for (:func:`~._kernel_args.kernel_array`), so that every plan (with or without control
    variates, strata, a bound, third-order proxies, dense or CSR) passes a model of the same
    types and the chain is compiled once, not once per plan.
    """
    expansion = lent_expansion(target, kernel)
    if expansion is False:
        return None
    rows = (*target.design, target.signs, target.kernel_weights)
    return assembled_model(target, kernel, expansion, rows)
