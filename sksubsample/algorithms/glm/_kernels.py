"""Compiled per-datum kernels of the logistic GLM: terms, residuals, gradients, bounds.

A design matrix reaches these kernels as six arguments ``(X, data, indices, indptr, sparse,
intercept)``: a dense ``(N, p)`` array (with empty CSR arrays) or the three arrays of a CSR
matrix (with an empty ``(0, p)`` ``X``), so one compiled kernel serves both and a sparse row
costs its non-zeros; ``intercept`` appends a column of ones that is not stored (its coefficient
is the last entry of a parameter vector), so that the rows are read as they were given. X may be
float32 or float64: its values are read as they are and every sum is in float64.

The response is coded as signs ``s_i = ±1`` and ``ℓ_i(θ) = ω_i log σ(s_i x_iᵀθ)`` with case
weights ``ω_i`` (an empty ``weights`` array means all ones). The Taylor proxy of row ``i`` around
the expansion point θ̂ is ``c_i u + w_i u²/2 + t_i u³/6`` at offset ``u = x_iᵀ(θ - θ̂)``, with
``c_i, w_i, t_i`` the first, second and third derivatives of ``ℓ_i`` in the linear predictor at
``ẑ_i = x_iᵀθ̂`` (weights included; ``t_i = 0`` for a second-order expansion). They are computed
from the row where it is read (:func:`logistic_derivatives`, the one law of them, which the
set-up's passes sum too): no table of N rows' coefficients is kept, and a row read costs its
features and sign only, which on large data is a memory miss less per row.

These functions are the only implementation of these quantities: :class:`GLMTarget` calls them
from Python and the compiled MH step calls them through the model the target lends it
(:mod:`._model`). ``log σ`` is the MH tests' :func:`~sksubsample.algorithms.mh.log_expit`.
"""

from __future__ import annotations

import math

import numpy as np

from .._elementary import exp_nonpositive, log1p_unit
from .._numba import njit
from ..mh import log_expit as log_sigmoid
from ..mh import log_expit_from
from ._packed import LANES, ROWS, lane_sums, lane_sums_rows

__all__ = [
    "axpy_rows",
    "cubic_form",
    "dense_dots",
    "grad_sum",
    "log_sigmoid",
    "logistic_derivatives",
    "logistic_derivatives_given",
    "logistic_terms_given",
    "loglik_ratio_sum",
    "loglik_ratio_terms",
    "loglik_terms",
    "proxy_value",
    "quadratic_form",
    "residual_bound",
    "residual_sum",
    "residual_terms",
    "row_dots",
]


#: Rows whose linear predictors the packed loops compute before their sigmoids (one packed loop).
_GRAD_CHUNK = 64
#: A residual sum over fewer rows loops over them one at a time: the packed loop's chunk
#: arrays cost more than it saves there.
_PACKED_FROM = 16


@njit(inline="always")
def _expit(z):
    """``σ(z)``: ``1 / (1 + e)`` for ``z >= 0``, else ``e / (1 + e)``, with ``e = exp(-|z|)``
    (:func:`~sksubsample.algorithms._elementary.exp_nonpositive`; a select rather than a
    branch, which the rows' signs would make unpredictable, so that a loop of them is
    packed)."""
    e = exp_nonpositive(-abs(z))
    return (1.0 if z >= 0.0 else e) / (1.0 + e)


@njit(inline="always")
def _weight(weights, i):
    return weights[i] if weights.size else 1.0


@njit(inline="always")
def _dense_dot(X, i, v):
    """``sum_j X[i, j] v[j]`` over the row's stored columns, in four interleaved partial sums
    (a fixed order, so every caller gets the same bits): partial sum ``l`` takes the columns
    ``j ≡ l (mod 4)`` of the whole blocks of four (:func:`~._packed.lane_sums`, the lanes of
    one packed vector), the last ``p mod 4`` columns go to the first. A single running sum
    would wait for each product's addition before the next, four overlap."""
    p = X.shape[1]
    s0, s1, s2, s3 = lane_sums(X, i, v)
    for j in range(p - p % LANES, p):
        s0 += X[i, j] * v[j]
    return (s0 + s1) + (s2 + s3)


