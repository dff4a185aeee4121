"""Racing and adapted lil'UCB for best-arm identification on finite reward populations.

Discrete sampling by the Gumbel-max trick reduces to finding the arm with the largest mean
reward, where arm ``i``'s rewards are a finite population ``L_i = {l_i1, ..., l_iN}`` (Eq. 3).
Both algorithms here sample rewards *without replacement*, so they never draw more than ``N``
rewards per arm, and they return the exact best arm when they exhaust the population.

The round loop of racing is compiled (:mod:`._racing_kernels`): with a NumPy reward callable,
a thin Python driver calls it once per round (once per arm and round for independent arms) and
hands each block of values to the compiled update; with :class:`CompiledRewards`, the whole
race runs compiled. Both give the same race for the same generator state.

References
----------
.. [1] Y. Chen and Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
   ICML 2016. Alg. 1 (racing), §3.2 (adapted lil'UCB), §3.3.1-3.3.2 (bounds G),
   App. C.3 (independent arms, Eq. 26-27).
.. [2] K. Jamieson, M. Malloy, R. Nowak, S. Bubeck. lil' UCB: An Optimal Exploration Algorithm
   for Multi-Armed Bandits. COLT 2014, Fig. 1 and §5 (heuristic settings).
"""

from __future__ import annotations

import functools
import heapq
import math
import numbers
import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba.core.dispatcher import Dispatcher

from ..._utils import as_generator, check_int, check_open_unit_interval, check_positive
from .._user_functions import CountedFunction, checked_array
from ..sampling import IndexSampler
from . import _kernels as kernels
from ._bounds import b_normal, b_normal_union

__all__ = ["BanditResult", "CompiledRewards", "RaceResult", "lil_ucb", "race"]

_BOUNDS = ("normal", "ebs")
_VARIANCES = ("pairwise", "marginal", "independent")
_COMPILED_SIGNATURE = "CompiledRewards.function(data, arm, index)"
# Kept per thread (:class:`_Workspace`): stored rewards of pairwise races up to this many
# floats (256 MiB), the index buffer up to this population (32 MiB).
_STORE_KEPT = 1 << 25
_DENSE_KEPT = 1 << 22


class CompiledRewards(NamedTuple):
    """Rewards computed one datum at a time by a numba-compiled function.

    Accepted by :func:`race`, :func:`lil_ucb` and
    :func:`~sksubsample.algorithms.sample_discrete` wherever a reward (or log-factor)
    callable is. The reward of arm ``i`` at population index ``n`` is
    ``scale[i] * function(data, i, n) + offset[i]``. With compiled rewards the whole race
    runs compiled, with no Python between rounds, and draws the same race as the equivalent
    NumPy callable for the same ``random_state``.

    Parameters
    ----------
    function : numba-compiled function ``function(data, arm, index) -> float``
        Decorated with ``numba.njit`` (``cache=True`` lets later processes load it from disk).
        ``arm`` and ``index`` are int64; the value follows the rules of the callables: finite,
        or ``-inf`` for a zero-probability term; NaN and ``+inf`` raise ``ValueError``. For
        :func:`~sksubsample.algorithms.sample_discrete` it is ``log f_index(state)``.
    data : tuple
        Arrays (and scalars) passed to ``function`` unchanged, e.g. ``(X, y)``.
    scale : float or array of shape (n_arms,), optional
        Non-negative factor of each arm's values (1 by default). An arm with ``scale == 0``
        has the constant reward ``offset[i]`` and is never evaluated: e.g. the "reject" arm
        of a racing MH test.
    offset : float or array of shape (n_arms,), optional
        Added to each arm's scaled values (0 by default).

    Notes
    -----
    The race is compiled once per process for each ``function`` and each set of ``data``
    types (about a second); the laws it applies (schedules, index draws, bounds, updates) are
    compiled once and cached on disk.

    Examples
    --------
    >>> import numba
    >>> import numpy as np
    >>> @numba.njit
    ... def gaussian_log_lik(data, state, n):
    ...     y, means = data
    ...     return -0.5 * (y[n] - means[state]) ** 2
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=20_000)
    >>> rewards = CompiledRewards(gaussian_log_lik, (y, np.array([-1.0, 0.0, 1.0, 2.0])))
    >>> result = race(rewards, 4, y.size, random_state=0)
    >>> int(result.best), bool(result.n_evaluations < 4 * y.size)
    (2, True)
    """

    function: Callable
    data: tuple
    scale: np.ndarray | float | None = None
    offset: np.ndarray | float | None = None


