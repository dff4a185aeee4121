"""Bayesian logistic regression on data that stay on disk: memory map and Dask array.

Synthetic problem: ``--n-rows`` rows of d = 20 standard-normal float32 features, labels from a
logistic model with N(0, 1/d) weights and intercept -0.5, written block by block to ``X.npy``
and ``y.npy`` (int8) in ``--dir`` (kept for the next run unless ``--delete``). The default
``BayesianLogisticRegressionMH`` (4 chains of 500 warm-up + 1 000 draws) is fitted from

* ``memory``: ``np.load(path)`` (X in memory; skipped with ``--no-memory`` when it does not
  fit),
* ``memmap``: ``np.load(path, mmap_mode="r")``,
* ``dask``: a Dask array of chunks of 2^18 rows, each a memory map of its rows of the file
  (:func:`npy_as_dask`; ``dask.array.from_array`` of a memory map would copy it into memory
  first), on Dask's default (threaded) scheduler,
* ``cluster``: the same rows in 100 chunks on a two-worker ``dask.distributed.LocalCluster``
  (one thread each), persisted on the workers (``--no-persist``: left as tasks reading the
  file, as for data larger than the workers' memory); the set-up's passes run on the workers
  that hold the chunks and the chains gather their rows there,

each in a process of its own. Measured per fit:

* peak anonymous memory: the parent reads ``RssAnon`` of ``/proc/<pid>/status`` of the
  fitting process every 2 ms from the moment the fit starts (after the imports and a small
  fit that compiles the chains) to its end, and reports the peak minus the value at the start
  (``fit +anon``) and the peak itself (``peak anon``, imports and compiled code included).
  File-backed pages of the memory map (the page cache) are not anonymous memory and are not
  counted;
* set-up seconds (validation, MAP, control-variate sums, bound, strata: everything before the
  first chain step) against the time to read the file once (``np.fromfile`` in 64 MB blocks,
  in whatever state the page cache is; the set-up reads the file a few times): the median of
  the fit's set-up and ``--setup-repeats`` (default 4) more, each the first set-up of a
  process of its own prepared as the fit's (a fit stopped where its chains would start),
  the inputs in turn;
* seconds per chain step: the time of the chains' steps alone over all their steps (4 x
  (500 + ``n_draws_``): the default ``n_draws="auto"`` may add rounds of draws, ``rounds``),
  in wall seconds and in CPU seconds of the whole process (a memory map's chain also gathers
  rows in a background thread, whose CPU time counts there but which the wall time hides on
  a second core; a cluster's workers' CPU time is not counted), and their ratios to the
  in-memory fit's in the same run (with ``--no-memory``: to the in-memory fit of
  ``out_of_core_N10000000.json``, a run of its own).
  What else happens between the set-up and the end of the fit is reported apart, as it is
  not the steps' cost: each chain's preparation (``prepare``: for rows in memory, the first
  chain builds the signs of all N rows that the compiled kernels read, as float64; for a
  store, a chain's buffer and row stream), and the work after each round of draws (``after``: the
  check that the rows did not change, a scan of every value of X in memory, and the
  convergence diagnostics). ``fit_after_setup_seconds_per_step`` keeps the old measure, all
  of it over the steps;
* min-ESS/s: the smallest bulk ESS over the 21 parameters over the whole fit's wall time.

Agreement: every out-of-core fit against the in-memory fit (posterior means within 4.5
Monte-Carlo standard errors of their difference, sd / ESS from each fit's chains; sd ratios
in [0.9, 1.1]), and every fit against the Laplace approximation at the exact MAP (the MAP the
fit found by Newton passes over all rows, its covariance the inverse Hessian of the negative
log-posterior there, summed over all rows in float64 by this script): at these N the
posterior is normal to within Monte-Carlo error, so the means should sit within 4.5 standard
errors of the MAP and the sds within [0.9, 1.1] of the Laplace sds.

Compiling: each process first fits a small file of the same kind, which compiles (or loads
from numba's cache) most kernels; a large fit also runs kernels a small one does not reach
(the leverage screen, a chain's float32 buffer). Where the cache does not hold them (after a
change to the package's sources), they are compiled inside a timed fit. Each child records
the kernels compiled in its timed fit (``numba:compile`` events of its own process; a
cluster's workers are not seen), and a run in which any were compiled writes no results: it
says so, and the next run finds them cached.

Run ``OMP_NUM_THREADS=1 python benchmarks/out_of_core.py --n-rows 10000000`` (about 10
minutes on a shared 2-core machine); writes ``benchmarks/results/out_of_core_N{n}.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
D = 20
PRIOR_SCALE = 10.0
DASK_CHUNK_ROWS = 1 << 18
WRITE_ROWS = 1 << 20
KINDS = ("memory", "memmap", "dask", "cluster")
CLUSTER_CHUNKS = 100
#: Reads of the file timed; the fastest is "one read".
READS = 3
#: Rows of the fit that compiles the kernels first (21 MB of float32 at d = 20).
SMALL_ROWS = 1 << 18


# ------------------------------------------------------------------------------ data

def make_data(directory, n_rows, seed=0):
    """``X.npy`` (float32) and ``y.npy`` (int8) of ``n_rows`` rows, written in blocks of
    :data:`WRITE_ROWS` rows (never whole in memory); reused when present with that shape."""
    x_path, y_path = directory / "X.npy", directory / "y.npy"
    if x_path.exists() and y_path.exists():
        X = np.load(x_path, mmap_mode="r")
        if X.shape == (n_rows, D) and X.dtype == np.float32:
            return x_path, y_path
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(D) / np.sqrt(D)
    X = np.lib.format.open_memmap(x_path, mode="w+", dtype=np.float32, shape=(n_rows, D))
    y = np.lib.format.open_memmap(y_path, mode="w+", dtype=np.int8, shape=(n_rows,))
    for start in range(0, n_rows, WRITE_ROWS):
        stop = min(n_rows, start + WRITE_ROWS)
        block = rng.standard_normal((stop - start, D), dtype=np.float32)
        X[start:stop] = block
        p = 1.0 / (1.0 + np.exp(-(block.astype(np.float64) @ theta - 0.5)))
        y[start:stop] = rng.random(stop - start) < p
    X.flush()
    y.flush()
    del X, y
    return x_path, y_path


def raw_read_seconds(path):
    """Seconds to read the file once, front to back, in 64 MB blocks into one buffer (the
    cost of the reading alone: a new buffer per block would add the cost of fresh memory,
    which on some machines is more than the read's)."""
    buffer = bytearray(1 << 26)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buffer):
            pass
    return time.perf_counter() - start