@njit(inline="always")
def dense_dots(X, intercept, i, v):
    """:func:`row_dot` of the dense rows ``i .. i + 3``, the same bits as four calls: their
    lanes summed side by side (:func:`~._packed.lane_sums_rows`), four independent chains of
    additions where one row's sum is a chain the processor waits on."""
    p = X.shape[1]
    (a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3,
     d0, d1, d2, d3) = lane_sums_rows(X, i, v)
    for j in range(p - p % LANES, p):
        a0 += X[i, j] * v[j]
        b0 += X[i + 1, j] * v[j]
        c0 += X[i + 2, j] * v[j]
        d0 += X[i + 3, j] * v[j]
    za = (a0 + a1) + (a2 + a3)
    zb = (b0 + b1) + (b2 + b3)
    zc = (c0 + c1) + (c2 + c3)
    zd = (d0 + d1) + (d2 + d3)
    if intercept:
        last = v[v.size - 1]
        return za + last, zb + last, zc + last, zd + last
    return za, zb, zc, zd


@njit(inline="always")
def _sparse_dot(data, indices, indptr, i, v, p):
    """:func:`_dense_dot` of a CSR row of ``p`` columns: each stored entry added to the
    partial sum its column has there (the rows' columns are sorted), so that the sum has the
    same bits as the dense row's (a column not stored adds an exact zero there).

    Each entry is added to all four partial sums, times 1 in its own and 0 in the others: an
    added zero leaves a sum's bits as they are, and no branch on the column's lane (which a
    processor mispredicts on most entries) is taken; about twice as fast on rows read in
    order. (A non-finite ``v[j]`` gives NaN, as the dense row's zeros times it do.)"""
    s0 = s1 = s2 = s3 = 0.0
    tail = p - p % 4
    for k in range(indptr[i], indptr[i + 1]):
        j = indices[k]
        term = data[k] * v[j]
        lane = (j & 3) * (j < tail)
        s0 += term * (lane == 0)
        s1 += term * (lane == 1)
        s2 += term * (lane == 2)
        s3 += term * (lane == 3)
    return (s0 + s1) + (s2 + s3)


@njit(inline="always")
def row_dot(X, data, indices, indptr, sparse, intercept, i, v):
    """``x_iᵀ v``: the one order of the sum every kernel of the package computes a row's
    linear predictor in (the set-up's passes and the chains alike)."""
    s = (_sparse_dot(data, indices, indptr, i, v, v.size - 1 if intercept else v.size)
         if sparse else _dense_dot(X, i, v))
    return s + v[v.size - 1] if intercept else s


@njit(inline="always")
def row_dot2(X, data, indices, indptr, sparse, intercept, i, v1, v2):
    """``(x_iᵀ v1, x_iᵀ v2)`` (the row, read once from memory, is in the cache for the
    second)."""
    return (row_dot(X, data, indices, indptr, sparse, intercept, i, v1),
            row_dot(X, data, indices, indptr, sparse, intercept, i, v2))


@njit(inline="always")
def row_dot3(X, data, indices, indptr, sparse, intercept, i, v1, v2, v3):
    """``(x_iᵀ v1, x_iᵀ v2, x_iᵀ v3)`` (as :func:`row_dot2`)."""
    return (row_dot(X, data, indices, indptr, sparse, intercept, i, v1),
            row_dot(X, data, indices, indptr, sparse, intercept, i, v2),
            row_dot(X, data, indices, indptr, sparse, intercept, i, v3))


@njit(inline="always")
def row_dots(X, data, indices, indptr, sparse, intercept, start, count, v, out):
    """``out[k] = x_{start+k}ᵀ v`` for ``k < count`` (:func:`row_dot`'s bits): dense rows four
    at a time (:func:`dense_dots`), the rest one at a time."""
    first = 0
    if not sparse:
        while first + ROWS <= count:
            out[first], out[first + 1], out[first + 2], out[first + 3] = dense_dots(
                X, intercept, start + first, v)
            first += ROWS
    for k in range(first, count):
        out[k] = row_dot(X, data, indices, indptr, sparse, intercept, start + k, v)


