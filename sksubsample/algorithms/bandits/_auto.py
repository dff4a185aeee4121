"""The choices of ``method="auto"`` of :func:`~._race.race` and
:func:`~._discrete.sample_discrete`: whether to race at all, and when a race has stopped paying.

Both follow the costs of :mod:`sksubsample.algorithms._race_costs`. For compiled rewards these
are measured with the kernels that will run, on the caller's own data: the exact sums of a block
of its terms, and the very race to be run (its arms, scales and options) stopped at its first
look, then again with a longer first look. A NumPy callable is never timed (its calls are the
user's, and may have effects or cost seconds): its choices follow the rough costs.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import NamedTuple

import numpy as np

from .._calibration import measuring
from .._race_costs import race_costs, rough_costs
from .._user_functions import CountedFunction
from ._loop import function_sums

__all__ = ["AutoChoice", "auto_choice"]

#: Terms of the exact sums timed (at most): enough to time, few enough for a heavy factor.
_EXACT_TERMS = 1 << 16
#: The longer first look reads this many times the terms of the race's own.
_LONGER = 32
#: The generator of the timed races (one for all: making one costs as much as a short race).
_PROBE_RNG = np.random.default_rng(0)
#: The choices of this process, by what they depend on (at most this many kept).
_KEPT = 256
_CHOICES = {}


class AutoChoice(NamedTuple):
    """What ``method="auto"`` does.

    Attributes
    ----------
    race : bool
        Whether to race at all (else the exact sums from the start).
    bail_ratio : float
        A raced term's cost over an exact one's, for the race's bail rule.
    """

    race: bool
    bail_ratio: float


def _data_kind(data):
    """The kinds and size class of the arrays of ``data``: their types, dtypes and dimensions,
    and the bytes they span to a factor of 2 (not their values)."""
    parts, size = [], 0
    for item in data:
        if isinstance(item, np.ndarray):
            parts.append(f"{item.dtype.name}{item.ndim}")
            size += item.nbytes
        else:
            parts.append(type(item).__name__)
    return f"{','.join(parts)}|bytes{round(math.log2(max(size, 1)))}"


@functools.lru_cache(maxsize=64)
def _function_key(function):
    """The compiled function's name and a digest of its code (so that a function of the same
    name with another body is another kernel)."""
    code = getattr(function, "py_func", function).__code__
    digest = hashlib.sha1(code.co_code + repr(code.co_consts).encode()).hexdigest()[:12]
    return f"{getattr(function, '__module__', '?')}.{code.co_qualname}#{digest}"


def auto_choice(evaluate, population, n_arms, first_batch, run_race):
    """The :class:`AutoChoice` of a race on shared minibatches.

    Parameters
    ----------
    evaluate : CountedFunction or tuple
        The rewards: a NumPy callable (counted) or the pair ``(function, data)`` of compiled
        ones.
    population : int
        ``N``, every arm's population.
    n_arms : int
        ``D``.
    first_batch : int
        The race's first minibatch.
    run_race : callable
        ``run_race(first_batch, bail_ratio, rng) -> n_evaluations``: the race to be chosen,
        with another first minibatch, bail ratio (``inf`` stops it at its first look) and
        generator.

    Returns
    -------
    AutoChoice
    """
    if isinstance(evaluate, CountedFunction):
        costs = rough_costs("callable")
        return AutoChoice(costs.race_first(population * n_arms), costs.bail_ratio)
    # The choice is asked at every draw: kept per process by what it depends on, read in a
    # microsecond (the store's key costs more to build).
    memo = (evaluate[0], population, n_arms, first_batch, measuring(),
            tuple((item.dtype.num, item.ndim, item.nbytes) if isinstance(item, np.ndarray)
                  else type(item) for item in evaluate[1]))
    choice = _CHOICES.get(memo)
    if choice is None:
        if len(_CHOICES) >= _KEPT:
            _CHOICES.clear()
        choice = _CHOICES[memo] = _compiled_choice(evaluate, population, n_arms, first_batch,
                                                   run_race)
    return choice


def _compiled_choice(evaluate, population, n_arms, first_batch, run_race):
    """:func:`auto_choice` of compiled rewards, from the costs of their kind."""
    function, data = evaluate
    block = max(1, min(population, _EXACT_TERMS // n_arms))

    def run_exact():
        sums = np.empty(n_arms)
        function_sums(function)(data, np.full(n_arms, block, dtype=np.int64),
                                np.ones(n_arms), np.zeros(n_arms), sums)
        return block * n_arms

    longer = max(first_batch, min(_LONGER * first_batch, population // 4))
    key = (f"{_function_key(function)}|{_data_kind(data)}|arms{n_arms}"
           f"|n{round(math.log2(population))}|first{first_batch}")
    try:
        costs = race_costs("compiled", key, run_exact,
                           lambda long: run_race(longer if long else first_batch, math.inf,
                                                _PROBE_RNG))
    except ValueError:
        # Terms the race refuses (NaN, all -inf): the race itself will say so, and a
        # measurement that cannot run is not stored.
        costs = rough_costs("compiled")
    return AutoChoice(costs.race_first(population * n_arms), costs.bail_ratio)
