"""Convergence diagnostics of MCMC draws: effective sample size and split R-hat.

Pure NumPy/SciPy implementations of the rank-normalised diagnostics that ArviZ, Stan and PyMC
report [1]_, plus the convergence check every estimator of the package runs at the end of
``fit``.

References
----------
.. [1] A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization,
   folding, and localization: an improved R-hat for assessing convergence of MCMC.
   Bayesian Analysis 16(2), 2021. Eqs. 1-4 (split R-hat), Section 3 (rank normalisation,
   folding), Section 3.2 (ESS with Geyer's initial monotone sequence), Section 4.3
   (recommended thresholds: R-hat < 1.01, bulk ESS > 100 per chain).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import special

from ._utils import as_float_array, check_int, check_open_unit_interval, check_positive

__all__ = [
    "CollinearityWarning",
    "ConvergenceWarning",
    "CostWarning",
    "RacingGuardWarning",
    "check_convergence",
    "check_racing_guard",
    "effective_sample_size",
    "split_rhat",
]

#: Largest rank-normalised split R-hat taken as converged (Vehtari et al. 2021, Section 4.3).
RHAT_THRESHOLD = 1.01
#: Smallest bulk ESS per chain taken as enough (Vehtari et al. 2021, Section 4.3).
ESS_PER_CHAIN_THRESHOLD = 100


class ConvergenceWarning(UserWarning):
    """The chains of a fit have not mixed: estimates from its draws are not reliable yet."""


class CostWarning(UserWarning):
    """A fit is about to cost far more than its data's size suggests (e.g. many more features
    than rows): what to change is said in the message."""


class CollinearityWarning(UserWarning):
    """Columns of the design are collinear: the data determine only combinations of their
    coefficients, and along the other directions the posterior is the prior's."""


class RacingGuardWarning(UserWarning):
    """The guard of the races' normal approximation fired in many races of a fit.

    A Racing-Normal elimination assumes the mean of the sampled differences is close to
    normal. The guard holds an elimination back while the sample behind it is degenerate,
    too skewed or too heavy-tailed for that (and the race reads on, so each guarded decision
    stays within its δ); a guard that fires often says the data's terms are far from normal,
    where a few large terms that no subsample has seen could still change a decision. Such
    terms cannot be detected from a subsample; ``method="exact"`` rules them out.
    """


#: The share of a fit's races in which the guard may fire before the fit warns: on the
#: control-variate residuals of ARCH likelihoods (kurtosis up to about 130) it fires in about a
#: fifth of the races, and in every race where a few factors carry the difference between
#: states.
GUARD_WARNING_FRACTION = 0.5


#: Fewer races than this say little about the data: no warning.
GUARD_WARNING_MIN_RACES = 20


def check_racing_guard(n_guarded, n_raced, *, threshold=GUARD_WARNING_FRACTION,
                       min_races=GUARD_WARNING_MIN_RACES):
    """Warn (:class:`RacingGuardWarning`) when the guard fired in many of a fit's races.

    Parameters
    ----------
    n_guarded : int
        Races in which the guard of the normal approximation held back an elimination.
    n_raced : int
        Races run (including those finished exactly after they stopped paying).
    threshold : float, default 0.5
        The share ``n_guarded / n_raced`` above which the fit warns: more than half of the
        races is well above what heavy-tailed but well-sampled terms trigger (about a fifth of
        the races of an ARCH fit) and what terms carried by a few factors trigger (every
        race).
    min_races : int, default 20
        No warning from fewer races (a handful of races says little about the data).

    Returns
    -------
    bool
        Whether it warned.
    """
    n_guarded = check_int(n_guarded, "n_guarded", low=0)
    n_raced = check_int(n_raced, "n_raced", low=0)
    threshold = check_open_unit_interval(threshold, "threshold")
    min_races = check_int(min_races, "min_races", low=0)
    if n_raced < max(min_races, 1) or n_guarded <= threshold * n_raced:
        return False
    warnings.warn(
        f"The guard of the races' normal approximation fired in {n_guarded} of {n_raced} "
        f"races ({n_guarded / n_raced:.0%}): the terms of these updates are far from normal "
        "(spiky, skewed or heavy-tailed). Guarded races read on and keep their error bound "
        "for what they have seen, but large terms that no subsample has met cannot be "
        "detected; use method='exact' where such terms may exist.",
        RacingGuardWarning, stacklevel=3)
    return True