@njit(inline="always")
def logistic_terms_given(z, s, e):
    """``(σ(-s z), σ(s z) σ(-s z))`` of ``log σ(s z)`` given ``e = exp(-|z|)``, the one
    exponential the row's first and second derivatives (and ``log σ`` itself, by
    :func:`~sksubsample.algorithms.mh.log_expit_given`) are rational in. A loop over many
    rows computes ``e`` in arithmetic only
    (:func:`~sksubsample.algorithms._elementary.exp_nonpositive`), so that it is packed; a
    single row calls the C library's ``exp``, faster one value at a time. The two agree to
    within a unit in the last place."""
    inverse = 1.0 / (1.0 + e)
    # σ(-s z) is σ(-|z|) = e / (1 + e) when s z >= 0, else σ(|z|) = 1 / (1 + e).
    tail = e * inverse if s * z >= 0.0 else inverse
    return tail, e * inverse * inverse


@njit(inline="always")
def logistic_derivatives(z, s, w, order):
    """``(c, w₂, t)``: the first, second and (``order`` 3, else 0) third derivatives of
    ``ω log σ(s z)`` in ``z``, with ``ω = w``: ``ω s σ(-s z)``, ``-ω σ(z) σ(-z)`` and
    ``-ω s σ(z) σ(-z) (1 - 2 σ(s z))``."""
    return logistic_derivatives_given(z, s, w, order, math.exp(-abs(z)))


@njit(inline="always")
def logistic_derivatives_given(z, s, w, order, e):
    """:func:`logistic_derivatives` given ``e = exp(-|z|)`` (as :func:`logistic_terms_given`:
    computed in arithmetic only by a packed loop over many rows)."""
    tail, phi = logistic_terms_given(z, s, e)
    t = -w * s * phi * (2.0 * tail - 1.0) if order == 3 else 0.0
    return w * s * tail, -w * phi, t


@njit(inline="always")
def row_axpy(X, data, indices, indptr, sparse, intercept, i, alpha, out):
    """``out += alpha x_i``."""
    if intercept:
        out[out.size - 1] += alpha
    if sparse:
        for p in range(indptr[i], indptr[i + 1]):
            out[indices[p]] += alpha * data[p]
    else:
        for j in range(X.shape[1]):
            out[j] += alpha * X[i, j]


@njit(inline="always")
def _prefetch_rows(X, data, indices, indptr, sparse, intercept, signs, weights, idx):
    """Read one word of every cache line that the terms of the rows ``idx`` will read, in a
    loop whose loads do not depend on each other (one per 8 entries of a row: a 64-byte line).

    A minibatch's rows are scattered through arrays far larger than the caches, so each row
    costs a few memory misses (its features, its sign and weight). Computed
    row after row, the misses of one row are barely overlapped with the next row's, whose
    loads wait behind the arithmetic; issued together here, they overlap, and the terms then
    read cached lines (on minibatches of about 15 rows of a 10^6 x 20 design, an iteration of
    the compiled MH chain went from about 10 to 9 microseconds). Returns the largest loaded
    value, which the caller tests for NaN, so that the compiler keeps the loads.
    """
    touched = -math.inf
    for k in range(idx.size):
        i = idx[k]
        touched = max(touched, signs[i])
        if weights.size:
            touched = max(touched, weights[i])
        if sparse:
            for p in range(indptr[i], indptr[i + 1], 8):
                touched = max(touched, data[p], float(indices[p]))
        else:
            for j in range(0, X.shape[1], 8):
                touched = max(touched, X[i, j])
            touched = max(touched, X[i, X.shape[1] - 1])
    return touched


@njit(inline="always")
def _ratio(X, data, indices, indptr, sparse, intercept, signs, weights, i, theta, theta_new):
    z, z_new = row_dot2(X, data, indices, indptr, sparse, intercept, i, theta, theta_new)
    s = signs[i]
    return _weight(weights, i) * (log_sigmoid(s * z_new) - log_sigmoid(s * z))


