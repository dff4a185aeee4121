"""CorefGibbsClusterer: exact Gibbs against the enumerated partition posterior, racing updates
against the exact conditional, annealing, the API and bad input."""

import pickle
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksubsample.cluster import CorefGibbsClusterer
from sksubsample.cluster._gibbs import Partition, sweep
from sksubsample.cluster._potentials import PairPotentials
from sksubsample.cluster._precomputed import check_precomputed as _check_precomputed
from sksubsample.diagnostics import ConvergenceWarning
from sksubsample.metrics import b_cubed_score
from tests._stats import assert_binomial_rate_at_most, assert_chisquare_pmf, meets_auto_criteria


@parametrize_with_checks([CorefGibbsClusterer(random_state=0, n_sweeps=5),
                          CorefGibbsClusterer(random_state=0, n_sweeps=5, method="exact")])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ enumerated posterior


def _partitions(n):
    """Every partition of range(n) as a canonical label tuple (restricted growth strings)."""
    out = []

    def grow(prefix, k):
        if len(prefix) == n:
            out.append(tuple(prefix))
            return
        for label in range(k + 1):
            grow([*prefix, label], max(k, label + 1))

    grow([], 0)
    return out


def _log_potential(labels, F):
    same = np.equal.outer(labels, labels)
    return float(np.sum(np.triu(F * same, 1)))


def _posterior(F, temperature=1.0):
    parts = _partitions(F.shape[0])
    logp = np.array([_log_potential(np.array(p), F) for p in parts]) / temperature
    pmf = np.exp(logp - logp.max())
    return parts, pmf / pmf.sum()


def _random_potentials(n, seed):
    """Symmetric log-potentials mixing attraction and repulsion, so that the posterior spreads
    over many partitions (it is no point mass)."""
    rng = np.random.default_rng(seed)
    F = rng.normal(-0.3, 1.2, size=(n, n))
    F = np.triu(F, 1)
    return F + F.T


def test_enumeration_helper_counts_bell_numbers():
    assert [len(_partitions(n)) for n in range(1, 8)] == [1, 2, 5, 15, 52, 203, 877]


def _sparse_version(F, repulsion=1.0, seed=0):
    """A sparse matrix storing about 60% of the pairs of F, and the dense potentials it means
    (unstored pairs at -repulsion)."""
    rng = np.random.default_rng(seed)
    keep = np.triu(rng.random(F.shape) < 0.6, 1)
    keep = keep | keep.T
    S = sparse.csr_matrix((F[keep], np.nonzero(keep)), shape=F.shape)
    return _check_precomputed(S), np.where(keep, F, -repulsion)


def _potentials(F, storage):
    if storage == "dense":
        return PairPotentials("precomputed", _check_precomputed(F)), F
    S, F_eff = _sparse_version(F)
    return PairPotentials("precomputed", S, repulsion=1.0), F_eff


def _one_sweep_from_posterior(F, kernel_temperature, n_chains, seed, storage="dense",
                              method="exact", first_batch=3, delta=0.05):
    """Start each chain from an exact posterior draw and run one Gibbs sweep.

    A correct kernel leaves the posterior invariant, so the end states are independent draws
    from it whatever the mixing; a kernel for another target moves them away."""
    pot, F_eff = _potentials(F, storage)
    parts, pmf = _posterior(F_eff)
    index = {p: k for k, p in enumerate(parts)}
    rng = np.random.default_rng(seed)
    starts = rng.choice(len(parts), size=n_chains, p=pmf)
    ends = np.empty(n_chains, dtype=int)
    n_races = 0
    for c, s in enumerate(starts):
        part = Partition(np.array(parts[s]))
        n_races += sweep(part, pot, kernel_temperature, method, delta, first_batch, rng)[2]
        ends[c] = index[tuple(part.canonical_labels().tolist())]
    return ends, pmf, parts, n_races


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_exact_sweep_leaves_partition_posterior_invariant(storage):
    F = _random_potentials(6, seed=1)
    ends, pmf, _, _ = _one_sweep_from_posterior(F, 1.0, 20000, seed=2, storage=storage)
    assert_chisquare_pmf(ends, pmf, alpha=0.01, label=f"exact Gibbs sweep, n=6, {storage}")


