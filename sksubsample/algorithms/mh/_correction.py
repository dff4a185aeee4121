"""The correction distribution of the minibatch Barker test (Seita et al., §3.3–4).

The minibatch Barker test accepts iff ``Δ* + X_corr > 0`` where ``Δ* ≈ Δ + N(0, σ²)``; it is
exact when ``N(0, σ²) + X_corr`` has the standard logistic law. No probability law ``X_corr``
makes that identity exact for σ > 0 (the logistic characteristic function πt/sinh(πt) decays like
e^{-π|t|}, slower than the Gaussian e^{-σ²t²/2}), so ``X_corr`` is the solution of the
deconvolution problem (14): the law whose Gaussian blur is closest to the logistic CDF in L∞.

Representation. ``X_corr`` is stored as a piecewise-constant density on the 2N cells of the grid
Y_j = jV/N, j = -N..N (cell masses ``w``, symmetric about 0). This is exactly the law that
inverse-CDF sampling with linear interpolation of the CDF on the grid draws from, so the
optimisation, the error report and the sampler all concern the same distribution: the design
matrix column of a cell is the CDF of ``U(cell) + N(0, σ²)``, computed in closed form, not the
paper's point-mass ``Φ_σ(X_i − Y_j)`` (the difference is a variance of h²/12 per cell).
"""

from __future__ import annotations

import numbers
from importlib import resources

import numpy as np
from scipy import linalg, optimize, special

from ..._utils import as_generator, check_int, check_positive

__all__ = [
    "BarkerCorrection",
    "convolved_cdf",
    "correction_cdf_error",
    "solve_correction",
]

#: σ must be below sd(logistic) = π/√3 ≈ 1.814 for a correction to exist at all; the
#: admissible range is the open interval (0, 1.8), clear of that limit.
SIGMA_MAX = 1.8
#: σ values with a shipped table (``data/barker_correction_sigma{σ}.npz``).
SHIPPED_SIGMAS = (0.8, 0.9, 1.0)
METHODS = ("minimax", "nnls", "ridge")
DEFAULT_METHOD = "minimax"
DEFAULT_N_GRID = 480
DEFAULT_V_MAX = 24.0
#: λ path searched by ``method="ridge"`` when ``ridge_lambda`` is None.
RIDGE_LAMBDAS = tuple(10.0 ** -k for k in range(0, 13))
_SQRT_2PI = np.sqrt(2.0 * np.pi)


def _check_sigma(sigma) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real):
        raise TypeError(
            f"sigma must be a real number in (0, {SIGMA_MAX}), got {type(sigma).__name__}"
        )
    sigma = float(sigma)
    if not 0.0 < sigma < SIGMA_MAX:
        raise ValueError(
            f"sigma must lie in the open interval (0, {SIGMA_MAX}) (a correction exists only "
            f"for sigma^2 < pi^2/3, the logistic variance), got {sigma!r}"
        )
    return sigma


def _check_method(method) -> str:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


def _check_grid(n_grid, v_max) -> tuple[int, float]:
    n_grid = check_int(n_grid, "n_grid", low=10, high=100_000)
    v_max = check_positive(v_max, "v_max")
    return n_grid, v_max


def _upper_tail_integral(t, sigma):
    """H(t) = ∫_t^∞ (1 − Φ(u/σ)) du = σ φ(t/σ) − t Q(t/σ), non-negative and tiny for t ≫ σ.

    For t < 0 it equals ∫_{-∞}^{-t} Φ(u/σ) du by symmetry, so both tails of the cell kernel are
    differences of small numbers of the same sign instead of differences of ≈ t (which would
    lose ~t/h ulps).
    """
    z = t / sigma
    return sigma * np.exp(-0.5 * z * z) / _SQRT_2PI - t * special.ndtr(-z)