# ------------------------------------------------------------------------------ child

class _Clock:
    """Wall and CPU seconds (of the whole process: every thread) spent in the calls of the
    functions it wraps, and how many calls."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.calls = 0

    def wrap(self, function):
        def timed(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.wall += time.perf_counter() - wall
                self.cpu += time.process_time() - cpu
                self.calls += 1
        return timed


def _timed_chains():
    """Clocks of the chains' runs (every round of draws: the runs of all chains, each chain's
    preparation included) and of the chains' preparations (a chain's compiled model and
    minibatch source, :meth:`GLMTarget.compiled_chain`), installed on the library's functions
    for the rest of the process."""
    import sksubsample._base as base
    from sksubsample.algorithms.glm import GLMTarget

    runs, preparations = _Clock(), _Clock()
    base.run_tasks = runs.wrap(base.run_tasks)
    GLMTarget.compiled_chain = preparations.wrap(GLMTarget.compiled_chain)
    return runs, preparations


def _estimator_class():
    from sksubsample import BayesianLogisticRegressionMH

    class Timed(BayesianLogisticRegressionMH):
        """The estimator, noting when the chains start (the end of the set-up) and the CPU
        seconds of the whole fit."""

        def fit(self, X, y, **kwargs):
            self._fit_started = time.perf_counter()
            cpu = time.process_time()
            super().fit(X, y, **kwargs)
            self.fit_seconds_ = time.perf_counter() - self._fit_started
            self.fit_cpu_seconds_ = time.process_time() - cpu
            self.chain_seconds_ = self.fit_seconds_ - self.setup_seconds_
            return self

        def _sample(self, *args, **kwargs):
            self.setup_seconds_ = time.perf_counter() - self._fit_started
            if getattr(self, "setup_only", False):
                raise _SetupDone
            return super()._sample(*args, **kwargs)

    return Timed


class _SetupDone(Exception):
    """Raised by a fit timed to the end of its set-up (:func:`setup_child`)."""


class _Compiles:
    """The names of the kernels numba compiles (not those it loads from its cache) in this
    process while the context is open."""

    def __enter__(self):
        from numba.core import event

        self._recorder = event.install_recorder("numba:compile")
        self._buffer = self._recorder.__enter__().buffer
        return self

    def __exit__(self, *exc):
        self._recorder.__exit__(*exc)

    @property
    def names(self):
        return sorted({getattr(ev.data["dispatcher"], "__name__", "?")
                       for _, ev in self._buffer if ev.is_start})


def _npy_rows(path, start, stop):
    return np.load(path, mmap_mode="r")[start:stop]


def npy_as_dask(path, chunk_rows):
    """A Dask array over a ``.npy`` file whose chunks are memory maps of its rows.

    (``da.from_array`` of a memory map copies it into memory first.)"""
    import dask
    import dask.array as da

    stored = np.load(path, mmap_mode="r")
    n = stored.shape[0]
    read = dask.delayed(_npy_rows, pure=True)
    return da.concatenate([
        da.from_delayed(read(str(path), a, min(n, a + chunk_rows)),
                        shape=(min(n, a + chunk_rows) - a, *stored.shape[1:]),
                        dtype=stored.dtype)
        for a in range(0, n, chunk_rows)])


def _inputs(kind, x_path, y_path, persist=True):
    if kind == "memory":
        return np.load(x_path), np.load(y_path)
    X, y = np.load(x_path, mmap_mode="r"), np.load(y_path, mmap_mode="r")
    if kind == "dask":
        X, y = npy_as_dask(x_path, DASK_CHUNK_ROWS), npy_as_dask(y_path, DASK_CHUNK_ROWS)
    if kind == "cluster":
        rows = -(-X.shape[0] // CLUSTER_CHUNKS)
        X, y = npy_as_dask(x_path, rows), npy_as_dask(y_path, rows)
        if persist:
            from distributed import wait

            X, y = X.persist(), y.persist()
            wait([X, y])
    return X, y


def _cluster():
    """A two-worker LocalCluster (processes, one thread each) and its client."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit="8GiB")
    return cluster, Client(cluster)


