"""A* sampling and PM-A*, the balanced tree of truncated Gumbels, and a logistic box bound."""

from ._astar import AStarResult, SearchTrace, astar_sample, pm_astar_sample
from ._gumbel_tree import TruncatedGumbelTree
from ._logistic import LogisticAStarTarget

__all__ = [
    "AStarResult",
    "LogisticAStarTarget",
    "SearchTrace",
    "TruncatedGumbelTree",
    "astar_sample",
    "pm_astar_sample",
]
