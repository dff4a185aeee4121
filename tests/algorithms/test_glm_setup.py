"""The GLM target over any rows: its set-up (MAP, leverages, the bound's bins), the same in
memory and in a store, and the law of its chains' minibatches."""

import itertools
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from sksubsample.algorithms.glm import BERNOULLI_LOGIT, GLMTarget, TopLeverage
from sksubsample.algorithms.glm._bins import (
    BinnedGrams,
    binned_rows,
    binning_for,
    bound_grams,
    bound_table,
)
from sksubsample.algorithms.glm._leverage import (
    LeverageScreen,
    leverage_screen,
    merge_top,
    subsample_floor,
    top_rows,
)
from sksubsample.algorithms.glm._map import newton
from sksubsample.algorithms.glm._pass import (
    HESSIAN_STRIPE,
    PassRequest,
    WatchedRows,
    joined_watch,
    pass_sums,
    striped_rows,
)
from sksubsample.algorithms.glm._row_stream import RowStream, selected
from sksubsample.algorithms.glm._setup import (
    START_BYTES,
    START_LANDING,
    START_RATE,
    START_RUN,
    _ranked,
    _start,
    _start_size,
    _subsample,
    hessian_stride,
)
from sksubsample.algorithms.mh import (
    CallbackTerms,
    PrefetchedMinibatches,
    minibatch_sum,
    registered,
    shuffled_minibatches,
)
from sksubsample.algorithms.sampling import table_capacity
from sksubsample.algorithms.stores import RowStore
from tests._stats import assert_chisquare_pmf


class _Signs:
    def __call__(self, y):
        return np.where(y == 1, 1.0, -1.0)


def _problem(rng, n=30_000, d=4, outliers=15, weights=False, tmp_path=None):
    """The same rows as a target in memory and as a target over a memory map (when
    ``tmp_path``) or over the array itself; with the design and labels."""
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:outliers] *= 25.0
    theta = rng.standard_normal(d + 1) * 0.5
    design = np.column_stack([X.astype(np.float64), np.ones(n)])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-design @ theta))).astype(np.int8)
    w = rng.integers(0, 3, n).astype(np.float64) if weights else None
    stored = X
    if tmp_path is not None:
        np.save(tmp_path / "X.npy", X)
        stored = np.load(tmp_path / "X.npy", mmap_mode="r")
    in_store = GLMTarget(RowStore(stored, y, w, response=_Signs()), None, 10.0, intercept=True)
    in_memory = GLMTarget(X, y, 10.0, weights=w, intercept=True, response=_Signs())
    return in_store, in_memory, design, y, w


# ----------------------------------------------------------------------------- leverage


def _merged_in_a_tree(parts):
    """The parts merged pairwise, neighbours first (as Dask combines chunks' summaries)."""
    while len(parts) > 1:
        parts = [merge_top(parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k]
                 for k in range(0, len(parts), 2)]
    return parts[0]


@pytest.mark.parametrize("merge", ["in_order", "tree"])
def test_the_top_rows_of_a_pass_rank_like_every_rows_leverage(rng, merge):
    # Many ties (repeated values), blocks of every size, a small capacity: the ranks are
    # those of the stable sort of every row's leverage, exactly, whether the blocks are
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
    # (more rows kept than ranked: TopLeverage partitions them before it sorts)
    assert capacity < top.rows.size <= 2 * capacity
    ranked = TopLeverage(top, leverage.max(), leverage.size)
    order = np.argsort(-leverage, kind="stable")
    assert ranked.limit == capacity - 1
    for k in (0, 1, 7, 100, capacity - 1):
        assert ranked.value(k) == leverage[order[k]]
        np.testing.assert_array_equal(ranked.top(k), order[:k])
    np.testing.assert_array_equal(ranked.strata(50).exact, np.sort(order[:50]))


