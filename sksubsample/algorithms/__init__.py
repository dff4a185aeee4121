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

from .astar import (
    AStarResult,
    LogisticAStarTarget,
    SearchTrace,
    TruncatedGumbelTree,
    astar_sample,
    pm_astar_sample,
)
from .bandits import (
    BanditResult,
    CompiledRewards,
    DiscreteSample,
    RaceResult,
    b_ebs,
    b_normal,
    b_normal_union,
    doubling_schedule,
    g_normal,
    lil_ucb,
    race,
    sample_discrete,
)
from .mh._acceptance import (
    AcceptanceKind,
    AcceptInfo,
    adaptive_subsampling,
    austerity,
    barker,
    bounded_barker,
    get_acceptance_test,
    metropolis,
    minibatch_barker,
    racing,
)
from .mh._control_variates import TaylorProxy
from .mh._correction import BarkerCorrection
from .mh._kernel import (
    DualAveraging,
    MHInfo,
    MHKernel,
    MHResult,
    MHState,
    build_kernel,
    init_state,
    mh_step,
    run_kernel,
    sample_mh,
)
from .mh._proposals import HAMILTONIAN, LANGEVIN, RANDOM_WALK, Proposal, get_proposal
from .mh._target import (
    BERNOULLI_LOGIT,
    DifferentiableTarget,
    GLMFamily,
    GLMTarget,
    SubsampledTarget,
    SupportsLoglikRatio,
    SupportsTaylorExpansion,
    SupportsTermBound,
    SupportsVarianceBound,
)
from .sampling import gumbel, truncated_gumbel, truncated_gumbel_cdf

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
    "LogisticAStarTarget",
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
