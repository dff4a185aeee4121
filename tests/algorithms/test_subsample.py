"""The index samplers: the shuffle of the subsampled MH tests and lil'UCB (and of the
independent-arms race), and the sorted batches of shared races."""

from itertools import combinations

import numba
import numpy as np
import pytest

from sksubsample.algorithms.sampling import (
    IndexSampler,
    MultiIndexSampler,
    below,
    bounded,
    clear_marks,
    draw_unmarked,
    lemire_threshold,
    multiply_shift,
    splitmix64,
    take_unmarked,
)
from tests._stats import assert_chisquare_pmf


def test_index_batches_are_uniform_subsets_of_the_unused_indices():
    # Each index of a 30-element population must be equally likely to be in the second and
    # third batches (chi-square on inclusion counts), and batches never repeat an index.
    rng = np.random.default_rng(21)
    counts2, counts3 = np.zeros(30, dtype=int), np.zeros(30, dtype=int)
    n_reps = 4000
    for _ in range(n_reps):
        sampler = IndexSampler(30, rng)
        first, second, third = sampler.draw(3), sampler.draw(5), sampler.draw(16)
        assert np.unique(np.concatenate([first, second, third])).size == 24
        counts2[second] += 1
        counts3[third] += 1
    samples2 = np.repeat(np.arange(30), counts2)
    samples3 = np.repeat(np.arange(30), counts3)
    assert_chisquare_pmf(samples2, np.full(30, 1 / 30), label="second batch")
    assert_chisquare_pmf(samples3, np.full(30, 1 / 30), label="third batch")


def test_first_batch_is_uniform_and_ordered_pairs_are_exchangeable():
    # Inclusion counts of a first batch must be uniform, and a batch of 2 must be uniform over
    # all 90 ordered pairs of 10 (a batch is a random subset in random order).
    rng = np.random.default_rng(22)
    counts = np.zeros(30, dtype=int)
    pairs = np.zeros((10, 10), dtype=int)
    for _ in range(9000):
        counts[IndexSampler(30, rng).draw(4)] += 1
        i, j = IndexSampler(10, rng).draw(2)
        pairs[i, j] += 1
    assert_chisquare_pmf(np.repeat(np.arange(30), counts), np.full(30, 1 / 30),
                         label="first batch")
    assert np.trace(pairs) == 0
    ordered = pairs[~np.eye(10, dtype=bool)]
    assert_chisquare_pmf(np.repeat(np.arange(90), ordered), np.full(90, 1 / 90),
                         label="ordered pairs")


def _reference_shuffle(rng, n, sizes):
    """The law written out plainly: batches are stretches of one Fisher-Yates shuffle of
    range(n) from the identity, position k taking the value at k + integers(0, n - k)."""
    arrangement = list(range(n))
    batches, position = [], 0
    for m in sizes:
        batch = []
        for k in range(position, min(n, position + m)):
            j = k + int(rng.integers(0, n - k))
            arrangement[j], arrangement[k] = arrangement[k], arrangement[j]
            batch.append(arrangement[k])
        position += len(batch)
        batches.append(batch)
    return batches


@pytest.mark.parametrize("n, sizes", [(1000, [3, 5, 40, 100]),      # sparse, with rehashing
                                      (1000, [100, 200, 400, 400]),  # sparse, then dense
                                      (7, [3, 3, 3]), (50, [60])])
def test_sampler_draws_the_reference_shuffle(n, sizes):
    # The sparse table and the dense arrangement must both give exactly the indices of the
    # plain shuffle for the same generator state.
    got = IndexSampler(n, np.random.default_rng(5))
    batches = [got.draw(m).tolist() for m in sizes]
    assert batches == _reference_shuffle(np.random.default_rng(5), n, sizes)


def test_batches_are_distinct_and_exhaust_the_population():
    rng = np.random.default_rng(23)
    for n, sizes in ((1000, [100] * 12), (1000, [50, 50, 100, 200, 400, 800]), (7, [3, 3, 3])):
        sampler = IndexSampler(n, rng)
        batches = [sampler.draw(m) for m in sizes]
        for batch in batches:
            assert batch.dtype == np.intp
        everything = np.concatenate(batches)
        assert np.array_equal(np.sort(everything), np.arange(n))
        assert sampler.count == n
        assert sampler.draw(5).size == 0


def test_caller_writing_to_a_batch_does_not_corrupt_the_sampler():
    sampler = IndexSampler(50, np.random.default_rng(24))
    first = sampler.draw(10)
    kept = first.copy()
    first[:] = 0
    second = sampler.draw(40)
    assert np.array_equal(np.sort(np.concatenate([kept, second])), np.arange(50))


