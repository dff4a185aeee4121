"""Racing's wall-time speed-up over exact sampling, next to its evaluation-count speed-up.

With D = 10 states and N = 1e5 factors, each problem draws the same states with
``sample_discrete(method="exact")`` and with racing (Alg. 1 of Chen & Ghahramani 2016), seed by
seed, interleaved, and reports

* the evaluation speed-up ``sum exact evaluations / sum racing evaluations``;
* the wall-time speed-up ``sum exact seconds / sum racing seconds`` (each draw timed three
  times, the fastest kept: on a shared machine a draw stretched by preemption says nothing
  about the code), and the same ratio in process CPU time;
* their ratio, which should be at least 0.5 (racing turns at least half of the evaluations it
  saves into saved seconds).

Problems: the §5.1 problem (``make_racing_problem``, Normal factors, sigma = 1e-5, 1e-4, 1e-3;
stored factors read by ``problem.factors``: a table lookup, the cheapest reward there is), the
README quick-start problem (Gaussian log-likelihoods of 1e5 data points for 10 means, a NumPy
``log_factors``) and a logistic problem (``log sigmoid(y_n x_nᵀ w_i)`` for 10 parameter
vectors ``w_i`` and 1e5 rows of 20 features: a reward that reads a data row), each also with a
compiled per-datum function (:class:`~sksubsample.algorithms.CompiledRewards`), with which
both the race and the exact sums run compiled.

Also measured: the first-call time of racing in a fresh process with an empty numba cache
(compiling the racing laws) and with the cache filled (only the race specialised for a
compiled reward function is compiled), the cost of one random index draw (a shared race's
random rounds, and the Fisher–Yates shuffle of the other samplers), the minor page faults per
draw (memory touched for the first time: on a virtual machine each costs microseconds; a
thread's races reuse their buffers, so they should not
fault), for NumPy callables where the time goes (inside the callable, per evaluation, for
both methods; the rest of racing per draw: index draws, running sums, decisions, the calls),
the ceiling of the ratio for a NumPy callable (what it would be if racing cost nothing
outside the callable: the exact draw's time over the time racing spends inside the callable,
per evaluation saved), and the fixed cost of the independent-arms race on the small
populations of entity resolution (a few clusters of 2-6 mentions and the empty cluster,
``first_batch = 3``) against exact sampling: there racing must not be slower, since the
remainder rule reads populations too small to save anything whole, in one pass.

Run ``OMP_NUM_THREADS=1 python benchmarks/racing_wall_time.py`` (about a minute; ``--quick``
for fewer draws). Writes ``benchmarks/results/racing_wall_time.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numba
import numpy as np
from scipy import special

from sksubsample.algorithms import CompiledRewards, sample_discrete
from sksubsample.algorithms.glm._kernels import log_sigmoid
from sksubsample.algorithms.sampling import clear_marks, draw_unmarked, fisher_yates_dense
from sksubsample.datasets import make_racing_problem

N_STATES = 10
N_FACTORS = 100_000


@numba.njit(cache=True)
def stored_factor(data, state, n):
    """``log f_n(state)`` of the §5.1 problem: a stored value."""
    return data[0][state, n]


@numba.njit(cache=True)
def gaussian_factor(data, state, n):
    """``log f_n(state)`` of the README problem: a Gaussian log-likelihood term."""
    y, means = data
    d = y[n] - means[state]
    return -0.5 * d * d


@numba.njit(cache=True)
def logistic_factor(data, state, n):
    """``log f_n(state)`` of the logistic problem: ``log sigmoid(y_n x_nᵀ w_state)``."""
    xy, w = data
    z = 0.0
    for j in range(xy.shape[1]):
        z += xy[n, j] * w[state, j]
    return log_sigmoid(z)


def logistic_problem(n_features=20, seed=0):
    """``(xy, w)``: rows ``y_n x_n`` and parameter vectors several posterior sds apart per
    coordinate, so that the states' log-likelihoods differ by hundreds of nats and a race can
    stop early (the row measures the cost of a reward that reads a data row, not statistical
    difficulty)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N_FACTORS, n_features)) / np.sqrt(n_features)
    w_true = rng.standard_normal(n_features)
    y = np.where(rng.random(N_FACTORS) < special.expit(x @ w_true), 1.0, -1.0)
    w = w_true + rng.standard_normal((N_STATES, n_features)) * 150.0 / np.sqrt(N_FACTORS)
    return np.ascontiguousarray(x * y[:, None]), w


