"""Bayesian selection of an ARCH order by Carlin–Chib with racing Gibbs and racing MH."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from scipy import special
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import MCMCEstimator, keeps_state_on_interrupt, run_chains
from .._utils import as_generator, check_int, check_numeric
from ..diagnostics import check_racing_guard, effective_sample_size
from . import _arch_kernels as kernels
from ._arch_checks import IndependentChecks
from ._arch_inputs import (
    adaptation_seed,
    centred_series,
    check_orders,
    starting_point,
    warn_if_levels,
)
from ._arch_target import ARCHTarget, arch_design
from ._chain_model import build_model
from ._chains import adapt_chain, continue_chain, sample_chain
from ._laplace import laplace_fit

__all__ = ["ARCHOrderSelector"]


def _systematic_resample(weights):
    """Per chain, the indices of ``n_draws`` draws resampled with probabilities ``weights``
    (each row normalised) by systematic resampling at the fixed offset 1/2: deterministic, of
    the lowest variance among unbiased resamplings, and in the chain's order."""
    n_chains, n_draws = weights.shape
    positions = (np.arange(n_draws) + 0.5) / n_draws
    out = np.empty((n_chains, n_draws), dtype=np.int64)
    for c in range(n_chains):
        cumulative = np.cumsum(weights[c] / weights[c].sum())
        out[c] = np.minimum(np.searchsorted(cumulative, positions), n_draws - 1)
    return out


def _natural_columns(order, max_order):
    """Positions of ``(α_0, …, α_order, ν)`` among ``(α_0, …, α_max_order, ν)``."""
    return np.r_[np.arange(order + 1), max_order + 1]


