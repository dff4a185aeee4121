"""The costs behind ``method="auto"``'s choices: race or exact, and when a race stops.

* Measured once per kind of kernel and stored: a second ask reads the store, not the kernels.
* With measuring off, the rough costs: the same on every machine, a race always tried.

The choices these make on compiled factors are tested with the compiled races
(``test_racing_compiled.py``), whose kernels are compiled there.
"""

import json

import pytest

from sksubsample.algorithms import _calibration, _race_costs


@pytest.fixture
def store(cost_store):
    return cost_store


def _runners(calls):
    def run_exact():
        calls.append("exact")
        return 1000

    def run_race(longer):
        calls.append("race")
        return 800 if longer else 100

    return run_exact, run_race


def test_costs_are_measured_once_per_kind_and_stored(store):
    calls = []
    costs = _race_costs.race_costs("compiled", "kind-a", *_runners(calls))
    assert costs.measured and costs.probe_seconds > 0
    assert costs.exact > 0 and costs.race >= costs.exact and costs.setup > 0
    assert calls.count("exact") > 0 and calls.count("race") > 0
    entries = json.loads(store.read_text())["entries"]
    assert [key.split("|", 3)[-1] for key in entries] == ["race|compiled|kind-a"]
    # Another process reads the stored costs: the same choice, nothing timed again.
    _calibration._MEMO.clear()
    calls.clear()
    again = _race_costs.race_costs("compiled", "kind-a", *_runners(calls))
    assert calls == [] and again[:3] == costs[:3] and again.probe_seconds == 0.0


def test_rough_costs_are_fixed_and_always_race(store, monkeypatch):
    monkeypatch.setenv(_calibration.MEASURE_ENV, "0")
    calls = []
    costs = _race_costs.race_costs("compiled", "kind-a", *_runners(calls))
    assert calls == [] and not store.exists()
    assert costs == _race_costs.rough_costs("compiled")
    assert costs.bail_ratio == pytest.approx(_race_costs.ROUGH_BAIL_RATIO["compiled"])
    assert costs.race_first(2)


def test_race_first_weighs_the_set_up_against_the_exact_sums():
    costs = _race_costs.RaceCosts(exact=1e-9, race=1e-8, setup=1e-5, measured=True)
    assert costs.bail_ratio == pytest.approx(10.0)
    threshold = costs.setup / (_race_costs.SLACK * costs.exact)
    assert costs.race_first(int(threshold * 1.01))
    assert not costs.race_first(int(threshold * 0.99))


def test_a_timed_call_of_several_races_gives_one_race_s_set_up(store, monkeypatch):
    """``races=k``: ``run_race`` runs k races in one call (so that calling compiled code is not
    timed as a set-up): the set-up stored is one race's, the cost per term unchanged."""
    seconds = {"exact": 1e-6, "short": 8e-6, "long": 4e-5}

    def fake_fastest(run, rounds, warm_up=None):
        terms = run()
        return {1000: seconds["exact"], 100: seconds["short"], 800: seconds["long"]}[terms], terms

    monkeypatch.setattr(_race_costs, "fastest", fake_fastest)
    one = _race_costs.race_costs("compiled", "kind-one", *_runners([]))
    four = _race_costs.race_costs("compiled", "kind-four", *_runners([]), races=4)
    assert one.setup == pytest.approx(seconds["short"])
    assert four.setup == pytest.approx(seconds["short"] / 4)
    assert four.race == one.race == pytest.approx((4e-5 - 8e-6) / 700)
    assert four.exact == one.exact == pytest.approx(1e-9)