class RaceResult(NamedTuple):
    """Outcome of :func:`race`.

    Attributes
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
    """

    best: int
    n_evaluations: int
    n_rounds: int
    survivors: tuple
    n_sampled: np.ndarray


class BanditResult(NamedTuple):
    """Outcome of :func:`lil_ucb`.

    Attributes
    ----------
    best : int
    n_evaluations : int
        Rewards computed, summed over arms.
    n_pulls : int
        Pulls made by the algorithm (``<= n_evaluations``: rewards are computed in blocks and
        a block's unused tail at termination is counted in ``n_evaluations`` only).
    n_sampled : ndarray of shape (n_arms,)
        Pulls of each arm.
    """

    best: int
    n_evaluations: int
    n_pulls: int
    n_sampled: np.ndarray


def _counted_rewards(rewards, signature="rewards(arms, idx)") -> CountedFunction:
    return CountedFunction(rewards, signature, lambda arms, idx: (len(arms), len(idx)))


def _no_positive_probability(what: str, term: str) -> ValueError:
    """The error for a race (or sampler) in which every candidate has a ``-inf`` term."""
    return ValueError(f"every {what} has a -inf {term}: no {what} has positive probability")


def _bad_value(signature: str) -> ValueError:
    """The error of :class:`CountedFunction` for NaN or ``+inf``, for compiled functions."""
    return ValueError(
        f"{signature} returned NaN or +inf: the model is undefined there (values must be "
        "finite, or -inf for a zero-probability term)"
    )


def _per_arm(value, n_arms: int, default: float, name: str) -> np.ndarray:
    if value is None:
        return np.full(n_arms, default)
    out = np.broadcast_to(np.asarray(value, dtype=np.float64), (n_arms,)).copy()
    if not np.all(np.isfinite(out)):
        raise ValueError(f"CompiledRewards.{name} must be finite, got {value!r}")
    return out


def _compiled_parts(rewards: CompiledRewards, n_arms: int):
    """``(function, data, scale, offset)`` of checked compiled rewards for ``n_arms`` arms."""
    function, data, scale, offset = rewards
    if not isinstance(function, Dispatcher):
        raise TypeError(
            "CompiledRewards.function must be a numba-compiled function (decorate it with "
            f"numba.njit), got {type(function).__name__}"
        )
    if not isinstance(data, tuple):
        raise TypeError(f"CompiledRewards.data must be a tuple, got {type(data).__name__}")
    scale = _per_arm(scale, n_arms, 1.0, "scale")
    if np.any(scale < 0):
        raise ValueError(f"CompiledRewards.scale must be >= 0, got {rewards.scale!r}")
    return function, data, scale, _per_arm(offset, n_arms, 0.0, "offset")


def _compiled_callable(function, data, scale, offset):
    """A NumPy callable ``(arms, idx) -> values`` computing compiled rewards block by block."""

    def rewards(arms, idx):
        arms = np.asarray(arms, dtype=np.int64)
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((arms.size, idx.size))
        bad, _ = kernels.compiled_block(function, data, scale, offset, arms, idx, out)
        if bad:
            raise _bad_value(_COMPILED_SIGNATURE)
        return out

    return rewards


