"""Metropolis–Hastings acceptance tests behind one signature.

Every test in this module is built by a factory (``metropolis()``, ``barker()``,
``minibatch_barker(...)``, ``racing(...)``, ``austerity(...)``, ``adaptive_subsampling(...)``)
that validates its options once and returns a callable with the **one signature**

.. code-block:: python

    info = test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None)

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
    all N terms, and those evaluations are counted in ``n_evaluated``.

Every test returns an :class:`AcceptInfo` whose ``n_evaluated`` is the number of log-ratio terms
``l_i`` it computed (one term = one datum evaluated at θ and at θ').

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
import threading
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from .._utils import as_generator, check_int, check_open_unit_interval, check_positive
from ._subsample import IndexSampler

__all__ = [
    "ACCEPTANCE_TESTS",
    "AcceptInfo",
    "adaptive_subsampling",
    "austerity",
    "barker",
    "get_acceptance_test",
    "metropolis",
    "minibatch_barker",
    "racing",
]

# Largest sigma accepted for the correction distribution: the logistic distribution has
# variance pi^2 / 3 ~ 3.29, so N(0, sigma^2) can be deconvolved from it only for sigma well below
# 1.81; beyond ~1.8 the correction density no longer exists in practice.
_SIGMA_MAX = 1.8


class AcceptInfo(NamedTuple):
    """What an acceptance test decided and what it cost.

    Attributes
    ----------
    accepted : bool
        Whether θ' is accepted.
    n_evaluated : int
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
    """

    accepted: bool
    n_evaluated: int
    batch_size: int
    log_ratio: float
    exact: bool
    n_rounds: int


# --------------------------------------------------------------------------------------------
# shared machinery
# --------------------------------------------------------------------------------------------


class _Terms:
    """Wraps the user's ``log_ratio_terms``: validation and exact counting of evaluations.

    Called once or a few times per MH step, so the common case costs one pass over the values
    (``isfinite(...).all()``); the NaN / ``+inf`` / ``-inf`` classification is only done when a
    value is not finite.
    """

    __slots__ = ("fn", "n_data", "n_evaluated", "neg_inf")

    def __init__(self, fn, n_data):
        if not callable(fn):
            raise TypeError(
                f"log_ratio_terms must be callable idx -> ndarray, got {type(fn).__name__}"
            )
        self.fn = fn
        self.n_data = n_data
        self.n_evaluated = 0
        self.neg_inf = False

    def __call__(self, idx):
        values = self.fn(idx)
        if type(values) is not np.ndarray or values.dtype != np.float64:
            values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(idx),):
            raise ValueError(
                f"log_ratio_terms(idx) must return an array of shape ({len(idx)},), "
                f"got shape {values.shape}"
            )
        self.n_evaluated += len(idx)
        if not np.isfinite(values).all():
            if np.isnan(values).any() or np.isposinf(values).any():
                raise ValueError(
                    "log_ratio_terms returned NaN or +inf: a per-datum log-likelihood is "
                    "undefined or -inf at the current state; fix the model (log-likelihood "
                    "terms must be finite, or -inf at the proposal only)"
                )
            self.neg_inf = True
        return values


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


def _early_reject():
    """Reject without data: NaN or -inf ``log_ratio_rest`` (e.g. a NaN proposal)."""
    return AcceptInfo(False, 0, 0, -math.inf, False, 0)


def _check_term_bound(term_bound):
    if term_bound is None:
        return None
    if isinstance(term_bound, bool) or not isinstance(term_bound, numbers.Real | np.number):
        raise TypeError(f"term_bound must be a real number or None, got {type(term_bound)}")
    term_bound = float(term_bound)
    if not (term_bound >= 0.0) or math.isinf(term_bound):
        raise ValueError(f"term_bound must be a finite number >= 0, got {term_bound!r}")
    return term_bound


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


def _start_growing_test(n_data, batch_size, log_ratio_rest, random_state):
    """Shared prologue of the tests that grow a minibatch: validated ``(n_data, rest, rng)``."""
    n_data = _check_n_data(n_data)
    _check_batch_fits(batch_size, n_data)
    return n_data, _check_rest(log_ratio_rest), _resolve_rng(random_state)


def _add_batch(terms, sampler, moments, size, n_rounds, cached=None):
    """Evaluate ``size`` more terms into ``moments``.

    Returns the rejecting ``AcceptInfo`` when a term is -inf (zero likelihood at the
    proposal), else None. ``cached`` holds terms already paid for (see ``_honest_term_bound``).
    """
    idx = sampler.draw(size)
    values = cached[idx] if cached is not None else terms(idx)
    if terms.neg_inf:
        return AcceptInfo(False, terms.n_evaluated, moments.n + values.size, -math.inf, False,
                          n_rounds)
    moments.add(values)
    return None


def _log_uniform(rng):
    # log(u) for u ~ U(0, 1] computed as -Exp(1): exact in the tail and never log(0).
    return -float(rng.standard_exponential())


def _exact_all(terms, n_data):
    idx = np.arange(n_data)
    values = terms(idx)
    return values


def _resolve_rng(random_state):
    return as_generator(random_state)


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
    >>> info.accepted, info.n_evaluated
    (True, 100)
    """
    return _full_data_test(lambda delta, rng: _log_uniform(rng) < delta, "metropolis")


