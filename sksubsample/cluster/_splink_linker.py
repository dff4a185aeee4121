"""What a Splink ``Linker`` adds to its predictions for the records model.

The records model (:mod:`._records`) scores a cluster from the comparisons of its records with
the cluster's latent values, so it needs, for every pair of records that can share a cluster,
each comparison's level and Bayes factor. The predictions hold them for the proposed pairs
(``gamma_<name>``; the Bayes factors when the linker retains its intermediate columns); the
pairs of one connected component of the pair graph (of at most
:data:`~._records.DENSE_UP_TO` records) that blocking did not propose are scored here by the
same linker (``register_blocked_pairs_for_predict`` then ``predict``), so that the
model is evaluated on Splink's own comparisons, term-frequency adjustments included.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ._splink import (
    _LN2,
    _first_bad,
    _numbers,
    _positions,
    _show,
    _table,
    component_pairs,
    sorted_search,
)

__all__ = ["ADDRESS_WORDS", "linker_pairs", "move_block", "move_rate"]

#: Words that name a comparison of an address block when ``moves="auto"``, one group of
#: words per block: a move changes the fields of a postal address together, while a person
#: keeps or changes an email and a phone number on their own (each block holds up to two
#: values per entity, independently of the others).
ADDRESS_WORDS = (("postcode", "post_code", "postal", "zip", "city", "town", "suburb",
                  "address", "street"), ("email", "e_mail"), ("phone",))


def _model(linker):
    """``(names, log m of the top level, gamma of the top level, log Bayes factor per level,
    λ)``, with the m and u Splink predicts with: trained values, or Splink's defaults for the
    levels it could not train (e.g. of a comparison a training blocking rule fixed)."""
    try:
        model = linker.misc.save_model_to_json()
        comparisons = linker._settings_obj.comparisons
    except AttributeError as exc:
        raise TypeError("linker must be a splink.Linker (Splink 4 or later), got "
                        f"{type(linker).__name__}") from exc
    names, log_m, top, tables = [], [], [], []
    for comparison in comparisons:
        levels = [lv for lv in comparison.comparison_levels if not lv.is_null_level]
        m = np.array([np.nan if lv.m_probability is None else lv.m_probability
                      for lv in levels], dtype=np.float64)
        u = np.array([np.nan if lv.u_probability is None else lv.u_probability
                      for lv in levels], dtype=np.float64)
        name = comparison.output_column_name
        if not (np.isfinite(m[0]) and m[0] > 0.0):
            raise ValueError(f"linker: the top level of comparison {name!r} has no "
                             "m-probability; train the model first")
        names.append(name)
        log_m.append(math.log(m[0]))
        # Splink numbers the non-null levels from the top: L - 1 down to 0 (null is -1).
        top.append(len(levels) - 1)
        # A level without m or u counts as no evidence (Bayes factor 1) where the predictions
        # do not carry the factors themselves.
        with np.errstate(divide="ignore", invalid="ignore"):
            table = np.log(m[::-1]) - np.log(u[::-1])  # indexed by gamma
        tables.append(np.where(np.isfinite(table), table, 0.0))
    lam = float(model["probability_two_random_records_match"])
    if not 0.0 < lam < 1.0:
        raise ValueError(f"linker: probability_two_random_records_match must lie in (0, 1), "
                         f"got {lam!r}")
    return names, np.array(log_m), np.array(top), tables, lam


def _comparison_columns(names, get, comparisons, tables):
    """``(gamma, log_bf)`` of each comparison from a prediction table's columns, or None when
    the gamma columns are missing; the Bayes factors from ``mw_``/``bf_`` columns (term
    frequencies included), else from the levels' m and u."""
    if not all(f"gamma_{c}" in names for c in comparisons):
        return None
    n_rows = get(f"gamma_{comparisons[0]}").shape[0]
    gamma = np.empty((n_rows, len(comparisons)), dtype=np.int64)
    log_bf = np.empty((n_rows, len(comparisons)))
    for k, c in enumerate(comparisons):
        gamma[:, k] = _levels(get(f"gamma_{c}"), f"gamma_{c}", tables[k].size)
        if f"mw_{c}" in names:
            value = np.asarray(get(f"mw_{c}"), dtype=np.float64)
            if f"mw_tf_adj_{c}" in names:
                value = value + np.nan_to_num(np.asarray(get(f"mw_tf_adj_{c}"),
                                                         dtype=np.float64))
            log_bf[:, k] = value * _LN2
        elif f"bf_{c}" in names:
            value = np.log(np.asarray(get(f"bf_{c}"), dtype=np.float64))
            if f"bf_tf_adj_{c}" in names:
                value = value + np.log(np.asarray(get(f"bf_tf_adj_{c}"), dtype=np.float64))
            log_bf[:, k] = value
        else:
            g = gamma[:, k]
            log_bf[:, k] = np.where(g >= 0, tables[k][np.maximum(g, 0)], 0.0)
    null = gamma < 0
    log_bf[null] = 0.0
    bad = ~np.isfinite(log_bf)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"pairs: row {row} has a non-finite Bayes factor")
    return gamma, log_bf