def _as_chains(draws, name="draws"):
    # NaN draws are data here (their diagnostics are NaN), so only the type is checked.
    draws = as_float_array(draws, name, finite=False)
    if draws.ndim < 2:
        raise ValueError(f"{name} must have shape (n_chains, n_draws, ...), got {draws.shape}")
    if draws.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one chain, got shape {draws.shape}")
    if draws.shape[1] < 4:
        raise ValueError(f"{name} needs at least 4 draws per chain, got {draws.shape[1]}")
    return draws


def _split_chains(x):
    """Split each chain in two halves; an odd middle draw is dropped (Vehtari et al. Eq. 1)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _ranks_from_order(ordered, order):
    """Ranks 1..S given a sorting permutation ``order`` and the sorted values, ties getting
    their average rank (what ``scipy.stats.rankdata(method="average")`` returns)."""
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, ordered.size))
    ranks = np.empty(ordered.size)
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)
    return ranks


def _normal_scores(ranks, shape):
    """Φ⁻¹((r - 3/8) / (S + 1/4)) (Vehtari et al. Section 3)."""
    return special.ndtri((ranks - 0.375) / (ranks.size + 0.25)).reshape(shape)


def _z_scale(x):
    """Rank-normalise over all chains (Vehtari et al. Section 3). MH draws repeat values at
    every rejection, so ties are common; their order within a tie never matters, so an
    unstable sort serves."""
    flat = x.ravel()
    order = np.argsort(flat)
    return _normal_scores(_ranks_from_order(flat[order], order), x.shape)


def _z_scale_with_folded(x):
    """``(_z_scale(x), _z_scale(|x - median(x)|))`` with one sort.

    Sorted ascending, ``|x - m|`` decreases up to the median and increases after it: two
    sorted runs, which a stable sort (a merge of runs) orders in linear time.
    """
    flat = x.ravel()
    order = np.argsort(flat)
    ordered = flat[order]
    n = ordered.size
    median = 0.5 * (ordered[(n - 1) // 2] + ordered[n // 2])
    below = np.searchsorted(ordered, median, side="left")
    runs = np.concatenate((order[:below][::-1], order[below:]))
    folded = np.abs(flat[runs] - median)
    refold = np.argsort(folded, kind="stable")
    return (_normal_scores(_ranks_from_order(ordered, order), x.shape),
            _normal_scores(_ranks_from_order(folded[refold], runs[refold]), x.shape))


def _rhat_basic(x):
    """Classic potential scale reduction of (n_chains, n_draws) (Vehtari et al. Eqs. 1-4)."""
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
    if within == 0.0:
        # Constant within every chain: converged when the chains agree, stuck apart otherwise.
        return 1.0 if between == 0.0 else math.inf
    return math.sqrt((between / within + n - 1) / n)


def _autocovariance(x):
    """Biased autocovariances of each row of x at all lags, through the FFT."""
    n = x.shape[1]
    centred = x - x.mean(axis=1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :n] / n


def _ess_basic(x):
    """ESS of (n_chains, n_draws) with Geyer's initial monotone sequence (Vehtari Sec. 3.2)."""
    m, n = x.shape
    if np.ptp(x) < np.finfo(float).resolution:
        # A constant quantity is known exactly; its ESS is the number of draws by convention.
        return float(m * n)
    acov = _autocovariance(x)
    mean_var = acov[:, 0].mean() * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    rho = np.zeros(n)
    rho[0] = 1.0
    rho_even = 1.0
    rho_odd = 1.0 - (mean_var - acov[:, 1].mean()) / var_plus
    rho[1] = rho_odd
    # Initial positive sequence: sum autocorrelation pairs while their sum stays positive.
    t = 1
    while t < n - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - acov[:, t + 1].mean()) / var_plus
        rho_odd = 1.0 - (mean_var - acov[:, t + 2].mean()) / var_plus
        if rho_even + rho_odd >= 0.0:
            rho[t + 1] = rho_even
            rho[t + 2] = rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0.0:
        rho[max_t + 1] = rho_even
    # Initial monotone sequence: pair sums must not increase.
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = 0.5 * (rho[t - 1] + rho[t])
        t += 2
    total = m * n
    tau = -1.0 + 2.0 * rho[: max_t + 1].sum() + rho[max_t + 1: max_t + 2].sum()
    # Antithetic chains can give tau < 1; the cap at log10(S) keeps the ESS finite (as Stan).
    tau = max(tau, 1.0 / math.log10(total))
    return float(total / tau)


