"""What A* sampling and PM-A* share: the objective's counted calls, the regions' bookkeeping,
the optional trace of a search, and the results they return."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import NamedTuple

import numpy as np

from ..._utils import as_float_array, check_int
from .._user_functions import CountedFunction

__all__ = ["AStarResult", "SearchTrace"]


class SearchTrace(NamedTuple):
    """Per-round record of each search (``record_trace=True``), padded with NaN.

    Parameters
    ----------
    best_gumbel : ndarray of shape (n_draws, n_rounds)
        Largest perturbed value ``G_Q(S) + o(x(S))`` found after each round.
    n_evaluations : ndarray of shape (n_draws, n_rounds)
        Rows of ``log_density`` evaluated by that search up to each round (cumulative).
    selected_lower, selected_upper : ndarray of shape (n_draws, n_rounds, d)
        The box selected (popped or drawn) in each round.
    """

    best_gumbel: np.ndarray
    n_evaluations: np.ndarray
    selected_lower: np.ndarray
    selected_upper: np.ndarray


class AStarResult(NamedTuple):
    """Result of :func:`astar_sample` and :func:`pm_astar_sample`.

    Parameters
    ----------
    samples : ndarray of shape (n_draws, d)
        One draw per independent search.
    max_gumbel : ndarray of shape (n_draws,)
        The perturbed value of each draw (the largest found by its search).
    n_evaluations : int
        Rows passed to ``log_density`` in total (the cost the papers report).
    n_iter : ndarray of shape (n_draws,)
        Rounds (region selections) made by each search.
    converged : ndarray of shape (n_draws,)
        True where the search stopped because the bound proved the draw exact; always False
        without a bound.
    trace : SearchTrace or None
        Per-round record when ``record_trace=True``.
    """

    samples: np.ndarray
    max_gumbel: np.ndarray
    n_evaluations: int
    n_iter: np.ndarray
    converged: np.ndarray
    trace: SearchTrace | None


# ---------------------------------------------------------------------------- the objective
class _Objective:
    """``o(x) = log p(x) - log q(x)``, with ``log p`` checked and its rows counted."""

    def __init__(self, log_density, prop):
        self.log_density = CountedFunction(log_density, "log_density(x)", lambda x: x.shape[:1])
        self.prop = prop

    @property
    def n_evaluations(self):
        return self.log_density.n_evaluations

    def __call__(self, x):
        if x.shape[0] == 0:
            return np.empty(0)
        log_p = self.log_density(x)
        log_q = self.prop.logpdf(x)
        return np.where(np.isneginf(log_q), -np.inf, log_p - log_q)


# ---------------------------------------------------------------------------- region storage
class _Regions:
    """Growable struct-of-arrays of boxes with their Gumbel value and sampled point."""

    def __init__(self, d, capacity=256):
        self.d = d
        self.n = 0
        self.lower = np.empty((capacity, d))
        self.upper = np.empty((capacity, d))
        self.x = np.empty((capacity, d))
        self.gumbel = np.empty(capacity)
        self.depth = np.empty(capacity, dtype=np.int64)

    def add(self, lower, upper, x, g, depth):
        k = lower.shape[0]
        while self.n + k > self.gumbel.size:
            for name in ("lower", "upper", "x", "gumbel", "depth"):
                old = getattr(self, name)
                new = np.empty((2 * old.shape[0], *old.shape[1:]), dtype=old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        ids = np.arange(self.n, self.n + k)
        self.lower[ids], self.upper[ids], self.x[ids] = lower, upper, x
        self.gumbel[ids], self.depth[ids] = g, depth
        self.n += k
        return ids

    def children(self, ids):
        """Split boxes ``ids`` at their point along ``depth mod d``: (lower, upper, depth)."""
        dim = self.depth[ids] % self.d
        rows = np.arange(ids.size)
        cut = self.x[ids, dim]
        lower = np.repeat(self.lower[ids], 2, axis=0)
        upper = np.repeat(self.upper[ids], 2, axis=0)
        upper[2 * rows, dim] = cut  # left child
        lower[2 * rows + 1, dim] = cut  # right child
        return lower, upper, np.repeat(self.depth[ids] + 1, 2)


class _Trace:
    def __init__(self, n_draws, enabled):
        self.enabled = enabled
        self.rows = [[] for _ in range(n_draws)] if enabled else None

    def record(self, searches, best, evals, lower, upper):
        if self.enabled:
            for j, s in enumerate(searches.tolist()):
                self.rows[s].append((best[j], evals[j], lower[j], upper[j]))

    def finish(self, d):
        if not self.enabled:
            return None
        n = max((len(r) for r in self.rows), default=0)
        best = np.full((len(self.rows), n), np.nan)
        evals = np.full((len(self.rows), n), np.nan)
        lo = np.full((len(self.rows), n, d), np.nan)
        hi = np.full((len(self.rows), n, d), np.nan)
        for s, rows in enumerate(self.rows):
            for t, (b, e, low, up) in enumerate(rows):
                best[s, t], evals[s, t], lo[s, t], hi[s, t] = b, e, low, up
        return SearchTrace(best, evals, lo, hi)


def _check_common(n_draws, n_samples, record_trace, stacklevel=4):
    """Validate ``n_draws`` (accepting the former name ``n_samples`` with a FutureWarning)."""
    if n_samples is not None:
        if n_draws is not None:
            raise TypeError("pass n_draws only (n_samples is its former name)")
        warnings.warn(
            "n_samples was renamed n_draws and will be removed in a future version: pass "
            "n_draws instead",
            FutureWarning,
            stacklevel=stacklevel,
        )
        n_draws, name = n_samples, "n_samples"
    else:
        n_draws, name = (1 if n_draws is None else n_draws), "n_draws"
    n_draws = check_int(n_draws, name, low=1)
    if not isinstance(record_trace, (bool, np.bool_)):
        raise TypeError(f"record_trace must be a bool, got {type(record_trace).__name__}")
    return n_draws


def _call_bound(bound, lower, upper):
    value = bound(lower.copy(), upper.copy())
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating)):
        value = as_float_array(value, "the value bound returned", finite=False)
        if value.shape != ():
            raise ValueError(f"bound must return a float, got shape {value.shape}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(
            f"bound returned NaN on the box lower={lower.tolist()}, upper={upper.tolist()}"
        )
    return value


# ---------------------------------------------------------------------------- A* sampling