def test_negative_control_wrong_temperature_fails_invariance():
    # A sweep targeting T = 2 moves the T = 1 posterior: the same test must reject it.
    F = _random_potentials(6, seed=1)
    ends, pmf, _, _ = _one_sweep_from_posterior(F, 2.0, 20000, seed=2)
    with pytest.raises(AssertionError):
        assert_chisquare_pmf(ends, pmf, alpha=0.01, label="T=2 kernel")


def _fit_final_states(F, n_fits, n_sweeps, method):
    parts, pmf = _posterior(F)
    index = {p: k for k, p in enumerate(parts)}
    ends = np.empty(n_fits, dtype=int)
    seeds = np.random.SeedSequence(7).generate_state(n_fits)
    for r in range(n_fits):
        est = CorefGibbsClusterer(metric="precomputed", method=method, n_sweeps=n_sweeps,
                                  temperature_start=1.0, temperature_end=1.0,
                                  track_log_potential=False, random_state=int(seeds[r]))
        est.fit(F)
        ends[r] = index[tuple(est.labels_.tolist())]
    return ends, pmf


def test_fit_at_unit_temperature_samples_the_enumerated_posterior():
    """End to end through the public API: independent fits at T = 1 from singletons; after 10
    sweeps the chain has forgotten its start (n = 5, Bell(5) = 52 partitions)."""
    F = _random_potentials(5, seed=3)
    ends, pmf = _fit_final_states(F, 1500, 10, "exact")
    assert_chisquare_pmf(ends, pmf, alpha=0.01, label="fit(T=1), n=5")


def test_posterior_draws_match_enumeration_with_dependent_draws():
    """The posterior draws of a fit (T = 1 after the annealing); the chain's draws are
    dependent, so the chi-square statistic is compared after thinning by 5 sweeps (n = 4 mixes
    in about one sweep)."""
    F = _random_potentials(4, seed=4)
    parts, pmf = _posterior(F)
    index = {p: k for k, p in enumerate(parts)}
    est = CorefGibbsClusterer(metric="precomputed", method="exact", n_sweeps=5, n_warmup=5,
                              n_draws=10_000, random_state=0).fit(F)
    draws = est.sample_posterior()[::5]
    assert draws.shape == (2000, 4)
    ends = np.array([index[tuple(d.tolist())] for d in draws])
    assert_chisquare_pmf(ends, pmf, alpha=0.01, label="sample_posterior, n=4")


# ------------------------------------------------------------------ racing sweeps


def _heavy_tailed(n_entities=40, largest=400, seed=0):
    """Mentions of entities with power-law sizes (largest / rank^0.79) around N(0, I_8) centres,
    with noise 0.15: the synthetic analogue of the paper's author mentions."""
    rng = np.random.default_rng(seed)
    sizes = np.round(largest * np.arange(1, n_entities + 1) ** -0.79).astype(int)
    y = np.repeat(np.arange(n_entities), sizes)
    X = rng.normal(size=(n_entities, 8))[y] + rng.normal(0.0, 0.15, size=(y.size, 8))
    return X, y


def test_racing_fit_honours_delta_on_heavy_tailed_data():
    """Every race of an annealing run audited against the exact draw with the same Gumbel
    perturbations (Prop. 3): the error rate passes a one-sided binomial test against
    delta = 0.01 (alpha = 0.01) over about 13 000 races. Per-update laws are tested in
    test_gibbs_kernels.py; this is the claim on the updates a fit actually makes."""
    X, _ = _heavy_tailed()
    est = CorefGibbsClusterer(method="racing", n_sweeps=6, delta=0.01, audit_races=True,
                              random_state=0).fit(X)
    races = int(est.n_races_trace_.sum())
    assert races > 0.6 * est.n_sweeps * X.shape[0]
    assert_binomial_rate_at_most(est.n_race_errors_, races, 0.01, label="audited races")


