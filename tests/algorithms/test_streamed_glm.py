"""The GLM target of data out of core: its passes, its plan, and the law of its minibatches."""

import itertools
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from sksubsample.algorithms.glm import (
    GLMTarget,
    RankedLeverage,
    StreamedGLMTarget,
    TopLeverage,
)
from sksubsample.algorithms.glm._leverage import merge_top, top_rows
from sksubsample.algorithms.glm._row_stream import RowStream, selected
from sksubsample.algorithms.mh import (
    CallbackTerms,
    PrefetchedMinibatches,
    ShuffledMinibatches,
    minibatch_sum,
    registered,
)
from sksubsample.algorithms.sampling import new_shuffle, table_capacity
from sksubsample.algorithms.stores import RowStore
from tests._stats import assert_chisquare_pmf


class _Signs:
    def __call__(self, y):
        return np.where(y == 1, 1.0, -1.0)


def _problem(rng, n=30_000, d=4, outliers=15, weights=False):
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:outliers] *= 25.0
    theta = rng.standard_normal(d + 1) * 0.5
    design = np.column_stack([X.astype(np.float64), np.ones(n)])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-design @ theta))).astype(np.int8)
    w = rng.integers(0, 3, n).astype(np.float64) if weights else None
    streamed = StreamedGLMTarget(RowStore(X, y, w, response=_Signs()), 10.0, intercept=True)
    in_memory = GLMTarget(design, 2.0 * y - 1.0, 10.0, weights=w)
    return streamed, in_memory, design, y, w


# ----------------------------------------------------------------------------- leverage


def _merged_in_a_tree(parts):
    """The parts merged pairwise, neighbours first (as Dask combines chunks' summaries)."""
    while len(parts) > 1:
        parts = [merge_top(parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k]
                 for k in range(0, len(parts), 2)]
    return parts[0]


@pytest.mark.parametrize("merge", ["in_order", "tree"])
def test_the_top_rows_of_a_pass_rank_like_every_rows_leverage(rng, merge):
    # Many ties (repeated values), blocks of every size, a small capacity: the streamed ranks
    # are those of the stable sort of every row's leverage, exactly, whether the blocks are
    # merged one after the other or in a tree.
    leverage = rng.integers(0, 40, size=5000).astype(np.float64)
    capacity = 300
    parts = [top_rows(np.arange(start, min(leverage.size, start + 701)),
                      leverage[start:start + 701], capacity)
             for start in range(0, leverage.size, 701)]
    if merge == "tree":
        top = _merged_in_a_tree(parts)
    else:
        top = parts[0]
        for part in parts[1:]:
            top = merge_top(top, part)
    assert top.rows.size <= 2 * capacity
    streamed = TopLeverage(top, leverage.max(), leverage.size)
    ranked = RankedLeverage(leverage)
    assert streamed.limit == capacity - 1
    for k in (0, 1, 7, 100, capacity - 1):
        assert streamed.value(k) == ranked.value(k)
        np.testing.assert_array_equal(streamed.top(k), ranked.top(k))
    probe = rng.choice(leverage.size, 400, replace=False)
    true_ranks = ranked.ranks(probe)
    np.testing.assert_array_equal(streamed.ranks(probe), np.minimum(true_ranks, capacity))
    np.testing.assert_array_equal(streamed.strata(50).exact, ranked.strata(50).exact)


# ----------------------------------------------------------------------------- set-up


@pytest.mark.parametrize("weights", [False, True])
def test_newton_reaches_the_map_of_the_whole_data(rng, weights):
    streamed, _, design, y, w = _problem(rng, weights=weights)
    fit = streamed.newton_map(np.zeros(design.shape[1]), temperature=1.0)
    lr = LogisticRegression(C=100.0, fit_intercept=False, solver="newton-cholesky", tol=1e-12,
                            max_iter=1000).fit(design, y, sample_weight=w)
    # The MAP to MAP_TOLERANCE posterior standard deviations (the Laplace precision's norm).
    p = 1.0 / (1.0 + np.exp(-design @ fit.map))
    precision = (design * ((1.0 if w is None else w) * p * (1 - p))[:, None]).T @ design
    precision += np.eye(design.shape[1]) / 10.0**2
    error = fit.map - lr.coef_.ravel()
    assert math.sqrt(error @ precision @ error) <= StreamedGLMTarget.MAP_TOLERANCE
    # ... and the expansion point within CENTER_TOLERANCE of it.
    offset = fit.center - lr.coef_.ravel()
    assert math.sqrt(offset @ precision @ offset) <= StreamedGLMTarget.CENTER_TOLERANCE
    np.testing.assert_array_equal(fit.center, fit.center.astype(np.float32))
    assert fit.last_pass.chol is not None  # the last pass gathered the leverages


