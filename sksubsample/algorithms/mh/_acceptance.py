"""Metropolis–Hastings acceptance tests behind one signature: the types and checks they share.

Every test is built by a factory (``metropolis()``, ``barker()``,
``minibatch_barker(...)``, ``racing(...)``, ``austerity(...)``, ``adaptive_subsampling(...)``)
that validates its options once and returns a callable with the **one signature**

.. code-block:: python

    info = test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)

(``bounded_barker`` also takes ``variance_bound=None``)

where

``log_ratio_terms(idx) -> ndarray (len(idx),)``
    the per-datum log-likelihood ratios ``l_i = log p(x_i | θ') - log p(x_i | θ)`` (already
    divided by the temperature, and already minus the control-variate proxy when control
    variates are used) for an integer index array ``idx`` of distinct data indices;
``n_data``
    the number N of data terms;
``log_ratio_rest``
    everything that does not depend on the data: ``log p0(θ')/p0(θ) + log q(θ|θ')/q(θ'|θ)``
    (plus the exact sum of the control-variate proxies). This is ``-ψ(1, θ, θ')`` of Seita et
    al. (2017), Eq. 7, so the full log acceptance ratio is
    ``Δ = sum_{i=1}^{N} l_i + log_ratio_rest``. The uniform variate ``u`` (Metropolis-type tests)
    or the logistic / correction noise (Barker-type tests) is drawn by the test itself;
``random_state``
    None, int or ``np.random.Generator``: the test's randomness (data indices and noise);
``term_bound``
    optional float ``C >= max_i |l_i|`` supplied by the model (Bardenet et al. 2014, Eq. 16,
    written ``C_{θ,θ'}``). Only the concentration-bound tests (``adaptive_subsampling`` and
    ``racing(bound="ebs")``) use it; when it is ``None`` they compute it *honestly* by evaluating
    all N terms, and those evaluations are counted in ``n_evaluations``;
``variance_bound``
    optional float ``V >= (1/N) sum_i l_i²`` supplied by the model, used by
    :func:`bounded_barker` to choose its minibatch size before looking at any datum.

A test states which bounds it reads in its ``uses_bounds`` attribute (a tuple of keyword names;
``("term_bound",)`` when undeclared), so a kernel computes and passes only those.

Every test returns an :class:`AcceptInfo` whose ``n_evaluations`` is the number of log-ratio
terms ``l_i`` it computed (one term = one datum evaluated at θ and at θ').

Every test also carries its kind as data, ``test.kind``, an :class:`AcceptanceKind`: whether it
decides like Metropolis (accept iff ``log u < Δ``) or like Barker (accept with probability
``1 / (1 + e^{-Δ})``), and whether it is exact. An MH kernel reads the kind (e.g. to pick the
acceptance rate its warm-up aims at); a user's own test callable may set ``kind`` the same way
and is taken as an inexact Metropolis-type test otherwise.

Non-finite input
----------------
* A NaN or ``+inf`` term, or a ``+inf`` ``log_ratio_rest``, means a log-likelihood or log-prior
  of the *current* state is ``-inf``/undefined: that is a bug in the model, so a ``ValueError``
  is raised (nothing is silently dropped).
* A ``-inf`` term means ``p(x_i | θ') = 0``, so ``Δ = -inf`` exactly and the proposal is rejected
  (the exact decision, whatever the test).
* A NaN or ``-inf`` ``log_ratio_rest`` (a NaN proposal, a proposal outside the prior's support)
  rejects without touching data: NaN proposals are rejected, never accepted.

References
----------
.. [1] D. Seita, X. Pan, H. Chen, J. Canny. An Efficient Minibatch Acceptance Test for
   Metropolis-Hastings (2017). Algorithm 1, Eqs. 6-13, Lemma 3 and Corollaries 1-2.
.. [2] A. Korattikara, Y. Chen, M. Welling. Austerity in MCMC Land: Cutting the
   Metropolis-Hastings Budget. ICML 2014, Algorithm 1.
.. [3] R. Bardenet, A. Doucet, C. Holmes. Towards scaling up Markov chain Monte Carlo: an
   adaptive subsampling approach. ICML 2014, Algorithm 2 (MHSubLhd).
.. [4] Y. Chen, Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
   ICML 2016, Section 4, Eq. 12 (racing as an MH test).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from ..._utils import as_generator, check_int
from .._numba import njit
from .._user_functions import CountedFunction

__all__ = [
    "EXACT_BARKER",
    "EXACT_METROPOLIS",
    "SUBSAMPLED_BARKER",
    "SUBSAMPLED_METROPOLIS",
    "AcceptInfo",
    "AcceptanceKind",
    "acceptance_kind",
    "acceptance_probability",
    "log_expit",
    "log_expit_from",
    "log_uniform",
]

class AcceptInfo(NamedTuple):
    """What an acceptance test decided and what it cost.

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    accepted : bool
        Whether θ' is accepted.
    n_evaluations : int
        Number of log-ratio terms ``l_i`` computed by the test (including any terms evaluated to
        compute a range bound honestly).
    batch_size : int
        Size of the data subset on which the final decision was based (the "minibatch size" of
        Seita et al. Fig. 2); equals ``n_data`` for exact tests.
    log_ratio : float
        The estimate of Δ the decision used (``N * mean(l_batch) + log_ratio_rest``); exact Δ when
        ``exact`` is true; ``-inf`` for an early rejection, NaN when no data were looked at.
    exact : bool
        True when all N terms were used, so the decision is that of the exact test.
    n_rounds : int
        Number of minibatch looks before the decision.
    rule : {"metropolis", "barker"} or None, default None
        The rule this decision followed when it is not the test's ``kind.rule``.
    """

    accepted: bool
    n_evaluations: int
    batch_size: int
    log_ratio: float
    exact: bool
    n_rounds: int
    rule: str | None = None


class AcceptanceKind(NamedTuple):
    """What kind of decision an acceptance test makes.

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    rule : {"metropolis", "barker"}
        ``"metropolis"``: accept iff ``log u < Δ`` (probability ``min(1, e^Δ)``);
        ``"barker"``: accept with probability ``1 / (1 + e^{-Δ})`` (Seita et al. Eqs. 9-10).
    exact : bool
        Whether the decision is always the exact one (all N terms are used).
    """

    rule: str
    exact: bool


EXACT_METROPOLIS = AcceptanceKind("metropolis", True)
EXACT_BARKER = AcceptanceKind("barker", True)
SUBSAMPLED_METROPOLIS = AcceptanceKind("metropolis", False)
SUBSAMPLED_BARKER = AcceptanceKind("barker", False)


def acceptance_kind(test):
    """The :class:`AcceptanceKind` of a test callable (inexact Metropolis-type if undeclared)."""
    kind = getattr(test, "kind", None)
    return kind if isinstance(kind, AcceptanceKind) else SUBSAMPLED_METROPOLIS


def _declare(test, name, kind, uses_bounds=("term_bound",), **attributes):
    """Attach the name, the kind and the bounds a test reads, as data."""
    test.name = name
    test.kind = kind
    test.uses_bounds = uses_bounds
    for key, value in attributes.items():
        setattr(test, key, value)
    return test


# --------------------------------------------------------------------------------------------
# shared machinery
# --------------------------------------------------------------------------------------------


def _terms(log_ratio_terms):
    """The user's ``log_ratio_terms`` checked (shape, NaN/+inf) and counted."""
    # Named as what the terms are: in a chain they come from the target's log-likelihood.
    return CountedFunction(log_ratio_terms, "log_ratio_terms(idx) (the target's log-likelihood "
                           "ratios)", lambda idx: (len(idx),))


