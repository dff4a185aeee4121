"""What the check of a zarr array's stored chunks costs a chain's refill and a pass's read.

A :class:`~sksubsample.algorithms.stores.RowStore` over a zarr array checks, before it reads
rows, that the chunks holding them are those stored when it was made
(:mod:`sksubsample.algorithms.stores._zarr`). This times ``take`` of a refill's worth of
scattered rows and ``read`` of one read unit, checked and unchecked, for arrays in a folder and
in memory, with coarse and fine chunks, and prints the ratio (checked / unchecked).

Run: ``python benchmarks/store_checks.py [--rows 200000] [--repeats 15]`` (results:
``benchmarks/results/store_checks.txt``).
"""

import argparse
import tempfile
import time

import numpy as np
import zarr

from sksubsample.algorithms.stores import RowStore


def _medians(store, calls, repeats):
    """Median seconds of each of ``calls`` on ``store``, unchecked and checked, alternated
    call by call (so that a warming cache or a busy machine weighs on both alike)."""
    stamp = store._X.chunks
    times = {(k, checked): [] for k in range(len(calls)) for checked in (False, True)}
    for r in range(repeats + 1):
        for k, call in enumerate(calls):
            for checked in (False, True):
                store._X.chunks = stamp if checked else None
                began = time.perf_counter()
                call()
                if r:  # (the first round warms the caches)
                    times[k, checked].append(time.perf_counter() - began)
    store._X.chunks = stamp
    return {key: float(np.median(value)) for key, value in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--refill", type=int, default=8192, help="rows of one refill")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    values = rng.normal(size=(args.rows, args.features))
    rows = rng.integers(0, args.rows, args.refill)
    print(f"X: {args.rows} x {args.features} float64; refill: {args.refill} scattered rows")
    print(f"{'store':>8} {'chunk rows':>10} {'chunks':>7} {'what':>7} {'unchecked ms':>13} "
          f"{'checked ms':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as folder:
        for where in ("folder", "memory"):
            for chunk_rows in (10_000, 1_000):
                store_of = f"{folder}/X{chunk_rows}.zarr" if where == "folder" else {}
                array = zarr.create_array(store=store_of, shape=values.shape, dtype="f8",
                                          chunks=(chunk_rows, args.features))
                array[:] = values
                store = RowStore(array)
                unit = store.unit_rows()
                timed = _medians(store, [lambda s=store: s.take(rows),
                                         lambda s=store, u=unit: s.read(0, u, check=False)],
                                 args.repeats)
                n_chunks = -(-args.rows // chunk_rows)
                for k, what in enumerate(("refill", "read")):
                    plain, checked = timed[k, False], timed[k, True]
                    print(f"{where:>8} {chunk_rows:>10} {n_chunks:>7} {what:>7} "
                          f"{1e3 * plain:>13.2f} {1e3 * checked:>11.2f} "
                          f"{checked / plain:>6.3f}")


if __name__ == "__main__":
    main()
