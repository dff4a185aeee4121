"""Metropolis–Hastings acceptance tests behind one signature.

Every test in this module is built by a factory (``metropolis()``, ``barker()``,
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

import inspect
import math
import numbers
import threading
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from ..._utils import as_generator, check_int, check_open_unit_interval, check_positive
from .._numba import njit
from .._user_functions import CountedFunction
from ..bandits._race import race
from ..sampling import IndexSampler
from ._correction import BarkerCorrection
from ._correction import _check_sigma as check_sigma

__all__ = [
    "ACCEPTANCE_TESTS",
    "EXACT_BARKER",
    "EXACT_METROPOLIS",
    "SUBSAMPLED_BARKER",
    "SUBSAMPLED_METROPOLIS",
    "AcceptInfo",
    "AcceptanceKind",
    "acceptance_kind",
    "adaptive_subsampling",
    "austerity",
    "barker",
    "bounded_barker",
    "get_acceptance_test",
    "metropolis",
    "minibatch_barker",
    "racing",
]

class AcceptInfo(NamedTuple):
    """What an acceptance test decided and what it cost.

    Attributes
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

    Attributes
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
    return CountedFunction(log_ratio_terms, "log_ratio_terms(idx)", lambda idx: (len(idx),))


def _check_n_data(n_data):
    if type(n_data) is int and n_data >= 1:  # the per-step case, without check_int's calls
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


def _check_batch_size(batch_size):
    return check_int(batch_size, "batch_size", low=2)


def _check_batch_fits(batch_size, n_data):
    """Per-call check of a batch size validated by the factory against this call's N."""
    if batch_size > n_data:
        raise ValueError(f"batch_size must be <= n_data = {n_data}, got {batch_size}")


def _prologue(n_data, log_ratio_rest, random_state, term_bound, first_batch=None):
    """Validated ``(n_data, rest, rng, term_bound)`` of one call of any test."""
    n_data = _check_n_data(n_data)
    if first_batch is not None:
        _check_batch_fits(first_batch, n_data)
    return (n_data, _check_rest(log_ratio_rest), as_generator(random_state),
            _check_term_bound(term_bound))


def _early_reject():
    """Reject without data: NaN or -inf ``log_ratio_rest`` (e.g. a NaN proposal)."""
    return AcceptInfo(False, 0, 0, -math.inf, False, 0)


class _Moments:
    """Running mean / variance of the evaluated terms (shifted sums avoid cancellation)."""

    def __init__(self):
        self.values = []
        self.n = 0
        self.shift = None
        self.s1 = 0.0
        self.s2 = 0.0

    def add(self, x):
        if self.shift is None:
            shift = float(x.sum()) / x.size  # (np.mean's overhead, for ~100 values per step)
            self.shift = shift if math.isfinite(shift) else 0.0
        y = x - self.shift
        self.s1 += float(y.sum())
        self.s2 += float(y @ y)
        self.n += x.size
        self.values.append(x)

    @property
    def mean(self):
        return self.shift + self.s1 / self.n

    def var(self, ddof):
        if self.n - ddof <= 0:
            return math.inf
        return max(self.s2 - self.s1 * self.s1 / self.n, 0.0) / (self.n - ddof)

    def all_values(self):
        if len(self.values) > 1:
            self.values = [np.concatenate(self.values)]
        return self.values[0]


def _log_uniform(rng):
    # log(u) for u ~ U(0, 1] computed as -Exp(1): exact in the tail and never log(0).
    return -float(rng.standard_exponential())


def _all_terms(terms, n_data):
    return terms(np.arange(n_data))


def _honest_term_bound(terms, n_data):
    """``C = max_i |l_i|`` over the whole data set, paid for (and counted) term by term.

    Returns ``(C, values)``; the values are reused by the test, so no term is paid twice.
    """
    values = _all_terms(terms, n_data)
    return float(np.max(np.abs(values))) if not terms.saw_neg_inf else math.inf, values


def _growing_batch_test(name, kind, first_batch, next_size, start, **attributes):
    """Build a test that grows one minibatch (without replacement) until a rule decides.

    The one loop shared by the minibatch Barker test, Austerity and adaptive subsampling.

    Parameters
    ----------
    name : str
    kind : AcceptanceKind
    first_batch : int
        Size of the first minibatch.
    next_size : callable
        ``next_size(current_size) -> int``: the cumulative size of the next look.
    start : callable
        ``start(terms, n_data, rest, rng, term_bound) -> (rule, cached)`` runs once per call,
        after the checks, and draws the call's own randomness (e.g. ``u``).
        ``rule(moments, look, exact) -> bool | None`` decides after every look (``look``
        counts from 1): ``accepted``, or None to look
        further; with ``exact=True`` (all N terms seen) it must decide. ``cached`` is an array
        of all N terms when ``start`` already paid for them (else None), or an
        :class:`AcceptInfo` to return at once.
    """

    def growing_batch_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                           term_bound=None):
        n_data, rest, rng, bound = _prologue(n_data, log_ratio_rest, random_state, term_bound,
                                             first_batch)
        if not rest > -math.inf:
            return _early_reject()
        terms = _terms(log_ratio_terms)
        rule, cached = start(terms, n_data, rest, rng, bound)
        if isinstance(cached, AcceptInfo):
            return cached
        sampler = IndexSampler(n_data, rng)
        moments = _Moments()
        size = first_batch
        n_rounds = 0
        while True:
            n_rounds += 1
            idx = sampler.draw(size - moments.n)
            values = cached[idx] if cached is not None else terms(idx)
            if terms.saw_neg_inf:
                # A term is -inf: the proposal has zero likelihood and Δ = -inf exactly.
                return AcceptInfo(False, terms.n_evaluations, moments.n + values.size,
                                  -math.inf, False, n_rounds)
            moments.add(values)
            exact = moments.n == n_data
            accepted = rule(moments, n_rounds, exact)
            if accepted is not None:
                return AcceptInfo(bool(accepted), terms.n_evaluations, moments.n,
                                  n_data * moments.mean + rest, exact, n_rounds)
            size = next_size(moments.n)

    return _declare(growing_batch_test, name, kind, **attributes)


