"""Shared machinery of the posterior-sampling estimators.

:class:`PosteriorSamplerMixin` gives every estimator of the library the same behaviour for what is
not specific to its model:

* independent chains run through :class:`joblib.Parallel`, each with its own generator spawned by
  :class:`numpy.random.SeedSequence` *before* any work is scheduled, so the draws are
  bit-identical whatever ``n_jobs`` and whatever joblib backend (loky, threading, dask) runs them;
* an optional tqdm progress bar (a no-op object when ``progress=False``, as emcee's ``pbar``);
* ``sample_posterior(n_samples=None, random_state=None)``: draws with the draw axis first;
* ``to_inference_data()``: an ArviZ ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x);
* convergence diagnostics computed in NumPy/SciPy (no ArviZ needed): rank-normalised split
  R-hat and effective sample sizes (:func:`split_rhat`, :func:`effective_sample_size`).

A subclass implements ``_posterior_variables()`` (an ordered mapping ``name -> array of shape
(n_chains, n_draws, *shape)``), and may override ``_posterior_dims()`` and ``_sample_stats()``.

References
----------
.. [1] A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization,
   folding, and localization: an improved R-hat for assessing convergence of MCMC.
   Bayesian Analysis 16(2), 2021. Eqs. 1-4 (split R-hat), Section 3 (rank normalisation,
   folding), Section 3.2 (ESS with Geyer's initial monotone sequence).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
from joblib import Parallel, delayed
from scipy import special, stats
from sklearn.utils.validation import check_is_fitted

from ._utils import as_generator, check_int, spawn_generators

__all__ = ["PosteriorSamplerMixin", "effective_sample_size", "split_rhat"]


# --------------------------------------------------------------------------------------------
# diagnostics (Vehtari et al. 2021), pure NumPy/SciPy
# --------------------------------------------------------------------------------------------


def _as_chains(draws, name="draws"):
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim < 2:
        raise ValueError(f"{name} must have shape (n_chains, n_draws, ...), got {draws.shape}")
    if draws.shape[1] < 4:
        raise ValueError(f"{name} needs at least 4 draws per chain, got {draws.shape[1]}")
    return draws


def _split_chains(x):
    """Split each chain in two halves; an odd middle draw is dropped (Vehtari et al. Eq. 1)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _z_scale(x):
    """Rank-normalise over all chains: Φ⁻¹((r - 3/8) / (S + 1/4)) (Vehtari et al. Section 3)."""
    ranks = stats.rankdata(x, method="average").reshape(x.shape)
    return special.ndtri((ranks - 0.375) / (x.size + 0.25))


def _rhat_basic(x):
    """Classic potential scale reduction of (n_chains, n_draws) (Vehtari et al. Eqs. 1-4)."""
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
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
    draws : array_like of shape (n_chains, n_draws, *param_shape)
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
    draws : array_like of shape (n_chains, n_draws, *param_shape)
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


# --------------------------------------------------------------------------------------------
# progress bar
# --------------------------------------------------------------------------------------------


