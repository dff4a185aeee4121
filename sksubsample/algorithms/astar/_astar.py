"""A* sampling, A* sampling without a bound, and A* sampling with probability matching.

All three run the top-down construction of a Gumbel process for a tractable proposal ``Q``
(Maddison, Tarlow & Minka, 2014) and perturb it by ``o(x) = log p(x) - log q(x)``, which makes
it a Gumbel process for the target ``P``: the location of the largest perturbed value is an
exact draw from ``P``. They differ only in which region they refine next:

* A* sampling: the region with the largest upper bound ``G_Q(S) + B(S)``, where
  ``B(S) >= sup_S o``; it stops when no region can beat the best value found, so it is exact;
* A* sampling without a bound (App. D, Alg. 3): the region with the largest ``G_Q(S)``, under
  an iteration budget (exact only in the limit);
* PM-A* (Alg. 1): a region drawn by probability matching, i.e. with the probability that a
  Monte-Carlo estimate of its Gumbel value (Eq. 3) is the largest (Eq. 4), drawn in O(log m)
  with :class:`~sksubsample.algorithms.TruncatedGumbelTree` (§4.3).

Regions are axis-aligned boxes. ``Q`` is a frozen 1-D ``scipy.stats`` continuous distribution
or a sequence of them (their independent product): box masses come from CDFs, restricted
draws from inverse CDFs, and a box is split at its sampled point along the dimension
``depth mod d``.

Many independent searches (one per requested draw) run in lockstep, so that every round
makes one vectorised call of ``log_density`` and of the proposal's CDFs for all of them.
"""

from __future__ import annotations

import heapq
import math
import numbers
import warnings
from typing import NamedTuple

import numpy as np

from ..._utils import as_float_array, as_generator, check_int
from .._user_functions import CountedFunction
from ..sampling import gumbel, truncated_gumbel
from ._boxes import BoxProposal as _BoxProposal
from ._gumbel_tree import TruncatedGumbelTree