# --------------------------------------------------------------------------------------------
# exact tests
# --------------------------------------------------------------------------------------------


def metropolis():
    """The exact Metropolis–Hastings test on the full data set (Seita et al. Eq. 1).

    Accepts iff ``log u < Δ`` with ``u ~ U(0, 1)`` and ``Δ = sum_i l_i + log_ratio_rest``;
    evaluates all ``n_data`` terms.

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)
        -> AcceptInfo``.

    Examples
    --------
    >>> import numpy as np
    >>> test = metropolis()
    >>> info = test(lambda idx: np.full(len(idx), 0.01), 100, 0.0, 0)
    >>> info.accepted, info.n_evaluations
    (True, 100)
    """
    return _full_data_test(lambda delta, rng: _log_uniform(rng) < delta, "metropolis",
                           EXACT_METROPOLIS)


def _full_data_test(decide, name, kind):
    """An exact test: ``decide(Δ, rng)`` on ``Δ`` computed from all ``n_data`` terms."""

    def full_data_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                       term_bound=None):
        n_data, rest, rng, _ = _prologue(n_data, log_ratio_rest, random_state, term_bound)
        if not rest > -math.inf:
            return _early_reject()
        terms = _terms(log_ratio_terms)
        delta = float(_all_terms(terms, n_data).sum()) + rest
        accepted = bool(decide(delta, rng))
        return AcceptInfo(accepted, terms.n_evaluations, n_data, delta, True, 1)

    # ``compiled_law``: the compiled MH chain of a GLM target implements this test too.
    return _declare(full_data_test, name, kind, compiled_law=(name, math.nan))


def _barker_decision(delta, rng):
    # Accept with probability expit(Δ) (Barker 1965; Seita et al. Eq. 9-10), compared in log
    # space so that |Δ| > 700 neither overflows nor rounds to a certain decision wrongly.
    return bool(_log_uniform(rng) < special.log_expit(delta))


def barker():
    """The exact Barker test on the full data set: accept with probability ``1 / (1 + e^{-Δ})``.

    Seita et al. (2017) Section 3.2, Eqs. 9-10 (equivalently ``Δ + X_log > 0`` with ``X_log``
    standard logistic). Evaluates all ``n_data`` terms.

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)
        -> AcceptInfo``.

    Examples
    --------
    >>> import numpy as np
    >>> test = barker()
    >>> test(lambda idx: np.full(len(idx), -10.0), 100, 0.0, 0).accepted
    False
    """

    return _full_data_test(
        lambda delta, rng: delta > -math.inf and _barker_decision(delta, rng), "barker",
        EXACT_BARKER)


# --------------------------------------------------------------------------------------------
# the bounded Barker test: a Barker decision on an unbiased estimate of Δ
# --------------------------------------------------------------------------------------------

#: ``sup_x |d²/dx² expit(x)| = 1/(6√3)``, at ``expit(x) = (3 ± √3)/6``.
_LOGISTIC_CURVATURE = 1.0 / (6.0 * math.sqrt(3.0))


def bounded_batch_size(n_data, variance_bound, delta):
    """Smallest minibatch size whose Barker decision is within ``delta`` of the exact one.

    With ``b`` terms drawn without replacement, ``Δ̂ = N mean(l_batch) + rest`` is unbiased with
    variance ``s² = N² (N - b) S² / ((N - 1) b)``, ``S² = (1/N) sum_i (l_i - l̄)² <= V``. The
    returned ``b`` is the smallest with ``s² <= 2 δ / sup|expit''|`` (see
    :func:`bounded_barker`); ``n_data`` means the exact test.

    Parameters
    ----------
    n_data : int
    variance_bound : float >= 0
        ``V >= (1/N) sum_i l_i²``.
    delta : float in (0, 1)

    Returns
    -------
    int in [1, n_data]

    Examples
    --------
    >>> bounded_batch_size(1_000_000, 1e-12, 0.01)
    5
    >>> bounded_batch_size(500, 1.0, 0.01)
    500
    """
    return int(bounded_batch_size_compiled(int(n_data), float(variance_bound), float(delta)))


