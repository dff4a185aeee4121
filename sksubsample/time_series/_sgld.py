"""The settings of the SGLD-type proposal of the ARCH sampler's MH step.

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

from ..algorithms import LANGEVIN

__all__ = ["SGLD_TARGET_ACCEPT", "sgld_step_size"]

#: Acceptance rates the warm-up aims at under a Metropolis-type and a Barker-type test: those of
#: the Langevin proposal (MALA's optimal 0.574 under Metropolis, Roberts & Rosenthal 2001).
SGLD_TARGET_ACCEPT = LANGEVIN.target_accept

#: Initial step size of the warm-up for a ``dim``-dimensional target (MALA's scaling).
sgld_step_size = LANGEVIN.default_step_size
