"""Two processes fitting at once with one empty cache folder, round after round.

Each round starts two processes at the same moment, each fitting the same
:class:`~sksubsample.BayesianLogisticRegressionMH` (40 000 rows, 3 features, 2 chains of
100 + 200 draws, ``random_state=4``: big enough that its plan is made on costs measured on this
machine) with ``SKSUBSAMPLE_CACHE_DIR`` pointing to a new, empty folder. The costs must be
measured once (one process measures, the other waits on the store's lock and reads), so that
both processes plan alike and draw alike. Printed per round: whether both processes succeeded,
whether they made the same plan (its predicted costs compared, not the time spent measuring)
and the same draws, whether each entry of the store written is valid, and the wall time.

Usage::

    python benchmarks/cache_two_processes.py --rounds 20 [--out results/cache_two_processes.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIT = r"""
import hashlib, json, warnings
import numpy as np
from scipy import special
from sksubsample import BayesianLogisticRegressionMH
rng = np.random.default_rng(0)
X = rng.standard_normal((40_000, 3))
y = (rng.random(40_000) < special.expit(X @ np.array([0.5, -0.3, 0.2]) + 0.3)).astype(int)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est = BayesianLogisticRegressionMH(n_draws=200, n_warmup=100, n_chains=2,
                                       random_state=4).fit(X, y)
print(json.dumps({"plan": repr(est.plan_._replace(probe_seconds=0.0)),
                  "probe_seconds": est.plan_.probe_seconds,
                  "draws": hashlib.sha256(est.coef_samples_.tobytes()).hexdigest()}))
"""


def one_round(folder):
    """Two fits at once sharing ``folder``: what each printed, or its error."""
    env = {**os.environ, "SKSUBSAMPLE_CACHE_DIR": str(folder),
           "SKSUBSAMPLE_MEASURE_COSTS": "1"}
    began = time.perf_counter()
    runs = [subprocess.Popen([sys.executable, "-c", FIT], env=env, cwd=folder.parent,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = []
    for run in runs:
        try:
            out, err = run.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()
            results.append({"error": "no end within 600 s"})
            continue
        results.append(json.loads(out.strip().splitlines()[-1]) if run.returncode == 0
                       else {"error": err.strip().splitlines()[-1]})
    return results, time.perf_counter() - began


def valid_store(path):
    """Whether the store at ``path`` is valid JSON whose every entry passes the check."""
    from sksubsample.algorithms._calibration import check_measurement

    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    entries = content.get("entries", {})
    return bool(entries) and all(check_measurement(v) is None for v in entries.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for k in range(args.rounds):
            folder = Path(root) / f"round{k}"
            folder.mkdir()
            (a, b), seconds = one_round(folder)
            ok = "error" not in a and "error" not in b
            row = {"round": k, "ok": ok, "seconds": round(seconds, 1),
                   "same_plan": ok and a["plan"] == b["plan"],
                   "same_draws": ok and a["draws"] == b["draws"],
                   "measured_by": sum(r.get("probe_seconds", 0) > 0 for r in (a, b)),
                   "valid_store": valid_store(folder / "measured-costs.json"),
                   "errors": [r["error"] for r in (a, b) if "error" in r]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {key: sum(r[key] for r in rows) for key in
               ("ok", "same_plan", "same_draws", "valid_store")}
    summary["rounds"] = len(rows)
    print(json.dumps(summary))
    if args.out is not None:
        args.out.write_text(json.dumps({"summary": summary, "rounds": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
