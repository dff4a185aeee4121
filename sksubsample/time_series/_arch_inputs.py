"""What ``ARCHOrderSelector.fit`` checks and derives from its inputs before any sampling: the
candidate orders, the series centred and their variances, a warning for price levels passed
as returns, the MAP searches' starting points and the warm-up chains' seed."""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np

from ._arch_target import inverse_softplus

__all__ = ["adaptation_seed", "centred_series", "check_orders", "starting_point",
           "warn_if_levels"]


def check_orders(orders):
    """Sorted distinct non-negative int orders, or a ValueError/TypeError naming ``orders``."""
    if isinstance(orders, str | bytes) or not hasattr(orders, "__iter__"):
        raise TypeError(f"orders must be an iterable of ints, got {type(orders).__name__}")
    values = list(orders)
    if not values:
        raise ValueError("orders must contain at least one order")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Integral | np.integer):
            raise TypeError(f"orders must hold ints, got {v!r} of type {type(v).__name__}")
        if v < 0:
            raise ValueError(f"orders must be non-negative, got {v}")
        out.append(int(v))
    if len(set(out)) != len(out):
        raise ValueError(f"orders must be distinct, got {values}")
    return np.array(sorted(out), dtype=np.int64)


def centred_series(X):
    """The mean of each series of ``X``, the series less it, and their variances; or a
    ValueError naming the series whose squares overflow float64 or that are constant."""
    mean = X.mean(axis=0)
    r = X - mean
    with np.errstate(over="ignore"):
        variance = r.var(axis=0)
    overflow = np.flatnonzero(~np.isfinite(variance))
    if overflow.size:
        raise ValueError(
            f"X: the squares of series {overflow.tolist()} overflow float64 (values up to "
            f"{float(np.max(np.abs(X[:, overflow]))):.3g}); rescale the returns")
    flat = np.flatnonzero(~(variance > 1e-12 * np.maximum(1.0, np.abs(mean)) ** 2))
    if flat.size:
        raise ValueError(
            f"X: series {flat.tolist()} are constant (variance {float(variance[flat[0]]):.3g} "
            f"about a mean of {float(mean[flat[0]]):.3g}); an ARCH model needs varying "
            f"returns: rescale returns in tiny units")
    return mean, r, variance


def adaptation_seed(random_state):
    """A seed for the warm-up chains whose streams differ from the sampling chains'.

    The sampling chains use ``SeedSequence(random_state).spawn(n_chains)``; an int seed is
    extended by a constant word, a Generator or SeedSequence is passed through (spawning from
    it twice gives different children).
    """
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return np.random.SeedSequence([int(random_state), 0x41524348])
    return random_state


def starting_point(order, variance):
    """The MAP search's start: persistence 0.3 and ν = 5 (the scale-1 t's variance is
    ``ν/(ν - 2) σ²``, so ``α_0 = 0.6 × 0.7 × Var(r)`` matches the returns' variance)."""
    return inverse_softplus(np.r_[0.6 * 0.7 * variance, np.full(order, 0.3 / max(order, 1)),
                                  5.0])


def warn_if_levels(X):
    """Warn when a column of ``X`` looks like prices rather than returns: positive, far from
    zero relative to its spread, and almost perfectly correlated with its previous value."""
    for k in range(X.shape[1]):
        x = X[:, k]
        if x.size < 10 or np.any(x <= 0):
            continue
        centred = x - x.mean()
        lag1 = float(np.dot(centred[1:], centred[:-1]) / np.dot(centred, centred))
        if x.mean() > 5.0 * x.std() and lag1 > 0.9:
            warnings.warn(
                f"X: series {k} looks like price levels, not returns (all positive, mean "
                f"{x.mean():.3g} against a standard deviation of {x.std():.3g}, lag-one "
                f"autocorrelation {lag1:.3f}); an ARCH model describes returns: pass e.g. "
                "100 * np.diff(np.log(prices), axis=0)", UserWarning, stacklevel=3)