def _cell_kernel(t, sigma, h):
    """P(U + Z ≤ t) for U ~ Uniform(0, h), Z ~ N(0, σ²): the CDF one cell contributes.

    Closed form (1/h)∫_0^h Φ((t − y)/σ) dy. Evaluated as (H(−t) − H(h − t))/h left of the cell
    centre and 1 − (H(t − h) − H(t))/h right of it, each side free of catastrophic cancellation.
    """
    t = np.asarray(t, dtype=float)
    left = t <= 0.5 * h
    out = np.empty_like(t)
    tl = t[left]
    out[left] = (_upper_tail_integral(-tl, sigma) - _upper_tail_integral(h - tl, sigma)) / h
    tr = t[~left]
    out[~left] = 1.0 - (_upper_tail_integral(tr - h, sigma) - _upper_tail_integral(tr, sigma)) / h
    return out


def _design(sigma, n_grid, v_max, rows_per_cell=1):
    """Rows x_i > 0 and the symmetric-half design matrix.

    Column j (0 ≤ j < N) is the CDF at x_i of N(0, σ²) plus the symmetric pair of cells
    [jh, (j+1)h] and [−(j+1)h, −jh], so that ``A @ w`` is the blurred CDF of the symmetric law
    with half-masses ``w`` (total mass 2 Σ w). With a symmetric law F(−x) = 1 − F(x) and
    S(−x) = 1 − S(x), so fitting x > 0 fits the whole line and halves both dimensions.
    Rows are the paper's X_i = ih, i = 1..2N (``rows_per_cell=1``) or a grid ``rows_per_cell``
    times finer. The paper's rows suffice: the blurred CDF varies on the scale σ ≫ h, so the
    error between rows is close to the error on them.
    """
    h = v_max / n_grid
    x = np.arange(1, 2 * n_grid * rows_per_cell + 1) * (h / rows_per_cell)
    j = np.arange(n_grid) * h
    a = _cell_kernel(x[:, None] - j[None, :], sigma, h)
    a += _cell_kernel(x[:, None] + j[None, :] + h, sigma, h)
    return x, a, h


def _ridge(a, target, ridge_lambda):
    """Eq. (15): u* = (MᵀM + λI)⁻¹ Mᵀ v, then negative masses removed and renormalised (§4).

    Without ``ridge_lambda`` the λ whose clipped solution has the smallest L∞ error on the rows
    is taken from ``RIDGE_LAMBDAS`` (one eigendecomposition serves the whole path).
    """
    gram = a.T @ a
    rhs = a.T @ target
    evals, evecs = linalg.eigh(gram)
    coef = evecs.T @ rhs
    lambdas = RIDGE_LAMBDAS if ridge_lambda is None else (ridge_lambda,)
    best = None
    for lam in lambdas:
        w = evecs @ (coef / (np.maximum(evals, 0.0) + lam))
        w = np.maximum(w, 0.0)
        total = 2.0 * w.sum()
        if not total > 0.0:
            continue
        w /= total
        err = np.max(np.abs(a @ w - target))
        if best is None or err < best[0]:
            best = (err, w, lam)
    if best is None:
        raise ValueError(f"ridge_lambda={ridge_lambda!r} leaves no positive mass")
    return best[1]


def _nnls(a, target):
    """Non-negative least squares with the unit-mass constraint as a heavily weighted row."""
    # A weight of 1e3 makes the mass constraint hold to ~1e-13 while keeping the augmented
    # matrix well enough conditioned for the active-set solver.
    weight = 1e3
    a_aug = np.vstack([a, np.full((1, a.shape[1]), 2.0 * weight)])
    b_aug = np.append(target, weight)
    try:
        w, _ = optimize.nnls(a_aug, b_aug, maxiter=50 * a.shape[1])
    except RuntimeError:
        # The active-set iteration can cycle on nearly collinear columns; BVLS solves the
        # same bounded problem by another route.
        w = optimize.lsq_linear(a_aug, b_aug, bounds=(0.0, np.inf), method="bvls").x
    w = np.maximum(w, 0.0)
    return w / (2.0 * w.sum())


