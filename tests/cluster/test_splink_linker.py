"""pairwise_log_potentials with a Splink linker (skipped without the splink extra)."""

import logging
import math
import warnings

import numpy as np
import pytest

from sksubsample import CorefGibbsClusterer
from sksubsample.cluster import pairwise_log_potentials
from sksubsample.datasets import make_person_records

splink = pytest.importorskip("splink")
cl = pytest.importorskip("splink.comparison_library")


@pytest.fixture(scope="module")
def fitted():
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    data = make_person_records(600, random_state=3)
    settings = SettingsCreator(
        link_type="dedupe_only",
        comparisons=[cl.NameComparison("first_name"), cl.NameComparison("surname"),
                     cl.DateOfBirthComparison("dob", input_is_string=True),
                     cl.ExactMatch("city").configure(term_frequency_adjustments=True)],
        blocking_rules_to_generate_predictions=[block_on("surname"), block_on("dob")])
    linker = Linker(DuckDBAPI().register(data.frame), settings, log_level=logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        linker.training.estimate_probability_two_random_records_match(
            [block_on("first_name", "surname", "dob")], recall=0.7)
        linker.training.estimate_u_using_random_sampling(max_pairs=1e5, seed=0)
        linker.training.estimate_parameters_using_expectation_maximisation(
            block_on("surname"))
        predictions = linker.inference.predict(threshold_match_probability=0.001)
    return data, linker, predictions


def test_linker_adds_component_pairs_and_comparisons(fitted):
    data, linker, predictions = fitted
    frame = predictions.as_pandas_dataframe()
    ids = data.frame["unique_id"].to_numpy()
    X = pairwise_log_potentials(predictions, ids=ids, linker=linker)
    assert X.has_records_model and X.comparisons == ("first_name", "surname", "dob", "city")
    assert X.n_records == 600 and X.proposed.sum() == len(frame)
    # Every pair of records in one connected component is scored, once.
    key = X.pairs[:, 0] * 600 + X.pairs[:, 1]
    assert np.unique(key).size == key.size and np.all(X.pairs[:, 0] < X.pairs[:, 1])
    from scipy.sparse.csgraph import connected_components

    _, label = connected_components(X.to_sparse(), directed=False)
    sizes = np.bincount(label)
    assert len(X.pairs) == int(np.sum(sizes * (sizes - 1) // 2))
    # The per-comparison factors and the prior add up to Splink's match weight.
    total = X.comparison_log_bf.sum(axis=1) + X.prior_log_odds
    assert np.allclose(total[X.proposed], X.log_odds[X.proposed], atol=1e-6)
    assert np.all(X.exact <= ~X.null)
    # The address block by the comparisons' names, and a move rate from the pairs.
    assert X.moved_comparisons == (("city",),) and 0.0 < X.move_rate[0] <= 0.9
    without = pairwise_log_potentials(predictions, ids=ids, linker=linker, moves=None)
    assert without.moved_comparisons == () and without.move_rate == ()
    # Several blocks named by lists of names, one rate each.
    two = pairwise_log_potentials(predictions, ids=ids, linker=linker,
                                  moves=[["city"], ("dob",)])
    assert two.moved_comparisons == (("city",), ("dob",)) and len(two.move_rate) == 2
    assert all(0.0 <= r <= 0.9 for r in two.move_rate)
    # The linker is left as it was: its predictions block with its own rules again.
    again = linker.inference.predict(threshold_match_probability=0.001).as_pandas_dataframe()
    assert len(again) == len(frame)


def test_the_default_fit_uses_the_records_model(fitted):
    data, linker, predictions = fitted
    X = pairwise_log_potentials(predictions, ids=data.frame["unique_id"].to_numpy(),
                                linker=linker)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CorefGibbsClusterer(metric="precomputed", n_sweeps=5, n_draws=10,
                                  random_state=0).fit(X)
    assert est.labels_.shape == (600,) and est._records is not None
    assert math.isfinite(est.log_potential(est.labels_))
    P = est.coreference_matrix()
    assert P.shape == (600, 600) and P.max() <= 1.0
    with pytest.raises(TypeError, match="linker"):
        pairwise_log_potentials(predictions, linker="not a linker")


@pytest.mark.parametrize(("level", "shown"), [(np.nan, "nan"), (9, "9.0"), (-2, "-2.0")])
def test_a_level_the_linker_does_not_have_is_named(fitted, level, shown):
    # A missing level read as int64 had become a very negative one, counted as null.
    data, linker, predictions = fitted
    frame = predictions.as_pandas_dataframe()
    frame["gamma_surname"] = frame["gamma_surname"].astype(np.float64)
    frame.loc[frame.index[5], "gamma_surname"] = level
    with pytest.raises(ValueError, match=rf"'gamma_surname' holds {shown} in row 5, not a "
                                         r"level .*-1 for null, 0 to \d"):
        pairwise_log_potentials(frame, ids=data.frame["unique_id"].to_numpy(), linker=linker)


@pytest.mark.parametrize("fault", ["a pair left out", "an unknown record"])
def test_pairs_the_linker_did_not_score_are_named(fitted, monkeypatch, fault):
    # Looked up by sorted search, a pair missing from the linker's scores had taken the
    # scores of its neighbour in the search.
    from sksubsample.cluster import _splink_linker

    data, linker, predictions = fitted
    score = _splink_linker._score

    def faulty(*args):
        names, get = score(*args)
        if fault == "a pair left out":
            return names, lambda name: get(name)[1:]
        return names, lambda name: (np.r_[[10**9], get(name)[1:]] if name == "unique_id_l"
                                    else get(name))

    monkeypatch.setattr(_splink_linker, "_score", faulty)
    match = ("did not score the pair" if fault == "a pair left out"
             else "scores of the pairs: row 0 names the record 1000000000")
    with pytest.raises(ValueError, match=match):
        pairwise_log_potentials(predictions, ids=data.frame["unique_id"].to_numpy(),
                                linker=linker)
