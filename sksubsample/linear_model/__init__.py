"""Linear models whose posterior is sampled by subsampled MCMC."""

from ._logistic import BayesianLogisticRegressionMH

__all__ = ["BayesianLogisticRegressionMH"]
