"""CorefGibbsClusterer: exact Gibbs against the enumerated partition posterior, racing updates
against the exact conditional, annealing, the API and bad input."""

import copy
import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksubsample.cluster import CorefGibbsClusterer
from sksubsample.cluster._gibbs import Partition, sweep, update_exact, update_racing
from sksubsample.cluster._potentials import PairPotentials
from sksubsample.metrics import b_cubed_score
from tests._stats import assert_chisquare_pmf


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
    return S, np.where(keep, F, -repulsion)


def _potentials(F, storage):
    if storage == "dense":
        return PairPotentials("precomputed", F), F
    S, F_eff = _sparse_version(F)
    return PairPotentials("precomputed", S, repulsion=1.0), F_eff


def _one_sweep_from_posterior(F, kernel_temperature, n_chains, seed, storage="dense",
                              method="exact", first_batch=3):
    """Start each chain from an exact posterior draw and run one Gibbs sweep.

    A correct kernel leaves the posterior invariant, so the end states are independent draws
    from it whatever the mixing; a kernel for another target moves them away."""
    pot, F_eff = _potentials(F, storage)
    parts, pmf = _posterior(F_eff)
    index = {p: k for k, p in enumerate(parts)}
    rng = np.random.default_rng(seed)
    starts = rng.choice(len(parts), size=n_chains, p=pmf)
    ends = np.empty(n_chains, dtype=int)
    for c, s in enumerate(starts):
        part = Partition(np.array(parts[s]))
        sweep(part, pot, kernel_temperature, method, 0.05, first_batch, rng)
        ends[c] = index[tuple(part.canonical_labels().tolist())]
    return ends, pmf, parts


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_exact_sweep_leaves_partition_posterior_invariant(storage):
    F = _random_potentials(6, seed=1)
    ends, pmf, _ = _one_sweep_from_posterior(F, 1.0, 4000, seed=2, storage=storage)
    assert_chisquare_pmf(ends, pmf, alpha=0.01, label=f"exact Gibbs sweep, n=6, {storage}")


def test_negative_control_wrong_temperature_fails_invariance():
    # A sweep targeting T = 2 moves the T = 1 posterior: the same test must reject it.
    F = _random_potentials(6, seed=1)
    ends, pmf, _ = _one_sweep_from_posterior(F, 2.0, 4000, seed=2)
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


def test_sample_posterior_matches_enumeration_with_dependent_draws():
    """Pooled draws of sample_posterior; the chain's draws are dependent, so the chi-square
    statistic is compared after thinning by 5 sweeps (n = 4 mixes in about one sweep)."""
    F = _random_potentials(4, seed=4)
    parts, pmf = _posterior(F)
    index = {p: k for k, p in enumerate(parts)}
    est = CorefGibbsClusterer(metric="precomputed", method="exact", n_sweeps=5,
                              random_state=0).fit(F)
    draws = est.sample_posterior(2000, n_warmup=5, thin=5, random_state=1)
    ends = np.array([index[tuple(d.tolist())] for d in draws])
    assert_chisquare_pmf(ends, pmf, alpha=0.01, label="sample_posterior, n=4")


# ------------------------------------------------------------------ racing updates


def _racing_problem(seed=0):
    """One mention facing clusters of 60, 40, 25, 8 and 2 members and the new cluster. Each
    cluster's factors are noise (sd 0.4) centred so that the cluster sums are chosen
    log-probabilities, close to each other: races are neither trivial nor always exhaustive."""
    rng = np.random.default_rng(seed)
    sizes = [60, 40, 25, 8, 2]
    sums = np.array([1.0, 0.7, 0.4, -0.2, -0.5])
    labels = np.concatenate([[-1], np.repeat(np.arange(len(sizes)), sizes)])
    n = labels.size
    f0 = np.zeros(n)
    for k, size in enumerate(sizes):
        noise = rng.normal(0.0, 0.4, size)
        f0[1:][labels[1:] == k] = noise - noise.mean() + sums[k] / size
    F = rng.normal(-1.0, 0.3, size=(n, n))
    F = np.triu(F, 1)
    F = F + F.T
    F[0, 1:] = F[1:, 0] = f0[1:]
    labels[0] = 0
    logits = np.append(sums, 0.0)
    pmf = np.exp(logits - logits.max())
    return F, labels, pmf / pmf.sum()


def _update_distribution(update, n_draws, seed):
    F, labels, pmf = _racing_problem()
    pot = PairPotentials("precomputed", F)
    base = Partition(labels)
    rng = np.random.default_rng(seed)
    out = np.empty(n_draws, dtype=int)
    evaluations = 0
    for r in range(n_draws):
        part = copy.deepcopy(base)
        evaluations += update(part, pot, 0, rng)
        slot = part.labels[0]
        # Slots 0..4 hold the five clusters; any other slot is the new cluster.
        out[r] = slot if slot < 5 and part.size[slot] > 1 else 5
    return out, pmf, evaluations


def _tv_tolerance(n_cells, n_draws, alpha=0.01):
    """Bretagnolle-Huber-Carol: P(||p_hat - p||_1 >= lam) <= 2^K exp(-n lam^2 / 2)."""
    lam = np.sqrt(2.0 * (n_cells * np.log(2.0) + np.log(1.0 / alpha)) / n_draws)
    return lam / 2.0


