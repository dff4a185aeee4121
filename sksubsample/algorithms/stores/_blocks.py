"""A block of consecutive rows of a store, made from what was read, and split in pieces.

A :class:`Block` is what a pass's function sees of the rows (:meth:`~._rows.RowStore.fold`) and
what a gather returns (:meth:`~._rows.RowStore.take`): X in the store's dtype, y after the
store's response map, the case weights in float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse

from ._checks import check_finite, check_weights
from ._scratch import scratch

__all__ = ["Block", "as_block", "fold_blocks", "split_block", "split_ranges"]


class Block(NamedTuple):
    """Consecutive rows ``start, ..., start + len(X) - 1`` of a store.

    Attributes
    ----------
    start : int
        The first row.
    X : ndarray or scipy.sparse.csr_matrix of shape (n_rows, d)
        The rows, in the store's dtype (CSR for a CSR store).
    y : ndarray of shape (n_rows,) or None
        The response of the rows (after the store's ``response`` map), None without.
    w : ndarray of shape (n_rows,) or None
        The case weights of the rows, None without.
    """

    start: int
    X: np.ndarray
    y: np.ndarray | None
    w: np.ndarray | None


def as_block(start, X, y, w, dtype, response=None, check=0, reuse=False):
    """The :class:`Block` of the rows ``X``, ``y``, ``w`` read from row ``start``: X in
    ``dtype``, the weights in float64, y through ``response``.

    Parameters
    ----------
    start : int
    X : ndarray of shape (n_rows, d)
    y, w : ndarray of shape (n_rows,) or None
    dtype : numpy.dtype
    response : callable or None, default None
    check : int, default 0
        When positive, the values are checked (non-finite X or weights, negative weights) and
        an error names the block of ``check`` rows that holds the first bad value.
    reuse : bool, default False
        Whether ``response.into`` (when the response has one) writes y into this thread's
        scratch array (:mod:`._scratch`), overwritten by the next such call: for a pass's read
        units, each used before the next. A fresh array per unit costs its page faults every
        time where freed memory goes back to the system at once, as on Dask's workers
        (``MALLOC_TRIM_THRESHOLD_``): the labels' signs of a unit of 300 000 rows fault in
        2.4 MB.

    Returns
    -------
    Block
    """
    if not sparse.issparse(X):
        X = np.asarray(X)
    if X.dtype != dtype:
        X = X.astype(dtype)
    if w is not None:
        w = np.asarray(w, dtype=np.float64)
    if check:
        check_finite(X, "X", start, check)
        if w is not None:
            check_weights(w, start, check)
    if y is not None and response is not None:
        y = np.asarray(y)
        into = getattr(response, "into", None) if reuse else None
        y = response(y) if into is None else into(y, scratch("response", y.shape, np.float64))
    return Block(start, X, y, w)


def split_ranges(start, stop, step):
    """``[a, b)`` pieces of ``step`` rows (the last shorter) covering ``[start, stop)``."""
    for a in range(start, stop, step):
        yield a, min(stop, a + step)


def split_block(block, step):
    """``block`` in pieces of ``step`` rows (views, :func:`split_ranges`), as
    :class:`Block` s."""
    for a, b in split_ranges(0, block.X.shape[0], step):
        yield Block(block.start + a, block.X[a:b], None if block.y is None else block.y[a:b],
                    None if block.w is None else block.w[a:b])


def fold_blocks(blocks, block_fn, combine, args=()):
    """``combine`` over ``block_fn(block, *args)`` for the blocks in order (None for none).

    Parameters
    ----------
    blocks : iterable of Block
    block_fn : callable
    combine : callable
    args : tuple, default ()

    Returns
    -------
    object or None
    """
    total = None
    for block in blocks:
        part = block_fn(block, *args)
        total = part if total is None else combine(total, part)
    return total