@njit(inline="always")
def _residual_given(z, z_new, z_hat, s, w, order, log_sig, log_sig_new, e_hat):
    """A row's residual from its linear predictors at θ, θ' and θ̂, ``log σ(s z)``,
    ``log σ(s z')`` and ``exp(-|ẑ|)``: the one formula of the per-row kernel (the C
    library's ``exp`` and ``log1p``) and of the packed loops (in arithmetic only)."""
    raw = w * (log_sig_new - log_sig)
    c, w2, t = logistic_derivatives_given(z_hat, s, w, order, e_hat)
    u = z - z_hat
    v = z_new - z_hat
    # h(v) - h(u) = (v - u) [c + w (v + u)/2 + t (v² + uv + u²)/6]
    return raw - (v - u) * (c + 0.5 * w2 * (v + u) + t * (v * v + u * v + u * u) / 6.0)


@njit(inline="always")
def _residual(X, data, indices, indptr, sparse, intercept, signs, weights, reference, order, i,
              theta, theta_new):
    z, z_new, z_hat = row_dot3(X, data, indices, indptr, sparse, intercept, i, theta,
                               theta_new, reference)
    s = signs[i]
    return _residual_given(z, z_new, z_hat, s, _weight(weights, i), order,
                           log_sigmoid(s * z), log_sigmoid(s * z_new), math.exp(-abs(z_hat)))


@njit(inline="always")
def _residual_rows(X, data, indices, indptr, sparse, intercept, signs, weights, reference,
                   order, theta, theta_new, idx, n_all):
    """The sum of the residuals of the rows ``idx`` (of the first ``n_all`` rows when > 0) in
    chunks, as :func:`_ratio_rows`: the chunk's linear predictors, signs and weights, then its
    residuals in a loop without a sum or a call (packed), then the sum in row order. About
    five times faster per row than a loop of :func:`_residual`, whose exponentials and
    logarithms are the C library's, one value at a time."""
    count = n_all if n_all > 0 else idx.size
    z, z_new, z_hat = np.empty(_GRAD_CHUNK), np.empty(_GRAD_CHUNK), np.empty(_GRAD_CHUNK)
    s, w, terms = np.empty(_GRAD_CHUNK), np.empty(_GRAD_CHUNK), np.empty(_GRAD_CHUNK)
    total = 0.0
    for start in range(0, count, _GRAD_CHUNK):
        rows = min(_GRAD_CHUNK, count - start)
        if n_all > 0:
            row_dots(X, data, indices, indptr, sparse, intercept, start, rows, theta, z)
            row_dots(X, data, indices, indptr, sparse, intercept, start, rows, theta_new, z_new)
            row_dots(X, data, indices, indptr, sparse, intercept, start, rows, reference, z_hat)
            for k in range(rows):
                s[k] = signs[start + k]
                w[k] = _weight(weights, start + k)
        else:
            for k in range(rows):
                i = idx[start + k]
                z[k], z_new[k], z_hat[k] = row_dot3(X, data, indices, indptr, sparse, intercept,
                                                    i, theta, theta_new, reference)
                s[k] = signs[i]
                w[k] = _weight(weights, i)
        for k in range(rows):
            sk = s[k]
            terms[k] = _residual_given(z[k], z_new[k], z_hat[k], sk, w[k], order,
                                       _log_sigmoid_packed(sk * z[k]),
                                       _log_sigmoid_packed(sk * z_new[k]),
                                       exp_nonpositive(-abs(z_hat[k])))
        for k in range(rows):
            total += terms[k]
    return total


@njit(inline="always")
def _log_sigmoid_packed(x):
    """:func:`log_sigmoid` with the exponential and ``log1p`` in arithmetic only
    (:mod:`~sksubsample.algorithms._elementary`), for loops over many rows that are packed."""
    return log_expit_from(x, log1p_unit(exp_nonpositive(-abs(x))))


