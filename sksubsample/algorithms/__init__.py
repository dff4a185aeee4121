"""The algorithmic core: pure NumPy/SciPy functions over subsampled targets.

Nothing here imports an estimator. See DESIGN.md for the abstractions (targets, acceptance
tests, pure step functions).
"""

from ._bounds import b_ebs, b_normal, b_normal_union, doubling_schedule, g_normal
from ._correction import BarkerCorrection
from ._discrete import DiscreteSample, sample_discrete
from ._gumbel import gumbel, truncated_gumbel, truncated_gumbel_cdf
from ._racing import BanditResult, RaceResult, lil_ucb, race

__all__ = [
    "BanditResult",
    "BarkerCorrection",
    "DiscreteSample",
    "RaceResult",
    "b_ebs",
    "b_normal",
    "b_normal_union",
    "doubling_schedule",
    "g_normal",
    "gumbel",
    "lil_ucb",
    "race",
    "sample_discrete",
    "truncated_gumbel",
    "truncated_gumbel_cdf",
]
