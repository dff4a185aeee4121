"""What a fit of the logistic estimator costs as the request grows: a grid of N, d and draws.

For every cell of N ∈ {10⁴, 10⁵, 10⁶, 10⁷}, d ∈ {5, 20, 100} features (plus an intercept),
draws per chain ∈ {100, 300, 1 000, 10 000} and a dense or a sparse (CSR) design,
:class:`BayesianLogisticRegressionMH` is fitted with its defaults (4 chains, 500 warm-up steps,
the bounded Barker test with Taylor control variates planned by measured costs) and the script
records

* the wall time of the whole ``fit`` (validation, MAP, proxies and their plan, warm-up,
  sampling, diagnostics), the median and the fastest of ``--repeats`` fits run in turn with the
  other draws of the same data, so that a smaller and a larger request see the same machine
  load;
* the smallest bulk ESS over the parameters and the min-ESS per second of the fit;
* the chain alone: ``sample_more`` continuing the fitted chains by as many draws as the cell
  asks, timed (no set-up, no warm-up), and its draws per second;
* the plan the fit chose (``plan_``: the proxies' order, the rows summed exactly, the rows a
  step is expected to read after and during warm-up, the predicted seconds), and the rows the
  steps actually read (decision minibatches after warm-up; every data term during warm-up,
  which includes the full-data gradients where ``gradient="auto"`` takes them).

``--layout dense-separable sparse-separable`` runs the same requests on nearly separable labels
(1 % on the wrong side of the true hyperplane; ``small_data.make_separable``).

A cell where a smaller request costs more than 1.1 times a larger one (same N, d and layout),
in the median wall time of the rounds, is reported as a cliff; the report also prints, per
group, the median of each request over the next larger one's. The data: d standard normal
features (sparse: each entry kept with probability 0.25), weights N(0, 20/d) and an
intercept of 0.5 in the logit, so that d = 20 dense is the data of ``logistic_peers.py`` (same
generator, same seed).

Each (N, d, layout) runs in a worker process of its own (``PYTHONPATH`` set to the tree,
``--baseline`` adds a second tree run side by side, its fits alternating with this tree's): the
worker builds the data once, fits once untimed (the compiled kernels' first call and, for a new
kind of data, the measurement of its costs), then answers the parent's requests. Cells are
cached in ``benchmarks/results/logistic_grid.json`` as they finish, so an interrupted run
resumes; ``--only-missing`` is the default, ``--rerun`` measures the selected cells again.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/logistic_grid.py                 # the whole grid
    OMP_NUM_THREADS=1 python benchmarks/logistic_grid.py --n 1000000 --d 20 --layout dense \\
        --draws 100 300 500 2000 --repeats 3 --rerun --name logistic_peers_draws
    OMP_NUM_THREADS=1 python benchmarks/logistic_grid.py --n 1000000 --d 20 --layout dense \\
        --draws 100 300 500 2000 --baseline /path/to/other/tree --name logistic_grid_peers
    python benchmarks/logistic_grid.py --report                        # table, plot, cliffs

Results: ``benchmarks/results/{name}.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
GRID_N = (10_000, 100_000, 1_000_000, 10_000_000)
GRID_D = (5, 20, 100)
GRID_DRAWS = (100, 300, 1000, 10_000)
LAYOUTS = ("dense", "sparse")
#: Layouts the grid runs only when asked (``--layout``): nearly separable labels on a dense or
#: a sparse design (``small_data.make_separable``, ``plan_vs_exact.make_sparse_separable``),
#: where the posterior is far from its Laplace approximation and the plan may read every row.
SEPARABLE_LAYOUTS = ("dense-separable", "sparse-separable")
N_CHAINS, N_WARMUP = 4, 500
DENSITY = 0.25
PRIOR_SCALE = 10.0
#: A smaller request may cost at most this much more than a larger one.
CLIFF = 1.1


def make_data(n, d, layout, seed=0):
    """The grid's data: for d = 20 dense, ``logistic_peers.make_data`` (same draws). A sparse
    design is built by blocks of rows (its entries kept with probability :data:`DENSITY`),
    so that no dense N x d array is formed. The layouts of :data:`SEPARABLE_LAYOUTS` take
    their own generators' draws."""
    if layout == "dense-separable":
        from small_data import make_separable  # (it imports this module)

        return make_separable(n, d, seed)
    if layout == "sparse-separable":
        from plan_vs_exact import make_sparse_separable

        return make_sparse_separable(n, d, seed)
    rng = np.random.default_rng(seed)
    if layout == "dense":
        X = rng.standard_normal((n, d))
        w = rng.standard_normal(d) * np.sqrt(20.0 / d)
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w + 0.5)))).astype(np.int64)
        return X, y
    from scipy import sparse

    w = rng.standard_normal(d) * np.sqrt(20.0 / d)
    blocks = []
    for start in range(0, n, 1 << 18):
        rows = min(n, start + (1 << 18)) - start
        block = rng.standard_normal((rows, d)) * (rng.random((rows, d)) < DENSITY)
        blocks.append(sparse.csr_matrix(block))
    X = sparse.vstack(blocks, format="csr")
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w + 0.5)))).astype(np.int64)
    return X, y