@njit
def bounded_batch_size_compiled(n_data, variance_bound, delta):
    """:func:`bounded_batch_size`, callable from compiled code (its only implementation)."""
    target = 2.0 * delta / _LOGISTIC_CURVATURE  # the largest admissible s²
    work = n_data * n_data * variance_bound
    if work == 0.0:
        return 1
    if not work < math.inf:
        return n_data
    # s² <= target  <=>  b >= N³ V / ((N - 1) target + N² V)
    size = n_data * work / ((n_data - 1) * target + work)
    return min(n_data, max(1, math.ceil(size)))


def bounded_barker(*, delta=0.01):
    """The Barker test on a minibatch sized so that its acceptance error is at most ``delta``.

    For a proposal θ' the model supplies ``V >= (1/N) sum_i l_i²`` (``variance_bound``, O(d²)
    and without data; e.g. :meth:`GLMTarget.loglik_ratio_variance_bound` or, with control
    variates, the Taylor-remainder bound of the residuals). Before looking at any datum the test
    fixes ``b = bounded_batch_size(N, V, delta)``, draws ``b`` indices without replacement and
    accepts with probability ``expit(Δ̂)``, ``Δ̂ = N mean(l_batch) + log_ratio_rest``. When
    ``b = N``, ``Δ̂ = Δ`` is exact and the test makes the exact Metropolis decision
    (``log u < Δ``), which accepts more often than Barker's and so mixes better.

    **Reversibility.** For each pair of states the rule used (Metropolis when ``b = N``, Barker
    otherwise) must be the same in both directions; each rule is reversible for π, so the
    reference kernel mixing them pairwise is too. This holds when ``V`` is symmetric in
    ``(θ, θ')``: an MH kernel passes ``max(V(θ, θ'), V(θ', θ))``. When the test is exact the
    bound still helps: ``Δ`` lies within ``N sqrt(V)`` of the data-free part of the ratio, so a
    uniform draw outside that interval decides without the data (the same decision).

    **Guarantee.** ``Δ̂`` is unbiased and ``b`` does not depend on the data, so by Taylor's
    theorem ``|E expit(Δ̂) - expit(Δ)| <= ½ sup|expit''| Var(Δ̂) = Var(Δ̂) / (12√3) <= delta``:
    the probability of accepting θ' differs from the exact Barker probability (Barker 1965;
    Seita et al. 2017, Eq. 9) by at most ``delta`` for *every* proposal, whatever the
    distribution of the terms (skewed, heavy-tailed, a few outliers). No normal approximation is
    made, unlike Seita et al.'s correction (Lemma 3), whose error is unchecked for skewed terms.
    Without a ``variance_bound`` nothing can be guaranteed from a minibatch, so all N terms are
    evaluated (the exact Barker test).

    **Strata.** With ``strata`` (a :class:`Strata`), the terms of ``strata.exact`` are summed
    exactly and the minibatch is drawn from ``strata.sampled`` only (``N_s`` rows), with
    ``V >= (1/N_s) sum_{sampled} l_i²``: ``Δ̂ = sum_exact l_i + N_s mean(l_batch) + rest`` is
    still unbiased and the same guarantee holds with ``N_s`` in place of N. Setting apart the
    few rows that dominate a bound (outliers, high leverage) is what keeps minibatches small on
    heavy-tailed data.

    **Cost.** ``b ≈ N² V / (24√3 δ)``, so the test pays in proportion to how well the model
    bounds its terms: with Taylor control variates on a concentrated posterior ``N² V`` shrinks
    as N grows (a few dozen terms at N = 10⁶ for a 20-parameter logistic regression); for small
    or poorly identified problems ``b = N`` and the test is the exact one.

    Parameters
    ----------
    delta : float in (0, 1), default 0.01
        Bound on the per-step error of the acceptance probability.

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, variance_bound=None,
        strata=None, term_bound=None) -> AcceptInfo`` (``term_bound`` is ignored).

    Examples
    --------
    >>> import numpy as np
    >>> terms = np.random.default_rng(0).normal(0.0, 1e-6, size=100_000)
    >>> test = bounded_barker(delta=0.01)
    >>> info = test(lambda idx: terms[idx], 100_000, 0.5, 0, variance_bound=1e-10)
    >>> info.n_evaluations
    5
    >>> test(lambda idx: terms[idx], 100_000, 0.5, 0).n_evaluations  # no bound: exact
    100000
    """
    delta = check_open_unit_interval(delta, "delta")

    def bounded_barker_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                            variance_bound=None, strata=None, term_bound=None):
        n_data, rest, rng, _ = _prologue(n_data, log_ratio_rest, random_state, term_bound)
        bound = _check_term_bound(variance_bound, "variance_bound")
        if not rest > -math.inf:
            return _early_reject()
        terms = _terms(log_ratio_terms)
        log_u = _log_uniform(rng)
        if bound is None:  # nothing bounds the terms: the exact test on all of them
            estimate = float(_all_terms(terms, n_data).sum()) + rest
            if terms.saw_neg_inf:
                return AcceptInfo(False, terms.n_evaluations, n_data, -math.inf, True, 1,
                                  "metropolis")
            return AcceptInfo(log_u < estimate, terms.n_evaluations, n_data, estimate, True, 1,
                              "metropolis")
        n_sampled = n_data if strata is None else len(strata.sampled)
        size = bounded_batch_size(n_sampled, bound, delta)
        exact = size == n_sampled
        rule = "metropolis" if exact else "barker"
        fixed = 0.0
        if strata is not None:
            fixed = float(terms(strata.exact).sum())
            if terms.saw_neg_inf:
                return AcceptInfo(False, terms.n_evaluations, n_data, -math.inf, exact, 1, rule)
        centre = rest + fixed
        decided = _decided_by_bound(log_u, centre, n_sampled, bound, size)
        if decided is not None:
            return AcceptInfo(decided, terms.n_evaluations, size + n_data - n_sampled,
                              math.nan, exact, 1, rule)
        if exact:
            values = _all_terms(terms, n_data) if strata is None else terms(strata.sampled)
        else:
            idx = IndexSampler(n_sampled, rng).draw(size)
            values = terms(idx if strata is None else strata.sampled[idx])
        if terms.saw_neg_inf:
            return AcceptInfo(False, terms.n_evaluations, size + n_data - n_sampled,
                              -math.inf, exact, 1, rule)
        if exact:
            estimate = centre + float(values.sum())
            return AcceptInfo(log_u < estimate, terms.n_evaluations, n_data, estimate, True, 1,
                              rule)
        estimate = centre + n_sampled * float(values.mean())
        return AcceptInfo(log_u < float(special.log_expit(estimate)), terms.n_evaluations,
                          size + n_data - n_sampled, estimate, False, 1, rule)

    return _declare(bounded_barker_test, "bounded_barker", SUBSAMPLED_BARKER,
                    uses_bounds=("variance_bound", "strata"),
                    compiled_law=("bounded_barker", delta))


