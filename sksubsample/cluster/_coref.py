"""Entity resolution by annealed Gibbs sampling of a pairwise CRF, with racing Gibbs updates."""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._utils import as_generator, check_int
from ._gibbs import Partition, canonical_labels, log_potential, sweep
from ._potentials import PairPotentials

__all__ = ["CorefGibbsClusterer"]

# Relative asymmetry tolerated in a precomputed matrix (rounding in the user's computation).
_SYM_RTOL = 1e-10


def _progress(progress, total):
    if not progress:
        return None
    if progress == "notebook":
        from tqdm.notebook import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, desc="CorefGibbsClusterer", unit="sweep")


def _check_precomputed(X):
    """Validate a precomputed log-potential matrix; return it without its diagonal."""
    if X.shape[0] != X.shape[1]:
        raise ValueError(f"metric='precomputed' needs a square (n, n) matrix X of "
                         f"log-potentials, got shape {X.shape}")
    if sparse.issparse(X):
        coo = sparse.coo_matrix(X)
        coo.sum_duplicates()
        values = coo.data
    else:
        values = X
    if np.isnan(values).any() or np.isposinf(values).any():
        raise ValueError("X holds NaN or +inf log-potentials; they must be finite (or -inf "
                         "for pairs that can never share a cluster)")
    if not sparse.issparse(X):
        X = np.array(X, dtype=np.float64)  # a copy: its diagonal is cleared
        np.fill_diagonal(X, 0.0)  # the diagonal is no factor of the model
        if not np.allclose(X, X.T, rtol=_SYM_RTOL, atol=0.0):  # -inf equals -inf here
            raise ValueError("metric='precomputed' needs a symmetric X: f(i, j) = f(j, i)")
        return X
    off = coo.row != coo.col  # the diagonal is no factor of the model
    rows, cols, vals = coo.row[off], coo.col[off], values[off].astype(np.float64)
    # Symmetric in which pairs are stored (an unstored pair means -repulsion) and in values.
    forward = np.lexsort((cols, rows))
    backward = np.lexsort((rows, cols))
    if not (np.array_equal(rows[forward], cols[backward])
            and np.array_equal(cols[forward], rows[backward])
            and np.allclose(vals[forward], vals[backward], rtol=_SYM_RTOL, atol=0.0)):
        raise ValueError("metric='precomputed' needs a symmetric X: the same pairs stored "
                         "in both triangles with f(i, j) = f(j, i)")
    # Explicit zeros are stored potentials (f = 0), so the matrix is built without pruning.
    n = X.shape[0]
    out = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
    out.sort_indices()
    return out


