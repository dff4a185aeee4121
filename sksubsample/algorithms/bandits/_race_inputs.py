"""What a race is given: compiled rewards (:class:`CompiledRewards`) and the checks of a
race's options, shared by :func:`~sksubsample.algorithms.bandits.race`, adapted lil'UCB and
:func:`~sksubsample.algorithms.sample_discrete`."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..._utils import check_int, check_open_unit_interval, check_per_item
from .._numba import Dispatcher
from .._user_functions import CountedFunction
from ._loop import function_rows
from ._schedule import min_max

__all__ = ["CompiledRewards"]

_BOUNDS = ("normal", "ebs")
_VARIANCES = ("pairwise", "marginal", "independent")
_COMPILED_SIGNATURE = "CompiledRewards.function(data, arm, index)"


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
    >>> from sksubsample.algorithms.bandits import race
    >>> result = race(rewards, 4, y.size, random_state=0)
    >>> int(result.best), bool(result.n_evaluations < 4 * y.size)
    (2, True)
    """

    function: Callable
    data: tuple
    scale: np.ndarray | float | None = None
    offset: np.ndarray | float | None = None


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
    return check_per_item(value, name, n_arms, items="arm")


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
    """A NumPy callable ``(arms, idx) -> rewards`` of compiled rewards, block by block."""
    rows = function_rows(function)

    def rewards(arms, idx):
        arms = np.asarray(arms, dtype=np.int64)
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((arms.size, idx.size))
        rows(data, arms, scale, idx, out)
        values = scale[arms, None] * out + offset[arms, None]
        if not np.all(values < np.inf):  # NaN or +inf
            raise _bad_value(_COMPILED_SIGNATURE)
        return values

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
    smallest, largest = min_max(sizes)
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
    ranges = check_per_item(reward_range, "reward_range", n_arms, items="arm")
    if np.any(ranges < 0):
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
