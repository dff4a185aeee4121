"""A balanced tree over truncated Gumbel variables: the max and the argmax in O(log m).

This is the data structure of §4.3 of "A* sampling with probability matching". It holds a
multiset of independent truncated Gumbel variables ``v_i ~ TG(a_i, b_i)`` (Gumbel with location
``a_i`` conditioned on ``v_i <= b_i``) and draws the pair ``(max_i v_i, argmax_i v_i)`` exactly in
O(log m) time, where ``m`` is the number of variables, instead of drawing all ``m`` of them.

Why a treap
-----------
The keys are the truncation points ``b_i`` and they arrive online (PM-A* inserts the particles
of every new region), so a static Fenwick tree over a known key set does not apply. A treap
(random binary search tree with heap-ordered random priorities) is balanced in expectation
whatever the insertion order, costs O(log m) per insert, and is short to write. Every node
stores, for its subtree, ``log sum exp(a_j)`` and ``log sum exp(a_j - b_j)``: the two range
sums that Eq. 7 needs. Sums are kept in log space so that ``a`` and ``b`` may span hundreds of
nats. Removal merges the two subtrees of the removed node (treap merge), so the tree holds
exactly the live elements.

Equal truncation points are allowed: queries only need the in-order sequence of keys to be
non-decreasing, and removal searches both sides of a tie.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from ..._utils import as_float_array, as_generator, as_real, check_int

__all__ = ["TruncatedGumbelTree"]

_NINF = -math.inf


def _lae(x, y):
    """log(exp(x) + exp(y)) for Python floats (much faster than NumPy on scalars)."""
    if x < y:
        x, y = y, x
    if y == _NINF:
        return x
    return x + math.log1p(math.exp(y - x))


def _log_rate(log_a, log_c, g):
    """log R(g) = log(exp(log_a - g) - exp(log_c)), the minus log CDF of the max (Eq. 7).

    ``log_a`` and ``log_c`` are ``log sum exp(a_j)`` and ``log sum exp(a_j - b_j)`` over the
    variables with ``b_j > g``; since each term has ``a_j - g > a_j - b_j`` the difference is
    positive, and it is formed as ``d + log(-expm1(log_c - d))`` to avoid overflow.
    """
    d = log_a - g
    if d == _NINF or math.isnan(d):
        return _NINF
    r = log_c - d
    if r >= 0.0:  # only reachable by rounding when every active b_j equals g
        return _NINF
    return d + math.log(-math.expm1(r))


class TruncatedGumbelTree:
    """Online multiset of truncated Gumbels with O(log m) insert, remove, max and argmax.

    Each element ``i`` is a variable ``v_i ~ TG(a_i, b_i)``: a Gumbel with location ``a_i``
    (unit scale) conditioned on ``v_i <= b_i``; ``b_i = +inf`` is an untruncated Gumbel. The
    CDF of the maximum is (§4.3)

    ``log U(g) = -sum_{i: b_i > g} [exp(a_i - g) - exp(a_i - b_i)]``,

    which on an interval between consecutive keys only needs the suffix sums of ``exp(a_j)``
    and ``exp(a_j - b_j)``. :meth:`sample_max` inverts it (Eq. 5, 7) by one descent of the
    tree and then draws the argmax given the max, which is proportional to ``exp(a_j)`` over
    the variables with ``b_j > g`` (Eq. 6, 8), by a second descent.

    Parameters
    ----------
    random_state : None, int or np.random.Generator
        Source of the treap priorities (they only affect the shape of the tree, never the
        law of the samples).

    Attributes
    ----------
    n_active : int
        Number of elements held: inserted and not removed (also ``len(tree)``).

    References
    ----------
    "A* sampling with probability matching", §4.3, Problem 1, Eq. 5-8.

    Examples
    --------
    >>> tree = TruncatedGumbelTree(random_state=0)
    >>> handles = [tree.insert(a, b) for a, b in [(0.0, 1.0), (2.0, 0.5), (-1.0, 3.0)]]
    >>> value, winner = tree.sample_max(random_state=0)
    >>> winner in handles and value <= 3.0
    True
    """

    # Node k stores its floats in ``_f[8k : 8k + 8]`` and its children in ``_c[2k : 2k + 2]``
    # (``array`` buffers, not lists of boxed floats), and it caches the sums of its right
    # subtree: a descent reads one or two cache lines per level. Cache misses, not
    # arithmetic, are what separates a 10^6-node tree from a 10^3-node one in pure Python.
    _B, _SAR, _SCR, _A, _AB, _SA, _SC, _P = range(8)

    def __init__(self, random_state=None):
        self._rng = as_generator(random_state)
        # Node 0 is the empty-subtree sentinel: its sums are log(0).
        self._f = array("d", [math.inf, _NINF, _NINF, _NINF, _NINF, _NINF, _NINF, -1.0])
        self._c = array("q", [0, 0])
        self._root = 0
        self.n_active = 0
        # Handles are stable names for elements; node ids are their slots in the arrays.
        self._node_of = []
        self._handle_of = {}
        self._pri_buffer = []

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, a, b, random_state=None):
        """Build a balanced tree holding ``TG(a_i, b_i)`` for all ``i`` in O(m log m).

        The tree is the complete binary search tree of the sorted keys, laid out in
        breadth-first order (the top levels, which every query visits, sit together in
        memory). Its priorities are ``m`` sorted uniforms handed out in that order, so they
        are heap-ordered and later online inserts keep the O(log m) expectation of a treap.

        Parameters
        ----------
        a, b : array_like of shape (m,)
            Locations and truncation points.
        random_state : None, int or np.random.Generator

        Returns
        -------
        TruncatedGumbelTree
            Handles are ``0 .. m-1`` in the order of ``a`` and ``b``.
        """
        a, b = _check_ab(a, b)
        tree = cls(random_state)
        m = a.size
        if m == 0:
            return tree
        order = np.lexsort((np.arange(m), b))  # sorted position -> handle
        # Breadth-first midpoint construction, one vectorised step per level; nodes 1..m.
        node_pos = np.empty(m, dtype=np.int64)
        children = np.zeros((m + 1, 2), dtype=np.int64)
        lo, hi = np.array([0]), np.array([m])
        levels, first = [], 1
        while lo.size:
            mid = (lo + hi) // 2
            ids = np.arange(first, first + lo.size)
            node_pos[ids - 1] = mid
            levels.append(ids)
            first += lo.size
            has_l, has_r = mid > lo, hi > mid + 1
            # children are numbered parent by parent, left before right
            child_lo = np.concatenate([lo[has_l], mid[has_r] + 1])
            child_hi = np.concatenate([mid[has_l], hi[has_r]])
            parent = np.concatenate([ids[has_l], ids[has_r]])
            is_left = np.repeat([True, False], [int(has_l.sum()), int(has_r.sum())])
            by_parent = np.lexsort((~is_left, parent))
            child_ids = first + np.arange(by_parent.size)
            par, lft = parent[by_parent], is_left[by_parent]
            children[par[lft], 0] = child_ids[lft]
            children[par[~lft], 1] = child_ids[~lft]
            lo, hi = child_lo[by_parent], child_hi[by_parent]
        handle = order[node_pos]  # node k - 1 -> handle
        f = np.empty((m + 1, 8))
        f[0] = tree._f
        f[1:, cls._B] = b[handle]
        f[1:, cls._A] = a[handle]
        with np.errstate(invalid="ignore"):
            f[1:, cls._AB] = np.where(
                np.isneginf(f[1:, cls._A]) | np.isposinf(f[1:, cls._B]),
                -np.inf,
                f[1:, cls._A] - f[1:, cls._B],
            )
        f[1:, cls._P] = np.sort(tree._rng.random(m))[::-1]
        sa, sc = f[:, cls._SA], f[:, cls._SC]
        sa[1:], sc[1:] = f[1:, cls._A], f[1:, cls._AB]
        left, right = children[:, 0], children[:, 1]
        for ids in reversed(levels):  # children before parents
            sa[ids] = np.logaddexp(np.logaddexp(sa[left[ids]], sa[ids]), sa[right[ids]])
            sc[ids] = np.logaddexp(np.logaddexp(sc[left[ids]], sc[ids]), sc[right[ids]])
        f[:, cls._SAR] = sa[right]
        f[:, cls._SCR] = sc[right]
        f[0, cls._SAR] = f[0, cls._SCR] = -np.inf
        tree._f = array("d", f.ravel().tobytes())
        tree._c = array("q", children.ravel().tobytes())
        node_of = np.empty(m, dtype=np.int64)
        node_of[handle] = np.arange(1, m + 1)
        tree._node_of = node_of.tolist()
        tree._handle_of = dict(zip(tree._node_of, range(m), strict=True))
        tree._root = 1
        tree.n_active = m
        return tree

    def _new_priority(self):
        if not self._pri_buffer:
            self._pri_buffer = self._rng.random(256).tolist()
        return self._pri_buffer.pop()

    def _replace_child(self, path, old, new):
        """Put node ``new`` where ``old`` hangs: under the last node of ``path``, or at the root."""
        if not path:
            self._root = new
            return
        up = path[-1]
        c = self._c
        if c[2 * up + 1] == old:
            c[2 * up + 1] = new
        else:
            c[2 * up] = new

    def _pull(self, t):
        f, c = self._f, self._c
        o, lo, ro = 8 * t, 8 * c[2 * t], 8 * c[2 * t + 1]
        f[o + 1], f[o + 2] = f[ro + 5], f[ro + 6]
        f[o + 5] = _lae(_lae(f[lo + 5], f[o + 3]), f[o + 1])
        f[o + 6] = _lae(_lae(f[lo + 6], f[o + 4]), f[o + 2])

    def insert(self, a, b):
        """Insert ``TG(a, b)`` in O(log m) expected time.

        Parameters
        ----------
        a : float
            Location; ``-inf`` is allowed (a variable that never wins).
        b : float
            Truncation point, ``> -inf``; ``+inf`` means untruncated.

        Returns
        -------
        int
            A handle for :meth:`remove` and the argmax returned by :meth:`sample_max`.
        """
        a = as_real(a, "a", finite=False)
        b = as_real(b, "b", finite=False)
        if math.isnan(a) or a == math.inf:
            raise ValueError(f"a must be a float < +inf, got {a!r}")
        if math.isnan(b) or b == _NINF:
            raise ValueError(f"b must be a float > -inf, got {b!r}")
        ab = _NINF if (a == _NINF or b == math.inf) else a - b
        f, c = self._f, self._c
        n = len(c) // 2
        pri = self._new_priority()
        f.extend((b, _NINF, _NINF, a, ab, a, ab, pri))
        c.extend((0, 0))
        # Walk down to a leaf slot, adding the new terms to every subtree sum on the way
        # (O(1) per level), then rotate the leaf up while its priority beats its parent's;
        # rotations do not change the key set below the ancestors, so only the two rotated
        # nodes need recomputing (a treap makes O(1) rotations in expectation).
        path, t = [], self._root
        while t:
            path.append(t)
            o = 8 * t
            f[o + 5] = _lae(f[o + 5], a)
            f[o + 6] = _lae(f[o + 6], ab)
            if b >= f[o]:  # ties go right
                f[o + 1] = _lae(f[o + 1], a)
                f[o + 2] = _lae(f[o + 2], ab)
                if not c[2 * t + 1]:
                    c[2 * t + 1] = n
                    break
                t = c[2 * t + 1]
            else:
                if not c[2 * t]:
                    c[2 * t] = n
                    break
                t = c[2 * t]
        if not path:
            self._root = n
        while path and f[8 * path[-1] + 7] < pri:
            p = path.pop()
            if c[2 * p + 1] == n:
                c[2 * p + 1] = c[2 * n]
                c[2 * n] = p
            else:
                c[2 * p] = c[2 * n + 1]
                c[2 * n + 1] = p
            self._pull(p)
            self._pull(n)
            self._replace_child(path, p, n)
        self.n_active += 1
        handle = len(self._node_of)
        self._node_of.append(n)
        self._handle_of[n] = handle
        return handle

    def insert_many(self, a, b):
        """Insert ``TG(a_i, b_i)`` for each ``i``; returns the handles, shape (m,).

        Parameters
        ----------
        a, b : array-like of shape (m,)
            Log-rates and truncation points of the elements, as in :meth:`insert`.
        """
        a, b = _check_ab(a, b)
        pairs = zip(a.tolist(), b.tolist(), strict=True)
        return np.array([self.insert(x, y) for x, y in pairs], dtype=int)

    def remove(self, handle):
        """Remove one element in O(log m) expected time; removing it twice is a no-op.

        The node is replaced by the treap merge of its two subtrees (which keeps the heap
        order of priorities, hence the balance), then the sums on its root path are
        recomputed.

        Parameters
        ----------
        handle : int
            A handle returned by :meth:`insert` or :meth:`insert_many`.
        """
        if not check_int(handle, "handle", low=0) < len(self._node_of):
            raise ValueError(f"handle must be a handle returned by insert, got {handle!r}")
        n = self._node_of[int(handle)]
        if n < 0:
            return
        c = self._c
        path = []
        if not self._path_to(self._root, n, self._f[8 * n], path):  # guards corruption
            raise RuntimeError("handle not found in the tree")
        merged = self._merge(c[2 * n], c[2 * n + 1])
        self._replace_child(path, n, merged)
        for t in reversed(path):
            self._pull(t)
        self.n_active -= 1
        self._node_of[int(handle)] = -1
        del self._handle_of[n]

    def _path_to(self, t, n, key, path):
        """Append the ancestors of node ``n`` below ``t`` to ``path``; False if absent.

        Keys equal to ``key`` may sit on either side of a node (bulk construction orders
        ties by handle, online inserts put them to the right), so ties search both sides;
        with continuous keys that branch is taken with probability zero.
        """
        f, c = self._f, self._c
        while t:
            if t == n:
                return True
            path.append(t)
            if key > f[8 * t]:
                t = c[2 * t + 1]
            elif key < f[8 * t]:
                t = c[2 * t]
            else:
                depth = len(path)
                if self._path_to(c[2 * t], n, key, path):
                    return True
                del path[depth:]
                if self._path_to(c[2 * t + 1], n, key, path):
                    return True
                del path[depth - 1 :]
                return False
        return False

    def _merge(self, left, right):
        """Join two treaps whose keys are all ordered left <= right; O(depth)."""
        f, c = self._f, self._c
        if not left:
            return right
        if not right:
            return left
        if f[8 * left + 7] > f[8 * right + 7]:
            c[2 * left + 1] = self._merge(c[2 * left + 1], right)
            self._pull(left)
            return left
        c[2 * right] = self._merge(left, c[2 * right])
        self._pull(right)
        return right

    def __len__(self):
        return self.n_active

    # ------------------------------------------------------------------ queries
    def _suffix_sums(self, g):
        """``(log sum exp(a_j), log sum exp(a_j - b_j))`` over ``b_j > g``, O(log m)."""
        f, c = self._f, self._c
        t, log_a, log_c = self._root, _NINF, _NINF
        while t:
            o = 8 * t
            if f[o] > g:
                log_a = _lae(log_a, _lae(f[o + 3], f[o + 1]))
                log_c = _lae(log_c, _lae(f[o + 4], f[o + 2]))
                t = c[2 * t]
            else:
                t = c[2 * t + 1]
        return log_a, log_c

    def log_rate_max(self, g):
        """``log(-log P(max_i v_i <= g))`` in O(log m): the CDF on a log-log scale.

        ``log P(max_i v_i <= g) = -exp(log_rate_max(g))``; the log-log form stays finite where
        the log CDF itself under- or overflows, so it is the form to compare when ``a`` and
        ``b`` span hundreds of nats.

        Parameters
        ----------
        g : float
            The level at which the CDF of the maximum is evaluated.
        """
        g = as_real(g, "g")
        log_a, log_c = self._suffix_sums(g)
        return _log_rate(log_a, log_c, g)

    def sample_max(self, random_state=None):
        """Draw ``(max_i v_i, argmax_i v_i)`` exactly in O(log m).

        The max is drawn by inverse transform: with ``E ~ Exp(1)`` (``E = -log s``), one
        descent finds the smallest key ``b_k`` with ``R(b_k) <= E``, so the max lies in
        ``(b_{k-1}, b_k]`` where the variables with keys from ``b_k`` on are the only ones
        still active, and Eq. 7 gives it in closed form. The argmax given the max ``g`` is
        proportional to ``exp(a_j)`` over ``b_j > g`` (Eq. 8) and is found by a second descent.

        Parameters
        ----------
        random_state : None, int or np.random.Generator

        Returns
        -------
        value : float
            The maximum; ``-inf`` when no element can win (empty tree or all ``a = -inf``).
        handle : int
            The argmax; ``-1`` when no element can win.
        """
        rng = as_generator(random_state)
        f, c = self._f, self._c
        if f[8 * self._root + 5] == _NINF:
            return _NINF, -1
        log_e = math.log(rng.standard_exponential())
        t, ar, cr = self._root, _NINF, _NINF
        best_a = best_c = _NINF
        best_b = math.inf
        while t:
            o = 8 * t
            a_ex = _lae(f[o + 1], ar)
            c_ex = _lae(f[o + 2], cr)
            if _log_rate(a_ex, c_ex, f[o]) <= log_e:
                # U(b_t) >= s: the max is at most b_t; look for a smaller such key.
                ar, cr = _lae(a_ex, f[o + 3]), _lae(c_ex, f[o + 4])
                best_a, best_c, best_b = ar, cr, f[o]
                t = c[2 * t]
            else:
                t = c[2 * t + 1]
        # Eq. 7 on (b_{k-1}, b_k]: exp(best_a - g) - exp(best_c) = E.
        value = min(best_a - _lae(log_e, best_c), best_b)
        return value, self._argmax_given(best_a, rng)

    def sample_argmax(self, value, random_state=None):
        """Draw the argmax given that the max equals ``value`` (Eq. 6, 8), O(log m).

        Parameters
        ----------
        value : float
        random_state : None, int or np.random.Generator

        Returns
        -------
        int
            A handle ``j`` drawn with probability proportional to ``exp(a_j)`` among the
            elements with ``b_j > value``; ``-1`` if there is none.
        """
        rng = as_generator(random_state)
        log_a, _ = self._suffix_sums(as_real(value, "value", finite=False))
        if log_a == _NINF:
            return -1
        return self._argmax_given(log_a, rng)

    def _argmax_given(self, log_mass, rng):
        # Target mass measured from the right end of the key order: the suffix {b_j > value}
        # has mass exp(log_mass) > exp(log_t), so the node found always lies in that suffix.
        log_t = math.log(rng.random()) + log_mass
        f, c = self._f, self._c
        t, ar = self._root, _NINF
        while t:
            o = 8 * t
            a_ex = _lae(f[o + 1], ar)
            a_in = _lae(a_ex, f[o + 3])
            if log_t > a_in:
                ar = a_in
                t = c[2 * t]
            elif log_t > a_ex:
                return self._handle_of[t]
            else:
                t = c[2 * t + 1]
        # Only reachable when rounding puts log_t on the boundary of the total mass.
        return self._handle_of[self._rightmost_active()]

    def _rightmost_active(self):
        f, c, t = self._f, self._c, self._root
        while t:
            if f[8 * t + 1] > _NINF:
                t = c[2 * t + 1]
            elif f[8 * t + 3] > _NINF:
                return t
            else:
                t = c[2 * t]
        return 0

    def height(self):
        """Number of nodes on the longest root-to-leaf path."""
        c = self._c
        best, stack = 0, ([(self._root, 1)] if self._root else [])
        while stack:
            t, depth = stack.pop()
            best = max(best, depth)
            for child in (c[2 * t], c[2 * t + 1]):
                if child:
                    stack.append((child, depth + 1))
        return best


def _check_ab(a, b):
    a = as_float_array(a, "a", finite=False).ravel()
    b = as_float_array(b, "b", finite=False).ravel()
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    if np.any(np.isnan(a)) or np.any(a == np.inf):
        raise ValueError("a must not contain NaN or +inf")
    if np.any(np.isnan(b)) or np.any(b == -np.inf):
        raise ValueError("b must not contain NaN or -inf")
    return a, b