def _check_n_data(n_data):
    if type(n_data) is int and 1 <= n_data < 2**63:  # the per-step case, without check_int
        return n_data
    return check_int(n_data, "n_data", low=1)


def _check_rest(log_ratio_rest):
    if type(log_ratio_rest) is float and log_ratio_rest != math.inf:  # the per-step case
        return log_ratio_rest
    if isinstance(log_ratio_rest, bool) or not isinstance(log_ratio_rest, numbers.Real | np.number):
        raise TypeError(
            f"log_ratio_rest must be a real number, got {type(log_ratio_rest).__name__}"
        )
    rest = float(log_ratio_rest)
    if rest == math.inf:
        raise ValueError(
            "log_ratio_rest is +inf: the current state has zero prior or proposal density"
        )
    return rest


def _check_term_bound(term_bound, name="term_bound"):
    if term_bound is None:
        return None
    if isinstance(term_bound, bool) or not isinstance(term_bound, numbers.Real | np.number):
        raise TypeError(f"{name} must be a real number or None, got {type(term_bound)}")
    term_bound = float(term_bound)
    if not (term_bound >= 0.0) or math.isinf(term_bound):
        raise ValueError(f"{name} must be a finite number >= 0, got {term_bound!r}")
    return term_bound


def _check_batch_size(batch_size, name="batch_size"):
    return check_int(batch_size, name, low=2)