def test_the_streamed_expansion_has_the_in_memory_sums_and_plan(rng):
    streamed, in_memory, design, _, _ = _problem(rng)
    fit = streamed.newton_map(np.zeros(design.shape[1]))
    ours = streamed.taylor_expansion(fit.center, n_steps=10_000, last_pass=fit.last_pass)
    theirs = in_memory.taylor_expansion(fit.center, n_steps=10_000)
    np.testing.assert_allclose(ours.grad_sum, theirs.grad_sum, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(ours.hess_sum, theirs.hess_sum, rtol=1e-10)
    assert ours.loglik_sum == pytest.approx(theirs.loglik_sum, rel=1e-12)
    assert (ours.order, ours.strata.exact.size) == (theirs.order, theirs.strata.exact.size)
    np.testing.assert_array_equal(ours.strata.exact, theirs.strata.exact)
    assert ours.strata.sampled is None  # implicit: every other row
    np.testing.assert_array_equal(ours.exact_block.X, design[ours.strata.exact, :-1])
    # The bound's factor is the previous pass's (a Hessian some posterior standard deviations
    # from the expansion point), so its constants differ a little; each is a valid bound for
    # its own factor.
    assert ours.bound.rho == pytest.approx(theirs.bound.rho, rel=5e-2)
    # (compared per Gram matrix in the Frobenius norm: an entry near 0 has no relative scale)
    gaps = np.linalg.norm(ours.bound.grams - theirs.bound.grams, axis=(1, 2))
    assert np.all(gaps <= 5e-2 * np.linalg.norm(theirs.bound.grams, axis=(1, 2)))
    theta, theta_new = fit.center + 0.01, fit.center - 0.02
    idx = np.array([3, 29_999, 15, 15_000])
    np.testing.assert_allclose(ours.residual_terms(theta, theta_new, idx),
                               theirs.residual_terms(theta, theta_new, idx), rtol=1e-9,
                               atol=1e-15)


def test_the_row_streams_passes_sum_every_row(rng):
    streamed, in_memory, design, _, _ = _problem(rng, weights=True)
    fit = streamed.newton_map(np.zeros(design.shape[1]))
    expansion = streamed.taylor_expansion(fit.center, n_steps=10_000,
                                          last_pass=fit.last_pass)
    stream = RowStream(streamed, expansion, [1, 2], 64)
    theirs = in_memory.taylor_expansion(fit.center, n_steps=10_000)
    theta, theta_new = fit.center + 0.003, fit.center - 0.002
    every = np.arange(design.shape[0])
    sampled = np.setdiff1d(every, expansion.strata.exact)
    with stream:
        assert stream.all(theta, theta_new, True) == pytest.approx(
            theirs.residual_terms(theta, theta_new, every).sum(), rel=1e-9, abs=1e-12)
        assert stream.sampled(theta, theta_new, False) == pytest.approx(
            in_memory.loglik_ratio_terms(theta, theta_new, sampled).sum(), rel=1e-12)
        out = np.empty(design.shape[1])
        stream.gradient(theta, out)
        np.testing.assert_allclose(out, in_memory.grad_loglik_sum(theta), rtol=1e-10)


# ----------------------------------------------------------------------------- the law


def _subset_pmf(n, b):
    subsets = list(itertools.combinations(range(n), b))
    return {s: k for k, s in enumerate(subsets)}, np.full(len(subsets), 1.0 / len(subsets))


class _FakeStream:
    """The stream side of PrefetchedMinibatches over ids alone: uniform draws of ``range(n)``
    (or ``draw`` of a generator, for a negative control); a minibatch drawn in one pass is a
    uniform set, recorded in ``selections``."""

    def __init__(self, n, n_slots, seed, draw=None):
        self.n, self.ids = n, np.zeros(n_slots, dtype=np.int64)
        self.filled, self.rng = 0, np.random.default_rng(seed)
        self.draw = draw or (lambda rng, m: rng.integers(0, n, size=m))
        self.selections = []

    def __call__(self, what, *args):
        if what == "selection":
            size = args[2]
            self.selections.append(tuple(sorted(self.rng.choice(self.n, size, replace=False))))
            return 0.0
        assert what == "refill"
        keep_from = args[0]
        kept = self.filled - keep_from
        self.ids[:kept] = self.ids[keep_from:self.filled].copy()
        self.ids[kept:] = self.draw(self.rng, self.ids.size - kept)
        self.filled = self.ids.size
        return self.filled


def _prefetched(stream, handle, n_slots, n_sampled):
    return PrefetchedMinibatches(handle, np.empty(0, dtype=np.int64), n_sampled, stream.ids, 0,
                                 np.zeros(2, dtype=np.int64),
                                 np.empty(table_capacity(n_slots // 4), dtype=np.int64),
                                 np.empty(n_slots, dtype=np.int64))


def _batches(stream, n_slots, n, b, n_batches):
    """``n_batches`` minibatches of ``b`` rows from a PrefetchedMinibatches over ``stream``,
    as the sets of rows the source sums over."""
    seen = stream.selections

    def record(rows, every_row):
        seen.append(tuple(sorted(stream.ids[np.asarray(rows)])))
        return 0.0

    no_theta = np.empty(0)
    with registered(stream) as handle, registered(record) as terms:
        minibatches = _prefetched(stream, handle, n_slots, n)
        source = CallbackTerms(terms)
        for _ in range(n_batches):
            minibatch_sum(minibatches, source, None, no_theta, no_theta, n, b, False)
    return seen


@pytest.mark.parametrize("n_slots", [16, 64])
def test_prefetched_minibatches_are_uniform_sets_of_distinct_rows(n_slots):
    # 6 rows, batches of 3: each of the 20 sets has probability 1/20. Slots of 16 make a
    # minibatch straddle a refill often (its slots are moved to the front).
    n, b, n_batches = 6, 3, 20_000
    index, pmf = _subset_pmf(n, b)
    seen = _batches(_FakeStream(n, n_slots, 11), n_slots, n, b, n_batches)
    assert all(len(set(s)) == b for s in seen)
    assert_chisquare_pmf([index[s] for s in seen], pmf, alpha=1e-4,
                         label="prefetched minibatch sets")


def test_a_biased_stream_fails_the_same_test():
    # Negative control: a stream that draws row 0 twice as often as the others.
    n, b, n_slots = 6, 3, 64
    index, pmf = _subset_pmf(n, b)

    def biased(rng, m):
        return rng.choice(n, size=m, p=np.array([2, 1, 1, 1, 1, 1]) / 7)

    seen = _batches(_FakeStream(n, n_slots, 11, biased), n_slots, n, b, 20_000)
    with pytest.raises(AssertionError, match="chi-square"):
        assert_chisquare_pmf([index[s] for s in seen], pmf, alpha=1e-4)


def test_prefetched_and_shuffled_minibatches_have_the_same_law():
    # The in-memory source draws Fisher-Yates stretches; both give each set probability 1/20.
    n, b, n_batches = 6, 3, 20_000
    index, pmf = _subset_pmf(n, b)
    seen = []

    def record(rows, every_row):
        seen.append(tuple(sorted(np.asarray(rows).tolist())))
        return 0.0

    rng = np.random.default_rng(5)
    no_theta = np.empty(0)
    with registered(record) as terms:
        shuffled = ShuffledMinibatches(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64),
                                       new_shuffle(n), np.empty(n, dtype=np.int64))
        for _ in range(n_batches):
            minibatch_sum(shuffled, CallbackTerms(terms), rng, no_theta, no_theta, n, b, False)
    assert_chisquare_pmf([index[s] for s in seen], pmf, alpha=1e-4, label="shuffled sets")


def test_selection_sampling_takes_uniform_sets():
    # Blocks of 2, 3 and 1 sampled rows; 3 of the 6 rows: each set has probability 1/20.
    index, pmf = _subset_pmf(6, 3)
    rng = np.random.default_rng(3)
    seen = []
    for _ in range(20_000):
        population, needed, taken, offset = 6, 3, [], 0
        for m in (2, 3, 1):
            taken.extend(offset + selected(rng, population, needed, m))
            needed -= len(taken) - (3 - needed)
            population -= m
            offset += m
        assert len(taken) == 3
        seen.append(tuple(sorted(int(t) for t in taken)))
    assert_chisquare_pmf([index[s] for s in seen], pmf, alpha=1e-4, label="selection sets")


def test_the_stream_draws_every_sampled_row_and_no_exact_one(rng):
    streamed, _, design, _, _ = _problem(rng, n=2000)
    fit = streamed.newton_map(np.zeros(design.shape[1]))
    expansion = streamed.taylor_expansion(fit.center, n_steps=10_000,
                                          last_pass=fit.last_pass)
    exact = expansion.strata.exact
    with RowStream(streamed, expansion, [3, 4], 1024) as stream:
        rows = stream.draw_rows(200_000)
    assert not np.isin(rows, exact).any()
    counts = np.bincount(rows, minlength=2000)
    sampled = np.setdiff1d(np.arange(2000), exact)
    assert_chisquare_pmf(np.searchsorted(sampled, rows), np.full(sampled.size, 1.0),
                         alpha=1e-4, label="stream rows")
    assert counts[exact].sum() == 0 and math.isclose(counts.sum(), 200_000)
