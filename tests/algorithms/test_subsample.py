"""The shared index sampler of the subsampled MH tests and of racing / lil'UCB."""

import numpy as np

from sksubsample.algorithms._subsample import IndexSampler
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


def test_first_batch_is_uniform_and_pairs_are_exchangeable():
    # The first batch takes a path of its own (no rank translation, no merge): inclusion
    # counts must be uniform, and so must the pairs of a batch of 2 (all 45 pairs of 10).
    rng = np.random.default_rng(22)
    counts = np.zeros(30, dtype=int)
    pairs = np.zeros((10, 10), dtype=int)
    for _ in range(4000):
        counts[IndexSampler(30, rng).draw(4)] += 1
        i, j = IndexSampler(10, rng).draw(2)
        pairs[i, j] += 1
    assert_chisquare_pmf(np.repeat(np.arange(30), counts), np.full(30, 1 / 30),
                         label="first batch")
    upper = pairs[np.triu_indices(10, 1)]
    assert pairs.sum() == upper.sum()  # sorted: i < j
    assert_chisquare_pmf(np.repeat(np.arange(45), upper), np.full(45, 1 / 45), label="pairs")


def test_batches_are_sorted_distinct_and_exhaust_the_population():
    rng = np.random.default_rng(23)
    for n, sizes in ((1000, [100] * 12), (1000, [50, 50, 100, 200, 400, 800]), (7, [3, 3, 3])):
        sampler = IndexSampler(n, rng)
        batches = [sampler.draw(m) for m in sizes]
        for batch in batches:
            assert np.all(np.diff(batch) > 0)
            assert batch.dtype == np.intp
        everything = np.concatenate(batches)
        assert np.array_equal(np.sort(everything), np.arange(n))
        assert sampler.count == n and np.array_equal(sampler.drawn, np.arange(n))
        assert sampler.draw(5).size == 0


def test_caller_writing_to_a_batch_does_not_corrupt_the_sampler():
    sampler = IndexSampler(50, np.random.default_rng(24))
    first = sampler.draw(10)
    kept = first.copy()
    first[:] = 0
    second = sampler.draw(40)
    assert np.array_equal(np.sort(np.concatenate([kept, second])), np.arange(50))
