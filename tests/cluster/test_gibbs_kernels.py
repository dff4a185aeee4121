"""The compiled Gibbs sweeps: partition storage, the race of an update against
sample_discrete, the racing update against the exact conditional, evaluation counts."""

import copy
import itertools

import numba
import numpy as np
import pytest
from scipy import sparse

from sksubsample.algorithms import CompiledRewards, b_normal_union, sample_discrete
from sksubsample.algorithms.bandits._schedule import arm_target
from sksubsample.algorithms.kernels import (
    GUARDED,
    TENTH,
    fewest_guarded_reads,
    independent_rounds,
    read_only,
)
from sksubsample.cluster import _partition
from sksubsample.cluster._gibbs import Partition, sweep
from sksubsample.cluster._potentials import (
    FeaturePotentials,
    MatrixPotentials,
    PairPotentials,
    StoredPotentials,
    potential,
)
from sksubsample.cluster._precomputed import check_precomputed as _check_precomputed
from sksubsample.cluster._races import (
    ClusterRewards,
    Racer,
    b_table,
    guarded_reads,
    race_clusters,
)
from tests._stats import assert_binomial_rate_at_most

# ------------------------------------------------------------------ partition storage


def _check_partition(part):
    n = part.n
    active = set(part.active_slots().tolist())
    assert active == set(np.flatnonzero(part.size).tolist())
    assert part.size.sum() == n
    free = part.free[:part.meta[_partition.N_FREE]]
    assert set(free.tolist()) == set(range(n)) - active and free.size == n - len(active)
    for k in active:
        members = part.members(k)
        assert np.array_equal(np.sort(members), np.flatnonzero(part.labels == k))
        assert np.array_equal(part.pos[members], np.arange(members.size))
        assert part.start[k] + part.cap[k] <= part.meta[_partition.TOP] <= part.pool.size
    # Blocks of the active slots do not overlap.
    spans = sorted((part.start[k], part.start[k] + part.cap[k]) for k in active)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_partition_storage_survives_growth_and_compaction():
    rng = np.random.default_rng(0)
    n = 60
    part = Partition(rng.integers(0, 5, size=n))
    _check_partition(part)
    first_pool = part.pool.size
    for step in range(3000):
        i = int(rng.integers(n))
        part.remove(i)
        # Mostly join the largest cluster (blocks grow past their capacity), sometimes a new one.
        slots = part.active_slots()
        if rng.random() < 0.1 or slots.size == 0:
            k = part.new_slot()
        elif rng.random() < 0.7:
            k = int(slots[np.argmax(part.size[slots])])
        else:
            k = int(rng.choice(slots))
        part.add(i, k)
        if step % 50 == 0:
            _check_partition(part)
    _check_partition(part)
    assert part.pool.size >= first_pool


# ------------------------------------------------------------------ races


@numba.njit
def _euclidean_factor(data, arm, index):
    X, i, members, mstart, slots, scale = data
    return potential(FeaturePotentials(X, scale), i, members[mstart[slots[arm]] + index])


@numba.njit
def _stored_factor(data, arm, index):
    values, members, mstart = data
    return values[members[mstart[arm] + index]]


@pytest.mark.parametrize("schedule", [TENTH, GUARDED], ids=["tenth", "guarded"])
def test_b_table_is_the_bound_of_sample_discrete(schedule):
    btable, rounds = b_table(0.05, 500, 3, schedule)
    # Raced clusters have more than twice the first round's batch (3, or the guard's 29).
    whole = 2 * (3 if schedule == TENTH else 29)
    assert btable.shape[0] - 1 == 499 // (whole + 1) + 1
    for n_arms in sorted({2, 3, min(17, btable.shape[0] - 1), btable.shape[0] - 1}):
        for t in range(2, btable.shape[1]):
            assert btable[n_arms, t] == b_normal_union(0.05 / (n_arms - 1), t)
    for size in (1, 6, 7, 58, 59, 100, 499):
        assert rounds[size] == independent_rounds(np.array([size]), 3, schedule)


def _targets(n, first_batch, schedule):
    out = [0]
    while out[-1] < n:
        out.append(int(arm_target(len(out), out[-1], n, first_batch, schedule)))
    return out[1:]


