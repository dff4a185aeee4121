import os

import numpy as np
import pytest

# Statistical tests are seeded; keep BLAS single-threaded so two pytest workers share 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Plans of speed (the Taylor-proxy plan) follow fixed costs in the tests, not costs measured on
# the machine: a seeded test draws the same on every machine and in every order of the tests.
# tests/algorithms/test_glm_plan.py turns measuring on, with a store of each test's own.
os.environ["SKSUBSAMPLE_MEASURE_COSTS"] = "0"

# A script that tests/test_faults.py runs in a process of its own, not a test module (importing
# it would run it).
collect_ignore = ["_interrupt_child.py"]


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: fixed per test, different across tests."""
    seed = np.frombuffer(request.node.nodeid.encode(), dtype=np.uint8).astype(np.uint64)
    return np.random.default_rng([int(s) for s in seed[-32:]])