def test_uniformity_check_rejects_a_biased_shuffle():
    # Negative control: a shuffle whose position k only reaches [k, k + 3) is a valid draw
    # without replacement but not uniform; the inclusion test of the second batch must fail.
    rng = np.random.default_rng(21)
    counts = np.zeros(30, dtype=int)
    for _ in range(2000):
        arrangement = np.arange(30)
        for k in range(8):
            j = k + int(rng.integers(0, min(3, 30 - k)))
            arrangement[[j, k]] = arrangement[[k, j]]
        counts[arrangement[3:8]] += 1
    with pytest.raises(AssertionError, match="chi-square"):
        assert_chisquare_pmf(np.repeat(np.arange(30), counts), np.full(30, 1 / 30),
                             label="biased second batch")


def _inclusions(batches, lengths, n_pop):
    """Split a MultiIndexSampler answer into the batches of its ``n_pop`` populations."""
    parts = np.split(batches, np.cumsum(lengths)[:-1])
    assert len(parts) == n_pop
    return parts


def _multi_inclusion_counts(rng, n_reps=3000):
    # Populations of 30, 12, 7 and 5 with batches of a few indices out of many, of more than
    # half of what is left, and of the whole remainder.
    sizes = np.array([30, 12, 7, 5])
    schedule = [np.array([3, 3, 3, 3]), np.array([5, 5, 4, 2]), np.array([16, 4, 0, 0])]
    counts = [np.zeros((sizes.size, 30), dtype=int) for _ in schedule]
    for _ in range(n_reps):
        sampler = MultiIndexSampler(sizes, rng)
        seen = [[] for _ in sizes]
        for batch, m in enumerate(schedule):
            idx, lengths = sampler.draw(np.arange(sizes.size), m)
            assert np.array_equal(lengths, np.minimum(m, sizes - [len(s) for s in seen]))
            for pop, part in enumerate(_inclusions(idx, lengths, sizes.size)):
                counts[batch][pop, part] += 1
                seen[pop].extend(part.tolist())
        for drawn in seen:
            assert len(set(drawn)) == len(drawn)  # without replacement
    return sizes, schedule, counts


def _assert_uniform_inclusions(sizes, schedule, counts):
    for batch, m in enumerate(schedule):
        for pop, n in enumerate(sizes):
            if m[pop] == 0 or (batch > 0 and schedule[batch - 1][pop] >= n):
                continue
            samples = np.repeat(np.arange(n), counts[batch][pop, :n])
            assert_chisquare_pmf(samples, np.full(n, 1 / n),
                                 label=f"batch {batch + 1} of population {pop}")


def test_multi_sampler_batches_are_uniform_subsets_without_replacement():
    # Each index must be equally likely to be in each batch (chi-square on inclusion counts,
    # 16 tests at alpha = 0.01), and no index is drawn twice.
    sizes, schedule, counts = _multi_inclusion_counts(np.random.default_rng(31))
    _assert_uniform_inclusions(sizes, schedule, counts)


def test_multi_sampler_later_batches_are_uniform_subsets():
    # The second batch is, unconditionally, a uniform subset of the whole population: all 45
    # pairs of 10 after a first batch of 3, and all 20 triples of 6 after a first batch of 1.
    rng = np.random.default_rng(32)
    pairs = np.zeros(45, dtype=int)
    triples = np.zeros(20, dtype=int)
    pair_code = {p: k for k, p in enumerate(combinations(range(10), 2))}
    triple_code = {p: k for k, p in enumerate(combinations(range(6), 3))}
    for _ in range(3000):
        sampler = MultiIndexSampler(np.array([10, 6]), rng)
        sampler.draw(np.array([0, 1]), np.array([3, 1]))
        idx, lengths = sampler.draw(np.array([0, 1]), np.array([2, 3]))
        pair, triple = _inclusions(idx, lengths, 2)
        pairs[pair_code[tuple(sorted(pair.tolist()))]] += 1
        triples[triple_code[tuple(sorted(triple.tolist()))]] += 1
    assert_chisquare_pmf(np.repeat(np.arange(45), pairs), np.full(45, 1 / 45), label="pairs")
    assert_chisquare_pmf(np.repeat(np.arange(20), triples), np.full(20, 1 / 20),
                         label="triples")