def test_auto_races_honour_delta_on_heavy_tailed_data(monkeypatch):
    """The races of ``method="auto"`` (the guarded schedule), with a cost model of free races
    so that every cluster its first round would not read whole is raced, audited as above:
    one-sided binomial test of the error rate against delta = 0.01 (alpha = 0.01)."""
    from sksubsample.cluster import _sweep_costs

    for key in ("fixed", "per_arm", "read", "read_per_feature", "miss", "miss_per_feature"):
        monkeypatch.setitem(_sweep_costs.ROUGH_COSTS, key, 0.0)
    X, _ = _heavy_tailed()
    est = CorefGibbsClusterer(n_sweeps=6, delta=0.01, audit_races=True, random_state=0).fit(X)
    races = int(est.n_races_trace_.sum())
    assert races > 0.6 * est.n_sweeps * X.shape[0]
    assert_binomial_rate_at_most(est.n_race_errors_, races, 0.01, label="audited auto races")


def test_negative_control_races_without_a_bound_fail_the_audit(monkeypatch):
    # B = 0 and no guard eliminate every arm behind the leader after the first batch: on the
    # same data the same assertion must reject its error rate.
    from sksubsample.cluster import _gibbs

    def unbounded(first_batch, btable, *rest, **options):
        return _gibbs.Racer(first_batch, 0.0 * btable, *rest[:-1], False, **options)

    monkeypatch.setattr(_gibbs, "make_racer", unbounded)
    X, _ = _heavy_tailed()
    est = CorefGibbsClusterer(method="racing", n_sweeps=6, delta=0.01, audit_races=True,
                              random_state=0).fit(X)
    with pytest.raises(AssertionError):
        assert_binomial_rate_at_most(est.n_race_errors_, int(est.n_races_trace_.sum()), 0.01)


# ------------------------------------------------------------------ annealing, API


def _blobs(seed=0, sizes=(40, 25, 10, 3, 1), spread=0.15):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, size=(len(sizes), 3))
    X = np.concatenate([rng.normal(c, spread, size=(s, 3)) for c, s in zip(centers, sizes,
                                                                         strict=True)])
    y = np.repeat(np.arange(len(sizes)), sizes)
    return X, y


@pytest.mark.parametrize("method", ["racing", "exact"])
def test_annealing_recovers_well_separated_entities(method):
    X, y = _blobs()
    est = CorefGibbsClusterer(method=method, n_sweeps=10, random_state=0).fit(X)
    assert b_cubed_score(y, est.labels_)[2] == 1.0
    assert est.n_clusters_ == 5
    assert est.labels_.dtype.kind == "i"
    assert set(est.labels_) == set(range(est.n_clusters_))
    assert est.log_potential_trace_.shape == (10,)
    assert est.log_potential_trace_[-1] == pytest.approx(est.log_potential(est.labels_))
    assert est.n_evaluations_ == est.n_evaluations_trace_.sum()


def test_racing_evaluates_fewer_factors_than_exact():
    X, y = _blobs(sizes=(1000, 500, 200, 5))
    kw = dict(n_sweeps=6, random_state=0, track_labels=True)
    exact = CorefGibbsClusterer(method="exact", **kw).fit(X)
    racing = CorefGibbsClusterer(method="racing", **kw).fit(X)
    n = X.shape[0]
    assert exact.n_evaluations_ == 6 * n * (n - 1)
    assert exact.fraction_data_touched_ == 1.0 and exact.n_races_trace_.sum() == 0
    # From singletons nothing is raced; once the entities have formed every update races.
    assert racing.n_races_trace_[0] < n and np.all(racing.n_races_trace_[2:] == n)
    # A race reads at least 29 factors of a cluster, then a tenth of it, before the guard of
    # its normal approximation lets it go: about a third of the factors here.
    assert racing.n_evaluations_ < 0.4 * exact.n_evaluations_
    assert racing.fraction_data_touched_ == racing.n_evaluations_ / exact.n_evaluations_
    assert b_cubed_score(y, racing.labels_)[2] == b_cubed_score(y, exact.labels_)[2] == 1.0
    for est in (exact, racing):
        assert est.labels_trace_.shape == (6, n)
        assert np.array_equal(est.labels_trace_[-1], est.labels_)
        assert est.n_race_errors_ is None