def _compile(Timed, kind, directory):
    """A small fit of the same kind, which compiles the chains before the measurement starts:
    of more rows than a float64 copy is made of (FLOAT64_COPY_BYTES), so that it compiles the
    float32 kernels the measured fit runs."""
    small = directory / "small"
    small.mkdir(exist_ok=True)
    np.save(small / "X.npy", np.load(directory / "X.npy", mmap_mode="r")[:SMALL_ROWS])
    np.save(small / "y.npy", np.load(directory / "y.npy", mmap_mode="r")[:SMALL_ROWS])
    Timed(n_draws=20, n_warmup=20, n_chains=1, random_state=1).fit(
        *_inputs(kind, small / "X.npy", small / "y.npy"))


def setup_child(kind, directory, persist=True):
    """Time one more set-up (the fit stopped where its chains would start) in this process,
    prepared as :func:`child` prepares its fit."""
    import warnings

    from sksubsample.diagnostics import ConvergenceWarning

    cluster = _cluster() if kind == "cluster" else None
    Timed = _estimator_class()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _compile(Timed, kind, directory)
        X, y = _inputs(kind, directory / "X.npy", directory / "y.npy", persist)
        fit = Timed(prior_scale=PRIOR_SCALE, random_state=0)
        fit.setup_only = True
        with _Compiles() as compiles:
            try:
                fit.fit(X, y)
            except _SetupDone:
                pass
    print(json.dumps(dict(kind=kind, setup_seconds=fit.setup_seconds_,
                          compiled=compiles.names)), flush=True)
    if cluster is not None:
        cluster[1].close()
        cluster[0].close()