def _flatten_params(draws):
    """(n_chains, n_draws, *shape) -> list of (n_chains, n_draws) arrays and the shape."""
    shape = draws.shape[2:]
    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    return [flat[:, :, k] for k in range(flat.shape[2])], shape


def _per_quantity(draws, diagnostic):
    """Apply ``diagnostic(chains, split_chains)`` to every scalar quantity of ``draws``.

    Quantities with non-finite draws get NaN; the result has the parameters' shape.
    """
    columns, shape = _flatten_params(_as_chains(draws))
    out = np.empty(len(columns))
    for k, col in enumerate(columns):
        split = _split_chains(col)
        out[k] = diagnostic(col, split) if np.isfinite(split).all() else np.nan
    return out.reshape(shape) if shape else out[0]


def split_rhat(draws, *, method="rank"):
    """Split R-hat of each scalar quantity, from several chains.

    Parameters
    ----------
    draws : array_like of shape ``(n_chains, n_draws, *param_shape)``
        At least 4 draws per chain.
    method : {"rank", "split"}, default "rank"
        ``"rank"``: the maximum of the rank-normalised split R-hat and of the same statistic on
        the folded draws ``|θ - median|`` (Vehtari et al. 2021, Section 4.3; ArviZ's default).
        ``"split"``: the classic split R-hat (Vehtari et al. Eqs. 1-4, Gelman et al. BDA3).

    Returns
    -------
    ndarray of shape param_shape
        Values close to 1 (below 1.01) indicate that the chains mix.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> r = split_rhat(rng.normal(size=(4, 1000)))
    >>> bool(abs(r - 1.0) < 0.01)
    True
    """
    if method not in ("rank", "split"):
        raise ValueError(f"method must be 'rank' or 'split', got {method!r}")

    def rhat(col, split):
        if method == "split":
            return _rhat_basic(split)
        folded = np.abs(split - np.median(split))
        return max(_rhat_basic(_z_scale(split)), _rhat_basic(_z_scale(folded)))

    return _per_quantity(draws, rhat)


def effective_sample_size(draws, *, method="bulk"):
    """Effective sample size of each scalar quantity, from one or several chains.

    Parameters
    ----------
    draws : array_like of shape ``(n_chains, n_draws, *param_shape)``
        At least 4 draws per chain.
    method : {"bulk", "mean", "tail"}, default "bulk"
        ``"mean"``: ESS of the posterior mean estimate (split chains, Geyer's initial monotone
        sequence; Vehtari et al. Section 3.2). ``"bulk"``: the same on rank-normalised split
        chains (ArviZ's default). ``"tail"``: the minimum of the ESS of the 5 % and 95 %
        quantile indicators (Vehtari et al. Section 4.3).

    Returns
    -------
    ndarray of shape param_shape

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ess = effective_sample_size(rng.normal(size=(4, 1000)))
    >>> bool(3000 < ess < 5000)
    True
    """
    if method not in ("bulk", "mean", "tail"):
        raise ValueError(f"method must be 'bulk', 'mean' or 'tail', got {method!r}")

    def ess(col, split):
        if method == "mean":
            return _ess_basic(split)
        if method == "bulk":
            return _ess_basic(_z_scale(split))
        lo, hi = np.quantile(col, [0.05, 0.95])
        return min(_ess_basic((split <= lo).astype(float)),
                   _ess_basic((split <= hi).astype(float)))

    return _per_quantity(draws, ess)


def _rank_diagnostics(draws):
    """``(split_rhat(draws), effective_sample_size(draws))`` with each quantity's draws
    rank-normalised once for both."""
    def both(col, split):
        z, folded = _z_scale_with_folded(split)
        return max(_rhat_basic(z), _rhat_basic(folded)), _ess_basic(z)

    columns, _ = _flatten_params(_as_chains(draws))
    out = np.full((len(columns), 2), np.nan)
    for k, col in enumerate(columns):
        split = _split_chains(col)
        if np.isfinite(split).all():
            out[k] = both(col, split)
    return out[:, 0], out[:, 1]


