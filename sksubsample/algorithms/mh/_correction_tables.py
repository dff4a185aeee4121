"""Regenerate the shipped Barker correction tables and compare the deconvolution methods.

Usage::

    python -m sksubsample.algorithms.mh._correction_tables            # rewrite data/*.npz
    python -m sksubsample.algorithms.mh._correction_tables --check    # solve and compare only
    python -m sksubsample.algorithms.mh._correction_tables --compare  # L∞ error table by σ, method

Each table stores the symmetric half of the cell masses (float64, compressed) with the settings
that produced it; :class:`~sksubsample.algorithms.BarkerCorrection` loads a table only when those
settings equal its defaults. The error printed is always recomputed from the masses by
:func:`~sksubsample.algorithms.mh._correction.correction_cdf_error`, never read from a file.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ._correction import (
    DEFAULT_METHOD,
    DEFAULT_N_GRID,
    DEFAULT_V_MAX,
    METHODS,
    SHIPPED_SIGMAS,
    _full_masses,
    correction_cdf_error,
    solve_correction,
)

DATA_DIR = Path(__file__).resolve().parent / "data"


def table_file(sigma, directory=DATA_DIR) -> Path:
    """Path of the table for ``sigma`` inside ``directory``."""
    return Path(directory) / f"barker_correction_sigma{sigma:.1f}.npz"


def half_mass_error(half_masses, sigma, v_max) -> float:
    """:func:`correction_cdf_error` of the symmetric law with these half-masses on [−V, V]."""
    n_grid = half_masses.size
    grid = np.linspace(-v_max, v_max, 2 * n_grid + 1)
    masses = _full_masses(half_masses)
    return correction_cdf_error(masses / masses.sum(), grid, sigma)


def write_table(sigma, *, n_grid=DEFAULT_N_GRID, v_max=DEFAULT_V_MAX, method=DEFAULT_METHOD,
                directory=DATA_DIR):
    """Solve for ``sigma`` and save the table; returns (path, half_masses, L∞ error, seconds)."""
    start = time.perf_counter()
    half = solve_correction(sigma, n_grid=n_grid, v_max=v_max, method=method)
    seconds = time.perf_counter() - start
    path = table_file(sigma, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, half_masses=half, sigma=np.float64(sigma), n_grid=np.int64(n_grid),
                        v_max=np.float64(v_max), method=np.str_(method))
    return path, half, half_mass_error(half, sigma, v_max), seconds


def compare(sigmas=SHIPPED_SIGMAS, methods=METHODS, *, n_grid=DEFAULT_N_GRID,
            v_max=DEFAULT_V_MAX):
    """Rows (σ, method, L∞ error, solve seconds) for every combination."""
    rows = []
    for sigma in sigmas:
        for method in methods:
            start = time.perf_counter()
            half = solve_correction(sigma, n_grid=n_grid, v_max=v_max, method=method)
            seconds = time.perf_counter() - start
            rows.append((sigma, method, half_mass_error(half, sigma, v_max), seconds))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="solve and compare with the shipped tables without writing")
    mode.add_argument("--compare", action="store_true",
                      help="print the L∞ error by sigma and method")
    parser.add_argument("--sigma", type=float, nargs="+", default=list(SHIPPED_SIGMAS))
    parser.add_argument("--n-grid", type=int, default=DEFAULT_N_GRID)
    parser.add_argument("--v-max", type=float, default=DEFAULT_V_MAX)
    parser.add_argument("--method", nargs="+", default=None, choices=METHODS)
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)

    if args.compare:
        methods = args.method or METHODS
        print(f"N = {args.n_grid}, V = {args.v_max}")
        print("| sigma | method | L_inf error | solve time (s) |")
        print("|---|---|---|---|")
        for sigma, method, err, seconds in compare(args.sigma, methods, n_grid=args.n_grid,
                                                   v_max=args.v_max):
            print(f"| {sigma:.1f} | {method} | {err:.2e} | {seconds:.2f} |", flush=True)
        return

    method = (args.method or [DEFAULT_METHOD])[0]
    for sigma in args.sigma:
        if args.check:
            start = time.perf_counter()
            half = solve_correction(sigma, n_grid=args.n_grid, v_max=args.v_max, method=method)
            seconds = time.perf_counter() - start
            err = half_mass_error(half, sigma, args.v_max)
            with np.load(table_file(sigma, args.out)) as data:
                shipped = half_mass_error(np.asarray(data["half_masses"]), sigma,
                                          float(data["v_max"]))
            print(f"sigma={sigma:.1f}: regenerated L_inf {err:.3e} ({seconds:.1f} s), "
                  f"shipped L_inf {shipped:.3e}", flush=True)
        else:
            path, _, err, seconds = write_table(sigma, n_grid=args.n_grid, v_max=args.v_max,
                                                method=method, directory=args.out)
            print(f"sigma={sigma:.1f}: L_inf {err:.3e}, solve {seconds:.1f} s -> {path} "
                  f"({path.stat().st_size} bytes)", flush=True)


if __name__ == "__main__":
    main()
