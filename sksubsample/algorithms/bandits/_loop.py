"""The round loops of racing, written once for every kind of rewards.

A race runs in one compiled call: per round, draw the batch, read the rewards of the surviving
arms block by block, update the running sums, decide (:func:`shared_race` on shared
minibatches, Alg. 1 of Chen & Ghahramani 2016; :func:`independent_race` with independent arms,
App. C.3). What differs between the package's races is only where the rewards come from, so the
loops read them through two generic operations (:func:`~sksubsample.algorithms._numba.generic`),
dispatched on the class of the ``rewards`` value:

:func:`shared_values`
    ``(n_evaluations, values)`` of the surviving arms at a block of indices;
:func:`arm_values`
    the values of each arm at its own batch (independent arms).

Implementations here: :class:`CallbackRewards` (a NumPy callable, called back from the
compiled loop in object mode once per block) and :class:`FunctionRewards` (a user's compiled
per-datum function). Models register their own (the ARCH sampler's orders, the coreference
clusters) with ``shared_values.implement(TheirRewards)``; the loops compiled for them are cached
on disk like the rest of the package.

A loop specialised for :class:`FunctionRewards` receives the user's function as a value, which
numba cannot cache; :func:`function_race` compiles that specialisation once per process and
function from the same Python source, with the function as a constant (so a call does not type
it, which takes about 10 microseconds), instead of the cached loop.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import NamedTuple

import numba
import numpy as np
from numba import objmode

from .._numba import generic, njit
from ._independent import independent_draw, independent_update
from ._shared import (
    chunk_columns,
    end_draws,
    shared_accumulate,
    shared_decide,
    shared_draw,
    should_bail,
)
from ._state import BAD_VALUE, BAILED, CONTINUE

__all__ = [
    "CallbackRewards",
    "FunctionRewards",
    "arm_values",
    "call_back",
    "exact_sums",
    "fill_rows",
    "finish_exactly",
    "function_race",
    "function_rows",
    "function_sums",
    "independent_race",
    "per_datum_rewards",
    "pop_callback",
    "push_callback",
    "reward_value",
    "shared_race",
    "shared_values",
]


@generic
def shared_values(rewards, state, idx, block):
    """The raw values of the surviving arms at a block of indices: ``(n_evaluations, values)``.

    ``values[a, k]`` is the value of arm ``state.alive[a]`` at ``idx[k]``, for
    ``a < state.n_alive``; an implementation may fill ``block`` (room for them) and return it.
    An arm with ``state.scale == 0`` has a constant reward and need not be evaluated (its
    values are then ignored, and not counted). Values are checked by the loop, not here.
    """


@generic
def arm_values(rewards, state, drawing, lengths, idx, block):
    """Fill ``block`` with the raw values of the arms ``drawing`` at their batches (``idx``,
    lengths ``lengths``, concatenated): ``(status, saw -inf, n_evaluations)``, status
    :data:`~._state.BAD_VALUE` for a NaN or ``+inf`` value. An arm with ``state.scale == 0``
    need not be evaluated (zeros)."""


@njit
def shared_race(rewards, seed, state, config, buffers):
    """A whole race on shared minibatches (Alg. 1): per round :func:`~._shared.shared_draw`,
    the values of each block (:func:`shared_values`) added by
    :func:`~._shared.shared_accumulate`, then :func:`~._shared.shared_decide`.

    ``seed`` (``uint64``) starts the race's SplitMix64 stream of index draws; ``buffers`` is a
    :class:`~._shared.DrawBuffers` (its bitmaps zero, left zero). Returns ``(status,
    n_evaluations)``: :data:`~._state.DONE` with the winner in ``state.best``,
    :data:`~._state.ALL_NEG_INF`, :data:`~._state.BAD_VALUE`, or :data:`~._state.BAILED`
    when the race stopped paying (:func:`~._shared.should_bail`) with its survivors in
    ``state.alive[:state.n_alive]``, for the caller to finish exactly.
    """
    n_evaluations = 0
    status = CONTINUE
    while status == CONTINUE:
        batch, seed = shared_draw(seed, state, config, buffers)
        n_alive = state.n_alive
        columns = chunk_columns(n_alive)
        for start in range(0, batch.size, columns):
            stop = min(start + columns, batch.size)
            block = buffers.work[:n_alive * (stop - start)].reshape((n_alive, stop - start))
            n_block, values = shared_values(rewards, state, batch[start:stop], block)
            n_evaluations += n_block
            status = shared_accumulate(values, state, config)
            if status != CONTINUE:
                break
        if status == CONTINUE:
            status = shared_decide(state, config)
            if status == CONTINUE and should_bail(state, config):
                status = BAILED
    end_draws(state, config, buffers)
    return status, n_evaluations


@njit
def independent_race(rewards, rng, state, config):
    """A whole race with independent arms (App. C.3): per round
    :func:`~._independent.independent_draw` (from ``rng``), the values
    (:func:`arm_values`), :func:`~._independent.independent_update`. Returns ``(status,
    n_evaluations)`` as :func:`shared_race`."""
    n_evaluations = 0
    while True:
        idx, lengths, drawing = independent_draw(rng, state, config)
        block = np.empty(idx.size)
        status, scan, n_block = arm_values(rewards, state, drawing, lengths, idx, block)
        n_evaluations += n_block
        if status != CONTINUE:
            return status, n_evaluations
        status = independent_update(block, lengths, drawing, scan, state, config)
        if status != CONTINUE:
            return status, n_evaluations


# ----------------------------------------------------------------------------- NumPy callables
#
# A NumPy callable is called back from the compiled loop in object mode, once per block: the
# race crosses from Python into compiled code once (a generator passed from Python costs about
# 15 microseconds to unbox, more than a cheap round).


class CallbackRewards(NamedTuple):
    """Rewards of a Python callable registered with :func:`push_callback` (``handle``)."""

    handle: int


_callbacks = threading.local()


def push_callback(callback):
    """Register ``callback`` for the race about to run in this thread; returns its handle.

    A race started from inside another race's callable (same thread) gets the next handle.
    """
    stack = getattr(_callbacks, "stack", None)
    if stack is None:
        stack = _callbacks.stack = []
    stack.append(callback)
    return len(stack) - 1


def pop_callback():
    """Unregister the callback of the race that just ended in this thread."""
    _callbacks.stack.pop()


def call_back(handle, *arrays):
    """Run the registered callback ``handle`` (in object mode, from a compiled race)."""
    return _callbacks.stack[handle](*arrays)


@shared_values.implement(CallbackRewards)
@njit(nogil=False)  # object mode holds the GIL: without nogil, which numba warns about
def _callback_shared_values(rewards, state, idx, block):
    """Python: ``callback(arms, idx) -> values``, C-contiguous, of shape
    ``(n_alive, idx.size)``."""
    alive = state.alive[:state.n_alive]
    handle = rewards.handle
    with objmode(values="float64[:, ::1]"):
        values = call_back(handle, alive, idx)
    return values.size, values


@arm_values.implement(CallbackRewards)
@njit(nogil=False)  # object mode holds the GIL
def _callback_arm_values(rewards, state, drawing, lengths, idx, block):
    """Python: ``callback(arms, lengths, idx, block) -> (saw -inf, evaluations)``."""
    handle = rewards.handle
    with objmode(scan="boolean", n_evaluations="int64"):
        scan, n_evaluations = call_back(handle, drawing, lengths, idx, block)
    return CONTINUE, scan, n_evaluations


# ----------------------------------------------------------------------------- per-datum rewards
#
# Most rewards are computed one datum at a time: a user's compiled function, an ARCH order's
# log-likelihood term, a coreference potential. Their block operations are written once here,
# in terms of the scalar generic reward_value, and registered for each such class by
# per_datum_rewards.


@generic
def reward_value(rewards, arm, index):
    """The raw value of arm ``arm`` at population index ``index`` (per-datum rewards)."""


def _fill_rows(rewards, arms, n_arms, scale, idx, out):
    """``out[a, k] = reward_value(rewards, arms[a], idx[k])`` for ``a < n_arms``, zeros for an
    arm of scale 0 (not evaluated); returns the evaluations."""
    m = idx.size
    n_evaluations = 0
    for a in range(n_arms):
        arm = arms[a]
        row = out[a]
        if scale[arm] == 0.0:
            row[:] = 0.0
            continue
        n_evaluations += m
        for k in range(m):
            row[k] = float(reward_value(rewards, arm, idx[k]))
    return n_evaluations


def _per_datum_shared_values(rewards, state, idx, block):
    return fill_rows(rewards, state.alive, state.n_alive, state.scale, idx, block), block


def _per_datum_arm_values(rewards, state, drawing, lengths, idx, block):
    n_evaluations = 0
    scan = False
    start = 0
    for j in range(drawing.size):
        arm = drawing[j]
        stop = start + lengths[j]
        if state.scale[arm] == 0.0:
            block[start:stop] = 0.0
        else:
            for k in range(start, stop):
                v = float(reward_value(rewards, arm, idx[k]))
                if v != v or v == math.inf:
                    return BAD_VALUE, scan, n_evaluations
                scan = scan or v == -math.inf
                block[k] = v
            n_evaluations += stop - start
        start = stop
    return CONTINUE, scan, n_evaluations


def _per_datum_sums(rewards, sizes, scale, offset, out):
    """``out[i] = sum_{n < sizes[i]} scale[i] * reward_value(rewards, i, n) + offset[i]``: the
    exact sums of every arm (an arm of scale 0: ``sizes[i] * offset[i]``, not evaluated).

    Four partial sums per arm keep the additions from waiting on each other. Returns ``(bad,
    n_evaluations)``, ``bad`` for a NaN or ``+inf`` value.
    """
    n_evaluations = 0
    for i in range(sizes.size):
        n = sizes[i]
        sc = scale[i]
        off = offset[i]
        if sc == 0.0:
            out[i] = n * off
            continue
        s0 = s1 = s2 = s3 = 0.0
        k = 0
        bad = False
        while k + 4 <= n:
            v0 = float(reward_value(rewards, i, k))
            v1 = float(reward_value(rewards, i, k + 1))
            v2 = float(reward_value(rewards, i, k + 2))
            v3 = float(reward_value(rewards, i, k + 3))
            bad |= v0 != v0 or v0 == math.inf or v1 != v1 or v1 == math.inf
            bad |= v2 != v2 or v2 == math.inf or v3 != v3 or v3 == math.inf
            s0 += sc * v0 + off
            s1 += sc * v1 + off
            s2 += sc * v2 + off
            s3 += sc * v3 + off
            k += 4
        while k < n:
            v0 = float(reward_value(rewards, i, k))
            bad |= v0 != v0 or v0 == math.inf
            s0 += sc * v0 + off
            k += 1
        if bad:
            return True, n_evaluations
        n_evaluations += n
        out[i] = (s0 + s1) + (s2 + s3)
    return False, n_evaluations


@generic
def exact_sums(rewards, sizes, scale, offset, out):
    """Every arm's sum of rewards over its whole population (see :func:`per_datum_rewards`):
    ``(bad, n_evaluations)``."""


@generic
def fill_rows(rewards, arms, n_arms, scale, idx, out):
    """The raw values of the arms ``arms[:n_arms]`` at ``idx`` into ``out`` (rows of arms of
    scale 0 are zeros, not evaluated); returns the evaluations."""


@njit
def finish_exactly(rewards, state, out):
    """Decide a race that stopped paying (:data:`~._state.BAILED`) by the exact sums of its
    survivors: ``(best, bad, n_evaluations)``, ``state.best`` set to ``best``.

    The race's eliminations stand (each erred with probability at most its share of δ); the
    survivors are compared by their exact sums over their whole populations, which cannot err,
    so finishing exactly never adds to the race's error. ``out`` (one entry per arm) receives
    the survivors' sums (the others' entries are zeros); ``bad`` flags a NaN or ``+inf``
    reward.
    """
    n_arms = state.scale.size
    scale = np.zeros(n_arms)
    offset = np.zeros(n_arms)
    for k in range(state.n_alive):
        a = state.alive[k]
        scale[a] = state.scale[a]
        offset[a] = state.offset[a]
    sizes = state.sizes
    # Arms of scale 0 are not evaluated: the eliminated arms cost nothing here.
    bad, n_evaluations = exact_sums(rewards, sizes, scale, offset, out)
    best = state.alive[0]
    for k in range(1, state.n_alive):
        a = state.alive[k]
        if out[a] > out[best]:
            best = a
    state.best = best
    return best, bad, n_evaluations


_PER_DATUM = {"cached": (njit(_fill_rows), njit(_per_datum_shared_values),
                         njit(_per_datum_arm_values), njit(_per_datum_sums)),
              "uncached": tuple(numba.njit(nogil=True)(f) for f in (
                  _fill_rows, _per_datum_shared_values, _per_datum_arm_values,
                  _per_datum_sums))}


def per_datum_rewards(cls, value, *, cache=True):
    """Register ``cls`` as rewards computed one datum at a time by ``value(rewards, arm,
    index)`` (a compiled function): the race loops, :func:`exact_sums` and
    :func:`fill_rows` then work for it. ``cache=False`` for a class holding a function as a
    value, which numba cannot cache. Returns ``cls``."""
    reward_value.implement(cls)(value)
    fill, shared, arms, sums = _PER_DATUM["cached" if cache else "uncached"]
    fill_rows.implement(cls)(fill)
    shared_values.implement(cls)(shared)
    arm_values.implement(cls)(arms)
    exact_sums.implement(cls)(sums)
    return cls


class FunctionRewards(NamedTuple):
    """Rewards ``function(data, arm, index)`` of a user's numba-compiled function."""

    function: object
    data: tuple


