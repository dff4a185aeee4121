"""How the records model's hot compiled functions are compiled: borrowing their arguments.

numba takes a reference to every array an argument holds when a compiled function is entered,
and releases it on return: an atomic operation each way per array. The records model's
per-cluster functions take the model (:class:`~._records.RecordsModel`) and the cluster
statistics (:class:`~._records_cache.ClusterCache`), about forty arrays between them, and are
called for every cluster a record is scored against and every record a split-merge proposal
allocates: those references took about a quarter of a fit's time at 50 000 records. Functions
that allocate no array and return none need no reference counting (their caller holds every
array throughout the call), so they are compiled without it; the arithmetic, and so every draw,
is the same bits.
"""

from __future__ import annotations

from ..algorithms.kernels import njit

__all__ = ["njit_borrowing"]


def njit_borrowing(function=None, **options):
    """:func:`~sksubsample.algorithms.kernels.njit` without reference counting, for a function
    that allocates no array and returns none (``options`` as for ``njit``)."""
    return njit(function, _nrt=False, **options)
