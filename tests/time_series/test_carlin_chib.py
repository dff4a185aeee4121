"""The compiled Carlin–Chib sweep against a reference composed of the package's public pieces,
and the racing steps' error against the exact steps."""

import json

import numpy as np
import pytest
from scipy import stats

from sksubsample.datasets import simulate_arch
from sksubsample.time_series import _chain_model, _chains, _laplace, _sweep
from sksubsample.time_series._arch_target import ARCHTarget, arch_design
from sksubsample.time_series._sgld import sgld_step_size

from ._reference import reference_sweep

ORDERS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def problem():
    r = simulate_arch(2500, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=0)
    r = r - r.mean(axis=0)
    y, z = arch_design(r, max(ORDERS))
    targets = [ARCHTarget(y, z, q) for q in ORDERS]
    fits = [_laplace.laplace_fit(t, np.zeros(t.dim)) for t in targets]
    return targets, fits


def _model(problem, method, **options):
    targets, fits = problem
    options = {"delta": 0.05, "batch_size": 50, "control_variates": True, **options}
    return _chain_model.build_model(targets, fits, method=method, **options)


@pytest.mark.parametrize("method", ["racing", "exact"])
def test_compiled_sweep_is_the_law_of_the_interpreted_pieces(problem, method):
    """For the same generator state, the compiled sweep draws what sample_discrete (racing or
    exact), mh_step with the SGLD proposal and the racing or Metropolis test, and the
    pseudo-prior draws give, sweep after sweep."""
    targets, fits = problem
    model = _model(problem, method)
    work = _sweep.new_work(model)
    races = _sweep.new_races(model, work)
    log_pi = model.log_adjusted_prior0.copy()  # (writable, as the chains pass it: one kernel)
    log_eps = np.log([sgld_step_size(int(d)) for d in model.dims]) - 0.5
    xs = [_chains.initial_state(model, np.random.default_rng(1)) for _ in range(2)]
    rngs = [np.random.default_rng(7) for _ in range(2)]
    accepted = 0
    for _ in range(40):
        got = _sweep.sweep(rngs[0], model, xs[0], log_pi, log_eps, work, races)
        q, acc = reference_sweep(model, targets, fits, xs[1], log_pi, log_eps, rngs[1])
        assert (int(got[0]), bool(got[1])) == (q, acc)
        accepted += acc
    assert 5 < accepted < 40  # both outcomes of the MH test were exercised
    np.testing.assert_allclose(xs[0], xs[1], rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def chain_states(problem):
    """400 states of a racing chain (every order's parameters) and its fixed π̃ and ε."""
    model = _model(problem, "racing")
    adaptation = _chains.adapt_chain(model, 300, np.random.default_rng(0))
    result = _chains.sample_chain(model, adaptation.log_adjusted_prior, adaptation.log_step_size,
                             400, 0, np.random.default_rng(1))
    states = np.zeros((400, *model.mean.shape))
    col = model.n_orders
    for j, d in enumerate(model.dims):
        states[:, j, :d] = np.log(np.expm1(result.draws[:, col:col + d]))
        col += d
    return states, adaptation.log_adjusted_prior, adaptation.log_step_size


def _error_counts(model, chain_states):
    states, log_pi, log_eps = chain_states
    checks = _chains.race_checks(model, states, log_pi, log_eps, np.arange(len(states)) * 7 + 3)
    tested = checks[:, 2] >= 0
    return (int(np.sum(checks[:, 0] != checks[:, 1])), len(states),
            int(np.sum(checks[tested, 2] != checks[tested, 3])), int(tested.sum()),
            checks[:, 4].mean() / (model.n_orders * model.n_terms))


def test_racing_steps_err_at_most_delta(problem, chain_states):
    """Racing Gibbs draws and racing MH decisions against the exact ones with the same
    randomness, at states of a chain: each error count is binomial with a rate at most δ, so a
    count whose one-sided binomial p-value under δ is below 1e-4 fails. The racing draws touch
    a fraction of the data (else the check would be vacuous)."""
    delta = 0.05
    model = _model(problem, "racing", delta=delta)
    gibbs, n, mh, n_tests, touched = _error_counts(model, chain_states)
    print(f"Gibbs errors {gibbs}/{n}, MH errors {mh}/{n_tests}, Gibbs data {touched:.3f}")
    assert stats.binom.sf(gibbs - 1, n, delta) > 1e-4
    assert stats.binom.sf(mh - 1, n_tests, delta) > 1e-4
    assert n_tests > 300
    assert touched < 0.5


def test_race_error_check_detects_a_wrong_race(problem, chain_states):
    """Negative control of the same check: races with δ = 0.95 and without control variates
    (a bound near 0 on heavy-tailed rewards) err far more often than 5 %."""
    model = _model(problem, "racing", delta=0.95, control_variates=False)
    gibbs, n, mh, n_tests, _ = _error_counts(model, chain_states)
    print(f"Gibbs errors {gibbs}/{n}, MH errors {mh}/{n_tests}")
    assert stats.binom.sf(gibbs - 1, n, 0.05) < 1e-4
    assert stats.binom.sf(mh - 1, n_tests, 0.05) < 1e-4


def test_sample_more_continues_the_chain_exactly(problem):
    model = _model(problem, "racing")
    log_pi = model.log_adjusted_prior0.copy()  # (writable, as the chains pass it: one kernel)
    log_eps = np.log([sgld_step_size(int(d)) for d in model.dims]) - 0.5
    whole = _chains.sample_chain(model, log_pi, log_eps, 60, 8, np.random.default_rng(3))
    first = _chains.sample_chain(model, log_pi, log_eps, 25, 8, np.random.default_rng(3))
    rest = _chains.continue_chain(model, log_pi, log_eps, 35, first.state)
    np.testing.assert_array_equal(np.concatenate([first.draws, rest.draws]), whole.draws)


def test_auto_races_at_the_measured_bail_ratio_stored_once(problem, tmp_path, monkeypatch):
    """``method="auto"`` asks the cost service: with measuring on, the ARCH kernels are timed
    once for this kind of data and stored, and the races bail at the measured ratio; with
    measuring off, at the rough ratio, the same on every machine."""
    from sksubsample.algorithms import _calibration, _race_costs

    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    monkeypatch.setattr(_calibration, "_MEMO", {})
    model = _model(problem, "auto")
    entries = json.loads((tmp_path / _calibration.STORE_NAME).read_text())["entries"]
    [(key, costs)] = [(k, v) for k, v in entries.items() if "|race|arch|" in k]
    assert f"orders{len(ORDERS)}" in key and costs["exact"] > 0 and costs["setup"] > 0
    assert model.racing and model.gibbs_cv
    measured_ratio = costs["race"] / costs["exact"]
    assert model.gibbs_race.bail_ratio == pytest.approx(measured_ratio)
    assert model.mh_race.bail_ratio == pytest.approx(measured_ratio)
    # Read from the store by a later fit (nothing timed: a timing would call fastest).
    _calibration._MEMO.clear()
    monkeypatch.setattr(_race_costs, "fastest", lambda *a, **k: pytest.fail("timed again"))
    assert _model(problem, "auto").gibbs_race.bail_ratio == model.gibbs_race.bail_ratio
    monkeypatch.setenv(_calibration.MEASURE_ENV, "0")
    rough = _model(problem, "auto")
    assert rough.gibbs_race.bail_ratio == _race_costs.ROUGH_BAIL_RATIO["arch"]
    assert _model(problem, "racing").gibbs_race.bail_ratio == 0.0