def _minimax_polish(a, target, w, rounds=2, trust=1e6):
    """Minimise max_i |(A w)_i − S(x_i)| over w ≥ 0, Σ 2w = 1 by LP, starting from ``w``.

    Each round solves for a correction d scaled by the current error e₀ (so the LP sees O(1)
    numbers although e₀ is ~1e-8…1e-12, far below HiGHS's feasibility tolerance); ``trust``
    bounds |d|/e₀ because huge bounds (w/e₀ ~ 1e10) can make HiGHS report a bounded LP as
    unbounded, while a tight trust region stops short of the optimum. The result is never
    worse than the start on the rows: a round that fails or does not improve is dropped.
    """
    m, n = a.shape
    best_err = np.max(np.abs(a @ w - target))
    ones = -np.ones((m, 1))
    a_ub = np.block([[a, ones], [-a, ones]])
    c = np.zeros(n + 1)
    c[-1] = 1.0
    a_eq = np.append(np.full(n, 2.0), 0.0)[None, :]
    for _ in range(rounds):
        resid = target - a @ w
        scale = max(np.max(np.abs(resid)), 1e-300)
        lower = np.maximum(-w / scale, -trust)
        bounds = np.column_stack([np.append(lower, 0.0), np.append(np.full(n, trust), np.inf)])
        res = optimize.linprog(
            c,
            A_ub=a_ub,
            b_ub=np.concatenate([resid, -resid]) / scale,
            A_eq=a_eq,
            b_eq=[(1.0 - 2.0 * w.sum()) / scale],
            bounds=bounds,
            method="highs",
            options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
        )
        if res.x is None:
            break
        candidate = np.maximum(w + res.x[:n] * scale, 0.0)
        candidate /= 2.0 * candidate.sum()
        err = np.max(np.abs(a @ candidate - target))
        if not err < best_err:
            break
        w, best_err = candidate, err
    return w


def solve_correction(sigma, *, n_grid=DEFAULT_N_GRID, v_max=DEFAULT_V_MAX, method=DEFAULT_METHOD,
                     ridge_lambda=None):
    """Solve the deconvolution problem (14) for the half-masses of a symmetric ``X_corr``.

    Parameters
    ----------
    sigma : float in (0, 1.8)
        Standard deviation of the Gaussian part ``X_norm``.
    n_grid : int, default=480
        The paper's N: ``X_corr`` lives on [−V, V] cut into 2N cells of width h = V/N.
    v_max : float, default=24.0
        The paper's V. The logistic tail beyond V (≈ e^{−V}) cannot be represented, so V bounds
        the attainable error from below.
    method : {"minimax", "nnls", "ridge"}, default="minimax"
        ``"ridge"``: the paper's Eq. (15), negatives removed (λ chosen on the rows unless given);
        ``"nnls"``: non-negative least squares; ``"minimax"``: ``"nnls"`` polished by a linear
        programme minimising the L∞ error on the rows (the actual objective of Eq. 14).
    ridge_lambda : float or None, default=None
        λ of Eq. (15); only used by ``method="ridge"``.

    Returns
    -------
    half_masses : ndarray of shape (n_grid,)
        Mass of the cells [jh, (j+1)h], j = 0..N−1; the cell [−(j+1)h, −jh] has the same mass.
        Non-negative, ``2 * half_masses.sum() == 1`` up to rounding.

    References
    ----------
    Seita, Pan, Chen, Canny, "An Efficient Minibatch Acceptance Test for Metropolis-Hastings",
    UAI 2017, §4, Eqs. (14)–(15) and Table 1.
    """
    sigma = _check_sigma(sigma)
    n_grid, v_max = _check_grid(n_grid, v_max)
    method = _check_method(method)
    if ridge_lambda is not None:
        ridge_lambda = check_positive(ridge_lambda, "ridge_lambda")
    x, a, _ = _design(sigma, n_grid, v_max)
    target = special.expit(x)
    if method == "ridge":
        return _ridge(a, target, ridge_lambda)
    w = _nnls(a, target)
    if method == "minimax":
        w = _minimax_polish(a, target, w)
    return w


