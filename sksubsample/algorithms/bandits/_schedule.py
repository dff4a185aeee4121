"""The schedules of a race: how many rewards per arm each round draws.

On shared minibatches (Alg. 1 of Chen & Ghahramani 2016) every surviving arm has ``T^(t)``
rewards after round ``t``: ``T^(1) = m^(1)``, ``T^(t) = min(2 T^(t-1), N)``
(:func:`shared_target`). With independent arms (App. C.3, schedule :data:`TENTH`) arm ``i``
has ``min(m^(1), N_i)``, then ``max(1, ceil((N_i - m^(1)) / 10))`` more, then doubles up to
``N_i`` (:func:`arm_target`). All end exactly at the population, where every mean is exact.

Guarded schedule
----------------
With the guard of the normal approximation on, no arm is eliminated, nor eliminates another,
before it has :data:`~._sums.GUARD_LEAST` rewards (29: Cochran's base,
:func:`~._sums.normal_required`). App. C.3's first rounds stay below that for large arms (3
rewards, then a tenth of ``N_i``: 203 of 2 000), so a race of large arms pays one round that can
decide nothing and then reads a tenth of every arm at least. The schedule :data:`GUARDED` reads
``min(max(m^(1), GUARD_LEAST), N_i)`` rewards in its first round, the fewest the guard can
trust, then doubles up to ``N_i`` (with the remainder rule).

It is another fixed schedule, so the error guarantee holds as for App. C.3: the rounds of an
arm of population ``N_i`` are fixed by ``N_i``, ``m^(1)`` and the schedule, a race's ``t*`` is
the largest over its arms, and Eq. 27 splits ``delta / (D - 1)`` of a comparison over the
``t* - 1`` rounds before ``T = N`` of *this* schedule (``B = b_normal_union(delta / (D - 1),
t*)``), where each round's crossing has probability at most its share under the normal
approximation of the arms' means (Prop. 3); the last round is exact. The guard is unchanged:
it postpones eliminations the bound allows, which can only lower the error. The schedule
changes which rounds are checked and so the law of a race (not merely its cost), and its more
numerous rounds (7 instead of 5 for ``N_i = 2 000``) raise ``B`` slightly.

Remainder rule
--------------
A round whose new indices would be at least :data:`REMAINDER_FRACTION` (half) of what is left
of a population takes *all* that is left instead, in increasing order and without drawing
random numbers; so a population with ``N <= 2 m^(1)`` is evaluated whole in the first round
(e.g. the clusters of a few mentions of entity resolution). Racing saves evaluations only by
stopping before the end of the schedule: once the next batch is as large as half the
remainder, one more comparison can save at most the rest of the population of the arms it
eliminates, while it costs the index draws of the batch, a round, and, when no arm leaves,
the remaining batches all the same. On the doubling schedule the rule applies once
``T >= N / 3``: it drops at most the last comparison before ``T = N`` and adds at most
``N - 2T <= N / 3`` evaluations to an arm that comparison would have eliminated.

The rule keeps the error guarantee. The rounds a race with the rule checks are a prefix of the
rounds of the schedule without it (the same nested random subsets), followed by
the exact round ``T = N`` where ``G = 0``. A sub-optimal arm is returned only if the best arm
is eliminated at a checked round, i.e. only if for some arm the empirical gap to the best
crosses the bound at one of those rounds. For ``B_Normal``
(§3.3.2, computed for the full doubling walk) that event is contained in the crossing event
over all the rounds of the unmodified schedule, of probability at most ``delta`` (Prop. 3);
the union bounds (Eq. 7, Eq. 27) split ``delta`` over the rounds before ``T = N`` of the
modified schedule, which is fixed by ``N`` and ``m^(1)`` alone, so the union is over exactly
the rounds that are checked. And when the whole population of every surviving arm is
evaluated, the result is the exact best arm, as in Alg. 1.
"""

from __future__ import annotations

import numpy as np

from ..._utils import check_flag, check_int
from .._numba import njit
from ._sums import GUARD_LEAST

__all__ = ["GUARDED", "REMAINDER_FRACTION", "TENTH", "arm_target", "doubling_schedule",
           "first_round_batch", "independent_rounds", "min_max", "shared_rounds",
           "shared_stored", "shared_target", "whole_in_first_round"]

#: A round whose new indices would be at least this share of what is left of a population
#: evaluates the rest of it instead (see the module docstring).
REMAINDER_FRACTION = 0.5

#: The per-arm schedules of a race with independent arms (see the module docstring): App. C.3's
#: (``m^(1)``, then a tenth, then doubling) and the guarded one (the guard's least sample, then
#: doubling).
TENTH, GUARDED = 0, 1


@njit(inline="always")
def remainder_rule(target, count, n):
    """``n`` when the batch ``target - count`` is a large share of the ``n - count`` left."""
    if target < n and target - count >= REMAINDER_FRACTION * (n - count):
        return n
    return target