def test_multi_sampler_batches_are_distinct_and_exhaust_every_population():
    rng = np.random.default_rng(33)
    sizes = np.array([1, 5, 40, 300, 2000, 3, 7])
    for _ in range(20):
        sampler = MultiIndexSampler(sizes, rng)
        seen = [[] for _ in sizes]
        while np.any(sampler.counts < sizes):
            pops = np.flatnonzero(rng.random(sizes.size) < 0.7)
            m = rng.integers(0, 400, pops.size)
            before = sampler.counts.copy()
            idx, lengths = sampler.draw(pops, m)
            assert idx.dtype == np.intp and lengths.sum() == idx.size
            assert np.array_equal(lengths, np.minimum(m, sizes[pops] - before[pops]))
            for pop, part in zip(pops, _inclusions(idx, lengths, pops.size), strict=True):
                assert part.size == 0 or (part.min() >= 0 and part.max() < sizes[pop])
                seen[pop].extend(part.tolist())
            assert np.array_equal(sampler.counts, [len(s) for s in seen])
        for pop, drawn in enumerate(seen):
            assert sorted(drawn) == list(range(sizes[pop]))
        idx, lengths = sampler.draw(np.arange(sizes.size), np.full(sizes.size, 5))
        assert idx.size == 0 and not lengths.any()


def test_compiled_bounded_draw_is_generator_integers():
    """The sampler's one random integer per index is exactly ``Generator.integers(0, n)``,
    over the ranges of its code paths (below 2³², 2³², above)."""
    sizes = np.array([2, 3, 10, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**40, 7, 1] * 20)
    got = np.empty(sizes.size, dtype=np.int64)
    _draw_each(np.random.default_rng(3), sizes, got)
    reference = np.random.default_rng(3)
    assert got.tolist() == [int(reference.integers(0, n)) for n in sizes]


@numba.njit
def _draw_each(rng, sizes, out):
    for k in range(sizes.size):
        out[k] = below(rng, sizes[k])


# ----------------------------------------------------------------------------- sorted batches


@numba.njit
def _draw_subsets(seed, n, m, marked, n_reps, out):
    """``n_reps`` batches of ``m`` from ``range(n)`` minus ``marked`` (one stream); False if a
    draw left ``drawn`` other than the marked indices plus its batch, or ``before`` not zero."""
    words = (n + 63) >> 6
    drawn = np.zeros(words, dtype=np.int64)
    before = np.zeros(words, dtype=np.int64)
    expected = np.zeros(words, dtype=np.int64)
    state = seed
    for r in range(n_reps):
        for k in range(marked.size):
            drawn[marked[k] >> 6] |= np.int64(1) << (marked[k] & 63)
        expected[:] = drawn
        state = draw_unmarked(state, n, drawn, before, out[r])
        for k in range(m):
            expected[out[r, k] >> 6] |= np.int64(1) << (out[r, k] & 63)
        if (drawn != expected).any() or before.any():
            return False
        drawn[:] = 0
    return True


@numba.njit
def _bounded_draws(seed, n, k):
    out = np.empty(k, dtype=np.int64)
    state = seed
    for i in range(k):
        state, out[i] = bounded(state, n)
    return out


def _subset_codes(batches, free):
    """Each batch as the index of its subset among the sorted m-subsets of ``free``."""
    code = {subset: c for c, subset in enumerate(combinations(free, batches.shape[1]))}
    return np.array([code[tuple(b)] for b in batches.tolist()])


def test_sorted_batches_are_uniform_subsets_of_the_undrawn_indices():
    # Every 3-subset of the 8 indices of range(12) left after marking 4 must be equally likely
    # (chi-square over the 56 subsets): the set law of a Fisher–Yates stretch. Batches are
    # sorted, distinct and never hold a marked index.
    marked = np.array([0, 5, 6, 11])
    free = [i for i in range(12) if i not in set(marked.tolist())]
    batches = np.empty((6000, 3), dtype=np.int64)
    assert _draw_subsets(np.uint64(41), 12, 3, marked, 6000, batches)
    assert (np.diff(batches, axis=1) > 0).all()
    codes = _subset_codes(batches, free)
    assert_chisquare_pmf(codes, np.full(56, 1 / 56), label="3-subsets")
    # Negative control: the same test on a law that favours low indices (the smallest of two
    # candidate subsets) must reject.
    other = np.empty_like(batches)
    _draw_subsets(np.uint64(42), 12, 3, marked, 6000, other)
    biased = np.minimum(codes, _subset_codes(other, free))
    with pytest.raises(AssertionError):
        assert_chisquare_pmf(biased, np.full(56, 1 / 56), label="biased control")


def test_sorted_batches_of_a_large_population_take_the_comparison_sort():
    # m = 3 of 2^20: the batch is sorted by comparison (no pass over 16384 words); inclusion is
    # uniform over 16 blocks of the population.
    n = 1 << 20
    batches = np.empty((3000, 3), dtype=np.int64)
    assert _draw_subsets(np.uint64(43), n, 3, np.array([1, 2, 3]), 3000, batches)
    assert (np.diff(batches, axis=1) > 0).all() and not np.isin(batches, [1, 2, 3]).any()
    assert_chisquare_pmf(batches.ravel() >> 16, np.full(16, 1 / 16), label="blocks")