def test_guarded_schedule_starts_at_the_guards_least_sample_then_doubles():
    # App. C.3 reads 3, then a tenth of the arm, then doubles; the guarded schedule reads the
    # 29 factors the guard needs before any elimination, then doubles (remainder rule at the
    # end: 928 -> 1856 would leave less than it takes, so the round takes all 2000).
    assert _targets(2000, 3, TENTH) == [3, 203, 406, 812, 2000]
    assert _targets(2000, 3, GUARDED) == [29, 58, 116, 232, 464, 928, 2000]
    assert _targets(2000, 40, GUARDED)[:2] == [40, 80]
    assert _targets(58, 3, GUARDED) == [58]  # read whole: at most twice the first batch
    assert _targets(59, 3, GUARDED) == [29, 59]
    assert fewest_guarded_reads(2000, 3, TENTH) == 203
    assert fewest_guarded_reads(2000, 3, GUARDED) == 29
    assert np.array_equal(guarded_reads(500, 3, GUARDED)[59:], np.full(441, 29))


@pytest.mark.parametrize("kind", ["euclidean", "stored"])
def test_race_of_an_update_is_sample_discrete_with_compiled_rewards(kind):
    """The compiled race draws the same arm, with the same evaluations and random numbers, as
    the public sample_discrete on the same CompiledRewards (per-state factor counts)."""
    rng = np.random.default_rng(0)
    X = read_only(rng.normal(size=(400, 3)))  # (as the estimator holds its potentials)
    members = rng.permutation(400)
    sizes = np.array([0, 120, 60, 30, 9, 150])
    mstart = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    slots = np.arange(sizes.size)
    i = int(members[-1])
    btable, rounds = b_table(0.05, 400, 3)
    values = rng.normal(size=400)
    for seed in range(200):
        log_prior = np.append(3.0 * rng.normal(), np.zeros(sizes.size - 1))
        inv_t = 1.0 / rng.uniform(0.05, 2.0)
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        if kind == "euclidean":
            best, used, ok, _, _ = race_clusters(
                Racer(3, btable, rounds, guarded_reads(400, 3), 0.0, 0.0, 0.0, True),
                ClusterRewards(FeaturePotentials(X, 0.5), i, members, mstart, slots), sizes,
                log_prior, inv_t, ours)
            rewards = CompiledRewards(_euclidean_factor, (X, i, members, mstart, slots, 0.5),
                                      scale=inv_t)
        else:
            best, used, ok, _, _ = race_clusters(
                Racer(3, btable, rounds, guarded_reads(400, 3), 0.0, 0.0, 0.0, True),
                ClusterRewards(StoredPotentials(values), i, members, mstart, slots), sizes,
                log_prior, inv_t, ours)
            rewards = CompiledRewards(_stored_factor, (values, members, mstart), scale=inv_t)
        draw = sample_discrete(rewards, sizes, log_prior, method="racing",
                               variance="independent", first_batch=3, delta=0.05,
                               random_state=theirs)
        assert ok
        assert (best, used) == (draw.sample, draw.n_evaluations)
        assert ours.random() == theirs.random()  # the same random numbers were consumed


def _noisy_clusters(sd, seed=0, sizes=(200, 150, 100, 60, 30), sums=(3.0, 2.0, 1.0, 0.0, 2.5)):
    """Mention 0 against clusters whose factor sums are ``sums`` (close, so that races are not
    trivial) and whose factors scatter with standard deviation ``sd``; arm 0 is the exact
    group (no factors)."""
    rng = np.random.default_rng(seed)
    n = sum(sizes) + 1
    F = np.zeros((n, n))
    sizes = np.asarray(sizes)
    mstart = np.concatenate(([0, 0], np.cumsum(sizes)[:-1]))
    for k, (size, total) in enumerate(zip(sizes, sums, strict=True)):
        noise = rng.normal(0.0, sd, size)
        F[0, 1 + mstart[k + 1]:1 + mstart[k + 1] + size] = noise - noise.mean() + total / size
    # (read-only, as the estimator holds its potentials: the races' kernels compiled once)
    return read_only(F), np.arange(1, n), mstart, np.concatenate(([0], sizes))