def _levels(values, column, n_levels):
    """A ``gamma_`` column as int64 levels, each -1 (null) to ``n_levels - 1`` (the top), or an
    error naming the row of the first that is not (a missing value cast to int64 had become
    a very negative level, read as null)."""
    values = _numbers(values, column)
    bad = ~(np.isfinite(values) & (values == np.round(values)) & (values >= -1)
            & (values < n_levels))
    if bad.any():
        row = _first_bad(bad)
        raise ValueError(f"pairs: column {column!r} holds {float(values[row])!r} in row {row}, "
                         f"not a level of the linker's comparison (-1 for null, 0 to "
                         f"{n_levels - 1}): were the pairs predicted by this linker?")
    return values.astype(np.int64)


@contextlib.contextmanager
def _intermediate_columns(linker):
    """Splink's predictions with per-comparison Bayes factors for the duration (restored)."""
    settings = linker._settings_obj
    before = settings._retain_intermediate_calculation_columns
    settings._retain_intermediate_calculation_columns = True
    try:
        yield
    finally:
        settings._retain_intermediate_calculation_columns = before


def _score(linker, ids, pairs):
    """Splink's predictions of the record pairs ``pairs`` (positions into ``ids``): ``(names,
    get)`` of their columns read (:func:`~._splink._table`)."""
    import pandas as pd

    cache = linker._intermediate_table_cache
    before = set(cache.keys())
    table = pd.DataFrame({"match_key": "0", "join_key_l": ids[pairs[:, 0]],
                          "join_key_r": ids[pairs[:, 1]]})
    registered = linker._db_api.register(table)
    linker.table_management.register_blocked_pairs_for_predict(registered)
    try:
        with _intermediate_columns(linker):
            names, get, _ = _table(linker.inference.predict(warning_mode="never"))
    finally:
        # Leave the linker as it was: its next predict() blocks with its own rules again.
        for key in set(cache.keys()) - before:
            del cache[key]
    return names, get


def move_block(comparisons, moves):
    """The address blocks, a tuple of tuples of comparison names: ``moves`` itself (a
    sequence of names, one block, or of sequences of names, a block each; checked against
    ``comparisons``), the comparisons whose names hold a word of each group of
    :data:`ADDRESS_WORDS` (``"auto"``; a comparison whose name holds an email or phone word
    in the email's or phone's block, empty blocks left out), or none (``None``); ``moves``
    was checked by the caller."""
    if moves is None:
        return ()
    if isinstance(moves, str):
        # The most specific kind first: an "email_address" is an email, not a postal
        # address.
        kinds = [next((k for k in (1, 2, 0) if any(word in c.lower()
                                                   for word in ADDRESS_WORDS[k])), -1)
                 for c in comparisons]
        blocks = (tuple(c for c, kind in zip(comparisons, kinds, strict=True) if kind == k)
                  for k in range(len(ADDRESS_WORDS)))
        return tuple(block for block in blocks if block)
    blocks = (moves,) if all(isinstance(c, str) for c in moves) else moves
    named = [c for block in blocks for c in block]
    unknown = [c for c in named if c not in comparisons]
    if unknown:
        raise ValueError(f"moves names comparisons the linker does not have: {unknown} "
                         f"(its comparisons: {list(comparisons)})")
    if len(set(named)) < len(named):
        raise ValueError(f"moves names a comparison in two blocks: {list(moves)}")
    return tuple(tuple(c for c in comparisons if c in block) for block in blocks if block)


