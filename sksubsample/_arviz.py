"""ArviZ export helpers: ArviZ 0.x and 1.x, and the observations a pointwise group covers."""

from __future__ import annotations

import inspect
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._utils import as_generator, check_int

__all__ = [
    "CHEAP_LP_TERMS",
    "MAX_POINTWISE_VALUES",
    "InferenceDataMixin",
    "arviz_from_dict",
    "import_arviz",
    "select_observations",
]


# --------------------------------------------------------------------------------------------


def import_arviz():
    try:
        import arviz
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "to_inference_data() needs ArviZ; install it with `pip install sksubsample[arviz]` "
            "(or `pip install arviz`)"
        ) from exc
    return arviz


def arviz_from_dict(arviz, groups, coords, dims):
    """Call ``arviz.from_dict`` in the 0.x form (keyword groups) or the 1.x form (a dict).

    ArviZ 0.x: ``from_dict(posterior=None, *, sample_stats=None, log_likelihood=None,
    observed_data=None, ..., coords, dims)`` returns an ``InferenceData``. ArviZ 1.x
    (arviz-base): ``from_dict(data, *, coords, dims, ...)`` with
    ``data = {"posterior": {...}, "sample_stats": {...}, ...}`` returns an ``xarray.DataTree``
    (groups whose name contains ``data``, such as ``observed_data``, get no chain and draw
    dimensions in both). The signature tells them apart without relying on version strings.
    """
    params = inspect.signature(arviz.from_dict).parameters
    groups = {k: v for k, v in groups.items() if v}
    if "posterior" in params:
        return arviz.from_dict(**groups, coords=coords, dims=dims)
    return arviz.from_dict(groups, coords=coords, dims=dims)


#: Largest number of values (draws × observations) a pointwise group may hold before
#: to_inference_data asks for a subsample of observations (400 MB of float64).
MAX_POINTWISE_VALUES = 50_000_000
#: lp="auto" computes the log density when it costs at most this many data terms.
CHEAP_LP_TERMS = 20_000_000


def select_observations(requests, n_obs, random_state):
    """The observations (sorted row indices, or None for all) that ``log_likelihood`` and
    ``posterior_predictive`` ask for: True means all, an int that many drawn at random without
    replacement, an array those rows (indices or a boolean mask)."""
    chosen = {}
    for name, value in requests.items():
        if value is None or isinstance(value, bool | np.bool_):
            continue
        if isinstance(value, Integral):
            k = check_int(value, name, low=1, high=n_obs)
            chosen[name] = ("int", k)
            continue
        rows = np.asarray(value)
        if rows.dtype == bool:
            if rows.shape != (n_obs,):
                raise ValueError(
                    f"{name}: a boolean mask must have one entry per observation ({n_obs}), "
                    f"got shape {rows.shape}")
            rows = np.flatnonzero(rows)
        elif rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise TypeError(
                f"{name} must be a bool, an int (the size of a random subsample of the "
                f"observations) or a 1-D array of observation indices or a boolean mask, "
                f"got {type(value).__name__}"
                + (f" of dtype {rows.dtype} and shape {rows.shape}" if rows.size else ""))
        if rows.size == 0:
            raise ValueError(f"{name} selects no observation")
        if rows.min() < 0 or rows.max() >= n_obs:
            raise ValueError(f"{name}: observation indices must lie in [0, {n_obs - 1}]")
        rows = np.unique(rows)
        chosen[name] = ("rows", rows)
    kinds = list(chosen.values())
    if not kinds:
        return None
    if any(not _same_selection(kinds[0], other) for other in kinds[1:]):
        raise ValueError(
            "log_likelihood and posterior_predictive select different observations: give "
            "the subsample to one of them and True to the other, which then uses the same")
    kind, value = kinds[0]
    if kind == "rows":
        return value
    return np.sort(as_generator(random_state).choice(n_obs, size=value, replace=False))


def _same_selection(a, b):
    if a[0] != b[0]:
        return False
    return a[1] == b[1] if a[0] == "int" else np.array_equal(a[1], b[1])


