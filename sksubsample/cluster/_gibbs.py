"""Gibbs sweeps over a partition of mentions for the pairwise coreference CRF.

The model (Singh et al. 2012; Chen & Ghahramani 2016, §5.3) is
``p(y | x) ∝ exp(Σ_{i<j, y_i = y_j} f(x_i, x_j) / T)``. The conditional of mention ``i`` given
the others puts mass ``∝ exp(Σ_{j ∈ C_k} f(x_i, x_j) / T)`` on every non-empty cluster ``C_k``
(``i`` removed) and ``∝ exp(0) = 1`` on one new, empty cluster. A cluster's log-probability is a
sum of ``|C_k|`` factors, so the update is the discrete sampling problem of Eq. 1 with a
different number of factors per state (App. C.3), solved exactly or by racing.

Every metric is swept by the compiled sweeps of :mod:`._sweeps` (a callable metric is called
back from them, once per update and per race round); :func:`sweep` prepares them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import GUARDED, TENTH, pop_callback, push_callback
from ._partition import Partition, canonical_labels
from ._potentials import callback_pairs
from ._races import AuditedRacer, Racer, b_table, guarded_reads
from ._sweeps import sweep_dense, sweep_sparse

__all__ = ["RACE_COST", "Partition", "SweepResult", "canonical_labels", "log_potential",
           "race_cost", "sweep"]

#: The cost model of ``method="auto"``, in nanoseconds (only ratios matter). An update that
#: races reads its exact part in the same pass over the mentions as an exact update, skipping
#: the raced clusters' mentions: a skipped factor saves ``saved`` (about a factor), but the
#: skipped mentions are scattered, so the branch that skips them is mispredicted for about the
#: minority of the mentions (raced or not), at ``miss`` each (also about a factor): skipping
#: less than half of the mentions saves about nothing. The race costs ``fixed`` (its set-up,
#: Gumbel draws and rounds) plus, per raced cluster, ``per_arm`` and ``read`` per factor it
#: reads on top of the factor itself, ``factor`` (a random index drawn without replacement, a
#: memory access that misses the cache, the running sums of the guard). A race reads at least
#: the first rounds of each cluster's schedule that reach the guard's smallest sample
#: (:func:`~._races.guarded_reads`), so a cluster is a candidate only when skipping it saves
#: more than that, and an update races only when the candidates' gains, less the
#: mispredictions, exceed the fixed cost (:func:`~._races.raced_clusters`); the law of the
#: update is the same either way. The Euclidean terms are measured on the benchmark machine
#: by ``benchmarks/coref_race_cost.py`` (updates of one mention among the 20 591 of the
#: heavy-tailed benchmark, R clusters of N mentions raced, in 8 and 32 dimensions; each term
#: linear in the dimension through the two): there a race reads a factor for 29 + 6 and
#: 49 + 16 ns, and skipping saves 5.2 and 13.7 ns per factor against 10.8 and 13.8 ns per
#: misprediction, so in these dimensions racing repays itself only where the raced clusters
#: hold most of the mentions. The matrix and callable terms are older estimates (a skipped
#: factor saving a whole factor, no misprediction counted).
RACE_COST = {"fixed": 7400.0, "per_arm": 0.0, "read": 22.9, "read_per_feature": 0.8,
             "factor": 2.6, "factor_per_feature": 0.4, "saved": 2.3, "saved_per_feature": 0.355,
             "miss": 9.8, "miss_per_feature": 0.125, "per_arm_callable": 20000.0,
             "factor_matrix": 2.0, "factor_callable": 20.0}


def race_cost(pot):
    """``(fixed, per_arm, per_read, miss)`` of :data:`RACE_COST` in units of what the exact
    part of an update saves per factor it does not read (``per_read``: one factor read by a
    race, the factor included)."""
    per_arm = RACE_COST["per_arm"]
    read = RACE_COST["read"]
    miss = 0.0
    if pot.kind == "euclidean":
        d = pot.matrix.shape[1]
        factor = RACE_COST["factor"] + RACE_COST["factor_per_feature"] * d
        read += RACE_COST["read_per_feature"] * d
        saved = RACE_COST["saved"] + RACE_COST["saved_per_feature"] * d
        miss = RACE_COST["miss"] + RACE_COST["miss_per_feature"] * d
    elif pot.kind == "callable":
        factor = saved = RACE_COST["factor_callable"]
        per_arm = RACE_COST["per_arm_callable"]
    else:
        factor = saved = RACE_COST["factor_matrix"]
    return (RACE_COST["fixed"] / saved, per_arm / saved, (read + factor) / saved,
            miss / saved)


class SweepResult(NamedTuple):
    """Counts of one :func:`sweep`."""

    #: Factors ``f(x_i, x_j)`` evaluated (with sparse input: stored entries read).
    n_evaluations: int
    #: Mentions that changed cluster.
    n_moves: int
    #: Updates decided by a race (the others were exact).
    n_races: int
    #: Races whose arm differs from the exact argmax under the same Gumbel perturbations
    #: (counted only with ``audit=True``).
    n_race_errors: int
    #: Eliminations the races' bound allowed and the guard of its normal approximation
    #: postponed (summed over the races).
    n_guarded: int = 0


def sweep(part, pot, temperature, method, delta, first_batch, rng, *, order=None,
          cost=None, audit=False):
    """Gibbs updates at ``temperature`` of every mention in a fresh random order (or of the
    mentions ``order``).

    Parameters
    ----------
    part : Partition
        Updated in place.
    pot : PairPotentials
    temperature : float > 0
    method : {"auto", "racing", "exact"}
        ``"exact"`` never races; ``"racing"`` races every cluster a race's first round would
        not read whole, in every update that has one, on the per-arm schedule of App. C.3;
        ``"auto"`` races where the cost model :func:`race_cost` says a race repays itself, on
        the guarded schedule (a first round of the guard's least sample, then doubling: see
        :mod:`sksubsample.algorithms.bandits._schedule`), whose races end as soon as the guard
        lets them instead of reading a tenth of every cluster first.
    delta : float
        Error bound of a racing update.
    first_batch : int
        ``m¹`` of the races.
    rng : numpy.random.Generator
    order : array of int, optional
        The mentions to update, in order (default: a permutation of all of them, drawn from
        ``rng``).
    cost : tuple of float, optional
        ``(fixed, per_arm, per_read)`` or ``(fixed, per_arm, per_read, miss)``: a race's cost
        in factors (:class:`~._races.Racer`), instead of the method's (:func:`race_cost` of
        ``pot`` for ``"auto"``, zeros for ``"racing"``).
    audit : bool, default False
        Check every race against the exact argmax under the same Gumbel perturbations (an
        exact evaluation per race, not counted in ``n_evaluations``).

    Returns
    -------
    SweepResult
    """
    if order is None:
        order = rng.permutation(part.n)
    order = np.ascontiguousarray(order, dtype=np.int64)
    inv_t = 1.0 / temperature
    if method not in ("auto", "racing", "exact"):
        raise ValueError(f"method must be 'auto', 'racing' or 'exact', got {method!r}")
    racing = method != "exact"
    if cost is None:
        cost = race_cost(pot) if method == "auto" else (0.0, 0.0, 0.0, 0.0)
    fixed, per_arm, per_read, miss = (*cost, 0.0)[:4]
    schedule = GUARDED if method == "auto" else TENTH
    btable, rounds = b_table(float(delta), part.n, int(first_batch), schedule)
    reads = guarded_reads(part.n, int(first_batch), schedule)
    racer = make_racer(int(first_batch), btable, rounds, reads, float(fixed), float(per_arm),
                       float(per_read), True, schedule=schedule, miss=float(miss))
    errors = np.zeros(1, dtype=np.int64)
    if audit:
        racer = AuditedRacer(racer, errors)
    slots = part.slots()
    if pot.sparse:
        result = sweep_sparse(pot.indptr, pot.indices, pot.values, pot.repulsion, order, inv_t,
                              racing, racer, rng, slots, part.pool)
    elif pot.kind == "callable":
        handle = push_callback(callback_pairs(pot))
        try:
            result = sweep_dense(pot.compiled(handle), order, inv_t, racing, racer, rng, slots,
                                 part.pool)
        finally:
            pop_callback()
    else:
        result = sweep_dense(pot.compiled(), order, inv_t, racing, racer, rng, slots, part.pool)
    n_evaluations, n_moves, n_races, n_guarded, ok, part.pool = result
    if not ok:
        raise ValueError("the potentials hold NaN or +inf log-potentials; they must be finite "
                         "(or -inf for pairs that can never share a cluster)")
    return SweepResult(int(n_evaluations), int(n_moves), int(n_races), int(errors[0]),
                       int(n_guarded))


def make_racer(first_batch, btable, rounds, reads, fixed, per_arm, per_read, guard, *,
               schedule=TENTH, miss=0.0):
    """The :class:`~._races.Racer` of a sweep (one place, so that studies can swap it)."""
    return Racer(first_batch, btable, rounds, reads, fixed, per_arm, per_read, guard, schedule,
                 miss)


def log_potential(part, pot):
    """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of the current partition (at ``T = 1``)."""
    return pot.partition_sum(part.labels, part.clusters)
