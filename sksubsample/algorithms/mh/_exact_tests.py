"""The exact and the bounded tests, written once as compiled laws.

``metropolis``, ``barker`` and ``bounded_barker`` decide from sums of the log-ratio terms (all
of them, a stratum of them, a minibatch of them), so each is one compiled law over a *source of
terms*, the model operation :func:`~._model.terms_sum`: the compiled MH chain passes its model
(the terms are computed inside the law), and the interpreted test callables pass a
:class:`~._model.CallbackTerms` that calls the user's ``log_ratio_terms`` (checked and counted
as every test does). The bounded test's strata and minibatches come from a minibatch source
(:mod:`._minibatches`): for data in memory a stretch of a Fisher–Yates shuffle
(:func:`~sksubsample.algorithms.sampling.shuffle_draw`), the law of every index batch of the
package; for data out of core, rows fetched ahead from a stream of uniform draws.

A law returns ``(accepted, data terms evaluated, decision batch size, estimate of Δ, barker)``;
the estimate is NaN when the bound decided without data, and ``barker`` tells the rule that
decided (the bounded test decides like Metropolis when its batch is all the data).
"""

from __future__ import annotations

import math

import numpy as np

from ..._utils import check_open_unit_interval
from .._numba import njit
from ._acceptance import (
    EXACT_BARKER,
    EXACT_METROPOLIS,
    SUBSAMPLED_BARKER,
    AcceptInfo,
    _check_term_bound,
    _declare,
    _early_reject,
    _prologue,
    _terms,
    log_expit,
    log_uniform,
)
from ._callbacks import registered
from ._minibatches import (
    exact_rows,
    minibatch_sum,
    sampled_count,
    sampled_sum,
    shuffled_minibatches,
)
from ._model import CallbackTerms, terms_sum

__all__ = ["BARKER_CODE", "BOUNDED_BARKER_CODE", "METROPOLIS_CODE", "TEST_CODES", "barker",
           "bounded_barker", "bounded_barker_law", "bounded_batch_size",
           "bounded_batch_size_compiled", "decided_by_bound", "full_data_law", "metropolis"]

#: Codes of the compiled tests (what a test's ``compiled_law`` names), by name.
METROPOLIS_CODE, BARKER_CODE, BOUNDED_BARKER_CODE = 0, 1, 2
TEST_CODES = {"metropolis": METROPOLIS_CODE, "barker": BARKER_CODE,
              "bounded_barker": BOUNDED_BARKER_CODE}

_NO_ROWS = np.empty(0, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# exact tests
# --------------------------------------------------------------------------------------------


@njit
def full_data_law(source, residuals, rng, theta, theta_new, n_data, rest, temperature, barker):
    """The exact test on ``Δ = sum_i l_i / T + rest`` over all N terms of ``source``:
    Metropolis (accept iff ``log u < Δ``, Seita et al. Eq. 1) or, when ``barker``, Barker
    (accept with probability ``expit(Δ)``, Eqs. 9-10, compared in log space so that
    ``|Δ| > 700`` neither overflows nor rounds to a certain decision wrongly)."""
    if not rest > -math.inf:
        return False, 0, 0, -math.inf, barker
    full = terms_sum(source, theta, theta_new, _NO_ROWS, True, residuals) / temperature + rest
    if barker:
        if not full > -math.inf:  # a -inf term: rejected, without a uniform
            return False, n_data, n_data, full, barker
        return log_uniform(rng) < log_expit(full), n_data, n_data, full, barker
    return log_uniform(rng) < full, n_data, n_data, full, barker


def _sum_of(terms, n_data):
    """The Python side of :class:`~._model.CallbackTerms` for the checked, counted ``terms``."""

    def sum_terms(rows, every_row):
        return float(terms(np.arange(n_data) if every_row else rows).sum())

    return sum_terms


def _full_data_test(barker_rule, name, kind):
    """An exact test: :func:`full_data_law` on the user's terms."""

    def full_data_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                       term_bound=None):
        n_data, rest, rng, _ = _prologue(n_data, log_ratio_rest, random_state, term_bound)
        if not rest > -math.inf:
            return _early_reject()
        terms = _terms(log_ratio_terms)
        with registered(_sum_of(terms, n_data)) as handle:
            accepted, _, _, delta, _ = full_data_law(CallbackTerms(handle), False, rng, _NO_ROWS,
                                                     _NO_ROWS, n_data, rest, 1.0, barker_rule)
        return AcceptInfo(bool(accepted), terms.n_evaluations, n_data, float(delta), True, 1)

    # ``compiled_law``: the compiled MH step runs this test on a model that lends its terms.
    return _declare(full_data_test, name, kind, compiled_law=(name, math.nan))


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
    return _full_data_test(False, "metropolis", EXACT_METROPOLIS)


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
    return _full_data_test(True, "barker", EXACT_BARKER)


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


