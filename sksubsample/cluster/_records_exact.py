"""Exact draws of the records model's small components.

A component of ``m <= EXACT_UP_TO`` records has at most Bell(4) = 15 partitions: their log
posteriors (:func:`~._records_scratch.records_log_posterior`'s terms, from the root sums) are
computed once, and each sweep draws the component's partition from them, tempered (``p^{1/T}``,
normalised), independently of its current one: a Gibbs update of the whole component, which is
independent of the others given the model. It replaces the component's single-record updates
and split-merge moves, mixes at once, and costs one draw among at most 15 weights.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit
from ._records_cache import component
from ._records_scratch import cohesion, root_sums
from ._records_sweep import build_component
from ._sweeps import softmax_weights, weights_draw

__all__ = ["EXACT_UP_TO", "PARTITIONS", "TABLE", "exact_draws", "small_log_posteriors",
           "tempered_weights"]

#: Components of at most this many records are drawn exactly.
EXACT_UP_TO = 4


def _partitions(m):
    """The partitions of ``m`` records as restricted growth strings (labels ``0..k-1`` in
    order of first appearance), one per row."""
    rows = [[0]]
    for _ in range(m - 1):
        rows = [[*r, k] for r in rows for k in range(max(r) + 2)]
    return np.array(rows, dtype=np.int64)


#: ``PARTITIONS[m]``: the partitions of ``m`` records (``m <= EXACT_UP_TO``), one per row.
PARTITIONS = tuple(_partitions(max(m, 1)) for m in range(EXACT_UP_TO + 1))

#: The same for the compiled code: ``TABLE[m, k, :m]`` is row ``k`` of ``PARTITIONS[m]``, rows
#: past the last filled with -1.
TABLE = np.full((EXACT_UP_TO + 1, PARTITIONS[-1].shape[0], EXACT_UP_TO), -1, dtype=np.int64)
for _m in range(2, EXACT_UP_TO + 1):
    TABLE[_m, :PARTITIONS[_m].shape[0], :_m] = PARTITIONS[_m]


def small_log_posteriors(md):
    """``(offset, logp)``: the log posterior (up to a constant per component) of each
    partition of each component of 2 to :data:`EXACT_UP_TO` records,
    ``logp[offset[c] + k]`` for row ``k`` of ``PARTITIONS[m]``; ``offset[c] = -1`` for the
    other components."""
    sizes = np.diff(md.cstart)
    small = (sizes >= 2) & (sizes <= EXACT_UP_TO)
    counts = np.where(small, [PARTITIONS[min(s, EXACT_UP_TO)].shape[0] for s in sizes], 0)
    offset = np.where(small, np.cumsum(counts) - counts, -1).astype(np.int64)
    logp = np.zeros(int(counts.sum()))
    _fill(md, offset, TABLE, logp)
    return offset, logp


@njit
def _fill(md, offset, table, logp):
    F = md.n_comparisons
    R = np.zeros((F, md.n))
    N = np.zeros((F, md.n), dtype=np.int64)
    z = np.zeros(md.n, dtype=np.int64)
    members = np.empty(EXACT_UP_TO, dtype=np.int64)
    extra = np.zeros((2, F, EXACT_UP_TO + 1))
    for c in range(md.cstart.size - 1):
        if offset[c] < 0:
            continue
        lo, m, base = md.cstart[c], md.cstart[c + 1] - md.cstart[c], md.boff[c]
        every = np.arange(m)
        for k in range(table.shape[1]):
            if table[m, k, 0] < 0:
                break
            for i in range(m):
                z[lo + i] = table[m, k, i]
            root_sums(md.adj, md.exm, md.nonnull, base, m, lo, F, every, m, z, True, R, N)
            total = 0.0
            for g in range(m):
                count = 0
                for i in range(m):
                    if z[lo + i] == g:
                        members[count] = i
                        count += 1
                if count > 0:
                    total += md.log_alpha + math.lgamma(count) + cohesion(
                        md.half_log_m, md.nonnull, R, N, lo, members, count, F, extra,
                        md.group, md.move_rate, md.bexp, md.exm, base, m, md.counts[0])
            logp[offset[c] + k] = total


def tempered_weights(offset, logp):
    """Room for the tempered weights of :func:`exact_draws`: ``(weights, kept)``, the weights
    laid out as ``logp``, and per component the inverse temperature they were computed at
    (NaN: none yet) and their sum."""
    return np.empty_like(logp), np.full((offset.size, 2), np.nan)


@njit
def exact_draws(md, cache, inv_t, rng, offset, logp, table, first, stop, weights, kept):
    """Draw the partition of every small component of ``first`` to ``stop - 1`` from its
    tempered posterior (``table``: :data:`TABLE`); a component whose partition changes gets
    the drawn row's labels and its statistics rebuilt. A component's softmax weights are
    kept in ``weights`` and ``kept`` (:func:`tempered_weights`) and computed again only at
    another temperature: the draws at ``T = 1`` reuse them (the same weights, as many
    exponentials fewer). Returns the number of components that changed."""
    seen = np.empty(EXACT_UP_TO, dtype=np.int64)
    changed = 0
    for c in range(first, stop):
        if offset[c] < 0:
            continue
        lo, m, _, _ = component(cache, md.cstart, md.boff, c)
        at = offset[c]
        n_parts = 0
        while n_parts < table.shape[1] and table[m, n_parts, 0] >= 0:
            n_parts += 1
        own = weights[at:at + n_parts]
        if kept[c, 0] != inv_t:
            for a in range(n_parts):
                own[a] = logp[at + a] * inv_t
            _, total = softmax_weights(own, n_parts)
            kept[c, 0], kept[c, 1] = inv_t, total
        u = rng.random()
        if not (0.0 < kept[c, 1] < math.inf):  # never: the log posteriors are finite
            continue
        k = weights_draw(own, n_parts, kept[c, 1], u)
        # The current partition in restricted-growth form, against the drawn row.
        n_seen = 0
        same = True
        for i in range(m):
            g = -1
            for s in range(n_seen):
                if seen[s] == cache.z[lo + i]:
                    g = s
            if g < 0:
                seen[n_seen] = cache.z[lo + i]
                g = n_seen
                n_seen += 1
            same = same and g == table[m, k, i]
        if same:
            continue
        for i in range(m):
            cache.z[lo + i] = table[m, k, i]
        build_component(md, cache, c)
        changed += 1
    return changed
