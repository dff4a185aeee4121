"""What a racing coreference update costs against an exact one, measured on the user's potentials.

An update of mention ``i`` reads its factors with every other mention in one pass over the
mentions (:func:`~._potentials.add_row_scores`). ``method="auto"`` races the large clusters
instead (:mod:`._races`) when that repays itself, weighing, in units of what the exact pass
saves per factor it skips (``saved``):

* ``fixed``: a race's own cost (its set-up, Gumbel draws and rounds);
* ``per_read``: a factor a race reads (a random index, a memory access that likely misses the
  cache, the running sums of the guard, and the factor itself);
* ``miss``: what skipping costs the pass per mention of the minority (raced or not): the
  skipped mentions are scattered, so the branch that skips them is mispredicted about that
  often;
* ``linear_fraction``: a racing update reads its exact group in one pass over the mentions,
  skipping the raced ones, when the group holds more than this share of them, else cluster by
  cluster (:func:`~._potentials.member_sum` over a cluster's scattered members): the pass
  costs ``pass`` per mention, a gather ``gather`` per factor, and the pass pays once the group
  holds more than ``pass / gather`` of the mentions.

How fast these run depends on the machine, on the kind of potentials and their dimension, and
on how many mentions there are (whether their features stay in the cache), not on the values.
:func:`sweep_costs` times the sweep's own kernels on the user's potentials, once per machine
and kind (key: the kind, the dimension, the size class of ``n``), through the package's cost
service (:func:`~sksubsample.algorithms.kernels.measured`), so that a seed gives the same draws
on a machine in this process and later ones. With measuring off
(:func:`~sksubsample.algorithms.kernels.measuring`) and for a callable (the user's calls are
never timed: they may have effects, or cost seconds), the choices follow :data:`ROUGH_COSTS`,
the same on every machine.

Sparse precomputed potentials are never raced by ``"auto"``: their update goes through every
stored potential of the mention whether it races or not (to find the clusters, and to hand
the raced ones to the race), so a race spares no memory access and only adds its own. On 4 700
mentions (entities of 1 500, 1 000, 800, 500 and 300 of 3, every pair within an entity
stored), ``"racing"`` read a sixth of the stored potentials and took 1.5-1.7 times the CPU time
of the exact sweeps.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import (
    GUARDED,
    SECONDS,
    fastest,
    first_round_batch,
    measured,
    measuring,
    njit,
)
from ._potentials import add_row_scores, member_sum
from ._races import ClusterRewards, Racer, b_table, guarded_reads, race_clusters

__all__ = ["ROUGH_COSTS", "SweepCosts", "rough_sweep_costs", "sweep_costs"]

#: The rough cost model, in nanoseconds (only ratios matter), used when costs are not
#: measured. The Euclidean terms were fitted on the machine where they were set by
#: ``benchmarks/coref_race_cost.py`` (updates of one mention among the 20 591 of the
#: heavy-tailed benchmark, in 8 and 32 dimensions; each term linear in the dimension through
#: the two): a race reads a factor for 29 + 6 and 49 + 16 ns, and skipping saves 5.2 and 13.7
#: ns per factor against 10.8 and 13.8 ns per misprediction. The matrix and callable terms
#: are older estimates (a skipped factor saving a whole factor, no misprediction counted).
#: ``linear_fraction`` was set on the first sweeps of the heavy-tailed benchmark, where it
#: made those racing sweeps about as fast as the exact ones.
ROUGH_COSTS = {"fixed": 7400.0, "per_arm": 0.0, "read": 22.9, "read_per_feature": 0.8,
               "factor": 2.6, "factor_per_feature": 0.4, "saved": 2.3,
               "saved_per_feature": 0.355, "miss": 9.8, "miss_per_feature": 0.125,
               "per_arm_callable": 20000.0, "factor_matrix": 2.0, "factor_callable": 20.0,
               "linear_fraction": 0.2}

# The fields of a measurement (seconds), as the cost service stores them.
_FIELDS = {"saved": SECONDS, "miss": SECONDS, "read": SECONDS, "fixed": SECONDS,
           "pass": SECONDS, "gather": SECONDS}
# Timings per measurement (the fastest counts: the others met interruptions).
_ROUNDS = 5
# Seconds of kernel work per timing: long enough for the clock, short enough that a whole
# measurement takes well under a second.
_TIMING_SECONDS = 2e-3
# The least seconds per factor taken as measured (a loop the compiler removed reads as 0).
_TICK = 1e-12
# The first batch and the clusters of the timed races: one cluster, then eight, of the same
# size (a race's reads grow with its clusters; its fixed cost does not).
_FIRST_BATCH = 3
# The size of the clusters of a timed exact group: read cluster by cluster, a group costs a
# call and a gather per cluster, and the clusters a racing update does not race are mostly
# small ones.
_GROUP_CLUSTER = 2
_ARMS = (1, 8)
_SEED = 0x5EED


class SweepCosts(NamedTuple):
    """The costs of a racing update, in units of a factor the exact pass skips.

    Attributes
    ----------
    fixed, per_arm, per_read, miss : float
        A race's fixed cost, its cost per raced cluster, per factor it reads, and the pass's
        cost per mispredicted skip (see the module's text).
    linear_fraction : float
        The share of the mentions above which a racing update reads its exact group in one
        pass rather than cluster by cluster.
    measured : bool
        Whether these were measured on this machine (False: :func:`rough_sweep_costs`).
    probe_seconds : float
        Time this call spent measuring (0 when the costs were stored or rough).
    """

    fixed: float
    per_arm: float
    per_read: float
    miss: float
    linear_fraction: float
    measured: bool = False
    probe_seconds: float = 0.0


def rough_sweep_costs(pot):
    """The :class:`SweepCosts` of ``pot`` from :data:`ROUGH_COSTS`, the same on every machine.

    Parameters
    ----------
    pot : PairPotentials

    Returns
    -------
    SweepCosts
    """
    c = ROUGH_COSTS
    if pot.sparse:
        # An update reads every stored potential of its mention, raced or not (to find their
        # clusters, and to bucket the raced ones for the race): a race only adds work.
        return SweepCosts(math.inf, 0.0, math.inf, 0.0, c["linear_fraction"])
    per_arm, read, miss = c["per_arm"], c["read"], 0.0
    if pot.kind == "euclidean":
        d = pot.matrix.shape[1]
        factor = c["factor"] + c["factor_per_feature"] * d
        read += c["read_per_feature"] * d
        saved = c["saved"] + c["saved_per_feature"] * d
        miss = c["miss"] + c["miss_per_feature"] * d
    elif pot.kind == "callable":
        factor = saved = c["factor_callable"]
        per_arm = c["per_arm_callable"]
    else:
        factor = saved = c["factor_matrix"]
    return SweepCosts(c["fixed"] / saved, per_arm / saved, (read + factor) / saved,
                      miss / saved, c["linear_fraction"])


def sweep_costs(pot):
    """The :class:`SweepCosts` of updates with the potentials ``pot`` on this machine.

    Measured with the sweeps' own kernels on ``pot`` (or read from the store) when measuring
    is on and the potentials are features or a dense matrix; :func:`rough_sweep_costs`
    otherwise, and when the mentions are too few for any cluster to be raced.

    Parameters
    ----------
    pot : PairPotentials

    Returns
    -------
    SweepCosts
    """
    n = pot.n
    if (not measuring() or pot.kind == "callable" or pot.sparse
            or n < 2 * max(_ARMS) * _smallest_raced()):
        return rough_sweep_costs(pot)
    dim = pot.matrix.shape[1] if pot.kind == "euclidean" else 0
    key = f"coref|{pot.kind}|d{dim}|n{round(math.log2(n))}"
    value, seconds = measured(key, lambda: _measure(pot), _FIELDS)
    saved = float(value["saved"])
    return SweepCosts(float(value["fixed"]) / saved, 0.0, float(value["read"]) / saved,
                      float(value["miss"]) / saved,
                      float(value["pass"]) / max(float(value["gather"]), _TICK),
                      measured=True, probe_seconds=seconds)


def _smallest_raced():
    """The fewest mentions of a cluster the timed races race: a race's first round reads
    clusters of up to twice its batch whole."""
    return 2 * int(first_round_batch(_FIRST_BATCH, GUARDED)) + 1


@njit
def _passes(pot, labels, scores, marks, k):
    """``k`` exact passes of mention 0 over all mentions, the clusters marked NaN skipped:
    the factors read."""
    n_read = 0
    for _ in range(k):
        scores[:] = marks
        n_read += add_row_scores(pot, 0, labels, scores)
    return n_read


@njit
def _gathers(pot, members, k):
    """``k`` sums of mention 0's factors with ``members``, cluster by cluster in clusters of
    :data:`_GROUP_CLUSTER`, as a racing update reads a small exact group: the factors read."""
    total = 0.0
    for _ in range(k):
        for start in range(0, members.size, _GROUP_CLUSTER):
            total += member_sum(pot, 0, members[start:start + _GROUP_CLUSTER])
    # The sum is used, so that the compiler keeps the loop that computes it.
    return k * members.size if total == total else 0


@njit
def _races(racer, rewards, sizes, log_prior, rng, k):
    """``k`` races of mention 0's clusters ``rewards``: the factors they read."""
    used = 0
    for _ in range(k):
        _, u, _, _, _ = race_clusters(racer, rewards, sizes, log_prior, 1.0, rng)
        used += u
    return used


def _timed(run, k):
    """Seconds per call of ``run(k)`` and what one call returned, over ``k`` calls."""
    seconds, value = fastest(lambda: run(k), _ROUNDS, warm_up=lambda: run(1))
    return seconds / k, value / k


def _race_seconds(compiled, n, size, n_arms, k, rng):
    """Seconds and factors read of a race of mention 0's ``n_arms`` clusters of ``size``
    scattered mentions each.

    The race's reads are random mentions among all ``n``: where their features outgrow the
    cache, its reads miss it, as in a sweep (whose pass over the mentions streams them all
    through the cache just before)."""
    members = rng.permutation(np.arange(1, n))[:n_arms * size].astype(np.int64)
    sizes = np.array([0] + [size] * n_arms, dtype=np.int64)
    mstart = np.concatenate(([0, 0], np.cumsum(sizes[1:])[:-1]))
    rewards = ClusterRewards(compiled, 0, members, mstart, np.arange(n_arms + 1))
    btable, rounds = b_table(0.05, n, _FIRST_BATCH, GUARDED)
    racer = Racer(_FIRST_BATCH, btable, rounds, guarded_reads(n, _FIRST_BATCH, GUARDED), 0.0,
                  0.0, 0.0, True, GUARDED)
    log_prior = np.zeros(n_arms + 1)
    race_rng = np.random.default_rng(_SEED)
    return _timed(lambda k: _races(racer, rewards, sizes, log_prior, race_rng, k), k)


def _measure(pot):
    """The fields of :data:`_FIELDS` (seconds) for the potentials ``pot``."""
    compiled = pot.compiled()
    n = pot.n
    others = n - 1
    rng = np.random.default_rng(_SEED)
    # Every timing repeats its kernel about _TIMING_SECONDS, at a rough nanosecond a factor.
    k = max(1, int(_TIMING_SECONDS / (n * 1e-9)))
    scores = np.zeros(2)
    marks = np.array([0.0, math.nan])  # cluster 1 is skipped
    in_zero = np.zeros(n, dtype=np.int64)
    in_one = np.ones(n, dtype=np.int64)
    scattered = rng.integers(0, 2, n)  # half in each, scattered
    every, _ = _timed(lambda k: _passes(compiled, in_zero, scores, marks, k), k)
    none, _ = _timed(lambda k: _passes(compiled, in_one, scores, marks, k), k)
    half, read = _timed(lambda k: _passes(compiled, scattered, scores, marks, k), k)
    saved = max((every - none) / others, _TICK)
    # every - half = saved · skipped - miss · (the minority of the mentions)
    skipped = others - read
    miss = max(0.0, (saved * skipped - (every - half)) / max(min(skipped, read), 1.0))
    members = rng.permutation(np.arange(1, n))[:others // 2].astype(np.int64)
    gather, _ = _timed(lambda k: _gathers(compiled, members, k), k)
    size = max(_smallest_raced(), others // (2 * max(_ARMS)))
    # A race reads a few hundred factors where a pass reads all n: ten times the passes'
    # repeats keep the races' timings about as long as theirs.
    (t_few, r_few), (t_many, r_many) = (_race_seconds(compiled, n, size, n_arms, 10 * k, rng)
                                        for n_arms in _ARMS)
    # A race costs fixed + per_read · reads: the line through the two (reads grow with the
    # clusters raced, its fixed cost does not; no cost is negative, and a factor read by a race
    # costs at least what the pass saves by skipping it).
    per_read = max((t_many - t_few) / max(r_many - r_few, 1.0), saved)
    fixed = max(t_few - per_read * r_few, 0.0)
    return {"saved": saved, "miss": miss, "read": per_read, "fixed": fixed,
            "pass": every / others, "gather": max(gather / max(members.size, 1), _TICK)}