@pytest.mark.parametrize("floor", [2.0, 35.0])
def test_a_pass_floor_keeps_the_ranks_or_bounds_the_next(rng, floor):
    # A floor below the capacity-th leverage (2.0: about 4 700 rows above it) changes nothing;
    # one above it (35.0: about 600 rows above) ranks the rows above it and stands, as an
    # upper bound, for the leverage of the next rank.
    leverage = rng.integers(0, 40, size=5000).astype(np.float64)
    capacity = 3000
    parts = [top_rows(np.arange(start, min(leverage.size, start + 701)),
                      leverage[start:start + 701], capacity, floor)
             for start in range(0, leverage.size, 701)]
    top = _merged_in_a_tree(parts)
    ranked = TopLeverage(top, leverage.max(), leverage.size)
    order = np.argsort(-leverage, kind="stable")
    above = int(np.sum(leverage > floor))
    if above >= capacity:
        assert ranked.limit == capacity - 1
    else:
        assert ranked.limit == above
        assert ranked.value(above) == floor >= leverage[order[above]]
    for k in range(0, min(above, capacity), 97):
        assert ranked.value(k) == leverage[order[k]]
        np.testing.assert_array_equal(ranked.top(k), order[:k])


def test_a_subsample_places_the_floor_below_the_capacity_th_leverage(rng):
    leverage = rng.gamma(2.0, 1.0, size=1_000_000)
    sub = leverage[rng.choice(leverage.size, 65_536, replace=False)]
    floor = subsample_floor(sub, leverage.size, 65_537)
    # About FLOOR_MARGIN times the capacity lie above it (binomial spread: a few percent).
    assert 3.5 * 65_537 <= np.sum(leverage > floor) <= 4.5 * 65_537
    # Too few rows for a floor: none.
    assert subsample_floor(sub, 200_000, 65_537) == -np.inf
    assert subsample_floor(sub, sub.size, 65_537) == -np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rank", [1, 4, 12])
def test_a_leverage_screen_bounds_every_rows_leverage(rng, dtype, rank):
    # Correlated columns of unequal scales, and an intercept: the screen's bound, computed in
    # the rows' precision, is at least every row's squared leverage as a pass computes it
    # (single precision raised by its slack). Of rank d - 1 it is the leverage itself (plus,
    # in single precision, a margin for the rounding, large for columns this unequal).
    n, p = 20_000, 12
    mixing = rng.standard_normal((p, p)) * rng.gamma(1.0, 1.0, p)
    X = (rng.standard_normal((n, p)) @ mixing).astype(dtype)
    design = np.column_stack([X.astype(np.float64), np.ones(n)])
    chol = np.linalg.cholesky(design.T @ design / n + 0.1 * np.eye(p + 1))
    inverse = np.linalg.inv(chol)
    exact = np.sum((design @ inverse.T) ** 2, axis=1)
    slack = (1.0 + 2.0**-12) ** 2 if dtype == np.float32 else 1.0
    screen = LeverageScreen.of(inverse, p, True, dtype, rank)
    assert np.all(screen.bound(X, True) >= exact * slack)
    if rank == p and dtype == np.float64:
        np.testing.assert_allclose(screen.bound(X, True), exact, rtol=1e-9)
        # Negative control: a bound a thousandth short falls below rows' leverages.
        short = screen._replace(weights=screen.weights * (1 - 1e-3), rest=screen.rest * 0.999)
        assert np.any(short.bound(X, True) < exact)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("intercept", [True, False])