def test_log_potential_matches_brute_force_for_every_metric():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    labels = rng.integers(0, 3, size=12)
    D2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    F = 1.0 - D2 / (2 * 0.7**2)
    expected = _log_potential(labels, F)
    eu = CorefGibbsClusterer(bandwidth=0.7, n_sweeps=1, random_state=0).fit(X)
    assert eu.log_potential(labels) == pytest.approx(expected)

    def metric(A, B):
        return 1.0 - ((A[:, None] - B[None]) ** 2).sum(-1) / (2 * 0.7**2)

    cal = CorefGibbsClusterer(metric=metric, n_sweeps=1, random_state=0).fit(X)
    assert cal.log_potential(labels) == pytest.approx(expected)
    dense = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, random_state=0).fit(F)
    assert dense.log_potential(labels) == pytest.approx(expected)
    # Sparse: keep the attracting pairs (explicit zeros included); the rest is -repulsion.
    keep = (F >= 0) & ~np.eye(12, dtype=bool)
    S = sparse.csr_matrix((F[keep], np.nonzero(keep)), shape=F.shape)
    F_sparse = np.where(keep, F, -2.5)
    sp = CorefGibbsClusterer(metric="precomputed", repulsion=2.5, n_sweeps=1,
                             random_state=0).fit(S)
    assert sp.log_potential(labels) == pytest.approx(_log_potential(labels, F_sparse))


def test_sparse_and_dense_precomputed_agree_on_separated_entities():
    # The sparse sweep draws its updates with other random numbers than the dense one (it
    # scores the clusters without stored pairs through their sizes), so the chains differ; on
    # well-separated entities both anneal to the truth, with the same log-potential.
    X, y = _blobs(sizes=(15, 10, 5))
    F = 1.0 - ((X[:, None] - X[None]) ** 2).sum(-1) / 2.0
    keep = F > -3.0
    np.fill_diagonal(keep, False)
    S = sparse.coo_matrix((F[keep], np.nonzero(keep)), shape=F.shape)
    dense = np.where(keep, F, -3.0)
    kw = dict(metric="precomputed", method="exact", repulsion=3.0, n_sweeps=6, random_state=4)
    a = CorefGibbsClusterer(**kw).fit(S)
    b = CorefGibbsClusterer(**kw).fit(dense)
    assert b_cubed_score(y, a.labels_)[2] == b_cubed_score(y, b.labels_)[2] == 1.0
    assert a.log_potential_trace_[-1] == pytest.approx(b.log_potential_trace_[-1])


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sparse_sweep_leaves_the_tempered_posterior_invariant(temperature):
    """The annealing's sweeps at T != 1: one sparse sweep from exact draws of the posterior at
    T leaves it invariant (n = 6, every partition enumerated)."""
    F = _random_potentials(6, seed=1)
    S, F_eff = _sparse_version(F)
    pot = PairPotentials("precomputed", S, repulsion=1.0)
    parts, pmf = _posterior(F_eff, temperature)
    index = {p: k for k, p in enumerate(parts)}
    rng = np.random.default_rng(3)
    ends = np.empty(20000, dtype=int)
    for c, start in enumerate(rng.choice(len(parts), size=ends.size, p=pmf)):
        part = Partition(np.array(parts[start]))
        sweep(part, pot, temperature, "exact", 0.05, 3, rng)
        ends[c] = index[tuple(part.canonical_labels().tolist())]
    assert_chisquare_pmf(ends, pmf, alpha=0.01, label=f"sparse sweep, T={temperature}")


def test_results_are_reproducible_and_picklable():
    X, _ = _blobs(sizes=(30, 20))
    a = CorefGibbsClusterer(n_sweeps=3, n_draws=3, random_state=5).fit(X)
    b = pickle.loads(pickle.dumps(a))
    again = CorefGibbsClusterer(n_sweeps=3, n_draws=3, random_state=5).fit(X)
    assert np.array_equal(a.labels_, again.labels_)
    assert np.array_equal(a.sample_posterior(), again.sample_posterior())
    assert np.array_equal(a.sample_posterior(3, random_state=0),
                          b.sample_posterior(3, random_state=0))


def test_cannot_link_minus_inf_is_respected():
    F = np.full((4, 4), 2.0)
    F[0, 1] = F[1, 0] = -np.inf
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=5, n_draws=50,
                              random_state=0).fit(F)
    assert est.labels_[0] != est.labels_[1]
    draws = est.sample_posterior()
    assert np.all(draws[:, 0] != draws[:, 1])


# ------------------------------------------------------------------ bad input


