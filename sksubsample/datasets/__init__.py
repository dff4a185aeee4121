"""Generators of the papers' synthetic problems and loaders of real data."""

from ._racing_problem import RacingProblem, make_racing_problem

__all__ = ["RacingProblem", "make_racing_problem"]
