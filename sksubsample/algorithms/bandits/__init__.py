"""Best-arm identification on finite reward populations, and discrete sampling through it.

Discrete sampling by the Gumbel-max trick reduces to finding the arm with the largest mean
reward (Chen & Ghahramani 2016, Eq. 3): :func:`sample_discrete` draws a state by racing
(:func:`race`, Alg. 1, with the bounds of :mod:`._bounds`), adapted lil'UCB (:func:`lil_ucb`,
§3.2) or exactly. The races run in one compiled call (:mod:`._loop`) on a configuration and a
state built by one function each (:mod:`._state`); the round laws of shared minibatches and of
independent arms are in :mod:`._shared` and :mod:`._independent`, the schedules in
:mod:`._schedule`.
"""

from ._bounds import b_ebs, b_normal, b_normal_union, g_normal
from ._discrete import DiscreteSample, sample_discrete
from ._independent import fewest_guarded_reads
from ._lil_ucb import BanditResult, lil_ucb
from ._loop import (
    arm_values,
    call_back,
    exact_sums,
    fill_rows,
    finish_exactly,
    independent_race,
    per_datum_rewards,
    pop_callback,
    push_callback,
    reward_value,
    shared_race,
    shared_values,
)
from ._race import RaceResult, race
from ._race_inputs import CompiledRewards
from ._schedule import (
    GUARDED,
    TENTH,
    doubling_schedule,
    first_round_batch,
    independent_rounds,
    shared_rounds,
    shared_stored,
    whole_in_first_round,
)
from ._shared import DrawBuffers, work_size
from ._state import (
    ALL_NEG_INF,
    BAD_VALUE,
    BAILED,
    CONTINUE,
    DONE,
    EBS,
    NORMAL,
    RaceConfig,
    RaceState,
    delta_per_comparison,
    new_race,
    race_config,
    restart_race,
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
    "TENTH",
    "BanditResult",
    "CompiledRewards",
    "DiscreteSample",
    "DrawBuffers",
    "RaceConfig",
    "RaceResult",
    "RaceState",
    "arm_values",
    "b_ebs",
    "b_normal",
    "b_normal_union",
    "call_back",
    "delta_per_comparison",
    "doubling_schedule",
    "exact_sums",
    "fewest_guarded_reads",
    "fill_rows",
    "finish_exactly",
    "first_round_batch",
    "g_normal",
    "independent_race",
    "independent_rounds",
    "lil_ucb",
    "new_race",
    "per_datum_rewards",
    "pop_callback",
    "push_callback",
    "race",
    "race_config",
    "restart_race",
    "reward_value",
    "sample_discrete",
    "shared_race",
    "shared_rounds",
    "shared_stored",
    "shared_values",
    "whole_in_first_round",
    "work_size",
]
