"""A fit from a memory map whose file is cut short during the fit, run by
tests/algorithms/test_truncated_map.py in a process of its own (a read past the end of a mapped file
kills a process that does not handle it).

Arguments: the folder to write the files in; the moment ("setup": right after the check of a
pass's second read unit, "chains": right after the third check of a chain's rows); whether the
store watches its reads ("watched", or "unwatched" for the negative control). The file is
truncated right after the check passed, in the window between the check and the read. Prints
one JSON line: the error raised (its type and message), or none.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.algorithms.stores import _files, _rows


def main(folder, moment, watched):
    folder = Path(folder)
    rng = np.random.default_rng(0)
    n, d = 600_000, 10
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X @ np.linspace(-1, 1, d) + rng.logistic(size=n) > 0).astype(np.int8)
    np.save(folder / "X.npy", X)
    np.save(folder / "y.npy", y)
    X = np.load(folder / "X.npy", mmap_mode="r")
    y = np.load(folder / "y.npy", mmap_mode="r")
    if not watched:
        _rows.watch = lambda *args, **kwargs: None
    checks = {"pass": 0, "chain": 0, "chains_began": False}
    check = _files.FileStamp.check

    def check_then_cut(self, rows, what="X"):
        check(self, rows, what)
        if what != "X":
            return
        if moment == "setup" and rows.startswith("rows "):
            checks["pass"] += 1
            cut = checks["pass"] == 2
        elif moment == "chains" and checks["chains_began"] and "rows from row" in rows:
            checks["chain"] += 1
            cut = checks["chain"] == 3
        else:
            cut = False
        if cut:
            os.truncate(self.path, 4096)

    class Fit(BayesianLogisticRegressionMH):
        def _sample(self, *args, **kwargs):  # after the set-up, before the chains
            checks["chains_began"] = True
            return super()._sample(*args, **kwargs)

    _files.FileStamp.check = check_then_cut
    try:
        Fit(n_draws=200, n_warmup=100, random_state=0).fit(X, y)
        found = None
    except Exception as exc:  # what the test checks
        found = {"type": type(exc).__name__, "message": str(exc)}
    print(json.dumps({"error": found, "checks": checks}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] == "watched")
