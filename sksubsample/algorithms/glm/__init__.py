"""Generalised linear models as subsampled targets, with compiled kernels for the logistic one.

:class:`GLMTarget` is one target over rows wherever they are (arrays and CSR matrices in
memory, memory maps, zarr and Dask arrays, through :mod:`sksubsample.algorithms.stores`): its
set-up is passes of block sums (the MAP by Newton's method, the proxies' sums, the leverages and
the bound's Gram matrices), and it lends the MH step a compiled model (:class:`GLMModel`, on the
rows where they are, or :class:`BufferedGLMModel`, on a buffer a chain fills ahead from a
store), so that its chains run in machine code under the MH laws written once in
:mod:`sksubsample.algorithms.mh`.
"""

from ._buffered import BufferedGLMModel
from ._expansion import GLMTaylorExpansion
from ._family import BERNOULLI_LOGIT, GLMFamily
from ._leverage import TopLeverage
from ._model import GLMModel, glm_model
from ._plan import ExpansionPlan, ResidualBound
from ._row_stream import RowStream
from ._setup import Setup
from ._target import GLMTarget

__all__ = ["BERNOULLI_LOGIT", "BufferedGLMModel", "ExpansionPlan", "GLMFamily", "GLMModel",
           "GLMTarget", "GLMTaylorExpansion", "ResidualBound", "RowStream", "Setup",
           "TopLeverage", "glm_model"]