def _check_population(n_population, n_arms: int, variance: str):
    """``(sizes, largest)``: one int64 population size per arm and the largest."""
    if isinstance(n_population, numbers.Integral) and not isinstance(n_population, bool):
        size = check_int(n_population, "n_population", low=1)
        return np.full(n_arms, size, dtype=np.int64), size
    sizes = np.asarray(n_population)
    if sizes.shape != (n_arms,) or sizes.dtype.kind not in "iu":
        raise ValueError(
            f"n_population must be an int or one int per arm (shape ({n_arms},)), got {sizes!r}"
        )
    sizes = np.asarray(sizes, dtype=np.int64)
    smallest, largest = kernels.min_max(sizes)
    if smallest < 1:
        raise ValueError(f"n_population must be >= 1 for every arm, got {sizes.tolist()}")
    if variance != "independent" and smallest != largest:
        raise ValueError(
            "arms with different population sizes cannot share minibatches: use "
            "variance='independent' (Eq. 26) for per-arm n_population"
        )
    return sizes, int(largest)


def _check_reward_range(reward_range, n_arms: int, bound: str) -> np.ndarray | None:
    if reward_range is None:
        if bound == "ebs":
            raise ValueError(
                "bound='ebs' needs reward_range (the range C of each arm's rewards, Eq. 6)"
            )
        return None
    ranges = np.broadcast_to(np.asarray(reward_range, dtype=float), (n_arms,)).copy()
    if not np.all(np.isfinite(ranges)) or np.any(ranges < 0):
        raise ValueError(f"reward_range must be finite and >= 0, got {reward_range!r}")
    return ranges


def _check_race_scalars(delta, bound, variance, first_batch, largest, reward_range):
    """The checked ``(delta, first_batch)`` of a race whose largest population is ``largest``
    (and the checks of ``bound``, ``variance`` and ``reward_range`` that need no arrays)."""
    delta = check_open_unit_interval(delta, "delta")
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    if variance not in _VARIANCES:
        raise ValueError(f"variance must be one of {_VARIANCES}, got {variance!r}")
    if bound == "ebs" and reward_range is None:
        raise ValueError(
            "bound='ebs' needs reward_range (the range C of each arm's rewards, Eq. 6)"
        )
    first_batch = check_int(first_batch, "first_batch", low=2)
    if first_batch > largest:
        what = "the largest n_population" if variance == "independent" else "n_population"
        raise ValueError(f"first_batch must be <= {what} = {largest}, got {first_batch}")
    return delta, first_batch


@functools.lru_cache(maxsize=1024)
def _check_race_scalars_cached(delta, bound, variance, first_batch, largest, has_range):
    return _check_race_scalars(delta, bound, variance, first_batch, largest,
                               0.0 if has_range else None)


def _check_race_scalars_fast(delta, bound, variance, first_batch, largest, reward_range):
    """:func:`_check_race_scalars`, remembered: a Gibbs sweep checks the same options for
    every update, and the checks cost as much as a small race."""
    try:
        return _check_race_scalars_cached(delta, bound, variance, first_batch, largest,
                                          reward_range is not None)
    except TypeError:  # an unhashable option: check it without the cache (and raise)
        return _check_race_scalars(delta, bound, variance, first_batch, largest, reward_range)


def _check_race_options(n_arms, delta, bound, variance, first_batch, n_population,
                        reward_range):
    """The checked options of :func:`race`: ``(n_arms, delta, sizes, first_batch, ranges)``."""
    n_arms = check_int(n_arms, "n_arms", low=1)
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    if variance not in _VARIANCES:
        raise ValueError(f"variance must be one of {_VARIANCES}, got {variance!r}")
    sizes, largest = _check_population(n_population, n_arms, variance)
    delta, first_batch = _check_race_scalars_fast(delta, bound, variance, first_batch, largest,
                                                  reward_range)
    return n_arms, delta, sizes, first_batch, _check_reward_range(reward_range, n_arms, bound)


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
    :mod:`sksubsample.algorithms.bandits._kernels`).

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
    rng = as_generator(random_state)
    if n_arms == 1:
        return RaceResult(0, 0, 0, (np.array([0]),), np.zeros(1, dtype=np.int64))
    return _race_result(*_run_race(evaluate, sizes, scale, offset, delta, bound, variance,
                                   first_batch, ranges, rng))


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


@functools.lru_cache(maxsize=64)
def _compiled_race(function, independent):
    """The race compiled for the compiled reward function ``function`` (kept for the last
    functions used, so that each is compiled once per process)."""
    if independent:
        return kernels.race_independent_compiled(function)
    return kernels.race_shared_compiled(function)


