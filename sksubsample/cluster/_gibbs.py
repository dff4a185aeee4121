"""Gibbs sweeps over a partition of mentions for the pairwise coreference CRF.

The model (Singh et al. 2012; Chen & Ghahramani 2016, §5.3) is
``p(y | x) ∝ exp(Σ_{i<j, y_i = y_j} f(x_i, x_j) / T)``. The conditional of mention ``i`` given
the others puts mass ``∝ exp(Σ_{j ∈ C_k} f(x_i, x_j) / T)`` on every non-empty cluster ``C_k``
(``i`` removed) and ``∝ exp(0) = 1`` on one new, empty cluster. A cluster's log-probability is a
sum of ``|C_k|`` factors, so the update is the discrete sampling problem of Eq. 1 with a
different number of factors per state (App. C.3), solved exactly or by racing.

Features (``"euclidean"``) and precomputed matrices are swept by the compiled kernels of
:mod:`sksubsample.cluster._kernels` (whose docstring describes both updates); a user's callable
metric is evaluated by NumPy calls, one update at a time, with the same rules: the clusters
whose factors a race would read whole in its first round (at most ``2 m¹``) form one exact arm
with the new cluster, the others are raced by :func:`~sksubsample.algorithms.sample_discrete`
(independent arms, Eq. 26-27), and no race is run when what it could skip is worth less than
what it costs (:data:`RACE_COST`).
"""

from __future__ import annotations

import copy
import functools
from typing import NamedTuple

import numpy as np

from ..algorithms import sample_discrete
from . import _kernels

__all__ = ["RACE_COST", "Partition", "SweepResult", "log_potential", "sweep"]

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
    if pot.compiled == _kernels.EUCLIDEAN:
        factor = 1.0 + pot.matrix.shape[1]
    elif pot.compiled is None:
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


class Partition:
    """A partition of ``n`` mentions into clusters held in ``n`` slots.

    The arrays of the compiled sweeps (:mod:`~sksubsample.cluster._kernels`, "Partition
    storage"): slot ``k`` holds its members in ``pool[start[k]:start[k] + size[k]]``, so a race
    indexes a uniformly random subsample of a cluster directly. ``n`` slots always suffice:
    removing mention ``i`` leaves at most ``n - 1`` clusters, so a free slot exists for the new
    cluster of a Gibbs update.

    Parameters
    ----------
    labels : ndarray of int of shape (n,)
        Initial cluster of each mention (any non-negative integers below ``n``).
    """

    def __init__(self, labels):
        labels = np.asarray(labels, dtype=np.int64)
        n = labels.size
        self.n = n
        self.labels = labels.copy()
        self.size = np.bincount(labels, minlength=n).astype(np.int64)
        self.cap = np.where(self.size > 0, np.maximum(4, 2 * self.size), 0).astype(np.int64)
        self.start = (np.cumsum(self.cap) - self.cap).astype(np.int64)
        self.pool = np.empty(max(2 * int(self.cap.sum()), 8), dtype=np.int64)
        self.pos = np.empty(n, dtype=np.int64)
        order = np.argsort(labels, kind="stable")
        first = np.cumsum(self.size) - self.size
        self.pos[order] = np.arange(n) - np.repeat(first, self.size)
        self.pool[self.start[labels] + self.pos] = np.arange(n)
        self.active = np.zeros(n, dtype=np.int64)
        self.apos = np.zeros(n, dtype=np.int64)
        used = np.flatnonzero(self.size)
        self.active[:used.size] = used
        self.apos[used] = np.arange(used.size)
        # Free slots as a stack whose top is the smallest empty slot.
        empty = np.flatnonzero(self.size == 0)[::-1]
        self.free = np.zeros(n, dtype=np.int64)
        self.free[:empty.size] = empty
        self.meta = np.array([used.size, empty.size, int(self.cap.sum())], dtype=np.int64)

    def arrays(self):
        """The state arrays in the order the kernels take them (after ``labels``)."""
        return (self.size, self.pos, self.start, self.cap, self.pool, self.active, self.apos,
                self.free, self.meta)

    def remove(self, i):
        """Take mention ``i`` out of its cluster (its ``labels`` entry is left stale)."""
        _kernels.part_remove(i, self.labels, self.size, self.pos, self.start, self.pool,
                             self.active, self.apos, self.free, self.meta)

    def add(self, i, k):
        """Put mention ``i`` in slot ``k``."""
        self.pool = _kernels.part_add(i, k, self.labels, self.size, self.pos, self.start,
                                      self.cap, self.pool, self.active, self.apos, self.meta)

    def new_slot(self):
        """A free slot, for a new cluster (the Gibbs update has removed a mention first)."""
        return int(_kernels.part_new_slot(self.free, self.meta))

    def members(self, k):
        """The members of slot ``k`` (a view)."""
        return self.pool[self.start[k]:self.start[k] + self.size[k]]

    def active_slots(self):
        """The non-empty slots, in the order the updates enumerate them."""
        return self.active[:self.meta[_kernels.N_ACTIVE]]

    def clusters(self):
        """Member arrays of the non-empty clusters."""
        return [self.members(k) for k in self.active_slots()]

    def n_clusters(self):
        return int(self.meta[_kernels.N_ACTIVE])

    def canonical_labels(self):
        """Labels ``0..k-1`` numbered in order of first appearance."""
        return canonical_labels(self.labels)


