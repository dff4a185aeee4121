"""Misuses of the estimators: every constructor parameter and every argument of ``fit``.

Each case replaces one argument of a fit that works by a bad value (see :mod:`tests._misuse`):
the fit raises a ValueError or TypeError naming the argument, or gives finite estimates.
scikit-learn's ``check_param_validation`` (run by each estimator's ``parametrize_with_checks``)
already tries the values each ``_parameter_constraints`` entry excludes; the cases here add the
values the constraints let through to the fit: arrays, callables, values that are only wrong
together with the data.
"""

from __future__ import annotations

import math

import numpy as np

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.cluster import CorefGibbsClusterer
from sksubsample.time_series import ARCHOrderSelector
from tests._misuse import Misuse, derived, value

_RNG = np.random.default_rng(7)
LOGISTIC_X = _RNG.normal(size=(40, 2))
LOGISTIC_Y = (LOGISTIC_X[:, 0] + _RNG.normal(size=40) > 0).astype(int)
ARCH_X = _RNG.standard_t(6.0, size=(40, 2))
COREF_X = np.r_[_RNG.normal(0.0, 0.1, (5, 2)), _RNG.normal(3.0, 0.1, (5, 2))]

#: Common constructor arguments of the MCMC estimators: the chain lengths (any non-negative
#: count of warm-up draws), the workers, the seed and the progress bar.
MCMC_KINDS = dict(n_draws="count", n_warmup="index", n_chains="count",
                  n_jobs=[value("str", "2"), value("float", 1.5), value("zero", 0)],
                  random_state="random_state",
                  progress=[value("str", "yes"), value("int", 3)])


#: scikit-learn's own messages on the data of ``fit`` (``validate_data``), which speak of the
#: array, the samples and features, the target, the sample weights.
DATA_NAMES = dict(X=("X", "array", "input variables", "sample(s)", "feature(s)"),
                  y=("y", "target", "input variables"),
                  sample_weight=("sample_weight", "Sample weights"))


def _fit(cls, fitted):
    def call(**kw):
        data = {k: kw.pop(k) for k in ("X", "y", "sample_weight") if k in kw}
        return fitted(cls(**kw).fit(**data))
    return call


LOGISTIC = Misuse(
    "BayesianLogisticRegressionMH",
    _fit(BayesianLogisticRegressionMH, lambda est: (est.coef_, est.intercept_)),
    lambda: dict(X=LOGISTIC_X.copy(), y=LOGISTIC_Y.copy(), sample_weight=np.ones(40),
                 prior_scale=10.0, fit_intercept=True, test="metropolis",
                 proposal="random-walk", control_variates=False, temperature=1.0,
                 batch_size=None, delta=None, gradient="auto", n_draws=4, n_warmup=4,
                 n_chains=1, n_jobs=None, random_state=0, progress=False),
    dict(X="matrix", y=[value("one-class", np.ones(40, dtype=int)),
                        value("three-classes", np.arange(40) % 3),
                        derived("one-shorter", lambda v: v[:-1]),
                        derived("2d", lambda v: np.c_[v, v]),
                        value("None", None)],
         sample_weight=[value("negative", -np.ones(40)), value("all-zero", np.zeros(40)),
                        value("nan", np.full(40, math.nan)), value("inf", np.full(40, np.inf)),
                        value("one-shorter", np.ones(39)), value("str", "w")],
         prior_scale="positive", fit_intercept="flag",
         test="option",
         proposal="option", control_variates="flag", temperature="positive",
         batch_size=[value("zero", 0), value("float", 2.5), value("above-n_samples", 41)],
         delta="probability", gradient="option", **MCMC_KINDS),
    names=DATA_NAMES,
    extra=dict(test=[value("returns-str", lambda *a, **k: "x")]),
)
ARCH = Misuse(
    "ARCHOrderSelector",
    _fit(ARCHOrderSelector, lambda est: est.order_posterior_),
    lambda: dict(X=ARCH_X.copy(), orders=(0, 1), method="auto", delta=0.05, batch_size=5,
                 control_variates=True, prior_shape=1.0, prior_rate=1.0, n_draws=6,
                 n_warmup=2, n_chains=1, n_jobs=None, random_state=0, progress=False),
    dict(X="matrix",
         orders=[value("None", None), value("str", "012"), value("empty", ()),
                 value("negative", (-1, 1)), value("floats", (0.5, 1.5)),
                 value("duplicates", (1, 1)), value("nan", (0, math.nan)),
                 value("too-long-for-X", (0, 60)), value("2d", [[0, 1]])],
         method="option", delta="probability",
         batch_size=[value("zero", 0), value("float", 2.5), value("str", "5")],
         control_variates="flag", prior_shape="positive", prior_rate="positive",
         **MCMC_KINDS),
    names=DATA_NAMES,
)
COREF = Misuse(
    "CorefGibbsClusterer",
    _fit(CorefGibbsClusterer, lambda est: est.labels_.astype(float)),
    lambda: dict(X=COREF_X.copy(), metric="euclidean", bandwidth=1.0, repulsion=5.0,
                 method="auto", delta=0.05, first_batch=3, n_sweeps=3, temperature_start=1.0,
                 temperature_end=0.1, track_log_potential=True, track_labels=False,
                 audit_races=False, n_draws=0, n_warmup=0, n_chains=1, n_jobs=None,
                 random_state=0, progress=False),
    dict(X="matrix",
         metric="option",
         bandwidth="positive", repulsion=[value("negative", -1.0), value("nan", math.nan),
                                          value("inf", math.inf), value("str", "1")],
         method="option", delta="probability",
         first_batch=[value("zero", 0), value("float", 3.5), value("str", "3")],
         n_sweeps="count", temperature_start="positive", temperature_end="positive",
         track_log_potential="flag", track_labels="flag", audit_races="flag",
         **{**MCMC_KINDS, "n_draws": "index"}),
    names=DATA_NAMES,
    extra=dict(metric=[value("returns-nan", lambda a, b: math.nan),
                       value("returns-str", lambda a, b: "x")]),
)
ESTIMATORS = [LOGISTIC, ARCH, COREF]

#: The estimators' classes by the names of their misuses.
CLASSES = {"BayesianLogisticRegressionMH": BayesianLogisticRegressionMH,
           "ARCHOrderSelector": ARCHOrderSelector, "CorefGibbsClusterer": CorefGibbsClusterer}
