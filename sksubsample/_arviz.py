"""ArviZ export helpers: ArviZ 0.x and 1.x, and the observations a pointwise group covers."""

from __future__ import annotations

import inspect
from numbers import Integral

import numpy as np

from ._utils import as_generator, check_int

__all__ = ["CHEAP_LP_TERMS", "MAX_POINTWISE_VALUES", "arviz_from_dict", "import_arviz",
           "select_observations"]


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