def test_bad_input_raises_before_work():
    with pytest.raises(ValueError, match="square"):
        CorefGibbsClusterer(metric="precomputed").fit(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="symmetric"):
        CorefGibbsClusterer(metric="precomputed").fit(np.array([[0, 1.0], [2.0, 0]]))
    asym = sparse.csr_matrix(([1.0], ([0], [1])), shape=(2, 2))
    with pytest.raises(ValueError, match="symmetric"):
        CorefGibbsClusterer(metric="precomputed").fit(asym)
    with pytest.raises(ValueError, match="NaN"):
        CorefGibbsClusterer(metric="precomputed").fit(np.array([[0, np.nan], [np.nan, 0]]))
    with pytest.raises(ValueError, match="NaN"):
        CorefGibbsClusterer(metric="precomputed").fit(
            sparse.csr_matrix(np.array([[0, np.nan], [np.nan, 0]])))
    with pytest.raises(ValueError, match="bandwidth"):
        CorefGibbsClusterer(bandwidth=0.0).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="bandwidth"):
        CorefGibbsClusterer(bandwidth=-1.0).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="bandwidth"):  # 1 / (2 bandwidth²) overflows
        CorefGibbsClusterer(bandwidth=1e-160).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="0 sample"):
        CorefGibbsClusterer().fit(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="NaN"):
        CorefGibbsClusterer().fit(np.array([[0.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(TypeError, match=r"[Ss]parse"):
        CorefGibbsClusterer().fit(sparse.eye(3, format="csr"))
    with pytest.raises(ValueError, match="method"):
        CorefGibbsClusterer(method="gibbs").fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="delta"):
        CorefGibbsClusterer(delta=1.5).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="metric"):
        CorefGibbsClusterer(metric="cosine").fit(np.zeros((3, 2)))


def test_a_distance_matrix_passed_as_log_potentials_warns():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(6, 2))
    distances = np.linalg.norm(points[:, None] - points[None], axis=2)
    with pytest.warns(UserWarning, match=r"X: every off-diagonal entry.*log-potentials"):
        CorefGibbsClusterer(metric="precomputed", n_sweeps=2, random_state=0).fit(distances)
    # Negative control: log-potentials of both signs fit without that warning.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="X: every off-diagonal")
        CorefGibbsClusterer(metric="precomputed", n_sweeps=2, random_state=0).fit(1.0 - distances)


def test_bad_callable_metric_is_named():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"metric\(A, B\).*NaN"):
        CorefGibbsClusterer(metric=lambda A, B: np.full((len(A), len(B)), np.nan),
                            random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"metric\(A, B\) must return an array of shape"):
        CorefGibbsClusterer(metric=lambda A, B: np.zeros(len(B)), random_state=0).fit(X)


def test_sample_posterior_arguments():
    est = CorefGibbsClusterer(n_sweeps=2, random_state=0)
    with pytest.raises(Exception, match="not fitted"):
        est.sample_posterior(3)
    est.fit(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="no posterior draws"):
        est.sample_posterior(3)
    with pytest.raises(ValueError, match="n_draws"):
        est.sample_more(0)
    assert est.sample_more(3).sample_posterior().shape == (3, 4)
    with pytest.raises(ValueError, match="n_samples"):
        est.sample_posterior(0)
    with pytest.raises(ValueError, match="labels"):
        est.log_potential(np.zeros(3, dtype=int))


# ------------------------------------------------------------------ chains, draws, ArviZ


def test_chains_are_reproducible_whatever_n_jobs_and_accept_random_state():
    X, _ = _blobs(sizes=(30, 20, 5))
    settings = dict(n_sweeps=4, n_draws=6, n_chains=3, random_state=np.random.RandomState(7))
    serial = CorefGibbsClusterer(**settings, n_jobs=1).fit(X)
    settings["random_state"] = np.random.RandomState(7)
    parallel = CorefGibbsClusterer(**settings, n_jobs=2).fit(X)
    np.testing.assert_array_equal(serial.partition_samples_, parallel.partition_samples_)
    np.testing.assert_array_equal(serial.labels_, parallel.labels_)
    assert serial.partition_samples_.shape == (3, 6, X.shape[0])