def _coupled_errors(F, members, mstart, sizes, first_batch, bound_factor, n_races,
                    schedule=TENTH):
    """Races whose arm differs from the exact argmax under the same Gumbel perturbations (the
    first draws of the race's generator, Eq. 2): the error event of Prop. 3."""
    btable, rounds = b_table(0.05, F.shape[0], first_batch, schedule)
    slots = np.arange(sizes.size)
    exact_sums = np.array([F[0, members[mstart[k]:mstart[k] + sizes[k]]].sum()
                           for k in range(sizes.size)])
    errors = evaluations = 0
    for seed in range(n_races):
        rng = np.random.default_rng(seed)
        gumbel = -np.log(copy.deepcopy(rng).standard_exponential(sizes.size))
        best, used, _, _, _ = race_clusters(
            Racer(first_batch, btable * bound_factor, rounds,
                  guarded_reads(F.shape[0], first_batch, schedule), 0.0, 0.0, 0.0, True,
                  schedule),
            ClusterRewards(MatrixPotentials(F), 0, members, mstart, slots), sizes,
            np.zeros(sizes.size), 1.0, rng)
        errors += best != np.argmax(exact_sums + gumbel)
        evaluations += used
    return errors, evaluations


def test_race_error_rate_is_at_most_delta():
    """Prop. 3 for the race of an update: factors with sd 0.3 around close cluster sums, 3000
    races with m1 = 10; one-sided binomial test of the error rate against delta = 0.05
    (alpha = 0.01). With m1 = 3 the same races err about twice as often as delta: the normal
    bound then rests on a standard deviation estimated from 3 factors (App. C.3's "slight
    abuse"; measured by benchmarks/coref_experiments.py and stated in the estimator's Notes)."""
    F, members, mstart, sizes = _noisy_clusters(sd=0.3)
    errors, evaluations = _coupled_errors(F, members, mstart, sizes, 10, 1.0, 3000)
    assert_binomial_rate_at_most(errors, 3000, 0.05, label="racing update, m1 = 10")
    assert evaluations < 3000 * sizes.sum()  # the races stopped early


def test_negative_control_a_too_small_bound_fails_the_error_test():
    # B / 4 eliminates arms far too early: the same assertion must reject it.
    F, members, mstart, sizes = _noisy_clusters(sd=0.3)
    errors, _ = _coupled_errors(F, members, mstart, sizes, 10, 0.25, 3000)
    with pytest.raises(AssertionError):
        assert_binomial_rate_at_most(errors, 3000, 0.05, label="B / 4")


@pytest.mark.parametrize("sd", [0.05, 0.3])
def test_guarded_schedule_race_error_rate_is_at_most_delta(sd):
    """Prop. 3 for races on the guarded schedule (``method="auto"``'s): the clusters above
    (factor sd 0.05: races stop after about three quarters of the factors; 0.3: nearly all),
    3000 races with m1 = 3, which the guarded schedule's first round raises to the guard's 29
    factors; one-sided binomial test of the error rate against delta = 0.05 (alpha = 0.01).
    Its bound is Eq. 27 over its own rounds, which are more numerous than App. C.3's."""
    F, members, mstart, sizes = _noisy_clusters(sd=sd)
    errors, evaluations = _coupled_errors(F, members, mstart, sizes, 3, 1.0, 3000, GUARDED)
    assert_binomial_rate_at_most(errors, 3000, 0.05, label="guarded schedule, m1 = 3")
    assert evaluations < 3000 * sizes.sum()  # the races stopped early


def test_negative_control_a_too_small_bound_fails_on_the_guarded_schedule():
    F, members, mstart, sizes = _noisy_clusters(sd=0.3)
    errors, _ = _coupled_errors(F, members, mstart, sizes, 3, 0.25, 3000, GUARDED)
    with pytest.raises(AssertionError):
        assert_binomial_rate_at_most(errors, 3000, 0.05, label="guarded, B / 4")


# ------------------------------------------------------------------ racing updates


def _racing_problem(seed=0, n_pairs=0):
    """One mention facing clusters of 60, 40, 25, 8 and 2 members (and ``n_pairs`` more
    clusters of 2 whose sums are -1) and the new cluster. Each cluster's factors are noise
    (sd 0.4) centred so that the cluster sums are chosen log-probabilities, close to each other:
    races are neither trivial nor always exhaustive."""
    rng = np.random.default_rng(seed)
    sizes = [60, 40, 25, 8, 2] + [2] * n_pairs
    sums = np.array([1.0, 0.7, 0.4, -0.2, -0.5] + [-1.0] * n_pairs)
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


