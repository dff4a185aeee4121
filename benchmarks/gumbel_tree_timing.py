"""Time per selection of the truncated-Gumbel tree (§4.3) for m = 1e3 .. 1e6 elements.

A selection is one exact draw of (max, argmax) of m truncated Gumbels (``sample_max``). The
O(log m) claim means the time per selection grows like log m: the acceptance criterion is
that m = 1e6 costs at most 3x what m = 1e3 costs. The machine is shared, so every size is
timed in many short blocks interleaved across sizes and the minimum block is reported (the
least-disturbed estimate), next to the median. Inserts and removals are timed the same way
(each block inserts ``block`` elements and removes them again, so ``m`` stays fixed).

Usage::

    python benchmarks/gumbel_tree_timing.py            # m = 1e3, 1e4, 1e5, 1e6
    python benchmarks/gumbel_tree_timing.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from sksubsample.algorithms import TruncatedGumbelTree

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    repeats, block = (5, 300) if args.quick else (15, 1000)
    sizes = [10**3, 10**4, 10**5, 10**6]
    rng = np.random.default_rng(args.seed)

    trees, build_s = {}, {}
    for m in sizes:
        # PM-A*-like instance: locations log(w_i Q(S)) + Y_i, truncations G + Y_i
        y = rng.normal(0.0, 3.0, m)
        a = y - math.log(m) + rng.normal(0.0, 2.0, m)
        b = y + rng.gumbel(size=m)
        t0 = time.perf_counter()
        trees[m] = TruncatedGumbelTree.from_arrays(a, b, random_state=rng)
        build_s[m] = time.perf_counter() - t0

    select = {m: [] for m in sizes}
    update = {m: [] for m in sizes}
    for _ in range(repeats):
        for m in sizes:
            tree = trees[m]
            t0 = time.perf_counter()
            for _ in range(block):
                tree.sample_max(rng)
            select[m].append((time.perf_counter() - t0) / block)
            new_a, new_b = rng.normal(-math.log(m), 2.0, block), rng.normal(0.0, 3.0, block)
            t0 = time.perf_counter()
            handles = [
                tree.insert(x, z) for x, z in zip(new_a.tolist(), new_b.tolist(), strict=True)
            ]
            for h in handles:
                tree.remove(h)
            update[m].append((time.perf_counter() - t0) / block)

    rows = []
    for m in sizes:
        rows.append(
            {
                "m": m,
                "select_us_min": 1e6 * min(select[m]),
                "select_us_median": 1e6 * float(np.median(select[m])),
                "insert_remove_us_min": 1e6 * min(update[m]),
                "insert_remove_us_median": 1e6 * float(np.median(update[m])),
                "build_s": build_s[m],
                "height": trees[m].height(),
            }
        )
    ratio_min = rows[-1]["select_us_min"] / rows[0]["select_us_min"]
    ratio_med = rows[-1]["select_us_median"] / rows[0]["select_us_median"]
    print(
        f"{'m':>9} {'select us (min)':>16} {'(median)':>9} {'ins+rm us (min)':>16} "
        f"{'height':>7} {'build s':>8}"
    )
    for r in rows:
        print(
            f"{r['m']:>9} {r['select_us_min']:>16.2f} {r['select_us_median']:>9.2f} "
            f"{r['insert_remove_us_min']:>16.2f} {r['height']:>7} {r['build_s']:>8.2f}"
        )
    print(
        f"selection time ratio m=1e6 / m=1e3: {ratio_min:.2f} (min), {ratio_med:.2f} (median)"
        f"  [criterion: <= 3]"
    )

    RESULTS.mkdir(exist_ok=True)
    out = {
        "rows": rows,
        "ratio_1e6_over_1e3_min": ratio_min,
        "ratio_1e6_over_1e3_median": ratio_med,
        "repeats": repeats,
        "block": block,
        "load_average": os.getloadavg(),
    }
    (RESULTS / "gumbel_tree_timing.json").write_text(json.dumps(out, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ms = [r["m"] for r in rows]
    ax.plot(ms, [r["select_us_min"] for r in rows], "o-", label="select (max + argmax), min")
    ax.plot(ms, [r["select_us_median"] for r in rows], "o--", label="select, median")
    ax.plot(ms, [r["insert_remove_us_min"] for r in rows], "s-", label="insert + remove, min")
    ax.set_xscale("log")
    ax.set_xlabel("m (truncated Gumbels in the tree)")
    ax.set_ylabel("microseconds per operation")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("O(log m) truncated-Gumbel tree")
    fig.tight_layout()
    fig.savefig(RESULTS / "gumbel_tree_timing.png", dpi=120)
    return out


if __name__ == "__main__":
    main()
