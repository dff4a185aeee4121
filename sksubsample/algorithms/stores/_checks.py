"""The checks a row store makes of the values it reads: finite X and weights, non-negative weights.

An error names the first bad value's row (and column), and the block of rows it is in, so that a
user can find it in data too large to look at whole.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from ._scratch import scratch

__all__ = ["check_finite", "check_gathered", "check_weights", "distinct_values"]

#: Values checked at a time (the scratch array's size, in bytes).
_CHECK_VALUES = 1 << 18


def _block_of(row, start, stop, step):
    """The block of ``step`` rows (counted from ``start``) that holds ``row``, as text."""
    first = start + (row - start) // step * step
    return f"the block of rows {first} to {min(stop, first + step) - 1}"


def check_finite(values, what, start, step):
    """Raise a ValueError naming the first non-finite entry of ``values`` (rows from
    ``start``) and its block of ``step`` rows."""
    if sparse.issparse(values):
        if np.isfinite(values.data).all():
            return
        coo = values.tocoo()
        bad = np.flatnonzero(~np.isfinite(coo.data))
        first = bad[np.lexsort((coo.col[bad], coo.row[bad]))[0]]
        row = start + int(coo.row[first])
        raise ValueError(
            f"{what} holds NaN or infinity ({float(coo.data[first])}) at row {row}, column "
            f"{int(coo.col[first])}, in {_block_of(row, start, start + values.shape[0], step)}:"
            f" the likelihood needs finite values (drop or impute those rows)")
    if values.dtype.kind not in "fc" or _all_finite(values):
        return
    bad = np.argwhere(~np.isfinite(values))[0]
    row = start + int(bad[0])
    where = f"row {row}" + (f", column {int(bad[1])}" if values.ndim == 2 else "")
    raise ValueError(
        f"{what} holds NaN or infinity ({float(values[tuple(bad)])}) at {where}, in "
        f"{_block_of(row, start, start + values.shape[0], step)}: the likelihood needs finite "
        f"values (drop or impute those rows)")


def _all_finite(values):
    """Whether every entry of a dense float array is finite, a stretch of rows at a time into
    a scratch array of this thread (:func:`~._scratch.scratch`: a fresh one as large as
    ``values`` would cost its page faults on every block, 20 ms for a gathered subsample of
    12.5 million values)."""
    rows = max(1, _CHECK_VALUES // max(1, math.prod(values.shape[1:])))
    for start in range(0, values.shape[0], rows):
        part = values[start:start + rows]
        if not np.isfinite(part, out=scratch("finite", part.shape, np.bool_)).all():
            return False
    return True


def check_gathered(X, rows, step, n_rows):
    """Raise the error of a pass (naming the row and its block of ``step`` rows) for the
    non-finite value of gathered rows ``X`` (the rows ``rows`` of a store of ``n_rows``) that a
    pass would meet first: of the lowest row, then the lowest column, whatever order the rows
    were gathered in.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n, d)
    rows : ndarray of int of shape (n,)
    step : int
    n_rows : int
    """
    if sparse.issparse(X):
        if np.isfinite(X.data).all():
            return
        coo = X.tocoo()
        bad = np.flatnonzero(~np.isfinite(coo.data))
        at, columns, values = coo.row[bad], coo.col[bad], coo.data[bad]
    else:
        if _all_finite(X):
            return
        at, columns = np.nonzero(~np.isfinite(X))
        values = X[at, columns]
    first = np.lexsort((columns, np.asarray(rows)[at]))[0]
    row, j, value = int(rows[at[first]]), int(columns[first]), float(values[first])
    raise ValueError(
        f"X holds NaN or infinity ({value}) at row {row}, column {int(j)}, in "
        f"{_block_of(row, 0, n_rows, step)}: the likelihood needs finite values (drop or "
        f"impute those rows)")


def check_weights(w, start, step):
    check_finite(w, "sample_weight", start, step)
    if np.any(w < 0):
        row = start + int(np.flatnonzero(w < 0)[0])
        raise ValueError(
            f"sample_weight is negative at row {row}, in "
            f"{_block_of(row, start, start + w.size, step)}: case weights must be non-negative")


def distinct_values(values):
    """``np.unique(values)``; for integers and booleans (labels, mostly) by their least and
    largest values when those differ by at most one (then both occur and no other value
    does: two packed passes, about 60 times faster than counting one-byte values, which
    ``np.bincount`` widens to ``intp`` first), else by counting for one-byte values, several
    times faster than sorting them.

    Parameters
    ----------
    values : ndarray

    Returns
    -------
    ndarray
        The distinct values, sorted, in ``values``' dtype.
    """
    if values.dtype.kind not in "biu":
        return np.unique(values)
    if values.size:
        numbers = values.view(np.uint8) if values.dtype.kind == "b" else values
        low, high = numbers.min(), numbers.max()
        if int(high) - int(low) <= 1:
            return np.unique(np.array([low, high], dtype=numbers.dtype)).view(values.dtype)
    if values.dtype.itemsize != 1:
        return np.unique(values)
    counts = np.bincount(values.reshape(-1).view(np.uint8), minlength=256)
    present = np.flatnonzero(counts).astype(np.uint8).view(values.dtype)
    return np.sort(present)
