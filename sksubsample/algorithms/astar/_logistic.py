"""The Bayesian logistic-regression posterior as an A* sampling problem: proposal and bound.

A* sampling (Maddison, Tarlow & Minka, 2014; "A* sampling with probability matching", §2.2)
needs a proposal ``Q`` whose boxes it can measure and split, and an upper bound ``B(S)`` of
``o = log p - log q`` on every box ``S``. For the tempered posterior

    log p(θ) = -‖θ‖² / (2τ²) + Σ_i c_i log σ(s_i x_iᵀθ),    c_i = w_i / T,

this module builds both in whitened coordinates ``u``: ``θ = m + L u`` with ``m`` the MAP and
``L = V Λ^{-1/2}`` from the eigendecomposition ``P = V Λ Vᵀ`` of the Laplace precision
``P = Σ_i c_i σ(z_i)σ(-z_i) x_i x_iᵀ + I/τ²`` at ``m``. A box in ``u`` is a parallelotope in
``θ``; every bound below is derived, and valid, in ``u``, where the search runs.

**Proposal.** An independent product of logistic distributions of scale ``s`` in ``u``. A
Gaussian Laplace proposal cannot serve: the posterior's log density falls off linearly along
every direction (the likelihood) plus ``‖θ‖²/(2τ²)`` (the prior), far slower than the
Laplace Gaussian's ``θᵀPθ/2``, so ``o → +∞`` in its tails and no box reaching them has a
finite bound. Logistic tails fall off linearly, slower than the prior's quadratic: ``o`` is
bounded above. And ``φ(u) = -log q(u)`` is convex with slope below ``1/s``, which both bounds
use.

**Bound 1 (finite boxes; cheap).** Write each term through its logit ``z_i = z0_i + Δ_i``,
``Δ_i = b_iᵀu``, ``b_i = s_i Lᵀx_i``, and expand it to second order at the MAP:
``log σ(z) = ℓ_i + g_iΔ - ½κ_iΔ² + r_i(Δ)``. The quadratic parts of all terms and of the
prior sum to ``-½ uᵀMu`` with ``M = LᵀPL = I`` (up to rounding, which ``μ = ‖M - I‖₂``
absorbs), and the linear parts to ``εᵀu``, ``ε = Lᵀ∇log p(m) ≈ 0``. So

    o(u) = C + Σ_i c_i r_i(Δ_i) - ½uᵀMu + εᵀu + Σ_k φ(u_k)

and on a box, ``Δ_i`` ranges over an interval known in closed form (interval arithmetic on a
linear function). Each remainder ``r_i`` is quasi-convex (its derivative
``σ(-z) - σ(-z0) + κ(z - z0)`` vanishes at ``z0``, is increasing where ``|z| > |z0|`` and
decreasing inside, so ``r_i`` falls to a single minimum and rises after it, flat at ``z0``),
so its supremum over an interval is at an end. The rest is separable and, for ``s² ≥ 1 /
(2(1 - μ))``, concave in each ``u_k``: its supremum is at the clipped maximiser. The sum of
the suprema bounds the supremum of the sum, and since the remainders are of third order the
bound is tight on small boxes (the first-order parts, which cancel in the sum, are never
bounded term by term).

**Bound 2 (any box with at most one infinite end per coordinate).** On ``[lo, hi]`` the convex
``φ`` is below its chord; on ``[lo, ∞)`` below ``φ(lo) + (u - lo)/s``; on ``(-∞, hi]`` below
``φ(hi) + (hi - u)/s``. With that linear majorant ``ψ``, ``F = log p(θ(u)) + Σ_k ψ_k(u_k)``
bounds ``o`` on the box and is strongly concave: ``-∇²F ⪰ LᵀL/τ² ⪰ diag(α)``. A few
box-constrained Newton steps give a point ``u*`` with gradient ``g``; then for every ``u`` in
the box ``F(u) ≤ F(u*) + gᵀ(u - u*) - ½Σ_k α_k (u_k - u*_k)²``, whose supremum over the box
is separable: a certified upper bound whatever the optimiser's accuracy (its accuracy only
decides how tight). This is the bound that makes the tails prunable: interval arithmetic on
a box with an infinite end lets half of the logits run to ``+∞`` and loses the likelihood's
decay, the concave maximisation keeps it.

A box that is infinite at both ends of a coordinate (only boxes at depth ``< d`` of the
search tree are) gets ``B = +∞``: it is always expanded.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, sparse, special, stats

from ..._utils import check_positive, check_rows, check_vector

__all__ = ["LogisticAStarTarget"]

# Rounding of the sums of N terms that the identities behind the bounds hold up to (in units
# of the largest term), added to every bound so that it stays above the computed ``o``.
_ROUNDING = 1e-11
# Newton steps of bound 2 stop once the certified bound is this close to the value found.
_GAP = 1e-6
_NEWTON_STEPS = 30


class LogisticAStarTarget:
    """Whitened posterior of Bayesian logistic regression for A* and PM-A* sampling.

    Parameters
    ----------
    design : ndarray or sparse matrix of shape (n_samples, n_params)
        The rows ``x_i`` (with a column of ones for an intercept).
    signs : ndarray of shape (n_samples,)
        ``s_i = ±1`` (``2 y - 1``).
    prior_scale : float > 0
        Standard deviation ``τ`` of the ``N(0, τ² I)`` prior.
    center : ndarray of shape (n_params,)
        Expansion point ``m``: the MAP (any point gives valid bounds; the MAP makes them
        tight and the proposal close to the posterior).
    weights : ndarray of shape (n_samples,) or None, default=None
        Non-negative case weights ``w_i``.
    temperature : float > 0, default=1.0
        ``T``: the likelihood is raised to ``1/T``.
    proposal_scale : float, default=1.0
        Scale ``s`` of the logistic proposal in whitened units (standard deviation
        ``s π / √3``, 1.81 at the default: wider than the posterior, whose whitened standard
        deviations are near 1, so that skewed posteriors stay covered). At least ``1/√2``, so
        that bound 1 is concave in each coordinate.

    Attributes
    ----------
    n_params : int
    n_data : int
        Terms with positive weight (what one evaluation of the log density reads).
    proposal : list of frozen ``scipy.stats.logistic``
        ``Q`` in whitened coordinates, for :func:`astar_sample` and :func:`pm_astar_sample`.
    whitening : ndarray of shape (n_params, n_params)
        ``L``: ``θ = center + u @ L.T``.
    n_bound_passes : int
        Passes over the ``n_data`` terms made by :meth:`bound` so far (bound 1 makes one,
        every Newton step and line-search trial of bound 2 one more).

    References
    ----------
    Maddison, Tarlow & Minka, "A* sampling", NIPS 2014 (Alg. 2 needs ``B(S) ≥ sup_S o``).
    "A* sampling with probability matching", §2.2 and §5.3.2 (Bayesian logistic regression).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.standard_normal(200), np.ones(200)])
    >>> s = np.where(rng.random(200) < 1 / (1 + np.exp(-X[:, 0])), 1.0, -1.0)
    >>> target = LogisticAStarTarget(X, s, prior_scale=10.0, center=np.zeros(2))
    >>> u = rng.uniform(-0.1, 0.1, size=(5, 2))  # points of the box [-0.1, 0.1]²
    >>> o = target.log_density(u) - sum(q.logpdf(u[:, k]) for k, q in
    ...                                 enumerate(target.proposal))
    >>> bool(np.all(o <= target.bound(np.full(2, -0.1), np.full(2, 0.1))))
    True
    """

    def __init__(self, design, signs, *, prior_scale, center, weights=None, temperature=1.0,
                 proposal_scale=1.0):
        design = check_rows(design.toarray() if sparse.issparse(design) else design, "design")
        signs = check_vector(signs, "signs", design.shape[0], per="design")
        if not np.all(np.abs(signs) == 1.0):
            raise ValueError("signs must be +1 or -1 (the labels coded as signs)")
        temperature = check_positive(temperature, "temperature")
        c = np.full(design.shape[0], 1.0 / temperature)
        if weights is not None:
            c = check_vector(weights, "weights", design.shape[0], per="design") / temperature
            if np.any(c < 0) or not np.any(c > 0):
                raise ValueError("weights must be non-negative with at least one positive")
        keep = c > 0
        design, signs, c = design[keep], signs[keep], c[keep]
        if check_positive(proposal_scale, "proposal_scale") < 1 / math.sqrt(2):
            raise ValueError(f"proposal_scale must be at least 1/√2, got {proposal_scale}")
        m = check_vector(center, "center", design.shape[1])
        tau2 = check_positive(prior_scale, "prior_scale") ** 2
        self.n_params, self.n_data = m.size, design.shape[0]
        self.center, self._tau2, self._c, self._s = m, tau2, c, float(proposal_scale)
        z0 = signs * (design @ m)
        kappa = special.expit(z0) * special.expit(-z0)
        precision = design.T @ (design * (c * kappa)[:, None]) + np.eye(m.size) / tau2
        lam, vecs = linalg.eigh(0.5 * (precision + precision.T))
        L = vecs / np.sqrt(lam)
        B = signs[:, None] * (design @ L)
        self.whitening, self._B, self._z0 = L, B, z0
        self._l0, self._g, self._kappa = special.log_expit(z0), special.expit(-z0), kappa
        LtL = L.T @ L
        # (the prior's curvature in u, a constant of every pass of bound 2)
        self._prior_curvature = LtL / tau2
        # The prior's curvature in u is LᵀL/τ² = diag(1/λ)/τ² up to the rounding of V's
        # orthogonality: a rigorous diagonal lower bound keeps bound 2 certified.
        off = np.linalg.norm(LtL - np.diag(np.diag(LtL)), 2)
        self._alpha = np.maximum(np.diag(LtL) - off, 0.0) / tau2
        M = B.T @ (B * (c * kappa)[:, None]) + self._prior_curvature
        self._mu = float(np.linalg.norm(M - np.eye(m.size), 2))
        self._eps = B.T @ (c * self._g) - L.T @ m / tau2
        self._C = float(c @ self._l0 - m @ m / (2 * tau2))
        self._margin = _ROUNDING * (1.0 + float(c.sum()) + abs(self._C))
        if (1.0 - self._mu) * 2 * self._s**2 < 1.0:
            raise ValueError("the Laplace whitening is too inaccurate for bound 1")
        # Maximiser of the separable part of bound 1 in each coordinate (concave: bisection).
        self._u1 = np.array([_argmax_concave(lambda u, k=k: self._sep1_slope(u, k))
                             for k in range(m.size)])
        self.proposal = [stats.logistic(scale=self._s) for _ in range(m.size)]
        self.n_bound_passes = 0

    # ------------------------------------------------------------------ densities
    def to_params(self, u):
        """θ = center + u Lᵀ for ``u`` of shape (m, n_params).

        Parameters
        ----------
        u : array-like of shape (m, n_params)
            Points in the whitened coordinates.
        """
        return self.center + np.asarray(u) @ self.whitening.T

    def log_density(self, u):
        """Unnormalised ``log p(θ(u))`` for ``u`` of shape (m, n_params): N terms a row.

        Parameters
        ----------
        u : array-like of shape (m, n_params)
            Points in the whitened coordinates.
        """
        u = np.atleast_2d(u)
        theta = self.to_params(u)
        z = self._z0[:, None] + self._B @ u.T
        return -np.sum(theta**2, axis=1) / (2 * self._tau2) + self._c @ special.log_expit(z)

    def _phi(self, u):
        """-log q(u) per coordinate (logistic of scale s), stable for any u."""
        a = np.abs(u) / self._s
        return a + 2.0 * np.log1p(np.exp(-a)) + math.log(self._s)

    def _sep1_slope(self, u, k):
        return -(1.0 - self._mu) * u + self._eps[k] + np.tanh(u / (2 * self._s)) / self._s

    def _sep1(self, u, k):
        return -0.5 * (1.0 - self._mu) * u**2 + self._eps[k] * u + self._phi(u)

    # ------------------------------------------------------------------ bounds
    def _delta_range(self, lower, upper):
        with np.errstate(invalid="ignore"):
            lo = np.where(self._B > 0, self._B * lower, self._B * upper)
            hi = np.where(self._B > 0, self._B * upper, self._B * lower)
        lo = np.where(self._B == 0, 0.0, lo).sum(axis=1)
        hi = np.where(self._B == 0, 0.0, hi).sum(axis=1)
        return lo, hi

    def _remainder(self, delta):
        with np.errstate(invalid="ignore", over="ignore"):
            r = (special.log_expit(self._z0 + delta) - self._l0 - self._g * delta
                 + 0.5 * self._kappa * delta**2)
        return np.where(np.isfinite(delta), r, np.inf)

    def bound_taylor(self, lower, upper):
        """Bound 1: ``C + Σ_i c_i max r_i(ends) + Σ_k sup`` of the separable part.

        Parameters
        ----------
        lower, upper : ndarray of shape (n_params,)
            The box's corners in ``u`` (entries may be infinite).
        """
        self.n_bound_passes += 1
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            return math.inf
        d_lo, d_hi = self._delta_range(lower, upper)
        rem = np.maximum(self._remainder(d_lo), self._remainder(d_hi))
        u = np.clip(self._u1, lower, upper)
        sep = sum(self._sep1(u[k], k) for k in range(self.n_params))
        return float(self._C + self._c @ rem + sep) + self._margin

    def bound_concave(self, lower, upper):
        """Bound 2: certified maximum of the concave majorant ``F`` (box-constrained Newton).

        Parameters
        ----------
        lower, upper : ndarray of shape (n_params,)
            The box's corners in ``u`` (entries may be infinite).
        """
        if np.any(np.isneginf(lower) & np.isposinf(upper)):
            return math.inf
        slope, offset = self._majorant(lower, upper)
        u = np.clip(np.zeros(self.n_params), lower, upper)
        value, grad, hess = self._concave(u, slope, offset)
        best = math.inf
        for _ in range(_NEWTON_STEPS):
            best = min(best, value + self._certificate(u, grad, lower, upper))
            if best - value <= _GAP:
                break
            free = ~(((u <= lower) & (grad < 0)) | ((u >= upper) & (grad > 0)))
            step = np.zeros_like(u)
            step[free] = np.linalg.solve(hess[np.ix_(free, free)], -grad[free])
            t = 1.0
            while True:
                trial = np.clip(u + t * step, lower, upper)
                v, g, h = self._concave(trial, slope, offset)
                if v >= value + 1e-4 * grad @ (trial - u) or t < 1e-8:
                    break
                t *= 0.5
            if v < value:
                break
            u, value, grad, hess = trial, v, g, h
        best = min(best, value + self._certificate(u, grad, lower, upper))
        return float(best) + self._margin

    def bound(self, lower, upper):
        """``B(S) ≥ sup_S (log p(θ(u)) - log q(u))`` on the box ``[lower, upper]`` (in ``u``).

        The smaller of bound 1 (finite boxes) and bound 2 (boxes with at most one infinite
        end per coordinate; each is the tighter on some boxes); ``+∞`` on a box infinite at
        both ends of a coordinate.

        Parameters
        ----------
        lower, upper : ndarray of shape (n_params,)
            The box's corners in ``u`` (entries may be infinite).
        """
        lower = np.asarray(lower, dtype=float)
        upper = np.asarray(upper, dtype=float)
        return min(self.bound_taylor(lower, upper), self.bound_concave(lower, upper))

    def _majorant(self, lower, upper):
        """Slopes and offsets of the linear majorants ψ_k(u) = slope_k u + offset_k of φ."""
        slope = np.empty(self.n_params)
        offset = np.empty(self.n_params)
        for k in range(self.n_params):
            lo, hi = lower[k], upper[k]
            if np.isfinite(lo) and np.isfinite(hi):
                f_lo, f_hi = self._phi(lo), self._phi(hi)
                slope[k] = (f_hi - f_lo) / (hi - lo) if hi > lo else 0.0
                offset[k] = max(f_lo - slope[k] * lo, f_hi - slope[k] * hi)
            elif np.isfinite(lo):  # [lo, ∞): φ' < 1/s
                slope[k], offset[k] = 1.0 / self._s, self._phi(lo) - lo / self._s
            else:  # (-∞, hi]
                slope[k], offset[k] = -1.0 / self._s, self._phi(hi) + hi / self._s
        return slope, offset

    def _concave(self, u, slope, offset):
        """F(u), ∇F(u), ∇²F(u) for F = log p(θ(u)) + Σ ψ_k(u_k): one pass over the terms."""
        self.n_bound_passes += 1
        theta = self.center + self.whitening @ u
        z = self._z0 + self._B @ u
        lin = self.whitening.T @ theta / self._tau2
        value = (-theta @ theta / (2 * self._tau2) + self._c @ special.log_expit(z)
                 + slope @ u + offset.sum())
        grad = self._B.T @ (self._c * special.expit(-z)) - lin + slope
        w = self._c * special.expit(z) * special.expit(-z)
        hess = -(self._B.T @ (self._B * w[:, None])) - self._prior_curvature
        return float(value), grad, hess

    def _certificate(self, u, grad, lower, upper):
        """sup over the box of gᵀ(v - u) - ½ Σ α_k (v_k - u_k)² (separable, concave)."""
        gain = 0.0
        # a plain loop: d is small and numpy's per-call cost dominates at this size
        for uk, gk, ak, lo, hi in zip(u.tolist(), grad.tolist(), self._alpha.tolist(),
                                      lower.tolist(), upper.tolist(), strict=True):
            if gk == 0.0:
                continue
            if ak > 0:
                v = min(max(uk + gk / ak, lo), hi)
            else:
                v = hi if gk > 0 else lo
            if math.isinf(v):
                return math.inf
            dv = v - uk
            gain += gk * dv - 0.5 * ak * dv * dv
        return gain


def _argmax_concave(slope, lo=-1e6, hi=1e6):
    """Root of a decreasing function ``slope`` on [lo, hi] by bisection."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if slope(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
