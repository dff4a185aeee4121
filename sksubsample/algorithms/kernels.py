"""Compiled building blocks of the core, for samplers that compile a whole chain of their own.

The estimators' samplers (the ARCH order sampler, the coreference Gibbs sweeps) run their chains
as compiled loops that call the core's laws directly, without going back to Python: the race
loops and their configuration and state, the index draws, the Gumbel-max sums. This module is
the one place they import those laws from; everything else they use of the core is public in
:mod:`sksubsample.algorithms`. The names here are stable within a release but, unlike the
public API, may change with the package's internals.

Racing from compiled code
-------------------------
A model whose rewards are computed one datum at a time describes them by a
:class:`typing.NamedTuple` class and a compiled ``value(rewards, arm, index)`` registered with
:func:`per_datum_rewards`; it configures a race with :func:`race_config`, makes its state with
:func:`new_race` (once, then :func:`restart_race` before each race) and runs
:func:`shared_race` (shared minibatches, Alg. 1 of Chen & Ghahramani 2016) or
:func:`independent_race` (independent arms, App. C.3). :func:`exact_sums` computes the exact
sums of the same rewards, the Gumbel-max sampler's exact path. Whether a race pays against those
exact sums, and when it has stopped paying, follows :func:`race_costs` (costs measured once per
kind of kernel on this machine) or :func:`rough_costs` (the same on every machine).

Costs of a sampler's own
------------------------
A sampler whose exact-or-subsample choice weighs costs of its own kind stores them through the
same cost service: :func:`measured` (measured once per machine and key, kept in the user's
cache), timed with :func:`fastest`, and only when :func:`measuring` (the one switch for draws
that are the same on every machine).
"""

from ._calibration import SECONDS, fastest, measured, measuring
from ._numba import generic, kernel_array, next_uint64, njit, permutation_into, read_only
from ._race_costs import RaceCosts, race_costs, rough_costs
from ._user_functions import checked_array
from .bandits import (
    ALL_NEG_INF,
    BAD_VALUE,
    BAILED,
    CONTINUE,
    DONE,
    EBS,
    GUARDED,
    NORMAL,
    TENTH,
    DrawBuffers,
    RaceConfig,
    RaceState,
    arm_values,
    call_back,
    delta_per_comparison,
    exact_sums,
    fewest_guarded_reads,
    fill_rows,
    finish_exactly,
    first_round_batch,
    independent_race,
    independent_rounds,
    new_race,
    per_datum_rewards,
    pop_callback,
    push_callback,
    race_config,
    restart_race,
    reward_value,
    shared_race,
    shared_rounds,
    shared_stored,
    shared_values,
    whole_in_first_round,
    work_size,
)

__all__ = [
    "ALL_NEG_INF",
    "BAD_VALUE",
    "BAILED",
    "CONTINUE",
    "DONE",
    "EBS",
    "GUARDED",
    "NORMAL",
    "SECONDS",
    "TENTH",
    "DrawBuffers",
    "RaceConfig",
    "RaceCosts",
    "RaceState",
    "arm_values",
    "call_back",
    "checked_array",
    "delta_per_comparison",
    "exact_sums",
    "fastest",
    "fewest_guarded_reads",
    "fill_rows",
    "finish_exactly",
    "first_round_batch",
    "generic",
    "independent_race",
    "independent_rounds",
    "kernel_array",
    "measured",
    "measuring",
    "new_race",
    "next_uint64",
    "njit",
    "per_datum_rewards",
    "permutation_into",
    "pop_callback",
    "push_callback",
    "race_config",
    "race_costs",
    "read_only",
    "restart_race",
    "reward_value",
    "rough_costs",
    "shared_race",
    "shared_rounds",
    "shared_stored",
    "shared_values",
    "whole_in_first_round",
    "work_size",
]
