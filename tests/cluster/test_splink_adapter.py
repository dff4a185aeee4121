"""pairwise_log_potentials: inputs, record order, singletons, and bad input."""

import math

import numpy as np
import pytest

from sksubsample import CorefGibbsClusterer
from sksubsample.cluster import RecordPairs, pairwise_log_potentials

pd = pytest.importorskip("pandas")


def _frame():
    return pd.DataFrame({"unique_id_l": [30, 10, 20], "unique_id_r": [10, 40, 30],
                         "match_weight": [8.0, -4.0, 1.5]})


def test_records_in_ascending_order_of_ids_with_singletons():
    X = pairwise_log_potentials(_frame(), ids=[50, 40, 30, 20, 10])
    assert isinstance(X, RecordPairs)
    assert X.ids.tolist() == [10, 20, 30, 40, 50]
    assert X.pairs.tolist() == [[0, 2], [0, 3], [1, 2]]
    assert np.allclose(X.log_odds, np.array([8.0, -4.0, 1.5]) * math.log(2))
    S = X.to_sparse()
    assert S.shape == (5, 5) and S[4].nnz == 0
    assert S[0, 2] == S[2, 0] == pytest.approx(8.0 * math.log(2))
    # Without ids: only the records the pairs name.
    assert pairwise_log_potentials(_frame()).ids.tolist() == [10, 20, 30, 40]


def test_probabilities_arrow_and_recordlinkage_inputs_agree():
    frame = _frame()
    p = 1.0 / (1.0 + 2.0 ** -frame.match_weight)
    by_p = pairwise_log_potentials(frame.drop(columns="match_weight").assign(
        match_probability=p))
    expected = pairwise_log_potentials(frame)
    assert np.allclose(by_p.log_odds, expected.log_odds)
    pa = pytest.importorskip("pyarrow")
    arrow = pairwise_log_potentials(pa.Table.from_pandas(frame))
    assert np.array_equal(arrow.pairs, expected.pairs)
    assert np.allclose(arrow.log_odds, expected.log_odds)
    # recordlinkage: probabilities indexed by the record pairs.
    index = pd.MultiIndex.from_arrays([frame.unique_id_l, frame.unique_id_r])
    series = pd.Series(p.to_numpy(), index=index)
    rl = pairwise_log_potentials(series)
    assert np.allclose(rl.log_odds, expected.log_odds)


def test_string_ids_and_a_fit_in_id_order():
    frame = pd.DataFrame({"unique_id_l": ["b", "a"], "unique_id_r": ["c", "d"],
                          "match_weight": [20.0, 20.0]})
    X = pairwise_log_potentials(frame, ids=["e", "d", "c", "b", "a"])
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=5, random_state=0).fit(X)
    labels = est.labels_  # records a, b, c, d, e
    assert labels[0] == labels[3] and labels[1] == labels[2] and labels[0] != labels[1]
    assert len(set(labels.tolist())) == 3


@pytest.mark.parametrize(("change", "match"), [
    (lambda f: f.drop(columns="unique_id_r"), "unique_id_r"),
    (lambda f: f.drop(columns="match_weight"), "match_weight"),
    (lambda f: f.assign(match_weight=[1.0, np.nan, 2.0]), "row 1"),
    (lambda f: f.assign(unique_id_r=[10, 40, 20]), "row 2 pairs the record 20 with itself"),
    (lambda f: pd.concat([f, f.iloc[[0]].rename(columns={"unique_id_l": "unique_id_r",
                                                         "unique_id_r": "unique_id_l"})]),
     "rows 0 and 3"),
    (lambda f: f.assign(match_probability=[0.5, 1.0, 0.2]).drop(columns="match_weight"),
     "row 1"),
])
def test_bad_pairs_are_named(change, match):
    with pytest.raises(ValueError, match=match):
        pairwise_log_potentials(change(_frame()))


@pytest.mark.parametrize("missing", [None, np.nan])
def test_a_missing_id_anywhere_is_named_not_read_as_an_id(missing):
    # Far past the first ids: a None there had become the string id 'None'.
    n = 5_000
    left = np.array([f"r{k}" for k in range(n)], dtype=object)
    left[n - 7] = missing
    frame = pd.DataFrame({"unique_id_l": left, "unique_id_r": [f"s{k}" for k in range(n)],
                          "match_weight": np.ones(n)})
    with pytest.raises(ValueError, match=rf"unique_id_l.*missing ids.*in row {n - 7}$"):
        pairwise_log_potentials(frame)
    ids = np.array([f"r{k}" for k in range(n)], dtype=object)
    ids[n - 3] = missing
    with pytest.raises(ValueError, match=rf"^ids holds missing ids.*at position {n - 3}$"):
        pairwise_log_potentials(frame.assign(unique_id_l=[f"r{k}" for k in range(n)]), ids=ids)


