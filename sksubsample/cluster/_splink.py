"""Scored record pairs in, what :class:`~sksubsample.CorefGibbsClusterer` takes out.

:func:`pairwise_log_potentials` reads the predictions of a record-linkage model (Splink's
``SplinkDataFrame``, a pandas or Arrow table with ``unique_id_l``, ``unique_id_r`` and
``match_weight`` or ``match_probability``, or recordlinkage's probabilities indexed by record
pairs) with whole-column operations (no Python loop per pair), checks them, and returns
:class:`RecordPairs`: the pairs as positions of records sorted by id, their log-odds, and,
when Splink's ``Linker`` is given, what the records model of :mod:`._records` needs besides:
each pair's per-comparison log Bayes factors and levels, the pairs of records that blocking did
not propose but that share a small connected component of the pair graph (scored by the
linker), the m-probabilities of the exact levels and the prior probability of a match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

__all__ = ["RecordPairs", "pairwise_log_potentials"]

_LN2 = math.log(2.0)
#: Unproposed pairs of a connected component scored through the linker, at most (memory and
#: the linker's time grow with them); past it only the proposed pairs of the largest
#: components are known to the records model.
_MAX_EXTRA_PAIRS = 20_000_000


@dataclass(frozen=True, eq=False)
class RecordPairs:
    """Scored pairs of records, ready for ``CorefGibbsClusterer(metric="precomputed")``.

    Records are numbered ``0..n_records-1`` in ascending order of ``ids``: the order of the
    clusterer's ``labels_`` and ``coreference_matrix()``.

    Attributes
    ----------
    ids : ndarray of shape (n_records,)
        The record ids, ascending.
    pairs : ndarray of int64 of shape (n_pairs, 2)
        Positions ``(i, j)``, ``i < j``, of the scored pairs.
    log_odds : ndarray of shape (n_pairs,)
        Posterior match log-odds of each pair (natural log: ``match_weight · ln 2``).
    proposed : ndarray of bool of shape (n_pairs,)
        Whether the pair was in the predictions (``False``: scored by the linker because it
        shares a connected component of the predictions' pair graph).
    comparisons : tuple of str or None
        Names of the linker's comparisons (None without a linker).
    comparison_log_bf : ndarray of shape (n_pairs, n_comparisons) or None
        Per-comparison log Bayes factor of each pair (natural log, term-frequency adjustments
        included when the linker makes them).
    exact : ndarray of bool of shape (n_pairs, n_comparisons) or None
        Whether the pair is at the comparison's top level (the values agree exactly).
    null : ndarray of bool of shape (n_pairs, n_comparisons) or None
        Whether the comparison is null for the pair (a value missing).
    log_m_exact : ndarray of shape (n_comparisons,) or None
        ``log m`` of each comparison's top level.
    prior_log_odds : float
        ``log(λ / (1 - λ))`` of the linker's probability ``λ`` that two random records match
        (NaN without a linker).
    moved_comparisons : tuple of tuple of str
        The address blocks: each a tuple of the comparisons that change together when a
        person moves (a postcode and a city; an email; a phone), a block's values moving
        independently of the other blocks' (empty: no move term in the records model). A
        flat tuple of names is one block.
    move_rate : tuple of float
        Per block, the prior probability ``ρ`` that an entity's records hold two of its
        values (0: no move term for that block); a float with one block.
    """

    ids: np.ndarray
    pairs: np.ndarray
    log_odds: np.ndarray
    proposed: np.ndarray
    comparisons: tuple | None = None
    comparison_log_bf: np.ndarray | None = None
    exact: np.ndarray | None = None
    null: np.ndarray | None = None
    log_m_exact: np.ndarray | None = None
    prior_log_odds: float = math.nan
    moved_comparisons: tuple = ()
    move_rate: tuple | float = ()

    def move_blocks(self):
        """The address blocks with their move rates, ``((names, ρ), ...)``."""
        blocks = self.moved_comparisons
        if not blocks:
            return ()
        if all(isinstance(c, str) for c in blocks):
            blocks = (tuple(blocks),)
        rates = self.move_rate
        rates = (rates,) if np.ndim(rates) == 0 else tuple(rates)
        if len(rates) != len(blocks):
            raise ValueError(f"move_rate holds {len(rates)} rate(s) for {len(blocks)} "
                             "address block(s)")
        return tuple((tuple(b), float(r)) for b, r in zip(blocks, rates, strict=True))

    @property
    def n_records(self):
        return int(self.ids.shape[0])

    @property
    def has_records_model(self):
        """Whether the linker's comparisons are known (the records model can be fitted)."""
        return self.comparison_log_bf is not None

    @property
    def shape(self):
        """``(n_records, n_records)``, as the matrix :meth:`to_sparse` returns."""
        return (self.n_records, self.n_records)

    def checked(self):
        """These pairs, after checking that they are what the attributes above say: an error
        names the attribute and the first row that is not (a pair out of range, listed twice
        or with ``i >= j``, a length that does not match, a NaN or ``+inf`` log-odds or Bayes
        factor, a comparison both exact and null). :func:`pairwise_log_potentials` builds
        them so; pairs built by hand are checked when fitted.

        Returns
        -------
        RecordPairs
        """
        ids, pairs = np.asarray(self.ids), np.asarray(self.pairs)
        if ids.ndim != 1 or (ids.size > 1 and not np.all(ids[1:] > ids[:-1])):
            raise ValueError("RecordPairs.ids must be one-dimensional, ascending and unique")
        n = ids.size
        if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
            raise ValueError(f"RecordPairs.pairs must be integers of shape (n_pairs, 2), got "
                             f"{pairs.dtype} of shape {pairs.shape}")
        n_pairs = pairs.shape[0]
        _check_rows(~((pairs >= 0) & (pairs < n)).all(axis=1), "pairs",
                    f"names a position outside 0..{n - 1}")
        _check_rows(pairs[:, 0] >= pairs[:, 1], "pairs", "is not (i, j) with i < j")
        key = pairs[:, 0].astype(np.int64) * n + pairs[:, 1]
        order = np.argsort(key, kind="stable")
        twice = np.flatnonzero(key[order][1:] == key[order][:-1])
        if twice.size:
            raise ValueError(f"RecordPairs.pairs: rows {order[twice[0]]} and "
                             f"{order[twice[0] + 1]} are the same pair")
        _check_field(self.log_odds, (n_pairs,), "log_odds")
        _check_field(self.proposed, (n_pairs,), "proposed", kinds="b")
        log_odds = np.asarray(self.log_odds, dtype=np.float64)
        _check_rows(np.isnan(log_odds) | (log_odds == np.inf), "log_odds", "is NaN or +inf")
        if self.comparison_log_bf is None:
            return self
        F = len(self.comparisons or ())
        _check_field(self.comparison_log_bf, (n_pairs, F), "comparison_log_bf")
        _check_field(self.exact, (n_pairs, F), "exact", kinds="b")
        _check_field(self.null, (n_pairs, F), "null", kinds="b")
        _check_field(self.log_m_exact, (F,), "log_m_exact")
        log_bf = np.asarray(self.comparison_log_bf, dtype=np.float64)
        _check_rows(~np.isfinite(log_bf).all(axis=1), "comparison_log_bf", "is not finite")
        _check_rows((np.asarray(self.exact) & np.asarray(self.null)).any(axis=1), "exact",
                    "is exact on a comparison that null says is missing")
        log_m = np.asarray(self.log_m_exact, dtype=np.float64)
        if not (np.all(log_m <= 0.0) and math.isfinite(self.prior_log_odds)):
            raise ValueError("RecordPairs: log_m_exact must be finite logs of probabilities "
                             "(<= 0) and prior_log_odds finite")
        return self

    def to_sparse(self):
        """The symmetric CSR matrix of the proposed pairs' log-odds (the pairwise CRF's
        input: unstored pairs are ``-repulsion``), rows in the order of ``ids``."""
        keep = self.proposed
        i, j, v = self.pairs[keep, 0], self.pairs[keep, 1], self.log_odds[keep]
        n = self.n_records
        out = sparse.csr_matrix((np.r_[v, v], (np.r_[i, j], np.r_[j, i])), shape=(n, n))
        out.sort_indices()
        return out


def _check_field(values, shape, name, kinds="fiu"):
    values = np.asarray(values)
    if values.shape != shape or values.dtype.kind not in kinds:
        what = "booleans" if kinds == "b" else "numbers"
        raise ValueError(f"RecordPairs.{name} must be {what} of shape {shape} (one row per "
                         f"pair), got {values.dtype} of shape {values.shape}")


def _check_rows(bad, name, what):
    if bad.any():
        raise ValueError(f"RecordPairs.{name}: row {_first_bad(bad)} {what}")


#: The columns of Splink's predictions that are read: the ids, the weights and the
#: per-comparison levels and factors (not the records' values, strings mostly).
_READ = ("unique_id_l", "unique_id_r", "match_weight", "match_probability")
_READ_PREFIXES = ("gamma_", "bf_", "mw_")


def _splink_arrow(pairs):
    """The columns read of a SplinkDataFrame, as an Arrow table from DuckDB (None on another
    backend): a fraction of the memory of the whole table in pandas."""
    try:
        rel = pairs.as_duckdbpyrelation()
    except (NotImplementedError, AttributeError, TypeError):
        return None
    keep = [c for c in rel.columns if c in _READ or c.startswith(_READ_PREFIXES)]
    return rel.select(*[f'"{c}"' for c in keep]).to_arrow_table()


def _table(pairs):
    """Column access to ``pairs``: ``(names, get(name) -> ndarray, source)``."""
    if hasattr(pairs, "as_pandas_dataframe") and hasattr(pairs, "physical_name"):
        # A SplinkDataFrame: its numeric columns through Arrow on DuckDB, else pandas.
        table = _splink_arrow(pairs)
        pairs = pairs.as_pandas_dataframe() if table is None else table
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas comes with Splink and recordlinkage
        pd = None
    if pd is not None and isinstance(pairs, pd.Series):
        index = pairs.index
        if not isinstance(index, pd.MultiIndex) or index.nlevels != 2:
            raise ValueError("pairs: a pandas Series must be indexed by record pairs (a "
                             "2-level MultiIndex, as recordlinkage returns its probabilities)")
        frame = pd.DataFrame({"unique_id_l": index.get_level_values(0),
                              "unique_id_r": index.get_level_values(1),
                              "match_probability": pairs.to_numpy()})
        return _table(frame)
    if pd is not None and isinstance(pairs, pd.DataFrame):
        if isinstance(pairs.index, pd.MultiIndex) and "unique_id_l" not in pairs.columns:
            pairs = pairs.reset_index(names=["unique_id_l", "unique_id_r"])
        names = [str(c) for c in pairs.columns]
        return names, lambda name: pairs[name].to_numpy(), "pandas"
    if hasattr(pairs, "column_names") and hasattr(pairs, "column"):  # pyarrow.Table
        names = list(pairs.column_names)
        return names, lambda name: pairs.column(name).to_numpy(zero_copy_only=False), "arrow"
    raise TypeError("pairs must be a SplinkDataFrame, a pandas DataFrame, a pyarrow Table or "
                    "recordlinkage's pandas Series of probabilities indexed by record pairs, "
                    f"got {type(pairs).__name__}")


def _show(value):
    """An id as the user wrote it (a NumPy scalar shown as its Python value)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _first_bad(mask):
    return int(np.flatnonzero(mask)[0])


def sorted_search(sorted_values, values):
    """Positions of ``values`` in ``sorted_values``, and which of them are not there (searched
    for, a missing value stands for its neighbour: the caller names it instead)."""
    if sorted_values.size == 0:
        return np.zeros(len(values), dtype=np.int64), np.ones(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_values, values), sorted_values.size - 1)
    return at, sorted_values[at] != values


def _positions(values, ids, column, table="pairs"):
    """Positions of ``values`` (the column ``column`` of ``table``) in the sorted ``ids``; an
    error names the first unknown id."""
    where, bad = sorted_search(ids, values)
    if bad.any():
        row = _first_bad(bad)
        raise ValueError(f"{table}: row {row} names the record {_show(values[row])} in column "
                         f"{column!r}, which is not in ids")
    return where.astype(np.int64)


def _place(name):
    """How a position in ``name`` is called: a row of the pairs' table, else a position."""
    return "in row" if name.startswith("pairs") else "at position"


def _where_missing(values, name):
    """Where the first missing id (None, or a float that is not finite) of the object array
    ``values`` is, as the end of an error message ("" when every id is present). A Python
    loop, run only when some id is None or a float."""
    for k, v in enumerate(values):
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return f": {v!r} {_place(name)} {k}"
    return ""


def _as_ids(values, name):
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
    if values.dtype == object:
        # (every value's type, not a sample's: a None past the sample would have become the
        # string 'None', an id like any other)
        kinds = set(map(type, values))
        where = _where_missing(values, name) if float in kinds or type(None) in kinds else ""
        if where:
            raise ValueError(f"{name} holds missing ids (None or NaN){where}")
        # (one kind or the other, never a mix: "007" read as the integer 7 would be the same
        # record as 7)
        if all(issubclass(k, str) for k in kinds):
            values = values.astype(str)
        elif all(issubclass(k, (int, np.integer)) and not issubclass(k, (bool, np.bool_))
                 for k in kinds):
            try:
                values = values.astype(np.int64)
            except OverflowError:
                info = np.iinfo(np.int64)
                row = next(k for k, v in enumerate(values) if not info.min <= v <= info.max)
                raise _beyond_int64(name, values[row], row) from None
        else:
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise TypeError(f"{name} must hold integers or strings (one kind, not a mix), "
                            f"got values of types {names}")
    if values.dtype.kind == "f":
        if not np.isfinite(values).all():
            row = _first_bad(~np.isfinite(values))
            raise ValueError(f"{name} holds missing or infinite ids (NaN, inf): "
                             f"{float(values[row])!r} {_place(name)} {row}")
        if not np.all(values == np.round(values)):
            raise TypeError(f"{name} must hold integers or strings, got fractional numbers")
        values = values.astype(np.int64)
    if values.dtype.kind not in "iuUS":
        raise TypeError(f"{name} must hold integers or strings, got dtype {values.dtype}")
    if values.dtype.kind in "iu":
        # (every integer id as int64: int64 ids of one column and uint64 ids of another
        # would meet as float64, where ids past 2^53 collide)
        values = _unsigned_as_int64(values, name) if values.dtype.kind == "u" else \
            values.astype(np.int64, copy=False)
    return values


def _beyond_int64(name, value, row):
    return ValueError(f"{name} holds an id beyond the range of int64 ({int(value)}) "
                      f"{_place(name)} {row}: pass such ids as strings")


def _unsigned_as_int64(values, name):
    """Unsigned integer ids as int64, or an error naming the first id beyond its range."""
    beyond = values > np.iinfo(np.int64).max
    if beyond.any():
        row = _first_bad(beyond)
        raise _beyond_int64(name, values[row], row)
    return values.astype(np.int64)


def _numbers(values, column):
    """The column ``column`` of the pairs as float64, or an error naming it."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"pairs: column {column!r} must hold numbers ({exc})") from exc


def _log_odds(names, get):
    if "match_weight" in names:
        column = "match_weight"
        values = _numbers(get(column), column) * _LN2
    elif "match_probability" in names:
        column = "match_probability"
        p = _numbers(get(column), column)
        bad = ~((p > 0.0) & (p < 1.0))
        if bad.any():
            row = _first_bad(bad)
            raise ValueError(f"pairs: column 'match_probability' must lie strictly between 0 "
                             f"and 1 (its log-odds must be finite), got {float(p[row])!r} in row "
                             f"{row}; pass 'match_weight' for pairs beyond float precision")
        values = np.log(p) - np.log1p(-p)
    else:
        raise ValueError("pairs must have a 'match_weight' or a 'match_probability' column, "
                         f"got columns {names}")
    bad = ~np.isfinite(values)
    if bad.any():
        row = _first_bad(bad)
        raise ValueError(f"pairs: column {column!r} holds a non-finite value "
                         f"({float(values[row] / (_LN2 if column == 'match_weight' else 1.0))!r}) "
                         f"in row {row}")
    return values


def pairwise_log_potentials(pairs, ids=None, *, linker=None, moves="auto"):
    """Log-potentials of scored record pairs for ``CorefGibbsClusterer(metric="precomputed")``.

    Parameters
    ----------
    pairs : SplinkDataFrame, pandas.DataFrame, pyarrow.Table or pandas.Series
        The scored pairs: columns ``unique_id_l``, ``unique_id_r`` and ``match_weight``
        (Splink's, in bits) or ``match_probability``; or recordlinkage's probabilities (a
        Series indexed by record pairs). Each unordered pair at most once, no record paired
        with itself. With ``linker``, Splink's per-comparison columns ``gamma_<name>`` (and
        ``bf_<name>``/``mw_<name>`` when the linker retains them) are read as well.
    ids : array-like of shape (n_records,), optional
        Every record's id (integers or strings, one kind: integer ids of any width are read
        as int64), in any order: the result numbers the records in ascending order of
        ``ids``, records with no pair included (as singletons). By default the records named
        by the pairs.
    linker : splink.Linker, optional
        The Splink model that scored the pairs. It adds, for the records model: the pairs of
        records in one connected component of the pair graph of at most 128 records that
        blocking did not propose (scored by the linker, so that every pair a cluster can hold
        there is known; a larger component keeps its proposed pairs), each pair's
        per-comparison Bayes factors and levels, the trained m-probabilities and the prior
        probability that two records match.
    moves : "auto", None, sequence of str or sequence of sequences of str, default "auto"
        With ``linker``: the address blocks, each the comparisons that a person's move
        changes together (the records model lets an entity's records hold two values of
        each block, the blocks independently): a sequence of names is one block, a sequence
        of sequences one block each; ``"auto"`` takes one block of the comparisons whose
        names hold ``postcode``, ``post_code``, ``postal``, ``zip``, ``city``, ``town``,
        ``suburb``, ``address`` or ``street``, one of those that hold ``email`` or
        ``e_mail`` and one of those that hold ``phone`` (the empty ones left out); None: no
        move term. Each block's prior probability of two values is estimated from the pairs
        (``RecordPairs.move_rate``).

    Returns
    -------
    RecordPairs
        Pass it to ``CorefGibbsClusterer(metric="precomputed").fit``: with a linker the fit
        samples the records model; without one, the pairwise CRF of the proposed pairs'
        log-odds (as its :meth:`RecordPairs.to_sparse` matrix would).

    Raises
    ------
    ValueError
        A missing column (named), a pair naming a record not in ``ids``, a record paired with
        itself, a pair listed twice, a NaN or infinite weight or a weight that is not a
        number, a missing id (None or NaN) or an integer id beyond int64 (the row is named),
        duplicate ``ids``.
    TypeError
        ``pairs`` of an unknown type, ids neither integers nor strings, or a mix of both.

    References
    ----------
    I. P. Fellegi and A. B. Sunter. A theory for record linkage. JASA 64 (1969) (the match
    weight). R. Linacre et al. Splink: free software for probabilistic record linkage at scale.
    IJPDS 7(3), 2022.

    Examples
    --------
    >>> import pandas as pd
    >>> from sksubsample.cluster import pairwise_log_potentials
    >>> pred = pd.DataFrame({"unique_id_l": [3, 1], "unique_id_r": [1, 7],
    ...                      "match_weight": [10.0, -3.0]})
    >>> X = pairwise_log_potentials(pred, ids=[1, 3, 7, 9])
    >>> X.ids.tolist(), X.pairs.tolist()
    ([1, 3, 7, 9], [[0, 1], [0, 2]])
    >>> X.to_sparse().shape
    (4, 4)
    """
    if isinstance(moves, str) and moves != "auto":
        raise ValueError(f"moves must be 'auto', None or a sequence of comparison names, got "
                         f"{moves!r}")
    if moves is not None and not isinstance(moves, str):
        try:
            moves = tuple(moves)
            if not all(isinstance(c, str) for c in moves):
                moves = tuple(tuple(block) for block in moves)
        except TypeError as exc:
            raise TypeError("moves must be 'auto', None, a sequence of comparison names or "
                            f"of sequences of them, got {moves!r}") from exc
        if not all(isinstance(c, str) or all(isinstance(d, str) for d in c) for c in moves):
            raise TypeError(f"moves must hold comparison names (str), got {moves!r}")
    names, get, _ = _table(pairs)
    for column in ("unique_id_l", "unique_id_r"):
        if column not in names:
            raise ValueError(f"pairs has no column {column!r} (columns: {names})")
    left = _as_ids(get("unique_id_l"), "pairs['unique_id_l']")
    right = _as_ids(get("unique_id_r"), "pairs['unique_id_r']")
    log_odds = _log_odds(names, get)
    if ids is None:
        all_ids = np.unique(np.concatenate([left.astype(np.result_type(left, right)),
                                            right.astype(np.result_type(left, right))]))
    else:
        given = _as_ids(ids, "ids")
        all_ids = np.unique(given)
        if all_ids.size != given.size:
            raise ValueError(f"ids holds {given.size - all_ids.size} duplicate id(s)")
        if all_ids.size == 0:
            raise ValueError("ids must name at least one record")
    if (left.dtype.kind in "US") != (all_ids.dtype.kind in "US"):
        raise TypeError("pairs' ids and ids must both be integers or both be strings")
    i = _positions(left, all_ids, "unique_id_l")
    j = _positions(right, all_ids, "unique_id_r")
    self_pair = i == j
    if self_pair.any():
        row = _first_bad(self_pair)
        raise ValueError(f"pairs: row {row} pairs the record {_show(left[row])} with itself")
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    order = np.lexsort((hi, lo))
    dup = (lo[order][1:] == lo[order][:-1]) & (hi[order][1:] == hi[order][:-1])
    if dup.any():
        k = _first_bad(dup)
        a, b = sorted((int(order[k]), int(order[k + 1])))
        raise ValueError(f"pairs: rows {a} and {b} are the same pair of records "
                         f"({_show(left[a])}, {_show(right[a])})")
    result = dict(ids=all_ids, pairs=np.column_stack([lo, hi]), log_odds=log_odds,
                  proposed=np.ones(lo.size, dtype=bool))
    if linker is not None:
        from ._splink_linker import linker_pairs

        result = linker_pairs(linker, result, names, get, moves)
    return RecordPairs(**result)


def component_pairs(n, pairs, limit=_MAX_EXTRA_PAIRS, up_to=None):
    """The pairs ``(i, j)``, ``i < j``, of records in one connected component of the graph of
    ``pairs`` that ``pairs`` does not hold; components of at most ``up_to`` records
    (:data:`~._records.DENSE_UP_TO` when None) taken smallest first until ``limit`` pairs (the
    larger components keep only their proposed pairs: the records model's clusters there are
    connected in the pair graph, see :mod:`._records_sparse`)."""
    from . import _records

    up_to = _records.DENSE_UP_TO if up_to is None else up_to
    graph = sparse.coo_matrix((np.ones(pairs.shape[0]), (pairs[:, 0], pairs[:, 1])),
                              shape=(n, n))
    _, label = connected_components(graph, directed=False)
    sizes = np.bincount(label)
    # Components small enough, smallest first, within the budget of pairs.
    multi = np.flatnonzero((sizes > 1) & (sizes <= up_to))
    multi = multi[np.argsort(sizes[multi], kind="stable")]
    budget = np.cumsum(sizes[multi] * (sizes[multi] - 1) // 2)
    multi = multi[budget <= limit]
    keep = np.isin(label, multi)
    members = np.flatnonzero(keep)
    members = members[np.argsort(label[members], kind="stable")]
    comp = label[members]
    counts = sizes[comp]
    # All pairs of each component: member a of a block of size s pairs with those after it.
    first = np.r_[0, np.flatnonzero(np.diff(comp)) + 1]
    rank = np.arange(members.size) - np.repeat(first, np.diff(np.r_[first, members.size]))
    after = counts - 1 - rank
    left = np.repeat(members, after)
    start = np.repeat(np.arange(members.size) + 1 - (np.cumsum(after) - after), after)
    right = members[np.arange(left.size) + start]
    lo, hi = np.minimum(left, right), np.maximum(left, right)
    key = lo * n + hi
    known = pairs[:, 0] * n + pairs[:, 1]
    new = ~np.isin(key, known)
    return np.column_stack([lo[new], hi[new]]), label
