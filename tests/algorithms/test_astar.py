"""A* sampling, A* sampling without a bound, and PM-A*.

The target is the two-Gaussian mixture of §5.1, ``p(x) = N(x; -2, 1) + 2 N(x; 2, 1)`` (the
paper's ``phi_P`` has a sign slip), whose CDF is known, with the proposal ``Q = N(0, 2)``.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from sksubsample.algorithms import astar_sample, pm_astar_sample
from sksubsample.algorithms.astar._boxes import _interval, _LocationScale
from tests._stats import assert_ks_cdf

Q = stats.norm(0.0, 2.0)
COMPONENTS = ((-2.0, 0.0), (2.0, math.log(2.0)))  # (mean, log weight)


def log_p(x):
    x = x[:, 0]
    return np.logaddexp(stats.norm.logpdf(x, -2.0, 1.0), math.log(2.0) + stats.norm.logpdf(x, 2.0))


def mixture_cdf(x):
    return (stats.norm.cdf(x, -2.0, 1.0) + 2.0 * stats.norm.cdf(x, 2.0, 1.0)) / 3.0


def mixture_bound(lower, upper, components=COMPONENTS):
    """sup of a sum <= sum of sups; each log N(x; mu, 1) - log N(x; 0, 2) peaks at 4 mu / 3."""
    terms = []
    for mu, log_w in components:
        x = np.clip(4.0 * mu / 3.0, lower[0], upper[0])
        terms.append(log_w + stats.norm.logpdf(x, mu, 1.0) - Q.logpdf(x))
    return float(np.logaddexp.reduce(terms))


def test_astar_with_a_valid_bound_is_exact_ks():
    res = astar_sample(log_p, Q, bound=mixture_bound, n_draws=2000, random_state=11)
    assert res.samples.shape == (2000, 1)
    assert res.converged.all()
    assert_ks_cdf(res.samples[:, 0], mixture_cdf, alpha=0.01, label="A*")


def test_astar_with_an_invalid_bound_fails_the_same_ks_test():
    # Negative control: a bound that ignores the heavier component is too low near x = 2,
    # so A* stops before it has looked there.
    def too_low(lower, upper):
        return mixture_bound(lower, upper, components=COMPONENTS[:1])

    res = astar_sample(log_p, Q, bound=too_low, n_draws=2000, random_state=11)
    with pytest.raises(AssertionError):
        assert_ks_cdf(res.samples[:, 0], mixture_cdf, alpha=0.01)


def test_astar_on_a_product_proposal_in_two_dimensions():
    # independent target N(1, .5^2) x N(-1, .7^2) under Q = N(0, 2^2) x N(0, 3^2)
    targets = [stats.norm(1.0, 0.5), stats.norm(-1.0, 0.7)]
    qs = [stats.norm(0.0, 2.0), stats.norm(0.0, 3.0)]

    def log_target(x):
        return targets[0].logpdf(x[:, 0]) + targets[1].logpdf(x[:, 1])

    params = [(t.mean(), t.std(), q.std()) for t, q in zip(targets, qs, strict=True)]

    def bound(lower, upper):
        total = 0.0
        for k, (mu, s_t, s_q) in enumerate(params):
            # log t - log q is a concave quadratic: its sup on [l, u] is at the clipped peak
            x = min(max(mu * s_q**2 / (s_q**2 - s_t**2), lower[k]), upper[k])
            total += -0.5 * ((x - mu) / s_t) ** 2 + 0.5 * (x / s_q) ** 2 + math.log(s_q / s_t)
        return total

    res = astar_sample(log_target, qs, bound=bound, n_draws=1000, random_state=5)
    assert res.samples.shape == (1000, 2) and res.converged.all()
    for k in range(2):  # Bonferroni over the two marginals
        assert_ks_cdf(res.samples[:, k], targets[k].cdf, alpha=0.005, label=f"dim {k}")


def test_astar_on_a_truncated_proposal_stays_in_its_box():
    q = stats.truncnorm(-3.0, 3.0, loc=0.0, scale=1.0)  # support (-3, 3)
    target = stats.truncnorm(-2.0, 8.0, loc=-1.0, scale=1.0)  # support (-3, 7): cut at 3

    def log_target(x):
        return target.logpdf(x[:, 0])

    log_z_q = math.log(stats.norm.cdf(3.0) - stats.norm.cdf(-3.0))
    log_z_p = math.log(stats.norm.cdf(8.0) - stats.norm.cdf(-2.0))

    def bound(lower, upper):
        # log N(x; -1, 1) - log N(x; 0, 1) = -x - 1/2 is decreasing: sup at the lower end
        return float(-lower[0] - 0.5 - log_z_p + log_z_q)

    res = astar_sample(log_target, q, bound=bound, n_draws=1000, random_state=3)
    conditional = stats.truncnorm(-2.0, 4.0, loc=-1.0, scale=1.0)  # p restricted to (-3, 3)
    assert np.all(np.abs(res.samples) <= 3.0)
    assert_ks_cdf(res.samples[:, 0], conditional.cdf, alpha=0.01, label="truncated")


def test_astar_without_a_bound_approaches_the_target_with_its_budget():
    crit = stats.kstwo.ppf(0.999, 1000)
    one_round = astar_sample(log_p, Q, n_draws=1000, max_iter=1, random_state=7)
    many = astar_sample(log_p, Q, n_draws=1000, max_iter=100, random_state=7)
    d_one = stats.kstest(one_round.samples[:, 0], mixture_cdf).statistic
    d_many = stats.kstest(many.samples[:, 0], mixture_cdf).statistic
    assert d_one > crit  # one round returns a draw from Q
    assert d_many < crit
    assert not many.converged.any() and (many.n_iter == 100).all()


def test_pm_astar_error_shrinks_with_the_budget():
    # With the wide proposal N(0, 5) a single round is far from the target; 12 rounds of
    # probability matching must bring the KS distance below the 0.1% critical value.
    q = stats.norm(0.0, 5.0)
    n = 600
    crit = stats.kstwo.ppf(0.999, n)
    dist = {}
    for budget in (1, 3, 12):
        res = pm_astar_sample(log_p, q, n_iter=budget, n_draws=n, n_particles=4, random_state=21)
        dist[budget] = stats.kstest(res.samples[:, 0], mixture_cdf).statistic
    assert dist[1] > crit
    assert dist[12] < crit
    assert dist[12] < 0.5 * dist[1]


@pytest.mark.parametrize("mode", ["bound", "no-bound", "pm"])
def test_n_evaluations_counts_rows_exactly(mode):
    seen = {"calls": 0, "rows": 0}

    def counted(x):
        seen["calls"] += 1
        seen["rows"] += x.shape[0]
        return log_p(x)

    if mode == "bound":
        res = astar_sample(counted, Q, bound=mixture_bound, n_draws=50, random_state=1)
        assert res.n_evaluations == res.n_iter.sum()  # one row per selected region
    elif mode == "no-bound":
        res = astar_sample(counted, Q, n_draws=20, max_iter=15, random_state=1)
        assert res.n_evaluations == 20 * 15
    else:
        res = pm_astar_sample(
            counted, Q, n_iter=6, n_draws=10, n_particles=5, record_trace=True, random_state=1
        )
        assert res.trace.n_evaluations[:, -1].sum() == res.n_evaluations
    assert res.n_evaluations == seen["rows"]
    assert seen["calls"] < seen["rows"]  # searches are batched into vectorised calls


def test_trace_records_a_non_decreasing_best_value():
    res = pm_astar_sample(log_p, Q, n_iter=10, n_draws=4, record_trace=True, random_state=2)
    tr = res.trace
    assert tr.best_gumbel.shape == (4, 10) and tr.selected_lower.shape == (4, 10, 1)
    assert np.all(np.diff(tr.best_gumbel, axis=1) >= 0)
    np.testing.assert_array_equal(tr.best_gumbel[:, -1], res.max_gumbel)
    assert np.all(tr.selected_lower <= tr.selected_upper)
    res = astar_sample(log_p, Q, n_draws=3, max_iter=8, record_trace=True, random_state=2)
    assert np.all(np.diff(res.trace.best_gumbel, axis=1) >= 0)
    np.testing.assert_array_equal(res.trace.n_evaluations[:, -1], np.full(3, 8))


def test_same_seed_same_draws():
    a = pm_astar_sample(log_p, Q, n_iter=5, n_draws=3, random_state=4)
    b = pm_astar_sample(log_p, Q, n_iter=5, n_draws=3, random_state=4)
    np.testing.assert_array_equal(a.samples, b.samples)
    c = astar_sample(log_p, Q, bound=mixture_bound, n_draws=3, random_state=4)
    d = astar_sample(log_p, Q, bound=mixture_bound, n_draws=3, random_state=4)
    np.testing.assert_array_equal(c.samples, d.samples)


def test_max_iter_exhausted_warns_and_reports_not_converged():
    with pytest.warns(RuntimeWarning, match="max_iter"):
        res = astar_sample(
            log_p, Q, bound=lambda lo, hi: 50.0, n_draws=2, max_iter=3, random_state=0
        )
    assert not res.converged.any()


def test_narrow_intervals_far_in_a_tail_keep_their_mass():
    dist = stats.norm(5.0, 1.0)
    lo = np.array([-1e-200, -1.0, 7.0, 1e-300])
    hi = np.array([1e-200, 0.0, 7.5, 2e-300])
    log_mass, draws = _interval(dist, lo, hi, np.full(4, 50), np.random.default_rng(0))
    expected = [
        dist.logpdf(0.0) + math.log(2e-200),
        math.log(dist.cdf(0.0) - dist.cdf(-1.0)),
        math.log(dist.sf(7.0) - dist.sf(7.5)),
        dist.logpdf(0.0) + math.log(1e-300),
    ]
    np.testing.assert_allclose(log_mass, expected, rtol=1e-9)
    rows = np.repeat(np.arange(4), 50)
    assert np.all((draws >= lo[rows]) & (draws <= hi[rows]))


@pytest.mark.parametrize("dist", [stats.logistic(), stats.logistic(1.5, 0.7),
                                  stats.logistic(scale=2.0), stats.norm(),
                                  stats.norm(1.0, 0.5), stats.norm(loc=-3.0, scale=10.0)],
                         ids=lambda d: f"{d.dist.name}{d.args}{d.kwds}")
def test_closed_form_proposals_give_scipys_values_bit_for_bit(dist):
    # The boxes evaluate logistic and normal proposals without scipy's per-call checks: the
    # same numbers, tails, infinities, NaN and probabilities outside [0, 1] included.
    closed = _LocationScale.of(dist)
    assert closed is not None
    rng = np.random.default_rng(0)
    x = np.concatenate([[-np.inf, np.inf, np.nan, 0.0, -1e300, 1e300],
                        np.linspace(-800.0, 800.0, 4001), 5.0 * rng.standard_normal(1000)])
    q = np.concatenate([[0.0, 1.0, -0.1, 1.1, np.nan, 1e-300, 1.0 - 1e-16],
                        rng.random(2000), np.logspace(-300.0, -1.0, 300)])
    with np.errstate(all="ignore"):
        for name, points in (("cdf", x), ("sf", x), ("logpdf", x), ("ppf", q), ("isf", q)):
            np.testing.assert_array_equal(getattr(closed, name)(points),
                                          getattr(dist, name)(points), err_msg=name)


def test_other_proposals_keep_scipys_methods():
    # (another family, a family's subclass, or parameters that are arrays)
    class Shifted(type(stats.norm)):
        def _cdf(self, x):
            return super()._cdf(x - 1.0)

    for dist in (stats.t(3.0), Shifted(name="shifted")(), stats.norm(scale=np.array([1.0, 2.0])),
                 stats.truncnorm(-3.0, 3.0)):
        assert _LocationScale.of(dist) is None


# ------------------------------------------------------------------------------ bad input
def test_proposal_without_a_finite_cdf_is_rejected():
    with pytest.raises(ValueError, match="proposal"):
        astar_sample(log_p, stats.norm(np.nan, 1.0), n_draws=1, max_iter=2)
    with pytest.raises(ValueError, match=r"proposal\[1\]"):
        pm_astar_sample(log_p, [Q, stats.norm(0.0, np.nan)], n_iter=2)
    with pytest.raises(TypeError, match="proposal"):
        astar_sample(log_p, stats.poisson(3.0), max_iter=2)
    with pytest.raises(TypeError, match="proposal"):
        pm_astar_sample(log_p, "normal", n_iter=2)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_log_density_is_rejected(bad):
    def broken(x):
        out = log_p(x)
        out[0] = bad
        return out

    with pytest.raises(ValueError, match="log_density"):
        astar_sample(broken, Q, bound=mixture_bound)
    with pytest.raises(ValueError, match="log_density"):
        pm_astar_sample(broken, Q, n_iter=3)


def test_log_density_of_the_wrong_shape_or_type_is_rejected():
    with pytest.raises(ValueError, match="log_density"):
        astar_sample(lambda x: np.zeros((x.shape[0], 2)), Q, max_iter=2)
    with pytest.raises(TypeError, match="log_density"):
        pm_astar_sample(3.0, Q, n_iter=2)


def test_bad_integers_and_bounds_name_the_argument():
    with pytest.raises(ValueError, match="n_iter"):
        pm_astar_sample(log_p, Q, n_iter=0)
    with pytest.raises(TypeError, match="n_iter"):
        pm_astar_sample(log_p, Q, n_iter=2.5)
    with pytest.raises(ValueError, match="n_particles"):
        pm_astar_sample(log_p, Q, n_iter=2, n_particles=0)
    with pytest.raises(ValueError, match="n_draws"):
        astar_sample(log_p, Q, n_draws=0)
    with pytest.raises(ValueError, match="max_iter"):
        astar_sample(log_p, Q, max_iter=0)
    with pytest.raises(TypeError, match="bound"):
        astar_sample(log_p, Q, bound=1.0)
    with pytest.raises(ValueError, match="bound"):
        astar_sample(log_p, Q, bound=lambda lo, hi: math.nan)
    with pytest.raises(TypeError, match="random_state"):
        astar_sample(log_p, Q, random_state="seed")


def test_validation_happens_before_any_evaluation():
    calls = []

    def spy(x):
        calls.append(x.shape[0])
        return log_p(x)

    for kwargs in ({"n_iter": 0}, {"n_iter": 2, "n_particles": -1}):
        with pytest.raises(ValueError):
            pm_astar_sample(spy, Q, **kwargs)
    with pytest.raises(ValueError):
        astar_sample(spy, Q, max_iter=-1)
    assert calls == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        astar_sample(spy, Q, bound=mixture_bound, n_draws=2, random_state=0)
    assert calls


def test_pm_astar_with_an_importance_distribution_reaches_the_target():
    # Particles from R = N(1, 2) with weights q/r: same budget check as with R = Q.
    q = stats.norm(0.0, 5.0)
    n = 600
    seen = {"rows": 0}

    def counted(x):
        seen["rows"] += x.shape[0]
        return log_p(x)

    res = pm_astar_sample(
        counted,
        q,
        n_iter=12,
        n_draws=n,
        n_particles=4,
        importance=stats.norm(1.0, 2.0),
        random_state=22,
    )
    assert res.n_evaluations == seen["rows"]
    assert stats.kstest(res.samples[:, 0], mixture_cdf).statistic < stats.kstwo.ppf(0.999, n)
    with pytest.raises(ValueError, match="importance"):
        pm_astar_sample(log_p, q, n_iter=2, importance=[q, q])
    with pytest.raises(TypeError, match="importance"):
        pm_astar_sample(log_p, q, n_iter=2, importance="normal")


def test_pm_astar_with_a_bound_is_exact_ks():
    # Probability matching picks the regions; A*'s certificate stops the search.
    res = pm_astar_sample(log_p, Q, bound=mixture_bound, n_iter=100_000, n_draws=1500,
                          n_particles=2, random_state=13)
    assert res.converged.all()
    assert_ks_cdf(res.samples[:, 0], mixture_cdf, alpha=0.01, label="PM-A* with a bound")


def test_pm_astar_with_an_invalid_bound_fails_the_same_ks_test():
    def too_low(lower, upper):
        return mixture_bound(lower, upper, components=COMPONENTS[:1])

    res = pm_astar_sample(log_p, Q, bound=too_low, n_iter=100_000, n_draws=1500,
                          n_particles=2, random_state=13)
    with pytest.raises(AssertionError):
        assert_ks_cdf(res.samples[:, 0], mixture_cdf, alpha=0.01)


def test_pm_astar_with_a_bound_warns_at_the_cap():
    with pytest.warns(RuntimeWarning, match="n_iter=2"):
        res = pm_astar_sample(log_p, Q, bound=lambda lo, hi: 50.0, n_iter=2, n_draws=2,
                              random_state=0)
    assert not res.converged.any()


@pytest.mark.parametrize("sampler", ["astar", "pm"])
def test_n_samples_is_the_former_name_of_n_draws(sampler):
    def run(**kw):
        if sampler == "astar":
            return astar_sample(log_p, Q, bound=mixture_bound, random_state=3, **kw)
        return pm_astar_sample(log_p, Q, n_iter=5, random_state=3, **kw)

    with pytest.warns(FutureWarning, match="n_draws"):
        old = run(n_samples=4)
    new = run(n_draws=4)
    np.testing.assert_array_equal(old.samples, new.samples)
    with pytest.raises(TypeError, match="n_draws only"):
        run(n_draws=4, n_samples=4)
