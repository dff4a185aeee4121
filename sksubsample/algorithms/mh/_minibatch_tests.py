"""The tests that grow a minibatch until a rule decides, and the test as a race.

``minibatch_barker`` (Seita et al. 2017, Algorithm 1), ``austerity`` (Korattikara et al. 2014,
Algorithm 1) and ``adaptive_subsampling`` (Bardenet et al. 2014, Algorithm 2) share one loop
(:func:`_growing_batch_test`) that draws a minibatch without replacement in increments and asks
the test's rule after every look; ``racing`` (Chen & Ghahramani 2016, Eq. 12) runs the test as
a two-armed race. They follow the one signature of :mod:`._acceptance`.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from scipy import stats

from ..._utils import check_open_unit_interval, check_positive
from ..bandits import race
from ..sampling import IndexSampler
from ._acceptance import (
    SUBSAMPLED_BARKER,
    SUBSAMPLED_METROPOLIS,
    AcceptInfo,
    _check_batch_size,
    _declare,
    _early_reject,
    _prologue,
    _terms,
    log_expit,
    log_uniform,
)
from ._correction import BarkerCorrection
from ._correction import _check_sigma as check_sigma

__all__ = ["adaptive_subsampling", "austerity", "minibatch_barker", "novak_bound", "racing"]


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
    elif not isinstance(correction, BarkerCorrection):
        raise TypeError(f"correction must be a BarkerCorrection or None, got "
                        f"{type(correction).__name__}")
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
                return bool(log_uniform(rng) < log_expit(delta_star))
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
        mu0 = (log_uniform(rng) - rest) / n_data

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
        psi = (log_uniform(rng) - rest) / n_data
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


def racing(*, bound="normal", delta=0.05, first_batch=50, variance="pairwise", method="auto"):
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
    method : {"auto", "racing"}, default "auto"
        ``"auto"``: the race stops when the terms it would still read, projected from those
        it has read, cost more than the exact sum of all terms, and the exact Metropolis test
        decides (see :func:`race`); ``"racing"``: the race runs to its end.

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
    first_batch = _check_batch_size(first_batch, "first_batch")
    if method not in ("auto", "racing"):
        raise ValueError(f"method must be 'auto' or 'racing', got {method!r}")

    def racing_test(log_ratio_terms, n_data, log_ratio_rest, random_state, *, term_bound=None):
        n_data, rest, rng, c_bound = _prologue(n_data, log_ratio_rest, random_state, term_bound,
                                               first_batch, "first_batch")
        if not rest > -math.inf:
            return _early_reject()
        log_u = log_uniform(rng)
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
                      first_batch=first_batch, method=method, random_state=rng, **options)
        if terms.saw_neg_inf:
            return AcceptInfo(False, terms.n_evaluations, terms.n_evaluations, -math.inf,
                              False, int(result.n_rounds))
        if result.exact_means is not None:
            # The race stopped paying and the exact sum decided: Δ itself.
            return AcceptInfo(int(result.best) == 1, terms.n_evaluations, n_data,
                              n_data * float(result.exact_means[1]), True, int(result.n_rounds))
        estimate = n_data * seen.mean + rest if seen.n else math.nan
        return AcceptInfo(int(result.best) == 1, terms.n_evaluations, seen.n, estimate,
                          seen.n >= n_data, int(result.n_rounds))

    return _declare(racing_test, f"racing-{bound}", SUBSAMPLED_METROPOLIS)
