"""The races of the coreference Gibbs updates: large clusters raced with independent subsamples.

A racing update evaluates exactly the clusters whose factors a race's first round would read
whole anyway (at most ``2 m¹``; the remainder rule of the race schedule) and the new cluster;
these form one arm with no factors whose log-prior is the log-sum-exp of their
log-probabilities (by the Gumbel-max property the group's perturbed maximum is a Gumbel variable
at that location, and the winner inside the group is independent of it and softmax
distributed, drawn when the group wins). The other clusters are raced with independent
subsamples (Eq. 26-27 and the per-arm schedule of App. C.3 of Chen & Ghahramani 2016):
:func:`race_clusters` is :func:`~sksubsample.algorithms.sample_discrete` with per-state factor
counts, the Gumbel perturbations drawn before any factor is read, run on the package's race loop
(:func:`~sksubsample.algorithms.kernels.independent_race`) with the potentials read through
:class:`ClusterRewards`.

Which clusters are raced is a decision on their sizes alone, so it leaves the law of the update
unchanged (the exact group takes the others): :func:`raced_clusters` races a cluster of ``N``
factors when reading it exactly costs more than racing it, ``per_arm + per_read · r(N)`` factors
where ``r(N)`` is what the race reads of it at least (its schedule up to the first round the
guard of the normal approximation lets it go, :func:`~sksubsample.algorithms.kernels.
fewest_guarded_reads`), and runs the race only when the clusters' gains together exceed its
``fixed`` cost (the costs of the :class:`Racer`); otherwise the update is the exact one, with
the same random draws. With every cost 0 it races every cluster a race's first round would not
read whole.

A :class:`Racer` says how an update races. An :class:`AuditedRacer` races the same way and
also checks every race against the exact argmax under the same Gumbel perturbations (the error
event of Prop. 3), counting the disagreements: the audit wraps the race, the sweeps do not
know about it.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numba
import numpy as np
from numba import objmode

from ..algorithms import b_normal_union
from ..algorithms.kernels import (
    BAD_VALUE,
    CONTINUE,
    DONE,
    NORMAL,
    TENTH,
    RaceConfig,
    arm_values,
    call_back,
    delta_per_comparison,
    fewest_guarded_reads,
    first_round_batch,
    generic,
    independent_race,
    independent_rounds,
    new_race,
    njit,
    per_datum_rewards,
)
from ._potentials import (
    CallbackPotentials,
    FeaturePotentials,
    MatrixPotentials,
    StoredPotentials,
    potential,
    potentials,
)

__all__ = ["AuditedRacer", "CallbackClusterRewards", "ClusterRewards", "Racer", "b_table",
           "cluster_rewards", "guarded_reads", "race_clusters", "race_update", "raced_clusters"]


class ClusterRewards(NamedTuple):
    """The factors of mention ``i`` with the members of the raced clusters: arm ``a``'s
    ``n``-th factor is ``f(x_i, x_j)`` for ``j = members[mstart[arm_slot[a]] + n]``."""

    pot: object
    i: int
    members: np.ndarray
    mstart: np.ndarray
    arm_slot: np.ndarray


class CallbackClusterRewards(NamedTuple):
    """:class:`ClusterRewards` of a callable's potentials (one call back per round)."""

    pot: object
    i: int
    members: np.ndarray
    mstart: np.ndarray
    arm_slot: np.ndarray


@njit(inline="always")  # a call per factor read would cost more than the factor
def _cluster_value(rewards, arm, n):
    j = rewards.members[rewards.mstart[rewards.arm_slot[arm]] + n]
    return potential(rewards.pot, rewards.i, j)


per_datum_rewards(ClusterRewards, _cluster_value)


@arm_values.implement(CallbackClusterRewards)
@numba.njit(cache=True)  # object mode holds the GIL
def _callback_arm_values(rewards, state, drawing, lengths, idx, block):
    """The values of every arm of the round in one call back (an arm of scale 0, the exact
    group, has no factors: zeros, not evaluated)."""
    js = np.empty(idx.size, dtype=np.int64)
    where = np.empty(idx.size, dtype=np.int64)
    m = 0
    start = 0
    for d in range(drawing.size):
        arm = drawing[d]
        stop = start + lengths[d]
        if state.scale[arm] == 0.0:
            block[start:stop] = 0.0
        else:
            base = rewards.mstart[rewards.arm_slot[arm]]
            for q in range(start, stop):
                js[m] = rewards.members[base + idx[q]]
                where[m] = q
                m += 1
        start = stop
    handle = rewards.pot.handle
    i = rewards.i
    chosen = js[:m]
    with objmode(values="float64[::1]"):
        values = call_back(handle, i, chosen)
    scan = False
    for q in range(m):
        v = values[q]
        if v != v or v == math.inf:
            return BAD_VALUE, scan, m
        scan = scan or v == -math.inf
        block[where[q]] = v
    return CONTINUE, scan, m


@generic
def cluster_rewards(pot, i, members, mstart, arm_slot):
    """The rewards of a race over clusters for the potentials ``pot``."""