# ----------------------------------------------------------------------------- worker


def _plan_record(clf):
    """The plan the fit chose: ``plan_`` where the tree has it, else what its expansion says."""
    plan = getattr(clf, "plan_", None)
    if plan is not None:
        return {key: (float(value) if isinstance(value, (float, np.floating)) else value)
                for key, value in plan._asdict().items()}
    expansion = clf._sampler.args[0].proxy.expansion
    strata = getattr(expansion, "strata", None)
    return {"order": int(expansion.order),
            "n_exact_rows": 0 if strata is None else int(strata.exact.size),
            "rows_per_step": float(expansion.planned_terms)}


def worker(n, d, layout, seed, smallest):
    """Build the data, fit once untimed, then answer ``fit D W`` (draws and warm-up per chain)
    and ``more D W`` (continue the last fit by D draws) lines with one JSON line each."""
    from sksubsample import BayesianLogisticRegressionMH

    warnings.filterwarnings("ignore")
    X, y = make_data(n, d, layout, seed)
    fitted = None

    def fit(draws, warmup=N_WARMUP):
        clf = BayesianLogisticRegressionMH(prior_scale=PRIOR_SCALE, n_draws=draws,
                                           n_warmup=warmup, n_chains=N_CHAINS,
                                           random_state=seed)
        began, cpu = time.perf_counter(), time.process_time()
        clf.fit(X, y)
        return clf, time.perf_counter() - began, time.process_time() - cpu

    # Untimed: the compiled kernels' first call, and the cost measurement of a new kind of data
    # (the smallest request of the grid plans with measured costs whenever any does); then the
    # continuing chain's first call, which ``more`` times.
    warm, first, _ = fit(smallest)
    # Untimed too: the first call of the continuing chain (its compiled code loaded).
    warm.sample_more(1)
    print(json.dumps({"ready": True, "first_fit_seconds": first}), flush=True)
    for line in sys.stdin:
        command, draws, warmup = line.split()
        draws, warmup = int(draws), int(warmup)
        if command == "fit":
            fitted, seconds, cpu_seconds = fit(draws, warmup)
            sampling = int(fitted._stats["n_evaluations"].sum())
            record = {"seconds": seconds, "cpu_seconds": cpu_seconds,
                      "min_ess": float(np.nanmin(fitted.ess_)),
                      "max_rhat": float(np.nanmax(fitted.rhat_)),
                      "plan": _plan_record(fitted),
                      "rows_per_step": float(fitted.batch_sizes_.mean()),
                      "warmup_terms_per_step": (int(fitted.n_evaluations_) - n - sampling)
                      / max(1, N_CHAINS * warmup),
                      "step_size": float(np.mean(fitted.step_size_))}
        else:
            began = time.perf_counter()
            fitted.sample_more(draws)
            record = {"more_seconds": time.perf_counter() - began}
        print(json.dumps(record), flush=True)


