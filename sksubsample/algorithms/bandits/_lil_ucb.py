"""Adapted lil'UCB for best-arm identification on a finite reward population (§3.2 of Chen &
Ghahramani 2016).

References
----------
.. [1] Y. Chen and Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
   ICML 2016, §3.2, Prop. 2.
.. [2] K. Jamieson, M. Malloy, R. Nowak, S. Bubeck. lil' UCB: An Optimal Exploration Algorithm
   for Multi-Armed Bandits. COLT 2014, Fig. 1 and §5 (heuristic settings).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..._utils import (
    as_generator,
    check_int,
    check_open_unit_interval,
    check_positive,
    check_probability,
)
from ..sampling import IndexSampler
from ._race_inputs import CompiledRewards, _compiled_callable, _compiled_parts, _counted_rewards

__all__ = ["BanditResult", "lil_ucb"]


class BanditResult(NamedTuple):
    """Outcome of :func:`lil_ucb`.

    Parameters
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
    if check_probability(epsilon, "epsilon") == 1.0:
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
