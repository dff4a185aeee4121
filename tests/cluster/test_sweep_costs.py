"""The costs behind ``CorefGibbsClusterer(method="auto")``'s races, from the package's cost service.

* Measured on the user's potentials with the sweeps' own kernels, once per machine and kind of
  potentials, and stored: a second ask (another process) reads the store and times nothing.
* Never timed for a callable (the user's calls) or with measuring off: the rough costs, the
  same on every machine. Sparse potentials are never raced by ``"auto"``.
* The sweeps follow the costs they are given: free races race, dear ones never do.
"""

import json

import numpy as np
import pytest
from scipy import sparse

from sksubsample import CorefGibbsClusterer
from sksubsample.algorithms import _calibration
from sksubsample.cluster import _gibbs, _sweep_costs
from sksubsample.cluster._potentials import PairPotentials
from sksubsample.cluster._sweep_costs import SweepCosts, rough_sweep_costs, sweep_costs


@pytest.fixture
def store(cost_store):
    return cost_store


def _features(n=1500, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def test_costs_are_measured_on_the_potentials_once_and_stored(store, monkeypatch):
    pot = PairPotentials("euclidean", _features())
    costs = sweep_costs(pot)
    assert costs.measured and costs.probe_seconds > 0
    # A raced factor costs at least what the pass saves by skipping it; no cost is negative.
    assert costs.per_read >= 1.0 and costs.fixed >= 0.0 and costs.miss >= 0.0
    assert 0.0 < costs.linear_fraction < np.inf
    # Data of another dimension are another kind, measured again.
    other = PairPotentials("euclidean", _features(d=6))
    assert sweep_costs(other).probe_seconds > 0
    entries = json.loads(store.read_text())["entries"]
    assert sorted(key.split("|", 3)[-1] for key in entries) == ["coref|euclidean|d4|n11",
                                                                 "coref|euclidean|d6|n11"]
    # Another process reads the stored costs: the same numbers, nothing timed.
    _calibration._MEMO.clear()
    monkeypatch.setattr(_sweep_costs, "fastest", lambda *a, **k: pytest.fail("timed again"))
    again = sweep_costs(pot)
    assert again[:5] == costs[:5] and again.measured and again.probe_seconds == 0.0


def test_callables_sparse_and_measuring_off_take_the_rough_costs(store, monkeypatch):
    monkeypatch.setattr(_sweep_costs, "fastest", lambda *a, **k: pytest.fail("timed"))
    X = _features()
    pots = [PairPotentials("callable", X, func=lambda A, B: -np.abs(A[:, :1] - B[:, 0])),
            PairPotentials("precomputed", sparse.random(1500, 1500, 0.01, format="csr",
                                                        random_state=0))]
    for pot in pots:
        assert sweep_costs(pot) == rough_sweep_costs(pot)
    assert sweep_costs(pots[1]).fixed == np.inf  # sparse potentials are never raced
    monkeypatch.setenv(_calibration.MEASURE_ENV, "0")
    pot = PairPotentials("euclidean", X)
    assert sweep_costs(pot) == rough_sweep_costs(pot) and not sweep_costs(pot).measured
    assert not store.exists()
    # Too few mentions for a cluster to be raced: nothing to measure.
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    small = PairPotentials("euclidean", X[:20])
    assert sweep_costs(small) == rough_sweep_costs(small)


def _heavy(seed=0):
    rng = np.random.default_rng(seed)
    sizes = [400, 300, 200, 100] + [2] * 50
    centres = rng.normal(size=(len(sizes), 4)) * 3.0
    return np.concatenate([c + 0.15 * rng.normal(size=(s, 4)) for c, s in zip(centres, sizes,
                                                                               strict=True)])


@pytest.mark.parametrize(("costs", "races"), [((0.0, 0.0, 1.0, 0.0), True),
                                              ((np.inf, 0.0, 1.0, 0.0), False)])
def test_auto_follows_the_costs_of_the_service(monkeypatch, costs, races):
    # Free races: every update with a cluster too large to be read whole races; a race of
    # infinite fixed cost: none does (the exact updates). Negative control of each other.
    monkeypatch.setattr(_gibbs, "sweep_costs", lambda pot: SweepCosts(*costs, 0.2))
    est = CorefGibbsClusterer(n_sweeps=3, random_state=0).fit(_heavy())
    assert (est.n_races_trace_[1:].sum() > 0) == races


def test_auto_never_races_sparse_potentials_and_racing_does():
    # Four entities of 60 and every pair within them stored: "racing" races (clusters of more
    # than 2 m1 stored neighbours), "auto" never does, with the draws of the exact updates.
    y = np.repeat(np.arange(4), 60)
    same = (y[:, None] == y[None, :]) & ~np.eye(y.size, dtype=bool)
    M = sparse.csr_matrix(np.where(same, 2.0, 0.0))
    fits = {method: CorefGibbsClusterer(metric="precomputed", method=method, n_sweeps=4,
                                        random_state=0).fit(M)
            for method in ("auto", "exact", "racing")}
    assert fits["racing"].n_races_ > 0 and fits["auto"].n_races_ == 0
    np.testing.assert_array_equal(fits["auto"].labels_trace_, fits["exact"].labels_trace_)