def canonical_labels(labels):
    """Relabel clusters ``0..k-1`` in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


@functools.lru_cache(maxsize=16)
def _b_table(delta, n, first_batch):
    table, rounds = _kernels.b_table(delta, n, first_batch)
    table.setflags(write=False)
    rounds.setflags(write=False)
    return table, rounds


def sweep(part, pot, temperature, method, delta, first_batch, rng, *, order=None,
          force_races=False, audit=False):
    """Gibbs updates at ``temperature`` of every mention in a fresh random order (or of the
    mentions ``order``).

    Parameters
    ----------
    part : Partition
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
    force_races : bool, default False
        Race every update that has a cluster of more than ``2 m¹`` factors, whatever
        :data:`RACE_COST` says (to test the races).
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
    kind = "sparse" if pot.sparse else ("callable" if pot.compiled is None else "dense")
    race_fixed, race_per_arm = (0.0, 0.0) if force_races else race_cost(pot)
    if kind == "callable":
        return _sweep_callable(part, pot, order, inv_t, racing, delta, first_batch,
                               race_fixed, race_per_arm, audit, rng)
    btable, rounds = _b_table(float(delta), part.n, int(first_batch))
    if kind == "sparse":
        result = _kernels.sweep_sparse(pot.indptr, pot.indices, pot.values, pot.repulsion,
                                       order, inv_t, racing, first_batch, race_fixed,
                                       race_per_arm, btable, rounds, audit, rng, part.labels,
                                       *part.arrays())
    else:
        result = _kernels.sweep_dense(pot.compiled, pot.matrix, pot.scale, order, inv_t, racing,
                                      first_batch, race_fixed, race_per_arm, btable, rounds,
                                      audit, rng, part.labels, *part.arrays())
    n_evaluations, n_moves, n_races, n_errors, status, part.pool = result
    if status != _kernels.OK:
        raise ValueError("the potentials hold NaN or +inf log-potentials; they must be finite "
                         "(or -inf for pairs that can never share a cluster)")
    return SweepResult(int(n_evaluations), int(n_moves), int(n_races), int(n_errors))


def _sweep_callable(part, pot, order, inv_t, racing, delta, first_batch, race_fixed,
                    race_per_arm, audit, rng):
    """The updates of :func:`sweep` for a callable metric, driven from Python."""
    n_evaluations = n_moves = n_races = n_errors = 0
    whole = 2 * first_batch
    for i in order.tolist():
        old = part.labels[i]
        part.remove(i)
        slots = part.active_slots().copy()
        sizes = part.size[slots]
        big = sizes > whole if racing else np.zeros(slots.size, dtype=bool)
        if np.sum(sizes[big] - first_batch) < race_fixed + race_per_arm * np.count_nonzero(big):
            big[:] = False
        if not big.any():
            f = pot.row(i)
            f[i] = 0.0  # i's stale label must add nothing
            scores = np.bincount(part.labels, weights=f, minlength=part.n)
            n_evaluations += part.n - 1
            logits = np.append(scores[slots] * inv_t, 0.0)
            choice, _ = _kernels._softmax_draw(logits, logits.size, rng.random())
            k = slots[choice] if choice < slots.size else -1
        else:
            small = slots[~big]
            js = np.concatenate([part.members(k) for k in small]) if small.size else (
                np.empty(0, dtype=np.int64))
            n_evaluations += js.size
            scores = np.bincount(part.labels[js], weights=pot.pairs(i, js) if js.size else None,
                                 minlength=part.n)
            logits = np.append(scores[small] * inv_t, 0.0)
            inside, lse = _kernels._softmax_draw(logits, logits.size, rng.random())
            raced = slots[big]

            def log_factors(states, idx, raced=raced, i=i):
                return (pot.pairs(i, part.members(raced[states[0] - 1])[idx]) * inv_t)[None, :]

            log_prior = np.concatenate(([lse], np.zeros(raced.size)))
            if audit:  # sample_discrete's first draws are the Gumbel perturbations (Eq. 2)
                offsets = log_prior - np.log(copy.deepcopy(rng).standard_exponential(
                    raced.size + 1))
            draw = sample_discrete(
                log_factors, np.concatenate(([0], part.size[raced])), log_prior,
                method="racing", delta=delta, variance="independent", first_batch=first_batch,
                random_state=rng)
            n_evaluations += draw.n_evaluations
            n_races += 1
            if audit:
                exact = offsets + np.array(
                    [0.0, *(pot.pairs(i, part.members(k)).sum() * inv_t for k in raced)])
                n_errors += int(np.argmax(exact) != draw.sample)
            if draw.sample > 0:
                k = raced[draw.sample - 1]
            else:
                k = small[inside] if inside < small.size else -1
        if k < 0:
            k = part.new_slot()
        part.add(i, k)
        n_moves += int(k != old)
    return SweepResult(n_evaluations, n_moves, n_races, n_errors)


def log_potential(part, pot):
    """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of the current partition (at ``T = 1``)."""
    return pot.partition_sum(part.labels, part.clusters())