@njit(inline="always")
def _ratio_rows(X, data, indices, indptr, sparse, intercept, signs, weights, theta, theta_new,
                n_all):
    # Chunks of rows: their linear predictors, then their terms in a loop without a sum or a
    # call (packed), then the sum in row order, as one loop over the rows would add them.
    z, z_new, terms = np.empty(_GRAD_CHUNK), np.empty(_GRAD_CHUNK), np.empty(_GRAD_CHUNK)
    total = 0.0
    for start in range(0, n_all, _GRAD_CHUNK):
        rows = min(_GRAD_CHUNK, n_all - start)
        row_dots(X, data, indices, indptr, sparse, intercept, start, rows, theta, z)
        row_dots(X, data, indices, indptr, sparse, intercept, start, rows, theta_new, z_new)
        for k in range(rows):
            s = signs[start + k]
            terms[k] = _weight(weights, start + k) * (_log_sigmoid_packed(s * z_new[k])
                                                      - _log_sigmoid_packed(s * z[k]))
        for k in range(rows):
            total += terms[k]
    return total


@njit
def loglik_terms(X, data, indices, indptr, sparse, intercept, signs, weights, theta, idx, out):
    """``out[k] = ℓ_{idx[k]}(θ)``."""
    for k in range(idx.size):
        i = idx[k]
        z = row_dot(X, data, indices, indptr, sparse, intercept, i, theta)
        out[k] = _weight(weights, i) * log_sigmoid(signs[i] * z)


@njit
def loglik_ratio_terms(X, data, indices, indptr, sparse, intercept, signs, weights, theta,
                       theta_new, idx, out):
    """``out[k] = ℓ_i(θ') - ℓ_i(θ)`` for ``i = idx[k]``."""
    for k in range(idx.size):
        out[k] = _ratio(X, data, indices, indptr, sparse, intercept, signs, weights, idx[k],
                        theta, theta_new)


@njit(error_model="numpy")
def loglik_ratio_sum(X, data, indices, indptr, sparse, intercept, signs, weights, theta,
                     theta_new, idx, n_all):
    """``sum_i ℓ_i(θ') - ℓ_i(θ)`` over ``idx`` (over ``range(n_all)`` when ``n_all`` > 0)."""
    if n_all > 0:
        # The exact test's sum: one loop for each layout, as in grad_sum (with the flag read
        # in the loop, 1.4 times as long on dense rows; the same bits).
        if sparse:
            return _ratio_rows(X, data, indices, indptr, True, intercept, signs, weights, theta,
                               theta_new, n_all)
        return _ratio_rows(X, data, indices, indptr, False, intercept, signs, weights, theta,
                           theta_new, n_all)
    if math.isnan(_prefetch_rows(X, data, indices, indptr, sparse, intercept, signs, weights,
                                 idx)):
        return math.nan  # a NaN among the values the terms read (and the loads are kept)
    total = 0.0
    for k in range(idx.size):
        total += _ratio(X, data, indices, indptr, sparse, intercept, signs, weights, idx[k],
                        theta, theta_new)
    return total


@njit
def residual_terms(X, data, indices, indptr, sparse, intercept, signs, weights, reference,
                   order, theta, theta_new, idx, out):
    """Control-variate residuals ``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` for ``idx``, of
    the proxies of ``order`` around ``reference``."""
    for k in range(idx.size):
        out[k] = _residual(X, data, indices, indptr, sparse, intercept, signs, weights,
                           reference, order, idx[k], theta, theta_new)


@njit(error_model="numpy")
def residual_sum(X, data, indices, indptr, sparse, intercept, signs, weights, reference, order,
                 theta, theta_new, idx, n_all):
    """The sum of the residuals of :func:`residual_terms` over ``idx`` (over
    ``range(n_all)`` when ``n_all`` > 0): packed (:func:`_residual_rows`) from
    :data:`_PACKED_FROM` rows, equal to the terms' sum to rounding (each term within a few
    units in the last place of the C library's). ``n_all`` has no default: a call without it
    would be another specialisation, about 20 s to compile."""
    # error_model="numpy" and one call for each layout: as in grad_sum, so that LLVM packs the
    # loops (a Python division's test of a zero divisor, 1 + e >= 1 here, would keep it from).
    if n_all == 0:
        if math.isnan(_prefetch_rows(X, data, indices, indptr, sparse, intercept, signs,
                                     weights, idx)):
            return math.nan  # a NaN among the values the terms read (and the loads are kept)
        if idx.size < _PACKED_FROM:
            total = 0.0
            for k in range(idx.size):
                total += _residual(X, data, indices, indptr, sparse, intercept, signs, weights,
                                   reference, order, idx[k], theta, theta_new)
            return total
    if sparse:
        return _residual_rows(X, data, indices, indptr, True, intercept, signs, weights,
                              reference, order, theta, theta_new, idx, n_all)
    return _residual_rows(X, data, indices, indptr, False, intercept, signs, weights, reference,
                          order, theta, theta_new, idx, n_all)


