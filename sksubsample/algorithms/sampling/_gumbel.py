"""Gumbel and truncated Gumbel variates, shared by racing (Gumbel-max trick) and A* sampling.

References
----------
Chen & Ghahramani (2016), Eq. 2: ``argmax_i log p~(i) + eps_i`` with ``eps_i ~ Gumbel(0, 1)`` is a
draw from ``p``. Maddison, Tarlow & Minka (2014): a Gumbel(loc) truncated to ``(-inf, upper]``
is the building block of the top-down Gumbel process used by A* sampling.
"""

from __future__ import annotations

import numpy as np

from ..._utils import as_float_array, as_generator, check_int

__all__ = ["gumbel", "truncated_gumbel", "truncated_gumbel_cdf"]


def _broadcast(**arrays):
    """The named arrays broadcast together, or a ``ValueError`` naming them and their shapes."""
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"{' and '.join(arrays)} must broadcast to one shape, got {shapes}"
                         ) from None


def gumbel(loc=0.0, size=None, random_state=None):
    """Draw Gumbel(loc, 1) variates, ``loc - log(E)`` with ``E ~ Exp(1)``.

    Parameters
    ----------
    loc : float or array_like
        Location(s); broadcast against ``size``.
    size : int or tuple of int, optional
        Output shape (defaults to the shape of ``loc``).
    random_state : None, int or np.random.Generator

    Returns
    -------
    ndarray or float

    Examples
    --------
    >>> g = gumbel(size=3, random_state=0)
    >>> g.shape
    (3,)
    """
    rng = as_generator(random_state)
    loc = as_float_array(loc, "loc", allow_inf="-")
    if size is None:
        size = loc.shape
    elif isinstance(size, tuple):
        size = tuple(check_int(s, "size", low=0) for s in size)
    else:
        size = check_int(size, "size", low=0)
    shape = size if isinstance(size, tuple) else (size,)
    try:
        fits = np.broadcast_shapes(loc.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"loc of shape {loc.shape} does not broadcast to size {size}")
    # Exp(1) through the ziggurat is exact in the far tail, unlike -log(-log(u)).
    out = loc - np.log(rng.standard_exponential(size))
    return out if out.ndim else float(out)


def truncated_gumbel(loc, upper, random_state=None):
    """Draw Gumbel(loc, 1) variates conditioned to be at most ``upper``.

    Uses the inverse CDF in the form ``G = loc - log(exp(loc - upper) + E)``, ``E ~ Exp(1)``,
    which is exact and overflow-free for any ``loc - upper``: the CDF of Gumbel(loc) is
    ``exp(-exp(loc - g))``, so
    ``P(G <= g | G <= upper) = exp(-(exp(loc - g) - exp(loc - upper)))``.
    ``upper = +inf`` gives an untruncated Gumbel.

    Parameters
    ----------
    loc, upper : float or array_like
        Broadcast together; ``upper`` may be ``+inf``.
    random_state : None, int or np.random.Generator

    Returns
    -------
    ndarray or float
        Always ``<= upper``.

    Examples
    --------
    >>> bool(truncated_gumbel(0.0, -3.0, random_state=0) <= -3.0)
    True
    """
    rng = as_generator(random_state)
    loc, upper = _broadcast(loc=as_float_array(loc, "loc", allow_inf="-"),
                            upper=as_float_array(upper, "upper", allow_inf="+"))
    e = rng.standard_exponential(loc.shape)
    # logaddexp(loc - upper, log E) = log(exp(loc - upper) + E) without overflow.
    out = loc - np.logaddexp(loc - upper, np.log(e))
    out = np.minimum(out, upper)  # guards the last ulp when exp(loc - upper) dominates
    return out if out.ndim else float(out)


def truncated_gumbel_cdf(x, loc, upper):
    """CDF of Gumbel(loc, 1) truncated to ``(-inf, upper]``, evaluated at ``x``.

    ``exp(-(exp(loc - x) - exp(loc - upper)))`` for ``x <= upper`` and 1 above.

    Parameters
    ----------
    x : float or array_like
        Points at which the CDF is evaluated.
    loc : float or array_like
        Location(s) of the untruncated Gumbel(loc, 1).
    upper : float or array_like
        Truncation point(s); may be ``+inf``. ``x``, ``loc`` and ``upper`` are broadcast
        together.

    Returns
    -------
    ndarray
        The CDF values, of the broadcast shape.
    """
    x, loc, upper = _broadcast(x=as_float_array(x, "x", allow_inf="-+"),
                               loc=as_float_array(loc, "loc", allow_inf="-"),
                               upper=as_float_array(upper, "upper", allow_inf="+"))
    # exp(loc - x) - exp(loc - upper) = exp(loc - upper) * expm1(upper - x), in log space so
    # that |loc - upper| of hundreds of nats neither overflows nor cancels.
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        log_rate = (loc - upper) + np.log(np.expm1(np.maximum(upper - x, 0.0)))
        # upper = +inf: no truncation, the rate is exp(loc - x) (the form above is inf - inf)
        log_rate = np.where(np.isposinf(upper), loc - x, log_rate)
        cdf = np.exp(-np.exp(log_rate))
    return np.where(x >= upper, 1.0, cdf)