@numba.njit(nogil=True)  # not cached: the function is a value (see the module docstring)
def _function_value(rewards, arm, index):
    return rewards.function(rewards.data, arm, index)


per_datum_rewards(FunctionRewards, _function_value, cache=False)

_shared_race_uncached = numba.njit(nogil=True)(shared_race.py_func)
_independent_race_uncached = numba.njit(nogil=True)(independent_race.py_func)


@functools.lru_cache(maxsize=64)
def function_race(function, independent):
    """The race loop compiled for the compiled reward function ``function``: ``race(data, rng,
    state, config)`` with independent arms, ``race(data, seed, state, config, buffers)`` on
    shared minibatches (kept for the last functions used, so that each is compiled once per
    process)."""
    if independent:
        @numba.njit(nogil=True)
        def race(data, rng, state, config):
            return _independent_race_uncached(FunctionRewards(function, data), rng, state,
                                              config)
    else:
        @numba.njit(nogil=True)
        def race(data, seed, state, config, buffers):
            return _shared_race_uncached(FunctionRewards(function, data), seed, state, config,
                                         buffers)
    return race


@functools.lru_cache(maxsize=64)
def function_sums(function):
    """:func:`exact_sums` compiled for the compiled reward function ``function``:
    ``sums(data, sizes, scale, offset, out)``."""

    per_datum_sums = _PER_DATUM["uncached"][3]

    @numba.njit(nogil=True)
    def sums(data, sizes, scale, offset, out):
        return per_datum_sums(FunctionRewards(function, data), sizes, scale, offset, out)

    return sums


@functools.lru_cache(maxsize=64)
def function_rows(function):
    """:func:`fill_rows` compiled for the compiled reward function ``function``:
    ``rows(data, arms, scale, idx, out)``."""

    per_datum_rows = _PER_DATUM["uncached"][0]

    @numba.njit(nogil=True)
    def rows(data, arms, scale, idx, out):
        return per_datum_rows(FunctionRewards(function, data), arms, arms.size, scale, idx, out)

    return rows
