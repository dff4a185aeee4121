import numpy as np

from sksubsample import demo


def test_racing_demo_runs_and_summarises(tmp_path):
    summary = demo.racing_demo(tmp_path, n_draws=300)
    assert (tmp_path / "racing_demo.png").stat().st_size > 10_000
    assert 0 < summary["fraction_of_data"] < 0.5
    assert np.isfinite(summary["wall_speedup"])
    # 300 draws from a correct sampler: the chi-square p-value is not tiny.
    assert summary["chi2_pvalue"] > 1e-3


def test_arch_demo_runs_and_summarises(tmp_path):
    import pytest

    pytest.importorskip("arch")
    summary = demo.arch_demo(tmp_path, n_jobs=1)
    assert (tmp_path / "arch_demo.png").stat().st_size > 5_000
    assert abs(sum(summary["order_posterior"]) - 1.0) < 1e-9
    assert np.all(np.isfinite(summary["order_posterior_se"]))
    assert 0 < summary["fraction_data_touched"] < 0.5


def test_coref_demo_runs_and_summarises(tmp_path):
    summary = demo.coref_demo(tmp_path, small=True)
    assert (tmp_path / "coref_demo.png").stat().st_size > 5_000
    # Heavy-tailed entities: racing reads fewer factors for the same clustering quality (the
    # guard of its normal approximation keeps at least 29 factors, then a tenth, of each
    # raced cluster); the default races only where that pays, which at d = 8 is nowhere.
    exact, racing = summary["synthetic"]["exact"], summary["synthetic"]["racing"]
    auto = summary["synthetic"]["auto"]
    assert exact["n_races"] == 0 and racing["n_races"] > 0
    assert racing["n_evaluations"] < 0.9 * exact["n_evaluations"]
    assert exact["f1"] > 0.9 and abs(racing["f1"] - exact["f1"]) < 0.02
    assert auto["n_races"] == 0 and auto["f1"] == exact["f1"]
    if summary["febrl"] is not None:
        # FEBRL entities have at most 6 records: nothing is raced, the chains coincide.
        exact, racing = summary["febrl"]["exact"], summary["febrl"]["racing"]
        assert racing["n_races"] == 0
        assert racing["n_evaluations"] == exact["n_evaluations"]
        assert racing["f1"] == exact["f1"] > 0.99


def test_compile_step_leaves_no_measurement_to_the_timed_fit(tmp_path, monkeypatch):
    # The demo compiles its kernels before timing anything; a path it misses would put
    # numba's one-time compilation (or a one-time measurement) into a printed speed-up. The
    # subsampled logistic fit is the one whose plan measures the machine's costs, once per
    # machine and kind of data: after the compile step, the demo's timed fit finds them stored.
    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.algorithms import _calibration

    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    X, y, _ = demo.synthetic_logistic_data()

    def timed_fit(store):
        monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path / store))
        monkeypatch.setattr(_calibration, "_MEMO", {})
        return BayesianLogisticRegressionMH(n_chains=4, n_jobs=1, random_state=0).fit(X, y)

    # Control: with an empty store the timed fit measures (its plan is that large).
    control = timed_fit("empty")
    assert control.plan_.measured and control.plan_.probe_seconds > 0.0
    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path / "compiled"))
    monkeypatch.setattr(_calibration, "_MEMO", {})
    assert demo.compile_kernels() > 0.0
    timed = timed_fit("compiled")
    assert timed.plan_.measured and timed.plan_.probe_seconds == 0.0