def _full_data_test(decide, name):
    """An exact test: ``decide(Δ, rng)`` on ``Δ`` computed from all ``n_data`` terms."""

    def full_data_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                       term_bound=None):
        n_data = _check_n_data(n_data)
        rest = _check_rest(log_ratio_rest)
        rng = _resolve_rng(random_state)
        if not rest > -math.inf:
            return _early_reject()
        terms = _Terms(log_ratio_terms, n_data)
        delta = float(_exact_all(terms, n_data).sum()) + rest
        accepted = bool(decide(delta, rng))
        return AcceptInfo(accepted, terms.n_evaluated, n_data, delta, True, 1)

    full_data_test.name = name
    return full_data_test


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
        lambda delta, rng: delta > -math.inf and _barker_decision(delta, rng), "barker")


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
        from ._correction import BarkerCorrection

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


def _check_sigma(sigma):
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real):
        raise TypeError(f"sigma must be a real number in (0, {_SIGMA_MAX}), got {type(sigma)}")
    sigma = float(sigma)
    if not 0.0 < sigma < _SIGMA_MAX:
        raise ValueError(f"sigma must lie in the open interval (0, {_SIGMA_MAX}), got {sigma!r}")
    return sigma


def _check_batch_size(batch_size, n_data=None):
    batch_size = check_int(batch_size, "batch_size", low=2)
    if n_data is not None and batch_size > n_data:
        raise ValueError(f"batch_size must be <= n_data = {n_data}, got {batch_size}")
    return batch_size


def _check_batch_fits(batch_size, n_data):
    """Per-call check of a batch size validated by the factory against this call's N."""
    if batch_size > n_data:
        raise ValueError(f"batch_size must be <= n_data = {n_data}, got {batch_size}")


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
    >>> info.n_evaluated
    50
    """
    sigma = _check_sigma(sigma)
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

    def minibatch_barker_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                              term_bound=None):
        n_data, rest, rng = _start_growing_test(n_data, batch_size, log_ratio_rest,
                                                random_state)
        if not rest > -math.inf:
            return _early_reject()
        terms = _Terms(log_ratio_terms, n_data)
        sampler = IndexSampler(n_data, rng)
        moments = _Moments()
        n_rounds = 0
        while True:
            n_rounds += 1
            rejected = _add_batch(terms, sampler, moments, batch_size, n_rounds)
            if rejected is not None:
                return rejected
            b = moments.n
            delta_star = n_data * moments.mean + rest
            if b == n_data:
                # Δ is exact: fall back to the exact Barker test.
                accepted = _barker_decision(delta_star, rng)
                return AcceptInfo(accepted, terms.n_evaluated, b, delta_star, True, n_rounds)
            s2 = n_data * n_data * (1.0 - b / n_data) * moments.var(ddof=1) / b
            if s2 >= sigma2:
                continue
            if b >= min_novak_size:
                x = moments.all_values()
                sd = math.sqrt(moments.var(ddof=0))
                eps = (novak_bound((x - moments.mean) / sd, b) if sd > 0 else 0.0)
                if eps > delta:
                    continue
            elif delta is not None:
                continue
            z, x_corr = noise(rng)
            x_nc = math.sqrt(sigma2 - s2) * z  # N(0, σ² - s²_Δ*)
            accepted = bool(delta_star + x_nc + x_corr > 0.0)
            return AcceptInfo(accepted, terms.n_evaluated, b, delta_star, False, n_rounds)

    minibatch_barker_test.name = "minibatch_barker"
    minibatch_barker_test.correction = correction
    return minibatch_barker_test


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
    >>> info.accepted, info.n_evaluated
    (True, 100)
    """
    epsilon = check_open_unit_interval(epsilon, "epsilon")
    batch_size = _check_batch_size(batch_size)

    def austerity_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                       term_bound=None):
        n_data, rest, rng = _start_growing_test(n_data, batch_size, log_ratio_rest,
                                                random_state)
        if not rest > -math.inf:
            return _early_reject()
        mu0 = (_log_uniform(rng) - rest) / n_data
        terms = _Terms(log_ratio_terms, n_data)
        sampler = IndexSampler(n_data, rng)
        moments = _Moments()
        n_rounds = 0
        while True:
            n_rounds += 1
            rejected = _add_batch(terms, sampler, moments, batch_size, n_rounds)
            if rejected is not None:
                return rejected
            n = moments.n
            mean = moments.mean
            estimate = n_data * mean + rest
            if n == n_data:
                return AcceptInfo(bool(mean > mu0), terms.n_evaluated, n, estimate, True,
                                  n_rounds)
            s = math.sqrt(moments.var(ddof=1) / n * (1.0 - (n - 1) / (n_data - 1)))
            gap = abs(mean - mu0)
            if s == 0.0:
                if gap > 0.0:
                    return AcceptInfo(bool(mean > mu0), terms.n_evaluated, n, estimate, False,
                                      n_rounds)
                continue
            if stats.t.sf(gap / s, df=n - 1) < epsilon:
                return AcceptInfo(bool(mean > mu0), terms.n_evaluated, n, estimate, False,
                                  n_rounds)

    austerity_test.name = "austerity"
    return austerity_test


