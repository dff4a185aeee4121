"""Rows wherever they are stored, read in blocks or gathered, never all at once.

:class:`RowStore` reads a design matrix with its response and case weights from a NumPy array or
CSR matrix in memory, a memory map, a zarr array or a Dask array: passes over the data
(:meth:`RowStore.fold`) read units of consecutive rows (as Dask computations on the active
scheduler for Dask arrays), and a chain's minibatches gather their rows in one read
(:meth:`RowStore.take`). Values are checked as they are read (:func:`check_gathered` for
gathered rows), an error naming the row and its block of rows.
"""

from ._blocks import Block, as_block, fold_blocks, split_block
from ._checks import check_gathered
from ._prefault import mapped_ahead
from ._rows import RowStore, is_dask_array, is_out_of_core, is_zarr_array
from ._scratch import scratch, zeroed_scratch
from ._threads import let_go, single_threaded_blas

__all__ = ["Block", "RowStore", "as_block", "check_gathered", "fold_blocks", "is_dask_array",
           "is_out_of_core", "is_zarr_array", "let_go", "mapped_ahead", "scratch",
           "single_threaded_blas", "split_block", "zeroed_scratch"]
