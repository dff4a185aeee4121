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
    assert 0 < summary["fraction_data_touched"] < 1


def test_coref_demo_runs_and_summarises(tmp_path):
    summary = demo.coref_demo(tmp_path, n_sweeps=2)
    assert (tmp_path / "coref_demo.png").stat().st_size > 5_000
    assert summary["exact"]["f1"] > 0.9
    assert summary["racing"]["n_evaluations"] <= summary["exact"]["n_evaluations"]