@numba.njit
def _multiply_shift_draws(seed, n, k, threshold):
    """``k`` accepted multiply-shift draws on ``range(n)`` from both halves of each SplitMix64
    output, as the race's index draws use them."""
    out = np.empty(k, dtype=np.int64)
    state = seed
    bound = np.uint64(n)
    i = 0
    while i < k:
        state, z = splitmix64(state)
        for half in (z >> np.uint64(32), z & np.uint64(0xFFFFFFFF)):
            j, accepted = multiply_shift(half, bound, threshold)
            if accepted and i < k:
                out[i] = j
                i += 1
    return out


def test_multiply_shift_rejection_makes_it_exactly_uniform():
    # n = 3 * 2^30: 2^32 / n = 4/3, so without rejection every j = 0 (mod 3) has two 32-bit
    # preimages and the others one (P(j = 0 mod 3) = 1/2). Rejecting the 2^30 = 2^32 mod n
    # smallest low products leaves one each: j mod 3 is uniform (chi-square). Negative control:
    # the same draws without rejection must fail.
    n = 3 << 30
    threshold = lemire_threshold(np.uint64(n))
    assert int(threshold) == 1 << 30
    draws = _multiply_shift_draws(np.uint64(45), n, 30_000, threshold)
    assert draws.min() >= 0 and draws.max() < n
    assert_chisquare_pmf(draws % 3, np.full(3, 1 / 3), label="with rejection")
    raw = _multiply_shift_draws(np.uint64(45), n, 30_000, np.uint64(0))
    with pytest.raises(AssertionError):
        assert_chisquare_pmf(raw % 3, np.full(3, 1 / 3), label="without rejection")


@numba.njit
def _race_batches(seed, n, m, n_reps, out):
    """``n_reps`` batches of ``m`` of ``range(n)`` by :func:`draw_unmarked`, each from an
    empty bitmap (cleared after each batch)."""
    words = (n + 63) >> 6
    drawn = np.zeros(words, dtype=np.int64)
    before = np.zeros(words, dtype=np.int64)
    state = seed
    for r in range(n_reps):
        state = draw_unmarked(state, n, drawn, before, out[r])
        clear_marks(drawn, out[r], n)


def test_race_draws_and_bounded_are_uniform_where_multiply_shift_is_most_biased():
    # The samplers themselves at n = 3 * 2^30, where skipping the multiply-shift rejection (in
    # either half of a random word) gives P(j = 0 mod 3) = 1/2 instead of 1/3 (the control
    # above shows the chi-square sees that); bounded, which masks instead, must be uniform
    # there too. Batches of 4 are sorted by comparison, so the two bitmaps of 3 * 2^30 bits
    # (zero pages until written) cost only the few pages the draws touch.
    n = 3 << 30
    batches = np.empty((5000, 4), dtype=np.int64)
    _race_batches(np.uint64(46), n, 4, 5000, batches)
    assert batches.min() >= 0 and batches.max() < n
    assert_chisquare_pmf(batches.ravel() % 3, np.full(3, 1 / 3), label="race batches")
    assert_chisquare_pmf(_bounded_draws(np.uint64(47), n, 20_000) % 3, np.full(3, 1 / 3),
                         label="bounded")


@pytest.mark.parametrize("n", [7, 1000, 2**32 - 1, 2**32 + 7])
def test_bounded_draws_are_uniform(n):
    # Chi-square over 10 equal-probability cells of range(n) (a cell's share differs from 1/10
    # by at most 1/n).
    draws = _bounded_draws(np.uint64(44), n, 20_000)
    assert draws.min() >= 0 and draws.max() < n
    edges = (np.arange(1, 10) * n) // 10
    cells = np.searchsorted(edges, draws, side="right")
    pmf = np.diff(np.concatenate(([0], edges, [n]))) / n
    assert_chisquare_pmf(cells, pmf, label=f"n = {n}")


def test_unmarked_indices_and_clearing():
    rng = np.random.default_rng(45)
    for n in (1, 63, 64, 65, 1000):
        marked = np.unique(rng.integers(0, n, n // 3 + 1))
        bits = np.zeros((n + 63) >> 6, dtype=np.int64)
        for i in marked:
            bits[i >> 6] |= np.int64(1) << np.int64(i & 63)
        rest = np.empty(n - marked.size, dtype=np.int64)
        take_unmarked(bits, n, rest)
        np.testing.assert_array_equal(rest, np.setdiff1d(np.arange(n), marked))
        clear_marks(bits, marked, n)
        assert not bits.any()