def check_convergence(draws, names=None, *, rhat_threshold=RHAT_THRESHOLD,
                      ess_per_chain=ESS_PER_CHAIN_THRESHOLD, n_worst=3, stacklevel=2,
                      tail=False):
    """Warn when chains have not converged, naming the worst parameters.

    The check ArviZ and PyMC users expect after sampling: the maximum rank-normalised split
    R-hat must stay below ``rhat_threshold`` and the minimum bulk ESS must reach
    ``ess_per_chain`` times the number of chains (Vehtari et al. 2021, Section 4.3).

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws, n_params)
    names : sequence of str of length n_params, optional
        Parameter names used in the message (``x0, x1, ...`` by default).
    rhat_threshold : float, default 1.01
    ess_per_chain : float, default 100
    n_worst : int, default 3
        How many parameters the message names for each failed criterion.
    stacklevel : int, default 2
        Passed to :func:`warnings.warn` so the warning points at the caller's caller.
    tail : bool, default False
        Whether the tail ESS (of the 5 % and 95 % quantiles) must reach ``ess_per_chain``
        per chain too (the returned ``ess`` stays the bulk one).

    Returns
    -------
    rhat, ess : ndarray of shape (n_params,)
        The diagnostics (NaN for chains shorter than 4 draws, which are not checked).

    Warns
    -----
    ConvergenceWarning
        When a criterion fails, or when the chains are too short (fewer than 4 draws) to be
        checked at all.

    Examples
    --------
    >>> import numpy as np, warnings
    >>> rng = np.random.default_rng(0)
    >>> stuck = rng.normal(size=(4, 200, 2)) + np.array([0, 0, 0, 3])[:, None, None]
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = check_convergence(stuck, ["a", "b"])
    >>> "R-hat" in str(caught[0].message)
    True
    """
    draws = as_float_array(draws, "draws", finite=False)
    if draws.ndim != 3 or draws.shape[0] == 0:
        raise ValueError("draws must have shape (n_chains, n_draws, n_params) with at least one "
                         f"chain, got {draws.shape}")
    rhat_threshold = check_positive(rhat_threshold, "rhat_threshold")
    ess_per_chain = check_positive(ess_per_chain, "ess_per_chain")
    n_worst = check_int(n_worst, "n_worst", low=1)
    stacklevel = check_int(stacklevel, "stacklevel", low=1, high=1000)
    n_chains, n_draws, n_params = draws.shape
    if names is not None and (isinstance(names, str | bytes) or not hasattr(names, "__len__")):
        raise TypeError(f"names must be a sequence of {n_params} names, got "
                        f"{type(names).__name__}")
    names = [f"x{k}" for k in range(n_params)] if names is None else [str(n) for n in names]
    if len(names) != n_params:
        raise ValueError(f"names has {len(names)} entries for {n_params} parameters")
    if n_draws < 4:
        warnings.warn(
            f"{n_draws} draws per chain are too few to check convergence (at least 4 are "
            "needed, and a few hundred for reliable estimates); increase n_draws",
            ConvergenceWarning, stacklevel=stacklevel)
        return np.full(n_params, np.nan), np.full(n_params, np.nan)
    rhat, ess = _rank_diagnostics(draws)
    problems = []
    bad_rhat = np.flatnonzero(~(rhat <= rhat_threshold))
    if bad_rhat.size:
        worst = bad_rhat[np.argsort(-np.nan_to_num(rhat[bad_rhat], nan=np.inf))][:n_worst]
        listed = ", ".join(f"{names[k]} ({rhat[k]:.3g})" for k in worst)
        problems.append(f"R-hat above {rhat_threshold} for {bad_rhat.size} of {n_params} "
                        f"parameters, worst: {listed}")
    min_ess = ess_per_chain * n_chains
    checked = [("bulk", ess)]
    if tail:
        checked.append(("tail", effective_sample_size(draws, method="tail")))
    for kind, values in checked:
        bad_ess = np.flatnonzero(~(values >= min_ess))
        if bad_ess.size:
            worst = bad_ess[np.argsort(np.nan_to_num(values[bad_ess], nan=-np.inf))][:n_worst]
            listed = ", ".join(f"{names[k]} ({values[k]:.0f})" for k in worst)
            problems.append(f"{kind} ESS below {min_ess:g} ({ess_per_chain:g} per chain) for "
                            f"{bad_ess.size} of {n_params} parameters, worst: {listed}")
    if problems:
        warnings.warn(
            "The chains have not converged: " + "; ".join(problems) + ". Run longer chains "
            "(n_draws, n_warmup) or check the model before using these draws.",
            ConvergenceWarning, stacklevel=stacklevel)
    return rhat, ess