# ----------------------------------------------------------------------------- parent


def _load(path):
    results = json.loads(path.read_text()) if path.exists() else {"cells": {}}
    for cell in results["cells"].values():
        cell.setdefault("warmup", N_WARMUP)  # records from before warm-up was varied
    results["cells"] = {_key(c["tree"], c["n"], c["d"], c["layout"], (c["draws"], c["warmup"])):
                        c for c in results["cells"].values()}
    return results


def _save(path, results):
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(results, indent=1, sort_keys=True))
    temporary.replace(path)


def _key(tree, n, d, layout, request):
    draws, warmup = request
    return f"{tree}|N{n}|d{d}|{layout}|draws{draws}|warmup{warmup}"


def _start(tree, n, d, layout, seed, smallest):
    env = dict(os.environ, PYTHONPATH=str(tree))
    process = subprocess.Popen(
        [sys.executable, __file__, "--worker", "--n", str(n), "--d", str(d), "--layout", layout,
         "--seed", str(seed), "--smallest", str(smallest)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=HERE)
    ready = json.loads(process.stdout.readline())
    return process, ready


def _ask(process, command, request):
    process.stdin.write(f"{command} {request[0]} {request[1]}\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def run_group(results, path, trees, n, d, layout, requests, repeats, seed, rerun):
    """Fit every request (draws, warm-up) of one (N, d, layout) in every tree, ``repeats``
    rounds in turn."""
    todo = [request for request in requests
            if rerun or any(_key(name, n, d, layout, request) not in results["cells"]
                            for name in trees)]
    if not todo:
        return
    workers = {}
    for name, tree in trees.items():
        workers[name], ready = _start(tree, n, d, layout, seed, min(todo)[0])
        print(f"  {name}: worker ready (untimed first fit {ready['first_fit_seconds']:.1f} s)",
              flush=True)
    records = {(name, request): [] for name in trees for request in todo}
    more = {}
    for repeat in range(repeats):
        # Every other round runs the requests in the reverse order, so that no request always
        # follows the same one (a fit leaves the caches and the heap as the next finds them).
        for request in (todo if repeat % 2 == 0 else todo[::-1]):
            for name, process in workers.items():
                records[(name, request)].append(_ask(process, "fit", request))
                if repeat == repeats - 1:  # the chain alone, continuing the fit just made
                    more[(name, request)] = _ask(process, "more", request)["more_seconds"]
    for request in todo:
        draws, warmup = request
        for name in workers:
            runs = records[(name, request)]
            best = min(runs, key=lambda r: r["seconds"])
            cell = dict(best, seconds_runs=[r["seconds"] for r in runs],
                        seconds_median=float(np.median([r["seconds"] for r in runs])),
                        cpu_seconds=min(r["cpu_seconds"] for r in runs),
                        cpu_seconds_median=float(np.median([r["cpu_seconds"] for r in runs])),
                        cpu_seconds_runs=[r["cpu_seconds"] for r in runs],
                        more_seconds=more[(name, request)], n=n, d=d, layout=layout,
                        draws=draws, warmup=warmup, tree=name, load=os.getloadavg()[0])
            cell["min_ess_per_second"] = cell["min_ess"] / cell["seconds"]
            cell["chain_draws_per_second"] = N_CHAINS * draws / cell["more_seconds"]
            results["cells"][_key(name, n, d, layout, request)] = cell
            print(f"  {name:>9} draws {draws:>6} warm-up {warmup:>5}: fit "
                  f"{cell['seconds']:7.2f} s (runs "
                  f"{', '.join(f'{s:.2f}' for s in cell['seconds_runs'])}; CPU "
                  f"{cell['cpu_seconds']:.2f} s), min ESS {cell['min_ess']:8.0f}, chain "
                  f"{cell['more_seconds']:6.2f} s, plan {cell['plan']}", flush=True)
    for process in workers.values():
        process.stdin.close()
        process.wait()
    _save(path, results)


def cliffs(results, tree="this tree", key="seconds_median"):
    """Pairs of cells where a smaller request (no more draws and no more warm-up) cost more
    than :data:`CLIFF` times a larger one (same N, d and layout), in the median wall time of
    the rounds or, with ``key="cpu_seconds_median"``, in the process's CPU time (which other
    jobs' load inflates less); ``"seconds"`` compares the fastest rounds."""
    groups = {}
    for cell in results["cells"].values():
        if cell["tree"] == tree:
            groups.setdefault((cell["n"], cell["d"], cell["layout"]), []).append(cell)
    found = []
    for group in groups.values():
        for smaller, larger in itertools.permutations(group, 2):
            if not (smaller["draws"] <= larger["draws"] and smaller["warmup"] <= larger["warmup"]):
                continue
            if key not in smaller or key not in larger:
                continue
            ratio = smaller[key] / larger[key]
            if ratio > CLIFF:
                found.append((smaller, larger, ratio))
    return found


def ratios(results, tree="this tree"):
    """Per (N, d, layout, warm-up), the median wall time of each draws over the next larger
    draws', as lines of text."""
    groups = {}
    for cell in results["cells"].values():
        if cell["tree"] == tree and "seconds_median" in cell:
            groups.setdefault((cell["n"], cell["d"], cell["layout"], cell["warmup"]),
                              []).append(cell)
    lines = []
    for (n, d, layout, warmup), group in sorted(groups.items()):
        group.sort(key=lambda c: c["draws"])
        steps = ", ".join(
            f"{a['draws']}/{b['draws']} {a['seconds_median'] / b['seconds_median']:.2f}"
            for a, b in itertools.pairwise(group))
        medians = ", ".join(f"{c['draws']}: {c['seconds_median']:.2f} s" for c in group)
        lines.append(f"N={n} d={d} {layout} warm-up {warmup}: medians {medians}; ratios "
                     f"{steps}")
    return lines


def report(results, name):
    cells = sorted(results["cells"].values(),
                   key=lambda c: (c["tree"], c["layout"], c["n"], c["d"], c["warmup"],
                                  c["draws"]))
    print(f"{'tree':>9} {'layout':>16} {'N':>9} {'d':>4} {'warm':>5} {'draws':>6} {'med s':>8} "
          f"{'min ESS':>8} {'ESS/s':>8} {'chain s':>8} {'order':>5} {'exact':>6} "
          f"{'rows/step':>9} {'pred':>8}")
    for c in cells:
        plan = c["plan"]
        print(f"{c['tree']:>9} {c['layout']:>16} {c['n']:>9} {c['d']:>4} {c['warmup']:>5} "
              f"{c['draws']:>6} "
              f"{c.get('seconds_median', math.nan):8.2f} {c['min_ess']:8.0f} "
              f"{c['min_ess_per_second']:8.1f} "
              f"{c['more_seconds']:8.2f} {plan.get('order', '-'):>5} "
              f"{plan.get('n_exact_rows', '-'):>6} {c['rows_per_step']:9.1f} "
              f"{plan.get('rows_per_step', float('nan')):8.1f}")
    for tree in sorted({c["tree"] for c in cells}):
        print(f"{tree}: median wall time of each request over the next larger one (draws, "
              f"same warm-up; at most {CLIFF} wanted)")
        for line in ratios(results, tree):
            print(f"  {line}")
        for key in ("seconds_median", "cpu_seconds_median", "seconds"):
            found = cliffs(results, tree, key)
            print(f"{tree}, {key}: {len(found)} cliff(s) (a smaller request costing > "
                  f"{CLIFF}x a larger)")
            for smaller, larger, ratio in found:
                print(f"  N={smaller['n']} d={smaller['d']} {smaller['layout']}: "
                      f"{smaller['draws']}+{smaller['warmup']} {smaller[key]:.2f} s > "
                      f"{larger['draws']}+{larger['warmup']} {larger[key]:.2f} s "
                      f"({ratio:.2f}x)")
    plot(results, RESULTS / f"{name}.png")


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [c for c in results["cells"].values() if c["warmup"] == N_WARMUP]
    layouts = [layout for layout in LAYOUTS + SEPARABLE_LAYOUTS
               if any(c["layout"] == layout for c in cells)]
    if not layouts:
        return
    fig, axes = plt.subplots(2, len(layouts), figsize=(6 * len(layouts), 8), squeeze=False)
    styles = {"this tree": "-", "baseline": ":"}
    for column, layout in enumerate(layouts):
        groups = {}
        for c in cells:
            if c["layout"] == layout:
                groups.setdefault((c["tree"], c["n"], c["d"]), []).append(c)
        colours = {}
        for (tree, n, d), group in sorted(groups.items()):
            group.sort(key=lambda c: c["draws"])
            colour = colours.setdefault((n, d), f"C{len(colours) % 10}")
            draws = [c["draws"] for c in group]
            label = f"N={n:.0e}, d={d}" + ("" if tree == "this tree" else f" ({tree})")
            axes[0, column].plot(draws, [c.get("seconds_median", c["seconds"]) for c in group],
                                 styles.get(tree, "--"), marker="o", color=colour, label=label)
            axes[1, column].plot(draws, [c["min_ess_per_second"] for c in group],
                                 styles.get(tree, "--"), marker="o", color=colour)
        axes[0, column].set(xscale="log", yscale="log", xlabel="draws per chain",
                            ylabel="fit wall time, median (s)", title=f"{layout} design")
        axes[1, column].set(xscale="log", yscale="log", xlabel="draws per chain",
                            ylabel="min ESS / s (whole fit)")
        axes[0, column].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=list(GRID_N))
    parser.add_argument("--d", type=int, nargs="+", default=list(GRID_D))
    parser.add_argument("--layout", nargs="+", default=list(LAYOUTS),
                        choices=LAYOUTS + SEPARABLE_LAYOUTS)
    parser.add_argument("--draws", type=int, nargs="+", default=list(GRID_DRAWS))
    parser.add_argument("--warmup", type=int, nargs="+", default=[N_WARMUP],
                        help="warm-up steps per chain (every draws with every warm-up)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", help="another source tree, timed side by side")
    parser.add_argument("--name", default="logistic_grid", help="results file stem")
    parser.add_argument("--rerun", action="store_true", help="measure cached cells again")
    parser.add_argument("--skip", nargs="*", default=[],
                        help="groups not run, as N:d:layout (e.g. 10000000:100:dense)")
    parser.add_argument("--report", action="store_true", help="only print the table and plot")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--smallest", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.n[0], args.d[0], args.layout[0], args.seed, args.smallest)
        return
    path = RESULTS / f"{args.name}.json"
    results = _load(path)
    if not args.report:
        trees = {"this tree": HERE.parent}
        if args.baseline:
            trees["baseline"] = Path(args.baseline).resolve()
        results["settings"] = {"n_chains": N_CHAINS,
                               "density": DENSITY, "repeats": args.repeats,
                               "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                               "trees": {k: str(v) for k, v in trees.items()}}
        for n in args.n:
            for d in args.d:
                for layout in args.layout:
                    if f"{n}:{d}:{layout}" in args.skip:
                        continue
                    print(f"N={n} d={d} {layout}", flush=True)
                    requests = sorted((draws, warmup) for draws in args.draws
                                      for warmup in args.warmup)
                    run_group(results, path, trees, n, d, layout, requests,
                              args.repeats, args.seed, args.rerun)
    report(results, args.name)


if __name__ == "__main__":
    main()
