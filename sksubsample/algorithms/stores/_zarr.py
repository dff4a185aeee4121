"""Whether the chunks of a zarr array are still those a fit began with.

zarr reads a chunk that is not in its store as the array's fill value, without a word, and by
default it does not write a chunk that holds only the fill value: a missing chunk may be
legitimate. What is not legitimate is a chunk that was there when the fit began and is gone
(deleted, or the array rewritten) while the fit reads the array: the rows would silently
become the fill value. A :class:`ChunkStamp` records, when the store is made (before the set-up
reads anything), which of the array's storage units hold data: the chunks, or the shards of a
sharded array (zarr 3). Before rows are read (a pass's read unit, a chain's refill of its
buffer), :meth:`ChunkStamp.check` compares the units that hold those rows again, and raises an
error naming the unit and its rows.

What is detected:

* a unit present at the start and missing now (deleted), or missing at the start and present
  now (written during the fit), in any store zarr lists (one listing of the array per check);
* in a local store (a folder), also a unit whose file changed size or modification time: the
  array rewritten in place.

What is not: a change between the check and the read itself (the check narrows the window to
one read, it cannot close it); a rewrite of a unit that keeps its presence in a store other
than a folder (its bytes are not hashed: that would read the array twice); arrays of zarr 2,
which are not checked.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

__all__ = ["ChunkStamp"]


async def _listed(store, prefix):
    return {key async for key in store.list_prefix(prefix)}


def _local_root(array):
    """The folder of a zarr array in a local store, or None."""
    root = getattr(array.store, "root", None)
    if type(array.store).__name__ != "LocalStore" or root is None:
        return None
    return os.path.join(os.fspath(root), array.store_path.path)


class ChunkStamp:
    """The storage units (chunks, or shards) of a zarr array that held data when it was
    stamped, with their files' sizes and modification times in a local store.

    Parameters
    ----------
    array : zarr.Array
        A zarr 3 array (``metadata.encode_chunk_key``, ``store_path``).
    """

    def __init__(self, array):
        shards = getattr(array, "shards", None)
        self.unit_rows = int((shards or array.chunks)[0])
        self.grid = tuple(-(-int(n) // int(c)) for n, c in zip(
            array.shape, shards or array.chunks, strict=True))
        self.n_rows = int(array.shape[0])
        self.array = array
        self.prefix = array.store_path.path
        self.root = _local_root(array)
        self.before = self._look(range(self.grid[0]))

    @classmethod
    def of(cls, array):
        """The stamp of ``array``, or None for a zarr array this cannot read (zarr 2)."""
        metadata = getattr(array, "metadata", None)
        if not hasattr(metadata, "encode_chunk_key") or not hasattr(array, "store_path"):
            return None
        return cls(array)

    def _keys(self, unit):
        """The keys (relative to the array) of the storage units of row unit ``unit``."""
        encode = self.array.metadata.encode_chunk_key
        return [encode((unit, *rest)) for rest in itertools.product(
            *(range(g) for g in self.grid[1:]))]

    def _look(self, units):
        """``{key: stamp}`` of the units of the row units ``units`` that are stored: a local
        file's (size, modification time), True elsewhere."""
        found = {}
        if self.root is not None:
            for unit in units:
                for key in self._keys(unit):
                    try:
                        st = os.stat(os.path.join(self.root, key))
                    except FileNotFoundError:
                        continue
                    found[key] = (st.st_size, st.st_mtime_ns)
            return found
        from zarr.core.sync import sync

        listed = sync(_listed(self.array.store, self.prefix))
        for unit in units:
            for key in self._keys(unit):
                if (f"{self.prefix}/{key}" if self.prefix else key) in listed:
                    found[key] = True
        return found

    def check(self, rows, what="X"):
        """Raise ``RuntimeError`` naming the unit and its rows when a storage unit holding
        ``rows`` (a ``slice`` of rows, or an array of sorted row numbers) changed since the
        stamp."""
        if isinstance(rows, slice):
            units = range(rows.start // self.unit_rows, -(-rows.stop // self.unit_rows))
        else:
            units = np.unique(np.asarray(rows) // self.unit_rows).tolist()
        now = self._look(units)
        for unit in units:
            for key in self._keys(unit):
                then, current = self.before.get(key), now.get(key)
                if then == current:
                    continue
                if current is None:
                    change = "was stored when the fit began and is missing now"
                elif then is None:
                    change = "was written since the fit began (it held only the fill value)"
                else:
                    change = ("was rewritten since the fit began (its file changed size or "
                              "modification time)")
                first = unit * self.unit_rows
                last = min(self.n_rows, first + self.unit_rows) - 1
                raise RuntimeError(
                    f"the zarr array of {what} ({self.array.store_path}): its block {key!r}, "
                    f"rows {first} to {last}, {change}. zarr would read a missing block as "
                    f"the fill value, and the draws would mix two data sets. Keep the array "
                    f"unchanged during a fit (write a new array and fit again)")
