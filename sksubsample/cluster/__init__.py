"""Clustering estimators: entity resolution by annealed (racing) Gibbs sampling."""

from ._coref import CorefGibbsClusterer

__all__ = ["CorefGibbsClusterer"]