def _full_masses(half_masses):
    return np.concatenate([half_masses[::-1], half_masses])


def convolved_cdf(x, masses, grid, sigma):
    """CDF of N(0, σ²) + X_corr at ``x`` for the piecewise-uniform law (``masses`` on ``grid``).

    Parameters
    ----------
    x : array_like
        Evaluation points.
    masses : ndarray of shape (n_cells,)
        Cell masses (sum one).
    grid : ndarray of shape (n_cells + 1,)
        Equally spaced cell edges.
    sigma : float
        Standard deviation of the Gaussian.

    Returns
    -------
    ndarray of the shape of ``x``
    """
    x = np.asarray(x, dtype=float)
    h = grid[1] - grid[0]
    keep = masses > 0.0
    left, w = grid[:-1][keep], masses[keep]
    flat = x.ravel()
    out = np.empty_like(flat)
    # Chunks keep the (points × cells) kernel block below ~16 MB.
    step = max(1, 2_000_000 // max(1, w.size))
    for start in range(0, flat.size, step):
        chunk = flat[start:start + step]
        out[start:start + step] = _cell_kernel(chunk[:, None] - left[None, :], sigma, h) @ w
    return out.reshape(x.shape)


def correction_cdf_error(masses, grid, sigma, *, refine=8, n_polish=20):
    """L∞ distance between the CDF of N(0, σ²) + X_corr and the standard logistic CDF.

    The blurred CDF is evaluated in closed form (no quadrature) on a grid ``refine`` times finer
    than the cells over [−(V + 40), V + 40]; the ``n_polish`` largest local maxima of the error
    are then maximised continuously (bounded scalar search within one fine step). Outside the
    range both CDFs are monotone, so the error there is at most the larger of their tail values
    at the range's ends, which is added as a rigorous bound (it is ~e^{−V−40}).

    Parameters
    ----------
    masses : ndarray of shape (n_cells,)
    grid : ndarray of shape (n_cells + 1,)
    sigma : float
    refine : int, default=8
    n_polish : int, default=20

    Returns
    -------
    float
    """
    h = grid[1] - grid[0]
    x_max = max(abs(grid[0]), abs(grid[-1])) + 40.0
    xs = np.arange(-x_max, x_max + 0.5 * h / refine, h / refine)

    def err_at(x):
        return np.abs(convolved_cdf(x, masses, grid, sigma) - special.expit(x))

    err = err_at(xs)
    worst = float(err.max())
    interior = np.flatnonzero((err[1:-1] >= err[:-2]) & (err[1:-1] >= err[2:])) + 1
    top = interior[np.argsort(err[interior])[::-1][:n_polish]]
    d = h / refine
    for k in top:
        res = optimize.minimize_scalar(
            lambda t: -float(err_at(np.array([t]))[0]),
            bounds=(xs[k] - d, xs[k] + d),
            method="bounded",
            options={"xatol": 1e-6 * d},
        )
        worst = max(worst, -float(res.fun))
    ends = convolved_cdf(np.array([-x_max, x_max]), masses, grid, sigma)
    tail = max(ends[0], 1.0 - ends[1], special.expit(-x_max))
    return max(worst, float(tail))


def _table_path(sigma):
    return resources.files("sksubsample.algorithms.mh").joinpath(
        f"data/barker_correction_sigma{sigma:.1f}.npz"
    )


def _shipped_sigma(sigma):
    for s in SHIPPED_SIGMAS:
        if abs(sigma - s) <= 1e-12:
            return s
    return None


class BarkerCorrection:
    """Correction variable X_corr with N(0, σ²) + X_corr ≈ Logistic(0, 1).

    The minibatch Barker test (Alg. 1) accepts iff ``Δ* + X_nc + X_corr > 0``, where Δ* + X_nc is
    approximately N(Δ, σ²); with X_corr from this class the sum is approximately Δ + logistic,
    which is the exact Barker test. ``X_corr`` is a symmetric piecewise-constant density on
    [−V, V] obtained by deconvolution (§4).

    For σ ∈ {0.8, 0.9, 1.0} with the default solver settings the precomputed table shipped in
    ``sksubsample/algorithms/data`` is loaded (regenerate with
    ``python -m sksubsample.algorithms.mh._correction_tables``); any other σ or setting is solved on
    construction, which takes seconds at the default size (a dense 2N × N design matrix, NNLS
    plus two LPs). Set ``use_table=False`` to force the solve. σ = 1 is the paper's C_1 of
    Algorithm 1.

    Parameters
    ----------
    sigma : float in (0, 1.8), default=1.0
        Standard deviation of the Gaussian part. A correction exists only for σ² below the
        logistic variance π²/3 and is accurate well below it: the L∞ error grows quickly with σ
        (``cdf_error`` reports it for the law actually used; ``python -m
        sksubsample.algorithms.mh._correction_tables --compare`` tabulates it by σ and method).
    method : {"minimax", "nnls", "ridge"}, default="minimax"
        Deconvolution method, see :func:`solve_correction`. ``"ridge"`` is the paper's Eq. (15).
    n_grid : int, default=480
        The paper's N (2N cells on [−V, V]).
    v_max : float, default=24.0
        The paper's V.
    ridge_lambda : float or None, default=None
        λ of Eq. (15) for ``method="ridge"``; None picks the best of a λ path.
    use_table : bool, default=True
        Load the shipped table when one matches.

    Attributes
    ----------
    sigma : float
    grid : ndarray of shape (2 * n_grid + 1,)
        Cell edges Y_j = jV/N, j = −N..N.
    masses : ndarray of shape (2 * n_grid,)
        Probability of each cell (symmetric, non-negative, sums to one).
    density : ndarray of shape (2 * n_grid,)
        Density on each cell, ``masses / h``.
    cdf_values : ndarray of shape (2 * n_grid + 1,)
        CDF of X_corr at the grid points (0 at −V, 1 at V).
    variance : float
        Exact variance of X_corr (≈ π²/3 − σ²).
    cdf_error : float
        L∞ distance between the CDF of N(0, σ²) + X_corr and the logistic CDF, computed on
        first access by :func:`correction_cdf_error`.
    from_table : bool
        Whether the masses were loaded from a shipped table.

    References
    ----------
    Seita, Pan, Chen, Canny, "An Efficient Minibatch Acceptance Test for Metropolis-Hastings",
    UAI 2017: §3.3 Eqs. (12)–(13), §4 Eqs. (14)–(15), Table 1, Algorithm 1.

    Examples
    --------
    >>> from sksubsample.algorithms import BarkerCorrection
    >>> corr = BarkerCorrection(1.0)
    >>> corr.cdf_error < 8.9e-4
    True
    >>> corr.sample(3, random_state=0).shape
    (3,)
    """

    def __init__(self, sigma=1.0, *, method=DEFAULT_METHOD, n_grid=DEFAULT_N_GRID,
                 v_max=DEFAULT_V_MAX, ridge_lambda=None, use_table=True):
        self.sigma = _check_sigma(sigma)
        self.method = _check_method(method)
        self.n_grid, self.v_max = _check_grid(n_grid, v_max)
        if ridge_lambda is not None:
            ridge_lambda = check_positive(ridge_lambda, "ridge_lambda")
        self.ridge_lambda = ridge_lambda
        if not isinstance(use_table, bool):
            raise TypeError(f"use_table must be a bool, got {type(use_table).__name__}")

        half = None
        self.from_table = False
        shipped = _shipped_sigma(self.sigma)
        defaults = (
            self.method == DEFAULT_METHOD
            and self.n_grid == DEFAULT_N_GRID
            and self.v_max == DEFAULT_V_MAX
            and ridge_lambda is None
        )
        if use_table and defaults and shipped is not None:
            half = load_table(shipped, n_grid=self.n_grid, v_max=self.v_max, method=self.method)
            self.from_table = half is not None
        if half is None:
            half = solve_correction(self.sigma, n_grid=self.n_grid, v_max=self.v_max,
                                    method=self.method, ridge_lambda=ridge_lambda)
        masses = _full_masses(np.asarray(half, dtype=float))
        self.masses = masses / masses.sum()
        self.grid = np.linspace(-self.v_max, self.v_max, 2 * self.n_grid + 1)
        self._h = self.v_max / self.n_grid
        self.density = self.masses / self._h
        cdf = np.concatenate([[0.0], np.cumsum(self.masses)])
        cdf /= cdf[-1]
        self.cdf_values = cdf
        mids = 0.5 * (self.grid[:-1] + self.grid[1:])
        self.variance = float(self.masses @ (mids**2) + self._h**2 / 12.0)
        self._cdf_error = None

    def __repr__(self):
        return (f"BarkerCorrection(sigma={self.sigma!r}, method={self.method!r}, "
                f"n_grid={self.n_grid}, v_max={self.v_max!r})")

    @property
    def cdf_error(self) -> float:
        """L∞ distance of N(0, σ²) ⊛ X_corr from the standard logistic CDF (computed once)."""
        if self._cdf_error is None:
            self._cdf_error = correction_cdf_error(self.masses, self.grid, self.sigma)
        return self._cdf_error

    def cdf(self, x):
        """CDF of X_corr (piecewise linear on the grid).

        Parameters
        ----------
        x : array_like

        Returns
        -------
        ndarray of the shape of ``x``
        """
        return np.interp(np.asarray(x, dtype=float), self.grid, self.cdf_values, left=0.0,
                         right=1.0)

    def convolved_cdf(self, x):
        """CDF of N(0, σ²) + X_corr at ``x`` (closed form), the approximation of the logistic.

        Parameters
        ----------
        x : array_like

        Returns
        -------
        ndarray of the shape of ``x``
        """
        return convolved_cdf(x, self.masses, self.grid, self.sigma)

    def sample(self, size, random_state=None):
        """Draw X_corr by inverting its piecewise-linear CDF.

        Parameters
        ----------
        size : int or tuple of int
            Output shape.
        random_state : None, int, SeedSequence or numpy.random.Generator, default=None

        Returns
        -------
        ndarray of shape ``size``
        """
        if isinstance(size, numbers.Integral) and not isinstance(size, bool):
            shape = (check_int(size, "size", low=0),)
        elif isinstance(size, tuple) and all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in size
        ):
            shape = tuple(check_int(s, "size", low=0) for s in size)
        else:
            raise TypeError(f"size must be an int or a tuple of ints, got {size!r}")
        rng = as_generator(random_state)
        u = rng.random(shape)
        # u < 1 = cdf_values[-1], and cdf_values[k] <= u < cdf_values[k + 1] implies cell k has
        # positive mass, so the division below never meets an empty cell.
        k = np.searchsorted(self.cdf_values, u, side="right") - 1
        k = np.clip(k, 0, self.masses.size - 1)
        lo = self.cdf_values[k]
        width = self.cdf_values[k + 1] - lo
        frac = np.divide(u - lo, width, out=np.full(shape, 0.5), where=width > 0)
        return self.grid[k] + frac * self._h


def load_table(sigma, *, n_grid=DEFAULT_N_GRID, v_max=DEFAULT_V_MAX, method=DEFAULT_METHOD):
    """Half-masses of the shipped table for ``sigma``, or None if it was built otherwise.

    A table whose stored settings differ from the requested ones is ignored (the caller then
    solves), so a stale table can never stand in for different settings.
    """
    path = _table_path(sigma)
    if not path.is_file():
        return None
    with path.open("rb") as fh, np.load(fh) as data:
        ok = (
            abs(float(data["sigma"]) - sigma) <= 1e-12
            and int(data["n_grid"]) == n_grid
            and float(data["v_max"]) == v_max
            and str(data["method"]) == method
        )
        return np.array(data["half_masses"], dtype=float) if ok else None
