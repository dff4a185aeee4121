"""Checks of a fitted :class:`~sksubsample.time_series.ARCHOrderSelector` that share nothing
with its chains but the model: importance-sampling evidence and the racing steps' empirical
error."""

from __future__ import annotations

import math

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._utils import as_generator, check_int, check_positive
from ._arch_target import inverse_softplus
from ._chains import race_checks, reward_spreads
from ._evidence import importance_log_evidence

__all__ = ["IndependentChecks"]


class IndependentChecks:
    """The methods of :class:`~sksubsample.time_series.ARCHOrderSelector` that check its
    posterior (mixed into the estimator; they read its fitted attributes)."""

    def importance_log_evidence(self, n_draws=4000, *, proposal="gaussian", df=5.0, scale=1.0,
                                random_state=None):
        """Importance-sampling estimates of every order's log evidence, independent of the chains.

        ``p(r | q) = E_g[p(r | x, q) p0(x) / g(x)]`` with the proposal ``g`` built from the
        order's Laplace approximation (the pseudo-prior of the sampler): the Gaussian itself or
        a multivariate t with ``df`` degrees of freedom, with its covariance scaled by
        ``scale²``. Two proposals that agree within their standard errors check each other;
        the estimates check ``log_evidence_`` without sharing anything with the MCMC but the
        model and the Laplace fits.

        Parameters
        ----------
        n_draws : int >= 2, default 4000
            Proposal draws per order.
        proposal : {"gaussian", "student"}, default "gaussian"
        df, scale : float > 0, default 5.0, 1.0
        random_state : None, int or numpy.random.Generator, default None

        Returns
        -------
        dict
            ``log_evidence`` (absolute ``log p(r | q)`` per order), ``standard_error`` (delta
            method) and ``ess`` (Kish effective sample size of the weights), arrays of shape
            (n_orders,).

        Raises
        ------
        RuntimeError
            After unpickling (the training data is not pickled; fit again).
        """
        check_is_fitted(self)
        targets, fits, _, _ = self._fitted_sampler("importance_log_evidence").data
        check_positive(scale, "scale")
        rng = as_generator(random_state)
        estimates = [importance_log_evidence(t, f.mean, f.cov, n_draws=n_draws,
                                             proposal=proposal, df=df, scale=scale,
                                             random_state=rng)
                     for t, f in zip(targets, fits, strict=True)]
        out = {key: np.array([getattr(e, key) for e in estimates])
               for key in ("log_evidence", "standard_error", "ess")}
        # The chains see the standardised terms; in the units of X each term's density carries
        # the Jacobian 1 / scale_.
        out["log_evidence"] = out["log_evidence"] - self.n_terms_ * math.log(self.scale_)
        return out

    def race_diagnostics(self, n_states=500, random_state=None):
        """Empirical error of the racing steps at states of the fitted chains.

        At ``n_states`` states drawn from the sampling chains (every order's parameters), the
        racing Gibbs draw of ``q`` is compared with the exact draw made with the same Gumbel
        perturbations, and, for the order drawn, the racing MH decision on one SGLD proposal
        with the exact decision on the same proposal and uniform. Each race errs with
        probability at most ``delta`` (Prop. 1 and Prop. 3 of Chen & Ghahramani 2016, under
        the normal approximation of the bound); the variance over terms of the Gibbs step's
        factors, raw and as control-variate residuals, is reported at the same states.

        Parameters
        ----------
        n_states : int >= 1, default 500
        random_state : None, int or numpy.random.Generator, default None

        Returns
        -------
        dict
            ``n_states``; ``gibbs_errors`` (racing draws that differ from the exact draw);
            ``mh_tests`` (proposals that reached the test) and ``mh_errors``;
            ``gibbs_fraction`` (mean share of the ``n_orders × N`` factors a racing Gibbs draw
            evaluated); ``per_order_variance_raw``, ``per_order_variance_cv`` (median over
            states, per order) and ``pairwise_variance_raw``, ``pairwise_variance_cv`` (median
            over states and pairs of orders) of the factors' variance over terms.
        """
        check_is_fitted(self)
        _, _, model, _ = self._fitted_sampler("race_diagnostics").data
        n_states = check_int(n_states, "n_states", low=1)
        rng = as_generator(random_state)
        if self.method == "exact":
            model = model._replace(racing=True, gibbs_cv=bool(self.control_variates),
                                   mh_cv=bool(self.control_variates))
        n_orders = self.orders_.size
        pool = self._draws.reshape(-1, self._draws.shape[2])[:, n_orders:]
        rows = pool[rng.choice(pool.shape[0], size=n_states, replace=True)]
        states = np.zeros((n_states, *model.mean.shape))
        col = 0
        for j, d in enumerate(model.dims):
            states[:, j, :d] = inverse_softplus(rows[:, col:col + d])
            col += d
        seeds = rng.integers(0, 2**63 - 1, size=n_states)
        checks = race_checks(model, states, np.ascontiguousarray(self.adjusted_log_prior_),
                             np.ascontiguousarray(self._log_step_size), seeds)
        tested = checks[:, 2] >= 0
        spreads = reward_spreads(model, states[: min(n_states, 50)])
        return {
            "n_states": n_states,
            "gibbs_errors": int(np.sum(checks[:, 0] != checks[:, 1])),
            "mh_tests": int(tested.sum()),
            "mh_errors": int(np.sum(checks[tested, 2] != checks[tested, 3])),
            "gibbs_fraction": float(checks[:, 4].mean() / (n_orders * self.n_terms_)),
            "per_order_variance_raw": np.median(spreads["per_order_raw"], axis=0),
            "per_order_variance_cv": np.median(spreads["per_order_cv"], axis=0),
            "pairwise_variance_raw": float(np.median(spreads["pairwise_raw"]))
            if n_orders > 1 else math.nan,
            "pairwise_variance_cv": float(np.median(spreads["pairwise_cv"]))
            if n_orders > 1 else math.nan,
        }
