"""Generalised linear models as subsampled targets, with compiled kernels for the logistic one.

:class:`GLMTarget` follows every protocol of :mod:`sksubsample.algorithms.mh` and, for the
logistic family, lends the MH step a compiled model (:class:`GLMModel`), so that its chains run
in machine code under the MH laws written once in :mod:`sksubsample.algorithms.mh`.
"""

from ._expansion import ExpansionPlan, GLMTaylorExpansion, ResidualBound
from ._family import BERNOULLI_LOGIT, GLMFamily
from ._model import GLMModel, glm_model
from ._target import Design, GLMTarget

__all__ = ["BERNOULLI_LOGIT", "Design", "ExpansionPlan", "GLMFamily", "GLMModel", "GLMTarget",
           "GLMTaylorExpansion", "ResidualBound", "glm_model"]
