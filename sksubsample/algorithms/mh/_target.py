"""The subsampled-target protocol: what the MH kernels read of a model.

Everything expensive in a posterior over N data is a sum of N per-datum terms. The algorithms of
this package see a model only through a *target*: an object with the methods below. A target is
a model, not a cache: it holds data and parameters, never state keyed on which arrays it was
last called with; when two quantities share work (the log-likelihoods at θ and θ' of one
minibatch), the protocol has one method that computes both.

Required (:class:`SubsampledTarget`)
    ``n_data`` (int), ``log_prior(theta) -> float``,
    ``loglik_terms(theta, idx) -> ndarray (len(idx),)`` for an integer array ``idx`` of
    distinct data indices.

Optional, each a protocol of its own so that a kernel can state what it needs:

* :class:`SupportsLoglikRatio` - ``loglik_ratio_terms(theta, theta_new, idx)``, the per-datum
  ``ℓ_i(θ') - ℓ_i(θ)`` with the rows of ``idx`` gathered once;
* :class:`SupportsTermBound` - ``loglik_ratio_bound(theta, theta_new)``, a bound
  ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|`` for the concentration-bound tests;
* :class:`SupportsVarianceBound` - ``loglik_ratio_variance_bound(theta, theta_new)``, a bound
  ``V >= (1/N) sum_i (ℓ_i(θ') - ℓ_i(θ))²`` for the bounded Barker test;
* :class:`DifferentiableTarget` - ``grad_terms``, ``hess_terms`` (per-datum derivatives),
  ``grad_log_prior``, ``hess_log_prior``: what Taylor control variates and the Langevin
  proposal need;
* :class:`SupportsTaylorExpansion` - ``taylor_expansion(reference)``, an object that sums the
  proxies' coefficients and computes control-variate residuals in one pass per minibatch (see
  :class:`sksubsample.algorithms.TaylorProxy`); the expansion may also bound the residuals'
  second moment (``residual_variance_bound(theta, theta_new)``);
* :class:`SupportsCompiledModel` - ``compiled_model(kernel)``, the compiled pieces the target
  lends the MH driver, so that its chains run in machine code (:mod:`._step`);
* :class:`SupportsCompiledChain` - ``compiled_chain(kernel, rng, resources, steps)``, the compiled
  model and minibatch source of one chain, for a target whose data the chain reads through a
  buffer of its own (data out of core, :mod:`._minibatches`).

:class:`sksubsample.algorithms.glm.GLMTarget` implements all of them for a generalised linear
model with a Gaussian prior.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DifferentiableTarget",
    "SubsampledTarget",
    "SupportsCompiledChain",
    "SupportsCompiledModel",
    "SupportsLoglikRatio",
    "SupportsTaylorExpansion",
    "SupportsTermBound",
    "SupportsVarianceBound",
]


@runtime_checkable
class SubsampledTarget(Protocol):
    """A posterior ``p0(θ) Π_i exp(ℓ_i(θ))`` whose likelihood is a sum of ``n_data`` terms.

    A target is any object with these members: ``isinstance(obj, SubsampledTarget)`` checks
    that it has them.

    Parameters
    ----------
    *args, **kwargs
        The signature every protocol class has. A protocol is not instantiated: calling
        ``SubsampledTarget`` raises ``TypeError``.
    """

    n_data: int

    def log_prior(self, theta: np.ndarray) -> float:
        """``log p0(θ)`` (``-inf`` outside the support).

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The point θ.

        Returns
        -------
        float
        """

    def loglik_terms(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """``ℓ_i(θ)`` for ``i`` in ``idx``.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The point θ.
        idx : ndarray of int of shape (n_idx,)
            Indices of distinct data in ``range(n_data)``.

        Returns
        -------
        ndarray of shape (n_idx,)
        """


@runtime_checkable
class SupportsLoglikRatio(Protocol):
    def loglik_ratio_terms(self, theta: np.ndarray, theta_new: np.ndarray,
                           idx: np.ndarray) -> np.ndarray:
        """``ℓ_i(θ') - ℓ_i(θ)`` for ``i`` in ``idx``, with the rows of ``idx`` gathered once.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The current state θ.
        theta_new : ndarray of shape (d,)
            The proposal θ'.
        idx : ndarray of int of shape (n_idx,)
            Indices of distinct data in ``range(n_data)``.

        Returns
        -------
        ndarray of shape (n_idx,)
        """


@runtime_checkable
class SupportsTermBound(Protocol):
    def loglik_ratio_bound(self, theta: np.ndarray, theta_new: np.ndarray) -> float:
        """A bound ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|`` over all N data.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The current state θ.
        theta_new : ndarray of shape (d,)
            The proposal θ'.

        Returns
        -------
        float
        """


@runtime_checkable
class SupportsVarianceBound(Protocol):
    def loglik_ratio_variance_bound(self, theta: np.ndarray, theta_new: np.ndarray) -> float:
        """A bound ``V >= (1/N) sum_i (ℓ_i(θ') - ℓ_i(θ))²`` over all N data, without them.

        The bound is computed without touching the data; it bounds the variance of a
        minibatch estimate of the log ratio.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The current state θ.
        theta_new : ndarray of shape (d,)
            The proposal θ'.

        Returns
        -------
        float
        """


@runtime_checkable
class DifferentiableTarget(Protocol):
    def grad_terms(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Per-datum gradients ``∇ℓ_i(θ)`` for ``i`` in ``idx``.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The point θ.
        idx : ndarray of int of shape (n_idx,)
            Indices of distinct data in ``range(n_data)``.

        Returns
        -------
        ndarray of shape (n_idx, d)
        """

    def hess_terms(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Per-datum Hessians ``∇²ℓ_i(θ)`` for ``i`` in ``idx``.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The point θ.
        idx : ndarray of int of shape (n_idx,)
            Indices of distinct data in ``range(n_data)``.

        Returns
        -------
        ndarray of shape (n_idx, d, d)
        """

    def grad_log_prior(self, theta: np.ndarray) -> np.ndarray:
        """``∇ log p0(θ)``.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The point θ.

        Returns
        -------
        ndarray of shape (d,)
        """

    def hess_log_prior(self, theta: np.ndarray) -> np.ndarray:
        """``∇² log p0(θ)``.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The point θ.

        Returns
        -------
        ndarray of shape (d, d)
        """


@runtime_checkable
class SupportsTaylorExpansion(Protocol):
    def taylor_expansion(self, reference: np.ndarray):
        """The Taylor proxies of the per-datum log-likelihoods around ``reference``.

        Parameters
        ----------
        reference : ndarray of shape (d,)
            The expansion point θ̂ (e.g. the MAP).

        Returns
        -------
        object
            An object with ``loglik_sum``, ``grad_sum`` (d,), ``hess_sum`` (d, d) and the
            methods ``diff_terms(a, a_new, idx)`` and ``residual_terms(theta, theta_new, idx)``
            of the second-order Taylor proxies around ``reference``.
        """


@runtime_checkable
class SupportsCompiledModel(Protocol):
    def compiled_model(self, kernel):
        """The model the target lends the compiled MH step for ``kernel`` (an
        :class:`~sksubsample.algorithms.MHKernel` of this target), or None when it has none
        for this kernel (e.g. another proxy than its own, a family without compiled kernels).

        The model is a :class:`typing.NamedTuple` whose class implements the operations of
        :mod:`sksubsample.algorithms.mh._model` (``log_prior_at``, ``log_pi_gradient``,
        ``terms_sum``, ``proxy_sum``, ``variance_bound``) with compiled functions, for the
        kernel's temperature, control variates and gradient. Values of one class should have
        fields of the same numba types whatever the data (read-only placeholders for what a
        kernel lacks), so that the chain is compiled once per class.
        """


@runtime_checkable
class SupportsCompiledChain(Protocol):
    def compiled_chain(self, kernel, rng, resources, steps=None):
        """The compiled model and minibatch source of one chain of ``kernel``, or None.

        For a target whose chains read their rows through buffers of their own (rows fetched
        ahead from data out of core): the model (as :meth:`SupportsCompiledModel.compiled_model`
        lends it) reads the buffers, and the minibatch source (:mod:`._minibatches`) fills them
        from a stream of row draws of the chain's own.

        Parameters
        ----------
        kernel : MHKernel
            A kernel of this target.
        rng : numpy.random.Generator
            The chain's generator (the chain's row stream may draw its seed from it).
        resources : contextlib.ExitStack
            Open while the chain runs: what the model and the minibatch source call back is
            registered in it (:func:`~._callbacks.registered`).
        steps : (int, int) or None, default None
            The chain's warm-up steps and draws, when known (passed as a keyword, to a target
            whose ``compiled_chain`` takes it): the target may size the chain's
            first read of rows to them.

        Returns
        -------
        (NamedTuple, NamedTuple) or None
            The model and the minibatch source.
        """
