"""Gibbs sweeps over a partition of mentions for the pairwise coreference CRF.

The model (Singh et al. 2012; Chen & Ghahramani 2016, §5.3) is
``p(y | x) ∝ exp(Σ_{i<j, y_i = y_j} f(x_i, x_j) / T)``. The conditional of mention ``i`` given
the others puts mass ``∝ exp(Σ_{j ∈ C_k} f(x_i, x_j) / T)`` on every non-empty cluster ``C_k``
(``i`` removed) and ``∝ exp(0) = 1`` on one new, empty cluster. A cluster's log-probability is a
sum of ``|C_k|`` factors, so the update is the discrete sampling problem of Eq. 1 with a
different number of factors per state (App. C.3), solved exactly or by racing.

Racing update. Each cluster is one arm whose rewards are its own factors, subsampled
independently of the other arms (:func:`~sksubsample.algorithms.sample_discrete` with per-state
``n_factors``, i.e. the independent-arms race of Eq. 26-27 and the per-arm schedule of App.
C.3: ``m¹`` factors, then ``max(1, ceil((|C| - m¹)/10))`` more, then doubling). A cluster with
at most ``m¹`` members is read completely in the first round, so it has no estimation error:
those clusters and the new cluster are evaluated together in one vectorised pass, and enter
the race as a single arm with no factors whose log-prior is the log-sum-exp of their exact
log-probabilities. This is the same sampler: by the Gumbel-max property the maximum of
``log p_k + G_k`` over a group is a Gumbel variable located at ``logsumexp_k log p_k`` and the
argmax within the group is independent of it with probabilities ``softmax(log p_k)``; so when the
group wins, the winner inside it is drawn from that softmax. It does the same factor evaluations
as racing every cluster, and the race's ``δ`` is split only among arms that can be misjudged
(comparisons between exact arms cannot err).
"""

from __future__ import annotations

import numpy as np

from ..algorithms import sample_discrete

__all__ = ["Partition", "log_potential", "sweep"]


class Partition:
    """A partition of ``n`` mentions into clusters held in ``n`` slots.

    Slot ``k`` stores its members in ``members[k][:size[k]]`` (an array that grows by doubling)
    and ``pos[i]`` is the place of mention ``i`` in its slot, so that moving a mention costs
    O(1) and a racing update can index a uniformly random subsample of a cluster directly.
    ``n`` slots always suffice: removing mention ``i`` leaves at most ``n - 1`` clusters, so a
    free slot exists for the new cluster of the Gibbs update.

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
        self.pos = np.empty(n, dtype=np.int64)
        order = np.argsort(labels, kind="stable")
        starts = np.concatenate(([0], np.cumsum(self.size)))
        self.members = []
        for k in range(n):
            block = order[starts[k]:starts[k + 1]].astype(np.int64)
            self.members.append(block.copy())
            self.pos[block] = np.arange(block.size)
        # Free slots as a stack: a mention removed from a singleton and put back in a new
        # cluster gets its old slot again, so "moved" means "changed cluster".
        self.free = [int(k) for k in np.flatnonzero(self.size == 0)[::-1]]

    def remove(self, i):
        """Take mention ``i`` out of its cluster (its ``labels`` entry is left stale)."""
        a = self.labels[i]
        p = self.pos[i]
        last = self.size[a] - 1
        moved = self.members[a][last]
        self.members[a][p] = moved
        self.pos[moved] = p
        self.size[a] = last
        if last == 0:
            self.free.append(int(a))

    def add(self, i, k):
        """Put mention ``i`` in slot ``k``."""
        s = self.size[k]
        block = self.members[k]
        if s == block.size:
            grown = np.empty(max(4, 2 * block.size), dtype=np.int64)
            grown[:s] = block
            self.members[k] = block = grown
        block[s] = i
        self.pos[i] = s
        self.size[k] = s + 1
        self.labels[i] = k

    def new_slot(self):
        """A free slot, for a new cluster (the Gibbs update has removed a mention first)."""
        return self.free.pop()

    def clusters(self):
        """Member arrays of the non-empty clusters."""
        return [self.members[k][:self.size[k]] for k in np.flatnonzero(self.size)]

    def canonical_labels(self):
        """Labels ``0..k-1`` numbered in order of first appearance."""
        return canonical_labels(self.labels)


def canonical_labels(labels):
    """Relabel clusters ``0..k-1`` in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def _logsumexp(x):
    # scipy.special.logsumexp costs ~0.1 ms per call, as much as a small race.
    top = x.max()
    return float(top + np.log(np.exp(x - top).sum()))