__all__ = ["AStarResult", "SearchTrace", "astar_sample", "pm_astar_sample"]

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
def astar_sample(
    log_density,
    proposal,
    *,
    bound=None,
    n_draws=None,
    max_iter=10_000,
    record_trace=False,
    random_state=None,
    n_samples=None,
):
    """A* sampling (exact, with a bound) or A* sampling without a bound (budgeted).

    Parameters
    ----------
    log_density : callable
        ``log_density(x) -> ndarray (m,)`` for ``x`` of shape ``(m, d)``: the unnormalised
        log target ``log p``. ``-inf`` means zero density; NaN or ``+inf`` raise.
    proposal : frozen scipy.stats continuous distribution or sequence of them
        The proposal ``Q`` (an independent product when a sequence), whose support box is the
        state space. ``o(x) = log p(x) - Q.logpdf(x)`` is what the search perturbs.
    bound : callable or None, default=None
        ``bound(lower, upper) -> float`` with ``lower, upper`` of shape ``(d,)``: an upper
        bound of ``o`` on the box. With a valid bound the draws are exact (Maddison et al.,
        2014, Alg. 2). With ``None`` the search is "A* sampling without a bound" (App. D,
        Alg. 3): it refines the region with the largest ``G_Q`` and stops after ``max_iter``
        rounds, so the draws are exact only in the limit.
    n_draws : int, default=1
        Number of independent draws (independent searches, run in lockstep).
    max_iter : int, default=10000
        Rounds per search. With a bound, a search that hits it stops with a warning and
        ``converged=False``; without one, every search makes exactly ``max_iter`` rounds.
    record_trace : bool, default=False
        Record a :class:`SearchTrace` (best value, evaluations and selected box per round).
    random_state : None, int or np.random.Generator
    n_samples : int, optional
        Former name of ``n_draws``; passing it warns (FutureWarning).

    Returns
    -------
    AStarResult
        ``samples`` of shape ``(n_draws, d)``, ``max_gumbel`` (n_draws,),
        ``n_evaluations`` (rows passed to ``log_density``; one per round and search, since a
        region's point is evaluated when the region is selected), ``n_iter``, ``converged``,
        ``trace``.

    References
    ----------
    Maddison, Tarlow & Minka, "A* sampling", NIPS 2014, Alg. 2. "A* sampling with probability
    matching", §2.2 (A* sampling) and App. D, Alg. 3 (A* sampling without a bound).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> log_p = lambda x: stats.norm(1.0, 0.5).logpdf(x[:, 0])
    >>> q = stats.norm(0.0, 2.0)
    >>> def bound(lower, upper):  # log N(x; 1, .5) - log N(x; 0, 2) is concave: clip its peak
    ...     peak = np.clip(4.0 / 3.0, lower[0], upper[0])
    ...     return float(log_p(np.array([[peak]]))[0] - q.logpdf(peak))
    >>> res = astar_sample(log_p, q, bound=bound, n_draws=5, random_state=0)
    >>> res.samples.shape, bool(res.converged.all())
    ((5, 1), True)
    """
    prop = _BoxProposal(proposal)
    objective = _Objective(log_density, prop)
    if bound is not None and not callable(bound):
        raise TypeError(f"bound must be None or a callable, got {type(bound).__name__}")
    n_draws = _check_common(n_draws, n_samples, record_trace)
    max_iter = check_int(max_iter, "max_iter", low=1)
    rng = as_generator(random_state)

    d = prop.d
    regions = _Regions(d)
    lower = np.tile(prop.lower, (n_draws, 1))
    upper = np.tile(prop.upper, (n_draws, 1))
    log_mass, x = prop.mass_and_sample(lower, upper, rng)
    ids = regions.add(lower, upper, x, gumbel(log_mass, random_state=rng), 0)

    def priority(region):
        if bound is None:
            return regions.gumbel[region]
        return regions.gumbel[region] + _call_bound(
            bound, regions.lower[region], regions.upper[region]
        )

    heaps = [[(-priority(r), int(r))] for r in ids.tolist()]
    best = np.full(n_draws, -np.inf)
    best_x = regions.x[ids].copy()
    n_iter = np.zeros(n_draws, dtype=np.int64)
    n_eval = np.zeros(n_draws, dtype=np.int64)
    converged = np.zeros(n_draws, dtype=bool)
    trace = _Trace(n_draws, record_trace)

    active = np.arange(n_draws)
    while active.size:
        keep, popped = [], []
        for s in active.tolist():
            heap = heaps[s]
            if bound is not None and (not heap or best[s] >= -heap[0][0]):
                converged[s] = True  # no region can beat the incumbent: the draw is exact
                continue
            if n_iter[s] >= max_iter or not heap:
                continue
            keep.append(s)
            popped.append(heapq.heappop(heap)[1])
        if not keep:
            break
        searches, sel = np.array(keep), np.array(popped)
        value = regions.gumbel[sel] + objective(regions.x[sel])
        better = value > best[searches]
        best[searches[better]] = value[better]
        best_x[searches[better]] = regions.x[sel[better]]
        n_iter[searches] += 1
        n_eval[searches] += 1
        trace.record(
            searches, best[searches], n_eval[searches], regions.lower[sel], regions.upper[sel]
        )
        # Children are truncated at the parent's Gumbel value (top-down construction).
        lower, upper, depth = regions.children(sel)
        log_mass, x = prop.mass_and_sample(lower, upper, rng)
        g = truncated_gumbel(log_mass, np.repeat(regions.gumbel[sel], 2), rng)
        owner = np.repeat(searches, 2)
        nonempty = np.isfinite(log_mass)
        kids = regions.add(
            lower[nonempty], upper[nonempty], x[nonempty], g[nonempty], depth[nonempty]
        )
        for r, s in zip(kids.tolist(), owner[nonempty].tolist(), strict=True):
            p = priority(r)
            if bound is None or best[s] < p:  # otherwise it cannot hold the argmax: prune
                heapq.heappush(heaps[s], (-p, r))
        active = searches

    if bound is not None and not converged.all():
        warnings.warn(
            f"{int((~converged).sum())} of {n_draws} A* searches hit max_iter={max_iter} "
            "before the bound proved them exact; their draws are approximate",
            RuntimeWarning,
            stacklevel=2,
        )
    return AStarResult(best_x, best, objective.n_evaluations, n_iter, converged, trace.finish(d))


