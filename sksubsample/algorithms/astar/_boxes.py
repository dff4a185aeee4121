"""Boxes under a product proposal: their mass and draws restricted to them.

A* sampling and PM-A* measure, sample and split axis-aligned boxes of the proposal ``Q``'s
support; ``Q`` is a frozen 1-D ``scipy.stats`` continuous distribution or an independent
product of them, so that a box's mass is a product of CDF differences and a draw restricted
to it is one inverse-CDF draw per coordinate.

A search queries its proposal for one box or a few at a time, where each call of a frozen
distribution's method costs tens of microseconds of argument checks: most of a node's work on a
small data set. The logistic and normal families (the package's proposals) are therefore
evaluated by :class:`_LocationScale`, their scipy formulas without the checks.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

__all__ = ["BoxProposal"]

# Below this relative size of an interval's mass with respect to the tail probability it is
# computed from, the difference of CDFs has lost more than ~8 of its 16 digits.
_RESOLVABLE = 1e-8


class BoxProposal:
    """An independent product of frozen 1-D continuous distributions, queried on boxes."""

    def __init__(self, proposal, name="proposal"):
        if _is_frozen_continuous(proposal):
            dists = [proposal]
        elif isinstance(proposal, (list, tuple)) and len(proposal) > 0:
            dists = list(proposal)
        else:
            raise TypeError(
                f"{name} must be a frozen scipy.stats continuous distribution (e.g. "
                "scipy.stats.norm(0, 1)) or a non-empty sequence of them, got "
                f"{type(proposal).__name__}"
            )
        lower, upper = [], []
        for k, dist in enumerate(dists):
            if not _is_frozen_continuous(dist):
                raise TypeError(
                    f"{name}[{k}] must be a frozen scipy.stats continuous distribution, got "
                    f"{type(dist).__name__}"
                )
            with np.errstate(all="ignore"):
                lo, hi = (float(v) for v in dist.support())
                probes = np.array([dist.cdf(lo), dist.cdf(hi), dist.cdf(dist.ppf(0.5))])
            if not (lo < hi) or not np.all(np.isfinite(probes)) or not probes[1] - probes[0] > 0:
                raise ValueError(
                    f"{name}[{k}] must have a finite CDF rising from 0 to 1 on its support "
                    f"box; got support ({lo}, {hi}) and CDF values {probes.tolist()} (check its "
                    "parameters)"
                )
            lower.append(lo)
            upper.append(hi)
        self.dists = [_LocationScale.of(dist) or dist for dist in dists]
        self.d = len(dists)
        self.lower = np.array(lower)
        self.upper = np.array(upper)

    def logpdf(self, x):
        return sum(dist.logpdf(x[:, k]) for k, dist in enumerate(self.dists))

    def mass_and_sample(self, lower, upper, rng, n_draws=None):
        """log Q(box) for each box and one draw from Q restricted to it (or ``n_draws[i]``)."""
        k = lower.shape[0]
        counts = np.ones(k, dtype=int) if n_draws is None else np.asarray(n_draws, dtype=int)
        log_mass = np.zeros(k)
        x = np.empty((int(counts.sum()), self.d))
        for j, dist in enumerate(self.dists):
            lm, draw = _interval(dist, lower[:, j], upper[:, j], counts, rng)
            log_mass += lm
            x[:, j] = draw
        return log_mass, x


#: ``log √(2π)``, computed as scipy's normal log density computes it.
_LOG_SQRT_2PI = float(np.log(np.sqrt(2 * np.pi)))


#: family -> (cdf, sf, ppf, isf, log density) of its standard distribution, as in
#: scipy.stats._continuous_distns (keyed by the exact type: a subclass may redefine them).
_STANDARD_FUNCTIONS = {
    type(stats.logistic): (
        special.expit, lambda x: special.expit(-x), special.logit,
        lambda q: -special.logit(q),
        lambda x: -np.abs(x) - 2.0 * special.log1p(np.exp(-np.abs(x)))),
    type(stats.norm): (
        special.ndtr, lambda x: special.ndtr(-x), special.ndtri,
        lambda q: -special.ndtri(q),
        lambda x: -x**2 / 2.0 - _LOG_SQRT_2PI),
}


class _LocationScale:
    """A frozen ``scipy.stats.logistic`` or ``scipy.stats.norm``: the methods a search calls,
    computed as scipy computes them (the standardized point ``(x - loc) / scale``, the family's
    standard function from ``scipy.special``, then ``* scale + loc`` or ``- log(scale)``), with
    the same results, without the per-call checks of ``rv_continuous`` (every real point lies in
    the support of these families, and the scale was checked when the proposal was)."""

    def __init__(self, functions, loc, scale):
        self._cdf, self._sf, self._ppf, self._isf, self._logpdf = functions
        self.loc, self.scale = loc, scale
        self._log_scale = np.log(scale)

    @classmethod
    def of(cls, dist):
        """The :class:`_LocationScale` of ``dist``, or None when its family is another or its
        parameters are not a finite location and a positive scale."""
        functions = _STANDARD_FUNCTIONS.get(type(dist.dist))
        if functions is None or len(dist.args) > 2:
            return None
        named = zip(("loc", "scale")[:len(dist.args)], dist.args, strict=True)
        params = {"loc": 0.0, "scale": 1.0, **dict(named), **dist.kwds}
        if set(params) != {"loc", "scale"}:
            return None
        loc, scale = (np.asarray(params[k], dtype=np.float64) for k in ("loc", "scale"))
        if loc.ndim or scale.ndim or not (np.isfinite(loc) and np.isfinite(scale)
                                          and scale > 0):
            return None
        return cls(functions, float(loc), float(scale))

    def _standard(self, x):
        return (np.asarray(x, dtype=np.float64) - self.loc) / self.scale

    def cdf(self, x):
        return self._cdf(self._standard(x))

    def sf(self, x):
        return self._sf(self._standard(x))

    def ppf(self, q):
        return self._ppf(np.asarray(q, dtype=np.float64)) * self.scale + self.loc

    def isf(self, q):
        return self._isf(np.asarray(q, dtype=np.float64)) * self.scale + self.loc

    def logpdf(self, x):
        return self._logpdf(self._standard(x)) - self._log_scale


def _is_frozen_continuous(obj):
    return isinstance(getattr(obj, "dist", None), stats.rv_continuous) and hasattr(obj, "cdf")


def _interval(dist, lo, hi, counts, rng):
    """log Q([lo, hi]) and ``counts[i]`` inverse-CDF draws restricted to each interval."""
    with np.errstate(all="ignore"):
        cl, ch, sl, sh = dist.cdf(lo), dist.cdf(hi), dist.sf(lo), dist.sf(hi)
        # Difference the smaller tail so that intervals in either tail keep their digits.
        use_sf = cl > 0.5
        mass = np.where(use_sf, sl - sh, ch - cl)
        tail = np.where(use_sf, sl, ch)
        resolvable = mass > _RESOLVABLE * tail
        # A box too narrow for CDF differences is one on which q is constant to that
        # precision, so its mass is q(mid) * width and a uniform draw is a draw from Q.
        width = hi - lo
        local = dist.logpdf(0.5 * (lo + hi)) + np.log(width)
        log_mass = np.where(resolvable, np.log(np.maximum(mass, 0.0)), local)
        # An unbounded box whose tail probability underflows has no usable mass in float64:
        # it is dropped (mass 0) rather than given an infinite local estimate.
        dead = np.isnan(log_mass) | (width <= 0) | (~resolvable & ~np.isfinite(width))
        log_mass = np.where(dead, -np.inf, log_mass)
        rep = np.repeat(np.arange(lo.size), counts)
        u = rng.random(rep.size)
        inner = np.where(
            use_sf[rep],
            dist.isf(sh[rep] + u * (sl[rep] - sh[rep])),
            dist.ppf(cl[rep] + u * (ch[rep] - cl[rep])),
        )
        flat = lo[rep] + u * width[rep]
        draw = np.where(resolvable[rep], inner, flat)
        draw = np.clip(np.nan_to_num(draw, nan=0.5 * (lo[rep] + hi[rep])), lo[rep], hi[rep])
    return log_mass, draw