class InferenceDataMixin:
    """:meth:`to_inference_data` of :class:`~sksubsample._base.MCMCEstimator` (it reads the
    estimator's draws, sample statistics and data hooks)."""

    def to_inference_data(self, *, log_likelihood=False, posterior_predictive=False,
                          lp="auto", random_state=None):
        """The fitted draws as an ArviZ object, ready for ``az.summary``, ``az.loo``, ``az.waic``.

        Parameters
        ----------
        log_likelihood : bool, int or array-like, default False
            Add the group ``log_likelihood``: the log likelihood of each observation at every
            draw (what ``az.loo`` and ``az.waic`` need). It costs one pass over the chosen
            observations per draw, so it is computed on request only: ``True`` for every
            observation, an int ``k`` for ``k`` observations drawn at random without
            replacement (``random_state``), or an array of observation indices (or a boolean
            mask). On a subsample, ``az.loo`` estimates the elpd of those observations:
            scale it by ``n / k`` for the whole data set. A selection larger than 5·10⁷
            values (draws × observations) is refused: choose a subsample.
        posterior_predictive : bool, int or array-like, default False
            Add the group ``posterior_predictive``: one replicated data set per draw, for the
            same observations as ``log_likelihood`` (``True`` takes the subsample given
            there, if any; two different subsamples are refused).
        lp : {"auto", True, False}, default "auto"
            Add ``lp`` to ``sample_stats``: the log density of the sampled posterior at every
            draw, up to a constant. Exact, it reads every observation per draw (the chains
            never compute it), so ``"auto"`` adds it only when that costs at most 2·10⁷ data
            terms and the training data are in memory; ``True`` always computes it.
        random_state : None, int or numpy.random.Generator, default None
            Randomness of a random subsample and of the posterior predictive draws.

        Returns
        -------
        arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
            Groups: ``posterior`` (dimensions ``(chain, draw, ...)``); ``sample_stats``, named
            as ArviZ names them where a name exists (``acceptance_rate``: the acceptance
            probability of each step's proposal; ``step_size``; ``lp``) and after the
            package's quantities otherwise (``accepted``, ``batch_size``, ``n_evaluations``,
            ...); ``observed_data`` (when the estimator provides it and its training data are
            in memory: the chosen observations, dimension ``obs_id`` with their indices as
            coordinates); ``log_likelihood`` and ``posterior_predictive`` when asked.

        Raises
        ------
        ImportError
            When ArviZ is not installed (install the ``arviz`` extra).
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        NotImplementedError
            When the estimator cannot provide a requested group (or ``lp=True``).
        RuntimeError
            When a requested group needs the training data and the estimator was unpickled
            (the training data are kept in memory, not pickled).
        ValueError, TypeError
            For a bad selection of observations.
        """
        check_is_fitted(self)
        if not (isinstance(lp, bool | np.bool_) or (isinstance(lp, str) and lp == "auto")):
            raise ValueError(f"lp must be 'auto', True or False, got {lp!r}")
        requests = {"log_likelihood": log_likelihood,
                    "posterior_predictive": posterior_predictive}
        hooks = {"log_likelihood": "_pointwise_log_likelihood",
                 "posterior_predictive": "_posterior_predictive", "lp": "_log_density"}
        wanted = [name for name, value in requests.items()
                  if value is not None and value is not False]
        if lp is True:
            wanted.append("lp")
        for name in wanted:
            if not self._provides(hooks[name]):
                raise NotImplementedError(f"{type(self).__name__} does not provide {name}")
        for name in wanted:
            self._fitted_sampler(name)
        arviz = import_arviz()
        rng = as_generator(random_state)
        has_data = getattr(self, "_sampler", None) is not None and self._provides(
            "_n_observations")
        rows = n_rows = None
        if has_data:
            n_obs = self._n_observations()
            rows = select_observations(requests, n_obs, rng)
            n_rows = n_obs if rows is None else rows.size
        n_chains, n_draws = self._draws.shape[:2]
        for name in wanted:
            if name != "lp" and n_chains * n_draws * n_rows > MAX_POINTWISE_VALUES:
                raise ValueError(
                    f"{name} over {n_rows} observations would hold {n_chains * n_draws} × "
                    f"{n_rows} values (more than {MAX_POINTWISE_VALUES:.0e}): pass an int, "
                    f"the size of a random subsample of observations, or their indices")
        dims, coords = self._posterior_dims()
        dims, coords = dict(dims), dict(coords)
        stats = {k: np.asarray(v) for k, v in self._stats.items()}
        cheap = has_data and n_chains * n_draws * self._n_observations() <= CHEAP_LP_TERMS
        if lp is True or (lp == "auto" and cheap and self._provides("_log_density")):
            stats["lp"] = np.asarray(self._log_density())
        groups = {
            "posterior": {k: np.asarray(v) for k, v in self._posterior_variables().items()},
            "sample_stats": stats,
        }
        pointwise = {}
        if has_data and self._provides("_observed_data"):
            groups["observed_data"] = self._observed_data(rows)
            pointwise.update(groups["observed_data"])
        if "log_likelihood" in wanted:
            groups["log_likelihood"] = self._pointwise_log_likelihood(rows)
            pointwise.update(groups["log_likelihood"])
        if "posterior_predictive" in wanted:
            groups["posterior_predictive"] = self._posterior_predictive(rows, rng)
            pointwise.update(groups["posterior_predictive"])
        if pointwise:
            for name in pointwise:
                dims.setdefault(name, ["obs_id"])
            coords["obs_id"] = np.arange(n_rows) if rows is None else rows
        return arviz_from_dict(arviz, groups, coords, dims)
