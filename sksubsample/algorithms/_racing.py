"""Racing and adapted lil'UCB for best-arm identification on finite reward populations.

Discrete sampling by the Gumbel-max trick reduces to finding the arm with the largest mean
reward, where arm ``i``'s rewards are a finite population ``L_i = {l_i1, ..., l_iN}`` (Eq. 3).
Both algorithms here sample rewards *without replacement*, so they never draw more than ``N``
rewards per arm, and they return the exact best arm when they exhaust the population.

References
----------
.. [1] Y. Chen and Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
   ICML 2016. Alg. 1 (racing), §3.2 (adapted lil'UCB), §3.3.1-3.3.2 (bounds G),
   App. C.3 (independent arms, Eq. 26-27).
.. [2] K. Jamieson, M. Malloy, R. Nowak, S. Bubeck. lil' UCB: An Optimal Exploration Algorithm
   for Multi-Armed Bandits. COLT 2014, Fig. 1 and §5 (heuristic settings).
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._utils import as_generator, check_int, check_open_unit_interval, check_positive
from ._bounds import b_ebs, b_normal, b_normal_union, doubling_schedule, g_normal
from ._subsample import IndexSampler, MultiIndexSampler
from ._user_functions import CountedFunction

__all__ = ["BanditResult", "RaceResult", "lil_ucb", "race"]

_BOUNDS = ("normal", "ebs")
_VARIANCES = ("pairwise", "marginal", "independent")


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


def _counted_rewards(rewards) -> CountedFunction:
    return CountedFunction(rewards, "rewards(arms, idx)", lambda arms, idx: (len(arms), len(idx)))


def _neg_inf_arms(values, counted) -> np.ndarray | None:
    """Rows of ``values`` holding a ``-inf`` reward, or None when there are none.

    A ``-inf`` reward makes the arm's finite population mean exactly ``-inf``, so the arm
    cannot be the best and leaves the race at once. ``counted.saw_neg_inf`` is False until
    some answer holds ``-inf``, which spares the all-finite case a second pass.
    """
    if not counted.saw_neg_inf:
        return None
    dead = np.isneginf(values).any(axis=1)
    return dead if dead.any() else None


def _no_positive_probability(what: str, term: str) -> ValueError:
    """The error for a race (or sampler) in which every candidate has a ``-inf`` term."""
    return ValueError(f"every {what} has a -inf {term}: no {what} has positive probability")


def _check_population(n_population, n_arms: int, variance: str) -> np.ndarray:
    if isinstance(n_population, numbers.Integral) and not isinstance(n_population, bool):
        sizes = np.full(n_arms, check_int(n_population, "n_population", low=1), dtype=np.int64)
        return sizes
    sizes = np.asarray(n_population)
    if sizes.shape != (n_arms,) or not np.issubdtype(sizes.dtype, np.integer):
        raise ValueError(
            f"n_population must be an int or one int per arm (shape ({n_arms},)), got {sizes!r}"
        )
    if np.any(sizes < 1):
        raise ValueError(f"n_population must be >= 1 for every arm, got {sizes.tolist()}")
    if variance != "independent" and np.any(sizes != sizes[0]):
        raise ValueError(
            "arms with different population sizes cannot share minibatches: use "
            "variance='independent' (Eq. 26) for per-arm n_population"
        )
    return sizes.astype(np.int64)


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


def race(
    rewards: Callable[[np.ndarray, np.ndarray], np.ndarray],
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

    Parameters
    ----------
    rewards : callable ``rewards(arms, idx) -> ndarray of shape (len(arms), len(idx))``
        Rewards ``l_{arm, n}`` of the given arms at the given population indices. With
        ``variance="independent"`` it is called with one arm at a time, each with its own
        indices. A control variate (§3.4) belongs here: return ``l - h + E[h]``. A reward of
        ``-inf`` means the arm's mean is ``-inf``: the arm is eliminated in the round it is
        seen (``ValueError`` if every surviving arm has one); NaN and ``+inf`` raise.
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
        adds ``max(1, ceil((N_i - m^(1)) / 10))`` in round 2 and doubles afterwards (App. C.3).
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
    counted = _counted_rewards(rewards)
    n_arms = check_int(n_arms, "n_arms", low=1)
    delta = check_open_unit_interval(delta, "delta")
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    if variance not in _VARIANCES:
        raise ValueError(f"variance must be one of {_VARIANCES}, got {variance!r}")
    sizes = _check_population(n_population, n_arms, variance)
    first_batch = check_int(first_batch, "first_batch", low=2)
    if variance != "independent" and first_batch > sizes[0]:
        raise ValueError(f"first_batch must be <= n_population = {sizes[0]}, got {first_batch}")
    if variance == "independent" and first_batch > sizes.max():
        raise ValueError(
            f"first_batch must be <= the largest n_population = {sizes.max()}, got {first_batch}"
        )
    ranges = _check_reward_range(reward_range, n_arms, bound)
    rng = as_generator(random_state)
    if n_arms == 1:
        return RaceResult(0, 0, 0, (np.array([0]),), np.zeros(1, dtype=np.int64))
    if variance == "independent":
        return _race_independent(counted, sizes, delta, bound, first_batch, ranges, rng)
    return _race_shared(counted, n_arms, int(sizes[0]), delta, bound, variance, first_batch,
                        ranges, rng)


def _race_shared(counted, n_arms, n_pop, delta, bound, variance, first_batch, ranges, rng):
    """Alg. 1 with one shared minibatch per round (pairwise or marginal variance)."""
    schedule = doubling_schedule(first_batch, n_pop).tolist()
    n_rounds_max = len(schedule)  # t*
    pairwise = variance == "pairwise"
    # Each comparison gets delta/(D-1) (pairwise) or each arm delta/D (marginal), App. A.3.
    delta_each = delta / (n_arms - 1) if pairwise else delta / n_arms
    if bound == "normal":
        b_const = b_normal(delta_each, first_batch / n_pop)
    else:
        delta_round = delta_each / max(n_rounds_max - 1, 1)  # Eq. 7: union over t < t*

    sampler = IndexSampler(n_pop, rng)
    alive = np.arange(n_arms)
    # Per-survivor state, compacted whenever arms are eliminated. Rewards are stored shifted
    # by each arm's first-block mean (and differences to the leader are summed directly), so
    # that variances do not suffer from cancellation when rewards share a large offset, as
    # log-likelihood terms do; the stored blocks are only re-read when the leader changes.
    blocks = []
    shift = sum_r = sum_r2 = None
    leader = -1
    sum_d = sum_d2 = None
    survivors = []
    n_sampled = np.zeros(n_arms, dtype=np.int64)
    t_total = 0
    for t, target in enumerate(schedule, start=1):
        idx = sampler.draw(target - t_total)
        t_total = target
        block = counted(alive, idx)
        n_sampled[alive] += idx.size
        dead = _neg_inf_arms(block, counted)
        if dead is not None:
            if dead.all():
                raise _no_positive_probability("surviving arm", "reward")
            # Zeros keep the running sums finite; the arms are dropped below with their sums.
            block = np.where(dead[:, None], 0.0, block)
        if shift is None:
            shift = block.mean(axis=1)
            sum_r = np.zeros(n_arms)
            sum_r2 = np.zeros(n_arms)
        block = block - shift[:, None]
        blocks.append(block)
        sum_r += block.sum(axis=1)
        sum_r2 += np.einsum("ij,ij->i", block, block)
        mean_c = sum_r / t_total
        mean = mean_c + shift
        if dead is not None:
            mean[dead] = -np.inf  # an infinite gap, above any threshold: eliminated below
        x_pos = int(np.argmax(mean))
        if t_total >= n_pop:
            # T = N: every mean is exact and G = 0 (Alg. 1), so the leader is the true best.
            survivors.append(alive[[x_pos]])
            return RaceResult(int(alive[x_pos]), counted.n_evaluations, t, tuple(survivors),
                              n_sampled)
        gap = mean[x_pos] - mean
        if bound == "normal":
            # G_Normal of Eq. 9 without its sigma: B sqrt((1 - (T-1)/(N-1)) / T).
            scale = b_const * math.sqrt((1.0 - (t_total - 1.0) / (n_pop - 1.0)) / t_total)
        if pairwise:
            if alive[x_pos] != leader:
                leader = alive[x_pos]
                sum_d = np.zeros(alive.size)
                sum_d2 = np.zeros(alive.size)
                for blk in blocks:
                    diff = blk[x_pos] - blk
                    sum_d += diff.sum(axis=1)
                    sum_d2 += np.einsum("ij,ij->i", diff, diff)
            else:
                diff = block[x_pos] - block
                sum_d += diff.sum(axis=1)
                sum_d2 += np.einsum("ij,ij->i", diff, diff)
            mean_d = sum_d / t_total
            sd = np.sqrt(np.maximum(sum_d2 / t_total - mean_d * mean_d, 0.0))
            if bound == "normal":
                threshold = scale * sd
            else:
                threshold = b_ebs(delta_round, t_total, n_pop, sd, ranges[alive[x_pos]] +
                                  ranges[alive])
        else:
            sd = np.sqrt(np.maximum(sum_r2 / t_total - mean_c * mean_c, 0.0))
            if bound == "normal":
                g = scale * sd
            else:
                g = b_ebs(delta_round, t_total, n_pop, sd, ranges[alive])
            threshold = g[x_pos] + g
        keep = ~(gap > threshold)
        keep[x_pos] = True
        if not keep.all():
            alive = alive[keep]
            blocks = [blk[keep] for blk in blocks]
            shift, sum_r, sum_r2 = shift[keep], sum_r[keep], sum_r2[keep]
            if pairwise:
                sum_d, sum_d2 = sum_d[keep], sum_d2[keep]
        survivors.append(alive.copy())
        if alive.size == 1:
            return RaceResult(int(alive[0]), counted.n_evaluations, t, tuple(survivors),
                              n_sampled)
    raise AssertionError("unreachable: the schedule ends at T = N")  # pragma: no cover


def _arm_schedule_lengths(first: np.ndarray, second: np.ndarray, sizes: np.ndarray):
    """Rounds of each arm's schedule of App. C.3: ``m1``, ``m2``, then doubling up to ``N_i``.

    The doubling from ``second`` reaches ``N`` after ``k = ceil(log2(N / second))`` steps;
    the float logarithm is corrected by one exact integer comparison on each side.
    """
    k = np.ceil(np.log2(sizes / second)).astype(np.int64)
    k += (second << k) < sizes
    k -= (k > 0) & ((second << np.maximum(k - 1, 0)) >= sizes)
    return np.where(first >= sizes, 1, 2 + k)


def _evaluate_arms(rewards, counted, arms, idx, lengths):
    """``rewards([arm], idx_arm)`` for each arm in turn, checked and counted as one block.

    With independent populations the contract of :func:`race` calls ``rewards`` with one arm
    at a time; the shape of each answer is checked here, while the value checks (``NaN``,
    ``+inf``, ``-inf``) and the evaluation count run once on the concatenated answers.
    """
    bounds = np.cumsum(lengths).tolist()
    rows = []
    lo = 0
    for arm, hi in zip(arms.tolist(), bounds, strict=True):
        values = rewards(np.array([arm]), idx[lo:hi])
        if type(values) is not np.ndarray or values.dtype != np.float64:
            values = np.asarray(values, dtype=np.float64)
        if values.shape != (1, hi - lo):
            raise ValueError(
                f"{counted.signature} must return an array of shape {(1, hi - lo)}, got shape "
                f"{values.shape}"
            )
        rows.append(values)
        lo = hi
    return counted(np.concatenate(rows, axis=1))[0]


def _race_independent(counted, sizes, delta, bound, first_batch, ranges, rng):
    """Racing with independently subsampled arms of different sizes (App. C.3, Eq. 26-27).

    Each round draws the new indices of every surviving arm in one vectorised step
    (:class:`MultiIndexSampler`) and updates every arm's sums with segment reductions; only
    the calls of ``rewards``, one per arm whose population is not exhausted, loop over arms.
    """
    rewards = counted.fn
    # One check and one count per round, on the concatenated answers of the round's arms.
    block = CountedFunction(lambda values: values, counted.signature, lambda values: values.shape)
    n_arms = sizes.size
    first = np.minimum(first_batch, sizes)
    second = np.minimum(sizes, first + np.maximum(1, -(-(sizes - first) // 10)))
    n_rounds_max = int(_arm_schedule_lengths(first, second, sizes).max())
    sampler = MultiIndexSampler(sizes, rng)
    counts = sampler.counts
    shift = np.zeros(n_arms)
    sum_r = np.zeros(n_arms)
    sum_r2 = np.zeros(n_arms)
    if bound == "normal":
        # Eq. 27 with delta/(D-1) per comparison; arms' walks differ, so the correlated-walk
        # constant of §3.3.2 does not apply and the union bound over rounds is used.
        b_const = b_normal_union(delta / (n_arms - 1), n_rounds_max)
    else:
        delta_arm = delta / n_arms / max(n_rounds_max - 1, 1)
    alive = np.arange(n_arms)
    dead = np.zeros(n_arms, dtype=bool)
    survivors = []
    target = first
    for t in range(1, n_rounds_max + 1):
        if t == 2:
            target = second
        elif t > 2:
            target = np.minimum(2 * target, sizes)
        want = target[alive] - counts[alive]
        drawing = alive[want > 0]  # an arm whose population is exhausted is not called
        if drawing.size:
            started = counts[drawing] > 0
            idx, lengths = sampler.draw(drawing, want[want > 0])
            values = _evaluate_arms(rewards, block, drawing, idx, lengths)
            heads = np.cumsum(lengths) - lengths
            if block.saw_neg_inf:
                seen = np.logical_or.reduceat(np.isneginf(values), heads)
                if seen.any():
                    # The arm's mean is -inf: it leaves in this round; zeros keep its (unused)
                    # sums finite.
                    dead[drawing[seen]] = True
                    values = np.where(np.repeat(seen, lengths), 0.0, values)
            # An arm's first block sets its shift (its first-block mean), so that variances
            # do not suffer from cancellation when rewards share a large offset.
            fresh = drawing[~started]
            shift[fresh] = np.add.reduceat(values, heads)[~started] / lengths[~started]
            values = values - np.repeat(shift[drawing], lengths)
            sum_r[drawing] += np.add.reduceat(values, heads)
            sum_r2[drawing] += np.add.reduceat(values * values, heads)
        if dead[alive].all():
            raise _no_positive_probability("surviving arm", "reward")
        n = counts[alive]
        mean_c = sum_r[alive] / n
        mean = np.where(dead[alive], -np.inf, mean_c + shift[alive])
        sd = np.sqrt(np.maximum(sum_r2[alive] / n - mean_c**2, 0.0))
        exact = n >= sizes[alive]
        x_pos = int(np.argmax(mean))
        gap = mean[x_pos] - mean
        if bound == "normal":
            var = np.where(exact, 0.0, g_normal(n, sizes[alive], sd, 1.0) ** 2)
            threshold = b_const * np.sqrt(var[x_pos] + var)
        else:
            g = np.where(exact, 0.0, b_ebs(delta_arm, n, sizes[alive], sd, ranges[alive]))
            threshold = g[x_pos] + g
        keep = ~(gap > threshold)
        keep[x_pos] = True
        alive = alive[keep]
        if alive.size > 1 and np.all(counts[alive] >= sizes[alive]):
            # Exact survivors have G = 0, so they are tied at the best mean: the lowest index
            # wins, as argmax would.
            alive = alive[:1]
        survivors.append(alive.copy())
        if alive.size == 1:
            return RaceResult(int(alive[0]), block.n_evaluations, t, tuple(survivors),
                              counts.copy())
    raise AssertionError("unreachable: every arm's schedule ends at N_i")  # pragma: no cover


def lil_ucb(
    rewards: Callable[[np.ndarray, np.ndarray], np.ndarray],
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
    rewards : callable ``rewards(arms, idx) -> (len(arms), len(idx))``
        Called with one arm at a time. The rewards must be finite: a ``-inf`` reward (an arm
        of mean ``-inf``) raises ``ValueError``, since the confidence bounds assume a bounded
        range; :func:`race` eliminates such arms instead.
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
    counted = _counted_rewards(rewards)
    n_arms = check_int(n_arms, "n_arms", low=1)
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
