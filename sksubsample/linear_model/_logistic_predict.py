"""Posterior-predictive answers of a fitted logistic regression, from its draws.

Every prediction averages (or returns per draw) ``p(y | x, θ)`` over the stored posterior
draws θ, reading X in blocks of rows so that the ``(rows, draws)`` matrix of logits stays near
32 MB; X stored out of memory is read block by block, never whole.
"""

from __future__ import annotations

import numpy as np
from scipy import special
from sklearn.utils.validation import check_is_fitted

from ..algorithms.stores import RowStore, is_out_of_core


class PosteriorPredictiveMixin:
    """``decision_function``, ``predict_proba``, ``predict_log_proba`` and ``predict`` of a
    fitted binary classifier with ``coef_samples_``, ``intercept_samples_``, ``classes_`` and
    ``_validate_X``."""

    def decision_function(self, X):
        """Posterior-predictive log-odds ``log p(y=1|x) - log p(y=0|x)``.

        ``p(y=1|x)`` averages ``σ(xᵀw + b)`` over all draws; the log-odds are computed in log
        space (log-mean-exp of ``log σ(±z)``), so they stay finite for ``|z| > 700``.

        Parameters
        ----------
        X : {array-like, sparse matrix, stored array} of shape (n_samples, n_features)
            X stored out of memory (memory map, zarr, Dask) is read block by block.

        Returns
        -------
        ndarray of shape (n_samples,)
            Positive values predict ``classes_[1]``.
        """
        check_is_fitted(self)
        coef = self.coef_samples_.reshape(-1, self.n_features_in_)
        intercept = self.intercept_samples_.reshape(-1)
        n_rows, blocks = self._row_blocks(X, coef.shape[0])
        out = np.empty(n_rows)
        for rows, block in blocks:
            z = np.asarray(block @ coef.T) + intercept
            log_p1 = special.logsumexp(special.log_expit(z), axis=1)
            log_p0 = special.logsumexp(special.log_expit(-z), axis=1)
            out[rows] = log_p1 - log_p0
        return out

    def _row_blocks(self, X, n_draws):
        """``(n_rows, blocks)``: X validated, in ``(slice, rows)`` blocks small enough for a
        (rows, draws) logit matrix near 32 MB; X stored out of memory is read block by
        block (as float64), never whole."""
        step = max(1, (1 << 22) // n_draws)
        if not is_out_of_core(X):
            X = self._validate_X(X, reset=False)
            return X.shape[0], ((slice(a, a + step), X[a:a + step])
                                for a in range(0, X.shape[0], step))
        store = RowStore(X)
        if store.n_features != self.n_features_in_:
            raise ValueError(f"X has {store.n_features} features, but "
                             f"{type(self).__name__} is expecting {self.n_features_in_} "
                             "features as input.")
        return store.n_rows, _stored_blocks(store, step)

    def predict_proba(self, X, *, return_draws=False):
        """Posterior-predictive class probabilities, averaged over the draws or per draw.

        Parameters
        ----------
        X : {array-like, sparse matrix, stored array} of shape (n_samples, n_features)
            X stored out of memory (memory map, zarr, Dask) is read block by block.
        return_draws : bool, default False
            False: ``p(y | x, data)``, the average of ``p(y | x, θ)`` over every draw θ (the
            posterior predictive). True: ``p(y | x, θ)`` for every draw, in the order of
            :meth:`sample_posterior` (chain after chain), e.g. for credible intervals of a
            prediction; their mean over the first axis is the default output (up to
            rounding). The array holds ``2 × n_chains × n_draws × n_samples`` values.

        Returns
        -------
        ndarray of shape (n_samples, 2) or (n_chains * n_draws, n_samples, 2)
            The second with ``return_draws=True``. Columns in the order of ``classes_``.
        """
        if not return_draws:
            dec = self.decision_function(X)
            return np.column_stack([special.expit(-dec), special.expit(dec)])
        check_is_fitted(self)
        coef = self.coef_samples_.reshape(-1, self.n_features_in_)
        intercept = self.intercept_samples_.reshape(-1)
        n_rows, blocks = self._row_blocks(X, coef.shape[0])
        out = np.empty((coef.shape[0], n_rows, 2))
        for rows, block in blocks:
            z = (np.asarray(block @ coef.T) + intercept).T
            out[:, rows, 0] = special.expit(-z)
            out[:, rows, 1] = special.expit(z)
        return out

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed without underflow.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Columns in the order of ``classes_``.
        """
        dec = self.decision_function(X)
        return np.column_stack([special.log_expit(-dec), special.log_expit(dec)])

    def predict(self, X):
        """The class with the larger posterior-predictive probability.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        dec = self.decision_function(X)
        return self.classes_[(dec > 0).astype(int)]


def _stored_blocks(store, step):
    """``(rows, X[rows] as float64)`` in blocks of ``step`` rows of a store, then the store's
    check that its file did not change while they were read (a block read past the end of a
    file cut short meanwhile holds zeros: the check raises)."""
    for a in range(0, store.n_rows, step):
        b = min(store.n_rows, a + step)
        yield slice(a, b), store.read(a, b).X.astype(np.float64)
    store.check_unchanged()
