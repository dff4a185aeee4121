"""Draw the architecture figure of the user guide: the row source, the target, the plan, the chain.

Run ``python docs/figures/architecture.py`` to write ``docs/figures/architecture.png``.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

BOXES = {
    # name: (x, y, width, height, title, lines)
    "rows": (0.0, 0.36, 0.235, 0.3, "Row source",
             ["RowStore: NumPy / CSR in memory,", "memory map, zarr, Dask array",
              "fold(): passes over units", "take(): rows gathered"]),
    "target": (0.275, 0.36, 0.235, 0.3, "GLMTarget",
               ["set-up: Newton on a subsample,", "then 1-2 fused passes:",
                "sums, leverages, bound bins", "(Dask: tasks where rows live)"]),
    "plan": (0.55, 0.36, 0.235, 0.3, "Expansion and plan",
             ["Taylor proxies (order 2 or 3)", "exact stratum of top leverage",
              "bound G(R) from the bins", "costs of this machine"]),
    "chain": (0.82, 0.62, 0.18, 0.3, "Chain: in memory",
              ["GLMModel on the rows", "where they are;", "Fisher-Yates minibatches"]),
    "stream": (0.82, 0.1, 0.18, 0.3, "Chain: in a store",
               ["buffer filled ahead by", "a stream of row draws;", "prefetched minibatches"]),
}
ARROWS = [("rows", "target", "passes"), ("target", "plan", "last pass"),
          ("plan", "chain", ""), ("plan", "stream", ""), ("rows", "stream", "gathers")]


def _anchor(box, side):
    x, y, w, h = box[:4]
    return {"right": (x + w, y + h / 2), "left": (x, y + h / 2),
            "bottom": (x + w / 2, y), "top": (x + w / 2, y + h)}[side]


def main():
    fig, ax = plt.subplots(figsize=(12.5, 4.2))
    ax.set_axis_off()
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(0, 1)
    for x, y, w, h, title, lines in BOXES.values():
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01", fc="#eef3fb",
                                    ec="#31558c", lw=1.4))
        ax.text(x + w / 2, y + h - 0.05, title, ha="center", va="top", fontsize=10.5,
                weight="bold")
        ax.text(x + w / 2, y + h - 0.12, "\n".join(lines), ha="center", va="top", fontsize=8)
    for a, b, label in ARROWS:
        if (a, b) == ("rows", "stream"):
            start, end = _anchor(BOXES[a], "bottom"), _anchor(BOXES[b], "left")
            style = "arc3,rad=0.25"
        else:
            start = _anchor(BOXES[a], "right")
            end = _anchor(BOXES[b], "left")
            style = "arc3,rad=0.0"
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14,
                                     connectionstyle=style, color="#31558c", lw=1.2))
        if label:
            mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.03)
            if (a, b) == ("rows", "stream"):
                mid = (0.45, 0.12)
            ax.text(*mid, label, ha="center", fontsize=8.5, style="italic")
    out = Path(__file__).with_suffix(".png")
    fig.savefig(out, dpi=130, bbox_inches="tight")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