@njit
def _compiled_cluster_rewards(pot, i, members, mstart, arm_slot):
    return ClusterRewards(pot, i, members, mstart, arm_slot)


for _cls in (FeaturePotentials, MatrixPotentials, StoredPotentials):
    cluster_rewards.implement(_cls)(_compiled_cluster_rewards)


@cluster_rewards.implement(CallbackPotentials)
@njit
def _callback_cluster_rewards(pot, i, members, mstart, arm_slot):
    return CallbackClusterRewards(pot, i, members, mstart, arm_slot)


# ----------------------------------------------------------------------------- racers


class Racer(NamedTuple):
    """How a racing update races.

    Attributes
    ----------
    first_batch : int
        ``m¹`` of every race.
    btable, rounds : ndarray
        The bound and the schedule's rounds of every race a sweep can run (:func:`b_table`).
    reads : ndarray of int64
        ``reads[N]``: the factors a race reads at least of a cluster of ``N``
        (:func:`guarded_reads`).
    fixed, per_arm, per_read : float
        A race costs about ``fixed + Σ (per_arm + per_read · reads[N_k])`` factors over its
        raced clusters; all 0 race every cluster too large to be read whole, in every update
        that has one.
    guard : bool
        Whether eliminations wait for the guard of the normal approximation (``False`` only
        to study races without it).
    schedule : int, default TENTH
        The per-arm schedule of the races (:data:`~sksubsample.algorithms.kernels.TENTH`, App.
        C.3, or :data:`~sksubsample.algorithms.kernels.GUARDED`); ``btable``, ``rounds`` and
        ``reads`` must be those of the same schedule.
    miss : float, default 0.0
        What skipping the raced clusters' mentions costs the exact part of an update per
        mention of the minority (raced or not), in factors: the branch that skips scattered
        mentions is mispredicted about that often.
    linear_fraction : float, default 0.2
        A racing update of dense potentials reads its exact group in one pass over the
        mentions, skipping the raced ones, when the group holds more than this share of them,
        else cluster by cluster (a speed choice: the law is the same).
    """

    first_batch: int
    btable: np.ndarray
    rounds: np.ndarray
    reads: np.ndarray
    fixed: float
    per_arm: float
    per_read: float
    guard: bool
    schedule: int = TENTH
    miss: float = 0.0
    linear_fraction: float = 0.2


class AuditedRacer(NamedTuple):
    """A :class:`Racer` whose races are checked against the exact argmax under the same
    perturbations; ``errors[0]`` counts the disagreements (an exact evaluation per race, not
    counted as data evaluations)."""

    racer: Racer
    errors: np.ndarray


@generic
def race_update(racer, rewards, sizes, log_prior, inv_t, rng):
    """Draw an arm of ``p(a) ∝ exp(log_prior[a] + Σ_{n < sizes[a]} f_n(a) / T)`` by racing:
    ``(arm, n_evaluations, ok, n_guarded)``, ``ok`` false when a factor is NaN or ``+inf``,
    ``n_guarded`` the eliminations the guard of the normal approximation postponed."""


@generic
def racing_rules(racer):
    """The :class:`Racer` of a racer."""


@racing_rules.implement(Racer)
@njit
def _own_rules(racer):
    return racer


@racing_rules.implement(AuditedRacer)
@njit
def _audited_rules(racer):
    return racer.racer


@njit
def race_clusters(racer, rewards, sizes, log_prior, inv_t, rng):
    """:func:`race_update` of a :class:`Racer`, also returning the perturbed log-priors
    ``log_prior + G``: ``(arm, n_evaluations, ok, n_guarded, offsets)``.

    This is :func:`sksubsample.algorithms.sample_discrete` with ``variance="independent"``,
    per-state ``n_factors = sizes`` and ``log_prior``: Gumbel perturbations first (Eq. 2),
    rewards ``N_a f / T + log_prior + G_a`` whose means are compared (App. C.3), the bound of
    Eq. 27 from ``racer.btable``. Arm 0 has no factors and a finite reward, so some arm always
    survives.
    """
    n_arms = sizes.size
    offsets = log_prior - np.log(rng.standard_exponential(n_arms))
    population = np.maximum(sizes, 1)
    scale = sizes.astype(np.float64) * inv_t
    n_rounds = 1
    for a in range(n_arms):
        n_rounds = max(n_rounds, racer.rounds[population[a]])
    config = RaceConfig(0, racer.first_batch, False, NORMAL, racer.btable[n_arms, n_rounds],
                        0.0, 0.0, racer.guard, racer.schedule)
    state = new_race(scale, offsets, np.zeros(n_arms), population, np.empty((0, 0)), True)
    status, n_evaluations = independent_race(rewards, rng, state, config)
    return state.best, n_evaluations, status == DONE, state.n_guarded, offsets


@race_update.implement(Racer)
@njit
def _race(racer, rewards, sizes, log_prior, inv_t, rng):
    best, n_evaluations, ok, guarded, _ = race_clusters(racer, rewards, sizes, log_prior,
                                                        inv_t, rng)
    return best, n_evaluations, ok, guarded