# --------------------------------------------------------------------------------------------
# Bardenet et al. (2014): adaptive subsampling with empirical Bernstein-Serfling bounds
# --------------------------------------------------------------------------------------------


def _honest_term_bound(terms, n_data):
    """``C = max_i |l_i|`` over the whole data set, paid for (and counted) term by term."""
    values = _exact_all(terms, n_data)
    return float(np.max(np.abs(values))) if not terms.neg_inf else math.inf, values


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
        counted in ``n_evaluated`` (``batch_size`` of the info still reports the minibatch
        the decision used, as in Seita et al. Fig. 2).

    Examples
    --------
    >>> import numpy as np
    >>> test = adaptive_subsampling(delta=0.01, batch_size=100)
    >>> terms = np.full(10_000, 1e-3)
    >>> info = test(lambda idx: terms[idx], 10_000, 0.0, 0, term_bound=1e-3)
    >>> info.accepted, info.n_evaluated
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

    def adaptive_subsampling_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *,
                                  term_bound=None):
        n_data, rest, rng = _start_growing_test(n_data, batch_size, log_ratio_rest,
                                                random_state)
        bound = _check_term_bound(term_bound)
        if not rest > -math.inf:
            return _early_reject()
        psi = (_log_uniform(rng) - rest) / n_data
        terms = _Terms(log_ratio_terms, n_data)
        cached = None
        if bound is None:
            bound, cached = _honest_term_bound(terms, n_data)
            if terms.neg_inf:
                return AcceptInfo(False, terms.n_evaluated, n_data, -math.inf, True, 0)
        sampler = IndexSampler(n_data, rng)
        moments = _Moments()
        target_size = batch_size
        look = 0
        while True:
            look += 1
            rejected = _add_batch(terms, sampler, moments, target_size - moments.n, look,
                                  cached)
            if rejected is not None:
                return rejected
            t = moments.n
            mean = moments.mean
            estimate = n_data * mean + rest
            if t == n_data:
                return AcceptInfo(bool(mean > psi), terms.n_evaluated, t, estimate, True, look)
            delta_k = (p - 1.0) * delta / (p * look**p)
            log_term = math.log(3.0 / delta_k)
            f_t = (t - 1) / n_data
            c = (math.sqrt(moments.var(ddof=0)) * math.sqrt(2.0 * (1.0 - f_t) * log_term / t)
                 + 6.0 * bound * log_term / t)
            if abs(mean - psi) >= c:
                return AcceptInfo(bool(mean > psi), terms.n_evaluated, t, estimate, False, look)
            target_size = min(n_data, math.ceil(gamma * t))

    adaptive_subsampling_test.name = "adaptive_subsampling"
    return adaptive_subsampling_test


# --------------------------------------------------------------------------------------------
# racing (Chen & Ghahramani 2016, Eq. 12)
# --------------------------------------------------------------------------------------------


