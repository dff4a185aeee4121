"""Where the bounded test's minibatches come from: rows drawn at random, and their terms summed.

The bounded test (:func:`~._exact_tests.bounded_barker_law`) sums its terms over three sets of
rows: the *exact* stratum (every step), a uniformly random minibatch of the *sampled* stratum
(most steps) and the whole sampled stratum (the steps whose bound asks for every row). How those
rows are drawn and read is the business of a *minibatch source*, a :class:`typing.NamedTuple`
whose class implements the four generic operations below:

* :class:`ShuffledMinibatches`, for data in memory: each minibatch is the first stretch of a
  fresh Fisher–Yates shuffle of the sampled stratum, drawn from the chain's own generator
  (:func:`~sksubsample.algorithms.sampling.shuffle_draw`), and the model reads the rows where
  they are;
* :class:`PrefetchedMinibatches`, for data out of core: the rows come from a *stream* of
  independent uniform draws of the sampled stratum, fetched many steps ahead in one read by a
  Python object (the *row stream*, reached through a handle, :mod:`._callbacks`) into the local
  arrays of the model, which reads them there.

Both give each step a uniformly random set of ``b`` distinct rows of the sampled stratum,
independent of everything before it, so the chains have the same law. For the stream: the
entries are i.i.d. uniform and independent of the chain (they are drawn from a generator of
their own), and a step takes successive entries, skipping those already in its batch, until it
holds ``b`` distinct rows. Sampling with rejection of repeats gives a uniformly random ordered
``b``-tuple of distinct rows, the law of a Fisher–Yates stretch; ``b`` is fixed by the step's
state before the step looks at the stream, so the entries after a step are still i.i.d. and
independent of the past (the stream is a sequence of i.i.d. variables, and a step stops at a
stopping time of it). Which entries are skipped depends only on the stream.

A minibatch too large for the stream's buffer (more than a quarter of it), or whose repeats
would overflow the buffer, is drawn by the row stream in one sequential pass instead (selection
sampling, :class:`~sksubsample.algorithms.glm.RowStream` documents it): again a uniformly
random set of ``b`` distinct rows, independent of the stream.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import objmode

from .._numba import generic, njit
from ..sampling import (
    FREE,
    Shuffle,
    new_shuffle,
    shuffle_draw,
    shuffle_restart,
    slot,
    table_capacity,
)
from ._callbacks import call
from ._model import terms_sum

__all__ = ["PrefetchedMinibatches", "ShuffledMinibatches", "exact_rows", "minibatch_sum",
           "sampled_count", "sampled_sum", "shuffled_minibatches"]


@generic
def exact_rows(minibatches):
    """The rows whose terms are summed at every step (empty without strata), as the model
    reads them."""


@generic
def sampled_count(minibatches, n_data):
    """``N_s``, the number of rows of the sampled stratum (``n_data`` without strata)."""


@generic
def minibatch_sum(minibatches, source, rng, theta, theta_new, n_sampled, size, residuals):
    """``sum_i l_i`` over a uniformly random set of ``size`` distinct rows of the sampled
    stratum (``n_sampled`` rows), independent of the chain's past (``l_i`` as in
    :func:`~._model.terms_sum`)."""


@generic
def sampled_sum(minibatches, source, theta, theta_new, residuals):
    """``sum_i l_i`` over every row of the sampled stratum."""


# ----------------------------------------------------------------------------- in memory


class ShuffledMinibatches(NamedTuple):
    """Minibatches drawn by a Fisher–Yates shuffle from the chain's generator.

    The sampled stratum is every row but the exact stratum's, left implicit (no index of N
    rows): its ``j``-th row is ``j`` plus the number of exact rows ``e_m`` with
    ``e_m - m <= j`` (``e_m - m`` counts the sampled rows before ``e_m``), found by a binary
    search of ``shift``.

    Attributes
    ----------
    exact : ndarray of int64
        The exact stratum's rows, sorted (empty without strata).
    shift : ndarray of int64
        ``exact[m] - m``.
    n_sampled : int
        Rows of the sampled stratum.
    shuffle : Shuffle
        The shuffle state a minibatch is drawn with (restarted at every step).
    batch : ndarray of int64
        Scratch for the minibatch (a larger one is allocated when it is too short).
    """

    exact: np.ndarray
    shift: np.ndarray
    n_sampled: int
    shuffle: Shuffle
    batch: np.ndarray


def shuffled_minibatches(exact, n_data):
    """The :class:`ShuffledMinibatches` of the strata whose exact stratum is ``exact`` (sorted
    rows; empty without strata) among ``n_data`` rows."""
    exact = np.ascontiguousarray(exact, dtype=np.int64)
    shift = exact - np.arange(exact.size, dtype=np.int64)
    return ShuffledMinibatches(exact, shift, int(n_data - exact.size),
                               new_shuffle(n_data - exact.size), np.empty(1024, dtype=np.int64))


@exact_rows.implement(ShuffledMinibatches)
@njit
def _shuffled_exact(minibatches):
    return minibatches.exact


@sampled_count.implement(ShuffledMinibatches)
@njit
def _shuffled_count(minibatches, n_data):
    return minibatches.n_sampled


@minibatch_sum.implement(ShuffledMinibatches)
@njit
def _shuffled_minibatch_sum(minibatches, source, rng, theta, theta_new, n_sampled, size,
                            residuals):
    strata = minibatches.exact.size > 0
    batch = minibatches.batch
    if batch.size < size:
        batch = np.empty(size, dtype=np.int64)
    shuffle_restart(minibatches.shuffle, n_sampled)
    shuffle_draw(minibatches.shuffle, rng, batch[:size])
    if strata:
        shift = minibatches.shift
        for k in range(size):
            batch[k] += np.searchsorted(shift, batch[k], side="right")
    return terms_sum(source, theta, theta_new, batch[:size], False, residuals)


@sampled_sum.implement(ShuffledMinibatches)
@njit
def _shuffled_sampled_sum(minibatches, source, theta, theta_new, residuals):
    every = terms_sum(source, theta, theta_new, minibatches.exact, True, residuals)
    if minibatches.exact.size == 0:
        return every
    return every - terms_sum(source, theta, theta_new, minibatches.exact, False, residuals)


# ----------------------------------------------------------------------------- out of core


class PrefetchedMinibatches(NamedTuple):
    """Minibatches taken from a stream of uniform row draws fetched ahead into the model.

    The row stream (a Python object registered under ``handle``) keeps ``ids.size`` slots:
    slot ``j`` holds the row ``ids[j]`` of the stream, whose data the model reads at local
    position ``first_slot + j``. ``cursor`` holds the next slot to take and the number of
    filled slots; when the stream runs out mid-batch, the row stream moves the batch's slots
    to the front and fetches the next stretch (``refill``).

    Attributes
    ----------
    handle : int
        The row stream, which answers ``call(handle, "refill", keep_from)`` (returns the filled
        slots), ``call(handle, "selection", theta, theta_new, size, residuals)`` and
        ``call(handle, "sampled", theta, theta_new, residuals)`` (sums over a random set of
        ``size`` rows, and over every row, of the sampled stratum).
    exact : ndarray of int64
        Local positions of the exact stratum's rows (read by the model at every step).
    n_sampled : int
        Rows of the sampled stratum.
    ids : ndarray of int64
        The stream's row of each slot (written by the row stream).
    first_slot : int
        Local position of slot 0.
    cursor : ndarray of int64 of shape (2,)
        The next slot and the number of filled slots.
    keys : ndarray of int64
        Scratch of the set of rows already in a minibatch (a power of two of at least half the
        slots).
    batch : ndarray of int64
        Scratch for the minibatch's local positions (one per slot).
    """

    handle: int
    exact: np.ndarray
    n_sampled: int
    ids: np.ndarray
    first_slot: int
    cursor: np.ndarray
    keys: np.ndarray
    batch: np.ndarray


@exact_rows.implement(PrefetchedMinibatches)
@njit
def _prefetched_exact(minibatches):
    return minibatches.exact


@sampled_count.implement(PrefetchedMinibatches)
@njit
def _prefetched_count(minibatches, n_data):
    return minibatches.n_sampled


@njit(nogil=False)  # (object mode holds the GIL)
def _selection_sum(handle, theta, theta_new, size, residuals):
    with objmode(total="float64"):
        total = call(handle, "selection", theta, theta_new, size, residuals)
    return total


@njit(nogil=False)
def _refill(handle, keep_from):
    with objmode(filled="int64"):
        filled = call(handle, "refill", keep_from)
    return filled


@minibatch_sum.implement(PrefetchedMinibatches)
@njit(nogil=False)
def _prefetched_minibatch_sum(minibatches, source, rng, theta, theta_new, n_sampled, size,
                              residuals):
    """Take ``size`` distinct rows from the stream, skipping repeats (see the module
    docstring), refilling the buffer when it runs out."""
    mb = minibatches
    n_slots = mb.ids.size
    if 4 * size > n_slots:
        return _selection_sum(mb.handle, theta, theta_new, size, residuals)
    keys = mb.keys[:table_capacity(size)]
    keys[:] = FREE
    cursor, batch = mb.cursor, mb.batch
    begin = cursor[0]  # the first slot this minibatch looked at
    taken = 0
    while taken < size:
        if cursor[0] >= cursor[1]:
            if 2 * (cursor[1] - begin) > n_slots:
                # So many repeats that the minibatch's slots fill half the buffer: its set is
                # drawn in one pass instead (the stretch looked at is skipped; what is skipped
                # depends on the stream alone, so the law is kept).
                return _selection_sum(mb.handle, theta, theta_new, size, residuals)
            cursor[1] = _refill(mb.handle, begin)
            cursor[0] -= begin
            for t in range(taken):
                batch[t] -= begin
            begin = 0
        position = cursor[0]
        cursor[0] += 1
        row = mb.ids[position]
        h = slot(keys, row)
        if keys[h] == row:
            continue  # a repeat within this minibatch
        keys[h] = row
        batch[taken] = mb.first_slot + position
        taken += 1
    return terms_sum(source, theta, theta_new, batch[:size], False, residuals)


@sampled_sum.implement(PrefetchedMinibatches)
@njit(nogil=False)
def _prefetched_sampled_sum(minibatches, source, theta, theta_new, residuals):
    handle = minibatches.handle
    with objmode(total="float64"):
        total = call(handle, "sampled", theta, theta_new, residuals)
    return total
