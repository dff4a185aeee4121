import os

import numpy as np
import pytest

# Statistical tests are seeded; keep BLAS single-threaded so two pytest workers share 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: fixed per test, different across tests."""
    seed = np.frombuffer(request.node.nodeid.encode(), dtype=np.uint8).astype(np.uint64)
    return np.random.default_rng([int(s) for s in seed[-32:]])
