"""What the compiled Carlin–Chib sweep over ARCH orders reads: the :class:`ChainModel`.

The state of the chain holds the order ``q`` and a parameter vector ``x^(j)`` (softplus
coordinates) for *every* candidate order ``j`` (Carlin & Chib 1995). Given ``q`` the selected
model's parameters have their posterior, the others their pseudo-prior ``g_j`` (the Laplace
approximation of ``p(x^(j) | q = j, r)`` at the MAP, Appendix C.2), so the full conditional of
``q`` is

``p(q = j | x) ∝ π̃_j p0_j(x^(j)) Π_t p(r_t | x^(j), j) / g_j(x^(j))``    (Eq. 25)

and the chain never changes dimension. The model holds the data, the pseudo-priors, the
control variates of every order (§3.4) and the configuration of the sweep's races.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from ..algorithms.kernels import RaceConfig, read_only
from ._race_choice import choose_racing, race_parts
from ._sgld import SGLD_TARGET_ACCEPT

__all__ = ["ChainModel", "build_model", "read_only_model"]


class ChainModel(NamedTuple):
    """Everything the compiled sweep reads (arrays contiguous; one row or block per order).

    Attributes
    ----------
    y2, z : ndarray
        Squared responses ``r_t²`` (N,) and lags ``(1, r_{t-1}², …)`` (N, max_order + 1).
    q1, dims : ndarray of int
        ``q + 1`` and ``q + 2`` of each order.
    coef, loglik_ref : ndarray
        Control-variate coefficients (n_orders, N, 5) and ``ℓ_t(x̂_j)`` (n_orders, N).
    theta_ref : ndarray of shape (n_orders, D)
        Natural parameters of each order's MAP (``D = max_order + 2``, zero-padded).
    ref_sum, grad_sum, hess_sum : ndarray
        ``Σ_t ℓ_t(x̂_j)`` and the gradient and Hessian sums in ``θ`` at the MAP: the proxies'
        quadratic sum.
    mean, chol : ndarray
        Pseudo-priors ``N(mean_j, L_j L_jᵀ)`` (zero-padded).
    prior_shape, prior_rate : float
    prior_log_norm : ndarray of shape (n_orders,)
    log_adjusted_prior0 : ndarray of shape (n_orders,)
        Starting ``log π̃``: minus the Laplace log evidences, normalised.
    racing : bool
        Racing Gibbs and racing MH (else exact; with ``method="auto"`` the races may stop
        when they stop paying, set in ``gibbs_race`` and ``mh_race``).
    gibbs_cv, mh_cv : bool
        Whether the Gibbs factors and the MH terms are control-variate residuals.
    batch_size : int
        Minibatch of the SGLD gradient.
    gibbs_first, mh_first : int
        First minibatch of the Gibbs race and of the MH race.
    gibbs_whole : bool
        The Gibbs race would take every term in its first round (``sample_discrete`` then
        draws exactly).
    gibbs_race, mh_race : RaceConfig
        The configurations of the Gibbs race over the orders and of the MH race's two arms
        (pairwise Racing-Normal on one shared doubling schedule, as
        :func:`~sksubsample.algorithms.race` configures it).
    gibbs_stored : int
        Rewards per arm a pairwise Gibbs race may store.
    target_accept : float
        Acceptance rate of the warm-up's step-size adaptation.
    delta : float
        Error bound of every race.
    """

    y2: np.ndarray
    z: np.ndarray
    q1: np.ndarray
    dims: np.ndarray
    coef: np.ndarray
    loglik_ref: np.ndarray
    theta_ref: np.ndarray
    ref_sum: np.ndarray
    grad_sum: np.ndarray
    hess_sum: np.ndarray
    mean: np.ndarray
    chol: np.ndarray
    prior_shape: float
    prior_rate: float
    prior_log_norm: np.ndarray
    log_adjusted_prior0: np.ndarray
    racing: bool
    gibbs_cv: bool
    mh_cv: bool
    batch_size: int
    gibbs_first: int
    mh_first: int
    gibbs_whole: bool
    gibbs_race: RaceConfig
    gibbs_stored: int
    mh_race: RaceConfig
    target_accept: float
    delta: float

    @property
    def n_terms(self):
        return int(self.y2.size)

    @property
    def n_orders(self):
        return int(self.q1.size)

    def exact_evaluations_per_sweep(self):
        """Terms an exact sweep evaluates: every order's N in the Gibbs step, N in the MH test,
        and the SGLD gradient's two minibatches."""
        return (self.n_orders + 1) * self.n_terms + 2 * self.batch_size


