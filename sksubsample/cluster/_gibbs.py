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

from ..algorithms.kernels import pop_callback, push_callback
from ._partition import Partition, canonical_labels
from ._potentials import callback_pairs
from ._races import AuditedRacer, Racer, b_table
from ._sweeps import sweep_dense, sweep_sparse

__all__ = ["RACE_COST", "Partition", "SweepResult", "canonical_labels", "log_potential",
           "race_cost", "sweep"]

#: The cost model behind "race only when it can repay itself", in nanoseconds (only ratios
#: matter): a race over ``R`` clusters costs about ``fixed + per_arm · R`` (Gumbel draws, the
#: per-arm shuffles and rounds of the compiled race; for a callable metric, a Python call per
#: arm and round), and an exact factor costs ``factor`` (a Euclidean potential about one
#: nanosecond per feature; a stored potential a load). A racing update races only when the
#: factors it could skip, ``Σ (|C_k| - m¹)`` over the raced clusters, cost more than the race;
#: otherwise it is the exact update. Measured on the benchmark machine (sweeps of partitions
#: with R clusters of s mentions, racing against exact), so that racing is not slower than
#: exact where the rule declines and usually faster where it races.
RACE_COST = {"fixed": 2500.0, "per_arm": 250.0, "per_arm_callable": 20000.0,
             "factor_matrix": 2.0, "factor_callable": 20.0}


def race_cost(pot):
    """``(fixed, per_arm)`` of :data:`RACE_COST` in units of one factor of ``pot``."""
    if pot.kind == "euclidean":
        factor = 1.0 + pot.matrix.shape[1]
    elif pot.kind == "callable":
        factor = RACE_COST["factor_callable"]
        return RACE_COST["fixed"] / factor, RACE_COST["per_arm_callable"] / factor
    else:
        factor = RACE_COST["factor_matrix"]
    return RACE_COST["fixed"] / factor, RACE_COST["per_arm"] / factor


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
    method : {"exact", "racing"}
    delta : float
        Error bound of a racing update.
    first_batch : int
        ``m¹`` of the races.
    rng : numpy.random.Generator
    order : array of int, optional
        The mentions to update, in order (default: a permutation of all of them, drawn from
        ``rng``).
    cost : (float, float), optional
        ``(fixed, per_arm)``: a race's cost in factors (:func:`race_cost` of ``pot`` by
        default); ``(0, 0)`` races every update that has a cluster too large to be read whole
        (to test the races).
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
    racing = method == "racing"
    fixed, per_arm = race_cost(pot) if cost is None else cost
    btable, rounds = b_table(float(delta), part.n, int(first_batch))
    racer = Racer(int(first_batch), btable, rounds, float(fixed), float(per_arm))
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
    n_evaluations, n_moves, n_races, ok, part.pool = result
    if not ok:
        raise ValueError("the potentials hold NaN or +inf log-potentials; they must be finite "
                         "(or -inf for pairs that can never share a cluster)")
    return SweepResult(int(n_evaluations), int(n_moves), int(n_races), int(errors[0]))


def log_potential(part, pot):
    """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of the current partition (at ``T = 1``)."""
    return pot.partition_sum(part.labels, part.clusters())