@race_update.implement(AuditedRacer)
@njit
def _audited_race(racer, rewards, sizes, log_prior, inv_t, rng):
    best, n_evaluations, ok, guarded, offsets = race_clusters(racer.racer, rewards, sizes,
                                                              log_prior, inv_t, rng)
    if ok and _exact_best(rewards, sizes, offsets, inv_t) != best:
        racer.errors[0] += 1
    return best, n_evaluations, ok, guarded


@njit
def _exact_best(rewards, sizes, offsets, inv_t):
    """The argmax of ``offsets + Σ f / T`` with every factor read."""
    top = offsets[0]
    best = 0
    for a in range(1, sizes.size):
        base = rewards.mstart[rewards.arm_slot[a]]
        values = np.empty(sizes[a])
        potentials(rewards.pot, rewards.i, rewards.members[base:base + sizes[a]], values)
        s = 0.0
        for q in range(sizes[a]):
            s += values[q]
        value = offsets[a] + s * inv_t
        if value > top:
            top = value
            best = a
    return best


@njit(inline="always")
def raced_clusters(rules, slots, n_slots, population, raced):
    """The clusters a racing update races: those of ``slots[:n_slots]`` with more factors
    (``population[k]``) than a first round of the schedule reads whole (``2 m¹`` on App.
    C.3's) whose factors cost more to read exactly than to race
    (``N > per_arm + per_read · reads[N]``), written to ``raced[1:]`` (arm 0 is the exact
    group). Returns their number plus one, or 0 when the race would not repay itself: their
    gains ``N - per_arm - per_read · reads[N]``, less ``miss`` per mention of the minority
    (raced or not) of the ``Σ N`` of all the clusters, add up to less than ``fixed``
    factors."""
    whole = 2 * first_round_batch(rules.first_batch, rules.schedule)
    gain = 0.0
    n_raced = 1
    total = 0
    skipped = 0
    for t in range(n_slots):
        k = slots[t]
        size = population[k]
        total += size
        if size > whole:
            own = size - rules.per_arm - rules.per_read * rules.reads[size]
            if own > 0.0:
                raced[n_raced] = k
                n_raced += 1
                gain += own
                skipped += size
    gain -= rules.miss * min(skipped, total - skipped)
    if n_raced == 1 or gain < rules.fixed:
        return 0
    return n_raced


@njit
def _rounds_of(n, first_batch, schedule):
    """``out[N]``: the rounds of the per-arm schedule of a population of ``N`` (``N < n``)."""
    out = np.ones(max(n, 2), dtype=np.int64)
    one = np.empty(1, dtype=np.int64)
    for size in range(1, n):
        one[0] = size
        out[size] = independent_rounds(one, first_batch, schedule)
    return out


@njit
def _guarded_reads_of(n, first_batch, schedule):
    out = np.zeros(max(n, 2), dtype=np.int64)
    for size in range(1, out.size):
        out[size] = fewest_guarded_reads(size, first_batch, schedule)
    return out


@functools.lru_cache(maxsize=16)
def guarded_reads(n, first_batch, schedule=TENTH):
    """``reads[N]`` for ``N < max(n, 2)``: the factors a race on ``schedule`` reads at least of
    a cluster of ``N`` (:func:`~sksubsample.algorithms.kernels.fewest_guarded_reads`),
    read-only."""
    out = _guarded_reads_of(n, first_batch, schedule)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=16)
def b_table(delta, n, first_batch, schedule=TENTH):
    """The constants of every race a sweep over ``n`` mentions can run on the per-arm
    ``schedule``: ``(btable, rounds)`` (read-only).

    ``rounds[N]`` is the number of rounds of the per-arm schedule (App. C.3's or the guarded
    one, with the remainder rule) of a population of ``N`` factors, so a race's ``t*`` is the
    largest over its arms. ``btable[D, t*]`` is the bound of a race of ``D`` arms as
    :func:`~sksubsample.algorithms.race` configures one with independent arms (δ split over
    the ``D - 1`` comparisons with the winner, then by Eq. 27 over the rounds before the last).
    Raced clusters have more than ``2 m`` factors (``m`` the first round's batch,
    :func:`~sksubsample.algorithms.kernels.first_round_batch`), so a race has at most
    ``(n - 1) / (2 m + 1) + 1`` arms.
    """
    whole = 2 * int(first_round_batch(first_batch, schedule))
    n_arms = max(2, (n - 1) // (whole + 1) + 1)
    rounds = _rounds_of(n, first_batch, schedule)
    arms = np.arange(2, n_arms + 1)[:, None]
    ts = np.arange(1, int(rounds.max()) + 1)[None, :]
    table = np.zeros((n_arms + 1, int(rounds.max()) + 1))
    table[2:, 1:] = b_normal_union(
        delta_per_comparison(arms, delta, "normal", "independent"), ts)
    table.setflags(write=False)
    rounds.setflags(write=False)
    return table, rounds