def problems(noises):
    out = []
    for noise in noises:
        problem = make_racing_problem(N_STATES, N_FACTORS, "normal", noise, random_state=0)
        out.append((f"5.1 sigma={noise:.0e} numpy", problem.factors))
        out.append((f"5.1 sigma={noise:.0e} compiled",
                    CompiledRewards(stored_factor, (problem.log_factors,))))
    rng = np.random.default_rng(0)
    data = rng.normal(size=N_FACTORS)
    means = np.linspace(-0.1, 0.1, N_STATES)

    def log_factors(states, idx):
        return -0.5 * (data[idx][None, :] - means[states][:, None]) ** 2

    out.append(("README numpy", log_factors))
    out.append(("README compiled", CompiledRewards(gaussian_factor, (data, means))))
    xy, w = logistic_problem()

    def logistic_log_factors(states, idx):
        return special.log_expit(w[states] @ xy[idx].T)

    out.append(("logistic d=20 numpy", logistic_log_factors))
    out.append(("logistic d=20 compiled", CompiledRewards(logistic_factor, (xy, w))))
    return out


def speedups(name, log_factors, n_draws, repeats=3):
    """Interleaved exact and racing draws of the same seeds; the fastest of ``repeats``."""
    for seed in range(2):  # warm-up: compilation, caches, first-touch page faults
        for method in ("exact", "racing"):
            sample_discrete(log_factors, N_FACTORS, n_states=N_STATES, method=method,
                            random_state=seed)
    wall = {"exact": 0.0, "racing": 0.0}
    cpu = {"exact": 0.0, "racing": 0.0}
    faults = {"exact": 0, "racing": 0}
    evaluations = {"exact": 0, "racing": 0}
    agree = 0
    for seed in range(n_draws):
        samples = {}
        for method in ("exact", "racing"):
            best_wall = best_cpu = np.inf
            for _ in range(repeats):
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                w0, c0 = time.perf_counter(), time.process_time()
                draw = sample_discrete(log_factors, N_FACTORS, n_states=N_STATES, method=method,
                                       random_state=seed)
                best_wall = min(best_wall, time.perf_counter() - w0)
                best_cpu = min(best_cpu, time.process_time() - c0)
                faults[method] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            wall[method] += best_wall
            cpu[method] += best_cpu
            evaluations[method] += draw.n_evaluations
            samples[method] = draw.sample
        agree += samples["exact"] == samples["racing"]
    if not isinstance(log_factors, CompiledRewards):
        row_split = callable_split(log_factors, n_draws)
    evaluation_speedup = evaluations["exact"] / evaluations["racing"]
    wall_speedup = wall["exact"] / wall["racing"]
    cpu_speedup = cpu["exact"] / cpu["racing"]
    row = {
        "problem": name, "n_draws": n_draws,
        "exact_ms": 1e3 * wall["exact"] / n_draws, "racing_ms": 1e3 * wall["racing"] / n_draws,
        "proportion_evaluated": 1 / evaluation_speedup,
        "evaluation_speedup": evaluation_speedup, "wall_speedup": wall_speedup,
        "cpu_speedup": cpu_speedup, "wall_over_evaluation": wall_speedup / evaluation_speedup,
        "cpu_over_evaluation": cpu_speedup / evaluation_speedup,
        "same_sample_as_exact": agree / n_draws,
        "page_faults_per_draw": {m: f / (repeats * n_draws) for m, f in faults.items()},
    }
    if not isinstance(log_factors, CompiledRewards):
        row.update(row_split)
        # The ratio racing would reach if it cost nothing outside the callable (no index
        # draws, sums, decisions, calls): the exact draw's whole time over the time racing
        # spends inside the callable alone, per evaluation saved.
        inside_ms = (row["callable_ns_per_evaluation"]["racing"] * 1e-6
                     * evaluations["racing"] / n_draws)
        row["wall_over_evaluation_ceiling"] = (row["exact_ms"] / inside_ms) / evaluation_speedup
    print(f"{name:<26} exact {row['exact_ms']:7.3f} ms  racing {row['racing_ms']:7.3f} ms  "
          f"evaluations x{evaluation_speedup:5.1f}  wall x{wall_speedup:5.2f}  "
          f"cpu x{cpu_speedup:5.2f}  wall/evaluations {row['wall_over_evaluation']:.2f} "
          f"(target >= 0.5)  page faults/draw {faults['exact'] / (repeats * n_draws):.0f} "
          f"vs {faults['racing'] / (repeats * n_draws):.0f}", flush=True)
    if "callable_ns_per_evaluation" in row:
        inside = row["callable_ns_per_evaluation"]
        print(f"{'':<26} in the callable: exact {inside['exact']:.2f} ns, racing "
              f"{inside['racing']:.2f} ns per evaluation; racing outside the callable "
              f"{row['racing_outside_callable_ms']:.3f} ms per draw; wall/evaluations with "
              f"nothing outside the callable {row['wall_over_evaluation_ceiling']:.2f}",
              flush=True)
    return row