def move_rate(comparisons, block, exact, null, log_bf, proposed, blocks=None):
    """The prior probability ``ρ`` that an entity holds two values of the address block
    ``block``, from the proposed pairs that agree exactly on every comparison they hold
    outside every address block (``blocks``; ``block`` alone when None), two at least, and
    hold one of ``block``'s: such a pair of an entity with two values straddles them with
    probability 1/2 (each record holds either), and then the block's evidence is negative;
    so ``ρ = 2 q``, ``q`` the fraction of them whose block's log Bayes factor is below 0
    (with ``+1/2`` in the count, and at most 0.9). 0 when no pair qualifies or the block is
    empty."""
    named = set(block) if blocks is None else {c for b in blocks for c in b}
    if not block or len(named) == len(comparisons):
        return 0.0
    inside = np.array([c in block for c in comparisons])
    outside = np.array([c not in named for c in comparisons])
    other_exact = exact[:, outside]
    other_null = null[:, outside]
    sure = (proposed & np.all(other_exact | other_null, axis=1)
            & (other_exact.sum(axis=1) >= 2) & ~np.all(null[:, inside], axis=1))
    n_sure = int(sure.sum())
    if n_sure == 0:
        return 0.0
    straddle = int((log_bf[sure][:, inside].sum(axis=1) < 0.0).sum())
    return min(0.9, 2.0 * (straddle + 0.5) / (n_sure + 1.0))


def _scored_positions(ids, get, column):
    """The positions in ``ids`` (sorted) of the ids of the column ``column`` of the linker's
    scores (:func:`~._splink._positions`: an id not in ``ids`` is an error)."""
    try:
        values = np.asarray(get(column)).astype(ids.dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"linker: its records' ids are not of the kind of ids "
                         f"({ids.dtype}): {exc}") from exc
    return _positions(values, ids, column, "the linker's scores of the pairs")


def _rows_of(key, want, ids, pairs):
    """The rows of the linker's predictions (keys ``key``) of the pairs asked for (keys
    ``want``), or an error naming a pair it did not score (searched for, another pair's row
    would have stood for it)."""
    order = np.argsort(key)
    at, missing = sorted_search(key[order], want)
    if missing.any():
        a, b = pairs[int(np.flatnonzero(missing)[0])]
        raise ValueError(f"linker: it did not score the pair of records {_show(ids[a])} and "
                         f"{_show(ids[b])} (in one connected component of the pairs): were the "
                         f"pairs predicted by this linker, on these records?")
    return order[at]


def linker_pairs(linker, result, names, get, moves="auto"):
    """Add the records model's inputs from ``linker`` to ``result`` (the pairs' fields)."""
    comparisons, log_m, top, tables, lam = _model(linker)
    blocks = move_block(comparisons, moves)
    ids, pairs = result["ids"], result["pairs"]
    columns = _comparison_columns(names, get, comparisons, tables)
    n = ids.size
    extra, _ = component_pairs(n, pairs)
    if columns is None or not any(f"mw_{c}" in names or f"bf_{c}" in names
                                  for c in comparisons):
        # The predictions lack the per-comparison factors: score the proposed pairs again.
        to_score = np.concatenate([pairs, extra])
        proposed = np.r_[np.ones(pairs.shape[0], bool), np.zeros(extra.shape[0], bool)]
        log_odds = np.r_[result["log_odds"], np.zeros(extra.shape[0])]
    else:
        to_score = extra
    if to_score.shape[0]:
        fnames, fget = _score(linker, ids, to_score)
        scored = _comparison_columns(fnames, fget, comparisons, tables)
        left = _scored_positions(ids, fget, "unique_id_l")
        right = _scored_positions(ids, fget, "unique_id_r")
        lo, hi = np.minimum(left, right), np.maximum(left, right)
        # Back to the order of ``to_score``.
        where = _rows_of(lo * n + hi, to_score[:, 0] * n + to_score[:, 1], ids, to_score)
        s_gamma, s_bf = scored[0][where], scored[1][where]
        s_odds = np.asarray(fget("match_weight"), dtype=np.float64)[where] * _LN2
    if to_score is extra:
        gamma = np.concatenate([columns[0], s_gamma]) if extra.shape[0] else columns[0]
        log_bf = np.concatenate([columns[1], s_bf]) if extra.shape[0] else columns[1]
        proposed = np.r_[np.ones(pairs.shape[0], bool), np.zeros(extra.shape[0], bool)]
        log_odds = np.r_[result["log_odds"], s_odds if extra.shape[0] else []]
    else:
        gamma, log_bf = s_gamma, s_bf
        log_odds = np.where(proposed, log_odds, s_odds)
    exact, null = gamma == top[None, :], gamma < 0
    return dict(ids=ids, pairs=np.concatenate([pairs, extra]), log_odds=log_odds,
                proposed=proposed, comparisons=tuple(comparisons), comparison_log_bf=log_bf,
                exact=exact, null=null, log_m_exact=log_m,
                prior_log_odds=math.log(lam) - math.log1p(-lam), moved_comparisons=blocks,
                move_rate=tuple(move_rate(comparisons, block, exact, null, log_bf, proposed,
                                          blocks) for block in blocks))
