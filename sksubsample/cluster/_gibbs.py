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
from ._races import AuditedRacer, Racer, b_table, guarded_reads
from ._sweeps import sweep_dense, sweep_sparse

__all__ = ["RACE_COST", "Partition", "SweepResult", "canonical_labels", "log_potential",
           "race_cost", "sweep"]

#: The cost model of ``method="auto"``, in nanoseconds (only ratios matter): a race costs about
#: ``fixed`` (its set-up, Gumbel draws and rounds) plus, per raced cluster, ``per_arm`` (its
#: share of every round) and ``read`` per factor it reads on top of the factor itself (a
#: random index drawn without replacement, a random memory access, the running sums of the
#: guard); an exact factor costs ``factor`` (a Euclidean potential about one nanosecond per
#: feature and one more; a stored potential, a load; a callable's potential, its share of a
#: vectorised call). A race reads at least the first rounds of each cluster's schedule that
#: reach the guard's smallest sample (:func:`~._races.guarded_reads`), so a cluster is raced
#: only when its factors cost more than that, and an update races only when the clusters'
#: gains exceed the fixed cost (:func:`~._races.raced_clusters`); the law of the update is the
#: same either way. Measured on the benchmark machine by ``benchmarks/coref_race_cost.py``
#: (races of R clusters of N factors against their exact sums, Euclidean potentials in 8 and
#: 32 dimensions).
RACE_COST = {"fixed": 7400.0, "per_arm": 1700.0, "read": 100.0, "read_per_feature": 2.5,
             "per_arm_callable": 20000.0, "factor": 5.0, "factor_per_feature": 0.5,
             "factor_matrix": 2.0, "factor_callable": 20.0}


def race_cost(pot):
    """``(fixed, per_arm, per_read)`` of :data:`RACE_COST` in units of one factor of ``pot``
    (``per_read``: one factor read by a race, the factor included)."""
    per_arm = RACE_COST["per_arm"]
    read = RACE_COST["read"]
    if pot.kind == "euclidean":
        d = pot.matrix.shape[1]
        factor = RACE_COST["factor"] + RACE_COST["factor_per_feature"] * d
        read += RACE_COST["read_per_feature"] * d
    elif pot.kind == "callable":
        factor = RACE_COST["factor_callable"]
        per_arm = RACE_COST["per_arm_callable"]
    else:
        factor = RACE_COST["factor_matrix"]
    return RACE_COST["fixed"] / factor, per_arm / factor, (read + factor) / factor


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
        not read whole, in every update that has one; ``"auto"`` races where the cost model
        :func:`race_cost` says a race repays itself.
    delta : float
        Error bound of a racing update.
    first_batch : int
        ``m¹`` of the races.
    rng : numpy.random.Generator
    order : array of int, optional
        The mentions to update, in order (default: a permutation of all of them, drawn from
        ``rng``).
    cost : (float, float, float), optional
        ``(fixed, per_arm, per_read)``: a race's cost in factors, instead of the method's
        (:func:`race_cost` of ``pot`` for ``"auto"``, zeros for ``"racing"``).
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
        cost = race_cost(pot) if method == "auto" else (0.0, 0.0, 0.0)
    fixed, per_arm, per_read = cost
    btable, rounds = b_table(float(delta), part.n, int(first_batch))
    reads = guarded_reads(part.n, int(first_batch))
    racer = make_racer(int(first_batch), btable, rounds, reads, float(fixed), float(per_arm),
                       float(per_read), True)
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


def make_racer(first_batch, btable, rounds, reads, fixed, per_arm, per_read, guard):
    """The :class:`~._races.Racer` of a sweep (one place, so that studies can swap it)."""
    return Racer(first_batch, btable, rounds, reads, fixed, per_arm, per_read, guard)


def log_potential(part, pot):
    """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of the current partition (at ``T = 1``)."""
    return pot.partition_sum(part.labels, part.clusters)
