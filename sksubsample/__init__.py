"""sksubsample: scalable Bayesian sampling for large data sets.

Three published subsampling algorithms share one core, :mod:`sksubsample.algorithms`:

* racing for discrete sampling as a multi-armed bandit problem (Chen & Ghahramani, ICML 2016),
* the minibatch Barker acceptance test with a correction variable (Seita et al., 2017),
* A* sampling with probability matching (PM-A*).
"""

__version__ = "0.1.0.dev0"

from .cluster import CorefGibbsClusterer
from .linear_model import BayesianLogisticRegressionMH
from .time_series import ARCHOrderSelector

__all__ = [
    "ARCHOrderSelector",
    "BayesianLogisticRegressionMH",
    "CorefGibbsClusterer",
    "__version__",
]
