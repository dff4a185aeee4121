"""A partition of mentions into clusters, stored for the compiled Gibbs sweeps.

Clusters live in ``n`` slots. Slot ``k`` keeps its ``size[k]`` members contiguously in
``pool[start[k]:start[k] + size[k]]`` (capacity ``cap[k]``, doubled when full, the pool compacted
when it runs out), so that the ``j``-th member of a cluster, what a race subsamples, is one
index away. ``active[:n_active]`` lists the non-empty slots (``apos`` is the inverse) and
``free[:n_free]`` is a stack of empty slots: a mention removed from a singleton and then put
in a new cluster gets its old slot back, so "moved" means "changed cluster".
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import njit

__all__ = ["N_ACTIVE", "N_FREE", "TOP", "Partition", "Slots", "canonical_labels",
           "exact_cluster_probability", "part_add", "part_new_slot", "part_remove"]

# Fields of the partition's integer state ``meta``.
N_ACTIVE, N_FREE, TOP = 0, 1, 2


class Slots(NamedTuple):
    """The arrays of a :class:`Partition` but its pool (which a sweep may have to grow, and
    returns)."""

    labels: np.ndarray
    size: np.ndarray
    pos: np.ndarray
    start: np.ndarray
    cap: np.ndarray
    active: np.ndarray
    apos: np.ndarray
    free: np.ndarray
    meta: np.ndarray


@njit
def _compact(pool, start, cap, size, active, meta, extra):
    """A new pool holding the active slots' members contiguously, with room for ``extra``
    more entries; capacities become ``max(4, 2 size)``."""
    n_active = meta[N_ACTIVE]
    # Empty slots lose their blocks (their old places are reused): capacity 0.
    cap[:] = 0
    needed = extra
    for a in range(n_active):
        k = active[a]
        needed += max(4, 2 * size[k])
    new = np.empty(max(pool.size, 2 * needed), dtype=np.int64)
    top = 0
    for a in range(n_active):
        k = active[a]
        s = size[k]
        new[top:top + s] = pool[start[k]:start[k] + s]
        start[k] = top
        cap[k] = max(4, 2 * s)
        top += cap[k]
    meta[TOP] = top
    return new


@njit
def part_remove(i, labels, size, pos, start, pool, active, apos, free, meta):
    """Take mention ``i`` out of its slot (its ``labels`` entry is left stale)."""
    k = labels[i]
    last = size[k] - 1
    moved = pool[start[k] + last]
    pool[start[k] + pos[i]] = moved
    pos[moved] = pos[i]
    size[k] = last
    if last == 0:
        # The slot leaves the active list (swap with the last) and goes on the free stack.
        a = apos[k]
        tail = active[meta[N_ACTIVE] - 1]
        active[a] = tail
        apos[tail] = a
        meta[N_ACTIVE] -= 1
        free[meta[N_FREE]] = k
        meta[N_FREE] += 1


@njit
def part_new_slot(free, meta):
    """An empty slot for a new cluster (the update has removed a mention first)."""
    meta[N_FREE] -= 1
    return free[meta[N_FREE]]


@njit
def part_add(i, k, labels, size, pos, start, cap, pool, active, apos, meta):
    """Put mention ``i`` in slot ``k``; returns the pool (a new array when it had to grow)."""
    s = size[k]
    if s == 0:
        active[meta[N_ACTIVE]] = k
        apos[k] = meta[N_ACTIVE]
        meta[N_ACTIVE] += 1
    if s == cap[k]:
        grown = max(4, 2 * cap[k])
        if meta[TOP] + grown > pool.size:
            pool = _compact(pool, start, cap, size, active, meta, grown)
        if s == cap[k]:  # compaction may already have made room
            top = meta[TOP]
            pool[top:top + s] = pool[start[k]:start[k] + s]
            start[k] = top
            cap[k] = grown
            meta[TOP] = top + grown
    pool[start[k] + s] = i
    pos[i] = s
    size[k] = s + 1
    labels[i] = k
    return pool


class Partition:
    """A partition of ``n`` mentions into clusters held in ``n`` slots.

    The arrays of the compiled sweeps (see the module docstring): slot ``k`` holds its members
    in ``pool[start[k]:start[k] + size[k]]``, so a race indexes a uniformly random subsample of
    a cluster directly. ``n`` slots always suffice: removing mention ``i`` leaves at most
    ``n - 1`` clusters, so a free slot exists for the new cluster of a Gibbs update.

    Parameters
    ----------
    labels : ndarray of int of shape (n,)
        Initial cluster of each mention (any non-negative integers below ``n``).
    """

    def __init__(self, labels):
        labels = np.asarray(labels, dtype=np.int64)
        n = labels.size
        self.n = n
        self.labels = labels.copy()
        self.size = np.bincount(labels, minlength=n).astype(np.int64)
        self.cap = np.where(self.size > 0, np.maximum(4, 2 * self.size), 0).astype(np.int64)
        self.start = (np.cumsum(self.cap) - self.cap).astype(np.int64)
        self.pool = np.empty(max(2 * int(self.cap.sum()), 8), dtype=np.int64)
        self.pos = np.empty(n, dtype=np.int64)
        order = np.argsort(labels, kind="stable")
        first = np.cumsum(self.size) - self.size
        self.pos[order] = np.arange(n) - np.repeat(first, self.size)
        self.pool[self.start[labels] + self.pos] = np.arange(n)
        self.active = np.zeros(n, dtype=np.int64)
        self.apos = np.zeros(n, dtype=np.int64)
        used = np.flatnonzero(self.size)
        self.active[:used.size] = used
        self.apos[used] = np.arange(used.size)
        # Free slots as a stack whose top is the smallest empty slot.
        empty = np.flatnonzero(self.size == 0)[::-1]
        self.free = np.zeros(n, dtype=np.int64)
        self.free[:empty.size] = empty
        self.meta = np.array([used.size, empty.size, int(self.cap.sum())], dtype=np.int64)

    def slots(self):
        """The arrays the compiled sweeps update, but the pool (:class:`Slots`)."""
        return Slots(self.labels, self.size, self.pos, self.start, self.cap, self.active,
                     self.apos, self.free, self.meta)

    def remove(self, i):
        """Take mention ``i`` out of its cluster (its ``labels`` entry is left stale)."""
        part_remove(i, self.labels, self.size, self.pos, self.start, self.pool,
                             self.active, self.apos, self.free, self.meta)

    def add(self, i, k):
        """Put mention ``i`` in slot ``k``."""
        self.pool = part_add(i, k, self.labels, self.size, self.pos, self.start,
                                      self.cap, self.pool, self.active, self.apos, self.meta)

    def new_slot(self):
        """A free slot, for a new cluster (the Gibbs update has removed a mention first)."""
        return int(part_new_slot(self.free, self.meta))

    def members(self, k):
        """The members of slot ``k`` (a view)."""
        return self.pool[self.start[k]:self.start[k] + self.size[k]]

    def active_slots(self):
        """The non-empty slots, in the order the updates enumerate them."""
        return self.active[:self.meta[N_ACTIVE]]

    def clusters(self):
        """Member arrays of the non-empty clusters."""
        return [self.members(k) for k in self.active_slots()]

    def n_clusters(self):
        return int(self.meta[N_ACTIVE])

    def canonical_labels(self):
        """Labels ``0..k-1`` numbered in order of first appearance."""
        return canonical_labels(self.labels)


def canonical_labels(labels):
    """Relabel clusters ``0..k-1`` in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def exact_cluster_probability(partitions, labels):
    """For each cluster of ``labels``, the fraction of the ``partitions`` (one per row) that
    hold it exactly: its members share a cluster that has no other member."""
    labels = np.asarray(labels)
    n_clusters = int(labels.max()) + 1
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=n_clusters)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    hits = np.zeros(n_clusters)
    for draw in partitions:
        members = draw[order]
        lo = np.minimum.reduceat(members, starts)
        hi = np.maximum.reduceat(members, starts)
        counts = np.bincount(draw, minlength=int(draw.max()) + 1)
        hits += (lo == hi) & (counts[lo] == sizes)
    return hits / partitions.shape[0]