def _decided_by_bound(log_u, centre, n_sampled, variance_bound, size):
    """The bounded test's decision when the bound alone settles it, else None.

    The sampled terms have ``sum_i l_i² <= N_s V``, so a batch of ``b`` of them has
    ``|N_s mean(l_batch)| <= N_s sqrt(N_s V / b)`` (Cauchy–Schwarz; ``sqrt(N_s V)`` per term
    when ``b = N_s``) and ``Δ̂`` lies within that of ``centre`` (the data-free part of the ratio
    plus the exactly summed stratum). The test accepts iff ``Δ̂ > log u`` (exact, Metropolis)
    or ``Δ̂ > logit(u)`` (Barker), so a threshold outside the interval decides as the data
    would, for every batch: a proposal far in the tail is rejected without its minibatch.
    The only implementation: the compiled chain calls it too.
    """
    code = _decided_by_bound_compiled(log_u, centre, n_sampled, variance_bound, size)
    return None if code < 0 else bool(code)


@njit
def _decided_by_bound_compiled(log_u, centre, n_sampled, variance_bound, size):
    """:func:`_decided_by_bound` with the answer coded as 1 (accept), 0 (reject), -1 (open)."""
    exact = size == n_sampled
    if exact:
        slack = n_sampled * math.sqrt(variance_bound)
        threshold = log_u
    else:
        slack = n_sampled * math.sqrt(n_sampled * variance_bound / size)
        threshold = log_u - math.log1p(-math.exp(log_u))  # logit(u)
    if centre + slack <= threshold:
        return 0
    if centre - slack > threshold:
        return 1
    return -1


# --------------------------------------------------------------------------------------------
# minibatch Barker (Seita et al. 2017, Algorithm 1)
# --------------------------------------------------------------------------------------------

# Novak (2005) constants as used in Seita et al. Lemma 3, Eq. 18.
_NOVAK_A = 6.4
_NOVAK_B = 2.0


def novak_bound(standardized, n):
    """The quantitative-CLT error ``ε = (6.4 E|X|^3 + 2 E|X|) / sqrt(n)`` (Seita et al. Eq. 18).

    Novak's bound on the self-normalised sum is stated for unit-variance summands; the absolute
    moments are therefore taken of the terms standardised by their sample mean and (biased)
    sample standard deviation, which makes ε scale-free (Corollary 1 with ``X_i = Λ_i - Λ``).
    Since ``E|X|^3 >= (E X^2)^{3/2} = 1`` for standardised terms, ``ε >= 6.4 / sqrt(n)``.

    Parameters
    ----------
    standardized : ndarray
        Standardised terms (mean 0, biased variance 1).
    n : int
        Minibatch size.

    Returns
    -------
    float
    """
    a = np.abs(standardized)
    return (_NOVAK_A * float(np.mean(a**3)) + _NOVAK_B * float(np.mean(a))) / math.sqrt(n)


_CORRECTIONS = {}


def _default_correction(sigma):
    """One ``BarkerCorrection`` per σ per process: building one may solve a deconvolution."""
    if sigma not in _CORRECTIONS:
        _CORRECTIONS[sigma] = BarkerCorrection(sigma=sigma)
    return _CORRECTIONS[sigma]