def child(kind, directory, persist=True):
    """Fit once in this process and write the draws and figures to ``directory``."""
    import warnings

    from sksubsample.diagnostics import ConvergenceWarning, effective_sample_size

    cluster = _cluster() if kind == "cluster" else None
    Timed = _estimator_class()
    x_path, y_path = directory / "X.npy", directory / "y.npy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _compile(Timed, kind, directory)
        X, y = _inputs(kind, x_path, y_path, persist)
        runs, preparations = _timed_chains()
        print("start", flush=True)
        with _Compiles() as compiles:
            fit = Timed(prior_scale=PRIOR_SCALE, random_state=0).fit(X, y)
        print("stop", flush=True)
    draws = fit._draws
    np.save(directory / f"draws_{kind}.npy", draws)
    ess = effective_sample_size(draws)
    n_steps = fit.n_chains * (fit.n_draws_ + fit.n_warmup)
    step_seconds = runs.wall - preparations.wall
    record = dict(kind=kind, setup_seconds=fit.setup_seconds_,
                  chain_seconds=fit.chain_seconds_, fit_seconds=fit.fit_seconds_,
                  fit_cpu_seconds=fit.fit_cpu_seconds_, rounds=runs.calls,
                  n_draws=int(fit.n_draws_), n_steps=n_steps,
                  steps_seconds=step_seconds,
                  steps_cpu_seconds=runs.cpu - preparations.cpu,
                  prepare_seconds=preparations.wall, prepare_cpu_seconds=preparations.cpu,
                  after_seconds=fit.chain_seconds_ - runs.wall,
                  seconds_per_step=step_seconds / n_steps,
                  cpu_seconds_per_step=(runs.cpu - preparations.cpu) / n_steps,
                  fit_after_setup_seconds_per_step=fit.chain_seconds_ / n_steps,
                  min_ess=float(ess.min()),
                  min_ess_per_second=float(ess.min() / fit.fit_seconds_),
                  mean_batch_size=fit.mean_batch_size_, map=fit.map_.tolist(),
                  map_passes=int(fit.map_n_iter_), max_rhat=float(np.nanmax(fit.rhat_)),
                  persisted=bool(persist) if kind == "cluster" else None,
                  compiled=compiles.names)
    print(json.dumps(record), flush=True)
    if cluster is not None:
        cluster[1].close()
        cluster[0].close()


# ------------------------------------------------------------------------------ parent

def _rss_anon_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise RuntimeError("no RssAnon in /proc status")


def run_child(kind, directory, persist=True, setup_only=False):
    """Run :func:`child` (:func:`setup_child` when ``setup_only``) in a subprocess, reading its
    anonymous memory every 2 ms (of the fitting process: a cluster's workers hold the
    persisted chunks, not the fit)."""
    # Costs not measured: every kind plans on the same rough costs (the same plan for the same
    # rows), and the set-up times no one-time measurement of this machine's costs.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SKSUBSAMPLE_MEASURE_COSTS": "0"}
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--dir", str(directory),
                             *([] if persist else ["--no-persist"]),
                             *(["--setup-only"] if setup_only else [])],
                            stdout=subprocess.PIPE, text=True, env=env)
    state = {"measuring": False, "done": False, "start_kb": 0, "peak_kb": 0}

    def poll():
        while not state["done"]:
            if state["measuring"]:
                try:
                    state["peak_kb"] = max(state["peak_kb"], _rss_anon_kb(proc.pid))
                except (FileNotFoundError, ProcessLookupError):
                    return
            time.sleep(0.002)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    record = None
    for line in proc.stdout:
        if line.strip() == "start":
            state["start_kb"] = state["peak_kb"] = _rss_anon_kb(proc.pid)
            state["measuring"] = True
        elif line.strip() == "stop":
            state["peak_kb"] = max(state["peak_kb"], _rss_anon_kb(proc.pid))
            state["measuring"] = False
        elif line.startswith("{"):
            record = json.loads(line)
    state["done"] = True
    if proc.wait() != 0 or record is None:
        raise RuntimeError(f"the {kind} fit failed (exit code {proc.returncode})")
    record["anon_at_start_mb"] = state["start_kb"] / 1024
    record["peak_anon_mb"] = state["peak_kb"] / 1024
    record["fit_anon_mb"] = (state["peak_kb"] - state["start_kb"]) / 1024
    return record


