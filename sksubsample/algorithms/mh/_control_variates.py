"""Second-order Taylor control variates for subsampled log-likelihood sums.

Around a reference point θ̂ (typically the MAP) each per-datum log-likelihood
``ℓ_i(θ) = log p(x_i | θ)`` is approximated by its Taylor proxy

``h_i(θ) = ℓ_i(θ̂) + g_iᵀ a + ½ aᵀ H_i a``,  ``a = θ - θ̂``,

with ``g_i`` and ``H_i`` the gradient and Hessian of ``ℓ_i`` at θ̂. The proxies' sum over all N
data is a quadratic in θ whose coefficients ``G = sum_i g_i`` and ``H = sum_i H_i`` are computed
once, so ``sum_i [h_i(θ') - h_i(θ)]`` costs O(d²) per MH step and no data. An acceptance test then
only needs the residual terms ``r_i = [ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]``, whose spread is
O(|θ - θ̂|³) instead of O(|θ' - θ|): this is what lets a minibatch test work at temperature 1
(Chen & Ghahramani 2016, Section 3.4, Eq. 11; Bardenet et al. 2017, Section 7.2 "proxies";
NumPyro's HMCECS ``taylor_proxy`` uses the same expansion).

Target protocol
---------------
A target usable with control variates exposes

* ``n_data`` (int) and ``loglik_terms(theta, idx) -> (len(idx),)``;
* ``grad_terms(theta, idx) -> (len(idx), d)``: per-datum gradients of ``ℓ_i``;
* ``hess_terms(theta, idx) -> (len(idx), d, d)``: per-datum Hessians of ``ℓ_i``;
* optionally ``taylor_diff_terms(reference, idx, a_old, a_new) -> (len(idx),)`` returning
  ``g_iᵀ (a_new - a_old) + ½ (a_newᵀ H_i a_new - a_oldᵀ H_i a_old)`` directly. Models with
  structured Hessians (a GLM has ``H_i = w_i x_i x_iᵀ``) implement it in O(d) per datum instead
  of materialising ``(len(idx), d, d)`` arrays; when absent it is computed from ``grad_terms``
  and ``hess_terms``;
* optionally ``taylor_expansion(reference)`` returning an object with ``loglik_sum``,
  ``grad_sum``, ``hess_sum`` and the methods ``diff_terms(a, a_new, idx)`` and
  ``residual_terms(theta, theta_new, idx)``: a model with structure (a GLM) sums the
  coefficients without ``(N, d, d)`` arrays and computes a minibatch's residuals with its rows
  gathered once (:class:`sksubsample.algorithms.GLMTarget` is the example). The expansion may
  go beyond second order: it then also provides ``sum_diff(a, a_new)``, the exact sum of its
  proxies' differences, and its ``diff_terms`` and ``residual_terms`` use the same proxies.
"""

from __future__ import annotations

import numpy as np

from ..._utils import check_int, check_point

__all__ = ["TaylorProxy", "check_derivative_target", "check_proxy"]


def check_derivative_target(target):
    """Raise ``TypeError`` unless ``target`` follows the control-variate protocol."""
    missing = [
        name
        for name in ("n_data", "loglik_terms", "grad_terms", "hess_terms")
        if not hasattr(target, name)
    ]
    if missing:
        raise TypeError(
            "control variates need a target with n_data, loglik_terms(theta, idx), "
            f"grad_terms(theta, idx) and hess_terms(theta, idx); missing: {missing}"
        )


def check_proxy(proxy, name="proxy"):
    """``proxy`` when it is None or a proxy (a :class:`TaylorProxy`, or a model's own control
    variates with the same ``reference`` expansion point); a ``TypeError`` naming ``name``
    otherwise (before any other of its attributes is read)."""
    if proxy is not None and not isinstance(getattr(proxy, "reference", None), np.ndarray):
        raise TypeError(f"{name} must be a TaylorProxy (or control variates with a reference "
                        f"point) or None, got {type(proxy).__name__}")
    return proxy