class _NoiseBuffer:
    """The final noise of the minibatch Barker test, ``(Z, X_corr)``, drawn in blocks.

    Each call returns a standard normal ``Z`` (scaled by the caller to ``X_nc``) and an
    ``X_corr`` from the correction law. Drawing them one at a time cost more than the rest of
    the decision (``BarkerCorrection.sample(1)`` validates its arguments and runs the
    inverse-CDF machinery for one value), so ``_BLOCK`` pairs are drawn at once from the
    caller's generator and handed out in order. The law is unchanged: the pairs are i.i.d.,
    independent of one another and of everything else the generator produces (indices, other
    steps' noise), whether they were drawn before or after them.

    One buffer is kept per thread and per generator: a call with another generator than the
    previous one (e.g. another chain, or a fresh ``random_state`` int) discards the buffer and
    refills from the new one, so a given generator's results never depend on calls made with
    other generators, and chains running as threads never share a buffer.
    """

    _BLOCK = 1024

    def __init__(self, correction):
        self.correction = correction
        self._local = threading.local()

    # pickling (chains on process backends): each process starts with empty buffers
    def __getstate__(self):
        return {"correction": self.correction}

    def __setstate__(self, state):
        self.correction = state["correction"]
        self._local = threading.local()

    def __call__(self, rng):
        slot = self._local.__dict__
        pairs = slot.get("pairs")
        if not pairs or slot["rng"] is not rng:
            z = rng.standard_normal(self._BLOCK)
            x_corr = self.correction.sample(self._BLOCK, random_state=rng)
            # popped from the end: reversed so the pairs are used in the order drawn
            pairs = list(zip(z[::-1].tolist(), x_corr[::-1].tolist(), strict=True))
            slot["pairs"] = pairs
            slot["rng"] = rng  # a strong reference, so the identity test is sound
        return pairs.pop()


def _check_delta_or_none(delta):
    if delta is None:
        return None
    return check_open_unit_interval(delta, "delta")


def minibatch_barker(*, sigma=1.0, batch_size=100, delta=None, correction=None):
    """The minibatch Barker test with an additive correction variable (Seita et al. Alg. 1).

    Draw a minibatch of ``batch_size`` terms without replacement; estimate
    ``Δ* = N mean(l_batch) + log_ratio_rest`` and its variance
    ``s²_Δ* = N² (1 - b/N) s²_l / b`` (sample variance ``s²_l``, with the finite-population factor
    because the batch is drawn without replacement; the paper's with-replacement analysis drops
    it); while ``s²_Δ* >= σ²`` (or, when ``delta`` is given, while the Novak error
    ``ε > delta``, Corollary 1) add ``batch_size`` more terms. Then draw
    ``X_nc ~ N(0, σ² - s²_Δ*)`` and ``X_corr`` from the correction distribution ``C_σ`` and accept
    iff ``Δ* + X_nc + X_corr > 0`` (Eq. 13). By Corollary 2 the acceptance probability differs
    from the exact Barker probability ``1 / (1 + e^{-Δ})`` by at most ε plus the correction's
    own CDF error (``BarkerCorrection.cdf_error``). When the whole data set has been used, Δ is
    exact and the exact Barker test decides.

    Parameters
    ----------
    sigma : float in (0, 1.8), default 1.0
        Standard deviation of the normal part ``X_norm`` of the logistic decomposition (Eq. 12);
        the paper uses 1.
    batch_size : int >= 2, default 100
        Initial minibatch size m and the increment (Algorithm 1). Must not exceed ``n_data``.
    delta : float in (0, 1) or None, default None
        Tolerance on the Novak bound ε (Lemma 3). ``None`` skips that condition, which is what
        the paper's reported minibatch sizes imply: standardised terms always give
        ``ε >= 6.4 / sqrt(b)``, so ``ε <= delta`` needs ``b >= (6.4 / delta)²`` (16 384 for
        ``delta = 0.05``), far above the ~200 of Seita et al. Section 6.
    correction : BarkerCorrection, optional
        A precomputed correction with ``correction.sigma == sigma``; built from ``sigma`` when
        omitted.

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)
        -> AcceptInfo``. ``term_bound`` is ignored.

    Raises
    ------
    ValueError
        ``sigma`` outside (0, 1.8), ``batch_size < 2``, ``delta`` outside (0, 1); at call time
        ``batch_size > n_data``.

    Examples
    --------
    >>> import numpy as np
    >>> test = minibatch_barker(sigma=1.0, batch_size=50)
    >>> rng = np.random.default_rng(0)
    >>> terms = rng.normal(0.0, 1e-4, size=10_000)
    >>> info = test(lambda idx: terms[idx], 10_000, 0.3, rng)
    >>> info.n_evaluations
    50
    """
    sigma = check_sigma(sigma)
    batch_size = _check_batch_size(batch_size)
    delta = _check_delta_or_none(delta)
    if correction is None:
        correction = _default_correction(sigma)
    elif not math.isclose(float(correction.sigma), sigma, rel_tol=1e-12):
        raise ValueError(
            f"correction.sigma = {correction.sigma} does not match sigma = {sigma}"
        )
    sigma2 = sigma * sigma
    # Below this size the Novak bound cannot be <= delta (ε >= 6.4 / sqrt(b)); skipping its
    # O(b) evaluation there changes no decision.
    min_novak_size = math.inf if delta is None else (_NOVAK_A / delta) ** 2
    noise = _NoiseBuffer(correction)

    def start(terms, n_data, rest, rng, term_bound):
        def rule(moments, look, exact):
            b = moments.n
            delta_star = n_data * moments.mean + rest
            if exact:
                # Δ is exact: the exact Barker test decides.
                return _barker_decision(delta_star, rng)
            s2 = n_data * n_data * (1.0 - b / n_data) * moments.var(ddof=1) / b
            if s2 >= sigma2:
                return None
            if delta is not None:
                if b < min_novak_size:
                    return None
                sd = math.sqrt(moments.var(ddof=0))
                x = moments.all_values()
                if sd > 0 and novak_bound((x - moments.mean) / sd, b) > delta:
                    return None
            z, x_corr = noise(rng)
            x_nc = math.sqrt(sigma2 - s2) * z  # N(0, σ² - s²_Δ*)
            return delta_star + x_nc + x_corr > 0.0

        return rule, None

    return _growing_batch_test("minibatch_barker", SUBSAMPLED_BARKER, batch_size,
                               lambda size: size + batch_size, start, correction=correction)


