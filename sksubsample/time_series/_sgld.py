"""A stochastic-gradient Langevin (SGLD-type) proposal for the MH kernel.

The proposal is preconditioned Langevin with a minibatch estimate ``ĝ_S`` of the gradient of
the log-posterior (Welling & Teh 2011):

``θ' = θ + (ε²/2) M ĝ_S(θ) + ε L ξ``,   ``M = L Lᵀ``, ``ξ ~ N(0, I)``.

The minibatch ``S`` is drawn independently of the state and kept as auxiliary data of the move,
and the reverse density ``q_S(θ | θ')`` uses the gradient estimate at ``θ'`` on the *same*
minibatch. For each fixed ``S`` this is a proper MH proposal with an exactly computable ratio, so
an MH correction makes every ``S``-kernel leave the posterior invariant, and so does their
mixture over ``S``: the stochastic gradient only changes the acceptance rate, never the
stationary distribution (with an exact test; a racing test adds its own bounded error). This is
the "SGLD proposal corrected by an MH test" of Chen & Ghahramani (2016), Appendix C.2.

A variance-reduced gradient (control variates, Baker et al. 2019) makes large steps accepted:
``ĝ_S(θ) = ∇ log p0(θ) + ∇ Σ_i h_i(θ) + (N/|S|) Σ_{i∈S} [∇ℓ_i(θ) - ∇h_i(θ)]`` with Taylor
proxies ``h_i``.
"""

from __future__ import annotations

from ..algorithms.mh._proposals import Proposal, _langevin_step_size

__all__ = ["SGLD_TARGET_ACCEPT", "sgld_proposal", "sgld_step_size"]

#: Acceptance rates the warm-up aims at under a Metropolis-type and a Barker-type test: MALA's
#: optimal 0.574 (Roberts & Rosenthal 2001) for the former.
SGLD_TARGET_ACCEPT = (0.574, 0.4)

#: Initial step size of the warm-up for a ``dim``-dimensional target (MALA's scaling).
sgld_step_size = _langevin_step_size


def sgld_proposal(stochastic_gradient, n_data, batch_size, *, name="sgld"):
    """An SGLD-type :class:`~sksubsample.algorithms.Proposal` with an exact proposal ratio.

    Parameters
    ----------
    stochastic_gradient : callable ``stochastic_gradient(theta, idx) -> ndarray (d,)``
        An unbiased estimate of ``∇ log π(θ)`` from the data indices ``idx`` (drawn uniformly
        with replacement, ``len(idx) = batch_size``).
    n_data : int
        Number of data terms N the indices are drawn from.
    batch_size : int >= 1
        Minibatch size of the gradient estimate.
    name : str, default "sgld"

    Returns
    -------
    Proposal
        ``log_q_ratio`` evaluates the gradient estimate at ``θ'`` on the minibatch of the
        forward move (two gradient estimates per step). Warm-up aims at MALA's acceptance rate
        0.574 under a Metropolis-type test (Roberts & Rosenthal 2001).

    References
    ----------
    Welling & Teh (2011), Eq. 4; Chen & Ghahramani (2016), Appendix C.2.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(1.0, 1.0, 500)
    >>> def grad(theta, idx):  # N(θ, 1) likelihood, flat prior
    ...     return np.array([x.size * np.mean(x[idx] - theta[0])])
    >>> proposal = sgld_proposal(grad, x.size, 50)
    >>> proposal.uses_gradient, proposal.name
    (False, 'sgld')
    """
    n_data = int(n_data)
    batch_size = int(batch_size)

    def propose(rng, state, step_size, chol):
        idx = rng.integers(0, n_data, size=batch_size)
        grad = stochastic_gradient(state.theta, idx)
        xi = rng.standard_normal(state.theta.size)
        drift = (0.5 * step_size) * (chol.T @ grad)
        return state.theta + step_size * (chol @ (xi + drift)), (idx, xi, drift)

    def log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
        # With θ' = θ + ε L (ξ + drift): L⁻¹(θ - mean(θ')) = -ε (ξ + drift + (ε/2) Lᵀ ĝ_S(θ')),
        # so the ratio of the two Gaussian densities needs no triangular solve.
        idx, xi, drift = aux
        back = xi + drift + (0.5 * step_size) * (chol.T @ stochastic_gradient(theta_new, idx))
        return 0.5 * (float(xi @ xi) - float(back @ back))

    return Proposal(propose, log_q_ratio, False, name, sgld_step_size, SGLD_TARGET_ACCEPT)
