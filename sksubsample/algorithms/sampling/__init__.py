"""Random draws the samplers share: data indices without replacement, and Gumbel variates.

Two laws of index batches serve the package. Both give each batch as a uniformly random subset
of the indices not drawn before; they differ in what the caller needs of a batch:

* stretches of one Fisher–Yates shuffle, in random order (:class:`IndexSampler` and the
  compiled :class:`Shuffle` / :class:`Shuffles` it wraps): the subsampled MH tests, lil'UCB, the
  compiled MH chain, and the independent-arms race;
* sorted sets drawn against a bitmap (:func:`draw_unmarked`): races on shared minibatches,
  which only sum each batch and read it in increasing order.
"""

from ._fisher_yates import (
    FREE,
    IndexSampler,
    MultiIndexSampler,
    Shuffle,
    Shuffles,
    below,
    fisher_yates_dense,
    fisher_yates_sparse,
    new_shuffle,
    new_shuffles,
    shuffle_draw,
    shuffle_restart,
    shuffles_draw,
    shuffles_reserve,
    slot,
    table_capacity,
    value_at,
)
from ._gumbel import gumbel, truncated_gumbel, truncated_gumbel_cdf
from ._sorted_sets import (
    bounded,
    clear_marks,
    draw_unmarked,
    lemire_threshold,
    mark_at_random,
    mark_new,
    multiply_shift,
    splitmix64,
    take_marked,
    take_unmarked,
    write_bits,
)

__all__ = [
    "FREE",
    "IndexSampler",
    "MultiIndexSampler",
    "Shuffle",
    "Shuffles",
    "below",
    "bounded",
    "clear_marks",
    "draw_unmarked",
    "fisher_yates_dense",
    "fisher_yates_sparse",
    "gumbel",
    "lemire_threshold",
    "mark_at_random",
    "mark_new",
    "multiply_shift",
    "new_shuffle",
    "new_shuffles",
    "shuffle_draw",
    "shuffle_restart",
    "shuffles_draw",
    "shuffles_reserve",
    "slot",
    "splitmix64",
    "table_capacity",
    "take_marked",
    "take_unmarked",
    "truncated_gumbel",
    "truncated_gumbel_cdf",
    "value_at",
    "write_bits",
]
