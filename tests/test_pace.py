"""The measured projection of a run's time (sksubsample._progress.Pace): a run whose reported
steps put it past the threshold is warned about once, while it runs; a run that will end
soon, or whose chains report nothing, is not."""

import time
import warnings

import pytest

from sksubsample._progress import Pace, run_tasks
from sksubsample.diagnostics import CostWarning


def _slow_chain(seconds_per_step, n_steps, progress=None):
    for _ in range(n_steps):
        time.sleep(seconds_per_step)
        progress(1)
    return n_steps


def _quiet_chain(seconds, n_steps):
    time.sleep(seconds)
    return n_steps


@pytest.fixture
def quick_looks(monkeypatch):
    # (the run's first look after 0.3 s, and a threshold of 20 s: a chain of 0.05 s steps
    # projects 1 000 steps to 50 s, and 8 steps to 0.4 s)
    monkeypatch.setattr(Pace, "FIRST_LOOK_SECONDS", 0.3)
    monkeypatch.setattr(Pace, "WARN_SECONDS", 20.0)


def _run(chain_fn, steps_run, steps_per_chain, n_chains=1):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_tasks(chain_fn, (0.05, steps_run), [()] * n_chains, n_jobs=1,
                            progress=False, desc="Fit", steps_per_chain=steps_per_chain)
    assert results == [steps_run] * n_chains
    return [w for w in caught if issubclass(w.category, CostWarning)]


def test_a_run_projected_past_the_threshold_is_warned_about_once(quick_looks):
    # 16 steps of 0.05 s reported by a run of 2 x 1 000 steps: about 100 s projected.
    found = _run(_slow_chain, 16, 1000, n_chains=2)
    assert len(found) == 1
    message = str(found[0].message)
    assert "of their 2000 steps" in message and "minutes" in message
    assert "Ctrl-C" in message


def test_a_run_that_ends_soon_is_not_warned_about(quick_looks):
    # Negative control: the same steps, the run's own length.
    assert _run(_slow_chain, 16, 16) == []


def test_chains_that_report_nothing_give_no_projection(quick_looks):
    assert _run(_quiet_chain, 16, 1000) == []


def test_the_projection_is_the_measured_rate():
    pace = Pace(total_steps=1000, desc="Fit")
    pace.began -= 300.0  # 300 s since the run began, of which compiling and start-up
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not pace.look(10)  # the first report: the rate is measured from here
        pace.first = (pace.first[0] - 200.0, 10)  # 200 s later, 100 steps more:
        assert pace.look(110)  # 2 s a step, 890 steps left: about 33 minutes in all
        assert not pace.look(200)  # once only
    assert len(caught) == 1 and "about 35 minutes" in str(caught[0].message)
    fast = Pace(total_steps=1000, desc="Fit")
    fast.began -= 600.0  # a slow start (a cold compile) ...
    assert not fast.look(10)
    fast.first = (fast.first[0] - 100.0, 10)  # ... then 1 s for 100 steps
    assert not fast.look(110)  # about 10 s more: not warned about, whatever the start took