# ---------------------------------------------------------------------------- PM-A*
def pm_astar_sample(
    log_density,
    proposal,
    *,
    n_iter,
    n_draws=None,
    n_particles=8,
    importance=None,
    bound=None,
    record_trace=False,
    random_state=None,
    n_samples=None,
):
    """A* sampling with probability matching and Monte-Carlo estimators (PM-A*, Alg. 1).

    Each open region ``S`` (box, Gumbel value ``G_Q(S)``, point ``x(S)``) carries
    ``n_particles`` draws ``x_i ~ Q(.|S)`` with ``Y_i = o(x_i)``; their empirical law is the
    importance-sampling estimator of ``Y = o(x), x ~ Q(.|S)`` with the restricted proposal as
    importance distribution (weights ``w_i = 1/n_particles``). Eq. 3 then estimates the
    Gumbel value of the unexplored part of ``S`` by
    ``max_i TG(log(w_i Q(S)) + Y_i, G_Q(S) + Y_i)``, and each round splits the region drawn
    with the probability that its estimate is the largest (Eq. 4), which
    :class:`TruncatedGumbelTree` draws in O(log m) over all particles (§4.3). The draw is
    the point with the largest ``G_Q(S) + o(x(S))`` found.

    Without ``bound`` a search makes ``n_iter`` rounds (the paper's setting: exact only in
    the limit). With ``bound`` (``B(S) ≥ sup_S o``) probability matching still chooses which
    region to refine, but a search stops as soon as A*'s certificate holds: no open region
    has ``G_Q(S) + B(S)`` above the best value found (Maddison et al., 2014), and regions that
    fail it are dropped. The stopping rule does not depend on the order in which regions were
    refined, so the draw is exact, as A*'s is; ``n_iter`` is then a cap.

    Particles are reused: those of a parent that fall in a child are draws from the same law
    restricted to the child, so a child is topped up with fresh draws only. A region's own
    point ``x(S)`` is one of its particles. Particles with ``Y = -inf`` are not inserted.

    With ``importance=R`` the particles are drawn from ``R`` restricted to the box instead,
    with self-normalised weights ``w_i ∝ q(x_i) / r(x_i)`` (the paper, §5.3, uses importance
    sampling over an optimiser's trajectory; any fixed ``R`` that covers the target, such as
    a Laplace approximation, plays that role here). It changes only the order in which
    regions are refined, not the Gumbel process being searched.

    Parameters
    ----------
    log_density : callable
        ``log_density(x) -> ndarray (m,)`` for ``x`` of shape ``(m, d)`` (unnormalised log
        target; ``-inf`` allowed, NaN/``+inf`` raise).
    proposal : frozen scipy.stats continuous distribution or sequence of them
        The proposal ``Q``; see :func:`astar_sample`.
    n_iter : int
        Rounds (region selections) per search, ``>= 1``; with ``bound``, the most a search
        may make before it stops with a warning and ``converged=False``.
    n_draws : int, default=1
        Number of independent draws (searches).
    n_particles : int, default=8
        Particles per region for the estimator of Eq. 3.
    importance : None or frozen scipy.stats continuous distribution(s), default=None
        Importance distribution ``R`` for the particles (same dimension as ``proposal``);
        ``None`` draws them from ``Q`` itself (uniform weights).
    bound : callable or None, default=None
        ``bound(lower, upper) -> float``, an upper bound of ``o`` on the box (as in
        :func:`astar_sample`): makes the draws exact and the number of rounds adaptive.
    record_trace : bool, default=False
        Record a :class:`SearchTrace`.
    random_state : None, int or np.random.Generator
    n_samples : int, optional
        Former name of ``n_draws``; passing it warns (FutureWarning).

    Returns
    -------
    AStarResult
        ``samples`` (n_draws, d), ``max_gumbel`` (n_draws,), ``n_evaluations`` (rows
        passed to ``log_density``: region points and fresh particles), ``n_iter``
        (n_draws,) (below the budget only if no region of positive mass is left, or, with a
        bound, once the draw is certified), ``converged`` (with a bound, True where the
        certificate held; all False without one), ``trace``.

    References
    ----------
    "A* sampling with probability matching", Alg. 1, Eq. 3 (Monte-Carlo estimator), Eq. 4
    (probability matching), §4.3 and Eq. 5-8 (the balanced tree); §2.2 (A*'s stopping rule).

    Examples
    --------
    >>> from scipy import stats
    >>> log_p = lambda x: stats.norm(1.0, 0.5).logpdf(x[:, 0])
    >>> res = pm_astar_sample(log_p, stats.norm(0.0, 2.0), n_iter=20, n_draws=3,
    ...                       random_state=0)
    >>> res.samples.shape, res.n_iter.tolist()
    ((3, 1), [20, 20, 20])
    """
    prop = _BoxProposal(proposal)
    objective = _Objective(log_density, prop)
    n_iter = check_int(n_iter, "n_iter", low=1)
    n_draws = _check_common(n_draws, n_samples, record_trace)
    n_particles = check_int(n_particles, "n_particles", low=1)
    if bound is not None and not callable(bound):
        raise TypeError(f"bound must be None or a callable, got {type(bound).__name__}")
    imp = None if importance is None else _BoxProposal(importance, "importance")
    if imp is not None and imp.d != prop.d:
        raise ValueError(f"importance must have the dimension of proposal ({prop.d}), got {imp.d}")
    rng = as_generator(random_state)
    own = 1 if imp is None else 0  # the region's own point is a particle iff particles ~ Q
    sampler = prop if imp is None else imp

    d = prop.d
    regions = _Regions(d)
    trees = [TruncatedGumbelTree(rng) for _ in range(n_draws)]
    owner_of = [{} for _ in range(n_draws)]  # tree handle -> region
    particles = {}  # region -> (handles, X, Y, log q(X) - log r(X))
    open_regions = [set() for _ in range(n_draws)]
    # With a bound: A*'s priorities G_Q(S) + B(S) of the open regions (a lazy max-heap).
    ceilings = [[] for _ in range(n_draws)]
    ceiling = {}
    held = {}  # selected region -> its particles, until its children are opened
    best = np.full(n_draws, -np.inf)
    best_x = np.empty((n_draws, d))
    n_eval = np.zeros(n_draws, dtype=np.int64)
    trace = _Trace(n_draws, record_trace)

    def close(s, r):
        """Take region ``r`` out of the tree; keep its particles for its children."""
        handles, px, py, lr = particles.pop(r)
        for handle in handles.tolist():
            trees[s].remove(handle)
            del owner_of[s][handle]
        open_regions[s].discard(r)
        held[r] = (px, py, lr)

    def open_children(lower, upper, depth, parent_g, searches, reused):
        """Sample, evaluate and register new regions; ``reused[i]`` = (X, Y, LR) to keep."""
        log_mass, x = prop.mass_and_sample(lower, upper, rng)
        keep = np.isfinite(log_mass)
        g = truncated_gumbel(log_mass, parent_g, rng)
        n_reused = np.array([r[0].shape[0] for r in reused])
        n_fresh = np.where(keep, n_particles - own - n_reused, 0)
        r_mass, fresh = sampler.mass_and_sample(lower, upper, rng, n_draws=n_fresh)
        if imp is None:
            lr_fresh = np.zeros(fresh.shape[0])
        else:
            # Where R has no mass on a box (float64 underflow) its particles come from Q.
            no_r = np.repeat(~np.isfinite(r_mass), n_fresh)
            if no_r.any():
                fallback = np.flatnonzero(~np.isfinite(r_mass) & (n_fresh > 0))
                _, fresh[no_r] = prop.mass_and_sample(
                    lower[fallback], upper[fallback], rng, n_draws=n_fresh[fallback]
                )
            lr_fresh = np.where(no_r, 0.0, prop.logpdf(fresh) - imp.logpdf(fresh))
        o = objective(np.concatenate([x[keep], fresh]))
        o_x, o_fresh = o[: int(keep.sum())], o[int(keep.sum()) :]
        np.add.at(n_eval, searches[keep], 1)
        np.add.at(n_eval, searches, n_fresh)
        value = g[keep] + o_x
        kids = regions.add(lower[keep], upper[keep], x[keep], g[keep], depth[keep])
        starts = np.concatenate([[0], np.cumsum(n_fresh)])
        for j, (i, r) in enumerate(zip(np.flatnonzero(keep).tolist(), kids.tolist(), strict=True)):
            s = int(searches[i])
            if value[j] > best[s]:
                best[s], best_x[s] = value[j], x[i]
            if bound is not None:
                ceiling[r] = regions.gumbel[r] + _call_bound(bound, lower[i], upper[i])
                if ceiling[r] <= best[s]:
                    continue  # it cannot hold a larger value than the incumbent's: pruned
                heapq.heappush(ceilings[s], (-ceiling[r], r))
            new = slice(starts[i], starts[i + 1])
            px = np.concatenate([x[i : i + own], reused[i][0], fresh[new]])
            py = np.concatenate([o_x[j : j + own], reused[i][1], o_fresh[new]])
            lr = np.concatenate([np.zeros(own), reused[i][2], lr_fresh[new]])
            live = np.isfinite(py)
            # Eq. 3: TG(log(w_i Q(S)) + Y_i, G_Q(S) + Y_i), w_i ∝ q/r (1/k when R = Q).
            log_w = lr - np.logaddexp.reduce(lr) if lr.size else lr
            a = log_mass[i] + log_w[live] + py[live]
            b = g[i] + py[live]
            handles = trees[s].insert_many(a, b)
            for h in handles.tolist():
                owner_of[s][h] = r
            particles[r] = (handles, px, py, lr)
            open_regions[s].add(r)

    def certified(s):
        """A*'s stopping rule: no open region's G_Q(S) + B(S) exceeds the best value."""
        heap = ceilings[s]
        while heap and heap[0][1] not in particles:
            heapq.heappop(heap)  # refined or dropped since it was pushed
        return not heap or best[s] >= -heap[0][0]

    def select(s):
        """The region probability matching draws (Eq. 4), or None when none is left."""
        while True:
            _, h = trees[s].sample_max(rng)
            if h >= 0:
                r = owner_of[s][h]
            elif open_regions[s]:  # every particle has Y = -inf: the no-bound rule decides
                r = max(open_regions[s], key=lambda k: regions.gumbel[k])
            else:  # no region with positive mass is left: the search is complete
                return None
            close(s, r)
            if bound is None or ceiling[r] > best[s]:
                return r
            del held[r]  # dropped: it cannot hold a larger value than the incumbent's

    empty = (np.empty((0, d)), np.empty(0), np.empty(0))
    searches = np.arange(n_draws)
    open_children(
        np.tile(prop.lower, (n_draws, 1)),
        np.tile(prop.upper, (n_draws, 1)),
        np.zeros(n_draws, dtype=np.int64),
        np.full(n_draws, np.inf),
        searches,
        [empty] * n_draws,
    )

    rounds = np.zeros(n_draws, dtype=np.int64)
    converged = np.zeros(n_draws, dtype=bool)
    for _ in range(n_iter):
        chosen, live = [], []
        for s in range(n_draws):
            if bound is not None and (converged[s] or certified(s)):
                converged[s] = True
                continue
            r = select(s)
            if r is None:
                converged[s] = bound is not None
                continue
            chosen.append(r)
            live.append(s)
        if not live:
            break
        sel, active = np.array(chosen), np.array(live)
        rounds[active] += 1
        lower, upper, depth = regions.children(sel)
        reused = []
        for r, lo, hi in zip(np.repeat(sel, 2).tolist(), lower, upper, strict=True):
            px, py, lr = held[r]
            # the region's own point (particle 0 when own) is explored: never carried over
            inside = np.all((px[own:] > lo) & (px[own:] < hi), axis=1)
            take = np.flatnonzero(inside)[: n_particles - own] + own
            reused.append((px[take], py[take], lr[take]))
        for r in sel.tolist():
            del held[r]
        open_children(
            lower, upper, depth, np.repeat(regions.gumbel[sel], 2), np.repeat(active, 2), reused
        )
        # recorded after the round, so that it shows what the round found
        trace.record(active, best[active], n_eval[active], regions.lower[sel], regions.upper[sel])

    if bound is not None:
        for s in range(n_draws):
            converged[s] = converged[s] or certified(s)
        if not converged.all():
            warnings.warn(
                f"{int((~converged).sum())} of {n_draws} PM-A* searches hit n_iter={n_iter} "
                "before the bound proved them exact; their draws are approximate",
                RuntimeWarning,
                stacklevel=2,
            )
    return AStarResult(
        best_x, best, objective.n_evaluations, rounds, converged, trace.finish(d)
    )
