"""The records model: each record a distorted copy of its entity's latent values.

Entity resolution in the manner of blink and d-blink (Steorts 2015; Marchant et al. 2021):
an entity has a latent value for each comparison ``c`` of the linkage model (a name, a date of
birth, an address); each of its records copies that value or distorts it, and the distortion is
measured by the linkage model's own comparison levels. With Fellegi-Sunter parameters
``m_ℓ, u_ℓ`` of a comparison's levels, two records of one entity agree exactly with probability
``m_ex ≈ (1 - β)²`` (``β`` the distortion rate of one record), so a record agrees exactly with
its latent value with probability ``√m_ex``, and its likelihood ratio against the latent value
``v`` is

    b(x, v) = B(x, v) / √m_ex        if x = v (the top, exact level),
    b(x, v) = B(x, v) / (2 √m_ex)    at any other level ℓ,

``B = m_ℓ / u_ℓ`` the pair's Bayes factor (term-frequency adjusted as the linker does): the
factor 2 because of a pair that disagrees, either record may carry the entity's value. The
latent value is integrated out over the values the cluster's records carry (d-blink's
prototypes), each distinct value counted once; a cluster ``C`` with ``C*`` the records whose
value of ``c`` is not missing has, against the same records as singletons,

    Λ_c(C) = √m_ex · Σ_{k ∈ C*} (1 / n_k) Π_{r ∈ C* \\ k} b(x_r, x_k)     (|C*| >= 2),

and ``Λ_c(C) = 1`` otherwise, ``n_k`` the records of ``C*`` that agree exactly with ``k``. For
two records ``Π_c Λ_c`` is exactly the pair's Bayes factor: the model reproduces Splink's
pairwise evidence, and a cluster of ``s`` records that agree gathers ``s - 1`` factors, not
``s (s - 1) / 2``: evidence grows with the records, not with their pairs.

**Moves.** The comparisons of an address block ``G`` (a postcode and a city; an email; a
phone: what a person's move changes together) may take two values per entity instead of one:
with prior probability ``ρ_G`` an entity holds two values of the block, and each of its
records holds either with probability 1/2, independently of the other blocks. With
``A_G(r, k) = Σ_{c ∈ G} log b_c(x_r, x_k)`` (0 for a missing value) and ``C_G`` the records of
``C`` with a value of the block (``|C_G| >= 2``),

    Λ_G(C) = (1 - ρ_G + ρ_G 2^{1 - |C_G|}) Π_{c ∈ G} Λ_c(C) + ρ_G M_G Σ_{k < l}
             Π_{r ∈ C \\ {k, l}} (e^{A_G(r,k)} + e^{A_G(r,l)}) / 2,   M_G = Π_{c ∈ G} m_ex,c / 2,

the first term one value (no move, or a move whose records all hold one of the two), the
second two values held by the roots ``k`` and ``l`` (one root per distinct value, the record
of lowest index holding it; each root holds its value exactly, ``√m_ex`` per comparison, and
chose it, 1/2), every other record choosing either: the choice is summed inside each record's
factor, so the evidence of a move is paid once per entity and block (``log ρ_G``) and its
records' disagreement with the other value not at all. A cluster's likelihood is
``Π_{c ∉ ∪G} Λ_c(C) Π_G Λ_G(C)``: a mover whose records at the earlier address hold the earlier
email or the current one has two addresses and two emails (three tuples), which the blocks
``{postcode, city}`` and ``{email}`` hold and one block of the three would not. Each ``ρ_G``
is estimated from the pairs by :func:`~._splink_linker.move_rate`. Costs ``O(d² |C|)`` per
block for ``d`` distinct values.

The partition has the Ewens prior ``p(Z) ∝ α^K Π_C (|C| - 1)!`` with ``α = (1 - λ) / λ``,
``λ`` the linker's probability that two random records match (Ewens' ``P(i ~ j) = 1 / (1 +
α) = λ``), so that an isolated pair's posterior match probability is Splink's. Co-referent
records lie in one connected component of the pair graph (the predictions' pairs): a pair
blocking did not propose is still compared when its records share a component of at most
:data:`DENSE_UP_TO` records (the linker scores it), so every pair a cluster can hold there
carries its comparisons; components are independent given the model. The posterior ``p(Z |
records) ∝ p(Z) Π_C Π_c Λ_c(C)`` is exchangeable (a product partition model), sampled by
Gibbs updates that score every cluster of a record's component (:mod:`._records_sweep`), with
split-merge moves (:mod:`._records_split_merge`), the components of at most four records drawn
whole (:mod:`._records_exact`). Larger components keep their stored pairs only, a pair not
stored carries no comparison (as in a dense block), and the clusters there are connected in
the pair graph (:mod:`._records_sparse`: the same model where the linker scored every pair,
its restriction to those partitions where it did not), sampled on that layout in time and
memory linear in the pairs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from ..algorithms.kernels import njit
from ._records_scratch import count_tables

__all__ = ["DENSE_UP_TO", "RecordsModel", "records_model"]

#: Bytes of the dense per-component comparison blocks at most (the model of a component of
#: ``m`` records holds ``m²`` entries per comparison): the largest components beyond it are
#: laid out sparse.
MAX_BLOCK_BYTES = 2 << 30

#: Components of more than this many records are laid out on their stored pairs alone
#: (:mod:`._records_sparse`); the linker scores every pair of the smaller ones
#: (:func:`~._splink.component_pairs`), so that the two layouts hold the same model.
DENSE_UP_TO = 128

#: Bytes per entry of those blocks: ``a`` and its exponentials ``e^a``, ``e^-a`` (float64),
#: exact agreement (uint8).
BYTES_PER_ENTRY = 25

#: Bytes per pair of a component's records that a chain keeps besides: the memo of scores
#: and merged cohesions with their versions (:class:`~._records_cache.ClusterCache`), float64
#: or int64, and whether the model links the pair on its own (a byte).
BYTES_PER_PAIR = 8 * 5 + 1

#: Bytes per pair of a component's records and address block: the block's pair weights of
#: the clusters and of the split-merge moves' scratch ones (float64).
BYTES_PER_BLOCK_PAIR = 8 * 2


class RecordsModel(NamedTuple):
    """The records model of one fit, laid out for the compiled sweeps.

    Records are permuted so that each connected component is a contiguous range:
    ``perm[cstart[c]:cstart[c + 1]]`` are the records of component ``c`` (``perm[p]`` is the
    record at permuted position ``p``). Component ``c`` of ``m`` records keeps, from
    ``boff[c]``, a dense ``(F, m, m)`` block of ``a_c(i, j)`` (``adj``: ``log b`` less
    ``log √m_ex``, 0 for a missing or unscored comparison) and of exact agreement (``exm``).
    Each address block ``b`` adds a slot, its move term (``move_slots[b]``, after the
    comparisons): ``group`` marks the block's comparisons (``b + 1``; 0 outside every block) and
    that slot (``-(b + 1)``), which holds the block's summed factors ``A`` and whether two
    records hold the same address; ``move_rate[b]`` is the block's ``ρ``. ``bexp`` and ``binv``
    hold ``exp(adj)`` and ``exp(-adj)``, the factors the cached cluster statistics multiply by
    (:mod:`._records_cache`); ``log_int[k] = log k`` for the exact counts. ``counts`` holds
    ``log k``, ``log Γ(k)`` and per block (row ``2 + b``) the log prior weight of one address
    among ``k`` records with one, and ``move_log[b]`` that of two addresses (less the move
    slot's ``log √m_ex``), for the counts and sizes of the dense components' clusters
    (:func:`~._records_scratch.count_tables`: the same bits as computing them in place).

    ``cstart`` covers the dense components only; the sparse ones (:mod:`._records_sparse`)
    follow them, component ``c`` at ``scstart[c]:scstart[c + 1]``, their stored pairs as rows
    of neighbours: ``sp_nbr[sp_ptr[p]:sp_ptr[p + 1]]`` the positions paired with position
    ``p`` (ascending), ``sp_adj``/``sp_exm`` ``(F, entries)`` their ``a`` and exact agreement
    (entry-major views, as ``nonnull`` is record-major: the sparse layout reads each record's
    or entry's slots together), and ``sp_mexp`` ``(entries, B)`` the exponentials of their
    move slots' ``a`` (``move_slots[b]`` in column ``b``; what the sparse scores multiply, a
    sixteenth of the bytes of the entries' slots for two blocks, without an exponential per
    score and pair; entry-major and C-ordered whatever ``B``: a transposed view would be
    typed C-ordered for one block and F-ordered for several, and each layout compiles the
    sweeps' kernels again).
    ``init`` holds the initial local labels of every component.
    """

    n: int
    n_comparisons: int
    perm: np.ndarray
    inverse: np.ndarray
    cstart: np.ndarray
    boff: np.ndarray
    adj: np.ndarray
    exm: np.ndarray
    nonnull: np.ndarray
    half_log_m: np.ndarray
    log_alpha: float
    init: np.ndarray
    n_pairs: int
    group: np.ndarray
    move_rate: float
    bexp: np.ndarray
    log_int: np.ndarray
    binv: np.ndarray
    scstart: np.ndarray
    sp_ptr: np.ndarray
    sp_nbr: np.ndarray
    sp_adj: np.ndarray
    sp_exm: np.ndarray
    counts: np.ndarray
    move_log: np.ndarray
    move_slots: np.ndarray
    sp_mexp: np.ndarray


def records_model(X, dense_up_to=None):
    """The :class:`RecordsModel` of a :class:`~._splink.RecordPairs` with a linker's
    comparisons; the components of more than ``dense_up_to`` records (:data:`DENSE_UP_TO`
    when None, less when the dense blocks would exceed :data:`MAX_BLOCK_BYTES`) on their
    stored pairs alone (:mod:`._records_sparse`)."""
    n, F = X.n_records, len(X.comparisons)
    pairs = X.pairs
    blocks = [(np.array([c in names for c in X.comparisons], dtype=bool), rate)
              for names, rate in X.move_blocks()]
    blocks = [(inside, rate) for inside, rate in blocks if inside.any() and rate > 0.0]
    n_slots = F + len(blocks)
    graph = sparse.coo_matrix((np.ones(pairs.shape[0]), (pairs[:, 0], pairs[:, 1])),
                              shape=(n, n))
    n_comp, label = connected_components(graph, directed=False)
    sizes = np.bincount(label, minlength=n_comp).astype(np.int64)
    limit = _dense_limit(sizes, n_slots, len(blocks),
                         DENSE_UP_TO if dense_up_to is None else dense_up_to)
    # Dense components first (in the order of their labels), then the sparse ones.
    big = sizes > limit
    order = np.argsort(big * n_comp + np.arange(n_comp), kind="stable")
    rank = np.empty(n_comp, dtype=np.int64)
    rank[order] = np.arange(n_comp)
    label = rank[label]
    sizes = sizes[order]
    n_dense = int(n_comp - big.sum())
    perm = np.argsort(label, kind="stable").astype(np.int64)
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = np.arange(n)
    every = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    cstart, scstart = every[:n_dense + 1], every[n_dense:]
    dsizes = sizes[:n_dense]
    boff = np.r_[0, np.cumsum(n_slots * dsizes * dsizes)].astype(np.int64)
    half = 0.5 * np.asarray(X.log_m_exact, dtype=np.float64)
    exact = X.exact & ~X.null
    value = np.where(X.null, 0.0, X.comparison_log_bf - half[None, :]
                     - math.log(2.0) * ~exact)
    # A record's value of a comparison is missing when every pair of it is null there.
    seen = np.zeros((F, n), dtype=bool)
    for f in range(F):
        nn = ~X.null[:, f]
        seen[f, pairs[nn, 0]] = True
        seen[f, pairs[nn, 1]] = True
    group = np.zeros(n_slots, dtype=np.int64)
    rho = np.array([rate for _, rate in blocks], dtype=np.float64)
    move_values, move_same = [], []
    for b, (inside, _) in enumerate(blocks):
        group[:F][inside] = b + 1
        group[F + b] = -(b + 1)
        # The block's factors of a record against an address held by another record.
        move_values.append(value[:, inside].sum(axis=1))
        # Same address: equal on every comparison of the block (both missing, or exact).
        sb = seen[inside]
        move_same.append(np.all(exact[:, inside] | (~sb[:, pairs[:, 0]]
                                                    & ~sb[:, pairs[:, 1]]).T, axis=1)
                         & exact[:, inside].any(axis=1))
    half_move = np.array([2.0 * half[inside].sum() - math.log(2.0) for inside, _ in blocks])
    if blocks:
        value = np.column_stack([value, *move_values])
        exact = np.column_stack([exact, *move_same])
        half = np.r_[half, half_move]
    comp = label[pairs[:, 0]]
    dense = comp < n_dense
    adj, exm = _dense_blocks(pairs[dense], comp[dense], inverse, cstart, boff, dsizes,
                             value[dense], exact[dense], n_slots)
    odds = X.comparison_log_bf.sum(axis=1) + X.prior_log_odds
    sp_ptr, sp_nbr, sp_adj, sp_exm, which = _sparse_rows(pairs[~dense], inverse, n,
                                                         value[~dense], exact[~dense])
    # Record-major (a record's slots side by side): the sparse layout reads a record's slots
    # together for records scattered over a large component, one cache line for them all.
    nonnull = np.zeros((n, n_slots), dtype=np.uint8).T
    nonnull[:F, inverse] = seen
    for b, (inside, _) in enumerate(blocks):
        nonnull[F + b, inverse] = seen[inside].any(axis=0)
    init = _initial(pairs, odds > 0.0, n, perm, sizes)
    top = int(dsizes.max(initial=0)) + 2
    counts, move_log = count_tables(top, rho, half_move)
    move_slots = np.arange(F, n_slots, dtype=np.int64)
    model = RecordsModel(n, n_slots, perm, inverse, cstart, boff, adj, exm, nonnull, half,
                        -float(X.prior_log_odds), init, int(pairs.shape[0]), group, rho,
                        np.exp(adj), np.log(np.maximum(np.arange(top), 1.0)),
                        _exp_negative(adj), scstart, sp_ptr, sp_nbr, sp_adj, sp_exm, counts,
                        move_log, move_slots, _move_exponentials(sp_adj, move_slots))
    if scstart.size > 1:
        from ._records_sparse import strong_cliques

        strong_cliques(model, (odds[~dense] > 0.0)[which], init)
    return model


def _dense_limit(sizes, n_slots, n_blocks, up_to):
    """The largest component size kept dense: at most ``up_to``, and lower while the dense
    blocks and pair statistics would exceed :data:`MAX_BLOCK_BYTES`."""
    candidates = np.unique(sizes[sizes <= up_to])
    for m in candidates[::-1]:
        keep = sizes[sizes <= m]
        held = int(np.sum(keep * keep)) * (n_slots * BYTES_PER_ENTRY + BYTES_PER_PAIR
                                           + n_blocks * BYTES_PER_BLOCK_PAIR)
        if held <= MAX_BLOCK_BYTES:
            return int(m)
    return 1


def _dense_blocks(pairs, comp, inverse, cstart, boff, sizes, value, exact, n_slots):
    """The dense ``(F, m, m)`` blocks of ``a`` and exact agreement of the dense components'
    pairs, both orientations."""
    adj = np.zeros(int(boff[-1]))
    exm = np.zeros(int(boff[-1]), dtype=np.uint8)
    _fill_blocks(pairs, comp, inverse, cstart, boff, sizes, value, exact, n_slots, adj, exm)
    return adj, exm


@njit
def _fill_blocks(pairs, comp, inverse, cstart, boff, sizes, value, exact, n_slots, adj, exm):
    # One pass per slot and orientation, in the pairs' order (a pair stored twice keeps its
    # last entry): compiled, without the index arrays that each slot's writes needed.
    for f in range(n_slots):
        for orient in range(2):
            for e in range(pairs.shape[0]):
                c = comp[e]
                m = sizes[c]
                li = inverse[pairs[e, orient]] - cstart[c]
                lj = inverse[pairs[e, 1 - orient]] - cstart[c]
                at = boff[c] + (f * m + li) * m + lj
                adj[at] = value[e, f]
                exm[at] = exact[e, f]


@njit
def _move_exponentials(sp_adj, move_slots):
    """``exp(sp_adj[move_slots[b], e])`` at ``[e, b]``, by the compiled ``math.exp`` (the
    function the sparse scores took it with in place: the same bits)."""
    out = np.empty((sp_adj.shape[1], move_slots.size))
    for e in range(sp_adj.shape[1]):
        for b in range(move_slots.size):
            out[e, b] = math.exp(sp_adj[move_slots[b], e])
    return out


def _exp_negative(adj):
    """``exp(-adj)`` in one array (no temporary ``-adj`` as large as the blocks)."""
    out = np.negative(adj)
    return np.exp(out, out=out)


def _sparse_rows(pairs, inverse, n, value, exact):
    """The sparse components' pairs as rows of neighbours over the permuted positions (each
    pair in both rows, each row ascending): ``(ptr, nbr, adj (F, nnz), exm (F, nnz), which)``,
    ``which[e]`` the pair of entry ``e``."""
    i, j = inverse[pairs[:, 0]], inverse[pairs[:, 1]]
    rows = np.concatenate([i, j])
    cols = np.concatenate([j, i])
    order = np.lexsort((cols, rows))
    which = np.concatenate([np.arange(i.size), np.arange(i.size)])[order]
    ptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=n))].astype(np.int64)
    # Entry-major, ``(F, nnz)`` views of ``(nnz, F)`` arrays: an entry's slots are read
    # together.
    adj = np.ascontiguousarray(value[which]).T
    exm = np.ascontiguousarray(exact[which].astype(np.uint8)).T
    return ptr, cols[order].astype(np.int64), adj, exm, which


def _initial(pairs, strong, n, perm, sizes):
    """The initial partition: connected components of the pairs the model links on their own
    (posterior match log-odds > 0 as an isolated pair), numbered locally per component (the
    sparse components' replaced by :func:`~._records_sparse.strong_cliques`)."""
    sgraph = sparse.coo_matrix((np.ones(int(strong.sum())), (pairs[strong, 0],
                                                             pairs[strong, 1])), shape=(n, n))
    _, slabel = connected_components(sgraph, directed=False)
    n_comp = sizes.size
    ordered = slabel[perm]
    comp_of = np.repeat(np.arange(n_comp), sizes)
    o = np.lexsort((ordered, comp_of))
    new = np.r_[True, (ordered[o][1:] != ordered[o][:-1]) | (comp_of[o][1:] != comp_of[o][:-1])]
    start = np.cumsum(new) - 1
    first = np.empty(n_comp, dtype=np.int64)
    first[comp_of[o][::-1]] = start[::-1]  # the cluster of each component's first entry
    init = np.empty(n, dtype=np.int64)
    init[o] = start - first[comp_of[o]]
    return init
