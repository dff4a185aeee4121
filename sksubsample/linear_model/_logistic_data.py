"""What a logistic fit keeps of its data, and the checks of X it makes before sampling.

The fit's data as the posterior hooks read them (:class:`TrainingData`, or columns of a store
read on demand, :class:`StoredRows`), the design with its intercept column, the refusal of
entries whose squares overflow, and the warning that names collinear columns.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from scipy import linalg, sparse

from ..diagnostics import CollinearityWarning

# Eigenvalues of the scaled data information below this (relative to 1 per column) are taken
# as zero: exact collinearity up to the rounding of the sums over the rows.
_COLLINEAR_TOL = 1e-9
# Columns named in the collinearity warning before "and k more".
_NAMED_COLUMNS = 8


class TrainingData(NamedTuple):
    """What the log likelihood, lp and the posterior predictive need of the fit's data."""

    design: object  # ndarray or CSR of shape (n_samples, n_params): X, then a column of ones
    y01: np.ndarray
    weights: np.ndarray | None
    prior_scale: float
    temperature: float


class LabelSigns:
    """The response map of stored labels: ``+1`` for the positive class, ``-1`` otherwise
    (module-level, so that Dask's workers can run it)."""

    def __init__(self, positive):
        self.positive = positive

    def __call__(self, y):
        return np.where(y == self.positive, 1.0, -1.0)


class StoredRows:
    """A stored column of the fit (the design, the 0/1 response or the case weights) seen as an
    array by the hooks of ``to_inference_data``: sliced by blocks of rows or gathered at rows,
    read from the store when asked."""

    def __init__(self, target, column):
        self.target, self.column = target, column
        n = target.n_data
        self.shape = (n, target.n_features) if column == "design" else (n,)

    def _of(self, block):
        if self.column == "design":
            return block.X
        return (block.y > 0).astype(np.float64) if self.column == "y01" else block.w

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.shape[0])
            return self._of(self.target.rows_between(start, stop))
        return self._of(self.target.rows(key))

    def astype(self, dtype):
        return np.asarray(self[0:self.shape[0]]).astype(dtype)


def check_scale(X):
    """Refuse entries whose squares, summed over the rows, overflow float64: the MAP, the
    Laplace covariance and the control variates all need ``XᵀX``."""
    values = X.data if sparse.issparse(X) else X
    if values.size == 0:
        return
    largest = float(np.max(np.abs(values)))
    limit = np.sqrt(np.finfo(np.float64).max / (X.shape[0] * X.shape[1]))
    if largest > limit:
        raise ValueError(
            f"X has entries as large as {largest:.3g} in absolute value: the sums of their "
            f"squares over the {X.shape[0]} samples overflow float64 (the MAP, the Laplace "
            f"covariance and the control variates need XᵀX). Rescale X, e.g. with "
            f"sklearn.preprocessing.StandardScaler."
        )


def _collinear_columns(information):
    """Columns of the design that the data information ``H = Xᵀ W X`` cannot tell apart.

    ``H`` scaled to a unit diagonal is singular exactly when some combination of columns
    carries no information: its null space (eigenvalues below :data:`_COLLINEAR_TOL`) gives,
    for each column, the share of it that lies there. Returns the indices of the columns with
    a share above 10⁻⁶, and those of the columns that carry no information at all.
    """
    diag = np.diag(information).copy()
    empty = np.flatnonzero(~(diag > 0))
    scale = np.sqrt(np.where(diag > 0, diag, 1.0))
    scaled = information / np.outer(scale, scale)
    scaled[empty, :] = 0.0
    scaled[:, empty] = 0.0
    scaled[empty, empty] = 1.0
    eigenvalues, eigenvectors = linalg.eigh(0.5 * (scaled + scaled.T))
    null = eigenvectors[:, eigenvalues < _COLLINEAR_TOL]
    shares = np.sum(null**2, axis=1)
    return np.flatnonzero(shares > 1e-6), empty


def with_intercept(X):
    """``[X, 1]``, kept sparse (CSR) when X is."""
    ones = np.ones((X.shape[0], 1))
    if sparse.issparse(X):
        return sparse.hstack([X, sparse.csr_matrix(ones)], format="csr")
    return np.column_stack([X, ones])




def warn_collinear(information, features, intercept, stacklevel):
    """Warn, naming them, about columns the data information cannot tell apart
    (``stacklevel``: that of the user's call of ``fit``)."""
    collinear, empty = _collinear_columns(information)
    collinear = np.setdiff1d(collinear, empty)

    def columns(indices):
        named = [features[j] for j in indices if j < len(features)]
        listed = ", ".join(named[:_NAMED_COLUMNS])
        if len(named) > _NAMED_COLUMNS:
            listed += f" and {len(named) - _NAMED_COLUMNS} more"
        return f"column{'s' if len(named) > 1 else ''} {listed} of X"

    parts = []
    if collinear.size:
        with_intercept = intercept and collinear[-1] == len(features)
        parts.append(columns(collinear) + (" and the intercept" if with_intercept else "")
                     + " are collinear: the data determine only combinations of their "
                     "coefficients")
    if empty.size:
        parts.append(columns(empty) + " are zero wherever a sample has weight")
    if parts:
        warnings.warn(
            "; ".join(parts) + ". Along those directions the posterior is the prior "
            "(prior_scale sets its width), so those coefficients cannot be read one by one; "
            "drop or combine the columns to avoid it.",
            CollinearityWarning, stacklevel=stacklevel)
