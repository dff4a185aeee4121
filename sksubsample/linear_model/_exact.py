"""Exact, independent posterior draws of Bayesian logistic regression by A* and PM-A*."""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._progress import run_tasks
from .._utils import check_int, spawn_generators
from ..algorithms import LogisticAStarTarget, astar_sample, pm_astar_sample

__all__ = ["sample_exact"]

_METHODS = ("astar", "pm-astar")
# Draws per joblib task: fixed, so that which draw gets which seed never depends on n_jobs.
_CHUNK = 20
# Dimensions (parameters, intercept included) above which the search is refused, and from
# which it warns. Measured on breast cancer and on synthetic data (benchmarks/
# astar_logistic.py): the rounds per draw grow about threefold per added parameter, ~8 at
# d=2, ~70 at d=4, ~550 at d=6, ~1900 at d=7 (2·10⁴ passes over the data per draw, 0.1-0.2
# draws/s); each round bounds two boxes at a few passes over the data. Past d=10 a draw would
# read the data ~10⁶ times: the MH chains are cheaper by orders of magnitude.
_WARN_PARAMS = 7
_MAX_PARAMS = 10


def _exact_chunk(target, method, n_particles, max_rounds, rngs, progress=None):
    """Independent searches, one per generator: draws (whitened) and their costs."""
    target = copy.copy(target)  # its own pass counter (threads share the original)
    out = {key: [] for key in ("u", "points", "passes", "rounds", "converged")}
    for rng in rngs:
        passes = target.n_bound_passes
        with warnings.catch_warnings():
            # an unfinished search is reported once, by the caller, with the count
            warnings.simplefilter("ignore", RuntimeWarning)
            if method == "astar":
                res = astar_sample(target.log_density, target.proposal, bound=target.bound,
                                   max_iter=max_rounds, random_state=rng)
            else:
                res = pm_astar_sample(target.log_density, target.proposal, bound=target.bound,
                                      n_iter=max_rounds, n_particles=n_particles,
                                      random_state=rng)
        out["u"].append(res.samples[0])
        out["points"].append(res.n_evaluations)
        out["passes"].append(target.n_bound_passes - passes)
        out["rounds"].append(int(res.n_iter[0]))
        out["converged"].append(bool(res.converged[0]))
        if progress is not None:
            progress(1)
    return out