@njit(inline="always")
def axpy_rows(X, data, indices, indptr, sparse, intercept, start, count, alphas, out):
    """``out += sum_k alphas[k] x_{start+k}`` for ``k < count``: dense rows four at a time
    (:func:`_dense_axpy_rows`), the rest one at a time (:func:`row_axpy`); each entry's terms
    added in row order either way, so the bits of one row at a time."""
    done = 0
    if not sparse:
        while done + ROWS <= count:
            _dense_axpy_rows(X, intercept, start + done, alphas, done, out)
            done += ROWS
    for k in range(done, count):
        row_axpy(X, data, indices, indptr, sparse, intercept, start + k, alphas[k], out)


@njit(inline="always")
def _dense_axpy_rows(X, intercept, i, alphas, k, out):
    """``out += sum_m alphas[k + m] x_{i+m}`` over four rows ``m``, each entry's terms added in
    row order (the bits of four :func:`row_axpy`) in one pass over ``out``, which is read and
    written once per four rows rather than once per row."""
    a0, a1, a2, a3 = alphas[k], alphas[k + 1], alphas[k + 2], alphas[k + 3]
    if intercept:
        out[out.size - 1] = (((out[out.size - 1] + a0) + a1) + a2) + a3
    for j in range(X.shape[1]):
        out[j] = ((((out[j] + a0 * X[i, j]) + a1 * X[i + 1, j]) + a2 * X[i + 2, j])
                  + a3 * X[i + 3, j])


@njit(inline="always")
def _grad_rows(X, data, indices, indptr, sparse, intercept, signs, weights, theta, n_all, out):
    out[:] = 0.0
    alphas = np.empty(_GRAD_CHUNK)
    for start in range(0, n_all, _GRAD_CHUNK):
        rows = min(_GRAD_CHUNK, n_all - start)
        row_dots(X, data, indices, indptr, sparse, intercept, start, rows, theta, alphas)
        for k in range(rows):  # the rows' ω_i s_i σ(-s_i z_i), a packed loop
            s = signs[start + k]
            alphas[k] = _weight(weights, start + k) * s * _expit(-s * alphas[k])
        axpy_rows(X, data, indices, indptr, sparse, intercept, start, rows, alphas, out)


@njit(error_model="numpy")
def grad_sum(X, data, indices, indptr, sparse, intercept, signs, weights, theta, n_all, out):
    """``out = sum_i ∇ℓ_i(θ) = sum_i ω_i s_i σ(-s_i x_iᵀθ) x_i`` over all ``n_all`` rows."""
    # error_model="numpy": a float division is IEEE's, not Python's (whose test of a zero
    # divisor, 1 + e >= 1 here, kept LLVM from packing the loop over the rows' sigmoids).
    # One loop for each layout, the flag a constant in each: with the flag read inside the
    # loop, LLVM neither unswitches it nor vectorises the row's products (the dense gradient
    # of a 357 x 54 design took 2.4x as long). The same bits either way.
    if sparse:
        _grad_rows(X, data, indices, indptr, True, intercept, signs, weights, theta, n_all, out)
    else:
        _grad_rows(X, data, indices, indptr, False, intercept, signs, weights, theta, n_all,
                   out)