def _run_race(evaluate, sizes, scale, offset, delta, bound, variance, first_batch, ranges, rng):
    """Race ``sizes.size >= 2`` arms with rewards ``scale * value + offset`` (checked options).

    ``evaluate`` is a :class:`CountedFunction` of ``(arms, idx)`` (called back from the
    compiled race) or the pair ``(function, data)`` of compiled rewards. A shared race takes
    one 64-bit word of ``rng`` (the seed of its index draws); an independent race draws from
    ``rng`` itself. Returns ``(best, n_evaluations, n_rounds, out_round, n_sampled)``
    (:func:`_race_result` makes the :class:`RaceResult`; a sampler needs only the best arm).
    """
    n_arms = sizes.size
    independent = variance == "independent"
    pairwise = variance == "pairwise"
    if independent:
        n_rounds_max = int(kernels.independent_rounds(sizes, first_batch))
        n_pop = 0
        # Eq. 27 with delta/(D-1) per comparison; arms' walks differ, so the correlated-walk
        # constant of §3.3.2 does not apply and the union bound over rounds is used.
        delta_each = delta / (n_arms - 1) if bound == "normal" else delta / n_arms
    else:
        n_pop = int(sizes[0])
        n_rounds_max = int(kernels.shared_rounds(n_pop, first_batch))
        # Each comparison gets delta/(D-1) (pairwise) or each arm delta/D (marginal), App. A.3.
        delta_each = delta / (n_arms - 1) if pairwise else delta / n_arms
    b_const = delta_round = 0.0
    if n_rounds_max > 1:  # else every mean is exact after the first round: no bound is used
        if bound == "ebs":
            delta_round = delta_each / (n_rounds_max - 1)  # Eq. 7: union over t < t*
        elif independent:
            b_const = b_normal_union(delta_each, n_rounds_max)
        else:
            b_const = b_normal(delta_each, first_batch / n_pop)
    config = np.array([n_pop, first_batch, pairwise, kernels.EBS if bound == "ebs" else
                       kernels.NORMAL], dtype=np.int64)
    bconf = np.array([b_const, delta_round])
    ranges = np.zeros(n_arms) if ranges is None else ranges
    ints = np.zeros(kernels.N_INTS, dtype=np.int64)
    ints[kernels.N_ALIVE] = n_arms
    ints[kernels.LEADER] = -1
    alive = np.arange(n_arms, dtype=np.int64)
    out_round = np.zeros(n_arms, dtype=np.int64)
    stats = np.zeros((kernels.N_STATS, n_arms))
    n_sampled = np.zeros(n_arms, dtype=np.int64)
    compiled = not isinstance(evaluate, CountedFunction)
    if independent:
        largest = int(kernels.min_max(sizes)[1])
        shape = (largest, 0, 0, 0, 0)
        buffers = _workspace.take(*shape)
        # The second zero bitmap (a shared race's ``before``) is this race's scratch bitmap.
        bits = (buffers or _fresh_buffers(*shape))[1]
        starts = np.cumsum(sizes) - sizes
        args = (rng, ints, config, bconf, scale, offset, ranges, sizes, starts, n_sampled, alive,
                out_round, stats, bits)
    else:
        # Rewards are stored only for the pairwise variance with more than two arms.
        n_stored = kernels.shared_stored(n_pop, first_batch) if pairwise and n_arms > 2 else 0
        shape = (n_pop, n_pop, kernels.work_size(n_arms), n_arms, n_stored)
        buffers = _workspace.take(*shape)
        drawn, before, idx, work, store = buffers or _fresh_buffers(*shape)
        dead = np.zeros(n_arms, dtype=np.bool_)
        seed = np.uint64(rng.bit_generator.random_raw())
        args = (seed, ints, config, bconf, scale, offset, ranges, alive, out_round, n_sampled,
                stats, store, dead, drawn, before, idx, work)
    finished = False
    try:
        if compiled:
            function, data = evaluate
            status, n_evaluations = _compiled_race(function, independent)(data, *args)
        else:
            handle = kernels.push_callback(_independent_callback(evaluate, scale) if independent
                                           else _shared_callback(evaluate))
            try:
                race_python = (kernels.race_independent_python if independent else
                               kernels.race_shared_python)
                status, n_evaluations = race_python(handle, *args)
            finally:
                kernels.pop_callback()
        finished = True
    finally:
        if buffers is not None:
            _workspace.give_back(finished)
    if status == kernels.ALL_NEG_INF:
        raise _no_positive_probability("surviving arm", "reward")
    if status == kernels.BAD_VALUE:
        raise _bad_value(_COMPILED_SIGNATURE if compiled else evaluate.signature)
    n_rounds = int(ints[kernels.ROUND])
    return int(ints[kernels.BEST]), int(n_evaluations), n_rounds, out_round, n_sampled