def callable_split(log_factors, n_draws, repeats=3):
    """Time inside the NumPy callable per evaluation (exact and racing) and racing's time
    outside it per draw, from the fastest of ``repeats`` more runs of each seed."""
    spent = {"time": 0.0, "values": 0}

    def timed(states, idx):
        start = time.perf_counter()
        values = log_factors(states, idx)
        spent["time"] += time.perf_counter() - start
        spent["values"] += values.size
        return values

    inside = {}
    outside = 0.0
    for method in ("exact", "racing"):
        inside_time = outside_time = 0.0
        n_values = 0
        for seed in range(n_draws):
            best = (np.inf, 0.0, 0)
            for _ in range(repeats):
                spent.update(time=0.0, values=0)
                start = time.perf_counter()
                sample_discrete(timed, N_FACTORS, n_states=N_STATES, method=method,
                                random_state=seed)
                best = min(best, (time.perf_counter() - start, spent["time"], spent["values"]))
            inside_time += best[1]
            outside_time += best[0] - best[1]
            n_values += best[2]
        inside[method] = 1e9 * inside_time / n_values
        outside = 1e3 * outside_time / n_draws
    return {"callable_ns_per_evaluation": inside, "racing_outside_callable_ms": outside}


_FIRST_CALL = textwrap.dedent("""
    import time
    import numba
    import numpy as np
    t0 = time.perf_counter()
    from sksubsample.algorithms import CompiledRewards, sample_discrete
    t1 = time.perf_counter()
    y = np.random.default_rng(0).normal(size=100_000)
    means = np.linspace(-0.1, 0.1, 10)
    def log_factors(states, idx):
        return -0.5 * (y[idx][None, :] - means[states][:, None]) ** 2
    t2 = time.perf_counter()
    sample_discrete(log_factors, y.size, n_states=10, random_state=0)
    t3 = time.perf_counter()
    @numba.njit
    def factor(data, state, n):
        d = data[0][n] - data[1][state]
        return -0.5 * d * d
    sample_discrete(CompiledRewards(factor, (y, means)), y.size, n_states=10, random_state=0)
    t4 = time.perf_counter()
    print(t1 - t0, t3 - t2, t4 - t3)
""")