# --------------------------------------------------------------------------------------------
# Korattikara et al. (2014): sequential t-test
# --------------------------------------------------------------------------------------------


def austerity(*, epsilon=0.005, batch_size=100):
    """Approximate MH by a sequential t-test (Korattikara, Chen & Welling 2014, Algorithm 1).

    Draw ``u ~ U(0, 1)`` and set ``μ0 = (log u - log_ratio_rest) / N``. Grow a minibatch without
    replacement by fixed increments of ``batch_size``; after each increment compute the mean
    ``l̄`` and standard deviation ``s_l`` of the terms, the standard error
    ``s = s_l / sqrt(n) * sqrt(1 - (n - 1) / (N - 1))`` and
    ``δ = 1 - t_{n-1}(|l̄ - μ0| / s)``; decide ``l̄ > μ0`` as soon as ``δ < epsilon``. With all N
    terms ``s = 0`` and the decision is exact.

    Parameters
    ----------
    epsilon : float in (0, 1), default 0.005
        Per-look tolerance of the t-test (Seita et al. Section 6.1 use 0.005).
    batch_size : int >= 2, default 100
        Initial minibatch size and the fixed increment.

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)
        -> AcceptInfo``. ``term_bound`` is ignored.

    Examples
    --------
    >>> import numpy as np
    >>> test = austerity(epsilon=0.01, batch_size=100)
    >>> terms = np.full(10_000, 1e-3)
    >>> info = test(lambda idx: terms[idx], 10_000, 0.0, 0)
    >>> info.accepted, info.n_evaluations
    (True, 100)
    """
    epsilon = check_open_unit_interval(epsilon, "epsilon")
    batch_size = _check_batch_size(batch_size)

    def start(terms, n_data, rest, rng, term_bound):
        mu0 = (_log_uniform(rng) - rest) / n_data

        def rule(moments, look, exact):
            n = moments.n
            mean = moments.mean
            if exact:
                return mean > mu0
            s = math.sqrt(moments.var(ddof=1) / n * (1.0 - (n - 1) / (n_data - 1)))
            gap = abs(mean - mu0)
            if s == 0.0:
                return mean > mu0 if gap > 0.0 else None
            return mean > mu0 if stats.t.sf(gap / s, df=n - 1) < epsilon else None

        return rule, None

    return _growing_batch_test("austerity", SUBSAMPLED_METROPOLIS, batch_size,
                               lambda size: size + batch_size, start)


# --------------------------------------------------------------------------------------------
# Bardenet et al. (2014): adaptive subsampling with empirical Bernstein-Serfling bounds
# --------------------------------------------------------------------------------------------


