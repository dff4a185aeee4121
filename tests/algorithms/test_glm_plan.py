"""The Taylor-proxy plan: costs measured once and stored, the cheapest plan by those costs,
and what the estimator reports of it. (Choices of speed only: no timing is asserted; the
benchmarks measure how good the choices are.)"""

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.algorithms import _calibration
from sksubsample.algorithms.glm import GLMTarget, GLMTaylorExpansion, _costs, _expansion
from sksubsample.diagnostics import ConvergenceWarning


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store of measured costs of the test's own (nothing measured or read before)."""
    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path / "costs"))
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    monkeypatch.setattr(_calibration, "_MEMO", {})
    return tmp_path / "costs" / _calibration.STORE_NAME


def _problem(n, d, seed=0, sparse_density=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if sparse_density is not None:
        X *= rng.random((n, d)) < sparse_density
    w = rng.standard_normal(d) / math.sqrt(d)
    y = np.where(rng.random(n) < special.expit(X @ w + 0.3), 1.0, -1.0)
    return np.column_stack([X, np.ones(n)]), y


def _reference(X, y):
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=100.0, fit_intercept=False, tol=1e-10).fit(X, y)
    return lr.coef_.ravel().astype(np.float32).astype(np.float64)


# ----------------------------------------------------------------------------- the store


def test_a_measurement_is_made_once_then_read_from_the_store(store, monkeypatch):
    calls = []

    def measure():
        calls.append(1)
        return {"row": 1.25e-7, "sizes": [1, 4]}

    value, seconds = _calibration.measured("kind-a", measure)
    assert value == {"row": 1.25e-7, "sizes": [1, 4]} and seconds >= 0.0 and len(calls) == 1
    assert store.exists()
    # Another process: nothing in memory, the store is read and nothing is measured.
    monkeypatch.setattr(_calibration, "_MEMO", {})
    again, seconds = _calibration.measured("kind-a", measure)
    assert again == value and seconds == 0.0 and len(calls) == 1
    # Another key is measured.
    _calibration.measured("kind-b", measure)
    assert len(calls) == 2


def test_a_store_of_other_sources_is_not_read(store, monkeypatch):
    _calibration.measured("kind", lambda: {"row": 1.0})
    monkeypatch.setattr(_calibration, "_MEMO", {})
    monkeypatch.setattr(_calibration, "sources_digest", lambda: "another version")
    value, _ = _calibration.measured("kind", lambda: {"row": 2.0})
    assert value == {"row": 2.0}


def test_the_store_is_in_the_user_cache_not_the_package(monkeypatch, tmp_path):
    import sksubsample

    monkeypatch.delenv(_calibration.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _calibration.store_paths() == [tmp_path / "sksubsample" / _calibration.STORE_NAME]
    package = Path(sksubsample.__file__).resolve().parent
    assert not any(package in path.resolve().parents for path in _calibration.store_paths())
    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path / "elsewhere"))
    assert _calibration.store_paths() == [tmp_path / "elsewhere" / _calibration.STORE_NAME]