@njit
def cubic_form(packed_coef, a):
    """``sum_{jkl} T_jkl a_j a_k a_l`` of a symmetric 3-tensor stored by its entries with
    ``j <= k <= l`` in lexicographic order, each times the number of its permutations: for each
    pair ``j <= k`` the entries ``l = k .. d-1`` are contiguous, so the inner loop streams."""
    d = a.size
    total = 0.0
    p = 0
    for j in range(d):
        for k in range(j, d):
            inner = 0.0
            for m in range(k, d):
                inner += packed_coef[p] * a[m]
                p += 1
            total += a[j] * a[k] * inner
    return total


@njit
def proxy_value(grad_sum, hess_sum, cubic_coef, order, a):
    """``sum_i [h_i(θ) - ℓ_i(θ̂)] = Gᵀa + aᵀHa/2 (+ T[a, a, a]/6)`` at the offset ``a = θ - θ̂``:
    the proxies' sum, whose differences the control variates add back exactly."""
    value = 0.0
    for j in range(a.size):
        value += grad_sum[j] * a[j]
    value += 0.5 * quadratic_form(hess_sum, a)
    if order == 3:
        value += cubic_form(cubic_coef, a) / 6.0
    return value


@njit(inline="always")
def quadratic_form(matrix, a):
    """``aᵀ M a``."""
    total = 0.0
    d = a.size
    for j in range(d):
        row = 0.0
        for k in range(d):
            row += matrix[j, k] * a[k]
        total += a[j] * row
    return total


@njit(inline="always")
def _whitened_norm(chol, a):
    """``‖Kᵀa‖`` for a lower-triangular K."""
    d = a.size
    total = 0.0
    for k in range(d):
        s = 0.0
        for j in range(k, d):
            s += chol[j, k] * a[j]
        total += s * s
    return math.sqrt(total)


@njit
def residual_bound(order, rho, chol, radii, grams, a, a_new):
    """A bound on ``sum_i r_i²`` over the sampled rows, in O(d²) and without data.

    With ``u_i = x_iᵀa``, ``v_i = x_iᵀa'`` (offsets from the expansion point), ``k = order`` and
    ``M_i`` a bound of ``|∂^{k+1} ℓ_i|`` on ``[ẑ_i - R, ẑ_i + R]``, the Taylor remainder
    ``R_i`` of order ``k`` obeys ``|R_i(z)| <= M_i |z|^{k+1} / (k+1)!`` and
    ``|R_i'(z)| <= M_i |z|^k / k!`` for ``|z| <= R``. With ``m_u = ρ ‖Kᵀa‖ >= max_i |u_i|``
    (Cauchy–Schwarz in the metric of the Laplace precision ``K Kᵀ``, ``ρ`` the largest
    ``‖K⁻¹x_i‖``), likewise ``m_v``, and ``m = max(m_u, m_v) <= R``:

    * ``r_i² <= 2 (R_i(u_i)² + R_i(v_i)²)`` sums to
      ``2/((k+1)!)² (m_u^{2k} aᵀGa + m_v^{2k} a'ᵀGa')``;
    * ``|r_i| <= M_i m^k |v_i - u_i| / k!`` sums to ``m^{2k} (a' - a)ᵀG(a' - a) / (k!)²``;

    with ``G = sum_i M_i² x_i x_iᵀ``. ``grams[j]`` is that matrix for radius ``radii[j]``
    (ascending) and ``grams[-1]`` for the global bound of ``|∂^{k+1} ℓ|`` (any radius); the
    smallest radius covering ``m`` is used and the smaller of the two bounds returned.
    """
    m_u = rho * _whitened_norm(chol, a)
    m_v = rho * _whitened_norm(chol, a_new)
    m = max(m_u, m_v)
    j = 0
    while j < radii.size and radii[j] < m:
        j += 1
    gram = grams[j]
    k_fact = 1.0
    for q in range(2, order + 1):
        k_fact *= q
    k1_fact = k_fact * (order + 1)
    step = a_new - a
    slope = m ** (2 * order) * quadratic_form(gram, step) / (k_fact * k_fact)
    spread = 2.0 / (k1_fact * k1_fact) * (m_u ** (2 * order) * quadratic_form(gram, a)
                                          + m_v ** (2 * order) * quadratic_form(gram, a_new))
    return min(slope, spread)