def adaptive_subsampling(*, delta=0.01, gamma=1.5, p=2.0, batch_size=100):
    """Adaptive subsampling MH, "MHSubLhd" (Bardenet, Doucet & Holmes 2014, Algorithm 2).

    Draw ``u ~ U(0, 1)`` and set ``ψ = (log u - log_ratio_rest) / N``. Use minibatches of sizes
    ``t_1 = batch_size``, ``t_{k+1} = min(N, ceil(γ t_k))`` drawn without replacement; at look
    ``k`` with ``t`` terms compute the empirical Bernstein–Serfling half-width

    ``c = σ̂_t sqrt(2 (1 - f_t) log(3 / δ_k) / t) + 6 C log(3 / δ_k) / t``,
    ``f_t = (t - 1) / N``, ``δ_k = (p - 1) δ / (p k^p)``

    (``σ̂_t`` the biased sample standard deviation, ``6 C = 3 × range`` with the range bounded by
    ``2 C``), and stop when ``|Λ*_t - ψ| >= c`` or all N terms are used; accept iff
    ``Λ*_t > ψ``. Since ``sum_k δ_k <= δ``, the decision is the exact one with probability at
    least ``1 - δ`` (a rigorous, distribution-free guarantee, unlike the t-test).

    Parameters
    ----------
    delta : float in (0, 1), default 0.01
        Total error allowed to the sequence of looks (Seita et al. Section 6.1 use 0.01).
    gamma : float > 1, default 1.5
        Geometric growth of the minibatch.
    p : float > 1, default 2
        Exponent of the error schedule ``δ_k``.
    batch_size : int >= 2, default 100
        First minibatch size (Bardenet et al. start from 1; Seita et al. use 100).

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)
        -> AcceptInfo``. The range bound ``C = max_i |l_i|`` is ``term_bound`` when the model
        supplies one; otherwise it is computed honestly from all N terms, which are then
        counted in ``n_evaluations`` (``batch_size`` of the info still reports the minibatch
        the decision used, as in Seita et al. Fig. 2).

    Examples
    --------
    >>> import numpy as np
    >>> test = adaptive_subsampling(delta=0.01, batch_size=100)
    >>> terms = np.full(10_000, 1e-3)
    >>> info = test(lambda idx: terms[idx], 10_000, 0.0, 0, term_bound=1e-3)
    >>> info.accepted, info.n_evaluations
    (True, 100)
    """
    delta = check_open_unit_interval(delta, "delta")
    gamma = check_positive(gamma, "gamma")
    if not gamma > 1.0:
        raise ValueError(f"gamma must be > 1, got {gamma!r}")
    p = check_positive(p, "p")
    if not p > 1.0:
        raise ValueError(f"p must be > 1, got {p!r}")
    batch_size = _check_batch_size(batch_size)

    def start(terms, n_data, rest, rng, term_bound):
        psi = (_log_uniform(rng) - rest) / n_data
        cached = None
        if term_bound is None:
            term_bound, cached = _honest_term_bound(terms, n_data)
            if terms.saw_neg_inf:
                return None, AcceptInfo(False, terms.n_evaluations, n_data, -math.inf, True, 0)

        def rule(moments, look, exact):
            t = moments.n
            mean = moments.mean
            if exact:
                return mean > psi
            delta_k = (p - 1.0) * delta / (p * look**p)
            log_term = math.log(3.0 / delta_k)
            f_t = (t - 1) / n_data
            c = (math.sqrt(moments.var(ddof=0)) * math.sqrt(2.0 * (1.0 - f_t) * log_term / t)
                 + 6.0 * term_bound * log_term / t)
            return mean > psi if abs(mean - psi) >= c else None

        return rule, cached

    return _growing_batch_test("adaptive_subsampling", SUBSAMPLED_METROPOLIS, batch_size,
                               lambda size: math.ceil(gamma * size), start)


# --------------------------------------------------------------------------------------------
# racing (Chen & Ghahramani 2016, Eq. 12)
# --------------------------------------------------------------------------------------------