def test_without_a_writable_store_measurements_last_for_the_process(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")
    # A folder under a file (as in a read-only home): neither the store nor its lock can be
    # created; nor can the fallback folder in the temporary folder (a file there too).
    monkeypatch.setenv(_calibration.CACHE_ENV, str(blocked / "sub"))
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    monkeypatch.setattr(_calibration, "_MEMO", {})
    monkeypatch.setattr(_calibration, "_WARNED", set())
    calls = []
    with pytest.warns(_calibration.CostCacheWarning, match="kept for it only"):
        for _ in range(2):
            value, _ = _calibration.measured("kind", lambda: calls.append(1) or {"row": 3.0})
            assert value == {"row": 3.0}
    assert len(calls) == 1


# ----------------------------------------------------------------------------- the costs


def test_costs_are_measured_once_per_kind_of_data(store):
    X, y = _problem(20_000, 5)
    target = GLMTarget(X, y, 10.0)
    reference = np.zeros(target.n_features)
    first = _costs.plan_costs(target, reference, n_steps=100_000)
    assert first.measured and first.probe_seconds > 0.0
    # It times the kernels' specialisations the chain runs (the model's proxies' reference is
    # read-only), not others that a first measuring fit would compile for itself alone.
    for timed in (_costs._time_minibatches, _costs._time_rows, _costs._time_exact_sums):
        assert timed.signatures and not any(sig[8].mutable for sig in timed.signatures)
    assert all(s > 0 for s in first.minibatch + first.mapped_minibatch + first.stratum)
    assert math.isnan(first.cubic_setup_row)  # no third order asked for
    # The same kind of data (other values, a few more rows): read back, not measured.
    X2, y2 = _problem(21_000, 5, seed=1)
    second = _costs.plan_costs(GLMTarget(X2, y2, 10.0), reference,
                               n_steps=100_000)
    assert second.probe_seconds == 0.0
    assert second._replace(probe_seconds=first.probe_seconds) == first
    # Another kind (CSR rows of a fifth of the width): measured.
    Xs, ys = _problem(20_000, 5, sparse_density=0.2)
    from scipy import sparse

    third = _costs.plan_costs(GLMTarget(sparse.csr_matrix(Xs), ys, 10.0), reference,
                              n_steps=100_000)
    assert third.probe_seconds > 0.0
    assert _costs.data_kind(GLMTarget(sparse.csr_matrix(Xs), ys, 10.0)) != _costs.data_kind(
        target)


def test_the_same_rows_in_memory_and_in_a_memory_map_are_costed_and_planned_alike(
        store, tmp_path, monkeypatch):
    # Rows beyond the timed span: the costs are timed on the first rows, read from the
    # store (the memory map) or seen where they are (in memory).
    monkeypatch.setattr(_costs, "TIMED_SPAN_BYTES", 1 << 20)
    X, y = _problem(40_000, 5)
    X = X[:, :-1].astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    in_memory, stored = GLMTarget(X, y, 10.0, intercept=True), GLMTarget(mapped, y, 10.0,
                                                                          intercept=True)
    assert _costs.data_kind(in_memory) == _costs.data_kind(stored)
    design, signs, weights, n = _costs._timed_rows(stored)
    assert 0 < n < X.shape[0] and _costs._footprint(stored, n) <= _costs.TIMED_SPAN_BYTES
    memory_rows = _costs._timed_rows(in_memory)
    assert memory_rows[3] == n
    np.testing.assert_array_equal(design[0], memory_rows[0][0])
    np.testing.assert_array_equal(signs, memory_rows[1])
    assert weights.size == memory_rows[2].size == 0  # (unweighted)
    assert design[0].dtype == memory_rows[0][0].dtype == in_memory.design[0].dtype
    # Measured once (from the memory map), read back for the rows in memory: one plan.
    reference = np.zeros(in_memory.n_features)
    first = _costs.plan_costs(stored, reference, n_steps=100_000)
    second = _costs.plan_costs(in_memory, reference, n_steps=100_000)
    assert first.measured and first.probe_seconds > 0.0 and second.probe_seconds == 0.0
    assert second._replace(probe_seconds=first.probe_seconds) == first
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = [BayesianLogisticRegressionMH(n_draws=1000, n_warmup=500, n_chains=1,
                                             random_state=0).fit(rows, y)
                for rows in (mapped, X)]
    plans = [fit.plan_._replace(probe_seconds=0.0) for fit in fits]
    assert plans[0].measured and plans[0] == plans[1]
    # The negative control: other rows (a tenth of the width) are another kind.
    assert _costs.data_kind(GLMTarget(X[:, :1], y, 10.0)) != _costs.data_kind(in_memory)


def test_with_measuring_off_every_fit_plans_with_the_rough_model(store, monkeypatch):
    monkeypatch.setenv(_calibration.MEASURE_ENV, "0")
    X, y = _problem(20_000, 5)
    target = GLMTarget(X, y, 10.0)
    costs = _costs.plan_costs(target, np.zeros(6), n_steps=100_000)
    assert not costs.measured and not store.exists()
    assert costs == _costs.rough_costs(target)
    # The negative control: measuring on, the same fit measures.
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    assert _costs.plan_costs(target, np.zeros(6),
                             n_steps=100_000).measured


def test_a_fit_too_small_to_repay_a_measurement_plans_with_the_rough_model(store):
    X, y = _problem(300, 3)
    target = GLMTarget(X, y, 10.0)
    costs = _costs.plan_costs(target, np.zeros(4), n_steps=1000)
    assert not costs.measured and costs.probe_seconds == 0.0 and not store.exists()
    assert costs == _costs.rough_costs(target)


def test_interpolated_costs_grow_with_the_rows():
    costs = _costs.PlanCosts((1, 4, 16), (1e-6, 2e-6, 5e-6), (2e-6, 3e-6, 7e-6),
                             (1e-7, 4e-7, 2e-6), 5e-8, 1e-8, 1e-8, math.nan, math.nan)
    sizes = [1, 2, 3, 4, 10, 16, 64]
    for mapped in (False, True):
        seconds = [costs.minibatch_seconds(s, mapped) for s in sizes]
        assert seconds == sorted(seconds)
    assert costs.minibatch_seconds(64, False) == pytest.approx(4 * 5e-6)
    assert costs.stratum_seconds(0) == 0.0
    assert costs.stratum_seconds(4) == pytest.approx(4e-7)


# ----------------------------------------------------------------------------- the plan


def _with_costs(monkeypatch, **changes):
    """Plan with the rough model's costs, changed as given (the plan's logic alone)."""

    def fake(target, reference, n_steps, cubic_setup=None):
        return _costs.rough_costs(target, cubic_setup is not None)._replace(**changes)

    monkeypatch.setattr(_expansion, "plan_costs", fake)


@pytest.fixture(scope="module")
def data():
    X, y = _problem(30_000, 4)
    return X, y, _reference(X, y)


def test_the_plan_follows_the_costs(monkeypatch, data):
    X, y, reference = data
    target = GLMTarget(X, y, 10.0)
    # A third-order set-up that costs nothing: the smaller minibatches win.
    _with_costs(monkeypatch, cubic_setup_row=0.0, cubic_step=0.0)
    cheap = GLMTaylorExpansion(target, reference, n_steps=2000, n_warmup_steps=1000)
    # One that costs a second per row: never worth it.
    _with_costs(monkeypatch, cubic_setup_row=1.0)
    dear = GLMTaylorExpansion(target, reference, n_steps=2000, n_warmup_steps=1000)
    assert (cheap.order, dear.order) == (3, 2)
    assert cheap.plan.rows_per_step < dear.plan.rows_per_step
    assert dear.plan.setup_seconds == 0.0
    assert cheap.plan.seconds <= dear.plan.seconds
    # The plan is what the expansion runs.
    for expansion in (cheap, dear):
        k = 0 if expansion.strata is None else expansion.strata.exact.size
        assert (expansion.plan.order, expansion.plan.n_exact_rows) == (expansion.order, k)
        assert expansion.planned_terms == expansion.plan.rows_per_step


def test_a_longer_run_never_plans_a_dearer_step(monkeypatch, data):
    """The plan minimises set-up + steps x step cost over a finite set of plans: its predicted
    cost grows with the steps asked for, and its cost per step never does (a longer run
    affords more set-up for cheaper steps, never the reverse)."""
    X, y, reference = data
    target = GLMTarget(X, y, 10.0)
    warmup = 1000
    # A third-order set-up that pays for itself after 10 000 steps past warm-up: what each
    # order's best plan saves per step, with a free set-up.
    _with_costs(monkeypatch, cubic_setup_row=0.0)
    second, third = (GLMTaylorExpansion(target, reference, order=order, n_steps=warmup + 1,
                                        n_warmup_steps=warmup).plan for order in (2, 3))
    saving = (warmup * (second.warmup_step_seconds - third.warmup_step_seconds)
              + 10_000 * (second.step_seconds - third.step_seconds))
    assert saving > 0.0
    _with_costs(monkeypatch, cubic_setup_row=saving / target.n_data)
    plans = [GLMTaylorExpansion(target, reference, n_steps=warmup + n,
                                n_warmup_steps=warmup).plan
             for n in (0, 300, 1000, 3000, 10_000, 30_000, 100_000, 1_000_000)]
    seconds = [p.seconds for p in plans]
    steps = [p.step_seconds for p in plans]
    assert seconds == sorted(seconds)
    assert steps == sorted(steps, reverse=True)
    assert [p.order for p in plans[:4]] == [2] * 4 and [p.order for p in plans[5:]] == [3] * 3
    # Warm-up steps read more rows than the steps after it.
    assert all(p.warmup_rows_per_step >= p.rows_per_step for p in plans)



def test_the_exact_test_is_a_candidate_and_wins_where_no_minibatch_repays(monkeypatch, data):
    """The plan weighs the exact test (the log-likelihood ratios of every row at every step,
    and the full-data gradients of its proposal) against its cheapest bounded plan, whose
    steps that make Barker's decision count at half an exact step's worth. A bounded plan
    cheaper by that measure stays; when a minibatch costs what a row does N times over
    (negative control of the cost model: a minibatch never repays), or the exact sums cost
    nothing next to a minibatch, the plan is exact and describes the exact test; the same
    exact sums with gradients that cost too much leave the plan bounded."""
    from sksubsample.algorithms.glm._plan import BARKER_EFFICIENCY

    X, y, reference = data
    target = GLMTarget(X, y, 10.0)
    _with_costs(monkeypatch)
    bounded = GLMTaylorExpansion(target, reference, n_steps=2000, n_warmup_steps=1000)
    assert not bounded.plan.exact and bounded.plan.rows_per_step < target.n_data / 10
    effective = bounded.plan.seconds / BARKER_EFFICIENCY  # every pair subsamples here
    assert effective < bounded.plan.n_steps * target.n_data * _costs.rough_costs(
        target).exact_row
    # The exact sums cheaper per step than the bounded plan's effective step: exact.
    rough = _costs.rough_costs(target)
    row = 0.5 * rough.minibatch[0] / target.n_data
    _with_costs(monkeypatch, exact_row=row, gradient_row=row)
    exact = GLMTaylorExpansion(target, reference, n_steps=2000, n_warmup_steps=1000)
    plan = exact.plan
    assert plan.step_seconds == pytest.approx(row * target.n_data)
    with_gradients = GLMTaylorExpansion(target, reference, n_steps=2000, n_warmup_steps=1000,
                                        exact_gradients=1.8)
    assert with_gradients.plan.exact
    assert with_gradients.plan.step_seconds == pytest.approx(2.8 * row * target.n_data)
    too_many = GLMTaylorExpansion(target, reference, n_steps=2000, n_warmup_steps=1000,
                                  exact_gradients=1e4 * rough.minibatch[-1] / (row * X.shape[0]))
    assert not too_many.plan.exact
    assert plan.exact and exact.bound is None and exact.strata is None
    assert (plan.order, plan.n_exact_rows) == (2, 0)
    assert plan.rows_per_step == plan.warmup_rows_per_step == exact.planned_terms == X.shape[0]
    assert exact.residual_variance_bound(reference, reference + 0.01) is None


def test_where_the_plan_is_exact_the_default_draws_as_the_metropolis_test():
    """A small design whose bound allows no minibatch (breast cancer, 569 x 30, standardised):
    the default fit's plan is exact, the
    chains run the exact Metropolis test with the full-data gradient, and the draws are
    those of ``test="metropolis"`` bit for bit; a large concentrated design keeps its bounded
    plan (and its draws differ)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import scale

    X_small, y_small = load_breast_cancer(return_X_y=True)
    X_large, y_large = _problem(30_000, 3)
    kw = {"n_draws": 60, "n_warmup": 60, "n_chains": 1, "random_state": 2}
    for X, y, exact in ((scale(X_small), y_small, True), (X_large[:, :-1], y_large, False)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            default = BayesianLogisticRegressionMH(**kw).fit(X, y)
            metropolis = BayesianLogisticRegressionMH(test="metropolis", **kw).fit(X, y)
        assert default.plan_.exact is exact
        assert np.array_equal(default.coef_samples_, metropolis.coef_samples_) is exact

def test_the_same_fit_plans_alike_and_draws_alike(store):
    """Measured costs are stored, so a second fit (as another process would) plans on the same
    numbers: same plan, same draws."""
    X, y = _problem(40_000, 3)
    # 600 steps: reading all 40 000 rows at each would take over a second (measured costs).
    kw = {"n_draws": 200, "n_warmup": 100, "n_chains": 2, "random_state": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        first = BayesianLogisticRegressionMH(**kw).fit(X[:, :-1], y)
        _calibration._MEMO.clear()
        second = BayesianLogisticRegressionMH(**kw).fit(X[:, :-1], y)
    assert first.plan_.measured and first.plan_.probe_seconds > 0.0
    assert second.plan_.probe_seconds == 0.0
    assert first.plan_._replace(probe_seconds=0.0) == second.plan_
    np.testing.assert_array_equal(first.coef_samples_, second.coef_samples_)


# ----------------------------------------------------------------------------- the estimator


def test_the_estimator_reports_its_plan_before_the_chains_run():
    X, y = _problem(3000, 3)
    seen = {}

    class Watching(BayesianLogisticRegressionMH):
        def _sample(self, *args, **kwargs):
            seen["plan"], seen["desc"] = self.plan_, kwargs["desc"]
            return super()._sample(*args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = Watching(n_draws=50, n_warmup=30, n_chains=2, random_state=0).fit(X[:, :-1], y)
        exact = BayesianLogisticRegressionMH(test="metropolis", n_draws=20, n_warmup=10,
                                             n_chains=1, random_state=0).fit(X[:, :-1], y)
    plan = clf.plan_
    assert seen["plan"] is plan
    assert (plan.n_steps, plan.n_warmup_steps) == (2 * 80, 2 * 30)
    assert plan.order in (2, 3) and plan.rows_per_step >= plan.n_exact_rows
    assert f"order-{plan.order}" in seen["desc"] and "rows/step" in seen["desc"]
    assert exact.plan_ is None