def first_call_times():
    """Seconds of the first racing calls in fresh processes, cold and warm numba cache."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("cold cache", "warm cache"):
            result = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env,
                                    capture_output=True, text=True, check=True)
            imp, numpy_race, compiled_race = map(float, result.stdout.split())
            out[label] = {"import_s": imp, "first_numpy_race_s": numpy_race,
                          "first_compiled_race_s": compiled_race}
            print(f"first call, {label}: import {imp:.2f} s, first race with a NumPy callable "
                  f"{numpy_race:.2f} s, first race with compiled rewards {compiled_race:.2f} s",
                  flush=True)
    return out


@numba.njit(cache=True)
def _race_rounds(seed, n, first_batch, drawn, before, out):
    """The random rounds of a shared race on ``range(n)`` (batches of ``first_batch``, then
    doubling while a batch is less than half of what is left); returns the indices drawn."""
    state = seed
    count = 0
    m = first_batch
    while 2 * m < n - count:  # shared_target's remainder rule (REMAINDER_FRACTION = 1/2)
        state = draw_unmarked(state, n, drawn, before, out[count:count + m])
        count += m
        m = count
    clear_marks(drawn, out[:count], n)
    return count


def index_draw_ns():
    """Nanoseconds per index of a shared race's random rounds on ``N`` indices (sorted sets:
    rejection against the drawn bitmap, then the sort by bitmap or comparison), and of the
    Fisher–Yates draw (dense) of the other samplers, for half of ``N``."""
    n = N_FACTORS
    words = (n + 63) >> 6
    drawn, before = np.zeros(words, dtype=np.int64), np.zeros(words, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    times = {"race rounds (sorted sets)": [], "Fisher-Yates (dense)": []}
    for seed in range(8):
        start = time.perf_counter()
        count = _race_rounds(np.uint64(seed), n, 50, drawn, before, out)
        times["race rounds (sorted sets)"].append((time.perf_counter() - start) / count)
        arrangement = np.arange(n)
        rng = np.random.default_rng(seed)
        start = time.perf_counter()
        fisher_yates_dense(rng, 0, n // 2, arrangement, out)
        times["Fisher-Yates (dense)"].append((time.perf_counter() - start) / (n // 2))
    ns = {name: 1e9 * float(np.median(t[1:])) for name, t in times.items()}
    print("index draw: " + ", ".join(f"{name} {v:.1f} ns per index" for name, v in ns.items()),
          flush=True)
    return ns


def small_populations(n_draws, seed=0):
    """µs per draw of independent-arms racing vs exact sampling on coreference-like draws."""
    rng = np.random.default_rng(seed)
    rows = []
    for n_clusters in (2, 4, 6):
        sizes = np.concatenate(([0], rng.integers(2, 7, n_clusters)))
        values = [rng.normal(-0.5, 1.0, n) for n in sizes]

        def log_factors(states, idx, values=values):
            return values[states[0]][idx][None, :]

        log_prior = np.zeros(sizes.size)
        times = {"racing": [], "exact": []}
        for draw in range(n_draws + 1):
            for method in ("racing", "exact"):
                start = time.perf_counter()
                sample_discrete(log_factors, sizes, log_prior, method=method,
                                variance="independent", first_batch=3, random_state=draw)
                if draw:
                    times[method].append(time.perf_counter() - start)
        us = {m: 1e6 * float(np.median(t)) for m, t in times.items()}
        rows.append({"cluster_sizes": sizes[1:].tolist(), "racing_us": us["racing"],
                     "exact_us": us["exact"], "racing_over_exact": us["racing"] / us["exact"]})
        print(f"small populations {sizes[1:].tolist()!s:<20} racing {us['racing']:6.1f} us, "
              f"exact {us['exact']:6.1f} us per draw (medians): racing/exact "
              f"{us['racing'] / us['exact']:.2f}", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer draws")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    n_draws = 10 if args.quick else 40
    started = time.time()
    results = {"settings": {"n_states": N_STATES, "n_factors": N_FACTORS, "n_draws": n_draws,
                            "timing": "fastest of 3 per draw, sums over draws"}}
    results["first_call"] = first_call_times()
    results["index_draw_ns"] = index_draw_ns()
    noises = [1e-4] if args.quick else [1e-5, 1e-4, 1e-3]
    results["speedups"] = [speedups(name, f, n_draws) for name, f in problems(noises)]
    results["small_populations"] = small_populations(500 if args.quick else 3000)
    results["seconds"] = time.time() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "racing_wall_time_quick.json" if args.quick else "racing_wall_time.json"
    (out / name).write_text(json.dumps(results, indent=1))
    print(f"wrote {out / name} in {results['seconds']:.0f} s")
    return results


if __name__ == "__main__":
    main()