class TaylorProxy:
    """Second-order Taylor proxies ``h_i`` of the per-datum log-likelihoods around ``reference``.

    Parameters
    ----------
    target : object
        A target following the module's protocol (``n_data``, ``loglik_terms``, ``grad_terms``,
        ``hess_terms``, optionally ``taylor_diff_terms``).
    reference : array_like of shape (d,)
        The expansion point θ̂ (the MAP makes the residuals smallest where the posterior is).
    chunk_size : int, default 65536
        Data processed per call when summing the gradients and Hessians once over all N
        (bounds the memory of the ``(chunk, d, d)`` Hessian blocks).
    expansion_options : dict, optional
        Keyword arguments of ``target.taylor_expansion`` (e.g. ``order`` or ``n_steps`` of
        :meth:`sksubsample.algorithms.GLMTarget.taylor_expansion`).

    Attributes
    ----------
    reference : ndarray of shape (d,)
    loglik_sum : float
        ``sum_i ℓ_i(θ̂)``.
    grad_sum : ndarray of shape (d,)
        ``G = sum_i g_i``.
    hess_sum : ndarray of shape (d, d)
        ``H = sum_i H_i`` (symmetrised).
    n_setup_evaluations : int
        Data terms touched once to build the sums (N).
    expansion : object or None
        The target's own ``taylor_expansion(reference)`` when it has one (its residuals,
        bounds and strata are then the proxy's), else None.

    References
    ----------
    Chen & Ghahramani (2016), Section 3.4, Eq. 11; Bardenet, Doucet & Holmes (2017), "On Markov
    chain Monte Carlo methods for tall data", Section 7.2.

    Examples
    --------
    >>> import numpy as np
    >>> class Gauss:
    ...     def __init__(self, x): self.x, self.n_data = x, x.size
    ...     def loglik_terms(self, th, idx): return -0.5 * (self.x[idx] - th[0]) ** 2
    ...     def grad_terms(self, th, idx): return (self.x[idx] - th[0])[:, None]
    ...     def hess_terms(self, th, idx): return -np.ones((len(idx), 1, 1))
    >>> proxy = TaylorProxy(Gauss(np.arange(5.0)), [2.0])
    >>> proxy.grad_sum, proxy.hess_sum
    (array([0.]), array([[-5.]]))
    """

    def __init__(self, target, reference, *, chunk_size=65536, expansion_options=None):
        check_derivative_target(target)
        chunk_size = check_int(chunk_size, "chunk_size", low=1)
        reference = check_point(reference, "reference")
        self.target = target
        self.reference = reference
        self.expansion = None
        if hasattr(target, "taylor_expansion"):
            self.expansion = target.taylor_expansion(reference, **(expansion_options or {}))
            sums = (self.expansion.loglik_sum, np.asarray(self.expansion.grad_sum),
                    np.asarray(self.expansion.hess_sum))
        else:
            sums = self._sum_terms(target, reference, chunk_size)
        loglik_sum, grad_sum, hess_sum = sums
        d = reference.size
        if grad_sum.shape != (d,) or hess_sum.shape != (d, d):
            raise ValueError(
                f"the proxies' gradient and Hessian sums must have shapes ({d},) and ({d}, {d}), "
                f"got {grad_sum.shape} and {hess_sum.shape}"
            )
        if not (np.isfinite(loglik_sum) and np.isfinite(grad_sum).all()
                and np.isfinite(hess_sum).all()):
            raise ValueError("log-likelihood, gradient or Hessian terms are not finite at "
                             "the reference point")
        self.loglik_sum = float(loglik_sum)
        self.grad_sum = grad_sum
        self.hess_sum = 0.5 * (hess_sum + hess_sum.T)
        self.n_setup_evaluations = int(target.n_data)
        self._fast = getattr(target, "taylor_diff_terms", None)

    @staticmethod
    def _sum_terms(target, reference, chunk_size):
        """``(sum ℓ_i, sum g_i, sum H_i)`` at the reference, in chunks of data."""
        d = reference.size
        n = int(target.n_data)
        loglik_sum = 0.0
        grad_sum = np.zeros(d)
        hess_sum = np.zeros((d, d))
        for start in range(0, n, chunk_size):
            idx = np.arange(start, min(n, start + chunk_size))
            g = np.asarray(target.grad_terms(reference, idx), dtype=np.float64)
            h = np.asarray(target.hess_terms(reference, idx), dtype=np.float64)
            if g.shape != (idx.size, d) or h.shape != (idx.size, d, d):
                raise ValueError(
                    f"grad_terms/hess_terms must return shapes ({idx.size}, {d}) and "
                    f"({idx.size}, {d}, {d}), got {g.shape} and {h.shape}"
                )
            loglik_sum += float(np.sum(target.loglik_terms(reference, idx)))
            grad_sum += g.sum(axis=0)
            hess_sum += h.sum(axis=0)
        return loglik_sum, grad_sum, hess_sum

    @property
    def n_data(self):
        return int(self.target.n_data)

    def _offsets(self, theta, theta_new):
        a = np.asarray(theta, dtype=np.float64) - self.reference
        a_new = np.asarray(theta_new, dtype=np.float64) - self.reference
        return a, a_new

    def sum_value(self, theta):
        """``sum_i h_i(θ)`` in O(d²).

        Parameters
        ----------
        theta : array_like of shape (d,)
            The point θ.

        Returns
        -------
        float
        """
        a = np.asarray(theta, dtype=np.float64) - self.reference
        return self.loglik_sum + float(self.grad_sum @ a) + 0.5 * float(a @ self.hess_sum @ a)

    def sum_diff(self, theta, theta_new):
        """``sum_i [h_i(θ') - h_i(θ)]`` exactly, in O(d²) and without data.

        The target expansion's own sum when it provides one (as proxies beyond the second
        order do).

        Parameters
        ----------
        theta : array_like of shape (d,)
            The current state θ.
        theta_new : array_like of shape (d,)
            The proposal θ'.

        Returns
        -------
        float
        """
        a, a_new = self._offsets(theta, theta_new)
        if hasattr(self.expansion, "sum_diff"):
            return float(self.expansion.sum_diff(a, a_new))
        return float(self.grad_sum @ (a_new - a)) + 0.5 * float(
            (a_new - a) @ self.hess_sum @ (a_new + a)
        )

    def grad(self, theta):
        """Gradient of ``sum_i h_i`` at θ: ``G + H (θ - θ̂)``, the proxy of the full gradient.

        Parameters
        ----------
        theta : array_like of shape (d,)
            The point θ.

        Returns
        -------
        ndarray of shape (d,)
        """
        a = np.asarray(theta, dtype=np.float64) - self.reference
        return self.grad_sum + self.hess_sum @ a

    def diff_terms(self, theta, theta_new, idx):
        """Per-datum ``h_i(θ') - h_i(θ)`` for the indices ``idx``.

        Parameters
        ----------
        theta : array_like of shape (d,)
            The current state θ.
        theta_new : array_like of shape (d,)
            The proposal θ'.
        idx : ndarray of int of shape (n_idx,)
            Indices of distinct data in ``range(n_data)``.

        Returns
        -------
        ndarray of shape (n_idx,)
        """
        a, a_new = self._offsets(theta, theta_new)
        if self.expansion is not None:
            return np.asarray(self.expansion.diff_terms(a, a_new, idx), dtype=np.float64)
        if self._fast is not None:
            return np.asarray(self._fast(self.reference, idx, a, a_new), dtype=np.float64)
        g = np.asarray(self.target.grad_terms(self.reference, idx), dtype=np.float64)
        h = np.asarray(self.target.hess_terms(self.reference, idx), dtype=np.float64)
        # Both quadratic forms explicitly: (a'-a)ᵀH(a'+a) would need H_i symmetric.
        quad = np.einsum("nij,i,j->n", h, a_new, a_new) - np.einsum("nij,i,j->n", h, a, a)
        return g @ (a_new - a) + 0.5 * quad

    def residual_terms(self, theta, theta_new, idx):
        """Residuals ``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` for ``idx``.

        Parameters
        ----------
        theta : array_like of shape (d,)
            The current state θ.
        theta_new : array_like of shape (d,)
            The proposal θ'.
        idx : ndarray of int of shape (n_idx,)
            Indices of distinct data in ``range(n_data)``.

        Returns
        -------
        ndarray of shape (n_idx,)
        """
        if self.expansion is not None:
            return np.asarray(self.expansion.residual_terms(theta, theta_new, idx),
                              dtype=np.float64)
        target = self.target
        raw = np.asarray(target.loglik_terms(theta_new, idx), dtype=np.float64) - np.asarray(
            target.loglik_terms(theta, idx), dtype=np.float64
        )
        return raw - self.diff_terms(theta, theta_new, idx)

    @property
    def strata(self):
        """The target expansion's :class:`Strata` (rows summed exactly / rows subsampled) that
        :meth:`residual_variance_bound` refers to, or None (all rows subsampled)."""
        return getattr(self.expansion, "strata", None)

    def residual_variance_bound(self, theta, theta_new):
        """A bound ``V >= (1/N_s) sum_{i sampled} r_i²`` on the residuals, without data.

        The residuals are those of :meth:`residual_terms` over the sampled rows (all N, or
        those of :attr:`strata`); the bound costs O(d²) and is provided by the target's
        expansion.

        Parameters
        ----------
        theta : array_like of shape (d,)
            The current state θ.
        theta_new : array_like of shape (d,)
            The proposal θ'.

        Returns
        -------
        float or None
            None when the target's expansion provides no bound.
        """
        bound = getattr(self.expansion, "residual_variance_bound", None)
        if bound is None:
            return None
        a, a_new = (np.asarray(t, dtype=np.float64) for t in (theta, theta_new))
        return bound(a, a_new)

    def laplace_precision(self, temperature=1.0, prior_hessian=None):
        """``-(H / T + prior Hessian)``: the Laplace precision at θ̂ (for a preconditioner).

        Parameters
        ----------
        temperature : float > 0, default 1.0
            The temperature T dividing the log-likelihood.
        prior_hessian : array_like of shape (d, d) or None, default None
            Hessian of the log prior at θ̂; None leaves the prior out.

        Returns
        -------
        ndarray of shape (d, d)
            Symmetrised.
        """
        precision = -self.hess_sum / temperature
        if prior_hessian is not None:
            precision = precision - np.asarray(prior_hessian, dtype=np.float64)
        return 0.5 * (precision + precision.T)

    def __repr__(self):
        d = self.reference.size
        return f"TaylorProxy(n_data={self.n_data}, d={d})"