def test_integer_ids_of_any_width_meet_exactly_and_a_mix_of_kinds_is_refused():
    # int64 ids beside uint64 ones had met as float64, where ids past 2^53 collide.
    big = 2**60
    frame = pd.DataFrame({"unique_id_l": np.array([big + 1, big + 3], dtype=np.uint64),
                          "unique_id_r": np.array([big + 2, big + 4], dtype=np.int64),
                          "match_weight": [5.0, 5.0]})
    X = pairwise_log_potentials(frame)
    assert X.ids.dtype == np.int64
    assert X.ids.tolist() == [big + 1, big + 2, big + 3, big + 4]
    with pytest.raises(ValueError, match=r"beyond the range of int64 .* in row 1"):
        pairwise_log_potentials(frame.assign(
            unique_id_l=np.array([1, 2**63 + 1], dtype=np.uint64)))
    with pytest.raises(TypeError, match=r"not a mix.*int, str"):
        pairwise_log_potentials(frame.assign(
            unique_id_l=np.array([7, "007"], dtype=object)))
    with pytest.raises(ValueError, match="'match_weight' must hold numbers"):
        pairwise_log_potentials(frame.assign(match_weight=["5", "x"]))


def test_ids_must_cover_the_pairs_and_be_unique():
    with pytest.raises(ValueError, match=r"row 1 .*40.*unique_id_r.*not in ids"):
        pairwise_log_potentials(_frame(), ids=[10, 20, 30])
    with pytest.raises(ValueError, match="duplicate"):
        pairwise_log_potentials(_frame(), ids=[10, 10, 20, 30, 40])
    with pytest.raises(TypeError, match="pairs must be"):
        pairwise_log_potentials(np.zeros((3, 3)))


def test_ten_million_pairs_are_read_without_a_loop_per_pair():
    # The whole-column path: a cheap check that the adapter scales (timed in benchmarks/).
    rng = np.random.default_rng(0)
    n, p = 200_000, 1_000_000
    i = rng.integers(0, n, p)
    j = (i + 1 + rng.integers(0, n - 1, p)) % n
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    _, keep = np.unique(lo * n + hi, return_index=True)
    frame = pd.DataFrame({"unique_id_l": lo[keep], "unique_id_r": hi[keep],
                          "match_weight": rng.normal(size=keep.size)})
    X = pairwise_log_potentials(frame, ids=np.arange(n))
    assert X.pairs.shape == (keep.size, 2) and X.n_records == n


def _hand_built(**change):
    # Five records, every pair scored on two comparisons (as a user might build them).
    i, j = np.triu_indices(5, 1)
    exact = (np.arange(i.size * 2).reshape(-1, 2) % 3) == 0
    log_bf = np.where(exact, 2.0, -1.5)
    fields = dict(ids=np.arange(5), pairs=np.column_stack([i, j]), log_odds=log_bf.sum(1) - 2.0,
                  proposed=np.ones(i.size, bool), comparisons=("c0", "c1"),
                  comparison_log_bf=log_bf, exact=exact, null=np.zeros_like(exact),
                  log_m_exact=np.log([0.9, 0.8]), prior_log_odds=-2.0)
    fields.update({k: v(fields) for k, v in change.items()})
    return RecordPairs(**fields)


@pytest.mark.parametrize(("change", "match"), [
    (dict(pairs=lambda f: np.r_[f["pairs"][:-1], [[3, 7]]]), r"pairs: row 9 .*outside 0\.\.4"),
    (dict(pairs=lambda f: np.r_[f["pairs"][:-1], [[3, 3]]]), "pairs: row 9 is not .* i < j"),
    (dict(pairs=lambda f: f["pairs"][:, ::-1]), "pairs: row 0 is not .* i < j"),
    (dict(pairs=lambda f: np.r_[f["pairs"][:-1], [[0, 1]]]), "rows 0 and 9 are the same pair"),
    (dict(log_odds=lambda f: f["log_odds"][:-1]), r"log_odds must be .* shape \(10,\)"),
    (dict(log_odds=lambda f: np.r_[f["log_odds"][:4], np.nan, f["log_odds"][5:]]),
     "log_odds: row 4 is NaN"),
    (dict(comparison_log_bf=lambda f: np.r_[f["comparison_log_bf"][:2], [[np.inf, 0.0]],
                                            f["comparison_log_bf"][3:]]),
     "comparison_log_bf: row 2 is not finite"),
    (dict(null=lambda f: f["exact"]), "exact: row 0 is exact on a comparison that null"),
    (dict(ids=lambda f: f["ids"][::-1]), "ids must be .* ascending"),
])
@pytest.mark.filterwarnings("ignore::sksubsample.diagnostics.ConvergenceWarning")  # 2 draws
def test_record_pairs_built_by_hand_are_checked_when_fitted(change, match):
    # Unchecked, all but the first had been fitted without a word, and the infinite Bayes
    # factor had crashed the process (a segmentation fault in the compiled sweeps).
    est = CorefGibbsClusterer(metric="precomputed", n_draws=2, random_state=0)
    est.fit(_hand_built())  # (the negative control: the pairs unchanged are accepted)
    with pytest.raises(ValueError, match=match):
        est.fit(_hand_built(**change))