class ARCHOrderSelector(IndependentChecks, MCMCEstimator):
    """Posterior over the order of an ARCH model with Student-t innovations.

    Model (Chen & Ghahramani 2016, §5.2): for each series (column of ``X``, demeaned),
    ``r_t = σ_t z_t`` with ``z_t ~ t_ν(0, 1)`` (location 0, **scale 1**),
    ``σ_t² = α_0 + Σ_{i=1..q} α_i r_{t-i}²``, independent ``Gamma(prior_shape, prior_rate)``
    priors on ``α_0, …, α_q, ν`` and ``q`` uniform on ``orders``. Every order is scored on the
    same terms ``t = max(orders), …, n_samples - 1``, so the evidences ``p(r | q)`` are
    comparable. Several columns are independent series sharing ``(q, α, ν)``.

    Sampler (Appendix C.2): Carlin & Chib (1995) with Laplace pseudo-priors at each order's MAP
    in softplus coordinates; per sweep, ``q | rest`` by the racing Gibbs step (Gumbel-max race
    over the orders, Alg. 1) and the selected order's ``(α, ν)`` by one MH step with an
    SGLD-type proposal corrected by the racing MH test (Eq. 12), both with Taylor control
    variates (§3.4); the other orders' parameters are redrawn from their pseudo-priors. The
    adjusted prior ``π̃`` is adapted by Wang–Landau (step ``1/(1 + t/100)`` on ``log π̃``) during
    warm-up so that every order is visited, then fixed; ``p(q | r) ∝ p̃(q | r) / π̃_q``. Both
    methods run compiled sweeps (numba; the first fit in a fresh environment compiles them, later
    processes load them from disk), so a racing sweep costs about what its evaluated terms cost.

    Parameters
    ----------
    orders : iterable of int >= 0, default (0, 1, 2, 3, 4, 5)
        Candidate orders (e.g. ``range(0, 6)``).
    method : {"auto", "racing", "exact"}, default "auto"
        ``"racing"``: subsampled Gibbs and MH steps with error ``delta`` per decision, every
        race run to its end; ``"exact"``: the same chain with full-data Gibbs and Metropolis
        steps (the reference the racing chain is checked against); ``"auto"``: racing, but a
        race whose remaining terms, projected from those it has read, would cost more than
        the exact sums of its surviving arms (at costs measured once per machine and kind of
        data) stops and lets those exact sums decide (never less accurate than the race, and
        never much slower than ``"exact"``).
    delta : float in (0, 1), default 0.05
        Error bound of each race (total variation per Gibbs draw, Prop. 1; decision error per
        MH test).
    batch_size : int >= 3, default 50
        First minibatch ``m^(1)`` of the races and minibatch of the SGLD gradient. The
        Racing-Normal bound rests on standard deviations estimated from the first minibatch,
        which two rewards estimate too poorly.
    control_variates : bool, default True
        Let the races see residuals of second-order Taylor proxies around each order's MAP
        (their sum is added back exactly; the conditionals are unchanged). The exact method
        sums the raw terms (the same sums, at a lower cost per term). The SGLD gradient always
        uses the proxies (variance reduction; the MH test corrects it).
    prior_shape, prior_rate : float > 0, default 1.0
        Gamma prior of every ``α_i`` and of ``ν``.
    n_draws : int >= 1 or "auto", default "auto"
        Retained sweeps per chain. ``"auto"``: rounds of sweeps until every diagnosed quantity
        (``diagnostic_names_``) meets the criteria of
        :class:`~sksubsample.BayesianLogisticRegressionMH`'s ``n_draws="auto"``, or a budget.
    n_warmup : int >= 0, default 1000
        Warm-up sweeps per chain: Wang–Landau and step-size adaptation, after which the chains'
        adjusted priors and step sizes are averaged and fixed, and each sampling chain restarts
        from an overdispersed state with ``n_warmup // 4`` burn-in sweeps (all discarded).
    n_chains : int >= 1, default 4
    n_jobs : int or None, default None
        Chains run in parallel through joblib; the draws do not depend on it.
    random_state : None, int, numpy.random.Generator, SeedSequence or RandomState, default None
    progress : bool or "notebook", default False

    Attributes
    ----------
    orders_ : ndarray of int, shape (n_orders,)
        The candidate orders, sorted.
    order_posterior_ : ndarray of shape (n_orders,)
        ``p(q | r)`` (sums to 1): the visit frequencies reweighted by ``1 / π̃_q``.
    order_posterior_se_ : ndarray of shape (n_orders,)
        Its Monte Carlo standard error by the delta method: the visit frequency ``f_j`` has
        variance ``f_j (1 - f_j) / ESS_j`` (``ESS_j`` of the indicator ``1{q = j}``, pooled
        chains) and covariance ``-f_j f_k / sqrt(ESS_j ESS_k)`` with another order's.
    order_ess_ : ndarray of shape (n_orders,)
        Those ESS of the order indicators (mean ESS, pooled chains).
    log_evidence_ : ndarray of shape (n_orders,)
        ``log p(r | q)`` relative to the best order (maximum 0; ``-inf`` for an order never
        visited after warm-up).
    log_evidence_se_ : ndarray of shape (n_orders,)
        Monte Carlo standard error of ``log_evidence_`` (delta method, as
        ``order_posterior_se_``; 0 for the best order, the reference).
    order_ : int
        Posterior mode of ``q``.
    order_samples_ : ndarray of int, shape (n_chains, n_draws)
        Orders visited by the chains. They follow the *adjusted* posterior ``p̃``; weight them
        by ``sample_weights_`` for ``p(q | r)``.
    sample_weights_ : ndarray of shape (n_chains, n_draws)
        Importance weights ``∝ 1 / π̃_q`` of the draws, normalised per chain to ``1/n_chains``
        (they sum to 1).
    params_samples_ : dict of int -> ndarray of shape (n_visits, q + 2)
        For each order ``q``, the draws of ``(α_0, …, α_q, ν)`` from ``p(α, ν | q, r)`` (the
        states of the sweeps that selected ``q``, chains pooled).
    params_mean_ : dict of int -> ndarray of shape (q + 2,)
        Their posterior means (NaN when the order was not visited).
    alpha_, nu_ : ndarray of shape (``order_ + 1``,), float
        Posterior means of ``α`` and ``ν`` under ``order_``.
    map_ : dict of int -> ndarray of shape (q + 2,)
        The MAP ``(α_0, …, α_q, ν)`` of each order (centre of its pseudo-prior).
    laplace_log_evidence_ : ndarray of shape (n_orders,)
        Laplace approximation of ``log p(r | q)``, relative to its maximum.
    mean_ : ndarray of shape (n_series,)
        Means removed from the series in ``fit`` (and in ``score``).
    n_terms_ : int
        Likelihood terms per order: ``n_series × (n_samples - max(orders))``.
    posterior_names_ : ndarray of str
        Columns of :meth:`sample_posterior`: ``order``, ``alpha_0 … alpha_{max(orders)}``,
        ``nu``.
    diagnostic_names_ : ndarray of str
        Quantities of ``rhat_`` and ``ess_`` (and of :meth:`rhat`, :meth:`ess`): the order
        indicators ``order=q`` followed by every order's parameters (the chain's full state).
    rhat_, ess_ : ndarray of shape (``len(diagnostic_names_)``,)
        Rank-normalised split R-hat and bulk ESS of those quantities.
    acceptance_rate_ : float
        MH acceptance rate (sampling phase, all orders).
    step_size_ : ndarray of shape (n_chains, n_orders)
        Frozen MH step size of each order (common to the chains: their warm-up averages).
    n_draws_ : int
        Sweeps per chain kept (``n_draws``, or where ``n_draws="auto"`` stopped, plus those of
        :meth:`sample_more`).
    convergence_ : dict
        How the sweeps of ``fit`` ended: ``rounds`` run and why they ``stopped`` (see
        :attr:`sksubsample.BayesianLogisticRegressionMH.convergence_`).
    n_evaluations_ : int
        Likelihood terms evaluated by the Gibbs steps, the MH tests and the SGLD gradients over
        every sweep of every chain, plus ``n_orders × n_terms_`` once to build the control
        variates (the MAP searches are not counted).
    fraction_data_touched_ : float
        Terms evaluated by the sweeps (warm-up, burn-in and sampling) over what the exact
        method evaluates in as many sweeps, ``(n_orders + 1) × n_terms_ + 2 × batch_size`` per
        sweep.
    n_updates_ : int
        Gibbs steps and MH tests of the sampling sweeps (two per sweep of every chain).
    n_raced_ : int
        Of those, the ones decided by a race (0 with ``method="exact"``).
    n_finished_exactly_ : int
        Races that stopped paying and were decided by the exact sums of their surviving arms
        (``method="auto"`` only).
    n_guarded_ : int
        Races in which the guard of the Normal bound's normal approximation held back an
        elimination (the race read on); a
        :class:`~sksubsample.diagnostics.RacingGuardWarning` follows when they are more than
        a tenth of the races.
    adjusted_log_prior_ : ndarray of shape (n_orders,)
        The fixed ``log π̃`` of the sampling chains (normalised).
    adaptation_log_posterior_ : ndarray of shape (n_chains, n_warmup, n_orders)
        The Wang–Landau estimate of ``log p(q | r)`` (``-log π̃`` normalised) after each warm-up
        sweep of each warm-up chain (Fig. 2b of the paper).
    adaptation_n_evaluations_ : ndarray of int, shape (n_chains, n_warmup)
        Likelihood terms each warm-up chain had evaluated by then.
    n_features_in_ : int
        Number of series.

    Notes
    -----
    The indicators ``1{q = j}`` are what the convergence check sees for ``q``: the order is a
    categorical variable, for which R-hat and ESS of its raw value depend on an arbitrary
    numbering, while each indicator's mean is exactly the adjusted posterior probability the
    estimate of ``p(q | r)`` is built from. The parameters of every order are checked too, as
    coordinates of the chain's state.

    References
    ----------
    .. [1] Y. Chen, Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
       ICML 2016, §5.2, Appendix C.2, Alg. 1, Eqs. 11-12, 25.
    .. [2] B. P. Carlin, S. Chib. Bayesian model choice via Markov chain Monte Carlo methods.
       JRSS B 57(3), 1995.
    .. [3] F. Wang, D. P. Landau. Efficient, multiple-range random walk algorithm to calculate
       the density of states. PRL 86, 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from sksubsample.time_series import ARCHOrderSelector
    >>> r = np.random.default_rng(0).standard_t(6.0, size=(1000, 1))
    >>> sel = ARCHOrderSelector(orders=range(0, 3), n_draws=200, n_warmup=100, n_chains=2,
    ...                         random_state=0)
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     sel = sel.fit(r)
    >>> sel.order_posterior_.shape, bool(abs(sel.order_posterior_.sum() - 1) < 1e-12)
    ((3,), True)
    >>> sel.sample_posterior(5, random_state=0).shape
    (5, 5)
    """

    _parameter_constraints: ClassVar[dict] = {
        **MCMCEstimator._parameter_constraints,
        "orders": ["array-like"],
        "method": [StrOptions({"auto", "racing", "exact"})],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "batch_size": [Interval(Integral, 3, None, closed="left")],
        "control_variates": ["boolean"],
        "prior_shape": [Interval(Real, 0, None, closed="neither")],
        "prior_rate": [Interval(Real, 0, None, closed="neither")],
        "n_draws": [*MCMCEstimator._parameter_constraints["n_draws"], StrOptions({"auto"})],
    }

    def __init__(self, *, orders=(0, 1, 2, 3, 4, 5), method="auto", delta=0.05, batch_size=50,
                 control_variates=True, prior_shape=1.0, prior_rate=1.0, n_draws="auto",
                 n_warmup=1000, n_chains=4, n_jobs=None, random_state=None, progress=False):
        self.orders = orders
        self.method = method
        self.delta = delta
        self.batch_size = batch_size
        self.control_variates = control_variates
        self.prior_shape = prior_shape
        self.prior_rate = prior_rate
        self.n_draws = n_draws
        self.n_warmup = n_warmup
        self.n_chains = n_chains
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ data

    def _validate_series(self, X, *, reset):
        check_numeric(X, "X")
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2, reset=reset)
        orders = self.orders_ if not reset else check_orders(self.orders)
        max_order = int(orders[-1])
        if X.shape[0] < max_order + 2:
            raise ValueError(
                f"orders reach {max_order}, so each series in X needs at least {max_order + 2} "
                f"samples (two likelihood terms after the first {max_order} lags); got "
                f"{X.shape[0]}"
            )
        return X, orders

    # ------------------------------------------------------------------ fit

    @keeps_state_on_interrupt
    def fit(self, X, y=None):
        """Sample the posterior over orders and parameters given the return series ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_series)
            Finite returns (e.g. 100 × daily log returns), one series per column; each column
            is demeaned.
        y : None
            Ignored.

        Returns
        -------
        self : ARCHOrderSelector

        Raises
        ------
        ValueError
            For non-finite returns, negative or repeated orders, orders beyond the series
            length, a constant series, or returns whose squares overflow float64.

        Warns
        -----
        sksubsample.diagnostics.ConvergenceWarning
            When the chains have not mixed (R-hat > 1.01 or bulk ESS < 100 per chain).
        """
        self._validate_params()
        X, orders = self._validate_series(X, reset=True)
        self.mean_, r, scale = centred_series(X)
        warn_if_levels(X)
        # The model is fitted to the returns in units of their standard deviation, so that the
        # prior of α_0 means the same whatever the units of X (percent, basis points, or
        # fractions); α_0 is reported back in the units of X.
        self.scale_ = float(np.sqrt(np.mean(scale)))
        r = r / self.scale_
        self.orders_ = orders
        max_order = int(orders[-1])
        y_terms, z = arch_design(r, max_order)
        self.n_terms_ = int(y_terms.size)
        targets = [ARCHTarget(y_terms, z, q, self.prior_shape, self.prior_rate) for q in orders]
        var = 1.0
        fits = []
        for q, target in zip(orders, targets, strict=True):
            fits.append(laplace_fit(target, starting_point(q, var)))
        model = build_model(targets, fits, method=self.method, delta=self.delta,
                            batch_size=int(self.batch_size),
                            control_variates=self.control_variates)
        names = [f"order={q}" for q in orders]
        for q in orders:
            names += [f"alpha_{i}[q={q}]" for i in range(q + 1)] + [f"nu[q={q}]"]
        setup = len(orders) * self.n_terms_
        adaptations = run_chains(adapt_chain, (model, int(self.n_warmup)), n_chains=self.n_chains,
                                 random_state=adaptation_seed(self.random_state),
                                 n_jobs=self.n_jobs, progress=self.progress,
                                 desc=f"{type(self).__name__} warm-up",
                                 steps_per_chain=self.n_warmup)
        # One adjusted prior and one step size per order for every chain: averaging the chains'
        # adaptations reduces their noise, and common values give the chains one target.
        log_pi = np.mean([a.log_adjusted_prior for a in adaptations], axis=0)
        log_pi -= special.logsumexp(log_pi)
        log_eps = np.mean([a.log_step_size for a in adaptations], axis=0)
        trace = np.stack([a.trace_log_adjusted_prior for a in adaptations])
        self.adaptation_log_posterior_ = -trace - special.logsumexp(-trace, axis=2,
                                                                    keepdims=True)
        self.adaptation_n_evaluations_ = np.stack([a.trace_evaluations for a in adaptations])
        warmup_evaluations = sum(a.n_evaluations for a in adaptations)
        self.adjusted_log_prior_ = log_pi
        self._log_step_size = log_eps
        self._setup_evaluations = setup
        self._sweeps_per_chain_before = self.n_warmup + self.n_warmup // 4
        self._exact_per_sweep = model.exact_evaluations_per_sweep()
        self.map_ = {int(q): self._natural_units(np.logaddexp(0.0, fit.mean))
                     for q, fit in zip(orders, fits, strict=True)}
        log_ev = np.array([f.log_evidence for f in fits])
        self.laplace_log_evidence_ = log_ev - log_ev.max()
        try:
            self._sample(sample_chain, (model, log_pi, log_eps), names=names,
                         n_data=model.exact_evaluations_per_sweep(),
                         n_setup_evaluations=setup + warmup_evaluations,
                         continue_fn=continue_chain, data=(targets, fits, model, y_terms),
                         caller_depth=2)
        finally:  # (also for draws kept by Ctrl-C, which sample_more continues)
            self._set_names()
        return self

    def _set_names(self):
        max_order = int(self.orders_[-1])
        self.diagnostic_names_ = self.posterior_names_
        self.posterior_names_ = np.array(
            ["order", *[f"alpha_{i}" for i in range(max_order + 1)], "nu"], dtype=object)

    def sample_more(self, n_draws):
        """Continue every chain by ``n_draws`` sweeps at the same fixed ``π̃`` and step sizes.

        See :meth:`sksubsample.MCMCEstimator.sample_more`; the posterior over the orders, the
        evidences, the parameter draws and the diagnostics are updated.

        Parameters
        ----------
        n_draws : int >= 1
            Further sweeps per chain, one draw each.

        Returns
        -------
        self
        """
        if not getattr(self, "interrupted_", False):  # (Ctrl-C may have left no draw yet)
            check_is_fitted(self)
        # The diagnostics of the chains are over their full state (diagnostic_names_).
        self.posterior_names_ = self.diagnostic_names_
        try:
            super().sample_more(n_draws)
        finally:
            self._set_names()
        return self

    def _after_sampling(self):
        orders = self.orders_
        n_orders = orders.size
        max_order = int(orders[-1])
        draws = self._draws
        q_idx = self._stats["order"]
        n_chains, n_draws = q_idx.shape
        self.fraction_data_touched_ = (self.n_evaluations_ - self._setup_evaluations) / (
            self._exact_per_sweep * n_chains * (self._sweeps_per_chain_before + n_draws))
        self.n_updates_ = 2 * q_idx.size
        self.n_raced_ = int(self._stats["n_raced"].sum())
        self.n_finished_exactly_ = int(self._stats["n_finished_exactly"].sum())
        self.n_guarded_ = int(self._stats["n_guarded"].sum())
        check_racing_guard(self.n_guarded_, self.n_raced_ + self.n_finished_exactly_)
        log_w = -self._stats["log_adjusted_prior"]
        # Per chain, p(q | r) ∝ Σ_i 1{q_i = q} / π̃_q (Carlin & Chib 1995, Section 3).
        log_w = log_w - special.logsumexp(log_w, axis=1, keepdims=True) - math.log(n_chains)
        self.sample_weights_ = np.exp(log_w)
        # Log space throughout: evidences of poor orders lie thousands of nats below the best.
        freq = np.array([(q_idx == j).mean() for j in range(n_orders)])
        with np.errstate(divide="ignore"):
            log_post = np.log(freq) - self.adjusted_log_prior_
        log_post -= special.logsumexp(log_post)
        self.order_posterior_ = np.exp(log_post)
        self.log_evidence_ = log_post - log_post.max()
        self.order_ = int(orders[int(np.argmax(log_post))])
        self.order_samples_ = orders[q_idx]
        self._monte_carlo_errors(freq, draws[..., :n_orders])
        # Parameters of the selected order at each draw, padded with α_i = 0 beyond q.
        padded = np.zeros((n_chains, n_draws, max_order + 2))
        offsets = np.cumsum([0, *[q + 2 for q in orders]]) + n_orders
        self.params_samples_, self.params_mean_ = {}, {}
        for j, q in enumerate(orders):
            cols = np.arange(offsets[j], offsets[j + 1])
            mask = q_idx == j
            selected = draws[..., cols][mask]
            block = np.zeros((selected.shape[0], max_order + 2))
            block[:, _natural_columns(q, max_order)] = selected
            padded[mask] = block
            self.params_samples_[int(q)] = selected
            self.params_mean_[int(q)] = (selected.mean(axis=0) if selected.shape[0]
                                         else np.full(q + 2, np.nan))
        self._state_draws = self._natural_units(padded)
        for q in self.params_samples_:
            self.params_samples_[q] = self._natural_units(self.params_samples_[q])
            self.params_mean_[q] = self._natural_units(self.params_mean_[q])
        self._resampled = _systematic_resample(self.sample_weights_)
        self.step_size_ = np.tile(np.exp(self._log_step_size), (n_chains, 1))
        mean = self.params_mean_[self.order_]
        self.alpha_, self.nu_ = mean[:-1].copy(), float(mean[-1])

    def _natural_units(self, params):
        """``(α_0, …, ν)`` arrays (last axis) with ``α_0`` from units of the series' variance
        back to the units of ``X`` (the other parameters have no units)."""
        params = np.array(params, dtype=np.float64)
        params[..., 0] *= self.scale_**2
        return params

    def _monte_carlo_errors(self, freq, indicators):
        """Delta-method standard errors of ``order_posterior_`` and ``log_evidence_``.

        The visit frequency ``f_j`` of order ``j`` is the mean of its indicator, with variance
        ``f_j (1 - f_j) / ESS_j``; the indicators of two orders have covariance ``-f_j f_k``
        per draw, scaled by ``1 / sqrt(ESS_j ESS_k)``. ``p_j = (f_j / π̃_j) / Σ_k f_k / π̃_k``
        and ``log p_j - log p_b = log f_j - log f_b + const`` then follow by the delta method.
        """
        n_orders = freq.size
        ess = np.full(n_orders, np.nan)  # fewer than 4 draws: no autocorrelation estimate
        if indicators.shape[1] >= 4:
            with np.errstate(invalid="ignore", divide="ignore"):
                ess = np.asarray(effective_sample_size(indicators, method="mean"), dtype=float)
        ess = np.where(np.isfinite(ess) & (ess > 0), ess, indicators.shape[0]
                       * indicators.shape[1])
        self.order_ess_ = ess
        root = np.sqrt(np.outer(ess, ess))
        cov_f = (np.diag(freq) - np.outer(freq, freq)) / root
        p = self.order_posterior_
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(freq > 0, p / np.where(freq > 0, freq, 1.0), 0.0)  # ∝ 1 / π̃_k
        jac = (np.eye(n_orders) - p[:, None]) * a[None, :]
        self.order_posterior_se_ = np.sqrt(np.maximum(np.diag(jac @ cov_f @ jac.T), 0.0))
        best = int(np.argmax(p))
        with np.errstate(divide="ignore", invalid="ignore"):
            var_log = (1.0 - freq) / (freq * ess)
            cov_best = -1.0 / np.sqrt(ess * ess[best])
            var = var_log + var_log[best] - 2.0 * cov_best
        var[best] = 0.0
        self.log_evidence_se_ = np.where(freq > 0, np.sqrt(np.maximum(var, 0.0)), np.nan)

    # ------------------------------------------------------------------ posterior hooks

    def _posterior_variables(self):
        """The draws resampled by their importance weights (:func:`_systematic_resample`), so
        that plain averages over them, as ArviZ takes them, estimate ``p(q, α, ν | r)``."""
        max_order = int(self.orders_[-1])
        state = self._resampled_state()
        return {"order": self._resampled_orders(),
                "alpha": state[..., : max_order + 1],
                "nu": state[..., max_order + 1]}

    def _resampled_orders(self):
        return np.take_along_axis(self.order_samples_, self._resampled, axis=1)

    def _resampled_state(self):
        return np.take_along_axis(self._state_draws, self._resampled[..., None], axis=1)

    # hooks of to_inference_data (the training terms, kept in memory with the sampler)
    def _terms(self):
        _, _, model, y_terms = self._fitted_sampler("the training series").data
        return model, y_terms

    def _n_observations(self):
        return int(self.n_terms_)

    def _observed_data(self, rows):
        _, y_terms = self._terms()
        y = y_terms if rows is None else y_terms[rows]
        return {"r": y * self.scale_}

    def _pointwise_log_likelihood(self, rows):
        """``log p(r_t | r_{t-1}, …, q, α, ν)`` of the terms ``rows`` at every resampled draw,
        in the units of ``X``."""
        model, _ = self._terms()
        y2 = model.y2 if rows is None else model.y2[rows]
        z = model.z if rows is None else model.z[rows]
        state = self._resampled_state()
        n_chains, n_draws = state.shape[:2]
        max_order = int(self.orders_[-1])
        flat = state.reshape(n_chains * n_draws, -1)
        alphas = np.ascontiguousarray(flat[:, : max_order + 1])
        alphas[:, 0] /= self.scale_**2  # the kernels read the standardised terms
        out = np.empty((flat.shape[0], y2.size))
        kernels.pointwise_log_density(np.ascontiguousarray(y2), np.ascontiguousarray(z),
                                      alphas, np.ascontiguousarray(flat[:, max_order + 1]), out)
        out -= math.log(self.scale_)  # the density of r = scale · standardised r
        return {"r": out.reshape(n_chains, n_draws, y2.size)}

    def _posterior_dims(self):
        max_order = int(self.orders_[-1])
        return {"alpha": ["lag"]}, {"lag": list(range(max_order + 1))}

    def sample_posterior(self, n_samples=None, random_state=None):
        """Draws of ``(q, α_0, …, α_{max(orders)}, ν)`` from the posterior.

        The chains sample the adjusted posterior; draws are resampled (with replacement) with
        the importance weights ``sample_weights_`` so that ``q`` follows ``p(q | r)`` and the
        parameters ``p(α, ν | q, r)``. ``α_i`` is 0 for ``i > q``.

        Parameters
        ----------
        n_samples : int >= 1 or None, default None
            ``None`` returns ``n_chains × n_draws`` draws.
        random_state : None, int or numpy.random.Generator, default None

        Returns
        -------
        ndarray of shape (n_samples, max(orders) + 3)
            Columns as ``posterior_names_``.
        """
        check_is_fitted(self)
        pool_q = self.order_samples_.reshape(-1).astype(np.float64)
        pool = np.column_stack([pool_q, self._state_draws.reshape(pool_q.size, -1)])
        n = pool.shape[0] if n_samples is None else check_int(n_samples, "n_samples", low=1)
        rng = as_generator(random_state)
        w = self.sample_weights_.reshape(-1)
        return pool[rng.choice(pool.shape[0], size=n, replace=True, p=w / w.sum())]

    # ------------------------------------------------------------------ scoring

    def score(self, X, y=None):
        """Mean one-step-ahead log predictive density of the series ``X``.

        For every term ``t = max(orders), …, n_samples - 1`` of every series (demeaned with
        ``mean_``), ``log p(r_t | r_{t-1}, …, fitted data)`` averages the Student-t density over
        the weighted posterior draws of ``(q, α, ν)`` (log-mean-exp); the score is the mean over
        terms, so higher is better and folds of ``TimeSeriesSplit`` are comparable.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_series)
        y : None
            Ignored.

        Returns
        -------
        float
        """
        check_is_fitted(self)
        X, orders = self._validate_series(X, reset=False)
        r = (X - self.mean_) / self.scale_
        max_order = int(orders[-1])
        y_terms, z = arch_design(r, max_order)
        log_w = np.log(self.sample_weights_.reshape(-1))
        state = self._state_draws.reshape(log_w.size, -1).copy()
        state[:, 0] /= self.scale_**2
        keep = np.isfinite(log_w)
        out = np.empty(y_terms.size)
        kernels.log_predictive(np.ascontiguousarray(y_terms**2), np.ascontiguousarray(z),
                               np.ascontiguousarray(state[keep, : max_order + 1]),
                               np.ascontiguousarray(state[keep, max_order + 1]),
                               np.ascontiguousarray(log_w[keep]), out)
        return float(out.mean()) - math.log(self.scale_)
