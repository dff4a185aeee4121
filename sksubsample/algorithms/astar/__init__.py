"""A* sampling and A* sampling with probability matching (PM-A*): exact or budgeted draws
through a top-down Gumbel process, with the O(log m) truncated-Gumbel tree of PM-A*, and a
certified box bound for the logistic posterior."""

from ._astar import astar_sample, pm_astar_sample
from ._gumbel_tree import TruncatedGumbelTree
from ._logistic import LogisticAStarTarget
from ._search import AStarResult, SearchTrace

__all__ = [
    "AStarResult",
    "LogisticAStarTarget",
    "SearchTrace",
    "TruncatedGumbelTree",
    "astar_sample",
    "pm_astar_sample",
]