@njit
def shared_target(t, count, n, first_batch):
    """``T^(t)`` of the shared schedule of Alg. 1 after ``count`` rewards per arm.

    ``T^(1) = m^(1)`` and ``T^(t) = min(2 T^(t-1), N)``, with the remainder rule.
    """
    target = first_batch if t == 1 else 2 * count
    return remainder_rule(min(target, n), count, n)


@njit(inline="always")
def first_round_batch(first_batch, schedule=TENTH):
    """The rewards per arm of a first round of the per-arm ``schedule`` (before the cap at the
    population): ``m^(1)``, or for :data:`GUARDED` at least the guard's least sample."""
    if schedule == GUARDED:
        return max(first_batch, GUARD_LEAST)
    return first_batch


@njit
def arm_target(t, count, n, first_batch, schedule=TENTH):
    """Arm ``i``'s cumulative sample size in round ``t``, with the remainder rule.

    :data:`TENTH` (App. C.3): ``min(m^(1), N_i)`` rewards, then
    ``max(1, ceil((N_i - m^(1)) / 10))`` more, then doubling up to ``N_i``. :data:`GUARDED`:
    ``min(max(m^(1), GUARD_LEAST), N_i)``, then doubling up to ``N_i``.
    """
    if t == 1:
        target = min(first_round_batch(first_batch, schedule), n)
    elif t == 2 and schedule == TENTH:
        target = min(n, count + max(1, (n - count + 9) // 10))
    else:
        target = min(2 * count, n)
    return remainder_rule(target, count, n)


@njit
def min_max(sizes):
    """``(min, max)`` of a non-empty integer array in one pass (cheaper than two reductions
    for the few arms of a typical race)."""
    smallest = largest = sizes[0]
    for i in range(1, sizes.size):
        smallest = min(smallest, sizes[i])
        largest = max(largest, sizes[i])
    return smallest, largest


@njit
def whole_in_first_round(sizes, first_batch):
    """Whether the first round takes every population whole (by the remainder rule).

    The first round's target is the same for the shared and the per-arm schedules; a
    population of at most one reward (a state without factors) is whole.
    """
    for i in range(sizes.size):
        n = max(sizes[i], 1)
        if remainder_rule(min(first_batch, n), 0, n) < n:
            return False
    return True


@njit
def shared_rounds(n, first_batch):
    """``t*``: the rounds of the shared schedule, the last one at ``T = N``."""
    t = 0
    count = 0
    while count < n:
        t += 1
        count = shared_target(t, count, n, first_batch)
    return t


@njit
def shared_stored(n, first_batch):
    """The largest ``T < N`` of the shared schedule (0 if the first round takes all of it):
    the rewards per arm that a pairwise race may have to store."""
    t = 0
    count = 0
    while True:
        t += 1
        target = shared_target(t, count, n, first_batch)
        if target >= n:
            return count
        count = target


@njit
def independent_rounds(sizes, first_batch, schedule=TENTH):
    """``t*``: the rounds until every arm's ``schedule`` has reached its ``N_i``."""
    longest = 0
    for i in range(sizes.size):
        t = 0
        count = 0
        while count < sizes[i]:
            t += 1
            count = arm_target(t, count, sizes[i], first_batch, schedule)
        longest = max(longest, t)
    return longest


def doubling_schedule(first_batch, n_population, *, remainder=True):
    """Cumulative sample sizes ``T^(t)`` of the rounds of a race on shared minibatches.

    ``T^(1) = first_batch``, ``T^(t) = min(2 T^(t-1), N)``, ending exactly at ``N``. With
    ``remainder=True`` (the rounds :func:`~sksubsample.algorithms.race` runs) a round whose new
    rewards would be at least half of what is left takes all of it (the remainder rule of the
    module docstring); ``remainder=False`` gives the plain doubling walk of Alg. 1, the one
    ``B_Normal`` is computed for (§3.3.2), whose rounds contain the race's.

    Parameters
    ----------
    first_batch : int
        ``m^(1)``, at least 1.
    n_population : int
        ``N``, at least ``first_batch``.
    remainder : bool, default True
        Apply the remainder rule.

    Returns
    -------
    ndarray of int64
        ``T^(1), ..., T^(t*) = N``.

    Examples
    --------
    >>> doubling_schedule(50, 1000).tolist()
    [50, 100, 200, 400, 1000]
    >>> doubling_schedule(50, 1000, remainder=False).tolist()
    [50, 100, 200, 400, 800, 1000]
    """
    first_batch = check_int(first_batch, "first_batch", low=1)
    n_population = check_int(n_population, "n_population", low=1)
    remainder = check_flag(remainder, "remainder")
    if not 1 <= first_batch <= n_population:
        raise ValueError(f"need 1 <= first_batch <= n_population, got first_batch={first_batch}"
                         f" and n_population={n_population}")
    sizes = [first_batch]
    while sizes[-1] < n_population:
        if remainder:
            sizes.append(int(shared_target(len(sizes) + 1, sizes[-1], n_population, first_batch)))
        else:
            sizes.append(min(2 * sizes[-1], n_population))
    return np.asarray(sizes, dtype=np.int64)
