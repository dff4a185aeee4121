"""Metropolis–Hastings: proposals, acceptance tests, kernels and the chain driver.

Each law is written once. The proposals (:mod:`._proposals`) and the exact and bounded tests
(:mod:`._exact_tests`) are compiled functions that read a model only through the generic
operations of :mod:`._model`; interpreted kernels reach them through callback models, and a
target that lends a compiled model (:class:`SupportsCompiledModel`) runs its whole chain in
machine code (:mod:`._step`). Every chain, compiled or not, runs in one driver
(:func:`run_kernel`, :mod:`._chain`). The tests that grow a minibatch or race stay interpreted
(:mod:`._minibatch_tests`).
"""

from ._acceptance import (
    EXACT_BARKER,
    EXACT_METROPOLIS,
    SUBSAMPLED_BARKER,
    SUBSAMPLED_METROPOLIS,
    AcceptanceKind,
    AcceptInfo,
    acceptance_kind,
    acceptance_probability,
    log_expit,
    log_expit_from,
    log_expit_given,
    log_uniform,
)
from ._adaptation import DualAveraging, adaptation_statistic, restart_steps
from ._callbacks import call, registered
from ._chain import InterpretedStepper, MHResult, run_chain, run_kernel, run_segment, sample_mh
from ._control_variates import TaylorProxy, check_derivative_target
from ._correction import BarkerCorrection
from ._exact_tests import (
    barker,
    bounded_barker,
    bounded_barker_law,
    bounded_batch_size,
    bounded_batch_size_compiled,
    decided_by_bound,
    full_data_law,
    metropolis,
)
from ._kernel import MHInfo, MHKernel, MHState, build_kernel, init_state, mh_step
from ._minibatch_tests import adaptive_subsampling, austerity, minibatch_barker, racing
from ._minibatches import (
    PrefetchedMinibatches,
    ShuffledMinibatches,
    exact_rows,
    minibatch_sum,
    sampled_count,
    sampled_sum,
    shuffled_minibatches,
)
from ._model import (
    CallbackGradient,
    CallbackTerms,
    chain_step,
    chain_theta,
    log_pi_gradient,
    log_prior_at,
    proxy_sum,
    terms_sum,
    variance_bound,
)
from ._proposals import (
    HAMILTONIAN,
    LANGEVIN,
    PROPOSALS,
    RANDOM_WALK,
    Proposal,
    expected_gradients,
    finite,
    get_proposal,
    hamiltonian_log_q_ratio,
    hamiltonian_propose,
    langevin_log_q_ratio,
    langevin_propose,
    random_walk_propose,
)
from ._registry import ACCEPTANCE_TESTS, get_acceptance_test
from ._step import CompiledStepper, compiled_stepper
from ._strata import Strata
from ._target import (
    DifferentiableTarget,
    SubsampledTarget,
    SupportsCompiledChain,
    SupportsCompiledModel,
    SupportsLoglikRatio,
    SupportsTaylorExpansion,
    SupportsTermBound,
    SupportsVarianceBound,
)

__all__ = [
    "ACCEPTANCE_TESTS",
    "EXACT_BARKER",
    "EXACT_METROPOLIS",
    "HAMILTONIAN",
    "LANGEVIN",
    "PROPOSALS",
    "RANDOM_WALK",
    "SUBSAMPLED_BARKER",
    "SUBSAMPLED_METROPOLIS",
    "AcceptInfo",
    "AcceptanceKind",
    "BarkerCorrection",
    "CallbackGradient",
    "CallbackTerms",
    "CompiledStepper",
    "DifferentiableTarget",
    "DualAveraging",
    "InterpretedStepper",
    "MHInfo",
    "MHKernel",
    "MHResult",
    "MHState",
    "PrefetchedMinibatches",
    "Proposal",
    "ShuffledMinibatches",
    "Strata",
    "SubsampledTarget",
    "SupportsCompiledChain",
    "SupportsCompiledModel",
    "SupportsLoglikRatio",
    "SupportsTaylorExpansion",
    "SupportsTermBound",
    "SupportsVarianceBound",
    "TaylorProxy",
    "acceptance_kind",
    "acceptance_probability",
    "adaptation_statistic",
    "adaptive_subsampling",
    "austerity",
    "barker",
    "bounded_barker",
    "bounded_barker_law",
    "bounded_batch_size",
    "bounded_batch_size_compiled",
    "build_kernel",
    "call",
    "chain_step",
    "chain_theta",
    "check_derivative_target",
    "compiled_stepper",
    "decided_by_bound",
    "exact_rows",
    "expected_gradients",
    "finite",
    "full_data_law",
    "get_acceptance_test",
    "get_proposal",
    "hamiltonian_log_q_ratio",
    "hamiltonian_propose",
    "init_state",
    "langevin_log_q_ratio",
    "langevin_propose",
    "log_expit",
    "log_expit_from",
    "log_expit_given",
    "log_pi_gradient",
    "log_prior_at",
    "log_uniform",
    "metropolis",
    "mh_step",
    "minibatch_barker",
    "minibatch_sum",
    "proxy_sum",
    "racing",
    "random_walk_propose",
    "registered",
    "restart_steps",
    "run_chain",
    "run_kernel",
    "run_segment",
    "sample_mh",
    "sampled_count",
    "sampled_sum",
    "shuffled_minibatches",
    "terms_sum",
    "variance_bound",
]
