"""Generators of the papers' synthetic problems and loaders of real data."""

from ._arch_data import load_nasdaq_returns, load_sp500_returns, simulate_arch
from ._febrl import load_febrl, record_log_potentials
from ._gmm_problem import BinnedPosterior, GaussianMixtureProblem, make_gaussian_mixture_problem
from ._person_records import make_person_records
from ._racing_problem import RacingProblem, make_racing_problem

__all__ = [
    "BinnedPosterior",
    "GaussianMixtureProblem",
    "RacingProblem",
    "load_febrl",
    "load_nasdaq_returns",
    "load_sp500_returns",
    "make_gaussian_mixture_problem",
    "make_person_records",
    "make_racing_problem",
    "record_log_potentials",
    "simulate_arch",
]
