"""Data that stay where they are stored: rows read in blocks or gathered, never all at once.

:class:`RowStore` reads a design matrix with its response and case weights from a NumPy array
or memory map, a zarr array or a Dask array: passes over the data (:meth:`RowStore.fold`) read
blocks of consecutive rows (as Dask computations on the active scheduler for Dask arrays), and a
chain's minibatches gather their rows in one read (:meth:`RowStore.take`).
"""

from ._rows import (
    Block,
    RowStore,
    as_block,
    check_gathered,
    fold_blocks,
    is_dask_array,
    is_out_of_core,
    is_zarr_array,
    split_block,
)

__all__ = ["Block", "RowStore", "as_block", "check_gathered", "fold_blocks", "is_dask_array",
           "is_out_of_core", "is_zarr_array", "split_block"]