def test_a_screens_bound_is_the_same_for_every_count_of_rows_and_columns(rng, dtype,
                                                                        intercept):
    # The compiled bound takes four rows and four columns at a time: the rows and columns left
    # over (n and p not multiples of four) give the bound the formula gives in float64, and
    # it stays above every leverage.
    for p in range(7, 14):
        d = p + int(intercept)
        for n in range(10):
            X = (rng.standard_normal((n, p)) * rng.gamma(1.0, 1.0, p)).astype(dtype)
            design = np.column_stack([X.astype(np.float64)] + ([np.ones(n)] if intercept
                                                               else []))
            chol = np.linalg.cholesky(np.eye(d) + 0.5 * np.ones((d, d)))
            inverse = np.linalg.inv(chol)
            screen = LeverageScreen.of(inverse, p, intercept, dtype, 3)
            formula = ((X.astype(np.float64) @ screen.directions.T.astype(np.float64)
                        + screen.shift) ** 2 @ screen.weights
                       + screen.rest * (np.sum(X.astype(np.float64) ** 2, axis=1)
                                        + float(intercept)))
            bound = screen.bound(X, intercept)
            np.testing.assert_allclose(bound, formula, rtol=1e-6)
            assert np.all(bound >= np.sum((design @ inverse.T) ** 2, axis=1))


def test_a_screened_pass_ranks_the_rows_as_every_rows_leverage_does(rng):
    # 600 000 rows of 12 columns, 4 097 rows kept: the screen passes over most rows, and the
    # pass keeps the same rows of largest leverage, with the same values, and the same largest
    # leverage.
    target, _, _, _, _ = _problem(rng, n=600_000, d=12)
    sub = target.store.take(target.start_rows())
    precision = sub.X.T.astype(np.float64) @ sub.X / sub.X.shape[0]
    chol = np.linalg.cholesky(np.pad(precision, (0, 1)) + np.eye(13))
    inverse = np.linalg.inv(chol)
    floor = subsample_floor(np.sqrt(LeverageScreen.of(inverse, 12, True, np.float32, 12)
                                    .bound(sub.X, True)), target.n_data, 4_097)
    screen = leverage_screen(inverse, sub.X, floor, True)
    assert screen is not None
    point = np.zeros(13)
    plain = target.pass_at(point, inverse=inverse, capacity=4_097)
    screened = target.pass_at(point, inverse=inverse, capacity=4_097, floor=floor,
                              screen=screen)
    ours = TopLeverage(screened.top, screened.largest, target.n_data)
    theirs = TopLeverage(plain.top, plain.largest, target.n_data)
    assert ours.limit == theirs.limit == 4_096
    np.testing.assert_array_equal(ours.rows, theirs.rows)
    np.testing.assert_array_equal(ours.leverage, theirs.leverage)
    assert screened.largest == plain.largest


# ----------------------------------------------------------------------------- set-up


def _precision(design, w, theta, prior_scale=10.0):
    p = 1.0 / (1.0 + np.exp(-design @ theta))
    precision = (design * ((1.0 if w is None else w) * p * (1 - p))[:, None]).T @ design
    return precision + np.eye(design.shape[1]) / prior_scale**2


@pytest.mark.parametrize("weights", [False, True])
def test_the_set_up_reaches_the_map_of_the_whole_data(rng, weights):
    target, _, design, y, w = _problem(rng, n=200_000, weights=weights)
    setup = target.set_up()
    lr = LogisticRegression(C=100.0, fit_intercept=False, solver="newton-cholesky", tol=1e-12,
                            max_iter=1000).fit(design, y, sample_weight=w)
    # The MAP to MAP_TOLERANCE posterior standard deviations (the Laplace precision's norm) ...
    precision = _precision(design, w, setup.map)
    error = setup.map - lr.coef_.ravel()
    assert math.sqrt(error @ precision @ error) <= GLMTarget.MAP_TOLERANCE
    # ... and the expansion point within CENTER_TOLERANCE of it, in single precision.
    offset = setup.center - lr.coef_.ravel()
    assert math.sqrt(offset @ precision @ offset) <= GLMTarget.CENTER_TOLERANCE
    np.testing.assert_array_equal(setup.center, setup.center.astype(np.float32))
    # 200 000 rows: a subsample of 1/2^8 starts Newton's method, two passes end it.
    assert setup.n_passes == 2
    # The sums of the last pass are those at the expansion point.
    np.testing.assert_allclose(-setup.sums.hess + np.eye(5) / 100.0,
                               _precision(design, w, setup.center), rtol=1e-10)


