"""Racing and adapted lil'UCB for best-arm identification on finite reward populations.

Discrete sampling by the Gumbel-max trick reduces to finding the arm with the largest mean
reward, where arm ``i``'s rewards are a finite population ``L_i = {l_i1, ..., l_iN}`` (Eq. 3).
Both algorithms here sample rewards *without replacement*, so they never draw more than ``N``
rewards per arm, and they return the exact best arm when they exhaust the population.

A race runs in one compiled call (the round loops of :mod:`._loop`): a NumPy reward callable is
called back from it once per block of a round (once per arm and round for independent arms);
with :class:`CompiledRewards` the rewards are computed inside the loop. Both give the same race
for the same generator state.

References
----------
.. [1] Y. Chen and Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
   ICML 2016. Alg. 1 (racing), §3.2 (adapted lil'UCB), §3.3.1-3.3.2 (bounds G),
   App. C.3 (independent arms, Eq. 26-27).
.. [2] K. Jamieson, M. Malloy, R. Nowak, S. Bubeck. lil' UCB: An Optimal Exploration Algorithm
   for Multi-Armed Bandits. COLT 2014, Fig. 1 and §5 (heuristic settings).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..._utils import as_generator
from .._user_functions import CountedFunction, checked_array
from ._auto import auto_choice
from ._loop import (
    CallbackRewards,
    function_race,
    function_sums,
    independent_race,
    pop_callback,
    push_callback,
    shared_race,
)
from ._race_inputs import (
    _COMPILED_SIGNATURE,
    CompiledRewards,
    _bad_value,
    _check_race_options,
    _compiled_parts,
    _counted_rewards,
    _no_positive_probability,
)
from ._schedule import independent_rounds, shared_rounds, shared_stored
from ._shared import DrawBuffers, work_size
from ._state import (
    ALL_NEG_INF,
    BAD_VALUE,
    BAILED,
    new_race,
    race_config,
    race_outcome,
)

__all__ = ["RaceResult", "race"]

# Kept per thread (:class:`_Workspace`): stored rewards of pairwise races up to this many
# floats (256 MiB), the index buffer up to this population (32 MiB).
_STORE_KEPT = 1 << 25
_DENSE_KEPT = 1 << 22


class RaceResult(NamedTuple):
    """Outcome of :func:`race`.

    Parameters
    ----------
    best : int
        Index of the arm that survived.
    n_evaluations : int
        Rewards computed, summed over arms (the paper's cost measure; at most ``sum_i N_i``).
    n_rounds : int
        Rounds (minibatches) used; at most ``t*``.
    survivors : tuple of ndarray
        The arms still racing after each round (``survivors[-1] == [best]``).
    n_sampled : ndarray of shape (n_arms,)
        Rewards drawn from each arm.
    n_guarded : int, default 0
        Eliminations the Normal bound allowed but that the guard of its normal approximation
        refused, because the sample showed no spread, too much skewness or too heavy tails
        for its size (the race then read on); counted once the sample has passed the minimum
        of 29 draws that every elimination waits for.
    exact_means : ndarray of shape (n_arms,) or None, default None
        With ``method="auto"``, when the race stopped paying: the exact mean rewards of the
        arms it then compared exactly (NaN for the others); None when the race ran to its end.
    """

    best: int
    n_evaluations: int
    n_rounds: int
    survivors: tuple
    n_sampled: np.ndarray
    n_guarded: int = 0
    exact_means: np.ndarray | None = None


def race(
    rewards: Callable[[np.ndarray, np.ndarray], np.ndarray] | CompiledRewards,
    n_arms: int,
    n_population,
    *,
    delta: float = 0.05,
    bound: str = "normal",
    variance: str = "pairwise",
    first_batch: int = 50,
    reward_range=None,
    method: str = "racing",
    guard: bool = True,
    random_state=None,
) -> RaceResult:
    """Identify the arm with the largest mean reward by racing (Alg. 1 of Chen & Ghahramani).

    All surviving arms share one minibatch of reward indices per round, drawn without
    replacement on a doubling schedule ``T^(t) = min(2 T^(t-1), N)`` that ends exactly at ``N``.
    After each round, arm ``i`` is eliminated when the leader ``x`` beats it by more than the
    uncertainty bound ``G``; ``G = 0`` once ``T = N``, so the race always ends with the exact
    best arm after at most ``N * n_arms`` rewards, and before that returns a sub-optimal arm
    with probability at most ``delta`` (Prop. 3; under the normal assumption for
    ``bound="normal"``).

    Remainder rule: a round whose new indices would be at least half of what is left of the
    population evaluates all that is left instead, in one pass and in increasing index order
    (so a population with ``first_batch >= N / 2`` is evaluated whole in the first round). It
    saves the rounds, index draws and per-round overhead that racing could not repay, and keeps
    the guarantee: the rounds it checks are a prefix of the schedule's, so its error event is
    contained in the schedule's, and a fully evaluated race returns the exact best arm (see
    :mod:`sksubsample.algorithms.bandits._schedule`).

    Parameters
    ----------
    rewards : callable or CompiledRewards
        A callable ``rewards(arms, idx) -> ndarray of shape (len(arms), len(idx))`` of the
        rewards ``l_{arm, n}`` of the given arms at the given population indices, called once
        per round (on consecutive parts of the round's indices when it holds more than about
        2^18 rewards); with ``variance="independent"`` it is called with one arm at a time,
        each with its own indices. Or :class:`CompiledRewards`, a compiled per-datum function with
        which the whole race runs compiled (the same race for the same ``random_state``). A
        control variate (§3.4) belongs here: return ``l - h + E[h]``. A reward of ``-inf``
        means the arm's mean is ``-inf``: the arm is eliminated in the round it is seen
        (``ValueError`` if every surviving arm has one); NaN and ``+inf`` raise.
    n_arms : int
        Number of arms ``D >= 1``.
    n_population : int or array of int of shape (n_arms,)
        Population size ``N`` (one per arm only with ``variance="independent"``).
    delta : float in (0, 1), default 0.05
        Bound on the probability of returning a sub-optimal arm.
    bound : {"normal", "ebs"}, default "normal"
        ``"normal"``: Racing-Normal, Eq. 9 with ``B_Normal`` of §3.3.2 (Eq. 27 for independent
        arms). ``"ebs"``: empirical Bernstein-Serfling bound, Eq. 6-7 (needs ``reward_range``).
    variance : {"pairwise", "marginal", "independent"}, default "pairwise"
        ``"pairwise"`` bounds each gap with the variance of reward differences
        ``sigma_{x,i}`` (tight when arms are positively correlated); ``"marginal"`` adds
        per-arm bounds (``G_x + G_i``); ``"independent"`` draws each arm's rewards
        independently, possibly from populations of different sizes, and bounds the gap by
        Eq. 26 with the per-arm schedule of App. C.3.
    first_batch : int, default 50
        ``m^(1)``, the first minibatch size (``2 <= first_batch <= N``). With
        ``variance="independent"`` arm ``i`` starts with ``min(first_batch, N_i)`` rewards,
        adds ``max(1, ceil((N_i - m^(1)) / 10))`` in round 2 and doubles afterwards (App. C.3),
        each arm with the remainder rule.
    reward_range : float or array of shape (n_arms,), optional
        Range ``C_i = max_n l_in - min_n l_in`` of each arm's rewards; required for ``"ebs"``.
    method : {"racing", "auto"}, default "racing"
        ``"racing"`` runs the race to its end. ``"auto"`` (shared minibatches, Normal bound)
        stops it when the rewards it would still read, projected from what it has read, cost
        more than the exact means of the surviving arms, and returns the best of those by
        their exact means (never less accurate than racing on: the race's eliminations stand,
        the survivors are compared exactly). With compiled rewards whose exact means cost
        little more than building a race, ``"auto"`` computes the exact means of every arm
        without racing; the costs it weighs are measured once per kind of reward function on
        this machine and stored (the same inputs make the same choice), or fixed when
        ``SKSUBSAMPLE_MEASURE_COSTS=0``.
    guard : bool, default True
        With the Normal bound, an elimination waits until the sample behind it supports the
        normal approximation the bound assumes: it shows some spread, the skewness of its
        mean is at most 1 (more than ``28 + g₁²`` draws for skewness ``g₁``, with the base of
        Cochran's rule) and it has at least ``k - 1`` draws for its kurtosis ``k``; until then
        the race reads on (counted in ``n_guarded``). ``False`` runs the bound as the paper
        states it. No rule that reads only a sample can see large terms the sample has not
        met: where a few such terms may exist, use ``method="exact"`` or ``bound="ebs"``
        with a reward range.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    RaceResult
        ``best``, ``n_evaluations``, ``n_rounds``, ``survivors`` (per round) and ``n_sampled``.

    References
    ----------
    Chen & Ghahramani (2016), Alg. 1, Eq. 5-9, Prop. 3, App. C.3 Eq. 26-27.

    Examples
    --------
    >>> import numpy as np
    >>> pop = np.random.default_rng(0).normal(size=(3, 10_000)) + np.array([[0.0], [0.5], [0.1]])
    >>> result = race(lambda arms, idx: pop[np.ix_(arms, idx)], 3, 10_000, random_state=0)
    >>> int(result.best), bool(result.n_evaluations < pop.size)
    (1, True)
    """
    compiled = isinstance(rewards, CompiledRewards)
    if not compiled:
        counted = _counted_rewards(rewards)
    n_arms, delta, sizes, first_batch, ranges = _check_race_options(
        n_arms, delta, bound, variance, first_batch, n_population, reward_range)
    if compiled:
        function, data, scale, offset = _compiled_parts(rewards, n_arms)
        evaluate = (function, data)
    else:
        scale, offset, evaluate = np.ones(n_arms), np.zeros(n_arms), counted
    if method not in ("racing", "auto"):
        raise ValueError(f"method must be 'racing' or 'auto', got {method!r}")
    rng = as_generator(random_state)
    if n_arms == 1:
        return RaceResult(0, 0, 0, (np.array([0]),), np.zeros(1, dtype=np.int64))
    bail, outcome = 0.0, None
    if method == "auto" and variance != "independent":
        choice = auto_choice(evaluate, int(sizes[0]), n_arms, first_batch,
                             lambda first, ratio, probe: _run_race(
                                 evaluate, sizes, scale, offset, delta, bound, variance, first,
                                 ranges, probe, bail_ratio=ratio,
                                 guard=bool(guard)).n_evaluations)
        bail = choice.bail_ratio
        if not choice.race:
            # Not worth a race: the exact means of every arm, as a race that stopped before
            # its first round would leave them.
            outcome = RaceOutcome(-1, 0, 0, np.zeros(n_arms, dtype=np.int64),
                                  np.zeros(n_arms, dtype=np.int64), 0, np.arange(n_arms))
    if outcome is None:
        outcome = _run_race(evaluate, sizes, scale, offset, delta, bound, variance,
                            first_batch, ranges, rng, bail_ratio=bail, guard=bool(guard))
    if outcome.bailed is not None:
        means, n_exact = exact_means(evaluate, outcome.bailed, int(sizes[0]), scale, offset)
        best = int(outcome.bailed[int(np.argmax(means))])
        n_sampled = outcome.n_sampled.copy()
        n_sampled[outcome.bailed] = sizes[0]
        out_round = outcome.out_round.copy()
        out_round[outcome.bailed[outcome.bailed != best]] = outcome.n_rounds + 1
        all_means = np.full(n_arms, np.nan)
        all_means[outcome.bailed] = means
        return _race_result(best, outcome.n_evaluations + n_exact, outcome.n_rounds + 1,
                            out_round, n_sampled, outcome.n_guarded, all_means)
    return _race_result(*outcome[:6])


_EXACT_CHUNK = 1 << 20  # rewards per call of a NumPy callable in the exact means


def exact_means(evaluate, arms, n_population, scale, offset):
    """The exact mean rewards of ``arms`` (``scale * value + offset`` over the whole shared
    population): ``(means, n_evaluations)``. ``evaluate`` as in :func:`_run_race`."""
    arms = np.asarray(arms, dtype=np.int64)
    sizes = np.full(arms.size, n_population, dtype=np.int64)
    sums = np.empty(arms.size)
    if isinstance(evaluate, CountedFunction):
        before = evaluate.n_evaluations
        sums[:] = 0.0
        step = max(1, _EXACT_CHUNK // arms.size)
        for start in range(0, n_population, step):
            idx = np.arange(start, min(start + step, n_population))
            sums += evaluate(arms, idx).sum(axis=1)
        sums = scale[arms] * sums + n_population * offset[arms]
        n_evaluations = evaluate.n_evaluations - before
    else:
        function, data = evaluate
        bad, n_evaluations = function_sums(function)(data, sizes, scale[arms], offset[arms],
                                                     sums)
        if bad:
            raise _bad_value(_COMPILED_SIGNATURE)
    if not np.all(sums < np.inf):
        raise _bad_value(_COMPILED_SIGNATURE if not isinstance(evaluate, CountedFunction)
                         else evaluate.signature)
    return sums / n_population, int(n_evaluations)


class _Workspace(threading.local):
    """The memory of a thread's races, kept from race to race.

    Memory a process touches for the first time costs a page fault per 4 KiB (microseconds on
    a virtual machine), and glibc returns freed blocks above its mmap threshold to the system,
    so a race that allocated its buffers would fault again every time: for cheap rewards that
    costs more than the race. A thread's races therefore share: two bitmaps of the population
    (the drawn indices and a batch being sorted; a race leaves both zero, clearing only the
    words it marked), the index and value buffers of the rounds, and the stored rewards of
    pairwise races. A race run from inside another race's reward function (the workspace is
    in use) gets its own memory.
    """

    def __init__(self):
        self.busy = False
        self.clean = True  # bitmaps as a race must find them: zero
        self.drawn = np.zeros(0, dtype=np.int64)
        self.before = np.zeros(0, dtype=np.int64)
        self.idx = np.empty(0, dtype=np.int64)
        self.work = np.empty(0)
        self.store = np.empty(0)

    def take(self, n_bits, n_idx, n_work, n_arms, n_stored):
        """``(drawn, before, idx, work, store)`` for a race, or ``None`` when busy.

        ``drawn`` and ``before`` are zero bitmaps of ``n_bits`` bits, ``idx`` room for ``n_idx``
        indices, ``work`` for ``n_work`` values, ``store`` an ``(n_arms, n_stored)`` array.
        """
        if self.busy:
            return None
        if not self.clean:  # a race raised before clearing them
            self.drawn[:] = 0
            self.before[:] = 0
        words = (n_bits + 63) >> 6
        if self.drawn.size < words:
            self.drawn = np.zeros(words, dtype=np.int64)
            self.before = np.zeros(words, dtype=np.int64)
        if n_idx <= _DENSE_KEPT:
            if self.idx.size < n_idx:
                self.idx = np.empty(n_idx, dtype=np.int64)
            idx = self.idx
        else:
            idx = np.empty(n_idx, dtype=np.int64)
        if self.work.size < n_work:
            self.work = np.empty(n_work)
        size = n_arms * n_stored
        if size > _STORE_KEPT:
            store = np.empty((n_arms, n_stored))
        else:
            if self.store.size < size:
                self.store = np.empty(size)
            store = self.store[:size].reshape(n_arms, n_stored)
        self.busy = True
        self.clean = False
        return self.drawn, self.before, idx, self.work, store

    def give_back(self, cleared):
        """End a race that used :meth:`take`; ``cleared``: it returned normally (its bitmaps
        are zero again)."""
        self.clean = cleared
        self.busy = False


def _fresh_buffers(n_bits, n_idx, n_work, n_arms, n_stored):
    """The buffers of :meth:`_Workspace.take` for a race inside a race (not kept)."""
    words = (n_bits + 63) >> 6
    return (np.zeros(words, dtype=np.int64), np.zeros(words, dtype=np.int64),
            np.empty(n_idx, dtype=np.int64), np.empty(n_work), np.empty((n_arms, n_stored)))


_workspace = _Workspace()


def _shared_callback(counted):
    """The callback of a shared race driven by the NumPy callable of ``counted``: the values
    of the surviving arms at a block of indices, of the checked shape and type (their values
    are checked, and counted, in the compiled race)."""
    rewards = counted.fn
    signature = counted.signature

    def callback(arms, idx):
        # Copies: the race reuses both arrays, and the callable may keep its arguments.
        values = rewards(arms.copy(), idx.copy())
        return np.ascontiguousarray(checked_array(values, (arms.size, idx.size), signature))

    return callback


def _independent_callback(counted, scale):
    """The callback of an independent-arms race driven by ``counted`` (see
    :func:`_evaluate_arms`)."""
    rewards = counted.fn
    # One check and one count per round, on the concatenated answers of the round's arms.
    check = CountedFunction(lambda values: values, counted.signature, lambda values: values.shape)

    def callback(arms, lengths, idx, block):
        before = check.n_evaluations
        block[...] = _evaluate_arms(rewards, check, arms, idx, lengths, scale)
        return check.saw_neg_inf, check.n_evaluations - before

    return callback


class RaceOutcome(NamedTuple):
    """What :func:`_run_race` returns: the fields of :class:`RaceResult` but the survivors of
    each round, and ``bailed``: the arms that survived when the race stopped paying (to be
    decided by their exact sums; ``best`` is then -1), or None."""

    best: int
    n_evaluations: int
    n_rounds: int
    out_round: np.ndarray
    n_sampled: np.ndarray
    n_guarded: int
    bailed: np.ndarray | None


def _run_race(evaluate, sizes, scale, offset, delta, bound, variance, first_batch, ranges, rng,
              bail_ratio=0.0, guard=True):
    """Race ``sizes.size >= 2`` arms with rewards ``scale * value + offset`` (checked options).

    ``evaluate`` is a :class:`CountedFunction` of ``(arms, idx)`` (called back from the
    compiled race) or the pair ``(function, data)`` of compiled rewards. A shared race takes
    one 64-bit word of ``rng`` (the seed of its index draws); an independent race draws from
    ``rng`` itself. With ``bail_ratio > 0`` a shared race may stop when it stops paying;
    ``guard`` keeps the guard of the normal approximation (:class:`RaceConfig`). Returns a
    :class:`RaceOutcome` (:func:`_race_result` makes the :class:`RaceResult`; a sampler
    needs only the best arm).
    """
    n_arms = sizes.size
    independent = variance == "independent"
    if independent:
        n_pop = 0
        n_rounds = int(independent_rounds(sizes, first_batch))
    else:
        n_pop = int(sizes[0])
        n_rounds = int(shared_rounds(n_pop, first_batch))
    config = race_config(n_arms, n_pop, n_rounds, delta=delta, bound=bound, variance=variance,
                         first_batch=first_batch, bail_ratio=bail_ratio, guard=guard)
    ranges = np.zeros(n_arms) if ranges is None else ranges
    compiled = not isinstance(evaluate, CountedFunction)
    if independent:
        shape = (0, 0, 0, 0, 0)
        buffers = None
        state = new_race(scale, offset, ranges, sizes, _NO_STORE, True)
    else:
        # Rewards are stored only for the pairwise variance with more than two arms.
        n_stored = shared_stored(n_pop, first_batch) if config.pairwise and n_arms > 2 else 0
        shape = (n_pop, n_pop, work_size(n_arms), n_arms, n_stored)
        buffers = _workspace.take(*shape)
        drawn, before, idx, work, store = buffers or _fresh_buffers(*shape)
        state = new_race(scale, offset, ranges, sizes, store, False)
        draws = DrawBuffers(drawn, before, idx, work)
        seed = np.uint64(rng.bit_generator.random_raw())
    finished = False
    try:
        if compiled:
            function, data = evaluate
            race_loop = function_race(function, independent)
            if independent:
                status, n_evaluations = race_loop(data, rng, state, config)
            else:
                status, n_evaluations = race_loop(data, seed, state, config, draws)
        else:
            rewards = CallbackRewards(push_callback(
                _independent_callback(evaluate, scale) if independent
                else _shared_callback(evaluate)))
            try:
                if independent:
                    status, n_evaluations = independent_race(rewards, rng, state, config)
                else:
                    status, n_evaluations = shared_race(rewards, seed, state, config, draws)
            finally:
                pop_callback()
        finished = True
    finally:
        if buffers is not None:
            _workspace.give_back(finished)
    if status == ALL_NEG_INF:
        raise _no_positive_probability("surviving arm", "reward")
    if status == BAD_VALUE:
        raise _bad_value(_COMPILED_SIGNATURE if compiled else evaluate.signature)
    best, n_rounds, out_round, n_sampled, n_guarded, survivors = race_outcome(state)
    bailed = survivors if status == BAILED else None
    return RaceOutcome(int(best) if bailed is None else -1, int(n_evaluations), int(n_rounds),
                       out_round, n_sampled, int(n_guarded), bailed)


_NO_STORE = np.empty((0, 0))


def _race_result(best, n_evaluations, n_rounds, out_round, n_sampled, n_guarded,
                 exact_means=None):
    """The :class:`RaceResult` of :func:`_run_race`'s outcome (the survivors of each round
    from the round in which each arm left, 0 for the winner)."""
    left = np.where(out_round == 0, n_rounds + 1, out_round)
    survivors = tuple(np.flatnonzero(left > t) for t in range(1, n_rounds + 1))
    return RaceResult(best, n_evaluations, n_rounds, survivors, n_sampled, n_guarded,
                      exact_means)


def _evaluate_arms(rewards, check, arms, idx, lengths, scale):
    """``rewards([arm], idx_arm)`` for each arm in turn, checked and counted as one block.

    With independent populations the contract of :func:`race` calls ``rewards`` with one arm
    at a time; the shape of each answer is checked here, while the value checks (``NaN``,
    ``+inf``, ``-inf``) and the evaluation count run once on the concatenated answers. An arm
    with ``scale == 0`` is not called (its values are zeros, which its scale ignores).
    """
    rows = []
    skipped = False
    lo = 0
    for arm, length in zip(arms.tolist(), lengths.tolist(), strict=True):
        hi = lo + length
        if scale[arm] == 0.0:
            skipped = True
            lo = hi
            continue
        values = checked_array(rewards(np.array([arm]), idx[lo:hi]), (1, length),
                               check.signature)
        rows.append(values[0])
        lo = hi
    if not skipped:
        return check(np.concatenate(rows)) if len(rows) != 1 else check(rows[0])
    out = np.zeros(idx.size)
    if rows:
        checked = check(np.concatenate(rows))
        lo = used = 0
        for arm, length in zip(arms.tolist(), lengths.tolist(), strict=True):
            if scale[arm] != 0.0:
                out[lo:lo + length] = checked[used:used + length]
                used += length
            lo += length
    return out
