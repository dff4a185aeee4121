"""The algorithmic core: pure NumPy/SciPy functions over subsampled targets.

Nothing here imports an estimator. See DESIGN.md for the abstractions (targets, acceptance
tests, pure step functions).
"""

from ._acceptance import (
    AcceptInfo,
    adaptive_subsampling,
    austerity,
    barker,
    get_acceptance_test,
    metropolis,
    minibatch_barker,
    racing,
)
from ._astar import AStarResult, SearchTrace, astar_sample, pm_astar_sample
from ._bounds import b_ebs, b_normal, b_normal_union, doubling_schedule, g_normal
from ._control_variates import TaylorProxy
from ._correction import BarkerCorrection
from ._discrete import DiscreteSample, sample_discrete
from ._gumbel import gumbel, truncated_gumbel, truncated_gumbel_cdf
from ._gumbel_tree import TruncatedGumbelTree
from ._mh import MHInfo, MHKernel, MHResult, MHState, build_kernel, init_state, mh_step, sample_mh
from ._racing import BanditResult, RaceResult, lil_ucb, race

__all__ = [
    "AStarResult",
    "AcceptInfo",
    "BanditResult",
    "BarkerCorrection",
    "DiscreteSample",
    "MHInfo",
    "MHKernel",
    "MHResult",
    "MHState",
    "RaceResult",
    "SearchTrace",
    "TaylorProxy",
    "TruncatedGumbelTree",
    "adaptive_subsampling",
    "astar_sample",
    "austerity",
    "b_ebs",
    "b_normal",
    "b_normal_union",
    "barker",
    "build_kernel",
    "doubling_schedule",
    "g_normal",
    "get_acceptance_test",
    "gumbel",
    "init_state",
    "lil_ucb",
    "metropolis",
    "mh_step",
    "minibatch_barker",
    "pm_astar_sample",
    "race",
    "racing",
    "sample_discrete",
    "sample_mh",
    "truncated_gumbel",
    "truncated_gumbel_cdf",
]