def laplace(x_path, y_path, center):
    """The Laplace approximation's sds at ``center`` (coefficients then intercept): the
    inverse of the negative log-posterior's Hessian, summed over all rows in float64."""
    X, y = np.load(x_path, mmap_mode="r"), np.load(y_path, mmap_mode="r")
    center = np.asarray(center)
    hessian = np.zeros((D + 1, D + 1))
    for start in range(0, X.shape[0], WRITE_ROWS):
        design = np.empty((min(X.shape[0], start + WRITE_ROWS) - start, D + 1))
        design[:, :D] = X[start:start + WRITE_ROWS]
        design[:, D] = 1.0
        p = 1.0 / (1.0 + np.exp(-(design @ center)))
        hessian += (design * (p * (1.0 - p))[:, None]).T @ design
    hessian += np.eye(D + 1) / PRIOR_SCALE**2
    assert len(y) == X.shape[0]
    return np.sqrt(np.diag(np.linalg.inv(hessian)))


def compare(draws, ess, mean_ref, sd_ref, ref_se):
    """Worst |z| of the means (MC standard errors of the difference) and sd ratio range."""
    flat = draws.reshape(-1, draws.shape[2])
    mean, sd = flat.mean(axis=0), flat.std(axis=0, ddof=1)
    z = np.abs(mean - mean_ref) / np.sqrt(sd**2 / ess + ref_se**2)
    ratio = sd / sd_ref
    return dict(max_z_mean=float(z.max()), sd_ratio_min=float(ratio.min()),
                sd_ratio_max=float(ratio.max()),
                agrees=bool(z.max() <= 4.5 and ratio.min() >= 0.9 and ratio.max() <= 1.1))