def test_sample_more_continues_the_chains_as_one_long_fit():
    X, _ = _blobs(sizes=(30, 20, 5))
    whole = CorefGibbsClusterer(n_sweeps=3, n_draws=10, n_chains=2, random_state=3).fit(X)
    part = CorefGibbsClusterer(n_sweeps=3, n_draws=4, n_chains=2, random_state=3).fit(X)
    part.sample_more(6)
    np.testing.assert_array_equal(whole.partition_samples_, part.partition_samples_)
    assert whole.n_evaluations_ == part.n_evaluations_



def test_auto_draws_run_until_converged_as_a_fit_of_that_many_draws():
    """``n_draws="auto"`` on a posterior spread over many partitions (n = 6): the draws meet
    the criteria (bulk and tail ESS of the log potential and the number of clusters >= 400,
    R-hat <= 1.01) and are those of a fit asking for that many, draw for draw."""
    X = _random_potentials(6, seed=5)
    settings = {"metric": "precomputed", "n_sweeps": 3, "n_chains": 2, "random_state": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auto = CorefGibbsClusterer(n_draws="auto", **settings).fit(X)
    assert auto.convergence_["stopped"] == "converged" and auto.n_draws_ >= 1000
    assert meets_auto_criteria(auto._draws)
    fixed = CorefGibbsClusterer(n_draws=auto.n_draws_, **settings).fit(X)
    np.testing.assert_array_equal(auto.partition_samples_, fixed.partition_samples_)

def test_coreference_matrix_matches_the_enumerated_pair_probabilities():
    """P(i ~ j) from the pooled draws of a T = 1 chain against enumeration (n = 5): each pair's
    fraction is a mean of dependent indicators, so its standard error comes from the draws'
    effective sample size; every pair must lie within 4 standard errors."""
    from sksubsample.diagnostics import effective_sample_size

    F = _random_potentials(5, seed=6)
    parts, pmf = _posterior(F)
    exact = np.zeros((5, 5))
    for labels, p in zip(parts, pmf, strict=True):
        labels = np.asarray(labels)
        exact += p * (labels[:, None] == labels[None, :])
    est = CorefGibbsClusterer(metric="precomputed", method="exact", n_sweeps=5, n_warmup=5,
                              n_draws=4000, n_chains=2, random_state=0).fit(F)
    got = est.coreference_matrix().toarray()
    draws = est.partition_samples_
    for i in range(5):
        for j in range(i + 1, 5):
            same = (draws[:, :, i] == draws[:, :, j]).astype(float)
            ess = float(effective_sample_size(same[:, :, None])[0])
            se = np.sqrt(exact[i, j] * (1 - exact[i, j]) / ess)
            assert abs(got[i, j] - exact[i, j]) <= 4 * se + 1e-12, (i, j, got[i, j], exact[i, j])
    np.testing.assert_array_equal(np.diag(got), 1.0)
    # Negative control: the enumerated probabilities of another model are far off.
    other = np.zeros((5, 5))
    parts2, pmf2 = _posterior(_random_potentials(5, seed=7))
    for labels, p in zip(parts2, pmf2, strict=True):
        labels = np.asarray(labels)
        other += p * (labels[:, None] == labels[None, :])
    assert np.max(np.abs(got - other)) > 0.1


def test_to_inference_data_summarises_the_draws():
    az = pytest.importorskip("arviz")
    X, _ = _blobs(sizes=(30, 20, 5))
    est = CorefGibbsClusterer(n_sweeps=3, n_draws=20, n_chains=2, random_state=0).fit(X)
    idata = est.to_inference_data()
    posterior = idata["posterior"] if not hasattr(idata, "posterior") else idata.posterior
    assert posterior["n_clusters"].shape == (2, 20)
    np.testing.assert_allclose(np.asarray(posterior["log_potential"]), est._draws[..., 0])
    counts = [len(np.unique(p)) for p in est.sample_posterior()]
    np.testing.assert_array_equal(np.asarray(posterior["n_clusters"]).reshape(-1), counts)
    stats = idata["sample_stats"] if not hasattr(idata, "sample_stats") else idata.sample_stats
    assert set(stats.data_vars) >= {"n_evaluations", "n_moves", "n_races"}
    summary = az.summary(idata)
    assert set(summary.index) == {"log_potential", "n_clusters"}