def _race_result(best, n_evaluations, n_rounds, out_round, n_sampled):
    """The :class:`RaceResult` of :func:`_run_race`'s outcome (the survivors of each round
    from the round in which each arm left, 0 for the winner)."""
    left = np.where(out_round == 0, n_rounds + 1, out_round)
    survivors = tuple(np.flatnonzero(left > t) for t in range(1, n_rounds + 1))
    return RaceResult(best, n_evaluations, n_rounds, survivors, n_sampled)


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


def lil_ucb(
    rewards: Callable[[np.ndarray, np.ndarray], np.ndarray] | CompiledRewards,
    n_arms: int,
    n_population: int,
    *,
    delta: float = 0.05,
    reward_range: float,
    beta: float = 0.5,
    lam: float | None = None,
    epsilon: float = 0.0,
    delta_scale: float = 0.2,
    random_state=None,
) -> BanditResult:
    """Adapted lil'UCB for a finite reward population (§3.2 of Chen & Ghahramani).

    lil'UCB (Jamieson et al., 2014, Fig. 1) pulls the arm with the largest upper confidence
    bound ``mu_i + (1 + beta)(1 + sqrt(eps)) sqrt(2 s^2 (1 + eps) log(log((1 + eps) T_i)
    / delta') / T_i)`` until one arm has ``T_i >= 1 + lam * sum_{j != i} T_j``. The three
    adaptations of §3.2: each arm's rewards are drawn without replacement (arms independent);
    an arm with ``T_i = N`` has an exact mean and its UCB is that mean; the algorithm also
    stops when the arm with the largest UCB is exact. Hence at most ``N * n_arms`` pulls
    (Prop. 2).

    Rewards are computed ahead in blocks (a quarter of the arm's pulls so far) and consumed
    one pull at a time, so the pulls are exactly lil'UCB's while the reward callable is called
    O(log N) times per arm; the unpulled tail of the blocks at termination is counted in
    ``n_evaluations`` (at most about a quarter of it) but not in ``n_pulls``.

    Parameters
    ----------
    rewards : callable ``rewards(arms, idx) -> (len(arms), len(idx))`` or CompiledRewards
        Called with one arm at a time (compiled rewards are computed block by block). The
        rewards must be finite: a ``-inf`` reward (an arm of mean ``-inf``) raises
        ``ValueError``, since the confidence bounds assume a bounded range; :func:`race`
        eliminates such arms instead.
    n_arms : int
    n_population : int
    delta : float in (0, 1), default 0.05
    reward_range : float
        Range ``C`` of the rewards; the sub-Gaussian scale is ``s = C / 2``.
    beta, lam, epsilon, delta_scale : float
        The heuristic settings of Jamieson et al. §5 by default: ``beta = 0.5``,
        ``lam = 1 + 10 / n_arms``, ``epsilon = 0`` and ``delta' = delta * delta_scale`` with
        ``delta_scale = 1/5``.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    BanditResult

    Notes
    -----
    With ``epsilon = 0`` the iterated logarithm ``log((1 + eps) T)`` is 0 at ``T = 1``; it is
    floored at 1 (i.e. ``T`` is replaced by ``max(T, e)`` inside it) so the bound is finite.

    References
    ----------
    Chen & Ghahramani (2016), §3.2, Prop. 2; Jamieson et al. (2014), Fig. 1, §5.

    Examples
    --------
    >>> import numpy as np
    >>> pop = np.random.default_rng(0).uniform(size=(3, 2000)) + np.array([[0.0], [0.3], [0.1]])
    >>> res = lil_ucb(lambda arms, idx: pop[np.ix_(arms, idx)], 3, 2000, reward_range=1.3,
    ...               random_state=0)
    >>> int(res.best)
    1
    """
    n_arms = check_int(n_arms, "n_arms", low=1)
    if isinstance(rewards, CompiledRewards):
        rewards = _compiled_callable(*_compiled_parts(rewards, n_arms))
    counted = _counted_rewards(rewards)
    n_pop = check_int(n_population, "n_population", low=1)
    delta = check_open_unit_interval(delta, "delta")
    scale = check_positive(reward_range, "reward_range") / 2.0
    beta = check_positive(beta, "beta")
    lam = 1.0 + 10.0 / n_arms if lam is None else check_positive(lam, "lam")
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"epsilon must lie in [0, 1), got {epsilon!r}")
    delta_ucb = delta * check_positive(delta_scale, "delta_scale")
    rng = as_generator(random_state)
    if n_arms == 1:
        return BanditResult(0, 0, 0, np.zeros(1, dtype=np.int64))
    width_const = (1 + beta) * (1 + math.sqrt(epsilon)) * math.sqrt(2 * scale**2 * (1 + epsilon))

    samplers = [IndexSampler(n_pop, rng) for _ in range(n_arms)]
    # Rewards are fetched ahead in blocks of a quarter of what the arm has had so far (so at
    # most ~25% of an arm's fetched rewards go unpulled) and consumed one pull at a time by a
    # plain-Python loop over a heap of UCBs: the pulls are exactly lil'UCB's, while the
    # reward callable is called O(log N) times per arm instead of once per pull.
    buffers = [[] for _ in range(n_arms)]

    def fetch(arm, k):
        values = counted(np.array([arm]), samplers[arm].draw(k))
        if counted.saw_neg_inf:
            raise ValueError(
                "lil_ucb needs finite rewards (its confidence bounds assume the range "
                "reward_range), but rewards(arms, idx) returned -inf; race() eliminates arms "
                "with a -inf reward"
            )
        return values[0].tolist()[::-1]  # popped from the end

    log_floor_t = math.e / (1 + epsilon)  # below it the iterated log is floored at 1

    def ucb_scalar(total, n):
        if n >= n_pop:
            return total / n
        inner = math.log((1 + epsilon) * n) if n > log_floor_t else 1.0
        return total / n + width_const * math.sqrt(max(math.log(inner / delta_ucb), 0.0) / n)

    counts = [1] * n_arms
    sums = [fetch(arm, 1)[0] for arm in range(n_arms)]
    heap = [(-ucb_scalar(sums[a], 1), a) for a in range(n_arms)]
    heapq.heapify(heap)  # ties pop the lowest arm index, as argmax would
    total = n_arms
    stopped_by_rule = False  # 1 >= 1 + lam * (n_arms - 1) fails for n_arms >= 2
    while not stopped_by_rule:
        arm = heap[0][1]
        if counts[arm] >= n_pop:  # adaptation 3: the top arm is exact
            break
        buf = buffers[arm]
        if not buf:
            buf.extend(fetch(arm, min(max(1, counts[arm] // 4), n_pop - counts[arm])))
        sums[arm] += buf.pop()
        counts[arm] += 1
        total += 1
        heapq.heapreplace(heap, (-ucb_scalar(sums[arm], counts[arm]), arm))
        # Pulling an arm only raises the other arms' thresholds, so only its own rule can
        # become true.
        stopped_by_rule = counts[arm] >= 1 + lam * (total - counts[arm])
    counts = np.asarray(counts, dtype=np.int64)
    best = int(np.argmax(counts)) if stopped_by_rule else arm
    return BanditResult(best, counted.n_evaluations, int(counts.sum()), counts)