def racing(*, bound="normal", delta=0.05, first_batch=50, variance="pairwise"):
    """The MH test as a two-armed race (Chen & Ghahramani 2016, Section 4, Eq. 12).

    With ``u ~ U(0, 1)``, Eq. 12 sets ``f_0(current) = u p(θ) q(θ'|θ)``,
    ``f_0(proposal) = p(θ') q(θ|θ')`` and ``f_n = p(x_n | ·)``; subtracting the common
    ``log p(x_n | θ)`` from both arms (which changes no difference between arms) the rewards are

    * arm 0 (reject): ``l_{0,n} = log(u) / N``,
    * arm 1 (accept): ``l_{1,n} = l_n + log_ratio_rest / N``,

    so arm 1 has the larger mean iff ``log u < Δ``: the Metropolis decision. The race
    (:func:`sksubsample.algorithms.race`, Alg. 1 on a shared doubling schedule) returns the arm
    it identifies as best with confidence ``1 - delta``. ``bound="normal"`` reduces to a
    doubling-schedule version of Korattikara et al.; ``bound="ebs"`` to that of Bardenet et al.

    Parameters
    ----------
    bound : {"normal", "ebs"}, default "normal"
        Uncertainty bound G of the race.
    delta : float in (0, 1), default 0.05
        Error probability of the race.
    first_batch : int >= 2, default 50
        First minibatch size ``m^(1)`` of the doubling schedule.
    variance : {"pairwise", "marginal", "independent"}, default "pairwise"
        Variance estimate of the race (see :func:`race`).

    Returns
    -------
    callable
        ``test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)
        -> AcceptInfo``. For ``bound="ebs"`` the reward range of arm 1 is ``2 * term_bound``;
        without ``term_bound`` it is computed honestly from all N terms (counted).

    Examples
    --------
    >>> import numpy as np
    >>> test = racing(bound="normal", delta=0.05, first_batch=50)
    >>> terms = np.full(10_000, 1e-2)
    >>> test(lambda idx: terms[idx], 10_000, 0.0, 0).accepted
    True
    """
    if bound not in ("normal", "ebs"):
        raise ValueError(f"bound must be 'normal' or 'ebs', got {bound!r}")
    if variance not in ("pairwise", "marginal", "independent"):
        raise ValueError(
            f"variance must be 'pairwise', 'marginal' or 'independent', got {variance!r}"
        )
    delta = check_open_unit_interval(delta, "delta")
    first_batch = _check_batch_size(first_batch)

    def racing_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None):
        n_data, rest, rng, c_bound = _prologue(n_data, log_ratio_rest, random_state, term_bound,
                                               first_batch)
        if not rest > -math.inf:
            return _early_reject()
        log_u = _log_uniform(rng)
        terms = _terms(log_ratio_terms)
        cached = None
        if bound == "ebs" and c_bound is None:
            c_bound, cached = _honest_term_bound(terms, n_data)
            if terms.saw_neg_inf:
                return AcceptInfo(False, terms.n_evaluations, n_data, -math.inf, True, 0)
        # Only arm 1 (accept) reads data; arm 0's rewards are the constant log(u) / N.
        seen = _Moments()

        def rewards(arms, idx):
            out = np.full((len(arms), len(idx)), log_u / n_data)
            accept_rows = np.flatnonzero(np.asarray(arms) == 1)
            if accept_rows.size:
                values = cached[idx] if cached is not None else terms(idx)
                if not terms.saw_neg_inf:
                    seen.add(values)
                # A -inf term makes arm 1's population mean -inf: the race eliminates it.
                out[accept_rows] = values + rest / n_data
            return out

        options = {}
        if bound == "ebs":
            # arm 0 is constant; arm 1's terms lie in [-C, C] (Bardenet et al. Eq. 16).
            options["reward_range"] = np.array([0.0, 2.0 * c_bound])
        result = race(rewards, 2, n_data, delta=delta, bound=bound, variance=variance,
                      first_batch=first_batch, random_state=rng, **options)
        if terms.saw_neg_inf:
            return AcceptInfo(False, terms.n_evaluations, terms.n_evaluations, -math.inf,
                              False, int(result.n_rounds))
        estimate = n_data * seen.mean + rest if seen.n else math.nan
        return AcceptInfo(int(result.best) == 1, terms.n_evaluations, seen.n, estimate,
                          seen.n >= n_data, int(result.n_rounds))

    return _declare(racing_test, f"racing-{bound}", SUBSAMPLED_METROPOLIS)


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------

ACCEPTANCE_TESTS = {
    "metropolis": metropolis,
    "barker": barker,
    "bounded_barker": bounded_barker,
    "minibatch_barker": minibatch_barker,
    "austerity": austerity,
    "adaptive_subsampling": adaptive_subsampling,
    "racing": racing,
}

#: Aliases that fix one option of a factory.
_ALIASES = {"racing-normal": ("racing", {"bound": "normal"}),
            "racing-ebs": ("racing", {"bound": "ebs"})}


def _factory_options(factory):
    """The keyword options a factory takes, read from its signature."""
    return set(inspect.signature(factory).parameters)


def get_acceptance_test(test, **options):
    """Build an acceptance test from a name (or pass a callable through).

    Parameters
    ----------
    test : str or callable
        One of ``"metropolis"``, ``"barker"``, ``"bounded_barker"``, ``"minibatch_barker"``,
        ``"austerity"``, ``"adaptive_subsampling"``, ``"racing"``, ``"racing-normal"``,
        ``"racing-ebs"``, or a callable with the signature of this module.
    **options
        Options of the factory. Options a factory does not take are ignored when their value
        is ``None``, so a driver can forward ``batch_size=None, delta=None`` to any test; an
        option that is set but unused raises ``ValueError``. ``batch_size`` is forwarded to
        racing as ``first_batch``.

    Returns
    -------
    callable

    Examples
    --------
    >>> test = get_acceptance_test("austerity", epsilon=0.01, batch_size=200)
    >>> test.name
    'austerity'
    """
    if callable(test):
        if any(v is not None for v in options.values()):
            raise ValueError("options cannot be combined with a callable test")
        return test
    if not isinstance(test, str):
        raise TypeError(f"test must be a str or a callable, got {type(test).__name__}")
    name, fixed = _ALIASES.get(test, (test, {}))
    if name not in ACCEPTANCE_TESTS:
        raise ValueError(
            f"test must be one of {sorted([*ACCEPTANCE_TESTS, *_ALIASES])} or a callable, "
            f"got {test!r}"
        )
    factory = ACCEPTANCE_TESTS[name]
    allowed = _factory_options(factory)
    if "first_batch" in allowed and options.get("batch_size") is not None:
        # The race's first minibatch plays the role of the other tests' batch_size.
        if options.get("first_batch") is not None:
            raise ValueError("give batch_size or first_batch for racing, not both")
        options["first_batch"] = options.pop("batch_size")
    kwargs = dict(fixed)
    for key, value in options.items():
        if value is None:
            continue
        if key not in allowed:
            raise ValueError(f"test {test!r} does not take the option {key!r}")
        kwargs[key] = value
    return factory(**kwargs)
