"""Discrete sampling by the Gumbel-max trick and best-arm identification (Eq. 2-3).

To draw ``X ~ p(X = i) ∝ f_0(i) prod_{n=1}^{N} f_n(i)``, perturb each state's log-probability
with an independent Gumbel(0, 1) variable and return the argmax (Eq. 2). Spread over the
``N`` factors, the perturbed log-probability is ``N`` times the mean of the rewards
``l_{i,n} = log f_n(i) + (log f_0(i) + eps_i) / N`` (Eq. 3), so the argmax is the best arm of a
bandit with finite reward populations, which racing finds from a subsample with error at most
``delta``; the sampled distribution is then within ``delta`` of ``p`` in total variation
(Prop. 1).

The perturbation enters the race as a per-state affine map of the raw log-factors
(``reward = scale * log f + offset``, applied by the compiled race), so ``log_factors`` may be
a NumPy callable or a compiled per-datum function (:class:`~sksubsample.algorithms.CompiledRewards`)
with the same draws for the same ``random_state``.

References
----------
Chen & Ghahramani (2016), Eq. 1-3, Prop. 1.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..._utils import as_float_array, as_generator, check_int
from .._user_functions import CountedFunction
from ._auto import auto_choice
from ._lil_ucb import lil_ucb
from ._loop import function_sums
from ._race import _run_race
from ._race_inputs import (
    _COMPILED_SIGNATURE,
    CompiledRewards,
    _bad_value,
    _check_race_options,
    _check_race_scalars_fast,
    _compiled_callable,
    _compiled_parts,
    _no_positive_probability,
)
from ._schedule import min_max, whole_in_first_round

__all__ = ["DiscreteSample", "sample_discrete"]

_METHODS = ("auto", "racing", "exact", "lil-ucb")
_EXACT_CHUNK = 1 << 20  # rewards per call of log_factors on the exact path, to bound memory


class DiscreteSample(NamedTuple):
    """Outcome of :func:`sample_discrete`.

    Parameters
    ----------
    sample : int
        The drawn state.
    n_evaluations : int
        Factor evaluations ``log f_n(i)`` made (entries returned by ``log_factors``).
    n_total : int
        Evaluations the exact sampler needs, ``sum_i N_i``; ``n_evaluations / n_total`` is
        the proportion of the data touched.
    raced : bool, default False
        Whether a race decided the draw (with ``method="auto"``: the race ran to its end;
        otherwise the exact sums decided, from the start or among the states a race had
        kept).
    n_guarded : int, default 0
        Eliminations the race's Normal bound allowed but the guard of its normal
        approximation refused (:attr:`RaceResult.n_guarded`).
    """

    sample: int
    n_evaluations: int
    n_total: int
    raced: bool = False
    n_guarded: int = 0


def _check_sizes(n_factors, log_prior, n_states):
    if log_prior is not None:
        log_prior = as_float_array(log_prior, "log_prior", finite=False)
        if log_prior.ndim != 1 or log_prior.size < 1:
            raise ValueError("log_prior must be a 1-D array with one entry per state")
        if not np.all(np.isfinite(log_prior)):
            raise ValueError("log_prior must be finite; drop zero-probability states instead")
    if isinstance(n_factors, numbers.Integral) and not isinstance(n_factors, bool):
        n_factors = check_int(n_factors, "n_factors", low=1)
        if n_states is None:
            if log_prior is None:
                raise ValueError("pass n_states (or log_prior) when n_factors is a single int")
            n_states = log_prior.size
        sizes = np.full(check_int(n_states, "n_states", low=1), n_factors, dtype=np.int64)
        common = True
    else:
        sizes = np.asarray(n_factors)
        if sizes.ndim != 1 or not np.issubdtype(sizes.dtype, np.integer) or np.any(sizes < 0):
            raise ValueError("n_factors must be an int >= 1 or a 1-D array of ints >= 0")
        sizes = sizes.astype(np.int64)
        common = False
        if n_states is not None and n_states != sizes.size:
            raise ValueError(f"n_states = {n_states} disagrees with len(n_factors) = {sizes.size}")
    if log_prior is None:
        log_prior = np.zeros(sizes.size)
    elif log_prior.size != sizes.size:
        raise ValueError(f"log_prior has {log_prior.size} entries for {sizes.size} states")
    return sizes, common, log_prior


def sample_discrete(
    log_factors: Callable[[np.ndarray, np.ndarray], np.ndarray] | CompiledRewards,
    n_factors,
    log_prior=None,
    *,
    n_states: int | None = None,
    method: str = "auto",
    delta: float = 0.05,
    bound: str = "normal",
    variance: str = "pairwise",
    first_batch: int = 50,
    reward_range=None,
    guard: bool = True,
    random_state=None,
) -> DiscreteSample:
    """Draw one state of ``p(i) ∝ exp(log_prior[i] + sum_n log f_n(i))`` touching few factors.

    Parameters
    ----------
    log_factors : callable ``log_factors(states, idx) -> ndarray (len(states), len(idx))``
        ``log f_n(state)`` for the given states and factor indices, or
        :class:`~sksubsample.algorithms.CompiledRewards` whose function computes one
        ``log f_n(state)`` as ``function(data, state, n)`` (the race, or the exact sums, then
        run compiled; same draws for the same ``random_state``). With per-state factor
        counts (``n_factors`` an array), ``idx`` indexes that state's own factors. ``-inf``
        (``f_n(state) = 0``) gives the state probability 0: it is never drawn (``ValueError``
        if every state has probability 0, and with ``method="lil-ucb"``, which needs finite
        factors); NaN and ``+inf`` raise.
    n_factors : int or array of int of shape (n_states,)
        ``N``, the number of factors; one count per state when states have different factor
        sets (e.g. clusters of different sizes; a state may have 0 factors).
    log_prior : array of shape (n_states,), optional
        ``log f_0(i)``; zeros by default.
    n_states : int, optional
        Number of states ``D``; needed only when neither ``log_prior`` nor a per-state
        ``n_factors`` gives it.
    method : {"auto", "racing", "exact", "lil-ucb"}, default "auto"
        ``"exact"`` evaluates every factor; ``"racing"`` runs :func:`race` (Alg. 1) to its
        end; ``"auto"`` races on shared minibatches while racing pays, and finishes with the
        exact sums of the surviving states when the rewards it would still read, projected
        from what it has read, cost more than those sums (the draw is then that of a race that
        read everything after its last round: never less accurate). With compiled
        ``log_factors`` whose exact sums cost little more than building a race, ``"auto"``
        samples exactly from the start. The costs these choices weigh are measured once per
        kind of factor function on this machine and stored, so that the same inputs make the
        same choice (and a seed the same draw); with ``SKSUBSAMPLE_MEASURE_COSTS=0`` they are
        fixed, the same on every machine. ``"lil-ucb"`` runs adapted lil'UCB (needs
        ``reward_range``).
    delta : float in (0, 1), default 0.05
        Total-variation error bound of the sampled distribution (Prop. 1).
    bound, variance, first_batch :
        Passed to :func:`race`. Per-state ``n_factors`` need ``variance="independent"``
        (chosen automatically when factor counts differ).
    reward_range : float or array of shape (n_states,), optional
        Range of ``log f_n(i)`` over ``n`` for each state; required by ``bound="ebs"`` and
        ``method="lil-ucb"``.
    guard : bool, default True
        Passed to :func:`race`: the guard of the Normal bound's normal approximation.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    DiscreteSample
        ``sample``, ``n_evaluations`` (factor evaluations made), ``n_total``, ``raced``
        and ``n_guarded``.

    References
    ----------
    Chen & Ghahramani (2016), Eq. 2-3 (Gumbel-max reduction), Prop. 1, Alg. 1, §3.2.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=20_000)
    >>> mus = np.array([-1.0, 0.0, 1.0, 2.0])
    >>> def log_factors(states, idx):
    ...     return -0.5 * (y[idx][None, :] - mus[states][:, None]) ** 2
    >>> draw = sample_discrete(log_factors, y.size, n_states=4, random_state=1)
    >>> int(draw.sample), bool(draw.n_evaluations < draw.n_total)
    (2, True)
    """
    compiled = isinstance(log_factors, CompiledRewards)
    if not compiled:
        counted = CountedFunction(log_factors, "log_factors(states, idx)",
                                  lambda states, idx: (len(states), len(idx)))
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    sizes, common, log_prior = _check_sizes(n_factors, log_prior, n_states)
    if not common and variance != "independent" and method in ("auto", "racing"):
        if np.all(sizes == sizes[0]) and sizes[0] > 0:
            common = True
        else:
            variance = "independent"
    n_states_ = sizes.size
    if compiled:
        function, data, user_scale, user_offset = _compiled_parts(log_factors, n_states_)
    rng = as_generator(random_state)
    # Gumbel perturbations are drawn before any data is touched (Eq. 2).
    offsets = log_prior - np.log(rng.standard_exponential(n_states_))
    n_total = int(sizes.sum())

    def exact_sample(states=None, spent=0, n_guarded=0):
        """The exact argmax of the perturbed log-probabilities of ``states`` (all when None),
        ``spent`` evaluations already made (by a race that kept ``states``)."""
        states = np.arange(n_states_) if states is None else states
        if compiled:
            sums = np.empty(states.size)
            bad, n_evaluations = function_sums(function)(
                data, sizes[states], user_scale[states], user_offset[states], sums)
            if bad:
                raise _bad_value(_COMPILED_SIGNATURE)
        else:
            sums = np.zeros(states.size)
            before = counted.n_evaluations
            _exact_scores(counted, sizes[states], common, sums, states)
            n_evaluations = counted.n_evaluations - before
        scores = offsets[states] + sums
        if scores.max() == -np.inf:
            raise _no_positive_probability("state", "log-factor")
        return DiscreteSample(int(states[np.argmax(scores)]), spent + n_evaluations, n_total,
                              False, n_guarded)

    if method == "exact" or n_states_ == 1:
        return exact_sample()

    if method == "lil-ucb":
        if not common:
            raise ValueError("method='lil-ucb' needs one common n_factors for all states")
        if reward_range is None:
            raise ValueError("method='lil-ucb' needs reward_range (the range of log f_n)")
        if compiled:
            counted = CountedFunction(
                _compiled_callable(function, data, user_scale, user_offset),
                "log_factors(states, idx)", lambda states, idx: (len(states), len(idx)))
        shift = offsets / int(sizes[0])

        def rewards(arms, idx):
            return counted(arms, idx) + shift[arms, None]

        ranges = as_float_array(reward_range, "reward_range")
        result = lil_ucb(rewards, n_states_, int(sizes[0]), delta=delta,
                         reward_range=float(np.max(ranges)), random_state=rng)
        return DiscreteSample(int(result.best), counted.n_evaluations, n_total, True)

    largest = int(sizes[0]) if common else int(min_max(sizes)[1])
    _, first_batch = _check_race_scalars_fast(delta, bound, variance, first_batch, largest,
                                              reward_range)
    if whole_in_first_round(sizes, first_batch):
        # Every population is too small to save anything: the race would evaluate them all in
        # its first round (the remainder rule) and return the exact argmax, which is what the
        # exact sampler computes without building a race.
        return exact_sample()
    if common:
        population = int(sizes[0])
        ranges = reward_range
    else:
        population = np.maximum(sizes, 1)
        ranges = (None if reward_range is None
                  else np.broadcast_to(np.asarray(reward_range, float), sizes.shape) * sizes)
    n_states_, delta, population, first_batch, ranges = _check_race_options(
        n_states_, delta, bound, variance, first_batch, population, ranges)

    def _affine():
        """The race's per-state map ``reward = scale * value + shift``."""
        if common:
            # The rewards l_in = log f_n(i) + offset_i / N of Eq. 3.
            scale, shift = np.ones(n_states_), offsets / population[0]
        else:
            # Different factor counts: compare sums, not means, so each arm's rewards are
            # scaled by its N_i (the mean of N_i log f + offset is the perturbed
            # log-probability). A state with no factors has the single exact "reward" offset
            # (scale 0), which costs no evaluation.
            scale, shift = sizes.astype(np.float64), offsets
        if compiled:
            # reward = scale * (user_scale * f + user_offset) + shift, as one affine map.
            return scale * user_scale, scale * user_offset + shift
        return scale, shift

    evaluate = (function, data) if compiled else counted
    bail = 0.0
    if method == "auto" and variance != "independent":
        # Decided before the race's maps are built: where the exact sums are chosen, the draw
        # costs no more than method="exact"'s.
        choice = auto_choice(evaluate, int(population[0]), n_states_, first_batch,
                             lambda first, ratio, probe: _run_race(
                                 evaluate, population, *_affine(), delta, bound, variance,
                                 first, ranges, probe, bail_ratio=ratio,
                                 guard=bool(guard)).n_evaluations)
        if not choice.race:
            return exact_sample()
        bail = choice.bail_ratio
    scale, shift = _affine()
    outcome = _run_race(evaluate, population, scale, shift, delta, bound, variance,
                        first_batch, ranges, rng, bail_ratio=bail, guard=bool(guard))
    if outcome.bailed is not None:
        return exact_sample(outcome.bailed, outcome.n_evaluations, outcome.n_guarded)
    return DiscreteSample(outcome.best, outcome.n_evaluations, n_total, True, outcome.n_guarded)


def _exact_scores(counted, sizes, common, scores, states):
    """Add the sum of log-factors of every state of ``states`` (with ``sizes`` factors each)
    to ``scores``, calling ``counted`` in chunks."""
    if common:
        # All states per call (one pass over the data), in chunks that bound the memory.
        step = max(1, _EXACT_CHUNK // states.size)
        for start in range(0, int(sizes[0]), step):
            idx = np.arange(start, min(start + step, sizes[0]))
            scores += counted(states, idx).sum(axis=1)
    else:
        for k, state in enumerate(states.tolist()):
            for start in range(0, int(sizes[k]), _EXACT_CHUNK):
                idx = np.arange(start, min(start + _EXACT_CHUNK, sizes[k]))
                scores[k] += counted(np.array([state]), idx).sum()