class _ZeroLikelihood(Exception):
    """Raised inside a race when a term is -inf (the proposal has zero likelihood)."""


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
        from ._racing import race

        n_data = _check_n_data(n_data)
        _check_batch_fits(first_batch, n_data)
        rest = _check_rest(log_ratio_rest)
        c_bound = _check_term_bound(term_bound)
        rng = _resolve_rng(random_state)
        if not rest > -math.inf:
            return _early_reject()
        log_u = _log_uniform(rng)
        terms = _Terms(log_ratio_terms, n_data)
        cached = None
        if bound == "ebs" and c_bound is None:
            c_bound, cached = _honest_term_bound(terms, n_data)
            if terms.neg_inf:
                return AcceptInfo(False, terms.n_evaluated, n_data, -math.inf, True, 0)
        seen = [0]
        sums = [0.0]

        def rewards(arms, idx):
            arms = np.asarray(arms)
            idx = np.asarray(idx)
            out = np.empty((arms.size, idx.size))
            need_data = bool(np.any(arms == 1))
            if need_data:
                values = cached[idx] if cached is not None else terms(idx)
                if terms.neg_inf:
                    # Δ = -inf exactly; the race cannot take -inf rewards, so stop it here.
                    raise _ZeroLikelihood
                seen[0] += idx.size
                sums[0] += float(values.sum())
            for row, arm in enumerate(arms):
                if arm == 0:
                    out[row] = log_u / n_data
                else:
                    # -inf terms make arm 1's mean -inf: the race must reject.
                    out[row] = values + rest / n_data
            return out

        options = {}
        if bound == "ebs":
            # arm 0 is constant; arm 1's terms lie in [-C, C] (Bardenet et al. Eq. 16).
            options["reward_range"] = np.array([0.0, 2.0 * c_bound])
        try:
            result = race(rewards, 2, n_data, delta=delta, bound=bound, variance=variance,
                          first_batch=first_batch, random_state=rng, **options)
        except _ZeroLikelihood:
            return AcceptInfo(False, terms.n_evaluated, seen[0], -math.inf, False, 0)
        exact = seen[0] >= n_data
        estimate = (n_data * sums[0] / seen[0] + rest) if seen[0] else math.nan
        accepted = int(result.best) == 1 and not terms.neg_inf
        return AcceptInfo(bool(accepted), terms.n_evaluated, seen[0], estimate, exact,
                          int(result.n_rounds))

    racing_test.name = f"racing-{bound}"
    return racing_test


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------

ACCEPTANCE_TESTS = {
    "metropolis": metropolis,
    "barker": barker,
    "minibatch_barker": minibatch_barker,
    "austerity": austerity,
    "adaptive_subsampling": adaptive_subsampling,
    "racing": racing,
}

# Options each factory understands, so a driver can forward shared settings (batch_size, delta)
# to the tests that use them and not to the others.
_FACTORY_OPTIONS = {
    "metropolis": (),
    "barker": (),
    "minibatch_barker": ("sigma", "batch_size", "delta", "correction"),
    "austerity": ("epsilon", "batch_size"),
    "adaptive_subsampling": ("delta", "gamma", "p", "batch_size"),
    "racing": ("bound", "delta", "first_batch", "variance"),
}


def get_acceptance_test(test, **options):
    """Build an acceptance test from a name (or pass a callable through).

    Parameters
    ----------
    test : str or callable
        One of ``"metropolis"``, ``"barker"``, ``"minibatch_barker"``, ``"austerity"``,
        ``"adaptive_subsampling"``, ``"racing"``, ``"racing-normal"``, ``"racing-ebs"``, or a
        callable with the signature of this module.
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
    name = test
    if name in ("racing-normal", "racing-ebs"):
        options.setdefault("bound", name.split("-", 1)[1])
        name = "racing"
    if name not in ACCEPTANCE_TESTS:
        raise ValueError(
            f"test must be one of {sorted([*ACCEPTANCE_TESTS, 'racing-normal', 'racing-ebs'])} "
            f"or a callable, got {test!r}"
        )
    if name == "racing" and options.get("batch_size") is not None:
        if options.get("first_batch") is not None:
            raise ValueError("give batch_size or first_batch for racing, not both")
        options["first_batch"] = options.pop("batch_size")
    allowed = _FACTORY_OPTIONS[name]
    kwargs = {}
    for key, value in options.items():
        if key in allowed:
            if value is not None:
                kwargs[key] = value
        elif value is not None:
            raise ValueError(f"test {test!r} does not take the option {key!r}")
    return ACCEPTANCE_TESTS[name](**kwargs)