def sample_exact(self, n_draws, *, method="astar", n_particles=2, max_rounds=100_000,
                 proposal_scale=1.0, n_jobs=None, random_state=None, progress=False):
    """Exact, independent draws from the posterior by A* sampling or PM-A*.

    Each draw is the location of the maximum of a Gumbel process of the posterior, found by
    an A* search over boxes of the whitened parameter space (Maddison, Tarlow & Minka 2014,
    Alg. 2; "A* sampling with probability matching", §2.2) that stops only when a bound
    proves no unexplored box can hold a larger value: the draws are exact and independent
    (no warm-up, no autocorrelation), at a cost that is counted. The fitted MAP and the
    Laplace precision at it set the proposal (logistic marginals in the Laplace principal
    axes) and the bounds, for the same tempered, weighted posterior as ``fit``
    (``prior_scale``, ``temperature``, ``sample_weight``); see
    :class:`sksubsample.algorithms.LogisticAStarTarget`. The fitted chains and
    :meth:`sample_posterior` are left as they are.

    The cost grows about threefold per parameter: practical up to 6-7 parameters (intercept
    included), refused above 10.

    Parameters
    ----------
    n_draws : int >= 1
        Number of independent draws.
    method : {"astar", "pm-astar"}, default "astar"
        ``"astar"``: refine the box with the largest bound (A*). ``"pm-astar"``: refine the
        box drawn by probability matching over Monte-Carlo estimates of the boxes' Gumbel
        values (Alg. 1, Eq. 3-4), stopping by A*'s certificate, so still exact.
    n_particles : int >= 1, default 2
        Particles per box of ``"pm-astar"`` (Eq. 3); each costs one density evaluation.
    max_rounds : int >= 1, default 100000
        Rounds per draw after which a search stops uncertified (with a warning).
    proposal_scale : float >= 1/√2, default 1.0
        Scale of the logistic proposal in whitened units.
    n_jobs : int or None, default None
        Draws run in parallel through joblib; every draw has its own generator from
        ``SeedSequence.spawn``, so the draws do not depend on ``n_jobs``.
    random_state : None, int, numpy.random.Generator, SeedSequence or RandomState
    progress : bool or "notebook", default False
        A tqdm bar over the draws.

    Returns
    -------
    ndarray of shape (n_draws, n_params)
        Columns in the order of ``posterior_names_``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        Before ``fit``.
    RuntimeError
        After unpickling (the training data are kept in memory only).
    ValueError
        For more than 10 parameters, where each draw would read the data millions of times.

    Warns
    -----
    UserWarning
        From 7 parameters on, with the cost measured at that size.
    RuntimeWarning
        When searches reach ``max_rounds`` before their bound certified them.

    Notes
    -----
    Sets ``exact_evaluations_per_draw_`` (data terms read per draw: ``n_samples`` for every
    point at which the log density is evaluated and for every pass the bounds make over the
    data), ``exact_density_evaluations_per_draw_`` (points), ``exact_bound_passes_per_draw_``,
    ``exact_rounds_per_draw_`` (boxes refined), ``exact_converged_`` (True where the bound
    certified the draw), ``exact_seconds_`` (wall time) and ``exact_method_``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sksubsample import BayesianLogisticRegressionMH
    >>> X, y = make_classification(n_samples=300, n_features=2, n_informative=2,
    ...                            n_redundant=0, random_state=0)
    >>> clf = BayesianLogisticRegressionMH(n_draws=1000, n_warmup=500, n_chains=2,
    ...                                    random_state=0).fit(X, y)
    >>> draws = clf.sample_exact(20, random_state=0)
    >>> draws.shape, bool(clf.exact_converged_.all())
    ((20, 3), True)
    """
    check_is_fitted(self)
    data = self._data("sample_exact")
    n_draws = check_int(n_draws, "n_draws", low=1)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    n_particles = check_int(n_particles, "n_particles", low=1)
    max_rounds = check_int(max_rounds, "max_rounds", low=1)
    d = int(self.map_.size)
    if d > _MAX_PARAMS:
        raise ValueError(
            f"sample_exact searches a {d}-dimensional space: the A* search needs about 3^d "
            f"boxes per draw (measured: ~70 rounds at d=4, ~550 at d=6, ~1900 at d=7, each "
            f"bounding two boxes at a few passes over the data), over a million passes per "
            f"draw beyond d={_MAX_PARAMS}. Use the fitted chains (sample_posterior) instead."
        )
    if d >= _WARN_PARAMS:
        warnings.warn(
            f"sample_exact on {d} parameters: expect thousands of rounds per draw (measured "
            f"~1900 at d=7, growing about threefold per parameter), i.e. ~10⁴-10⁵ passes over "
            f"the {data.design.shape[0]} samples per draw; the fitted chains are far cheaper",
            UserWarning, stacklevel=2)
    # The A* search reads every row at every bound: its few rows (at most a few parameters'
    # worth of search) are held in memory.
    weights = None if data.weights is None else np.asarray(data.weights)
    target = LogisticAStarTarget(np.asarray(data.design), 2.0 * np.asarray(data.y01) - 1.0,
                                 prior_scale=data.prior_scale, center=self.map_,
                                 weights=weights, temperature=data.temperature,
                                 proposal_scale=proposal_scale)
    rngs = spawn_generators(random_state, n_draws)
    chunks = [(rngs[i:i + _CHUNK],) for i in range(0, n_draws, _CHUNK)]
    start = time.perf_counter()
    results = run_tasks(_exact_chunk, (target, method, n_particles, max_rounds), chunks,
                        n_jobs=n_jobs, progress=progress, desc="sample_exact",
                        steps_per_chain=_CHUNK)
    self.exact_seconds_ = time.perf_counter() - start
    merged = {key: np.concatenate([np.asarray(r[key]) for r in results]) for key in results[0]}
    self.exact_method_ = method
    self.exact_density_evaluations_per_draw_ = merged["points"].astype(np.int64)
    self.exact_bound_passes_per_draw_ = merged["passes"].astype(np.int64)
    self.exact_evaluations_per_draw_ = target.n_data * (
        self.exact_density_evaluations_per_draw_ + self.exact_bound_passes_per_draw_)
    self.exact_rounds_per_draw_ = merged["rounds"].astype(np.int64)
    self.exact_converged_ = merged["converged"].astype(bool)
    if not self.exact_converged_.all():
        warnings.warn(
            f"{int((~self.exact_converged_).sum())} of {n_draws} searches reached "
            f"max_rounds={max_rounds} before their bound certified them: those draws are "
            "approximate", RuntimeWarning, stacklevel=2)
    return target.to_params(merged["u"].reshape(n_draws, d))
