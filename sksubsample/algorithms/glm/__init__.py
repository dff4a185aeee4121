"""Generalised linear models as subsampled targets, with compiled kernels for the logistic one.

:class:`GLMTarget` follows every protocol of :mod:`sksubsample.algorithms.mh` and, for the
logistic family, lends the MH step a compiled model (:class:`GLMModel`), so that its chains run
in machine code under the MH laws written once in :mod:`sksubsample.algorithms.mh`.
:class:`StreamedGLMTarget` is the same target for data that stay in their store (a memory map,
a zarr array, a Dask array: :mod:`sksubsample.algorithms.stores`): its set-up passes over blocks
of rows and its chains read their rows through buffers filled ahead (:class:`RowStream`,
:class:`StreamedGLMModel`).
"""

from ._expansion import ExpansionPlan, GLMTaylorExpansion, ResidualBound
from ._family import BERNOULLI_LOGIT, GLMFamily
from ._leverage import RankedLeverage, TopLeverage
from ._model import GLMModel, glm_model
from ._row_stream import RowStream
from ._streamed import MapFit, PassAt, StreamedGLMTarget, StreamedTaylorExpansion
from ._streamed_model import StreamedGLMModel
from ._target import Design, GLMTarget

__all__ = ["BERNOULLI_LOGIT", "Design", "ExpansionPlan", "GLMFamily", "GLMModel", "GLMTarget",
           "GLMTaylorExpansion", "MapFit", "PassAt", "RankedLeverage", "ResidualBound",
           "RowStream", "StreamedGLMModel", "StreamedGLMTarget", "StreamedTaylorExpansion",
           "TopLeverage", "glm_model"]
