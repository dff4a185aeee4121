"""Clusters grouped by size: the clusters a Gibbs update scores as one aggregate.

With sparse precomputed potentials, a mention ``i`` has stored potentials with the members of
a few clusters only; every other cluster ``C_k`` has log-probability ``-repulsion · |C_k| / T``,
which depends on its size alone. Those clusters enter an update as one candidate whose weight
is ``Σ_s (c_s - t_s) exp(-repulsion · s / T)``, with ``c_s`` the clusters of size ``s`` and
``t_s`` those of them scored one by one; when it wins, a size is drawn in proportion to these
weights and then a cluster of that size uniformly, the law of drawing that cluster among all
(Gibbs update, Chen & Ghahramani 2016, §5.3).

:class:`SizeClasses` keeps every slot of a partition sorted by size (``by_size``, with
``first[s]`` the position of the first slot of size ``s``), so that the clusters of one size
are contiguous and a slot changes size in ``O(1)`` by one swap at the border of its class, and
a Fenwick tree over sizes of ``c_s · w_s``, ``w_s = exp(-repulsion (s - 1) / T)``, from which a
size is drawn in ``O(log n)``. Its floating-point sums are rebuilt from the exact integer counts
at the start of every sweep (:func:`size_classes`), so that rounding never accumulates over more
than one sweep.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import njit

__all__ = ["SizeClasses", "class_count", "class_draw", "class_grow", "class_shrink",
           "rest_draw_exact", "rest_weight_exact", "size_classes"]


class SizeClasses(NamedTuple):
    """Slots grouped by size and the Fenwick tree of the class weights.

    Attributes
    ----------
    by_size : ndarray of int64 of shape (n,)
        Every slot, in increasing order of size (empty slots first).
    first : ndarray of int64 of shape (n + 2,)
        ``first[s]``: where the slots of size ``s`` start in ``by_size`` (``first[n + 1] = n``).
    where : ndarray of int64 of shape (n,)
        The position of each slot in ``by_size``.
    weight : ndarray of shape (n + 2,)
        ``w_s = exp(-repulsion (s - 1) / T)`` for ``s >= 1`` (``w_0 = 0``).
    tree : ndarray of shape (n + 1,)
        The Fenwick tree of ``c_s · w_s`` over ``s = 1..n``.
    total : ndarray of shape (1,)
        ``Σ_s c_s · w_s``.
    """

    by_size: np.ndarray
    first: np.ndarray
    where: np.ndarray
    weight: np.ndarray
    tree: np.ndarray
    total: np.ndarray


@njit
def size_classes(size, repulsion, inv_t):
    """The :class:`SizeClasses` of the slots of sizes ``size`` at temperature ``1 / inv_t``."""
    n = size.size
    counts = np.zeros(n + 2, dtype=np.int64)
    for k in range(n):
        counts[size[k]] += 1
    first = np.zeros(n + 2, dtype=np.int64)
    for s in range(1, n + 2):
        first[s] = first[s - 1] + counts[s - 1]
    fill = first.copy()
    by_size = np.empty(n, dtype=np.int64)
    where = np.empty(n, dtype=np.int64)
    for k in range(n):
        p = fill[size[k]]
        by_size[p] = k
        where[k] = p
        fill[size[k]] = p + 1
    weight = np.zeros(n + 2)
    step = repulsion * inv_t
    for s in range(1, n + 2):
        weight[s] = math.exp(-step * (s - 1))
    # The Fenwick tree in O(n): each node passes its partial sum to its parent.
    tree = np.zeros(n + 1)
    total = 0.0
    for s in range(1, n + 1):
        value = counts[s] * weight[s]
        tree[s] += value
        total += value
        parent = s + (s & -s)
        if parent <= n:
            tree[parent] += tree[s]
    return SizeClasses(by_size, first, where, weight, tree, np.array([total]))


@njit(inline="always")
def class_count(classes, s):
    """``c_s``: the slots of size ``s``."""
    return classes.first[s + 1] - classes.first[s]


@njit(inline="always")
def _tree_add(classes, s, value):
    if s < 1 or value == 0.0:
        return
    tree = classes.tree
    n = tree.size - 1
    while s <= n:
        tree[s] += value
        s += s & -s
    classes.total[0] += value


@njit(inline="always")
def _swap(classes, k, p):
    """Put slot ``k`` at position ``p`` of ``by_size`` (the slot there takes ``k``'s place)."""
    q = classes.where[k]
    other = classes.by_size[p]
    classes.by_size[q] = other
    classes.where[other] = q
    classes.by_size[p] = k
    classes.where[k] = p


@njit
def class_grow(classes, k, s):
    """Slot ``k`` grows from size ``s`` to ``s + 1``: it moves to the end of its class, which
    becomes the start of the next."""
    _swap(classes, k, classes.first[s + 1] - 1)
    classes.first[s + 1] -= 1
    w = classes.weight
    _tree_add(classes, s, -w[s])
    _tree_add(classes, s + 1, w[s + 1])


@njit
def class_shrink(classes, k, s):
    """Slot ``k`` shrinks from size ``s`` to ``s - 1``: it moves to the start of its class,
    which becomes the end of the previous."""
    _swap(classes, k, classes.first[s])
    classes.first[s] += 1
    w = classes.weight
    _tree_add(classes, s, -w[s])
    _tree_add(classes, s - 1, w[s - 1])


@njit
def class_draw(classes, u):
    """The size ``s`` whose class holds the fraction ``u`` of the tree's total weight (the
    smallest ``s`` with ``Σ_{s' <= s} c_s' w_s' > u · total``), in ``O(log n)``; ``n + 1``
    when rounding sends ``u · total`` past the last class."""
    tree = classes.tree
    n = tree.size - 1
    target = u * classes.total[0]
    pos = 0
    step = 1
    while 2 * step <= n:
        step *= 2
    while step > 0:
        nxt = pos + step
        if nxt <= n and tree[nxt] <= target:
            pos = nxt
            target -= tree[nxt]
        step //= 2
    return pos + 1


@njit
def rest_weight_exact(classes, size, n_left_out):
    """``Σ_s (c_s - t_s) w_s`` summed class by class over the sizes present, where
    ``n_left_out[s]`` is ``t_s`` (``O(number of distinct sizes)``)."""
    n = size.size
    total = 0.0
    p = classes.first[1]
    while p < n:
        s = size[classes.by_size[p]]
        end = classes.first[s + 1]
        total += (end - p - n_left_out[s]) * classes.weight[s]
        p = end
    return total


@njit
def rest_draw_exact(classes, size, n_left_out, target):
    """The size whose class reaches ``target`` in the cumulative sums of
    :func:`rest_weight_exact` (the last class of positive weight if rounding runs past)."""
    n = size.size
    acc = 0.0
    last = -1
    p = classes.first[1]
    while p < n:
        s = size[classes.by_size[p]]
        end = classes.first[s + 1]
        mass = (end - p - n_left_out[s]) * classes.weight[s]
        if mass > 0.0:
            last = s
            acc += mass
            if target < acc:
                return s
        p = end
    return last