@njit
def decided_by_bound(log_u, centre, n_sampled, variance_bound, size):
    """The bounded test's decision when the bound alone settles it.

    The sampled terms have ``sum_i l_i² <= N_s V``, so a batch of ``b`` of them has
    ``|N_s mean(l_batch)| <= N_s sqrt(N_s V / b)`` (Cauchy–Schwarz; ``sqrt(N_s V)`` per term
    when ``b = N_s``) and ``Δ̂`` lies within that of ``centre`` (the data-free part of the ratio
    plus the exactly summed stratum). The test accepts iff ``Δ̂ > log u`` (exact, Metropolis)
    or ``Δ̂ > logit(u)`` (Barker), so a threshold outside the interval decides as the data
    would, for every batch: a proposal far in the tail is rejected without its minibatch.
    Returns 1 (accept), 0 (reject) or -1 (the data must decide).
    """
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


@njit
def bounded_barker_law(source, residuals, rng, theta, theta_new, n_data, rest, variance, delta,
                       temperature, minibatches):
    """The law of :func:`bounded_barker` on the terms of ``source`` divided by ``temperature``.

    ``variance`` is the bound ``V`` (NaN: none, the exact test on every term). ``minibatches``
    (a minibatch source, :mod:`._minibatches`) holds the strata and draws the minibatch: with
    strata (exact rows not empty) the terms of the exact stratum are summed exactly and the
    minibatch is drawn from the sampled stratum; without, from all N rows.
    """
    if not rest > -math.inf:
        return False, 0, 0, -math.inf, True
    log_u = log_uniform(rng)
    exact_stratum = exact_rows(minibatches)
    if variance != variance:  # nothing bounds the terms: the exact test on all of them
        estimate = terms_sum(source, theta, theta_new, exact_stratum, True,
                             residuals) / temperature + rest
        return log_u < estimate, n_data, n_data, estimate, False
    strata = exact_stratum.size > 0
    n_sampled = sampled_count(minibatches, n_data)
    size = bounded_batch_size_compiled(n_sampled, variance, delta)
    exact = size == n_sampled
    barker = not exact
    n_exact = exact_stratum.size if strata else 0
    fixed = 0.0
    if strata:
        fixed = terms_sum(source, theta, theta_new, exact_stratum, False,
                          residuals) / temperature
        if fixed == -math.inf:
            return False, n_exact, n_data, -math.inf, barker
    centre = rest + fixed
    reported = size + n_data - n_sampled
    decided = decided_by_bound(log_u, centre, n_sampled, variance, size)
    if decided >= 0:
        return decided == 1, n_exact, reported, math.nan, barker
    if exact:
        estimate = centre + sampled_sum(minibatches, source, theta, theta_new,
                                        residuals) / temperature
        return log_u < estimate, n_data, n_data, estimate, False
    total = minibatch_sum(minibatches, source, rng, theta, theta_new, n_sampled, size,
                          residuals)
    used = size + n_exact
    if total == -math.inf:
        return False, used, reported, -math.inf, barker
    estimate = centre + n_sampled * (total / size) / temperature
    return log_u < log_expit(estimate), used, reported, estimate, True


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
        exact = _NO_ROWS if strata is None else np.sort(strata.exact)
        with registered(_sum_of(terms, n_data)) as handle:
            accepted, _, reported, estimate, barker_rule = bounded_barker_law(
                CallbackTerms(handle), False, rng, _NO_ROWS, _NO_ROWS, n_data, rest,
                math.nan if bound is None else bound, delta, 1.0,
                shuffled_minibatches(exact, n_data))
        return AcceptInfo(bool(accepted), terms.n_evaluations, int(reported), float(estimate),
                          not barker_rule, 1, "barker" if barker_rule else "metropolis")

    return _declare(bounded_barker_test, "bounded_barker", SUBSAMPLED_BARKER,
                    uses_bounds=("variance_bound", "strata"),
                    compiled_law=("bounded_barker", delta))