def _check_batch_fits(batch_size, n_data, name="batch_size"):
    """Per-call check of a batch size validated by the factory against this call's N."""
    if batch_size > n_data:
        raise ValueError(f"{name} must be <= n_data = {n_data}, got {batch_size}")


def _prologue(n_data, log_ratio_rest, random_state, term_bound, first_batch=None,
              batch_name="batch_size"):
    """Validated ``(n_data, rest, rng, term_bound)`` of one call of any test (``batch_name``:
    the factory's name of ``first_batch``, for the message when it exceeds ``n_data``)."""
    n_data = _check_n_data(n_data)
    if first_batch is not None:
        _check_batch_fits(first_batch, n_data, batch_name)
    return (n_data, _check_rest(log_ratio_rest), as_generator(random_state),
            _check_term_bound(term_bound))


def _early_reject():
    """Reject without data: NaN or -inf ``log_ratio_rest`` (e.g. a NaN proposal)."""
    return AcceptInfo(False, 0, 0, -math.inf, False, 0)



@njit(inline="always")
def log_uniform(rng):
    """``log u`` for ``u ~ U(0, 1]``, computed as ``-Exp(1)``: exact in the tail and never
    ``log 0`` (the uniform of every Metropolis-type decision and of the bounded test)."""
    return -rng.standard_exponential()


@njit(inline="always")
def log_expit(x):
    """``log σ(x) = -log(1 + e^{-x})`` without overflow for any x: Barker's acceptance
    probability in log space (so that ``|Δ| > 700`` neither overflows nor rounds to a certain
    decision wrongly)."""
    return log_expit_given(x, math.exp(-abs(x)))


@njit(inline="always")
def log_expit_given(x, e):
    """:func:`log_expit` of ``x`` given ``e = exp(-|x|)`` (which a caller may have for other
    uses: the logistic curve's derivatives are rational in it)."""
    return log_expit_from(x, math.log1p(e))


@njit(inline="always")
def log_expit_from(x, log1p_e):
    """:func:`log_expit` of ``x`` given ``log(1 + e)``, ``e = exp(-|x|)``: a loop over many
    terms computes both in arithmetic only (:mod:`sksubsample.algorithms._elementary`), so
    that it is packed; a single term calls the C library, whose functions are faster one value
    at a time."""
    return min(x, 0.0) - log1p_e


@njit
def acceptance_probability(barker, log_ratio, accepted):
    """The acceptance probability of the rule that decided at the test's estimate ``Δ̂``:
    ``expit(Δ̂)`` (Barker) or ``min(1, e^Δ̂)`` (Metropolis); the 0/1 decision when the test
    reports no estimate (NaN)."""
    if log_ratio != log_ratio:
        return 1.0 if accepted else 0.0
    if barker:
        return math.exp(log_expit(log_ratio))
    return math.exp(min(0.0, log_ratio))
