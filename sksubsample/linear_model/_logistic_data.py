"""What a logistic fit keeps of its data, and the checks of X it makes before sampling.

The fit's data as the posterior hooks read them (:class:`TrainingData`: columns of the target's
rows read on demand, :class:`StoredRows`, wherever the rows are), the map of labels to signs,
and the warning that names collinear columns.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from scipy import linalg

from ..diagnostics import CollinearityWarning, CostWarning

# Eigenvalues of the scaled data information below this (relative to 1 per column) are taken
# as zero: exact collinearity up to the rounding of the sums over the rows.
_COLLINEAR_TOL = 1e-9
# Columns named in the collinearity warning before "and k more".
_NAMED_COLUMNS = 8


class TrainingData(NamedTuple):
    """What the log likelihood, lp and the posterior predictive need of the fit's data."""

    design: object  # StoredRows of shape (n_samples, n_params): X, then a column of ones
    y01: np.ndarray
    weights: np.ndarray | None
    prior_scale: float
    temperature: float

    def check_unchanged(self):
        """Raise when the fit's rows changed while the chains ran (see
        :meth:`~sksubsample.algorithms.stores.RowStore.check_unchanged`)."""
        self.design.target.store.check_unchanged()


class LabelSigns:
    """The response map of stored labels: ``+1`` for the positive class, ``-1`` otherwise
    (module-level, so that Dask's workers can run it)."""

    def __init__(self, positive):
        self.positive = positive

    def __call__(self, y):
        return self.into(y, np.empty(np.shape(y), dtype=np.float64))

    def into(self, y, out):
        """The signs of the labels ``y`` written into the float64 array ``out`` (a pass's
        scratch), which is returned."""
        # (2 [y = positive] - 1 in place: a seventh of np.where's time on int8 labels, which
        # every pass over the rows and every refill of a chain's rows pays; the comparison's
        # booleans cast as they are written, without a temporary)
        signs = np.equal(y, self.positive, out=out, casting="unsafe")
        signs *= 2.0
        signs -= 1.0
        return signs


class StoredRows:
    """A column of the fit's rows (the design, the 0/1 response or the case weights) seen as an
    array by the hooks of ``to_inference_data`` and ``sample_exact``: sliced by blocks of rows
    or gathered at rows, read from the target's rows when asked (never copied whole but by
    ``np.asarray``)."""

    def __init__(self, target, column):
        self.target, self.column = target, column
        n = target.n_data
        self.shape = (n, target.n_features) if column == "design" else (n,)

    def _of(self, block):
        if self.column == "design":
            return block.X
        return (block.y > 0).astype(np.float64) if self.column == "y01" else block.w

    def __getitem__(self, key):
        return self._of(self.target.rows(key))

    def __array__(self, dtype=None, copy=None):
        values = np.asarray(self[0:self.shape[0]])
        return values if dtype is None else values.astype(dtype)

    def astype(self, dtype):
        return np.asarray(self).astype(dtype)


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


#: Parameters from which a design wider than it is long is warned about: the chains' steps
#: and the set-up work with dense (d, d) matrices, whose cost grows as d**2 to d**3 a step.
WIDE_PARAMETERS = 1000


def warn_wide(n_data, dim, n_steps, stacklevel):
    """Warn, before any work, that a design with more parameters ``dim`` than rows ``n_data``
    (and at least :data:`WIDE_PARAMETERS`) makes every step cost like a dense (d, d) matrix
    product or factorization, for ``n_steps`` steps in all (``stacklevel``: that of the
    user's call of ``fit``)."""
    if dim <= n_data or dim < WIDE_PARAMETERS:
        return
    warnings.warn(
        f"X has {dim} parameters for {n_data} rows: the posterior is then mostly the prior's "
        f"(prior_scale), and every MH step works with dense {dim} x {dim} matrices (a "
        f"proposal, a preconditioner), so this fit's {n_steps} steps (n_chains x (n_warmup + "
        f"n_draws)) may take hours. Reduce the features first (feature selection, PCA, "
        f"hashing to fewer columns), or try a short fit (n_warmup=50, n_draws=50) to time a "
        f"step; subsampling rows does not help when rows are few.",
        CostWarning, stacklevel=stacklevel)


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