def _print_chain_phase(records, kinds):
    """What the fit did after its set-up: the steps (wall and CPU), the chains' preparation,
    the work after each round of draws, and the old measure (all of it over the steps)."""
    print(f"{'input':<7} {'rounds':>6} {'steps':>6} {'steps s':>8} {'cpu s':>7} "
          f"{'µs/step':>8} {'cpu µs':>7} {'/mem':>5} {'cpu/mem':>7} {'prepare s':>9} "
          f"{'cpu s':>6} {'after s':>7} {'(fit-setup)/step µs':>19}")
    for kind in kinds:
        r = records[kind]
        print(f"{kind:<7} {r['rounds']:6d} {r['n_steps']:6d} {r['steps_seconds']:8.3f} "
              f"{r['steps_cpu_seconds']:7.3f} {1e6 * r['seconds_per_step']:8.1f} "
              f"{1e6 * r['cpu_seconds_per_step']:7.1f} "
              f"{r.get('step_time_ratio_to_memory', 1.0):5.2f} "
              f"{r.get('step_cpu_ratio_to_memory', 1.0):7.2f} {r['prepare_seconds']:9.3f} "
              f"{r['prepare_cpu_seconds']:6.3f} {r['after_seconds']:7.3f} "
              f"{1e6 * r['fit_after_setup_seconds_per_step']:19.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where X.npy and y.npy are written (default /tmp/sksubsample_ooc_N)")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the in-memory fit (data larger than memory)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--delete", action="store_true", help="delete the data at the end")
    parser.add_argument("--no-persist", action="store_true",
                        help="cluster: leave the chunks as tasks reading the file")
    parser.add_argument("--setup-repeats", type=int, default=4,
                        help="further set-ups timed per input, each in a process of its own")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--setup-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    directory = args.dir or Path(f"/tmp/sksubsample_ooc_{args.n_rows}")
    if args.child:
        (setup_child if args.setup_only else child)(args.child, directory,
                                                    not args.no_persist)
        return
    from sksubsample.diagnostics import effective_sample_size

    t0 = time.perf_counter()
    x_path, y_path = make_data(directory, args.n_rows)
    write_seconds = time.perf_counter() - t0
    data_mb = x_path.stat().st_size / 2**20
    # The fastest of a few reads: a read is only ever slowed by the machine's other work (its
    # time varied from 0.13 to 0.25 s at 10^7 rows on a shared machine), and the ratios below
    # divide by it.
    reads = [raw_read_seconds(x_path) for _ in range(READS)]
    read_seconds = min(reads)
    print(f"N = {args.n_rows:.0e} x {D} float32: {data_mb:.0f} MB on disk "
          f"(written or found in {write_seconds:.0f} s); one read: {read_seconds:.2f} s "
          f"(fastest of {READS}: {', '.join(f'{r:.2f}' for r in reads)} s)")
    kinds = [k for k in args.kinds if not (args.no_memory and k == "memory")]
    records = {}
    for kind in kinds:
        records[kind] = run_child(kind, directory, not args.no_persist)
        r = records[kind]
        print(f"  {kind}: fit {r['fit_seconds']:.1f} s, set-up {r['setup_seconds']:.1f} s, "
              f"peak anon {r['peak_anon_mb']:.0f} MB (+{r['fit_anon_mb']:.0f} MB)", flush=True)
        r["fit_setup_seconds"] = r["setup_seconds"]
        r["setup_seconds_each"] = [r["setup_seconds"]]
        r["compiled_each"] = [r.pop("compiled")]
    # Further set-ups, the inputs in turn (a change of the machine's load then falls on each
    # alike): at 10^7 rows a set-up takes under a second, and one process's varied by 10-20 %
    # on a shared machine. The set-up reported is the median.
    for _ in range(args.setup_repeats):
        for kind in kinds:
            repeat = run_child(kind, directory, not args.no_persist, setup_only=True)
            records[kind]["setup_seconds_each"].append(repeat["setup_seconds"])
            records[kind]["compiled_each"].append(repeat["compiled"])
    for kind in kinds:
        r = records[kind]
        r["setup_seconds"] = float(np.median(r["setup_seconds_each"]))
        print(f"  {kind}: set-ups {', '.join(f'{t:.2f}' for t in r['setup_seconds_each'])} s "
              f"(median {r['setup_seconds']:.2f} s)")

    compiled = sorted({name for kind in kinds for names in records[kind].pop("compiled_each")
                       for name in names})
    if compiled:
        for kind in kinds:
            (directory / f"draws_{kind}.npy").unlink()
        sys.exit(f"Kernels were compiled inside timed fits ({', '.join(compiled)}): these "
                 f"figures are not the machine's, and no results are written. Run the "
                 f"benchmark again: numba's cache now holds them.")
    draws = {k: np.load(directory / f"draws_{k}.npy") for k in kinds}
    ess = {k: effective_sample_size(draws[k]) for k in kinds}
    # Without an in-memory fit in this run, steps are compared with the in-memory fit of
    # the N = 1e7 run (another run: the machine's load may differ).
    # (A stored run whose fits have no "cpu_seconds_per_step" timed its steps with all that
    # follows the set-up: not the same measure, so not compared.)
    reference = records.get("memory")
    if reference is None:
        stored = RESULTS / "out_of_core_N10000000.json"
        if stored.exists():
            reference = json.loads(stored.read_text())["fits"].get("memory")
        if reference is not None and "cpu_seconds_per_step" not in reference:
            reference = None
    center = np.asarray(records[kinds[-1]]["map"])
    laplace_sd = laplace(x_path, y_path, center)
    for kind in kinds:
        r = records[kind]
        r["vs_laplace"] = compare(draws[kind], ess[kind], center, laplace_sd, 0.0)
        r["map_max_abs_diff"] = float(np.abs(np.asarray(r["map"]) - center).max())
        if "memory" in records and kind != "memory":
            ref = draws["memory"].reshape(-1, D + 1)
            r["vs_memory"] = compare(draws[kind], ess[kind], ref.mean(axis=0),
                                     ref.std(axis=0, ddof=1),
                                     ref.std(axis=0, ddof=1) / np.sqrt(ess["memory"]))
        if kind != "memory" and reference is not None:
            r["step_time_ratio_to_memory"] = (r["seconds_per_step"]
                                              / reference["seconds_per_step"])
            r["step_cpu_ratio_to_memory"] = (r["cpu_seconds_per_step"]
                                             / reference["cpu_seconds_per_step"])
        r["fit_anon_fraction_of_data"] = r["fit_anon_mb"] / data_mb
        r["peak_anon_fraction_of_data"] = r["peak_anon_mb"] / data_mb
        r["setup_over_read"] = r["setup_seconds"] / read_seconds

    if "memmap" in records:
        for kind in kinds:
            records[kind]["setup_over_memmap"] = (records[kind]["setup_seconds"]
                                                  / records["memmap"]["setup_seconds"])
            records[kind]["step_over_memmap"] = (records[kind]["seconds_per_step"]
                                                 / records["memmap"]["seconds_per_step"])
            records[kind]["step_cpu_over_memmap"] = (records[kind]["cpu_seconds_per_step"]
                                                     / records["memmap"]["cpu_seconds_per_step"])
    _print_chain_phase(records, kinds)
    header = (f"{'input':<7} {'set-up s':>8} {'/read':>6} {'µs/step':>8} {'/mem':>5} "
              f"{'peak anon MB':>12} {'+fit MB':>8} {'+fit/data':>9} {'minESS/s':>8} "
              f"{'z vs mem':>8} {'sd/mem':>11} {'z vs Lap':>8} {'sd/Lap':>11}")
    print(header)
    for kind in kinds:
        r = records[kind]
        mem = r.get("vs_memory")
        lap = r["vs_laplace"]
        print(f"{kind:<7} {r['setup_seconds']:8.1f} {r['setup_over_read']:6.2f} "
              f"{1e6 * r['seconds_per_step']:8.0f} "
              f"{r.get('step_time_ratio_to_memory', 1.0):5.2f} {r['peak_anon_mb']:12.0f} "
              f"{r['fit_anon_mb']:8.0f} {r['fit_anon_fraction_of_data']:9.3f} "
              f"{r['min_ess_per_second']:8.1f} "
              + (f"{mem['max_z_mean']:8.2f} {mem['sd_ratio_min']:5.3f}-{mem['sd_ratio_max']:5.3f} "
                 if mem else f"{'-':>8} {'-':>11} ")
              + f"{lap['max_z_mean']:8.2f} {lap['sd_ratio_min']:5.3f}-{lap['sd_ratio_max']:5.3f}")

    out = dict(command=" ".join(["python", "benchmarks/out_of_core.py", *sys.argv[1:]]),
               n_rows=args.n_rows, n_features=D, dtype="float32", data_mb=data_mb,
               raw_read_seconds=read_seconds, raw_reads_seconds=reads,
               dask_chunk_rows=DASK_CHUNK_ROWS,
               memory_method="peak RssAnon of /proc/<pid>/status polled every 2 ms",
               laplace_sd=laplace_sd.tolist(), fits=records,
               machine=dict(platform=platform.platform(), cpus=os.cpu_count(),
                            load_average=os.getloadavg()))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"out_of_core_N{args.n_rows}.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")
    for kind in kinds:
        (directory / f"draws_{kind}.npy").unlink()
    if args.delete:
        for f in (x_path, y_path):
            f.unlink()


if __name__ == "__main__":
    main()