class _NoOpProgress:
    """Stands in for tqdm when ``progress=False`` (as emcee's ``_NoOpPBar``)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, s, refresh=True):
        pass


def _progress_bar(progress, total, desc):
    """tqdm when ``progress`` is true, a no-op otherwise; ``progress`` may name a tqdm flavour."""
    if not progress:
        return _NoOpProgress()
    if progress == "notebook":
        from tqdm.notebook import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit="chain")


# --------------------------------------------------------------------------------------------
# ArviZ
# --------------------------------------------------------------------------------------------


def _import_arviz():
    try:
        import arviz
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "to_inference_data() needs ArviZ; install it with `pip install sksubsample[arviz]` "
            "(or `pip install arviz`)"
        ) from exc
    return arviz


def _arviz_from_dict(arviz, groups, coords, dims):
    """Call ``arviz.from_dict`` in the 0.x form (keyword groups) or the 1.x form (a dict).

    ArviZ 0.x: ``from_dict(posterior=None, *, sample_stats=None, ..., coords, dims)`` returns an
    ``InferenceData``. ArviZ 1.x (arviz-base): ``from_dict(data, *, coords, dims, ...)`` with
    ``data = {"posterior": {...}, "sample_stats": {...}}`` returns an ``xarray.DataTree``. The
    signature tells them apart without relying on version strings.
    """
    params = inspect.signature(arviz.from_dict).parameters
    groups = {k: v for k, v in groups.items() if v}
    if "posterior" in params:
        return arviz.from_dict(**groups, coords=coords, dims=dims)
    return arviz.from_dict(groups, coords=coords, dims=dims)


# --------------------------------------------------------------------------------------------
# chains
# --------------------------------------------------------------------------------------------


def run_chains(chain_fn, args, *, n_chains, random_state, n_jobs=None, progress=False,
               desc="chains"):
    """Run ``chain_fn(*args, rng)`` for ``n_chains`` independent generators, in parallel.

    Every chain's generator is spawned from ``random_state`` through ``SeedSequence.spawn``
    before anything is scheduled, and results are collected in chain order, so the output does
    not depend on ``n_jobs`` or on the joblib backend (use ``joblib.parallel_config`` to pick
    one, e.g. ``backend="dask"``).

    Parameters
    ----------
    chain_fn : callable
        A picklable (module-level) function ``chain_fn(*args, rng) -> result``.
    args : tuple
        Arguments shared by every chain (pickled once per task by process backends).
    n_chains : int >= 1
    random_state : None, int, SeedSequence or Generator
    n_jobs : int or None
        As in joblib; ``None`` means 1 unless a ``parallel_config`` context says otherwise.
    progress : bool or "notebook"
        Show a tqdm bar advancing as chains complete.
    desc : str
        Label of the progress bar.

    Returns
    -------
    list
        ``n_chains`` results in chain order.
    """
    n_chains = check_int(n_chains, "n_chains", low=1)
    rngs = spawn_generators(random_state, n_chains)
    tasks = (delayed(chain_fn)(*args, rng) for rng in rngs)
    results = []
    with _progress_bar(progress, n_chains, desc) as bar:
        # return_as="generator" yields results in submission order as they complete, so the
        # bar advances during the run without changing which chain gets which stream.
        for result in Parallel(n_jobs=n_jobs, return_as="generator")(tasks):
            results.append(result)
            bar.update(1)
    return results


class PosteriorSamplerMixin:
    """Chains, posterior draws, ArviZ export and diagnostics shared by the estimators.

    Subclasses implement ``_posterior_variables()`` returning an ordered mapping
    ``name -> ndarray (n_chains, n_draws, *shape)`` of the fitted draws; ``_posterior_dims()``
    (``name -> list of dimension names``, and coordinates) and ``_sample_stats()`` (per-draw
    statistics, ``name -> (n_chains, n_draws)``) are optional. The flat parameter vector used
    by :meth:`sample_posterior` and the diagnostics concatenates the variables in that order.
    """

    def _posterior_variables(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _posterior_dims(self):
        return {}, {}

    def _sample_stats(self):
        return {}

    def _run_chains(self, chain_fn, args, *, desc=None):
        """Run the estimator's chains with its ``n_chains``, ``random_state``, ``n_jobs``."""
        return run_chains(chain_fn, args, n_chains=self.n_chains, random_state=self.random_state,
                          n_jobs=self.n_jobs, progress=self.progress,
                          desc=desc or type(self).__name__)

    def _flat_draws(self):
        """All posterior variables as one array of shape (n_chains, n_draws, n_params)."""
        parts = []
        for value in self._posterior_variables().values():
            value = np.asarray(value, dtype=np.float64)
            parts.append(value.reshape(value.shape[0], value.shape[1], -1))
        return np.concatenate(parts, axis=2)

    def sample_posterior(self, n_samples=None, random_state=None):
        """Posterior draws of the parameter vector, the draw axis first.

        Parameters
        ----------
        n_samples : int >= 1 or None, default None
            ``None`` returns every retained draw of every chain (chain after chain). An int
            returns that many draws picked uniformly from the pooled chains: without
            replacement when ``n_samples`` does not exceed the pool, with replacement otherwise.
        random_state : None, int or numpy.random.Generator, default None
            Randomness of the pick (unused when ``n_samples`` is None).

        Returns
        -------
        ndarray of shape (n_samples, n_params)
            The columns are the estimator's parameters in the order of its
            ``posterior_names_`` attribute.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self)
        draws = self._flat_draws()
        pooled = draws.reshape(-1, draws.shape[2])
        if n_samples is None:
            return pooled.copy()
        n_samples = check_int(n_samples, "n_samples", low=1)
        rng = as_generator(random_state)
        replace = n_samples > pooled.shape[0]
        return pooled[rng.choice(pooled.shape[0], size=n_samples, replace=replace)]

    def rhat(self, method="rank"):
        """Split R-hat of each parameter (see :func:`split_rhat`; one chain is split in two)."""
        check_is_fitted(self)
        draws = self._flat_draws()
        return split_rhat(draws, method=method)

    def ess(self, method="bulk"):
        """Effective sample size of each parameter (see :func:`effective_sample_size`)."""
        check_is_fitted(self)
        return effective_sample_size(self._flat_draws(), method=method)

    def to_inference_data(self):
        """The fitted draws as an ArviZ object.

        Returns
        -------
        arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
            Group ``posterior`` holds the posterior variables with dimensions
            ``(chain, draw, ...)``; group ``sample_stats`` the per-draw statistics.

        Raises
        ------
        ImportError
            When ArviZ is not installed (install the ``arviz`` extra).
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self)
        arviz = _import_arviz()
        dims, coords = self._posterior_dims()
        groups = {
            "posterior": {k: np.asarray(v) for k, v in self._posterior_variables().items()},
            "sample_stats": {k: np.asarray(v) for k, v in self._sample_stats().items()},
        }
        return _arviz_from_dict(arviz, groups, coords, dims)
