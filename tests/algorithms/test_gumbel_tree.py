"""The truncated-Gumbel tree of §4.3 against a brute-force O(m) reference.

The reference draws every ``v_i ~ TG(a_i, b_i)`` with ``truncated_gumbel`` and takes the max
and argmax, and the exact CDF of the max is the product of the truncated Gumbel CDFs.
"""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from sksubsample.algorithms import TruncatedGumbelTree, truncated_gumbel, truncated_gumbel_cdf
from tests._stats import assert_chisquare_pmf, assert_ks_cdf


def brute_force_log_rate(g, a, b):
    """log(-log P(max <= g)) = log sum_{b_i > g} exp(a_i - g) (1 - exp(g - b_i))."""
    on = b > g
    if not on.any():
        return -math.inf
    return float(logsumexp(a[on] - g + np.log(-np.expm1(g - b[on]))))


def brute_force_draws(a, b, n, rng):
    v = truncated_gumbel(np.tile(a, (n, 1)), np.tile(b, (n, 1)), rng)
    return v.max(axis=1), v.argmax(axis=1)


def exact_cdf(a, b):
    return lambda x: np.exp(
        np.sum(np.log(truncated_gumbel_cdf(np.asarray(x)[:, None], a, b)), axis=1)
    )


def build(a, b, how, rng):
    if how == "bulk":
        return TruncatedGumbelTree.from_arrays(a, b, random_state=rng)
    tree = TruncatedGumbelTree(random_state=rng)
    handles = tree.insert_many(a, b)
    assert handles.tolist() == list(range(a.size))
    return tree


@pytest.mark.parametrize("how", ["bulk", "online"])
def test_cdf_of_max_matches_brute_force_over_hundreds_of_nats(how, rng):
    a = rng.normal(0.0, 200.0, 60)
    b = a + rng.normal(0.0, 200.0, 60)
    b[:3] = np.inf  # untruncated members
    tree = build(a, b, how, rng)
    for g in np.concatenate([np.linspace(-900, 900, 37), b[3:10], b[3:10] - 1e-7]):
        ref = brute_force_log_rate(g, a, b)
        got = tree.log_rate_max(g)
        if ref == -math.inf:
            assert got == -math.inf
        else:
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), g
        assert math.isfinite(got) or got == -math.inf


@pytest.mark.parametrize("how", ["bulk", "online"])
def test_max_matches_exact_cdf_ks(how, rng):
    m = 25
    a = rng.normal(0.0, 2.0, m) - math.log(m)
    b = rng.normal(0.0, 1.5, m)
    tree = build(a, b, how, rng)
    draws = np.array([tree.sample_max(rng)[0] for _ in range(2000)])
    assert np.all(draws <= b.max())
    assert_ks_cdf(draws, exact_cdf(a, b), alpha=0.01, label="tree max")
    # the brute-force reference obeys the same law (checks the reference itself)
    assert_ks_cdf(brute_force_draws(a, b, 2000, rng)[0], exact_cdf(a, b), alpha=0.01)


def test_max_negative_control_wrong_law_is_rejected(rng):
    a = rng.normal(0.0, 2.0, 10)
    b = rng.normal(0.0, 1.5, 10)
    tree = TruncatedGumbelTree.from_arrays(a + 0.3, b, random_state=rng)  # shifted locations
    draws = np.array([tree.sample_max(rng)[0] for _ in range(2000)])
    with pytest.raises(AssertionError):
        assert_ks_cdf(draws, exact_cdf(a, b), alpha=0.01)


def argmax_contingency_p(tree_idx, bf_idx, m):
    table = np.array([np.bincount(tree_idx, minlength=m), np.bincount(bf_idx, minlength=m)])
    table = table[:, table.sum(axis=0) > 0]
    return stats.chi2_contingency(table).pvalue


def test_argmax_matches_brute_force_chi_square(rng):
    a = np.array([0.0, 1.0, -0.5, 0.5, -1.0, 0.2])
    b = np.array([0.8, 1.5, 3.0, 0.3, 4.0, 2.0])
    n = 3000
    tree = TruncatedGumbelTree.from_arrays(a, b, random_state=rng)
    tree_idx = np.array([tree.sample_max(rng)[1] for _ in range(n)])
    _, bf_idx = brute_force_draws(a, b, n, rng)
    assert argmax_contingency_p(tree_idx, bf_idx, a.size) >= 0.01
    # negative control: the same test tells a slightly different instance apart
    a_wrong = a.copy()
    a_wrong[1] += 0.5
    _, wrong_idx = brute_force_draws(a_wrong, b, n, rng)
    assert argmax_contingency_p(tree_idx, wrong_idx, a.size) < 0.01


