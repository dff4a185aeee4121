"""b_cubed_score: hand-computed cases and an O(n^2) brute-force definition."""

import numpy as np
import pytest

from sksubsample.metrics import b_cubed_score


def _brute_force(labels_true, labels_pred):
    """B³ straight from its definition: per mention, the overlap of its two clusters."""
    t = np.asarray(labels_true)
    p = np.asarray(labels_pred)
    same_t = t[:, None] == t[None, :]
    same_p = p[:, None] == p[None, :]
    overlap = (same_t & same_p).sum(axis=1)
    precision = np.mean(overlap / same_p.sum(axis=1))
    recall = np.mean(overlap / same_t.sum(axis=1))
    return precision, recall, 2 * precision * recall / (precision + recall)


def test_hand_computed_cases():
    # G = {0,1,2},{3}; C = {0,1},{2,3}. Precision (1 + 1 + 1/2 + 1/2)/4 = 3/4;
    # recall (2/3 + 2/3 + 1/3 + 1)/4 = 2/3; F1 = 2 (3/4)(2/3) / (3/4 + 2/3) = 12/17.
    assert b_cubed_score([0, 0, 0, 1], [0, 0, 1, 1]) == pytest.approx((0.75, 2 / 3, 12 / 17))
    # Everything merged: precision = sum of squared true-cluster shares, recall 1.
    # G sizes 3, 1 of n = 4: precision (3 * 3/4 + 1/4)/4 = 10/16.
    assert b_cubed_score([0, 0, 0, 1], [5, 5, 5, 5]) == pytest.approx((10 / 16, 1.0, 20 / 26))
    # All singletons: precision 1, recall (3 * 1/3 + 1)/4 = 1/2.
    assert b_cubed_score([0, 0, 0, 1], [0, 1, 2, 3]) == pytest.approx((1.0, 0.5, 2 / 3))
    # Identical up to renaming, with string labels.
    assert b_cubed_score(["a", "a", "b"], [7, 7, 3]) == (1.0, 1.0, 1.0)
    assert b_cubed_score([4], [9]) == (1.0, 1.0, 1.0)


def test_mention_average_differs_from_cluster_average():
    # One big correct cluster and one split pair: mention averaging weights the big cluster.
    true = [0] * 8 + [1, 1]
    pred = [0] * 8 + [1, 2]
    p, r, _ = b_cubed_score(true, pred)
    assert p == 1.0
    assert r == pytest.approx((8 * 1.0 + 2 * 0.5) / 10)  # 0.9; per-cluster would be 0.75


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force_definition(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    t = rng.integers(0, rng.integers(1, 40), size=n)
    p = rng.integers(0, rng.integers(1, 40), size=n)
    assert b_cubed_score(t, p) == pytest.approx(_brute_force(t, p), rel=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        b_cubed_score([], [])
    with pytest.raises(ValueError, match="must label the same mentions"):
        b_cubed_score([0, 1], [0])
    with pytest.raises(ValueError, match="labels_true must be a 1-d array"):
        b_cubed_score([[0, 1], [1, 0]], [[0, 1], [1, 0]])
