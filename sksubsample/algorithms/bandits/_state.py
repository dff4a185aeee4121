"""What a race is: its configuration (:class:`RaceConfig`) and its state (:class:`RaceState`).

Every race of the package, whoever runs it (:func:`~sksubsample.algorithms.race`,
:func:`~sksubsample.algorithms.sample_discrete`, the racing MH test, the ARCH sampler's Gibbs and
MH steps, the coreference updates), is configured by :func:`race_config`, which also splits the
error budget ``delta`` over comparisons and rounds, and runs on a :class:`RaceState` made by
:func:`new_race`. The round loops (:mod:`._loop`) and the round laws (:mod:`._shared`,
:mod:`._independent`) read and update these two structures only.

References
----------
Chen & Ghahramani (2016), Alg. 1, App. A.3 (delta per comparison), §3.3.2 (``B_Normal``),
Eq. 7 and Eq. 27 (union bounds over rounds), App. C.3 (independent arms).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba.core import types
from numba.experimental import structref

from .._numba import njit
from ..sampling import new_shuffles
from ._bounds import b_normal, b_normal_union
from ._schedule import TENTH

__all__ = ["ALL_NEG_INF", "BAD_VALUE", "BAILED", "CONTINUE", "DONE", "EBS",
           "NORMAL", "RaceConfig", "RaceState", "delta_per_comparison", "new_race", "race_config",
           "race_outcome", "restart_race"]

# How a round ended (BAILED: the race stopped to let its caller finish exactly).
CONTINUE, DONE, ALL_NEG_INF, BAD_VALUE, BAILED = 0, 1, 2, 3, 4
# The bound of a race.
NORMAL, EBS = 0, 1


class RaceConfig(NamedTuple):
    """The fixed options of a race, as its round laws read them.

    Attributes
    ----------
    population : int
        ``N`` of a race on shared minibatches (every arm's population); 0 with independent
        arms, whose populations are in the state.
    first_batch : int
        ``m^(1)``.
    pairwise : bool
        Bound each gap with the variance of reward differences (shared minibatches only).
    bound : int
        :data:`NORMAL` or :data:`EBS`.
    b_const : float
        ``B`` of the Normal bound (0 when no bound is ever used: every mean is exact after
        the first round).
    delta_round : float
        The error of one comparison in one round, for the EBS bound (Eq. 7).
    bail_ratio : float
        The cost of a race's evaluation over that of an evaluation of the exact sum, for a
        race that may stop when it stops paying (:func:`~._shared.should_bail`: shared
        minibatches, Normal bound); 0 for a race that runs to its end.
    guard : bool
        Whether the Normal bound's eliminations wait until the guard of its normal
        approximation trusts the sample (:func:`~._sums.normal_doubtful`).
    schedule : int
        The per-arm schedule of independent arms: :data:`~._schedule.TENTH` (App. C.3) or
        :data:`~._schedule.GUARDED` (ignored on shared minibatches).
    """

    population: int
    first_batch: int
    pairwise: bool
    bound: int
    b_const: float
    delta_round: float
    bail_ratio: float
    guard: bool
    schedule: int


def race_config(n_arms, n_population, n_rounds, *, delta, bound, variance, first_batch,
                bail_ratio=0.0, guard=True):
    """The :class:`RaceConfig` of a race of ``n_arms >= 2`` arms whose schedule has
    ``n_rounds`` rounds (``t*``).

    ``delta`` goes to each comparison as ``delta / (D - 1)`` (pairwise and independent
    Normal bounds) or to each arm as ``delta / D`` (marginal bounds, App. A.3). Over the rounds
    before ``T = N``: ``B_Normal`` of the shared doubling walk (§3.3.2), the union bound of
    Eq. 27 for independent arms (their walks differ, so the correlated-walk constant does not
    apply), and ``delta / (t* - 1)`` per round for EBS (Eq. 7). With ``t* = 1`` every mean is
    exact after the first round and no bound is used.

    Parameters
    ----------
    n_arms : int
        ``D``.
    n_population : int
        ``N`` of shared minibatches (ignored with ``variance="independent"``).
    n_rounds : int
        ``t*``: the rounds of the schedule, the last at ``T = N``.
    delta : float in (0, 1)
    bound : {"normal", "ebs"}
    variance : {"pairwise", "marginal", "independent"}
    first_batch : int
    bail_ratio : float, default 0.0
        See :class:`RaceConfig` (0: the race runs to its end).
    guard : bool, default True
        See :class:`RaceConfig`.

    Returns
    -------
    RaceConfig
    """
    independent = variance == "independent"
    pairwise = variance == "pairwise"
    ebs = bound == "ebs"
    delta_each = delta_per_comparison(n_arms, delta, bound, variance)
    b_const = delta_round = 0.0
    if n_rounds > 1:
        if ebs:
            delta_round = delta_each / (n_rounds - 1)
        elif independent:
            b_const = b_normal_union(delta_each, n_rounds)
        else:
            b_const = b_normal(delta_each, first_batch / n_population)
    return RaceConfig(0 if independent else int(n_population), int(first_batch),
                      bool(pairwise), EBS if ebs else NORMAL, float(b_const),
                      float(delta_round), float(bail_ratio), bool(guard), TENTH)


def delta_per_comparison(n_arms, delta, bound, variance):
    """The share of ``delta`` of one comparison with the winner (pairwise, independent Normal:
    ``delta / (D - 1)``) or of one arm's marginal bound (marginal, independent EBS:
    ``delta / D``), App. A.3. Works elementwise on an array of ``n_arms``."""
    if variance == "pairwise" or (variance == "independent" and bound == "normal"):
        return delta / (n_arms - 1)
    return delta / n_arms


# ----------------------------------------------------------------------------- the state


@structref.register
class RaceStateType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class RaceState(structref.StructRefProxy):
    """The state of one race (:func:`new_race`), updated in place by its rounds.

    Fields
    ------
    n_alive, alive
        The surviving arms: ``alive[:n_alive]``.
    count, target
        Rewards per arm drawn so far and at the end of the round being drawn (shared
        minibatches).
    round
        Rounds finished.
    leader
        The arm the pairwise differences are taken to (-1 before the first round).
    best
        The winner, once the race is done.
    marked
        Indices marked in the bitmap of drawn indices (shared minibatches; cleared at the end).
    out_round
        The round in which each arm left (0 for the winner).
    n_sampled
        Rewards drawn from each arm.
    moments, shift, sum_r, sum_r2, sum_r3, sum_r4, sum_d, sum_d2, sum_d3, sum_d4
        The running sums of each arm (rows of ``moments``): its first-block mean ``shift``,
        the sums of the powers 1 to 4 of its shifted rewards, and of its differences to the
        leader.
    n_guarded
        Eliminations the normal bound allowed but the guard of its normal approximation
        refused (:func:`~._sums.normal_doubtful`), over the race's rounds.
    saved
        ``moments`` before the last block, to sum a block again without an arm found dead.
    store
        The shifted rewards of every arm in draw order (pairwise races of more than two arms),
        so that the differences can be summed again when the leader changes.
    dead
        Arms with a ``-inf`` reward (mean ``-inf``).
    scale, offset
        Each arm's reward is ``scale * value + offset`` of what its rewards return; an arm of
        scale 0 has the constant reward ``offset`` and is never evaluated.
    ranges
        Each arm's reward range (EBS bound).
    sizes
        Each arm's population ``N_i``.
    shuffles
        The per-arm shuffles of an independent-arms race.
    bits
        A zero bitmap of ``max(sizes)`` bits for sorting batches (left zero).
    """


structref.define_proxy(RaceState, RaceStateType, [
    "n_alive", "count", "target", "round", "leader", "best", "marked", "n_guarded", "alive",
    "out_round", "n_sampled", "moments", "shift", "sum_r", "sum_r2", "sum_r3", "sum_r4",
    "sum_d", "sum_d2", "sum_d3", "sum_d4", "saved", "store", "dead", "scale", "offset",
    "ranges", "sizes", "shuffles", "bits"])


@njit
def new_race(scale, offset, ranges, sizes, store, independent):
    """A :class:`RaceState` of ``scale.size`` arms with nothing drawn.

    Parameters
    ----------
    scale, offset, ranges : ndarray of shape (n_arms,)
        Kept, not copied (:func:`restart_race` may be given new values in place).
    sizes : ndarray of int64, shape (n_arms,)
        Each arm's population ``N_i`` (all ``N`` on shared minibatches).
    store : ndarray of shape (n_arms, n_stored)
        Room for the stored rewards of a pairwise race of more than two arms (may be empty).
    independent : bool
        Whether the arms are subsampled independently (then each gets a shuffle of its own
        population and the state a bitmap of ``max(sizes)`` bits).
    """
    n_arms = scale.size
    moments = np.zeros((9, n_arms))
    largest = 0
    if independent:
        for i in range(n_arms):
            largest = max(largest, sizes[i])
    state = RaceState(np.int64(n_arms), np.int64(0), np.int64(0), np.int64(0), np.int64(-1),
                      np.int64(-1), np.int64(0), np.int64(0), np.arange(n_arms),
                      np.zeros(n_arms, np.int64), np.zeros(n_arms, np.int64), moments,
                      moments[0], moments[1], moments[2], moments[3], moments[4], moments[5],
                      moments[6], moments[7], moments[8], np.empty((9, n_arms)), store,
                      np.zeros(n_arms, np.bool_), scale, offset, ranges, sizes,
                      new_shuffles(sizes if independent else sizes[:0]),
                      np.zeros((largest >> 6) + 1 if independent else 0, np.int64))
    return state


@njit
def restart_race(state):
    """Make ``state`` a race with nothing drawn (same arms, populations and buffers; the
    scales and offsets as they are now)."""
    n_arms = state.alive.size
    state.n_alive = n_arms
    state.count = 0
    state.target = 0
    state.round = 0
    state.leader = -1
    state.best = -1
    state.marked = 0
    state.n_guarded = 0
    for a in range(n_arms):
        state.alive[a] = a
    state.out_round[:] = 0
    state.n_sampled[:] = 0
    state.moments[:, :] = 0.0
    state.dead[:] = False


@njit
def race_outcome(state):
    """``(best, n_rounds, out_round, n_sampled, n_guarded, survivors)`` of a finished race
    (copies; the survivors are those of the last round)."""
    return (state.best, state.round, state.out_round.copy(), state.n_sampled.copy(),
            state.n_guarded, state.alive[:state.n_alive].copy())