def test_argmax_given_max_is_proportional_to_exp_a_above_the_max(rng):
    a = np.array([0.0, 1.0, -0.5, 0.5, -1.0, 0.2, 2.0])
    b = np.array([0.8, 1.5, 3.0, 0.3, 4.0, 2.0, -2.0])
    g = 0.6  # elements 3 and 6 have b <= g, so they cannot be the argmax
    tree = TruncatedGumbelTree(random_state=rng)
    tree.insert_many(a, b)
    pmf = np.where(b > g, np.exp(a), 0.0)
    draws = np.array([tree.sample_argmax(g, rng) for _ in range(3000)])
    assert set(draws.tolist()) <= set(np.flatnonzero(b > g).tolist())
    assert_chisquare_pmf(draws, pmf, alpha=0.01, label="argmax | max")


def test_remove_gives_the_law_of_the_remaining_elements(rng):
    m = 12
    a = rng.normal(0.0, 1.0, m)
    b = rng.normal(0.5, 1.0, m)
    tree = TruncatedGumbelTree(random_state=rng)
    handles = tree.insert_many(a, b)
    gone = handles[[0, 3, 4, 9]]
    for h in gone:
        tree.remove(h)
    tree.remove(gone[0])  # removing twice is a no-op
    assert len(tree) == m - gone.size
    keep = np.setdiff1d(np.arange(m), gone)
    results = [tree.sample_max(rng) for _ in range(2000)]
    values = np.array([v for v, _ in results])
    winners = np.array([h for _, h in results])
    assert not np.isin(winners, gone).any()
    assert_ks_cdf(values, exact_cdf(a[keep], b[keep]), alpha=0.01, label="after removal")
    for h in keep:
        tree.remove(h)
    assert tree.sample_max(rng) == (-math.inf, -1)


def test_height_stays_logarithmic_for_adversarial_sorted_inserts(rng):
    m = 4000
    tree = TruncatedGumbelTree(random_state=rng)
    for key in range(m):  # sorted keys: a plain BST would have height m
        tree.insert(0.0, float(key))
    assert tree.height() <= 4 * math.log2(m)
    bulk = TruncatedGumbelTree.from_arrays(np.zeros(m), np.arange(m), random_state=rng)
    assert bulk.height() == math.ceil(math.log2(m + 1))


def test_online_inserts_into_a_bulk_tree_keep_the_law(rng):
    a = rng.normal(0.0, 1.0, 30)
    b = rng.normal(0.0, 1.0, 30)
    tree = TruncatedGumbelTree.from_arrays(a[:20], b[:20], random_state=rng)
    assert tree.insert_many(a[20:], b[20:]).tolist() == list(range(20, 30))
    for g in np.linspace(-3, 3, 13):
        assert tree.log_rate_max(g) == pytest.approx(brute_force_log_rate(g, a, b), rel=1e-10)


def test_bad_input_names_the_argument():
    tree = TruncatedGumbelTree(random_state=0)
    with pytest.raises(ValueError, match="a must"):
        tree.insert(math.nan, 0.0)
    with pytest.raises(ValueError, match="b must"):
        tree.insert(0.0, -math.inf)
    with pytest.raises(ValueError, match="same length"):
        TruncatedGumbelTree.from_arrays([0.0, 1.0], [0.0])
    with pytest.raises(ValueError, match="handle"):
        tree.remove(5)


def test_tied_truncation_points_insert_and_remove(rng):
    a = rng.normal(0.0, 1.0, 40)
    b = np.repeat([0.0, 1.0, 2.0, 3.0], 10)  # many ties, bulk then online
    tree = TruncatedGumbelTree.from_arrays(a[:20], b[:20], random_state=rng)
    tree.insert_many(a[20:], b[20:])
    order = rng.permutation(40)
    for k, h in enumerate(order[:30]):
        tree.remove(h)
        keep = np.sort(order[k + 1 :])
        g = 1.5
        assert tree.log_rate_max(g) == pytest.approx(
            brute_force_log_rate(g, a[keep], b[keep]), rel=1e-10
        )
    assert len(tree) == 10
