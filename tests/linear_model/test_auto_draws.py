"""``n_draws="auto"``: rounds of continued draws until the convergence criteria hold."""

import warnings

import numpy as np
import pytest
from scipy import special

import sksubsample._rounds as base
from sksubsample import BayesianLogisticRegressionMH
from sksubsample.diagnostics import ConvergenceWarning
from tests._stats import meets_auto_criteria


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = (rng.random(300) < special.expit(X @ np.array([1.0, -0.5, 0.25]) + 0.3)).astype(int)
    return X, y


def _fit(X, y, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        clf = BayesianLogisticRegressionMH(random_state=3, **options).fit(X, y)
    return clf, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_auto_stops_once_the_criteria_hold_and_its_rounds_continue_the_chains(data):
    """A random walk mixes slowly enough to need several rounds. The draws meet the criteria,
    the first round alone did not, and the rounds are the chains a fit of that many draws
    runs, draw for draw (the exact test plans nothing on the fit's length)."""
    X, y = data
    options = {"test": "metropolis", "proposal": "random-walk"}
    auto, caught = _fit(X, y, n_draws="auto", **options)
    assert not caught
    assert auto.convergence_["stopped"] == "converged"
    assert auto.convergence_["rounds"] >= 2
    assert auto.n_draws_ == auto._draws.shape[1] > base.AUTO_FIRST_DRAWS
    assert meets_auto_criteria(auto._draws)
    assert not meets_auto_criteria(auto._draws[:, :base.AUTO_FIRST_DRAWS])
    assert auto.convergence_["min_bulk_ess"] >= 400 and auto.convergence_["max_rhat"] <= 1.01
    fixed, _ = _fit(X, y, n_draws=auto.n_draws_, **options)
    np.testing.assert_array_equal(auto._draws, fixed._draws)


def test_auto_stops_after_one_round_when_the_first_suffices(data):
    X, y = data
    clf, caught = _fit(X, y, n_draws="auto")
    assert not caught
    assert clf.convergence_["rounds"] == 1 and clf.convergence_["stopped"] == "converged"
    assert clf.n_draws_ == base.AUTO_FIRST_DRAWS


def test_an_integer_n_draws_runs_one_round_even_unconverged(data):
    X, y = data
    clf, caught = _fit(X, y, n_draws=40, n_warmup=10, proposal="random-walk")
    assert clf._draws.shape[1] == clf.n_draws_ == 40
    assert clf.convergence_ == {"rounds": 1, "stopped": "n_draws"}
    assert len(caught) == 1  # (negative control of the criteria: 40 draws are too few)
    with pytest.warns(ConvergenceWarning):
        clf.sample_more(10)
    assert clf.n_draws_ == 50 and clf.convergence_["rounds"] == 1


def test_the_budget_stops_auto_with_a_warning_naming_parameters(data, monkeypatch):
    X, y = data
    monkeypatch.setattr(base, "AUTO_FIRST_DRAWS", 50)
    monkeypatch.setattr(base, "AUTO_MAX_DRAWS", 120)
    clf, caught = _fit(X, y, n_draws="auto", n_warmup=20, proposal="random-walk",
                       test="metropolis")
    assert clf.convergence_["stopped"] == "budget"
    assert clf.n_draws_ == 120 and clf.convergence_["rounds"] >= 2
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "ESS below 400" in message and "worst: x" in message


def test_auto_is_the_only_string(data):
    X, y = data
    with pytest.raises(ValueError, match="n_draws"):
        BayesianLogisticRegressionMH(n_draws="many").fit(X, y)
