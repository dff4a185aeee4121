"""Rows of ``racing_auto.py`` timed on two source trees of the package, side by side in one run.

A change to ``method="auto"``'s choices is judged by the ratios of ``racing_auto.py`` (CPU time
of the default over exact sampling, over racing) on the tree before it and the tree after it.
Timed in separate runs, those ratios drift with the load of a shared machine; here each row is
timed in a fresh process per tree, the trees alternating row after row and round after round
(the first tree first in even rounds, second in odd ones), so that a slow spell hits both. Each
tree's process uses ``racing_auto.py`` of its own tree and a store of measured costs of its own
(fresh at the start: the measurement is part of the row's first, untimed, call).

Rows: the §5.1 problem at σ = 1e-3 and 1e-5 with compiled factors, the Gaussian mean and the
logistic rewards with compiled factors, the §5.1 problem at σ = 1e-3 and the Gaussian mean as
NumPy callables (``racing_wall_time.problems``), and ARCH order selection on the simulated
series (``racing_auto.arch_row``).

Run ``OMP_NUM_THREADS=1 python benchmarks/racing_auto_trees.py OLD_TREE [NEW_TREE]`` (a tree
is a checkout holding ``sksubsample`` and ``benchmarks``, with a ``.venv`` of its own whose
Python imports that tree's package, e.g. ``git worktree add --detach /tmp/old main`` then
``python -m venv /tmp/old/.venv && /tmp/old/.venv/bin/pip install -e /tmp/old``). About 30
minutes with the default two rounds. Writes ``benchmarks/results/racing_auto_trees.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROWS = ("5.1 sigma=1e-03 compiled", "Gaussian compiled", "5.1 sigma=1e-05 compiled",
        "logistic d=20 compiled", "5.1 sigma=1e-03 numpy", "Gaussian numpy",
        "ARCH simulated N=5000")

_CHILD = r'''
import contextlib, io, json, sys
tree, name, n_draws = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, tree + "/benchmarks")
import racing_auto
import sksubsample
from racing_wall_time import N_FACTORS, N_STATES, problems
assert sksubsample.__file__.startswith(tree), sksubsample.__file__
with contextlib.redirect_stdout(io.StringIO()):
    if name.startswith("ARCH"):
        from sksubsample.datasets import simulate_arch
        series = simulate_arch(5000, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=0)
        row = racing_auto.arch_row(name, series, 1000)
    else:
        factors = dict((n.replace("README", "Gaussian"), f)
                       for n, f in problems((1e-5, 1e-4, 1e-3)))[name]
        row = racing_auto.discrete_row(name, factors, N_FACTORS, N_STATES, n_draws)
print(json.dumps(row))
'''


def run_row(tree, name, n_draws, store):
    """The row ``name`` of ``racing_auto.py`` timed by ``tree``'s package in a fresh process."""
    env = dict(os.environ, OMP_NUM_THREADS="1", SKSUBSAMPLE_CACHE_DIR=str(store))
    done = subprocess.run([str(Path(tree) / ".venv" / "bin" / "python"), "-c", _CHILD,
                           str(tree), name, str(n_draws)],
                          capture_output=True, text=True, env=env, cwd=tree, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS)
    args = parser.parse_args(argv)
    trees = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}
    stores = Path(tempfile.mkdtemp(prefix="racing-auto-trees-"))
    began = time.time()
    rows = {name: {"old": [], "new": []} for name in args.rows}
    try:
        for round_ in range(args.rounds):
            for name in args.rows:
                order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
                for side in order:
                    row = run_row(trees[side], name, args.draws, stores / side)
                    rows[name][side].append(row)
                    print(f"round {round_} {name:<26} {side}: auto/exact "
                          f"{row['auto_over_exact']:.3f} auto/racing "
                          f"{row['auto_over_racing']:.3f} raced {row['auto_raced']:.2f}",
                          flush=True)
    finally:
        shutil.rmtree(stores, ignore_errors=True)
    summary = {name: {side: {key: [r[key] for r in runs]
                             for key in ("auto_over_exact", "auto_over_racing", "auto_raced")}
                      for side, runs in sides.items()}
               for name, sides in rows.items()}
    out = {"settings": {"trees": trees, "rounds": args.rounds, "draws": args.draws,
                        "timing": "racing_auto.py's, per tree in fresh processes, alternating"},
           "summary": summary, "rows": rows, "seconds": time.time() - began}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "racing_auto_trees.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path} ({out['seconds']:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
