"""The compiled model of a chain whose logistic data are read through a buffer of its own.

:class:`StreamedGLMModel` wraps a :class:`~._model.GLMModel` whose arrays are the chain's local
buffer (the exact stratum's rows, then the slots the row stream fills) and whose constants are
those of the whole data set (N, the proxies' sums, the bound). Every model operation of
:mod:`sksubsample.algorithms.mh` is the :class:`~._model.GLMModel`'s on the buffer, except the
two that read every row: a sum over all N rows and the full-data gradient, which the row stream
computes in a pass over the store (called back through ``handle``).
"""

from __future__ import annotations

from typing import NamedTuple

from numba import objmode

from .._numba import njit
from ..mh import call, log_pi_gradient, log_prior_at, proxy_sum, terms_sum, variance_bound
from ._model import (
    GLMModel,
    _log_pi_gradient,
    _log_prior,
    _proxy_sum,
    _terms_sum,
    _variance_bound,
)

__all__ = ["StreamedGLMModel"]


class StreamedGLMModel(NamedTuple):
    """A :class:`~._model.GLMModel` on a chain's buffer, and the row stream that answers for
    every row.

    Attributes
    ----------
    local : GLMModel
        The buffer's rows and the data set's constants.
    handle : int
        The row stream (:class:`~._row_stream.RowStream`), which answers
        ``call(handle, "all", theta, theta_new, residuals)`` and
        ``call(handle, "gradient", theta, out)``.
    """

    local: GLMModel
    handle: int


@log_prior_at.implement(StreamedGLMModel)
@njit
def _streamed_log_prior(model, theta):
    return _log_prior(model.local, theta)


@log_pi_gradient.implement(StreamedGLMModel)
@njit(nogil=False)  # (object mode holds the GIL)
def _streamed_log_pi_gradient(model, rng, theta, out):
    local = model.local
    if not local.exact_gradient:
        return _log_pi_gradient(local, rng, theta, out)
    handle = model.handle
    with objmode():
        call(handle, "gradient", theta, out)
    for j in range(theta.size):
        out[j] = out[j] / local.temperature - local.prior_precision * theta[j]
    return local.n_data


@terms_sum.implement(StreamedGLMModel)
@njit(nogil=False)
def _streamed_terms_sum(model, theta, theta_new, rows, every_row, residuals):
    if not every_row:
        return _terms_sum(model.local, theta, theta_new, rows, False, residuals)
    handle = model.handle
    with objmode(total="float64"):
        total = call(handle, "all", theta, theta_new, residuals)
    return total


@proxy_sum.implement(StreamedGLMModel)
@njit
def _streamed_proxy_sum(model, theta):
    return _proxy_sum(model.local, theta)


@variance_bound.implement(StreamedGLMModel)
@njit
def _streamed_variance_bound(model, theta, theta_new, residuals):
    return _variance_bound(model.local, theta, theta_new, residuals)
