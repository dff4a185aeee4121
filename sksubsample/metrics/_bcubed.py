"""The B³ (B-cubed) clustering score of Bagga & Baldwin (1998), averaged over mentions."""

from __future__ import annotations

import numpy as np
from sklearn.metrics.cluster import contingency_matrix

__all__ = ["b_cubed_score"]


def _labels(labels, name):
    """One label per mention: a 1-d array (a column vector is raveled), or a ValueError."""
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of labels, one per mention, got shape "
                         f"{labels.shape}")
    return labels


def b_cubed_score(labels_true, labels_pred):
    """Mention-averaged B³ precision, recall and F1 of a clustering.

    For mention ``i`` with true cluster ``G(i)`` and predicted cluster ``C(i)``, B³ scores
    ``|C(i) ∩ G(i)| / |C(i)|`` (precision) and ``|C(i) ∩ G(i)| / |G(i)|`` (recall), and
    averages each over the ``n`` mentions with equal weights. Summed cell by cell of the
    contingency table ``n_gc = |G_g ∩ C_c|`` (every mention of a cell has the same terms)::

        precision = (1/n) Σ_{g,c} n_gc² / |C_c|,    recall = (1/n) Σ_{g,c} n_gc² / |G_g|,

    which costs ``O(n)`` through a sparse contingency table. F1 is the harmonic mean of the
    two. Averaging per cluster instead (as some packages do) weights small clusters more and
    is a different score.

    Parameters
    ----------
    labels_true : array-like of shape (n_samples,)
        Reference entity of each mention (any hashable labels).
    labels_pred : array-like of shape (n_samples,)
        Predicted cluster of each mention.

    Returns
    -------
    precision : float
    recall : float
    f1 : float
        All in (0, 1]; each is 1 exactly when the clusterings agree.

    Raises
    ------
    ValueError
        When the label arrays are empty, not 1-D or of different lengths.

    References
    ----------
    A. Bagga and B. Baldwin. Algorithms for Scoring Coreference Chains. LREC 1998
    (the B³ algorithm, entity weights ``1/n``); used as the F1 of Chen & Ghahramani (2016), §5.3.

    Examples
    --------
    >>> p, r, f = b_cubed_score([0, 0, 0, 1], [0, 0, 1, 1])
    >>> round(p, 4), round(r, 4), round(f, 4)
    (0.75, 0.6667, 0.7059)
    """
    labels_true = _labels(labels_true, "labels_true")
    labels_pred = _labels(labels_pred, "labels_pred")
    if labels_true.shape != labels_pred.shape:
        raise ValueError(f"labels_true and labels_pred must label the same mentions, got "
                         f"{labels_true.size} and {labels_pred.size} labels")
    n = labels_true.shape[0]
    if n == 0:
        raise ValueError("labels_true and labels_pred must hold at least one mention")
    table = contingency_matrix(labels_true, labels_pred, sparse=True).tocoo()
    counts = table.data.astype(np.float64)
    true_sizes = np.bincount(table.row, weights=counts)
    pred_sizes = np.bincount(table.col, weights=counts)
    squares = counts * counts
    precision = float(np.sum(squares / pred_sizes[table.col]) / n)
    recall = float(np.sum(squares / true_sizes[table.row]) / n)
    f1 = 2.0 * precision * recall / (precision + recall)
    return precision, recall, f1
