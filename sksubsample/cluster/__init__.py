"""Clustering estimators: entity resolution by annealed (racing) Gibbs sampling, and the
adapter that turns scored record pairs (Splink, recordlinkage) into their input."""

from ._coref import CorefGibbsClusterer
from ._splink import RecordPairs, pairwise_log_potentials

__all__ = ["CorefGibbsClusterer", "RecordPairs", "pairwise_log_potentials"]
