"""The algorithmic core: pure NumPy/SciPy functions over subsampled targets.

Nothing here imports an estimator. See DESIGN.md for the abstractions (targets, acceptance
tests, pure step functions).
"""

from ._gumbel import gumbel, truncated_gumbel, truncated_gumbel_cdf

__all__ = [
    "gumbel",
    "truncated_gumbel",
    "truncated_gumbel_cdf",
]