def _padded(blocks, shape):
    out = np.zeros(shape)
    for j, block in enumerate(blocks):
        block = np.asarray(block)
        out[(j, *tuple(slice(0, n) for n in block.shape))] = block
    return out




def build_model(targets, laplace, *, method, delta, batch_size, control_variates):
    """The :class:`ChainModel` of the orders' targets and Laplace fits.

    Parameters
    ----------
    targets : sequence of ARCHTarget
        One per candidate order, all over the same terms.
    laplace : sequence of LaplaceFit
        Pseudo-priors and the control variates' reference points.
    method : {"auto", "racing", "exact"}
        ``"racing"`` runs every race to its end; ``"auto"`` lets a race stop when the terms it
        would still read cost more than the exact sums of its survivors (which then decide),
        at the costs of :func:`~._race_choice.choose_racing`; ``"exact"`` never races.
    delta : float in (0, 1)
        Error bound of every race.
    batch_size : int
        First minibatch of the races and minibatch of the SGLD gradient (at most N).
    control_variates : bool
        Whether the races see control-variate residuals.
    """
    first = targets[0]
    n, n_orders = first.n_data, len(targets)
    max_d = max(t.dim for t in targets)
    proxies = [t.control_variates(fit.mean) for t, fit in zip(targets, laplace, strict=True)]
    log_ev = np.array([fit.log_evidence for fit in laplace])
    log_pi0 = -(log_ev - special.logsumexp(log_ev))
    log_pi0 -= special.logsumexp(log_pi0)
    racing = method != "exact"
    parts = race_parts(n, n_orders, batch_size, delta, 0.0)
    batch_size = int(min(batch_size, n))
    model = read_only_model(ChainModel(
        first.y2, first.z, np.array([t.order + 1 for t in targets], dtype=np.int64),
        np.array([t.dim for t in targets], dtype=np.int64),
        np.ascontiguousarray(np.concatenate([p.coef for p in proxies])),
        np.ascontiguousarray(np.stack([p.loglik_ref for p in proxies])),
        _padded([p.theta_ref for p in proxies], (n_orders, max_d)),
        np.array([p.loglik_sum for p in proxies]),
        _padded([p.grad_theta for p in proxies], (n_orders, max_d)),
        _padded([p.hess_theta for p in proxies], (n_orders, max_d, max_d)),
        _padded([f.mean for f in laplace], (n_orders, max_d)),
        _padded([f.chol for f in laplace], (n_orders, max_d, max_d)),
        first.prior_shape, first.prior_rate,
        np.array([t.log_prior_norm for t in targets]), log_pi0, racing,
        bool(racing and control_variates), bool(racing and control_variates), batch_size,
        parts["gibbs_first"], parts["mh_first"], parts["gibbs_whole"], parts["gibbs_race"],
        parts["gibbs_stored"], parts["mh_race"], float(SGLD_TARGET_ACCEPT[0]), float(delta)))
    # Timed on the read-only arrays the chains read, so that the kernels timed are theirs.
    return choose_racing(model) if method == "auto" else model


def read_only_model(model):
    """``model`` with read-only arrays (:func:`~sksubsample.algorithms._numba.read_only`: the
    sweeps only read them). Applied when the model is built and again where a chain starts,
    since a worker process may receive writable copies of the small arrays."""
    fields = {name: read_only(value) for name, value in zip(model._fields, model, strict=True)
              if isinstance(value, np.ndarray) and value.flags.writeable}
    return model._replace(**fields) if fields else model