class CorefGibbsClusterer(ClusterMixin, BaseEstimator):
    """Coreference (entity resolution) by annealed Gibbs sampling of a pairwise CRF.

    Mentions ``x_1..x_n`` are clustered into entities under the conditional random field of
    Singh et al. (2012), ``p(y | x) ∝ exp(Σ_{i<j, y_i = y_j} f(x_i, x_j) / T)``. Starting
    from singletons, ``n_sweeps`` Gibbs sweeps are run at temperatures decreasing geometrically
    from ``temperature_start`` to ``temperature_end`` (annealing, Finkel et al. 2005); the last
    partition is ``labels_``, the MAP estimate. Each Gibbs update of mention ``i`` chooses among
    every non-empty cluster and one new, empty cluster (log-potential 0); cluster ``k`` has
    log-probability ``Σ_{j ∈ C_k} f(x_i, x_j) / T``, a sum of ``|C_k|`` factors, which
    ``method="racing"`` estimates from subsamples of each cluster by racing (Chen & Ghahramani
    2016, §5.3 and App. C.3), and ``method="exact"`` evaluates completely.

    Parameters
    ----------
    metric : {"euclidean", "precomputed"} or callable, default "euclidean"
        The log-potential ``f``. ``"euclidean"``: ``f = 1 - ||x_i - x_j||² / (2 bandwidth²)``,
        positive (attracting) within ``sqrt(2)·bandwidth``. A callable ``metric(A, B)`` must
        return the ``(len(A), len(B))`` array of log-potentials between the rows of ``A`` and
        ``B`` (vectorised; ``-inf`` forbids a pair to share a cluster). ``"precomputed"``: ``X``
        is a symmetric ``(n, n)`` matrix, usually sparse, whose stored entries are ``f(i, j)``;
        every pair not stored has ``f = -repulsion`` (the diagonal is ignored).
    bandwidth : float > 0, default 1.0
        Length scale of the ``"euclidean"`` potential.
    repulsion : float >= 0, default 5.0
        ``-f`` of the pairs a sparse ``"precomputed"`` matrix does not store (finite).
    method : {"racing", "exact"}, default "racing"
        How each Gibbs update is drawn: ``"racing"`` subsamples the factors of the large
        clusters (Racing-Normal with independent arms: error at most ``delta`` per update in
        total variation, Prop. 1, *under the normal approximation of the race*, which a small
        ``first_batch`` can break, see Notes); ``"exact"`` evaluates every factor. Both run
        compiled for the ``"euclidean"`` and ``"precomputed"`` metrics (a callable metric is
        called from Python). A racing update evaluates exactly the clusters whose factors a
        race would read whole anyway (at most ``2 m¹``), and races only when the other clusters
        hold enough factors for the race to repay its fixed cost; otherwise it is the exact
        update, so racing is never much slower than exact and saves where clusters are large
        and well separated (heavy-tailed cluster sizes, near convergence).
    delta : float in (0, 1), default 0.05
        Error bound of a racing update.
    first_batch : int >= 3, default 3
        ``m¹``, the first subsample of every raced cluster; App. C.3 uses 3 since most
        clusters are small (2 is refused: a standard deviation estimated from two factors
        breaks the normal bound, see Notes). Clusters of at most ``2 m¹`` mentions (with
        sparse input: stored neighbours of the updated mention) are evaluated in full: the
        race's remainder rule would read them whole in its first round.
    n_sweeps : int >= 1, default 20
        Gibbs sweeps of the annealing (each updates every mention once, in random order).
    temperature_start, temperature_end : float > 0, default 1.0 and 0.1
        First and last temperature of the geometric annealing schedule. Equal values run
        plain Gibbs at that temperature (``1.0`` samples the posterior).
    track_log_potential : bool, default True
        Record ``Σ_{i<j, y_i=y_j} f(x_i, x_j)`` after each sweep in ``log_potential_trace_``
        (computed exactly, not counted in ``n_evaluations_``; it costs ``Σ_k |C_k|²/2``
        factors per sweep for callable metrics).
    track_labels : bool, default False
        Keep the partition after each sweep in ``labels_trace_`` (``n_sweeps · n`` integers),
        e.g. to score every sweep against known entities.
    audit_races : bool, default False
        Check every race of the fit against the exact draw with the same Gumbel perturbations
        (the error event of Prop. 3) and count the disagreements in ``n_race_errors_``. Each
        check reads all the raced clusters' factors (not counted in ``n_evaluations_``, but
        inside ``sweep_times_``), so this is a diagnostic of whether ``delta`` holds on the
        data at hand, not a mode to fit with.
    random_state : None, int, numpy.random.Generator or SeedSequence, default None
    progress : bool or "notebook", default False
        Show a tqdm progress bar over sweeps.

    Attributes
    ----------
    labels_ : ndarray of int of shape (n_samples,)
        Cluster of each mention after the last sweep, numbered ``0..n_clusters_-1`` in order of
        first appearance.
    n_clusters_ : int
    n_evaluations_ : int
        Factors ``f(x_i, x_j)`` evaluated by all Gibbs updates: ``n - 1`` per exact update;
        per racing update, the factors of the exactly evaluated clusters plus what the race
        read. With a sparse ``"precomputed"`` matrix both methods count the stored entries
        they read: an unstored factor is the known constant ``-repulsion``, never read (summed
        by counting cluster members), so an exact update counts the stored entries of its row
        and a race subsamples the stored entries of the raced clusters.
    fraction_data_touched_ : float
        ``n_evaluations_`` over what exact updates read in ``n_sweeps`` sweeps
        (``n (n - 1)`` factors per sweep, or twice the stored pairs with sparse input).
    temperatures_ : ndarray of shape (n_sweeps,)
        Temperature of each sweep.
    n_evaluations_trace_ : ndarray of shape (n_sweeps,)
        Factors evaluated in each sweep.
    n_clusters_trace_, n_moves_trace_ : ndarray of shape (n_sweeps,)
        Clusters after, and mentions that changed cluster during, each sweep.
    n_races_trace_ : ndarray of shape (n_sweeps,)
        Updates decided by a race in each sweep (0 with ``method="exact"``; the other
        updates were exact).
    labels_trace_ : ndarray of int of shape (n_sweeps, n_samples) or None
        The partition after each sweep (numbered as ``labels_``) when ``track_labels=True``.
    n_race_errors_ : int or None
        With ``audit_races=True``, the races (out of ``n_races_trace_.sum()``) whose winner
        differs from the exact draw under the same perturbations; at most a fraction
        ``delta`` of them in expectation when the normal bound holds.
    log_potential_trace_ : ndarray of shape (n_sweeps,) or None
        ``Σ_{i<j, y_i=y_j} f(x_i, x_j)`` after each sweep (at ``T = 1``), a diagnostic that
        needs no ground truth; None when ``track_log_potential=False``.
    sweep_times_ : ndarray of shape (n_sweeps,)
        Wall time of each sweep in seconds (the trace excluded).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Only when ``X`` has string feature names.

    See Also
    --------
    sksubsample.metrics.b_cubed_score : the mention-averaged B³ score of a clustering.
    sksubsample.algorithms.sample_discrete : the racing discrete sampler of each update.

    Notes
    -----
    The estimator is not an MCMC posterior summary but a MAP search: ``labels_`` is one
    partition, and :meth:`sample_posterior` continues the chain at ``T = 1`` for posterior
    draws. Cluster numbers are arbitrary (label switching), so per-label R-hat or ESS would be
    meaningless; use ``log_potential_trace_`` to follow the chain.

    With ``method="racing"`` a race picks a wrong cluster with probability at most ``delta``,
    so every update is within total variation ``delta`` of the exact Gibbs conditional
    (Prop. 1 and 3 with the Racing-Normal bound, Eq. 26-27), *under the normal approximation
    with a standard deviation estimated from the first* ``m¹`` *factors*. App. C.3 "slightly
    abuses" it with ``m¹ = 3``: when a cluster's factors scatter as much as the gaps between
    the candidates' log-probabilities, three factors often underestimate the spread and races
    err more often than ``delta`` (the coreference benchmark page measures this, and
    ``first_batch=10`` brings the error back under ``delta``); on well-separated clusters the
    races are easy and the bound holds. ``audit_races=True`` measures the error rate on the
    data at hand. Where App. C.3 leaves a choice: the second batch of a raced cluster is
    ``max(1, ceil((|C| - m¹) / 10))`` factors (the appendix's ``(|C| - 3)/10 ∧ 1`` read as a
    lower bound of 1), and δ is split over the ``D - 1`` comparisons with the winner and, by
    Eq. 27, over the rounds before the last.

    References
    ----------
    .. [1] Y. Chen and Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit
       Problem. ICML 2016, §5.3 and App. C.3 (Eq. 26-27).
    .. [2] S. Singh, A. Subramanya, F. Pereira, A. McCallum. Large-Scale Cross-Document
       Coreference Using Distributed Inference and Hierarchical Models. ACL 2011 / 2012.
    .. [3] J. R. Finkel, T. Grenager, C. Manning. Incorporating Non-local Information into
       Information Extraction Systems by Gibbs Sampling. ACL 2005 (annealed Gibbs).

    Examples
    --------
    >>> import numpy as np
    >>> from sksubsample.cluster import CorefGibbsClusterer
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(c, 0.1, size=(20, 2)) for c in (0.0, 3.0, 6.0)])
    >>> est = CorefGibbsClusterer(n_sweeps=10, random_state=0).fit(X)
    >>> est.n_clusters_
    3
    >>> est.sample_posterior(5, random_state=0).shape
    (5, 60)
    """

    _parameter_constraints: ClassVar[dict] = {
        "metric": [StrOptions({"euclidean", "precomputed"}), callable],
        "bandwidth": [Interval(Real, 0, None, closed="neither")],
        "repulsion": [Interval(Real, 0, None, closed="left")],
        "method": [StrOptions({"racing", "exact"})],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "first_batch": [Interval(Integral, 3, None, closed="left")],
        "n_sweeps": [Interval(Integral, 1, None, closed="left")],
        "temperature_start": [Interval(Real, 0, None, closed="neither")],
        "temperature_end": [Interval(Real, 0, None, closed="neither")],
        "track_log_potential": ["boolean"],
        "track_labels": ["boolean"],
        "audit_races": ["boolean"],
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator,
                         np.random.SeedSequence, None],
        "progress": ["boolean", StrOptions({"notebook"})],
    }

    def __init__(self, *, metric="euclidean", bandwidth=1.0, repulsion=5.0, method="racing",
                 delta=0.05, first_batch=3, n_sweeps=20, temperature_start=1.0,
                 temperature_end=0.1, track_log_potential=True, track_labels=False,
                 audit_races=False, random_state=None, progress=False):
        self.metric = metric
        self.bandwidth = bandwidth
        self.repulsion = repulsion
        self.method = method
        self.delta = delta
        self.first_batch = first_batch
        self.n_sweeps = n_sweeps
        self.temperature_start = temperature_start
        self.temperature_end = temperature_end
        self.track_log_potential = track_log_potential
        self.track_labels = track_labels
        self.audit_races = audit_races
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        precomputed = self.metric == "precomputed"
        tags.input_tags.pairwise = precomputed
        tags.input_tags.sparse = precomputed
        tags.input_tags.allow_nan = False
        return tags

    def _potentials(self, X):
        """Validate ``X`` for the metric and build the pair potentials (before any work)."""
        if self.metric == "precomputed":
            X = validate_data(self, X, accept_sparse=["csr", "csc", "coo"], dtype=np.float64,
                              ensure_all_finite=False)
            X = _check_precomputed(X)
            if not np.isfinite(self.repulsion):
                raise ValueError(f"repulsion must be finite, got {self.repulsion!r}")
            return PairPotentials("precomputed", X, repulsion=self.repulsion)
        if callable(self.metric):
            X = validate_data(self, X, dtype=None, ensure_all_finite=False)
            return PairPotentials("callable", X, func=self.metric)
        X = validate_data(self, X, dtype=np.float64)
        return PairPotentials("euclidean", X, bandwidth=self.bandwidth)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Anneal from singletons to a MAP partition of the mentions.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or (n_samples, n_samples)
            Mentions (feature rows), or the log-potential matrix for ``metric="precomputed"``.
        y : Ignored

        Returns
        -------
        self : CorefGibbsClusterer
        """
        pot = self._potentials(X)
        n = pot.n
        rng = as_generator(self.random_state)
        temperatures = np.geomspace(self.temperature_start, self.temperature_end,
                                    self.n_sweeps)
        part = Partition(np.arange(n))
        evaluations = np.zeros(self.n_sweeps, dtype=np.int64)
        n_clusters = np.zeros(self.n_sweeps, dtype=np.int64)
        n_moves = np.zeros(self.n_sweeps, dtype=np.int64)
        n_races = np.zeros(self.n_sweeps, dtype=np.int64)
        n_errors = 0
        times = np.zeros(self.n_sweeps)
        slots = np.empty((self.n_sweeps, n), dtype=np.int64) if self.track_labels else None
        trace = np.zeros(self.n_sweeps) if self.track_log_potential else None
        bar = _progress(self.progress, self.n_sweeps)
        try:
            for s, temperature in enumerate(temperatures):
                start = time.perf_counter()
                evaluations[s], n_moves[s], n_races[s], errors = sweep(
                    part, pot, float(temperature), self.method, self.delta, self.first_batch,
                    rng, audit=self.audit_races)
                n_errors += errors
                times[s] = time.perf_counter() - start
                n_clusters[s] = part.n_clusters()
                if slots is not None:
                    slots[s] = part.labels
                if trace is not None:
                    trace[s] = log_potential(part, pot)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        self._pot = pot
        self.labels_ = part.canonical_labels()
        self.n_clusters_ = int(n_clusters[-1])
        self.n_evaluations_ = int(evaluations.sum())
        per_sweep = pot.indices.size if pot.sparse else n * (n - 1)
        self.fraction_data_touched_ = (self.n_evaluations_ / (self.n_sweeps * per_sweep)
                                       if per_sweep else 0.0)
        self.temperatures_ = temperatures
        self.n_evaluations_trace_ = evaluations
        self.n_clusters_trace_ = n_clusters
        self.n_moves_trace_ = n_moves
        self.n_races_trace_ = n_races
        self.n_race_errors_ = n_errors if self.audit_races else None
        self.labels_trace_ = (None if slots is None
                              else np.array([canonical_labels(row) for row in slots]))
        self.log_potential_trace_ = trace
        self.sweep_times_ = times
        return self

    def sample_posterior(self, n_samples=100, *, n_warmup=0, thin=1, random_state=None):
        """Partitions drawn by Gibbs sampling at ``T = 1``, starting from ``labels_``.

        The chain continues from the MAP partition (a high-probability state, so little
        warm-up is needed) with the fitted ``method``; a draw is kept every ``thin`` sweeps.
        Draws of one chain are dependent.

        Parameters
        ----------
        n_samples : int >= 1, default 100
            Partitions returned.
        n_warmup : int >= 0, default 0
            Sweeps discarded before the first draw.
        thin : int >= 1, default 1
            Sweeps between draws.
        random_state : None, int or numpy.random.Generator, default None

        Returns
        -------
        ndarray of int of shape (n_samples, n_samples_fit)
            One partition per row, clusters numbered ``0..k-1`` in order of first appearance.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self)
        n_samples = check_int(n_samples, "n_samples", low=1)
        n_warmup = check_int(n_warmup, "n_warmup", low=0)
        thin = check_int(thin, "thin", low=1)
        rng = as_generator(random_state)
        part = Partition(self.labels_)
        draws = np.empty((n_samples, self._pot.n), dtype=np.int64)
        for s in range(n_warmup + n_samples * thin):
            sweep(part, self._pot, 1.0, self.method, self.delta, self.first_batch, rng)
            kept = s - n_warmup
            if kept >= 0 and (kept + 1) % thin == 0:
                draws[kept // thin] = part.canonical_labels()
        return draws

    def log_potential(self, labels):
        """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of a partition of the fitted mentions.

        Parameters
        ----------
        labels : array-like of int of shape (n_samples_fit,)

        Returns
        -------
        float
            The unnormalised log-probability of the partition at ``T = 1``.
        """
        check_is_fitted(self)
        labels = np.asarray(labels)
        if labels.shape != (self._pot.n,) or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be {self._pot.n} integers (one per fitted mention), "
                             f"got an array of shape {labels.shape} and dtype {labels.dtype}")
        return log_potential(Partition(canonical_labels(labels)), self._pot)