def test_racing_update_is_within_delta_of_the_exact_conditional():
    delta = 0.05
    n_draws = 2000
    out, pmf, evaluations = _update_distribution(
        lambda part, pot, i, rng: update_racing(part, pot, i, 1.0, delta, 3, rng), n_draws, 5)
    assert pmf.max() < 0.4 and pmf.min() > 0.05  # a genuinely random update
    empirical = np.bincount(out, minlength=pmf.size) / n_draws
    tv = 0.5 * np.abs(empirical - pmf).sum()
    assert tv <= delta + _tv_tolerance(pmf.size, n_draws), (tv, empirical, pmf)
    # Close arms are raced nearly to exhaustion here, but never beyond the exact update's
    # n - 1 = 135 factors (savings on separated clusters: test_racing_evaluates_fewer_...).
    assert evaluations <= n_draws * 135


def test_negative_control_wrong_conditional_fails_the_delta_test():
    # The exact update at T = 4 samples a flatter conditional, at total variation 0.16 from
    # pmf: its empirical distance exceeds delta + tolerance (0.097) unless the sampling error
    # exceeds the tolerance, which has probability < 0.01. The same assertion must fail.
    delta = 0.05
    n_draws = 2000
    _, _, pmf = _racing_problem()
    wrong = pmf ** 0.25 / np.sum(pmf ** 0.25)
    assert 0.5 * np.abs(wrong - pmf).sum() > delta + 2 * _tv_tolerance(pmf.size, n_draws)
    out, pmf, _ = _update_distribution(
        lambda part, pot, i, rng: update_exact(part, pot, i, 1 / 4, rng), n_draws, 5)
    empirical = np.bincount(out, minlength=pmf.size) / n_draws
    tv = 0.5 * np.abs(empirical - pmf).sum()
    assert tv > delta + _tv_tolerance(pmf.size, n_draws)


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_racing_sweep_stays_within_its_error_of_the_posterior(storage):
    """Racing sweeps on n = 6 (m1 = 2, so clusters of 3 to 6 are raced) started from the
    posterior. One sweep is 6 updates, each within delta in total variation, so the end state
    is within 6 delta of the posterior (coupling); a chi-square test is not guaranteed under
    such a bias, so the total-variation distance of the number of clusters is bounded."""
    F = _random_potentials(6, seed=1)
    ends, pmf, parts = _one_sweep_from_posterior(F, 1.0, 2000, seed=11, storage=storage,
                                                 method="racing", first_batch=2)
    k_of = np.array([max(p) + 1 for p in parts])
    empirical = np.bincount(k_of[ends], minlength=7)[1:] / ends.size
    exact = np.bincount(k_of, weights=pmf, minlength=7)[1:]
    tv = 0.5 * np.abs(empirical - exact).sum()
    assert tv <= 6 * 0.05 + _tv_tolerance(6, ends.size), (tv, empirical, exact)


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
    X, _ = _blobs(sizes=(120, 80, 40, 5))
    exact = CorefGibbsClusterer(method="exact", n_sweeps=6, random_state=0).fit(X)
    racing = CorefGibbsClusterer(method="racing", n_sweeps=6, random_state=0).fit(X)
    n = X.shape[0]
    assert exact.n_evaluations_ == 6 * n * (n - 1)
    assert exact.fraction_data_touched_ == 1.0
    assert racing.n_evaluations_ < 0.5 * exact.n_evaluations_
    assert np.array_equal(racing.labels_, exact.labels_)


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


def test_sparse_precomputed_gives_the_same_chain_as_dense():
    rng = np.random.default_rng(1)
    X, _ = _blobs(sizes=(15, 10, 5))
    F = 1.0 - ((X[:, None] - X[None]) ** 2).sum(-1) / 2.0
    keep = F > -3.0
    np.fill_diagonal(keep, False)
    S = sparse.coo_matrix((F[keep], np.nonzero(keep)), shape=F.shape)
    dense = np.where(keep, F, -3.0)
    # Exact updates draw one Gumbel vector each, whichever path sums the scores, so the chains
    # coincide (up to rounding in the scores).
    kw = dict(metric="precomputed", method="exact", repulsion=3.0, n_sweeps=4,
              random_state=int(rng.integers(9)))
    a = CorefGibbsClusterer(**kw).fit(S)
    b = CorefGibbsClusterer(**kw).fit(dense)
    assert np.array_equal(a.labels_, b.labels_)
    assert np.allclose(a.log_potential_trace_, b.log_potential_trace_)


def test_results_are_reproducible_and_picklable():
    X, _ = _blobs(sizes=(30, 20))
    a = CorefGibbsClusterer(n_sweeps=3, random_state=5).fit(X)
    b = pickle.loads(pickle.dumps(a))
    assert np.array_equal(a.labels_, CorefGibbsClusterer(n_sweeps=3, random_state=5)
                          .fit(X).labels_)
    assert np.array_equal(a.sample_posterior(3, random_state=0),
                          b.sample_posterior(3, random_state=0))


def test_cannot_link_minus_inf_is_respected():
    F = np.full((4, 4), 2.0)
    F[0, 1] = F[1, 0] = -np.inf
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=5, random_state=0).fit(F)
    assert est.labels_[0] != est.labels_[1]
    draws = est.sample_posterior(50, random_state=0)
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
    with pytest.raises(ValueError, match="n_samples"):
        est.sample_posterior(0)
    with pytest.raises(ValueError, match="thin"):
        est.sample_posterior(2, thin=0)
    with pytest.raises(ValueError, match="labels"):
        est.log_potential(np.zeros(3, dtype=int))
