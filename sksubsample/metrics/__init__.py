"""Scores for the package's estimators that scikit-learn does not provide."""

from ._bcubed import b_cubed_score

__all__ = ["b_cubed_score"]
