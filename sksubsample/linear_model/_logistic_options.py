"""The logistic estimator's choices of test options and proposal gradient."""

from __future__ import annotations

import inspect

from ..algorithms.mh import ACCEPTANCE_TESTS, expected_gradients

__all__ = ["TESTS", "exact_plan_gradients", "proposal_gradient", "test_options"]

TESTS = (*sorted(ACCEPTANCE_TESTS), "racing-normal", "racing-ebs")


def _takes_options(test):
    """Which of the estimator's test options (``batch_size``, ``delta``) a named test takes."""
    name = "racing" if test.startswith("racing") else test
    options = set(inspect.signature(ACCEPTANCE_TESTS[name]).parameters)
    if "first_batch" in options:
        options.add("batch_size")
    if "epsilon" in options:  # Austerity's tolerance
        options.add("delta")
    return options & {"batch_size", "delta"}


# Default initial minibatch (Seita et al. 2017, Sections 6.1-6.2 use m = 100 for every test).
_DEFAULT_BATCH = 100
# gradient="auto" uses the full-data gradient up to this many cells of the design matrix, and
# only when the test reads every row anyway: small data sets are where the posterior is least
# Gaussian, so where the proxy's gradient misleads most, and there a gradient costs about what
# the test does. Where a bounded test subsamples, even a third of the rows, a full gradient
# costs a pass over the data per leapfrog step: at N = 10⁴, d = 20 (3 100 rows per step
# planned) it tripled a step's cost for no more ESS per draw (0.28 against 0.26), and the fit
# lost 1.5x per effective draw to the exact test (benchmarks/plan_vs_exact.py).
_EXACT_GRADIENT_CELLS = 1_000_000
_EXACT_GRADIENT_DATA_FRACTION = 1.0
# Below this many cells a full-data gradient costs about what the rest of a compiled step does,
# whatever the test reads: tiny data sets always get it.
_ALWAYS_EXACT_GRADIENT_CELLS = 10_000


def test_options(test, batch_size, delta, n_data):
    """Options of the acceptance test ``test`` (a name or a callable) with the estimator's
    ``batch_size`` and ``delta``, validated against the data size before any work."""
    takes = set() if callable(test) else _takes_options(test)
    options_given = {"batch_size": batch_size, "delta": delta}
    for name in ("batch_size", "delta"):
        if options_given[name] is not None and name not in takes:
            raise ValueError(
                f"{name} must be None with test={test!r} (exact tests look at all N "
                f"data, 'bounded_barker' sizes its own minibatch, a callable test takes no "
                f"options), got {options_given[name]!r}"
            )
    options = {}
    if "batch_size" in takes:
        if batch_size is not None and batch_size > n_data:
            raise ValueError(
                f"batch_size={batch_size} exceeds the number of samples ({n_data})"
            )
        options["batch_size"] = (min(_DEFAULT_BATCH, n_data) if batch_size is None
                                 else int(batch_size))
    if delta is not None and test == "austerity":
        # Austerity's tolerance is the per-look ε of its t-test (Korattikara et al.).
        options["test_options"] = {"epsilon": delta}
    elif delta is not None:
        options["delta"] = delta
    return options


def proposal_gradient(gradient, n_cells, n_data, planned_terms):
    """The proposal gradient: exact where a full-data gradient costs little (``"auto"``):
    a small design, and a test that reads every row at every step
    (``planned_terms``: the bounded test's planned terms; N for the other tests)."""
    if gradient != "auto":
        return gradient
    reads_all = planned_terms >= _EXACT_GRADIENT_DATA_FRACTION * n_data
    if n_cells <= _ALWAYS_EXACT_GRADIENT_CELLS or (n_cells <= _EXACT_GRADIENT_CELLS
                                                   and reads_all):
        return "exact"
    return "proxy"


def exact_plan_gradients(proposal, gradient, n_cells, n_data):
    """Full-data gradients a step of the chains is expected to take if the plan is exact: the
    proposal's (:func:`~sksubsample.algorithms.mh.expected_gradients`) where its gradient is
    then the full-data one (:func:`proposal_gradient` of a test that reads every row), none
    where it is the proxy's."""
    if proposal_gradient(gradient, n_cells, n_data, n_data) != "exact":
        return 0.0
    return expected_gradients(proposal)