def _update_distribution(method, temperature, n_draws, seed, n_pairs=0, first_batch=3):
    F, labels, pmf = _racing_problem(n_pairs=n_pairs)
    n_clusters = pmf.size - 1
    pot = PairPotentials("precomputed", F)
    base = Partition(labels)
    rng = np.random.default_rng(seed)
    out = np.empty(n_draws, dtype=int)
    evaluations = races = 0
    for r in range(n_draws):
        part = copy.deepcopy(base)
        used, _, raced, _, _ = sweep(part, pot, temperature, method, 0.05, first_batch, rng,
                                  order=[0])
        evaluations += used
        races += raced
        slot = part.labels[0]
        # Slots 0..n_clusters - 1 hold the clusters; any other slot is the new cluster.
        out[r] = slot if slot < n_clusters and part.size[slot] > 1 else n_clusters
    return np.bincount(out, minlength=pmf.size) / n_draws, pmf, evaluations, races


def _tv_tolerance(n_cells, n_draws, alpha=0.01):
    """Bretagnolle-Huber-Carol: P(||p_hat - p||_1 >= lam) <= 2^K exp(-n lam^2 / 2)."""
    lam = np.sqrt(2.0 * (n_cells * np.log(2.0) + np.log(1.0 / alpha)) / n_draws)
    return lam / 2.0


def test_racing_update_is_within_delta_of_the_exact_conditional():
    n_draws = 20000
    empirical, pmf, evaluations, races = _update_distribution("racing", 1.0, n_draws, 5)
    assert pmf.max() < 0.4 and pmf.min() > 0.05  # a genuinely random update
    assert races == n_draws
    tv = 0.5 * np.abs(empirical - pmf).sum()
    assert tv <= 0.05 + _tv_tolerance(pmf.size, n_draws), (tv, empirical, pmf)
    # Clusters of more than 2 m1 = 6 members are raced, the one of 2 is read whole: on average
    # the races read less than all 133 factors of the four raced clusters.
    assert 2 * n_draws < evaluations < 135 * n_draws


def test_racing_update_with_a_large_exact_group_is_within_delta():
    # With 30 more clusters of 2 and m1 = 10, the clusters of 8 and 2 and the pairs (read whole,
    # so in the exact group) hold 70 of the 195 other mentions, more than the rough costs'
    # linear fraction: the update reads the group in one pass over the mentions instead of
    # cluster by cluster. Its law must stay within delta of the conditional. (m1 = 10: with
    # m1 = 3 the normal bound rests on standard deviations estimated from 3 factors, and on this
    # problem the update's total variation reaches about 0.1, see the estimator's Notes.)
    n_draws = 20000
    from sksubsample.cluster._sweep_costs import ROUGH_COSTS

    assert 70 > ROUGH_COSTS["linear_fraction"] * 195
    empirical, pmf, evaluations, races = _update_distribution("racing", 1.0, n_draws, 6,
                                                              n_pairs=30, first_batch=10)
    assert races == n_draws
    tv = 0.5 * np.abs(empirical - pmf).sum()
    assert tv <= 0.05 + _tv_tolerance(pmf.size, n_draws), (tv, empirical, pmf)
    # The 70 grouped factors are read every time, the 125 raced ones only in part.
    assert 70 * n_draws < evaluations < 195 * n_draws


def test_negative_control_wrong_conditional_fails_the_delta_test():
    # The exact update at T = 4 samples a flatter conditional, at total variation 0.16 from
    # pmf: its empirical distance exceeds delta + tolerance (0.065) unless the sampling error
    # exceeds the tolerance, which has probability < 0.01. The same assertion must fail.
    n_draws = 20000
    empirical, pmf, evaluations, races = _update_distribution("exact", 4.0, n_draws, 5)
    wrong = pmf ** 0.25 / np.sum(pmf ** 0.25)
    assert 0.5 * np.abs(wrong - pmf).sum() > 0.05 + 2 * _tv_tolerance(pmf.size, n_draws)
    assert races == 0 and evaluations == 135 * n_draws
    tv = 0.5 * np.abs(empirical - pmf).sum()
    assert tv > 0.05 + _tv_tolerance(pmf.size, n_draws)


def _blobs(sizes, seed=0, dim=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 3.0, size=(len(sizes), dim))
    y = np.repeat(np.arange(len(sizes)), sizes)
    return centres[y] + rng.normal(0.0, 0.3, size=(y.size, dim)), y