def test_a_wide_design_starts_near_enough_to_end_in_two_passes(rng):
    # 600 000 rows of 121 design columns whose linear predictor has unit scale. A start
    # subsample of a sixteenth of the rows (the share alone) is predicted to end its step
    # START_RATE d (N / m - 1) / sqrt(N) = 0.58 posterior standard deviations from the MAP,
    # past CENTER_TOLERANCE (at 10^6 rows of 100 columns it ended at 0.63, and a third pass over
    # the rows followed); the start subsample sized for START_LANDING ends it in two passes.
    n, d = 600_000, 120
    X = rng.standard_normal((n, d)).astype(np.float32)
    theta = rng.standard_normal(d + 1) / math.sqrt(d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ theta[:d] + theta[d])))).astype(np.int8)
    target = GLMTarget(X, y, 10.0, intercept=True, response=_Signs())

    def landing(m):
        return START_RATE * (d + 1) * (n / m - 1.0) / math.sqrt(n)

    assert landing(1 << 16) > GLMTarget.CENTER_TOLERANCE  # (the share alone: 2^16 rows)
    m = target.start_rows().size
    assert landing(m) <= START_LANDING
    setup = target.set_up()
    assert setup.n_passes == 2
    offset = setup.center - setup.map
    assert math.sqrt(offset @ setup.precision @ offset) <= GLMTarget.CENTER_TOLERANCE


def test_the_start_subsample_grows_for_the_landing_within_its_memory():
    # d = 20 keeps its share (a sixteenth, a power of two) up to 10^8 rows; 10^6 rows of 101
    # columns take a quarter (the landing); a design so wide that the landing would hold
    # nearly every row in memory keeps its share instead (START_BYTES), as before the rule.
    assert _start_size(10**7, 21, 80) == 1 << 19
    assert _start_size(10**8, 21, 80) == 1 << 20
    assert _start_size(10**6, 101, 400) == 1 << 18
    assert _start_size(10**6, 3001, 12_000) == 1 << 16
    assert (1 << 16) * 12_000 > START_BYTES  # (the share alone is past the budget there)


def test_a_first_pass_with_the_hessian_of_some_stripes_still_ends_in_two(rng):
    # 2.1 million rows: the first pass sums its Hessian over one stripe in eight; the step
    # from the subsample's MAP still ends within CENTER_TOLERANCE of the MAP, and the MAP is
    # known to MAP_TOLERANCE after the second pass (whose Hessian is every row's).
    target, _, design, y, _ = _problem(rng, n=2_100_000)
    scale = target.n_data / target.start_rows().size
    assert hessian_stride(target.n_data, target.n_features, scale) == 8
    setup = target.set_up()
    lr = LogisticRegression(C=100.0, fit_intercept=False, solver="newton-cholesky", tol=1e-12,
                            max_iter=1000).fit(design, y)
    precision = _precision(design, None, setup.map)
    error = setup.map - lr.coef_.ravel()
    assert math.sqrt(error @ precision @ error) <= GLMTarget.MAP_TOLERANCE
    offset = setup.center - lr.coef_.ravel()
    assert math.sqrt(offset @ precision @ offset) <= GLMTarget.CENTER_TOLERANCE
    assert setup.n_passes == 2
    np.testing.assert_allclose(-setup.sums.hess + np.eye(5) / 100.0,
                               _precision(design, None, setup.center), rtol=1e-10)