def _gumbel_argmax(logits, rng):
    return int(np.argmax(logits - np.log(rng.standard_exponential(logits.size))))


def update_exact(part, pot, i, inv_t, rng):
    """Exact Gibbs update of mention ``i``: every factor ``f(x_i, x_j)``, ``j != i``, is read.

    With a sparse precomputed matrix only the stored entries of row ``i`` are read: the other
    factors are the constant ``-repulsion``, summed by counting cluster members.
    """
    pot.set_mention(i)
    part.remove(i)
    if pot.sparse:
        idx, values = pot.stored()
        scores = -pot.repulsion * part.size.astype(np.float64)
        scores += np.bincount(part.labels[idx], weights=values + pot.repulsion,
                              minlength=part.n)
        n_evaluations = idx.size
    else:
        f = pot.row()
        f[i] = 0.0  # i's stale label must add nothing
        scores = np.bincount(part.labels, weights=f, minlength=part.n)
        n_evaluations = part.n - 1
    active = np.flatnonzero(part.size)
    logits = np.append(scores[active] * inv_t, 0.0)
    choice = _gumbel_argmax(logits, rng)
    part.add(i, active[choice] if choice < active.size else part.new_slot())
    return n_evaluations


def update_racing(part, pot, i, inv_t, delta, first_batch, rng):
    """Racing Gibbs update of mention ``i`` (module docstring); returns factors evaluated.

    With a sparse precomputed matrix, a cluster holding no stored neighbour of ``i`` has the
    exact log-probability ``-repulsion·|C_k|/T`` and joins the exact group at no cost; only
    clusters larger than ``first_batch`` with a stored neighbour are raced.
    """
    pot.set_mention(i)
    part.remove(i)
    size = part.size
    labels = part.labels
    if pot.sparse:
        idx, values = pot.stored()
        touched = np.zeros(part.n, dtype=bool)
        touched[labels[idx]] = True
        raced = (size > first_batch) & touched
        small_slot = (size > 0) & ~raced
        small = np.flatnonzero(small_slot)
        keep = small_slot[labels[idx]]
        scores = -pot.repulsion * size.astype(np.float64)
        scores += np.bincount(labels[idx[keep]], weights=values[keep] + pot.repulsion,
                              minlength=part.n)
        logits = np.append(scores[small] * inv_t, 0.0)
        n_evaluations = int(keep.sum())
        big = np.flatnonzero(raced)
    else:
        small_slot = (size > 0) & (size <= first_batch)
        small = np.flatnonzero(small_slot)
        big = np.flatnonzero(size > first_batch)
        in_small = small_slot[labels]
        in_small[i] = False
        js = np.flatnonzero(in_small)
        n_evaluations = js.size
        if js.size:
            scores = np.bincount(labels[js], weights=pot.pairs(js), minlength=part.n)
            logits = np.append(scores[small] * inv_t, 0.0)
        else:
            logits = np.zeros(small.size + 1)
    if big.size:
        members = part.members

        def log_factors(states, idx):
            return (pot.pairs(members[big[states[0] - 1]][idx]) * inv_t)[None, :]

        draw = sample_discrete(
            log_factors, np.concatenate(([0], size[big])),
            np.concatenate(([_logsumexp(logits)], np.zeros(big.size))),
            method="racing", delta=delta, variance="independent", first_batch=first_batch,
            random_state=rng)
        n_evaluations += draw.n_evaluations
        if draw.sample > 0:
            part.add(i, big[draw.sample - 1])
            return n_evaluations
    choice = _gumbel_argmax(logits, rng)
    part.add(i, small[choice] if choice < small.size else part.new_slot())
    return n_evaluations


def sweep(part, pot, temperature, method, delta, first_batch, rng):
    """One Gibbs sweep at ``temperature``, mentions in a fresh random order.

    Returns
    -------
    n_evaluations : int
        Factors ``f(x_i, x_j)`` evaluated.
    n_moves : int
        Mentions that changed cluster.
    """
    inv_t = 1.0 / temperature
    n_evaluations = 0
    n_moves = 0
    labels = part.labels
    for i in rng.permutation(part.n):
        old = labels[i]
        if method == "exact":
            n_evaluations += update_exact(part, pot, i, inv_t, rng)
        else:
            n_evaluations += update_racing(part, pot, i, inv_t, delta, first_batch, rng)
        n_moves += labels[i] != old
    return n_evaluations, int(n_moves)


def log_potential(part, pot):
    """``Σ_{i<j, y_i = y_j} f(x_i, x_j)`` of the current partition (at ``T = 1``)."""
    return pot.partition_sum(part.labels, part.clusters())
