"""Time-series models: Bayesian ARCH order selection (Chen & Ghahramani 2016, §5.2)."""

from ._arch import ARCHOrderSelector

__all__ = ["ARCHOrderSelector"]
