"""The chain of a GLM whose rows stay in a store: a model on a buffer of the chain's own.

A chain over rows in a store (a memory map, zarr, Dask) reads them through a buffer filled
ahead by its row stream (:mod:`._row_stream`). :class:`BufferedGLMModel` wraps a
:class:`~._model.GLMModel` whose arrays are that buffer (the exact stratum's rows, then the slots
the row stream fills) and whose constants are those of the whole data set (N, the proxies' sums,
the bound). Every model operation of :mod:`sksubsample.algorithms.mh` is the
:class:`~._model.GLMModel`'s on the buffer, except the two that read every row: a sum over all N
rows and the full-data gradient, which the row stream computes in a pass over the store (called
back through ``handle``). :func:`buffered_chain` builds a chain's model and minibatch source.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import objmode

from .._numba import njit, read_only
from ..mh import (
    PrefetchedMinibatches,
    call,
    log_pi_gradient,
    log_prior_at,
    proxy_sum,
    registered,
    terms_sum,
    variance_bound,
)
from ..sampling import table_capacity
from ._kernel_args import NO_ROWS, NO_VALUES
from ._model import (
    GLMModel,
    _log_pi_gradient,
    _log_prior,
    _proxy_sum,
    _terms_sum,
    _variance_bound,
    assembled_model,
    lent_expansion,
)
from ._row_stream import RowStream, start_ahead
from ._stream_seeds import next_stream_seed, stream_seed

__all__ = ["BufferedGLMModel", "buffer_slots", "buffered_chain", "expected_rows",
           "started_chain"]


class BufferedGLMModel(NamedTuple):
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


@log_prior_at.implement(BufferedGLMModel)
@njit
def _buffered_log_prior(model, theta):
    return _log_prior(model.local, theta)


@log_pi_gradient.implement(BufferedGLMModel)
@njit(nogil=False)  # (object mode holds the GIL)
def _buffered_log_pi_gradient(model, rng, theta, out):
    local = model.local
    if not local.exact_gradient:
        return _log_pi_gradient(local, rng, theta, out)
    handle = model.handle
    with objmode():
        call(handle, "gradient", theta, out)
    for j in range(theta.size):
        out[j] = out[j] / local.temperature - local.prior_precision * theta[j]
    return local.n_data


@terms_sum.implement(BufferedGLMModel)
@njit(nogil=False)
def _buffered_terms_sum(model, theta, theta_new, rows, every_row, residuals):
    if not every_row:
        return _terms_sum(model.local, theta, theta_new, rows, False, residuals)
    handle = model.handle
    with objmode(total="float64"):
        total = call(handle, "all", theta, theta_new, residuals)
    return total


@proxy_sum.implement(BufferedGLMModel)
@njit
def _buffered_proxy_sum(model, theta):
    return _proxy_sum(model.local, theta)


@variance_bound.implement(BufferedGLMModel)
@njit
def _buffered_variance_bound(model, theta, theta_new, residuals):
    return _variance_bound(model.local, theta, theta_new, residuals)


#: Slots of a chain's buffer: about this many steps' minibatches, within the bounds below.
_BUFFER_STEPS = 1024
_MIN_SLOTS = 1 << 12
_MAX_SLOTS = 1 << 18
#: A Dask array pays a round of tasks per refill, whatever its rows: larger buffers.
_MIN_SLOTS_DASK = 1 << 16


def buffer_slots(target, kernel, expansion):
    """Slots of a chain's buffer for ``kernel``: about :data:`_BUFFER_STEPS` steps of the
    planned minibatch (of a warm-up step, when larger), within :data:`_MIN_SLOTS` (for a Dask
    array :data:`_MIN_SLOTS_DASK`) and :data:`_MAX_SLOTS` (a power of two); a few for the
    exact tests, which draw none."""
    if kernel.test.compiled_law[0] != "bounded_barker":
        return 16
    if kernel.control_variates and expansion is not None and expansion.bound is not None:
        # The warm-up's steps (larger, while the proposal adapts) are planned too: a minibatch
        # of more than a quarter of the buffer takes a pass over the data.
        per_step = max(1.0, *_sampled_rows_per_step(expansion))
    else:
        per_step = 256.0
    low = _MIN_SLOTS_DASK if target.store.kind == "dask" else _MIN_SLOTS
    wanted = max(low, _BUFFER_STEPS * per_step)
    return int(min(_MAX_SLOTS, 1 << math.ceil(math.log2(wanted))))


def _sampled_rows_per_step(expansion):
    """``(in warm-up, after)``: the rows of the sampled stratum a step reads by the plan (its
    rows per step less the exact stratum's; warm-up's as after's without a plan)."""
    exact = 0 if expansion.strata is None else expansion.strata.exact.size
    after = expansion.planned_terms - exact
    plan = expansion.plan
    return (after if plan is None else plan.warmup_rows_per_step - exact), after


def expected_rows(kernel, expansion, steps):
    """The rows of the sampled stratum a chain of ``steps = (n_warmup, n_draws)`` steps of
    ``kernel`` is expected to read: the plan's rows per step (in warm-up and after), less the
    exact stratum's; None when unknown (no plan, or no steps given)."""
    if (steps is None or expansion is None or expansion.plan is None
            or not kernel.control_variates
            or kernel.test.compiled_law[0] != "bounded_barker"):
        return None
    warmup, after = _sampled_rows_per_step(expansion)
    n_warmup, n_draws = steps
    return n_warmup * max(0.0, warmup) + n_draws * max(0.0, after)


def buffered_chain(target, kernel, rng, resources, steps=None):
    """The :class:`BufferedGLMModel` and
    :class:`~sksubsample.algorithms.mh.PrefetchedMinibatches` of one chain of ``kernel`` over
    the rows of ``target``'s store, or None when no compiled model serves the kernel.

    The chain's row stream takes its seed from ``rng`` (a child of its seed sequence) and is
    registered in ``resources`` for the time of the chain; it adopts the first stretch
    :func:`started_chain` gathered for it ahead of the chain. A Dask array's stream first
    gathers twice the rows the chain is expected to read (:func:`expected_rows`, up to a
    power of two; the whole buffer when unknown).

    Parameters
    ----------
    target : GLMTarget
    kernel : MHKernel
    rng : numpy.random.Generator
    resources : contextlib.ExitStack
    steps : (int, int) or None, default None
        The chain's warm-up steps and draws.

    Returns
    -------
    (BufferedGLMModel, PrefetchedMinibatches) or None
    """
    expansion = lent_expansion(target, kernel)
    if expansion is False:
        return None
    n_slots = buffer_slots(target, kernel, expansion)
    seed = stream_seed(rng)
    stream = resources.enter_context(
        RowStream(target, expansion if kernel.control_variates else None, seed, n_slots,
                  expected_rows(kernel, expansion, steps)))
    handle = resources.enter_context(registered(stream))
    rows = (read_only(stream.X), NO_VALUES, NO_ROWS, NO_ROWS, False, target.intercept,
            read_only(stream.signs), read_only(stream.weights))
    local = assembled_model(target, kernel, expansion, rows)
    k = stream.exact.size
    minibatches = PrefetchedMinibatches(
        handle, read_only(np.arange(k, dtype=np.int64)), int(stream.n_sampled),
        read_only(stream.ids), k, np.zeros(2, dtype=np.int64),
        np.empty(table_capacity(n_slots // 4), dtype=np.int64),
        np.empty(n_slots, dtype=np.int64))
    return BufferedGLMModel(local, handle), minibatches


def started_chain(target, kernel, rng, steps=None):
    """Start gathering, in the background, the first stretch of the row stream that
    :func:`buffered_chain` will make for a chain of ``kernel`` run by ``rng`` (in its present
    state): :func:`~._row_stream.start_ahead`.

    Parameters
    ----------
    target : GLMTarget
        A target whose rows are in a store.
    kernel : MHKernel
    rng : numpy.random.Generator
        The chain's generator, not yet run.
    steps : (int, int) or None, default None
        The chain's warm-up steps and draws.

    Returns
    -------
    StreamStart or None
        None for a chain that gathers no stretch (a test without minibatches, a kernel no
        compiled model serves, a generator without a seed sequence).
    """
    law = getattr(kernel.test, "compiled_law", None)
    if law is None or law[0] != "bounded_barker":
        return None
    expansion = lent_expansion(target, kernel)
    seed = next_stream_seed(rng)
    if expansion is False or seed is None:
        return None
    return start_ahead(target, expansion if kernel.control_variates else None, seed,
                       buffer_slots(target, kernel, expansion),
                       expected_rows(kernel, expansion, steps))
