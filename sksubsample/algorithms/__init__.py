"""The algorithmic core: pure NumPy/SciPy functions over subsampled targets.

Nothing here imports an estimator. Four abstractions carry everything:

* a subsampled **target** (:class:`SubsampledTarget`: ``n_data``, ``log_prior``,
  ``loglik_terms`` and optional methods declared as protocols; :class:`GLMTarget` is a reusable
  instance), or for discrete variables a ``log_factors(states, idx)`` function;
* an **acceptance test**: a callable ``test(log_ratio_terms, n_data, log_ratio_rest, rng)
  -> AcceptInfo`` whose kind (:class:`AcceptanceKind`) is data on it;
* a **proposal** as a value (:class:`Proposal`; :data:`RANDOM_WALK`, :data:`LANGEVIN`);
* pure **step functions** over small NamedTuple states (:func:`mh_step`,
  :func:`sample_discrete`), which sweeps compose.
"""

from .astar._astar import AStarResult, SearchTrace, astar_sample, pm_astar_sample
from .astar._gumbel_tree import TruncatedGumbelTree
from .bandits._bounds import b_ebs, b_normal, b_normal_union, doubling_schedule, g_normal
from .bandits._discrete import DiscreteSample, sample_discrete
from .bandits._race import BanditResult, CompiledRewards, RaceResult, lil_ucb, race
from .glm import BERNOULLI_LOGIT, GLMFamily, GLMTarget
from .mh import (
    HAMILTONIAN,
    LANGEVIN,
    RANDOM_WALK,
    AcceptanceKind,
    AcceptInfo,
    BarkerCorrection,
    DifferentiableTarget,
    DualAveraging,
    MHInfo,
    MHKernel,
    MHResult,
    MHState,
    Proposal,
    SubsampledTarget,
    SupportsLoglikRatio,
    SupportsTaylorExpansion,
    SupportsTermBound,
    SupportsVarianceBound,
    TaylorProxy,
    adaptive_subsampling,
    austerity,
    barker,
    bounded_barker,
    build_kernel,
    get_acceptance_test,
    get_proposal,
    init_state,
    metropolis,
    mh_step,
    minibatch_barker,
    racing,
    run_kernel,
    sample_mh,
)
from .sampling._gumbel import gumbel, truncated_gumbel, truncated_gumbel_cdf

__all__ = [
    "BERNOULLI_LOGIT",
    "HAMILTONIAN",
    "LANGEVIN",
    "RANDOM_WALK",
    "AStarResult",
    "AcceptInfo",
    "AcceptanceKind",
    "BanditResult",
    "BarkerCorrection",
    "CompiledRewards",
    "DifferentiableTarget",
    "DiscreteSample",
    "DualAveraging",
    "GLMFamily",
    "GLMTarget",
    "MHInfo",
    "MHKernel",
    "MHResult",
    "MHState",
    "Proposal",
    "RaceResult",
    "SearchTrace",
    "SubsampledTarget",
    "SupportsLoglikRatio",
    "SupportsTaylorExpansion",
    "SupportsTermBound",
    "SupportsVarianceBound",
    "TaylorProxy",
    "TruncatedGumbelTree",
    "adaptive_subsampling",
    "astar_sample",
    "austerity",
    "b_ebs",
    "b_normal",
    "b_normal_union",
    "barker",
    "bounded_barker",
    "build_kernel",
    "doubling_schedule",
    "g_normal",
    "get_acceptance_test",
    "get_proposal",
    "gumbel",
    "init_state",
    "lil_ucb",
    "metropolis",
    "mh_step",
    "minibatch_barker",
    "pm_astar_sample",
    "race",
    "racing",
    "run_kernel",
    "sample_discrete",
    "sample_mh",
    "truncated_gumbel",
    "truncated_gumbel_cdf",
]