def test_compiled_sweeps_match_the_numpy_path():
    """The compiled racing sweep and the NumPy path of a callable metric (which races through
    the public sample_discrete) apply the same updates: started from the same partition with
    the same generator, they give the same chain, evaluations and races."""
    X, y = _blobs((150, 90, 40, 12, 5, 3, 1))

    def metric(A, B):
        return 1.0 - ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / 2.0

    compiled = PairPotentials("euclidean", X)
    numpy_path = PairPotentials("callable", X, func=metric)
    start = np.where(np.random.default_rng(1).random(y.size) < 0.2, np.arange(y.size), y)
    for method, temperature in (("racing", 1.0), ("racing", 0.3), ("exact", 1.0)):
        parts = [Partition(start), Partition(start)]
        rngs = [np.random.default_rng(3), np.random.default_rng(3)]
        for _ in range(3):
            a = sweep(parts[0], compiled, temperature, method, 0.05, 3, rngs[0])
            b = sweep(parts[1], numpy_path, temperature, method, 0.05, 3, rngs[1])
            assert a == b
            assert np.array_equal(parts[0].labels, parts[1].labels)
        assert (a[2] > 0) == (method == "racing")


# ------------------------------------------------------------------ evaluation counts


def _groups_matrix(group_sizes, seed=0, cross=0.02):
    """Sparse potentials of record-linkage shape: every pair inside a group stored (attracting),
    a few stored repelling pairs across groups."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(group_sizes)), group_sizes)
    n = y.size
    same = y[:, None] == y[None, :]
    keep = np.triu(same | (rng.random((n, n)) < cross), 1)
    values = np.where(same, rng.uniform(2.0, 6.0, (n, n)), rng.uniform(-6.0, -1.0, (n, n)))
    rows, cols = np.nonzero(keep)
    S = sparse.coo_matrix((values[rows, cols], (rows, cols)), shape=(n, n))
    return _check_precomputed((S + S.T).tocsr()), y


@pytest.mark.parametrize("storage", ["sparse", "dense"])
def test_racing_without_races_is_the_exact_chain(storage):
    """Clusters of at most 2 m1 = 6 members are read whole by a race's first round, so with
    FEBRL-sized entities racing has nothing to race: it runs the exact updates, with the same
    random numbers and counts."""
    group_sizes = np.random.default_rng(2).integers(1, 7, size=150)
    S, y = _groups_matrix(group_sizes)
    pot = (PairPotentials("precomputed", S, repulsion=3.0) if storage == "sparse"
           else PairPotentials("precomputed", S.toarray() - 3.0 * (S.toarray() == 0)))
    runs = {}
    for method in ("exact", "racing"):
        part = Partition(np.arange(y.size))
        rng = np.random.default_rng(0)
        counts = [sweep(part, pot, t, method, 0.05, 3, rng) for t in (1.0, 0.5, 0.2, 0.1)]
        runs[method] = (counts, part.labels.copy())
    assert runs["exact"][0] == runs["racing"][0]
    assert np.array_equal(runs["exact"][1], runs["racing"][1])
    assert all(count.n_races == 0 for count in runs["racing"][0])
    per_sweep = S.nnz if storage == "sparse" else y.size * (y.size - 1)
    assert all(count.n_evaluations == per_sweep for count in runs["exact"][0])


def test_sparse_racing_subsamples_the_stored_neighbours():
    """Large groups with every pair stored: racing reads a fraction of the stored entries that
    an exact sweep reads (each of them once per row), and recovers the groups."""
    S, y = _groups_matrix([300, 200, 120, 5, 3], cross=0.01)
    pot = PairPotentials("precomputed", S, repulsion=3.0)
    part = Partition(y)
    rng = np.random.default_rng(0)
    used, moves, races, _, _ = sweep(part, pot, 1.0, "racing", 0.05, 3, rng)
    # Every member of the three large groups is raced (the others may have too few stored
    # neighbours in any one cluster); nobody leaves its group.
    assert races >= 620 and moves == 0
    assert used < 0.2 * S.nnz
    exact = sweep(Partition(y), pot, 1.0, "exact", 0.05, 3, rng)
    assert exact == (S.nnz, 0, 0, 0, 0)


@pytest.mark.parametrize("method", ["exact", "racing"])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_sweep_refuses_a_non_finite_log_potential(method, bad):
    # The estimator validates its input; the sweep itself must not turn a NaN or +inf factor
    # into a silent draw (a NaN logit would get weight 0 in the softmax).
    F = np.zeros((4, 4))
    F[0, 1] = F[1, 0] = bad
    pot = PairPotentials("precomputed", F)
    part = Partition(np.arange(4))
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        sweep(part, pot, 1.0, method, 0.05, 3, np.random.default_rng(0), order=[0])


# ------------------------------------------------------------------ sparse updates by size class


def _classes_problem(own_size, n_singletons_stored, seed=0):
    """Mention 0 in a cluster of ``own_size`` (itself included) among clusters of sizes 1..8
    (eight of each, so the aggregate of unstored clusters weighs), with stored potentials to
    two of the size-3 clusters, to ``n_singletons_stored`` singletons and to a cluster of 60
    (raced when racing); every other pair unstored. Returns the CSR matrix, the labels, the
    dense potentials it means (repulsion 1) and the original slot of each cluster."""
    rng = np.random.default_rng(seed)
    sizes = [own_size - 1] + [s for s in range(1, 9) for _ in range(8)] + [60]
    labels = np.concatenate([np.repeat(np.arange(len(sizes)), sizes)])
    labels = np.concatenate([[0], labels]) if own_size > 1 else np.concatenate(
        [[len(sizes)], labels])
    n = labels.size
    rows, cols, vals = [], [], []
    def link(j, value):
        rows.extend([0, j])
        cols.extend([j, 0])
        vals.extend([value, value])
    first_of = {k: np.flatnonzero(labels == k) for k in np.unique(labels)}
    size3 = [k for k in first_of if len(first_of[k]) == 3 and k != labels[0]][:2]
    for k, total in zip(size3, (2.0, 0.5), strict=True):
        for j in first_of[k]:
            link(j, total / 3)
    singles = [k for k in first_of if len(first_of[k]) == 1 and k != labels[0]]
    for k in singles[:n_singletons_stored]:
        link(first_of[k][0], 0.2)
    big = len(sizes) - 1
    noise = rng.normal(0.0, 0.3, 60)
    for j, v in zip(first_of[big], noise - noise.mean() + 1.0 / 60, strict=True):
        link(j, v)
    if own_size > 1:
        for j in first_of[0][1:]:
            link(j, 0.4)
    S = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
    S = _check_precomputed(S)
    dense = np.where(S.toarray() != 0, S.toarray(), -1.0)
    np.fill_diagonal(dense, 0.0)
    return S, labels, dense


def _exact_conditional(dense, labels, temperature):
    """The Gibbs conditional of mention 0, by brute force over the clusters of the others."""
    others = np.arange(1, labels.size)
    keys = np.unique(labels[others])
    logits = np.array([dense[0, others[labels[others] == k]].sum() for k in keys] + [0.0])
    logits /= temperature
    pmf = np.exp(logits - logits.max())
    return keys, pmf / pmf.sum()


def _sparse_update_draws(S, labels, method, temperature, n_draws, seed, storage="sparse",
                         dense=None):
    pot = (PairPotentials("precomputed", S, repulsion=1.0) if storage == "sparse"
           else PairPotentials("precomputed", dense))
    keys, _ = _exact_conditional(dense, labels, temperature)
    where = {k: a for a, k in enumerate(keys)}
    base = Partition(labels)
    rng = np.random.default_rng(seed)
    out = np.empty(n_draws, dtype=int)
    races = 0
    for r in range(n_draws):
        part = copy.deepcopy(base)
        races += sweep(part, pot, temperature, method, 0.05, 10, rng, order=[0]).n_races
        slot = part.labels[0]
        others = part.size[slot] - 1
        out[r] = where[slot] if others > 0 and slot in where else keys.size
    return out, races


@pytest.mark.parametrize(("own_size", "n_singletons_stored", "temperature"),
                         [(3, 2, 1.0), (1, 2, 0.7), (3, 7, 1.0)])
def test_sparse_update_draws_the_gibbs_conditional(own_size, n_singletons_stored, temperature):
    """One sparse update, its unstored clusters drawn through the size classes, against the
    brute-force conditional over every cluster (chi-square, 20 000 draws), next to the dense
    sweep of the same potentials (the sweep that scores every cluster). With 7 of the 8
    singletons stored, the scored clusters hold most of the classes' weight, and the update
    sums the others class by class."""
    from tests._stats import assert_chisquare_pmf

    S, labels, dense = _classes_problem(own_size, n_singletons_stored)
    _, pmf = _exact_conditional(dense, labels, temperature)
    keys, _ = _exact_conditional(dense, labels, temperature)
    stored = set(labels[S[0].indices]) | {labels[0]}
    unstored = [a for a, k in enumerate(keys) if k not in stored]
    # A genuinely random update, in which the clusters without stored pairs weigh.
    assert pmf.max() < 0.6 and pmf[unstored].sum() > 0.05 and pmf[-1] > 0.02
    for storage in ("sparse", "dense"):
        draws, _ = _sparse_update_draws(S, labels, "exact", temperature, 20000, 1,
                                        storage=storage, dense=dense)
        assert_chisquare_pmf(draws, pmf, alpha=0.01, label=f"{storage} update")


def test_negative_control_aggregate_ignoring_sizes_fails_the_conditional_test():
    # Drawing an unstored cluster uniformly, whatever its size, is another conditional: the
    # same chi-square test must reject draws from it.
    from tests._stats import assert_chisquare_pmf

    S, labels, dense = _classes_problem(3, 2)
    keys, pmf = _exact_conditional(dense, labels, 1.0)
    others = np.arange(1, labels.size)
    stored = set(labels[S[0].indices]) | {labels[0]}
    wrong = pmf.copy()
    free = [a for a, k in enumerate(keys) if k not in stored]
    wrong[free] = pmf[free].sum() / len(free)
    rng = np.random.default_rng(2)
    draws = rng.choice(pmf.size, size=20000, p=wrong / wrong.sum())
    assert np.abs(wrong - pmf).sum() > 0.05 and len(others) > 0
    with pytest.raises(AssertionError):
        assert_chisquare_pmf(draws, pmf, alpha=0.01, label="uniform over unstored clusters")


def test_sparse_racing_update_is_within_delta_of_the_conditional():
    """The racing path of a sparse update (the cluster of 60 stored neighbours raced, m1 = 10)
    beside the size classes: total variation at most delta from the brute-force conditional."""
    S, labels, dense = _classes_problem(3, 2)
    _, pmf = _exact_conditional(dense, labels, 1.0)
    draws, races = _sparse_update_draws(S, labels, "racing", 1.0, 20000, 3, dense=dense)
    assert races == 20000
    empirical = np.bincount(draws, minlength=pmf.size) / draws.size
    tv = 0.5 * np.abs(empirical - pmf).sum()
    assert tv <= 0.05 + _tv_tolerance(pmf.size, draws.size), tv


def test_size_classes_follow_the_partition_and_draw_by_weight():
    from sksubsample.cluster._size_classes import (
        class_count,
        class_draw,
        class_grow,
        class_shrink,
        size_classes,
    )

    rng = np.random.default_rng(0)
    n = 50
    size = np.bincount(rng.integers(0, 12, size=n), minlength=n).astype(np.int64)
    classes = size_classes(size, 0.7, 1.0 / 0.8)
    for _ in range(2000):  # move one member from a non-empty slot to another slot
        src = int(rng.choice(np.flatnonzero(size)))
        dst = int(rng.choice(np.flatnonzero(np.arange(n) != src)))
        class_shrink(classes, src, size[src])
        size[src] -= 1
        class_grow(classes, dst, size[dst])
        size[dst] += 1
    fresh = size_classes(size, 0.7, 1.0 / 0.8)
    for s in range(n + 1):
        assert class_count(classes, s) == np.count_nonzero(size == s)
        block = classes.by_size[classes.first[s]:classes.first[s + 1]]
        assert np.all(size[block] == s)
    np.testing.assert_allclose(classes.tree, fresh.tree, rtol=1e-9, atol=1e-12)
    # Draws of sizes follow c_s w_s (chi-square over the sizes present).
    from tests._stats import assert_chisquare_pmf

    weights = np.array([class_count(fresh, s) * fresh.weight[s] for s in range(1, n + 1)])
    draws = np.array([class_draw(fresh, u) for u in rng.random(20000)]) - 1
    assert_chisquare_pmf(draws, weights, alpha=0.01, label="class draws")