@pytest.mark.parametrize("stride", [1, 4])
def test_a_pass_sums_the_hessian_of_its_stripes(rng, stride):
    # The rows of one stripe in ``stride`` (counted from row 0), whatever the read units.
    target, _, design, _, _ = _problem(rng, n=300_001)
    point = rng.standard_normal(5) * 0.3
    sums = target.pass_at(point, hessian_stride=stride)
    inside = (np.arange(design.shape[0]) // HESSIAN_STRIPE) % stride == 0
    assert striped_rows(design.shape[0], stride) == inside.sum()
    p = 1.0 / (1.0 + np.exp(-design[inside] @ point))
    expected = -(design[inside].T * (p * (1 - p))) @ design[inside]
    # (summed from float32 rows in single precision: a Newton step's Hessian)
    np.testing.assert_allclose(sums.hess, expected, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(sums.grad, target.pass_at(point).grad, rtol=1e-12)


def test_the_start_subsamples_map_through_nested_subsamples(rng):
    # 3 million rows: a start subsample of 2^17 rows, reached from nested subsamples of 2^14
    # and 2^16 of its rows (the first runs drawn) by one Newton step each; its MAP is that of
    # Newton's method run to convergence on the whole start subsample, to a few hundredths of
    # a standard deviation of its own posterior.
    target, _, _, _, _ = _problem(rng, n=3_000_000)
    sub, scale, runs = _subsample(target)
    start, levels = _start(target, sub, runs, 1.0)
    assert [block.X.shape[0] for block, _ in levels] == [1 << 14, 1 << 16, 1 << 17]
    rows = [{row.tobytes() for row in block.X} for block, _ in levels]
    assert rows[0] <= rows[1] <= rows[2]
    # Each nested subsample is a prefix of the start subsample (a view), of its first runs
    # drawn.
    X = np.asarray(target.store.X)
    for block, _ in levels[:-1]:
        assert np.shares_memory(block.X, sub.X)
        first = np.sort(runs[:block.X.shape[0] // START_RUN])
        drawn = (first[:, None] * START_RUN + np.arange(START_RUN)).ravel()
        np.testing.assert_array_equal(np.sort(block.X, axis=0), np.sort(X[drawn], axis=0))
    exact = newton(lambda at, _: pass_sums(sub, PassRequest(at, BERNOULLI_LOGIT, True)),
                   np.zeros(5), target.prior_precision, scale=scale, tol=1e-9)
    error = start.map - exact.map
    assert math.sqrt(error @ exact.precision @ error) <= 0.05
    # Negative control: the smallest subsample's MAP is far from it.
    small, small_scale = levels[0]
    first = newton(lambda at, _: pass_sums(small, PassRequest(at, BERNOULLI_LOGIT, True)),
                   np.zeros(5), target.prior_precision, scale=small_scale, tol=1e-9)
    error = first.map - exact.map
    assert math.sqrt(error @ exact.precision @ error) > 1.0


def test_the_same_rows_in_memory_and_in_a_memory_map_set_up_alike(rng, tmp_path):
    stored, in_memory, design, _, _ = _problem(rng, n=100_000, weights=True,
                                               tmp_path=tmp_path)
    ours, theirs = stored.set_up(), in_memory.set_up()
    for a, b in zip(ours, theirs, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(ours.sums.binned, theirs.sums.binned, strict=True):
        np.testing.assert_array_equal(a, b)
    ours_x = stored.taylor_expansion(ours.center, n_steps=10_000, setup=ours)
    theirs_x = in_memory.taylor_expansion(theirs.center, n_steps=10_000, setup=theirs)
    assert ours_x.plan == theirs_x.plan
    np.testing.assert_array_equal(ours_x.strata.exact, theirs_x.strata.exact)
    assert ours_x.strata.sampled is None  # implicit in a store: every other row
    for a, b in zip(ours_x.bound, theirs_x.bound, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours_x.exact_block.X, design[ours_x.strata.exact, :-1])
    theta, theta_new = ours.center + 0.01, ours.center - 0.02
    idx = np.array([3, 99_999, 15, 15_000])
    np.testing.assert_allclose(ours_x.residual_terms(theta, theta_new, idx),
                               theirs_x.residual_terms(theta, theta_new, idx), rtol=1e-9,
                               atol=1e-15)


# ----------------------------------------------------------------------------- the bound


def _exact_bound_grams(design, z, w, order, radii):
    """``sum_i M_i(R)² ω_i² x_i x_iᵀ`` with every row's own weight (and the global bound)."""
    out = []
    for radius in (*radii, math.inf):
        m = BERNOULLI_LOGIT.local_derivative_bound(order + 1, z, radius) ** 2
        m = m if w is None else m * w**2
        out.append((design.T * m) @ design)
    return np.array(out)


def _binned(design, z, w, binning):
    """The bins a pass sums, summed here row by row in NumPy."""
    phi = np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))) ** 2
    base = phi if w is None else phi * w**2
    scaled = np.abs(z) * binning.scale
    bins = np.where(scaled < binning.n_bins, np.floor(scaled), binning.n_bins).astype(int)
    grams = np.zeros((binning.n_bins + 1, design.shape[1], design.shape[1]))
    for b in np.unique(bins):
        rows = bins == b
        grams[b] = (design[rows].T * base[rows]) @ design[rows]
    far = bins == binning.n_bins
    plain = (design[far].T * (1.0 if w is None else w[far] ** 2)) @ design[far]
    return BinnedGrams.of_dense(grams, plain)


def _smallest_eigenvalue_share(a, b):
    """The smallest eigenvalue of ``a - b`` relative to ``b``'s largest."""
    return np.linalg.eigvalsh(a - b)[0] / np.linalg.eigvalsh(b)[-1]


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("weights", [False, True])
def test_the_bins_bound_every_rows_weight_and_little_more(rng, order, weights):
    n, d = 20_000, 4
    design = np.column_stack([rng.standard_normal((n, d)) * rng.gamma(1.0, 1.0, (n, 1)),
                              np.ones(n)])
    z = design @ rng.standard_normal(d + 1) * 2.0
    z[:50] = 40.0 + rng.random(50)  # far rows
    w = rng.integers(0, 4, n).astype(np.float64) if weights else None
    binning = binning_for(d + 1)
    radii = np.array([0.01, 0.1, 0.5, 2.0])
    table = bound_table(BERNOULLI_LOGIT, order, radii, binning)
    binned = _binned(design, z, w, binning)
    ours = bound_grams(binned, table)
    exact = _exact_bound_grams(design, z, w, order, radii)
    for a, b in zip(ours, exact, strict=True):
        # A valid bound (a - b positive semi-definite, up to rounding) ...
        assert _smallest_eigenvalue_share(a, b) >= -1e-12
        # ... at most e^(2 / scale) looser than every row's own weight.
        assert _smallest_eigenvalue_share(math.exp(2.0 / binning.scale) * b, a) >= -1e-12
    # Some rows' share of the bins is what removing them removes, for every radius (far rows
    # among them, and the row of largest |z| short of them).
    rows = np.concatenate([np.arange(0, n, 7), [int(np.argmax(np.abs(z[50:]))) + 50]])
    share = binned_rows(design[rows], z[rows], None if w is None else w[rows] ** 2, binning)
    np.testing.assert_array_equal(share.bins, np.unique(np.minimum(
        np.floor(np.abs(z[rows]) * binning.scale), binning.n_bins)))
    kept = np.setdiff1d(np.arange(n), rows)
    remaining = _binned(design[kept], z[kept], None if w is None else w[kept], binning)
    removed = ours - bound_grams(share, table)
    np.testing.assert_allclose(removed, bound_grams(remaining, table), rtol=1e-9,
                               atol=1e-9 * np.abs(ours).max())
    # (negative control: the share of the rows in the bins of their neighbours is not it)
    shifted = binned_rows(design[rows], z[rows] + 1.0 / binning.scale,
                          None if w is None else w[rows] ** 2, binning)
    assert not np.allclose(ours - bound_grams(shifted, table), bound_grams(remaining, table),
                           rtol=1e-9, atol=1e-9 * np.abs(ours).max())


def test_a_bin_ratio_at_the_far_edge_fails_to_bound(rng):
    # Negative control: each bin's envelope read at its upper edge (not its lower one) is
    # too small for the rows near the lower edge; the check above catches it.
    n, d = 20_000, 4
    design = np.column_stack([rng.standard_normal((n, d)), np.ones(n)])
    z = design @ rng.standard_normal(d + 1) * 2.0
    binning = binning_for(d + 1)
    radii = np.array([0.01, 0.1])
    table = bound_table(BERNOULLI_LOGIT, 2, radii, binning)
    cells = (np.arange(binning.n_bins) + 1.0) / binning.scale
    upper = [BERNOULLI_LOGIT.local_derivative_bound(3, cells, r) ** 2
             / (np.exp(-cells) / (1.0 + np.exp(-cells)) ** 2) for r in (*radii, math.inf)]
    wrong = table._replace(ratios=np.array(upper))
    ours = bound_grams(_binned(design, z, None, binning), wrong)
    exact = _exact_bound_grams(design, z, None, 2, radii)
    assert min(_smallest_eigenvalue_share(a, b) for a, b in zip(ours, exact,
                                                                 strict=True)) < -1e-6


def test_the_row_streams_passes_sum_every_row(rng):
    stored, in_memory, design, _, _ = _problem(rng, weights=True)
    setup = stored.set_up()
    expansion = stored.taylor_expansion(setup.center, n_steps=10_000, setup=setup)
    stream = RowStream(stored, expansion, [1, 2], 64)
    theirs = in_memory.taylor_expansion(setup.center, n_steps=10_000, setup=in_memory.set_up())
    theta, theta_new = setup.center + 0.003, setup.center - 0.002
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


def _shuffled_sets(exact, n, n_sampled, b, n_batches, seed):
    """The sorted row sets of ``n_batches`` minibatches of ``b`` rows that the in-memory source
    (strata ``exact`` among ``n`` rows, ``n_sampled`` outside them) draws."""
    seen = []

    def record(rows, every_row):
        seen.append(tuple(sorted(np.asarray(rows).tolist())))
        return 0.0

    rng = np.random.default_rng(seed)
    no_theta = np.empty(0)
    with registered(record) as terms:
        shuffled = shuffled_minibatches(exact, n)
        for _ in range(n_batches):
            minibatch_sum(shuffled, CallbackTerms(terms), rng, no_theta, no_theta, n_sampled, b,
                          False)
    return seen


def test_prefetched_and_shuffled_minibatches_have_the_same_law():
    # The in-memory source draws Fisher-Yates stretches; both give each set probability 1/20.
    n, b, n_batches = 6, 3, 20_000
    index, pmf = _subset_pmf(n, b)
    seen = _shuffled_sets(np.empty(0, dtype=np.int64), n, n, b, n_batches, seed=5)
    assert_chisquare_pmf([index[s] for s in seen], pmf, alpha=1e-4, label="shuffled sets")


def test_shuffled_minibatches_draw_the_rows_outside_the_exact_stratum():
    # 8 rows, rows 1, 4 and 5 summed exactly: minibatches of 2 of the other 5 rows, each of the
    # 10 sets with probability 1/10 (the sampled stratum is implicit, mapped by a search).
    exact, n, b = np.array([1, 4, 5]), 8, 2
    sampled = [0, 2, 3, 6, 7]
    subsets = list(itertools.combinations(sampled, b))
    index = {sub: k for k, sub in enumerate(subsets)}
    seen = _shuffled_sets(exact, n, 5, b, 20_000, seed=6)
    assert all(s in index for s in seen)
    assert_chisquare_pmf([index[s] for s in seen], np.full(len(subsets), 1.0 / len(subsets)),
                         alpha=1e-4, label="sets outside the exact stratum")


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
    stored, *_ = _problem(rng, n=2000)
    setup = stored.set_up()
    expansion = stored.taylor_expansion(setup.center, n_steps=10_000, setup=setup)
    exact = expansion.strata.exact
    with RowStream(stored, expansion, [3, 4], 1024) as stream:
        rows = stream.draw_rows(200_000)
    assert not np.isin(rows, exact).any()
    counts = np.bincount(rows, minlength=2000)
    sampled = np.setdiff1d(np.arange(2000), exact)
    assert_chisquare_pmf(np.searchsorted(sampled, rows), np.full(sampled.size, 1.0),
                         alpha=1e-4, label="stream rows")
    assert counts[exact].sum() == 0 and math.isclose(counts.sum(), 200_000)


@pytest.mark.parametrize("batch_rows", [1 << 18, 700])
def test_a_minibatch_drawn_in_one_pass_sums_the_rows_a_scan_would(tmp_path, monkeypatch,
                                                                  batch_rows):
    # The rows of a minibatch too large for the buffer are chosen without reading any (block
    # by block, as a scan meets them) and gathered, in batches: the same rows and the same sum,
    # bit for bit, as a scan reading every block and drawing from each in turn (the law of
    # that scan: test_selection_sampling_takes_uniform_sets).
    import copy

    from sksubsample.algorithms.glm import _row_stream
    from sksubsample.algorithms.glm._chain_sums import rows_sum
    from sksubsample.algorithms.stores import RowStore

    monkeypatch.setattr(_row_stream, "_SELECTION_ROWS", batch_rows)
    rng = np.random.default_rng(8)
    n, d = 20_000, 64  # blocks of 4 096 rows
    np.save(tmp_path / "X.npy", rng.normal(size=(n, d)).astype(np.float32))
    store = RowStore(np.load(tmp_path / "X.npy", mmap_mode="r"),
                     np.where(rng.random(n) < 0.5, 1.0, -1.0))
    target = GLMTarget(store, None, 1.0)
    theta = rng.normal(size=target.n_features) * 0.05
    theta_new = theta + rng.normal(size=target.n_features) * 0.01
    stream = RowStream(target, None, [3], 64)
    scan_rng = copy.deepcopy(stream.selection_rng)
    total = stream.selection(theta, theta_new, 2_500, False)
    stream.close()
    expected, population, needed, n_blocks = 0.0, n, 2_500, 0
    for block in store.blocks():
        m = block.X.shape[0]
        chosen = selected(scan_rng, population, needed, m)
        if chosen.size:
            expected += rows_sum(block.X, target.intercept, block.y, block.w, theta, theta_new,
                                 stream.reference, target.family, stream.order, False, chosen)
        population, needed, n_blocks = population - m, needed - chosen.size, n_blocks + 1
    assert needed == 0 and n_blocks > 3
    assert total == expected


@pytest.mark.parametrize("weighted", [True, False])
def test_watched_rows_are_put_in_rank_order_from_the_passs_parts(rng, weighted):
    # A pass hands on the watched rows in parts (one per read unit, an empty one included);
    # ranked, they are the rows joined then ordered by rank, field by field; a subset of the
    # rows ranked takes the other path to the same answer.
    rows = np.sort(rng.choice(10_000, 500, replace=False))
    pieces = np.split(np.arange(500), np.sort(rng.choice(np.arange(1, 500), 6, replace=False)))
    parts = [WatchedRows(rows[i], rng.standard_normal((i.size, 5)), rng.standard_normal(i.size),
                         rng.choice([-1.0, 1.0], i.size),
                         rng.random(i.size) if weighted else None)
             for i in [*pieces, np.arange(0)]]
    joined = joined_watch(parts)
    for ranked in (rng.permutation(rows), rng.permutation(rows)[:300]):
        position = np.searchsorted(joined.rows, ranked)
        for got, want in zip(_ranked(parts, ranked), joined, strict=True):
            assert (got is None) == (want is None)
            if got is not None:
                np.testing.assert_array_equal(got, want[position])
        # (the negative control: the rows in row order are not in rank order)
        assert not np.array_equal(_ranked(parts, ranked).rows, np.sort(ranked))
