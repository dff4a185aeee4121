"""Return series for ARCH order selection: a seeded simulator and two real indices.

The real series come from the offline data sets of the ``arch`` package (daily S&P 500 and
NASDAQ Composite, 1999-2018), imported lazily: install the ``arch`` extra
(``pip install sksubsample[arch]``).
"""

from __future__ import annotations

import numpy as np

from .._utils import as_float_array, as_generator, check_flag, check_int, check_positive

__all__ = ["load_nasdaq_returns", "load_sp500_returns", "simulate_arch"]


def simulate_arch(n_samples, alpha=(0.2, 0.3, 0.2), nu=6.0, *, n_series=1, burn_in=500,
                  random_state=None):
    """Simulate ARCH(q) returns with scale-1 Student-t innovations.

    ``r_t = σ_t z_t``, ``z_t ~ t_ν(0, 1)`` (location 0, scale 1), ``σ_t² = α_0 +
    Σ_{i=1..q} α_i r_{t-i}²`` (Chen & Ghahramani 2016, §5.2), started at ``r = 0`` and run
    ``burn_in`` steps before the returned samples.

    Parameters
    ----------
    n_samples : int >= 1
    alpha : sequence of float, default (0.2, 0.3, 0.2)
        ``(α_0, α_1, …, α_q)``: ``α_0 > 0``, ``α_i >= 0``; q = len(alpha) - 1.
    nu : float > 0, default 6.0
    n_series : int >= 1, default 1
        Independent series (columns) with the same parameters.
    burn_in : int >= 0, default 500
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_samples, n_series)

    Examples
    --------
    >>> r = simulate_arch(1000, alpha=(0.5, 0.3), nu=8.0, random_state=0)
    >>> r.shape
    (1000, 1)
    """
    n_samples = check_int(n_samples, "n_samples", low=1)
    n_series = check_int(n_series, "n_series", low=1)
    burn_in = check_int(burn_in, "burn_in", low=0)
    nu = check_positive(nu, "nu")
    alpha = as_float_array(alpha, "alpha", finite=False)
    if alpha.ndim != 1 or alpha.size < 1 or not np.all(np.isfinite(alpha)):
        raise ValueError(f"alpha must be a non-empty 1-D sequence of finite numbers, got {alpha}")
    if alpha[0] <= 0 or np.any(alpha[1:] < 0):
        raise ValueError(f"alpha must have alpha[0] > 0 and alpha[1:] >= 0, got {alpha}")
    rng = as_generator(random_state)
    q = alpha.size - 1
    total = n_samples + burn_in
    z = rng.standard_t(nu, size=(total, n_series))
    r = np.zeros((total + q, n_series))
    for t in range(total):
        lags = r[t: t + q][::-1] ** 2  # r_{t-1}², …, r_{t-q}² in the padded array
        sigma2 = alpha[0] + alpha[1:] @ lags
        r[t + q] = np.sqrt(sigma2) * z[t]
    return r[q + burn_in:]


def _arch_dataset(name):
    try:
        from arch.data import nasdaq, sp500
    except ImportError as exc:
        raise ImportError(
            f"load_{name}_returns() reads the arch package's offline data; install it with "
            "`pip install sksubsample[arch]` (or `pip install arch`)"
        ) from exc
    return {"sp500": sp500, "nasdaq": nasdaq}[name].load()


def _returns(name, as_frame):
    as_frame = check_flag(as_frame, "as_frame")
    prices = _arch_dataset(name)["Adj Close"]
    returns = 100.0 * np.log(prices).diff().dropna()
    returns.name = f"{name}_return"
    if as_frame:
        return returns.to_frame()
    return returns.to_numpy()[:, None]


def load_sp500_returns(*, as_frame=False):
    """Daily S&P 500 returns, ``100 × log(P_t / P_{t-1})`` of the adjusted close, 1999-2018.

    Parameters
    ----------
    as_frame : bool, default False
        Return a pandas DataFrame indexed by date instead of an array.

    Returns
    -------
    ndarray of shape (5030, 1) or pandas.DataFrame
        One column, ready for :class:`sksubsample.ARCHOrderSelector` (which demeans it).

    Raises
    ------
    ImportError
        When the ``arch`` package is not installed (extra ``arch``).
    """
    return _returns("sp500", as_frame)


def load_nasdaq_returns(*, as_frame=False):
    """Daily NASDAQ Composite returns, ``100 × log(P_t / P_{t-1})`` of the adjusted close.

    Same conventions as :func:`load_sp500_returns` (1999-2018, 5030 returns).

    Parameters
    ----------
    as_frame : bool, default False
        Return a pandas DataFrame indexed by date instead of an array.

    Returns
    -------
    ndarray of shape (5030, 1) or pandas.DataFrame
        One column, ready for :class:`sksubsample.ARCHOrderSelector` (which demeans it).

    Raises
    ------
    ImportError
        When the ``arch`` package is not installed (extra ``arch``).
    """
    return _returns("nasdaq", as_frame)
