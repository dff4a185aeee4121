"""Entity resolution by annealed Gibbs sampling of a pairwise CRF, with racing Gibbs updates."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from joblib import cpu_count, effective_n_jobs
from joblib.parallel import get_active_backend
from scipy import sparse
from sklearn.base import ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import _MAX_COUNT, MCMCEstimator, keeps_state_on_interrupt
from .._utils import as_generator, check_int, check_numeric
from ..diagnostics import check_racing_guard
from ._chains import CorefSettings, coref_chain, coref_continue
from ._gibbs import Partition, canonical_labels, log_potential
from ._partition import exact_cluster_probability
from ._potentials import PairPotentials
from ._precomputed import check_precomputed
from ._records import records_model
from ._records_chain import labels_log_posterior, records_chain, records_continue
from ._splink import RecordPairs

__all__ = ["CorefGibbsClusterer"]

class CorefGibbsClusterer(ClusterMixin, MCMCEstimator):
    """Coreference (entity resolution) by annealed Gibbs sampling of a pairwise CRF.

    Mentions ``x_1..x_n`` are clustered into entities under the conditional random field of
    Singh et al. (2012), ``p(y | x) ∝ exp(Σ_{i<j, y_i = y_j} f(x_i, x_j) / T)``. Each chain
    starts from singletons and runs ``n_sweeps`` Gibbs sweeps at temperatures decreasing
    geometrically from ``temperature_start`` to ``temperature_end`` (annealing, Finkel et al.
    2005); the best annealed partition is ``labels_``, the MAP estimate. The chains then
    continue at ``T = 1`` for ``n_draws`` posterior draws. Each Gibbs update of mention ``i``
    chooses among every non-empty cluster and one new, empty cluster (log-potential 0);
    cluster ``k`` has log-probability ``Σ_{j ∈ C_k} f(x_i, x_j) / T``, a sum of ``|C_k|``
    factors, which racing estimates from subsamples of the large clusters (Chen & Ghahramani
    2016, §5.3 and App. C.3) and an exact update evaluates completely; ``method="auto"``
    races only where a race repays its cost.

    Parameters
    ----------
    metric : {"euclidean", "precomputed"} or callable, default "euclidean"
        The log-potential ``f``. ``"euclidean"``: ``f = 1 - ||x_i - x_j||² / (2 bandwidth²)``,
        positive (attracting) within ``sqrt(2)·bandwidth``. A callable ``metric(A, B)`` must
        return the ``(len(A), len(B))`` array of log-potentials between the rows of ``A`` and
        ``B`` (vectorised; ``-inf`` forbids a pair to share a cluster). ``"precomputed"``: ``X``
        is a symmetric ``(n, n)`` matrix, usually sparse, whose stored entries are ``f(i, j)``;
        every pair not stored has ``f = -repulsion`` (the diagonal is ignored). A sparse
        matrix is swept in time proportional to its stored entries: an update scores the
        clusters its mention has stored pairs with one by one and all the others together
        through their sizes (see Notes), so blocked potentials of millions of records fit.
        With ``"precomputed"``, ``X`` may also be the
        :class:`~sksubsample.cluster.RecordPairs` of
        :func:`~sksubsample.cluster.pairwise_log_potentials`: with the Splink linker's
        comparisons, the fit samples the records model instead of the CRF (each record a
        distorted copy of its entity's latent values, evidence growing with the records, not
        their pairs, an entity's records holding one address or two after a move; Steorts
        2015, Marchant et al. 2021; Gibbs and split-merge updates,
        ``repulsion``, ``method``, ``delta`` and ``first_batch`` unused), see the user guide's
        entity-resolution page; without a linker, the CRF of its proposed pairs.
    bandwidth : float > 0, default 1.0
        Length scale of the ``"euclidean"`` potential.
    repulsion : float >= 0, default 5.0
        ``-f`` of the pairs a sparse ``"precomputed"`` matrix does not store (finite).
    method : {"auto", "racing", "exact"}, default "auto"
        How each Gibbs update is drawn. ``"racing"`` races every cluster too large for a
        race's first round to read whole (more than ``2 m¹`` factors), in every update that
        has one (Racing-Normal with independent arms: error at most ``delta`` per update in
        total variation, Prop. 1, *under the normal approximation of the race*, which a small
        ``first_batch`` can break, see Notes); the other clusters are evaluated exactly.
        ``"exact"`` evaluates every factor. ``"auto"`` races a cluster only when skipping its
        factors in the exact part of the update saves more than racing it costs (what a race
        reads at least before the guard of its normal approximation lets a cluster go) and an
        update only when its clusters' savings exceed a race's fixed cost, at costs timed once
        per machine with the sweeps' kernels on the fit's own potentials and kept in the cost
        cache (fixed rough costs, the same on every machine, for a callable metric or with
        ``SKSUBSAMPLE_MEASURE_COSTS=0``; sparse potentials, whose update reads every stored
        potential of the mention anyway, are never raced); otherwise it is the exact update,
        with the same random draws. Its
        races run on the guarded schedule (a first round of the guard's least sample, 29
        factors, then doubling) instead of App. C.3's (``m¹``, then a tenth of the cluster),
        with the same ``delta`` guarantee (Eq. 27 over its own rounds). The choice depends on
        cluster sizes only, so each update that races has a racing update's law with that
        schedule. ``"auto"`` is about as fast as ``"exact"`` where races cannot pay; with
        Euclidean features that is wherever the raced clusters hold less than about half of
        the mentions, since skipping scattered mentions in the exact pass saves little. All
        run compiled (a callable metric is called back from the compiled sweeps, once per
        update and per race round).
    delta : float in (0, 1), default 0.05
        Error bound of a racing update.
    first_batch : int >= 3, default 3
        ``m¹``, the first subsample of every raced cluster; App. C.3 uses 3 since most
        clusters are small (2 is refused: a standard deviation estimated from two factors
        breaks the normal bound, see Notes). Clusters of at most ``2 m¹`` mentions (with
        sparse input: stored neighbours of the updated mention) are evaluated in full: the
        race's remainder rule would read them whole in its first round. Whatever ``m¹``, a
        race eliminates a cluster only once the guard of its normal approximation trusts the
        sample (at least 29 factors, more when they are skewed), see Notes.
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
    n_draws : int >= 0 or "auto", default 0
        Posterior draws per chain: after its annealing, each chain runs ``n_warmup`` sweeps at
        ``T = 1`` and keeps the partition after each of the next ``n_draws`` sweeps (Gibbs at
        ``T = 1`` leaves ``p(y | x)`` invariant). 0 makes ``fit`` the MAP search alone;
        :meth:`sample_more` draws later from where the chains stopped. ``"auto"``: rounds of
        draws until the log potential and the number of clusters meet the criteria of
        :class:`~sksubsample.BayesianLogisticRegressionMH`'s ``n_draws="auto"``, or a budget
        (``n_draws_`` and ``convergence_`` report the outcome).
    n_warmup : int >= 0, default 0
        Sweeps at ``T = 1`` discarded between the annealing and the first draw.
    n_chains : int >= 1, default 1
        Independent chains, each annealing from singletons with its own random stream
        (``SeedSequence.spawn``); ``labels_`` is the annealed partition of highest
        log-potential among them.
    n_jobs : int or None, default None
        Chains run in parallel through joblib (any backend); the results do not depend on it.
        With the records model, the workers left over by the chains (``n_jobs // n_chains``)
        run each chain's connected components on threads, each group of components with its
        own random stream: the draws do not depend on that either. ``None`` (and no
        ``n_jobs`` set by a ``joblib.parallel_config`` context) runs the chains one after the
        other and each chain's components on one thread per core (``cpu_count // n_chains``),
        as scikit-learn's OpenMP estimators use every core by default.
    random_state : None, int, numpy.random.Generator, SeedSequence or RandomState, default None
    progress : bool or "notebook", default False
        Show a tqdm progress bar over the chains' sweeps.

    Attributes
    ----------
    labels_ : ndarray of int of shape (n_samples,)
        The annealed partition of highest log-potential among the chains (the MAP estimate),
        clusters numbered ``0..n_clusters_-1`` in order of first appearance.
    n_clusters_ : int
    n_evaluations_ : int
        Factors ``f(x_i, x_j)`` evaluated by all Gibbs updates of all chains (annealing,
        warm-up and draws): ``n - 1`` per exact update; per racing update, the factors of the
        exactly evaluated clusters plus what the race read. With a sparse ``"precomputed"``
        matrix both methods count the stored entries they read: an unstored factor is the
        known constant ``-repulsion``, never read (summed by counting cluster members), so an
        exact update counts the stored entries of its row and a race subsamples the stored
        entries of the raced clusters.
    fraction_data_touched_ : float
        ``n_evaluations_`` over what exact updates read in as many sweeps (``n (n - 1)``
        factors per sweep, or twice the stored pairs with sparse input).
    partition_samples_ : ndarray of int32 of shape (n_chains, n_draws, n_samples)
        The posterior draws (partitions, clusters numbered in order of first appearance).
    posterior_names_ : ndarray of str
        ``["log_potential", "n_clusters"]``: the quantity of each draw that the convergence
        diagnostics and :meth:`to_inference_data` follow.
    rhat_, ess_ : ndarray of shape (2,)
        Split R-hat and bulk ESS of those quantities (NaN with fewer than 4 draws).
    temperatures_ : ndarray of shape (n_sweeps,)
        Temperature of each annealing sweep.
    n_evaluations_trace_ : ndarray of shape (n_sweeps,)
        Factors evaluated in each annealing sweep (of the chain that gave ``labels_``, as the
        other traces).
    n_clusters_trace_, n_moves_trace_ : ndarray of shape (n_sweeps,)
        Clusters after, and mentions that changed cluster during, each annealing sweep.
    n_races_trace_ : ndarray of shape (n_sweeps,)
        Updates decided by a race in each annealing sweep (0 with ``method="exact"``; the
        other updates were exact).
    n_guarded_trace_ : ndarray of shape (n_sweeps,)
        Races in each annealing sweep in which the guard of the normal approximation held back
        an elimination that the races' normal bound allowed.
    n_updates_ : int
        Gibbs updates of all chains and sweeps so far (annealing, warm-up, draws).
    n_races_ : int
        Of those, the updates decided by a race.
    n_guarded_ : int
        Races, of all those, in which the guard held back an elimination (see Warns in
        :meth:`fit`).
    labels_trace_ : ndarray of int of shape (n_sweeps, n_samples) or None
        The partition after each annealing sweep (numbered as ``labels_``) when
        ``track_labels=True``.
    n_race_errors_ : int or None
        With ``audit_races=True``, the races of the annealing (out of
        ``n_races_trace_.sum()``) whose winner differs from the exact draw under the same
        perturbations; at most a fraction ``delta`` of them in expectation when the normal
        bound holds.
    log_potential_trace_ : ndarray of shape (n_sweeps,) or None
        ``Σ_{i<j, y_i=y_j} f(x_i, x_j)`` after each annealing sweep (at ``T = 1``), a
        diagnostic that needs no ground truth; None when ``track_log_potential=False``.
    sweep_times_ : ndarray of shape (n_sweeps,)
        Wall time of each annealing sweep in seconds (the trace excluded).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Only when ``X`` has string feature names.

    See Also
    --------
    sksubsample.metrics.b_cubed_score : the mention-averaged B³ score of a clustering.
    sksubsample.algorithms.sample_discrete : the racing discrete sampler of each update.

    Notes
    -----
    ``labels_`` is a MAP search (annealing), the draws (``n_draws``, :meth:`sample_more`)
    are posterior draws at ``T = 1``: :meth:`sample_posterior` returns partitions,
    :meth:`coreference_matrix` the posterior probability that two mentions are the same
    entity. Cluster numbers are arbitrary (label switching), so per-label R-hat or ESS would be
    meaningless: the diagnostics follow each draw's log-potential and number of clusters.

    Where an update races, a race picks a wrong cluster with probability at most ``delta``,
    so every update is within total variation ``delta`` of the exact Gibbs conditional
    (Prop. 1 and 3 with the Racing-Normal bound, Eq. 26-27), *under the normal approximation
    with a standard deviation estimated from the first* ``m¹`` *factors*. App. C.3 "slightly
    abuses" it with ``m¹ = 3``: when a cluster's factors scatter as much as the gaps between
    the candidates' log-probabilities, three factors often underestimate the spread and races
    err more often than ``delta`` (the coreference benchmark page measures this, and
    ``first_batch=10`` brings the error back under ``delta``); on well-separated clusters the
    races are easy and the bound holds. ``audit_races=True`` measures the error rate on the
    data at hand (the guarded schedule of ``"auto"`` estimates it from at least 29). Where
    App. C.3 leaves a choice: the second batch of a raced cluster is
    ``max(1, ceil((|C| - m¹) / 10))`` factors (the appendix's ``(|C| - 3)/10 ∧ 1`` read as a
    lower bound of 1), and δ is split over the ``D - 1`` comparisons with the winner and, by
    Eq. 27, over the rounds before the last.

    A race keeps a cluster whose elimination the bound allows while the guard of the normal
    approximation distrusts the sample (no spread, a mean whose skewness exceeds 1, i.e. fewer
    than ``28 + g₁²`` factors for their skewness ``g₁``, or too heavy tails for the variance
    estimate): with ``m¹ = 3`` a race reads at least 29 factors of a cluster before it can
    drop it. The races so held back are counted in ``n_guarded_``. They cost reads, not
    correctness; when they are more than half of the races (over at least 20), ``fit`` warns
    (see Warns): the factors are far from normal, racing saves less than its schedule
    suggests, and large factors that no subsample has met cannot be detected, so
    ``method="exact"`` may be both faster and safer.

    With a sparse ``"precomputed"`` matrix an update of mention ``i`` costs
    ``O(stored entries of i + log n)``: the clusters ``i`` has stored pairs with (and its
    own) are scored one by one; every other cluster ``C_k`` has log-probability
    ``-repulsion |C_k| / T``, a function of its size, so they enter as one candidate weighted
    by ``Σ_s (c_s - t_s) exp(-repulsion s / T)`` over the counts ``c_s`` of clusters by size
    (``t_s`` of them scored one by one), kept up to date as mentions move. When that
    candidate wins, a size is drawn from a Fenwick tree of the class weights and a cluster of
    that size uniformly: the same conditional as scoring every cluster (its floating-point
    sums are rebuilt from the integer counts at every sweep).

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
    >>> est = CorefGibbsClusterer(n_sweeps=10, n_draws=20, random_state=0).fit(X)
    >>> est.n_clusters_
    3
    >>> est.sample_posterior(5, random_state=0).shape
    (5, 60)
    >>> float(est.coreference_matrix()[0, 1])
    1.0
    """

    _parameter_constraints: ClassVar[dict] = {
        **MCMCEstimator._parameter_constraints,
        "metric": [StrOptions({"euclidean", "precomputed"}), callable],
        "bandwidth": [Interval(Real, 0, None, closed="neither")],
        "repulsion": [Interval(Real, 0, None, closed="left")],
        "method": [StrOptions({"auto", "racing", "exact"})],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "first_batch": [Interval(Integral, 3, None, closed="left")],
        "n_sweeps": [Interval(Integral, 1, _MAX_COUNT, closed="both")],
        "temperature_start": [Interval(Real, 0, None, closed="neither")],
        "temperature_end": [Interval(Real, 0, None, closed="neither")],
        "track_log_potential": ["boolean"],
        "track_labels": ["boolean"],
        "audit_races": ["boolean"],
        "n_draws": [Interval(Integral, 0, _MAX_COUNT, closed="both"), StrOptions({"auto"})],
    }

    def __init__(self, *, metric="euclidean", bandwidth=1.0, repulsion=5.0, method="auto",
                 delta=0.05, first_batch=3, n_sweeps=20, temperature_start=1.0,
                 temperature_end=0.1, track_log_potential=True, track_labels=False,
                 audit_races=False, n_draws=0, n_warmup=0, n_chains=1, n_jobs=None,
                 random_state=None, progress=False):
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
        self.n_draws = n_draws
        self.n_warmup = n_warmup
        self.n_chains = n_chains
        self.n_jobs = n_jobs
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
            X = check_precomputed(X)
            if not np.isfinite(self.repulsion):
                raise ValueError(f"repulsion must be finite, got {self.repulsion!r}")
            return PairPotentials("precomputed", X, repulsion=self.repulsion)
        if callable(self.metric):
            X = validate_data(self, X, dtype=None, ensure_all_finite=False)
            return PairPotentials("callable", X, func=self.metric)
        check_numeric(X, "X")
        X = validate_data(self, X, dtype=np.float64)
        return PairPotentials("euclidean", X, bandwidth=self.bandwidth)

    def _settings(self):
        temperatures = np.geomspace(self.temperature_start, self.temperature_end,
                                    self.n_sweeps)
        return CorefSettings(self.method, float(self.delta), int(self.first_batch),
                             temperatures, bool(self.track_log_potential),
                             bool(self.track_labels), bool(self.audit_races),
                             self.n_chains > 1)

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_interrupt
    def fit(self, X, y=None):
        """Anneal every chain from singletons to a MAP partition, then draw from the posterior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or (n_samples, n_samples)
            Mentions (feature rows), or the log-potential matrix for ``metric="precomputed"``.
        y : Ignored
            Not used, present for scikit-learn's API.

        Returns
        -------
        self : CorefGibbsClusterer
            The fitted estimator.

        Warns
        -----
        sksubsample.diagnostics.ConvergenceWarning
            When several chains' draws have not converged (their log-potentials and numbers of
            clusters; R-hat > 1.01 or bulk ESS < 100 per chain).
        sksubsample.diagnostics.RacingGuardWarning
            When the guard of the races' normal approximation held back more than half of the
            races (over at least 20 races), see Notes.
        """
        if isinstance(X, RecordPairs):
            X = X.checked()
            if self.metric != "precomputed":
                raise ValueError("X: scored record pairs (pairwise_log_potentials) need "
                                 f"metric='precomputed', got metric={self.metric!r}")
            if X.has_records_model:
                return self._fit_records(X)
            X = X.to_sparse()
        self._records = None
        pot = self._potentials(X)
        settings = self._settings()
        per_sweep = pot.indices.size if pot.sparse else pot.n * (pot.n - 1)
        self._pot = pot
        self._n_fit = pot.n
        self.temperatures_ = settings.temperatures
        self._sample(coref_chain, (pot, settings), names=["log_potential", "n_clusters"],
                     n_data=max(per_sweep, 1), continue_fn=coref_continue, data=pot,
                     n_warmup_steps=self.n_sweeps + self.n_warmup, caller_depth=3)
        return self

    def _fit_records(self, X):
        """The records model of scored pairs with the linker's comparisons (see Notes)."""
        model = records_model(X)
        self.n_features_in_ = model.n
        self._records = model
        self._pot = None
        self._n_fit = model.n
        settings = self._settings()
        self.temperatures_ = settings.temperatures
        # An exact update reads, for each comparison, one factor per record of its component.
        per_sweep = (int(np.sum(np.diff(model.cstart) ** 2)) + model.sp_nbr.size
                     ) * model.n_comparisons
        n_threads = _component_threads(self.n_jobs, self.n_chains)
        self._sample(records_chain, (model, settings, n_threads),
                     names=["log_potential", "n_clusters"],
                     n_data=max(per_sweep, 1), continue_fn=records_continue, data=model,
                     n_warmup_steps=self.n_sweeps + self.n_warmup, caller_depth=4)
        return self

    def _after_sampling(self):
        extras = self._latest_extras
        del self._latest_extras  # kept here only until this hook has read it
        # One chain's draws kept as they are (a copy of them cost as long as a few sweeps
        # at 50 000 records).
        partitions = (extras[0].partitions[None] if len(extras) == 1
                      else np.stack([e.partitions for e in extras]))
        if extras[0].annealing is not None:  # fit: the annealing of every chain
            self.partition_samples_ = partitions
            best = max(range(len(extras)),
                       key=lambda c: extras[c].annealing.annealed_log_potential
                       if len(extras) > 1 else 0.0)
            trace = extras[best].annealing
            self.labels_ = trace.annealed_labels
            self.n_clusters_ = int(trace.n_clusters[-1])
            self.n_evaluations_trace_ = trace.n_evaluations
            self.n_clusters_trace_ = trace.n_clusters
            self.n_moves_trace_ = trace.n_moves
            self.n_races_trace_ = trace.n_races
            self.n_guarded_trace_ = trace.n_guarded
            self.n_updates_ = self.n_races_ = self.n_guarded_ = 0
            self.n_race_errors_ = int(trace.n_race_errors.sum()) if self.audit_races else None
            self.labels_trace_ = trace.labels
            self.log_potential_trace_ = trace.log_potential
            self.sweep_times_ = trace.sweep_times
        else:
            self.partition_samples_ = np.concatenate([self.partition_samples_, partitions],
                                                     axis=1)
        n_sweeps = self.n_sweeps + self.n_warmup if extras[0].annealing is not None else 0
        n_sweeps += partitions.shape[1]
        self.n_updates_ += len(extras) * n_sweeps * self._n_fit
        n_races = sum(e.n_races for e in extras)
        n_guarded = sum(e.n_guarded for e in extras)
        self.n_races_ += n_races
        self.n_guarded_ += n_guarded
        check_racing_guard(n_guarded, n_races)

    def _posterior_variables(self):
        return {"log_potential": self._draws[..., 0], "n_clusters": self._draws[..., 1]}

    def sample_posterior(self, n_samples=None, random_state=None):
        """Posterior draws of the partition, the draw axis first.

        Parameters
        ----------
        n_samples : int >= 1 or None, default None
            ``None`` returns every draw of every chain (chain after chain). An int returns that
            many draws picked uniformly from the pooled chains: without replacement when
            ``n_samples`` does not exceed the pool, with replacement otherwise.
        random_state : None, int or numpy.random.Generator, default None
            Randomness of the pick (unused when ``n_samples`` is None).

        Returns
        -------
        ndarray of int of shape (n_samples, n_samples_fit)
            One partition per row, clusters numbered ``0..k-1`` in order of first appearance.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        ValueError
            When no draws were made (``n_draws=0`` and no :meth:`sample_more`).
        """
        check_is_fitted(self)
        pooled = self._pooled_partitions()
        if n_samples is None:
            return pooled.astype(np.int64)
        n_samples = check_int(n_samples, "n_samples", low=1)
        rng = as_generator(random_state)
        replace = n_samples > pooled.shape[0]
        return pooled[rng.choice(pooled.shape[0], size=n_samples, replace=replace)].astype(
            np.int64)

    def _pooled_partitions(self):
        parts = self.partition_samples_
        if parts.shape[1] == 0:
            raise ValueError(
                f"{type(self).__name__} has no posterior draws: fit with n_draws > 0, or "
                "call sample_more(n_draws) to continue the chains at T = 1")
        return parts.reshape(-1, parts.shape[2])

    def coreference_matrix(self, min_probability=0.0):
        """Posterior probability that two mentions are the same entity, over the draws.

        Parameters
        ----------
        min_probability : float in [0, 1), default 0.0
            Pairs whose probability is at most this are not stored (0 keeps every pair that
            shared a cluster in some draw).

        Returns
        -------
        scipy.sparse.csr_matrix of shape (n_samples_fit, n_samples_fit)
            ``P(y_i = y_j | x)`` estimated by the fraction of the pooled draws in which ``i``
            and ``j`` share a cluster; the diagonal is 1.

        Raises
        ------
        ValueError
            When no draws were made.
        """
        check_is_fitted(self)
        if not 0.0 <= min_probability < 1.0:
            raise ValueError(f"min_probability must lie in [0, 1), got {min_probability!r}")
        pooled = self._pooled_partitions()
        n_draws, n = pooled.shape
        counts = sparse.csr_matrix((n, n))
        for labels in pooled:
            incidence = sparse.csr_matrix(
                (np.ones(n), (np.arange(n), labels)), shape=(n, int(labels.max()) + 1))
            counts = counts + incidence @ incidence.T
        probability = (counts / n_draws).tocsr()
        if min_probability > 0.0:
            probability.data[probability.data <= min_probability] = 0.0
            probability.eliminate_zeros()
        return probability

    def cluster_confidence(self):
        """How sure the posterior is of the MAP clustering ``labels_``, cluster by cluster.

        Returns
        -------
        per_record : ndarray of shape (n_samples_fit,)
            For each mention, the posterior probability that its cluster is exactly its
            cluster in ``labels_`` (the same members, no more, no fewer), estimated by the
            fraction of the pooled draws that hold that cluster.
        per_cluster : ndarray of shape (n_clusters,)
            The same probability for each cluster of ``labels_`` (indexed by its label).

        Raises
        ------
        ValueError
            When no draws were made.

        Examples
        --------
        >>> import numpy as np
        >>> from sksubsample.cluster import CorefGibbsClusterer
        >>> rng = np.random.default_rng(0)
        >>> X = np.concatenate([rng.normal(c, 0.1, size=(20, 2)) for c in (0.0, 3.0)])
        >>> est = CorefGibbsClusterer(n_sweeps=10, n_draws=20, random_state=0).fit(X)
        >>> per_record, per_cluster = est.cluster_confidence()
        >>> per_record.shape, per_cluster.tolist()
        ((40,), [1.0, 1.0])
        """
        check_is_fitted(self)
        per_cluster = exact_cluster_probability(self._pooled_partitions(), self.labels_)
        return per_cluster[self.labels_], per_cluster

    def log_potential(self, labels):
        """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of a partition of the fitted mentions.

        Parameters
        ----------
        labels : array-like of int of shape (n_samples_fit,)
            A cluster number for each mention.

        Returns
        -------
        float
            The unnormalised log-probability of the partition at ``T = 1``.
        """
        check_is_fitted(self)
        labels = np.asarray(labels)
        if labels.shape != (self._n_fit,) or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be {self._n_fit} integers (one per fitted mention), "
                             f"got an array of shape {labels.shape} and dtype {labels.dtype}")
        if self._records is not None:
            return labels_log_posterior(self._records, canonical_labels(labels))
        return log_potential(Partition(canonical_labels(labels)), self._pot)


def _component_threads(n_jobs, n_chains):
    """Threads that run each chain's connected components (the records model): the workers
    the chains leave idle, or every core when nothing asks for a number of workers (the
    threads change the draws in no way, only how long a sweep takes)."""
    if n_jobs is None and get_active_backend()[1] is None:
        return max(1, cpu_count() // n_chains)
    return max(1, effective_n_jobs(n_jobs) // n_chains)
