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

import math
from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import GUARDED, TENTH, pop_callback, push_callback
from ._partition import Partition, canonical_labels
from ._potentials import callback_pairs
from ._races import AuditedRacer, Racer, b_table, guarded_reads
from ._sweep_costs import rough_sweep_costs, sweep_costs
from ._sweeps import sweep_dense, sweep_sparse

__all__ = ["Partition", "SweepResult", "canonical_labels", "log_potential", "sweep"]


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
        ``"auto"`` races where the costs of racing measured on ``pot``
        (:func:`~._sweep_costs.sweep_costs`) say a race repays itself, on
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
        in factors (:class:`~._races.Racer`), instead of the method's
        (:func:`~._sweep_costs.sweep_costs` of ``pot`` for ``"auto"``, zeros for
        ``"racing"``).
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
    # The costs also say how a racing update reads its exact group (a speed choice), so
    # "racing" asks for them too; an exact sweep never races and needs none.
    costs = rough_sweep_costs(pot) if method == "exact" or cost is not None else sweep_costs(pot)
    if cost is None:
        cost = costs[:4] if method == "auto" else (0.0, 0.0, 0.0, 0.0)
    fixed, per_arm, per_read, miss = (*cost, 0.0)[:4]
    # A race of infinite fixed cost never repays itself: the sweep runs without races.
    racing = method != "exact" and math.isfinite(fixed)
    schedule = GUARDED if method == "auto" else TENTH
    btable, rounds = b_table(float(delta), part.n, int(first_batch), schedule)
    reads = guarded_reads(part.n, int(first_batch), schedule)
    racer = make_racer(int(first_batch), btable, rounds, reads, float(fixed), float(per_arm),
                       float(per_read), True, schedule=schedule, miss=float(miss),
                       linear_fraction=float(costs.linear_fraction))
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
               schedule=TENTH, miss=0.0, linear_fraction=0.2):
    """The :class:`~._races.Racer` of a sweep (one place, so that studies can swap it)."""
    return Racer(first_batch, btable, rounds, reads, fixed, per_arm, per_read, guard, schedule,
                 miss, linear_fraction)


def log_potential(part, pot):
    """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of the current partition (at ``T = 1``)."""
    return pot.partition_sum(part.labels, part.clusters)
