"""The algorithmic core: pure NumPy/SciPy functions over subsampled targets.

Nothing here imports an estimator. See DESIGN.md for the abstractions (targets, acceptance
tests, pure step functions).
"""

from ._astar import AStarResult, SearchTrace, astar_sample, pm_astar_sample
from ._bounds import b_ebs, b_normal, b_normal_union, doubling_schedule, g_normal
from ._correction import BarkerCorrection
from ._discrete import DiscreteSample, sample_discrete
from ._gumbel import gumbel, truncated_gumbel, truncated_gumbel_cdf
from ._gumbel_tree import TruncatedGumbelTree
from ._racing import BanditResult, RaceResult, lil_ucb, race

__all__ = [
    "AStarResult",
    "BanditResult",
    "BarkerCorrection",
    "DiscreteSample",
    "RaceResult",
    "SearchTrace",
    "TruncatedGumbelTree",
    "astar_sample",
    "b_ebs",
    "b_normal",
    "b_normal_union",
    "doubling_schedule",
    "g_normal",
    "gumbel",
    "lil_ucb",
    "pm_astar_sample",
    "race",
    "sample_discrete",
    "truncated_gumbel",
    "truncated_gumbel_cdf",
]
