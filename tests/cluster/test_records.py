"""The records model: its sweeps against the enumerated posterior, and its pair case."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from sksubsample.cluster import CorefGibbsClusterer, RecordPairs
from sksubsample.cluster._partition import canonical_labels


def _set_partitions(items):
    if len(items) == 1:
        yield [items]
        return
    first = items[0]
    for smaller in _set_partitions(items[1:]):
        for k, block in enumerate(smaller):
            yield [*smaller[:k], [first, *block], *smaller[k + 1:]]
        yield [[first], *smaller]


def _problem(n, F, seed, null_rate=0.15):
    """Every pair of ``n`` records scored on ``F`` comparisons (random log-BFs and levels)."""
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(n, 1)
    exact = rng.random((i.size, F)) < 0.4
    null = rng.random((i.size, F)) < null_rate
    log_bf = np.where(exact, rng.normal(2.5, 1.0, (i.size, F)),
                      rng.normal(-1.5, 1.5, (i.size, F)))
    log_bf[null] = 0.0
    log_m = np.log(rng.uniform(0.6, 0.95, F))
    return RecordPairs(ids=np.arange(n), pairs=np.column_stack([i, j]),
                       log_odds=log_bf.sum(1) - 2.0, proposed=np.ones(i.size, bool),
                       comparisons=tuple(f"c{f}" for f in range(F)), comparison_log_bf=log_bf,
                       exact=exact & ~null, null=null, log_m_exact=log_m, prior_log_odds=-2.0)


def _reference_log_posterior(X, blocks, dedup=True):
    """The model's log posterior of a partition, written out from its definition."""
    n, F = X.n_records, len(X.comparisons)
    lbf = np.zeros((F, n, n))
    ex = np.zeros((F, n, n), bool)
    nul = np.ones((F, n, n), bool)
    a, b = X.pairs[:, 0], X.pairs[:, 1]
    for f in range(F):
        lbf[f, a, b] = lbf[f, b, a] = X.comparison_log_bf[:, f]
        ex[f, a, b] = ex[f, b, a] = X.exact[:, f]
        nul[f, a, b] = nul[f, b, a] = X.null[:, f]
    nonnull = ~np.all(nul | np.eye(n, dtype=bool), axis=2)
    half = 0.5 * X.log_m_exact
    log_alpha = -X.prior_log_odds
    total = 0.0
    for block in blocks:
        total += log_alpha + math.lgamma(len(block))
        for f in range(F):
            members = [k for k in block if nonnull[f, k]]
            if len(members) < 2:
                continue
            terms = []
            for k in members:
                s = 0.0
                n_k = 1
                for r in members:
                    if r == k:
                        continue
                    if nul[f, r, k]:
                        continue
                    s += lbf[f, r, k] - half[f] - (0.0 if ex[f, r, k] else math.log(2.0))
                    n_k += ex[f, r, k]
                terms.append(s - (math.log(n_k) if dedup else 0.0))
            total += half[f] + logsumexp(terms)
    return total


def _posterior(X, dedup=True):
    parts = list(_set_partitions(list(range(X.n_records))))
    logp = np.array([_reference_log_posterior(X, p, dedup) for p in parts])
    probs = np.exp(logp - logsumexp(logp))
    keys = []
    for p in parts:
        labels = np.empty(X.n_records, dtype=np.int64)
        for g, block in enumerate(p):
            labels[block] = g
        keys.append(tuple(canonical_labels(labels)))
    return dict(zip(keys, probs, strict=True)), dict(zip(keys, logp, strict=True))


def _frequencies(labels):
    keys, counts = np.unique(labels, axis=0, return_counts=True)
    return {tuple(k): c / labels.shape[0] for k, c in zip(keys, counts, strict=True)}


def _tv(p, q):
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


@pytest.mark.parametrize("seed", [0, 1])
def test_records_gibbs_matches_the_enumerated_posterior(seed):
    X = _problem(5, 3, seed)
    exact, logp = _posterior(X)
    n_draws = 20_000
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=n_draws, n_warmup=50, random_state=seed).fit(X)
    draws = est.sample_posterior()
    tv = _tv(_frequencies(draws), exact)
    # 52 partitions; sweeps of 5 records mix within a few sweeps: with an effective sample of
    # at least n_draws / 10 the expected TV is below sqrt(52 / (2π n_eff)) / 2 ≈ 0.02.
    assert tv < 0.04, tv
    # Negative control: the same frequencies are far from a model without the dedup of equal
    # values (a different target).
    wrong, _ = _posterior(X, dedup=False)
    assert _tv(exact, wrong) > 0.1
    assert _tv(_frequencies(draws), wrong) > 0.08
    # The fitted log posterior is the reference's up to a constant.
    some = list(logp)[:10]
    fitted = np.array([est.log_potential(np.array(k)) for k in some])
    ref = np.array([logp[k] for k in some])
    assert np.allclose(fitted - fitted[0], ref - ref[0])


def test_records_map_is_the_enumerated_map():
    X = _problem(6, 2, 3, null_rate=0.0)
    _, logp = _posterior(X)
    best = max(logp, key=logp.get)
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=30, temperature_end=0.05,
                              n_chains=2, random_state=0).fit(X)
    assert tuple(canonical_labels(est.labels_)) == best


def test_an_isolated_pair_has_splinks_probability():
    # Two records: the posterior match probability is sigmoid(Σ_c log B_c + log λ/(1-λ)).
    log_bf = np.array([[2.0, -0.5, 1.0]])
    X = RecordPairs(ids=np.array([10, 20]), pairs=np.array([[0, 1]]),
                    log_odds=np.array([log_bf.sum() - 1.0]), proposed=np.array([True]),
                    comparisons=("a", "b", "c"), comparison_log_bf=log_bf,
                    exact=np.array([[True, False, False]]), null=np.zeros((1, 3), bool),
                    log_m_exact=np.log([0.9, 0.8, 0.7]), prior_log_odds=-1.0)
    p = 1.0 / (1.0 + math.exp(-(log_bf.sum() - 1.0)))
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=20_000, random_state=0).fit(X)
    linked = est.coreference_matrix()[0, 1]
    sd = math.sqrt(p * (1 - p) / 20_000)
    assert abs(linked - p) < 5 * sd, (linked, p)


def test_split_merge_moves_alone_leave_the_posterior_invariant():
    from sksubsample.cluster._records import records_model
    from sksubsample.cluster._records_chain import records_labels, start_state
    from sksubsample.cluster._records_sweep import records_split_merge

    X = _problem(5, 3, 4)
    exact, _ = _posterior(X)
    model = records_model(X)
    rng = np.random.default_rng(0)
    state = start_state(model, np.zeros(5, dtype=np.int64), rng)
    draws = np.empty((20_000, 5), dtype=np.int64)
    accepted = 0
    for t in range(draws.shape[0]):
        _, acc = records_split_merge(model.adj, model.exm, model.nonnull, model.half_log_m,
                                     model.log_alpha, model.cstart, model.boff,
                                     model.n_comparisons, state.z, state.R, state.N, 1.0,
                                     1.0, rng)
        accepted += acc
        draws[t] = records_labels(model, state.z)
    assert accepted > 500  # the moves do move
    # Same tolerance as the Gibbs test (the chain of moves alone mixes more slowly: 0.06).
    assert _tv(_frequencies(draws), exact) < 0.06
