"""The records model: its sweeps against the enumerated posterior, and its pair case."""

import math
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

from sksubsample.cluster import CorefGibbsClusterer, RecordPairs
from sksubsample.cluster._partition import canonical_labels
from sksubsample.diagnostics import ConvergenceWarning


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


def _moved_problem(seed, rate=0.3):
    """Five records of one person (a name comparison agrees) at two addresses, records 0-2 at
    one and 3-4 at the other (two address comparisons: agree within, disagree across)."""
    rng = np.random.default_rng(seed)
    n, F = 5, 3
    i, j = np.triu_indices(n, 1)
    home = np.array([0, 0, 0, 1, 1])
    same = home[i] == home[j]
    exact = np.column_stack([rng.random(i.size) < 0.9, same, same & (rng.random(i.size) < 0.8)])
    log_bf = np.where(exact, rng.normal(2.5, 0.5, (i.size, F)),
                      rng.normal(-4.0, 0.5, (i.size, F)))
    log_bf[:, 0] = np.where(exact[:, 0], log_bf[:, 0] + 2.0, 1.0)
    null = np.zeros_like(exact)
    null[:, 2] = (i == 4) | (j == 4)  # record 4 has no value of the second address field
    exact &= ~null
    log_bf[null] = 0.0
    return RecordPairs(ids=np.arange(n), pairs=np.column_stack([i, j]),
                       log_odds=log_bf.sum(1) - 2.0, proposed=np.ones(i.size, bool),
                       comparisons=("name", "postcode", "email"), comparison_log_bf=log_bf,
                       exact=exact, null=null, log_m_exact=np.log([0.8, 0.7, 0.75]),
                       prior_log_odds=-2.0, moved_comparisons=("postcode", "email"),
                       move_rate=rate)


def _two_block_problem(seed, rates=(0.3, 0.2)):
    """Five records of one person (a name comparison agrees) holding three (postcode, city,
    email) tuples, as a mover's records do when a record at the earlier address holds the
    earlier email or the current one: records 0-1 at address A with email X, 2-3 at address
    B with email X, 4 at address B with email Y; blocks (postcode, city) and (email,)."""
    rng = np.random.default_rng(seed)
    n, F = 5, 4
    i, j = np.triu_indices(n, 1)
    home = np.array([0, 0, 1, 1, 1])
    mail = np.array([0, 0, 0, 0, 1])
    exact = np.column_stack([rng.random(i.size) < 0.9, home[i] == home[j],
                             (home[i] == home[j]) & (rng.random(i.size) < 0.9),
                             mail[i] == mail[j]])
    log_bf = np.where(exact, rng.normal(2.5, 0.5, (i.size, F)),
                      rng.normal(-4.0, 0.5, (i.size, F)))
    log_bf[:, 0] = np.where(exact[:, 0], log_bf[:, 0], 1.0)
    null = np.zeros_like(exact)
    null[:, 3] = (i == 1) | (j == 1)  # record 1 has no email
    exact &= ~null
    log_bf[null] = 0.0
    return RecordPairs(ids=np.arange(n), pairs=np.column_stack([i, j]),
                       log_odds=log_bf.sum(1) - 2.0, proposed=np.ones(i.size, bool),
                       comparisons=("name", "postcode", "city", "email"),
                       comparison_log_bf=log_bf, exact=exact, null=null,
                       log_m_exact=np.log([0.8, 0.7, 0.75, 0.7]), prior_log_odds=-2.0,
                       moved_comparisons=(("postcode", "city"), ("email",)), move_rate=rates)


def _one_block(X):
    """``X`` with its address blocks joined into one (the rate of the first)."""
    import dataclasses

    blocks = X.move_blocks()
    return dataclasses.replace(X, moved_comparisons=tuple(c for b, _ in blocks for c in b),
                               move_rate=blocks[0][1])


def _reference_log_posterior(X, blocks, dedup=True, move=True):
    """The model's log posterior of a partition, written out from its definition (``move``:
    with each address block's move term when the pairs carry them)."""
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
    # log b(x_r, x_k) of each comparison (0 where either value is missing).
    logb = np.where(nul, 0.0, lbf - half[:, None, None] - math.log(2.0) * ~ex)
    address_blocks = [(np.array([c in names for c in X.comparisons]), rate)
                      for names, rate in (X.move_blocks() if move else ()) if rate > 0.0]
    outside = ~np.any([G for G, _ in address_blocks], axis=0) if address_blocks else None
    total = 0.0
    for block in blocks:
        total += log_alpha + math.lgamma(len(block))
        cohesion = np.zeros(F)
        for f in range(F):
            members = [k for k in block if nonnull[f, k]]
            if len(members) < 2:
                continue
            terms = []
            for k in members:
                s = sum(logb[f, r, k] for r in members if r != k)
                n_k = 1 + sum(ex[f, r, k] for r in members if r != k)
                terms.append(s - (math.log(n_k) if dedup else 0.0))
            cohesion[f] = half[f] + logsumexp(terms)
        if not address_blocks:
            total += cohesion.sum()
            continue
        total += cohesion[outside].sum()
        for G, rho in address_blocks:
            total += _reference_block(block, G, rho, cohesion, logb, ex, nonnull, half)
    return total


def _reference_block(block, G, rho, cohesion, logb, ex, nonnull, half):
    """``log Λ_G`` of the cluster ``block`` for the address block ``G`` (a mask of the
    comparisons) with prior probability ``rho`` of two values, from its definition."""
    homed = [k for k in block if nonnull[G, k].any()]
    if len(homed) < 2:
        return cohesion[G].sum()

    # Moved: two addresses, each held by a root record, every other record holding either
    # with probability 1/2; one root per distinct address (equal on every comparison of the
    # block, both missing or exact): the lowest record holding it.
    def same(r, k):
        return ex[G, r, k].any() and all(ex[f, r, k] or not (nonnull[f, r] or nonnull[f, k])
                                         for f in np.flatnonzero(G))

    roots = [k for k in homed if not any(same(r, k) for r in homed if r < k)]
    terms = [sum(np.logaddexp(logb[G, r, k].sum(), logb[G, r, h].sum()) - math.log(2.0)
                 for r in block if r not in (k, h))
             for q, k in enumerate(roots) for h in roots[q + 1:]]
    one = math.log1p(-rho * (1.0 - 2.0 ** (1 - len(homed)))) + cohesion[G].sum()
    if not terms:
        return one
    two = math.log(rho) + 2.0 * half[G].sum() - math.log(2.0) + logsumexp(terms)
    return np.logaddexp(one, two)


def _case(which, seed):
    """A small problem: no address block, one block (a move), or two blocks."""
    return {"plain": lambda: _problem(5, 3, seed), "moved": lambda: _moved_problem(seed),
            "blocks": lambda: _two_block_problem(seed)}[which]()


def _posterior(X, dedup=True, move=True, allowed=None):
    """The enumerated posterior (and log posterior) of every partition, or of those whose
    blocks all pass ``allowed`` (-inf for the others)."""
    parts = list(_set_partitions(list(range(X.n_records))))
    logp = np.array([_reference_log_posterior(X, p, dedup, move)
                     if allowed is None or all(allowed(b) for b in p) else -np.inf
                     for p in parts])
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


@pytest.mark.parametrize("case", ["plain", "moved", "blocks"])
def test_split_merge_moves_alone_leave_the_posterior_invariant(case):
    from sksubsample.cluster._records import records_model
    from sksubsample.cluster._records_chain import records_labels, start_state
    from sksubsample.cluster._records_split_merge import records_split_merge

    X = _case(case, 4 if case == "plain" else 5)
    exact, _ = _posterior(X)
    model = records_model(X)
    rng = np.random.default_rng(0)
    state = start_state(model, np.zeros(5, dtype=np.int64), rng)
    draws = np.empty((20_000, 5), dtype=np.int64)
    accepted = 0
    for t in range(draws.shape[0]):
        _, acc = records_split_merge(model, state.cache, 1.0, 1.0, rng)
        accepted += acc
        draws[t] = records_labels(model, state.z)
    assert accepted > 500  # the moves do move
    # Same tolerance as the Gibbs test (the chain of moves alone mixes more slowly: 0.06).
    assert _tv(_frequencies(draws), exact) < 0.06


def test_strong_pairs_are_those_the_model_links_on_their_own():
    # Without a move term or missing values the model's log-odds of an isolated pair are
    # Splink's (see test_an_isolated_pair_has_splinks_probability): Σ_c log b_c + the prior
    # log-odds.
    from sksubsample.cluster._records import records_model
    from sksubsample.cluster._records_split_merge import strong_pairs

    X = _problem(6, 3, 2, null_rate=0.0)
    model = records_model(X)
    odds = X.comparison_log_bf.sum(axis=1) + X.prior_log_odds
    for threshold in np.quantile(odds, [0.2, 0.5, 0.8]) + 1e-9:
        table = strong_pairs(model, threshold).reshape(6, 6)
        a, b = model.inverse[X.pairs[:, 0]], model.inverse[X.pairs[:, 1]]
        np.testing.assert_array_equal(table[a, b], odds >= threshold)
        np.testing.assert_array_equal(table, table.T)
        assert not table.diagonal().any()


@pytest.mark.parametrize("case", ["plain", "moved", "blocks"])
def test_rarer_splits_of_strong_pairs_leave_the_posterior_invariant(case):
    # Half of the pairs strong, their splits proposed with probability 0.2 (the ratios
    # corrected): the moves alone still draw from the enumerated posterior.
    from sksubsample.cluster._records import records_model
    from sksubsample.cluster._records_chain import records_labels, start_state
    from sksubsample.cluster._records_split_merge import records_split_merge, strong_pairs

    X = _case(case, 4 if case == "plain" else 5)
    exact, _ = _posterior(X)
    model = records_model(X)
    # The lowest threshold that leaves at most half of the 20 ordered pairs strong.
    strong = next(t for t in (strong_pairs(model, x) for x in np.linspace(-10, 30, 401))
                  if t.sum() <= 10)
    assert strong.sum() > 0
    rng = np.random.default_rng(0)
    state = start_state(model, np.zeros(5, dtype=np.int64), rng)
    draws = np.empty((20_000, 5), dtype=np.int64)
    accepted = 0
    for t in range(draws.shape[0]):
        _, acc = records_split_merge(model, state.cache, 1.0, 1.0, rng, strong=strong,
                                     split_strong=0.2)
        accepted += acc
        draws[t] = records_labels(model, state.z)
    assert accepted > 500
    freq = _frequencies(draws)
    # The tolerance of the uniform moves' test above; the same moves with the probability
    # 0.2 left out of the ratios land 0.15 away on the first problem.
    assert _tv(freq, exact) < 0.06, _tv(freq, exact)
    # Negative control: a nearby target (without the dedup of equal values, without the
    # move term, or with the two address blocks as one) is far from these frequencies.
    wrong, _ = {"plain": lambda: _posterior(X, dedup=False),
                "moved": lambda: _posterior(X, move=False),
                "blocks": lambda: _posterior(_one_block(X))}[case]()
    assert _tv(freq, wrong) > 0.1, _tv(freq, wrong)


def _check_top_and_log_posterior(est, freq, exact, logp, n_draws):
    """The most probable partitions one by one within 4 standard errors of an effective
    sample of ``n_draws / 10`` (binomial), and the fitted log posterior the reference's up to
    a constant."""
    for key in sorted(exact, key=exact.get)[-5:]:
        p = exact[key]
        assert abs(freq.get(key, 0.0) - p) < 4 * math.sqrt(p * (1 - p) / (n_draws / 10)), key
    some = list(logp)[:15]
    fitted = np.array([est.log_potential(np.array(k)) for k in some])
    ref = np.array([logp[k] for k in some])
    assert np.allclose(fitted - fitted[0], ref - ref[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_the_move_term_matches_the_enumerated_posterior(seed):
    X = _moved_problem(seed)
    exact, logp = _posterior(X)
    # Negative control: without the move term the posterior is another one (it splits the
    # person at the two addresses).
    without, _ = _posterior(X, move=False)
    assert _tv(exact, without) > 0.2
    n_draws = 20_000
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=n_draws, n_warmup=50, random_state=seed).fit(X)
    freq = _frequencies(est.sample_posterior())
    # As above: an effective sample of at least n_draws / 10 gives an expected TV below 0.02.
    assert _tv(freq, exact) < 0.04
    assert _tv(freq, without) > 0.15
    _check_top_and_log_posterior(est, freq, exact, logp, n_draws)


@pytest.mark.parametrize("seed", [0, 1])
def test_several_address_blocks_match_the_enumerated_posterior(seed):
    # Three (address, email) tuples of one person: each block holds two values, the entity's
    # likelihood the product of the blocks' mixtures.
    X = _two_block_problem(seed)
    exact, logp = _posterior(X)
    # Negative controls: the blocks joined into one (two values of the three tuples at
    # most), and no move term.
    joined, _ = _posterior(_one_block(X))
    without, _ = _posterior(X, move=False)
    assert _tv(exact, joined) > 0.25 and _tv(exact, without) > 0.5
    n_draws = 20_000
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=n_draws, n_warmup=50, random_state=seed).fit(X)
    freq = _frequencies(est.sample_posterior())
    # An effective sample of at least n_draws / 10: the expected TV is below
    # Σ_k sqrt(p_k (1 - p_k) / n_eff) / 2 (0.014 and 0.015 here).
    bound = 0.5 * sum(math.sqrt(p * (1 - p) / (n_draws / 10)) for p in exact.values())
    assert bound < 0.02
    assert _tv(freq, exact) < 0.04, _tv(freq, exact)
    assert _tv(freq, joined) > 0.2 and _tv(freq, without) > 0.4
    _check_top_and_log_posterior(est, freq, exact, logp, n_draws)


def test_the_address_block_and_the_move_rate():
    from sksubsample.cluster._splink_linker import move_block, move_rate

    names = ("first_name", "postcode", "email_address", "dob")
    # By kind: the postal address, the email, the phone, each a block.
    assert move_block(names, "auto") == (("postcode",), ("email_address",))
    assert move_block(("city", "phone", "zip", "name"), "auto") == (("city", "zip"),
                                                                    ("phone",))
    assert move_block(names, None) == ()
    assert move_block(names, ["email_address", "postcode"]) == (("postcode", "email_address"),)
    assert move_block(names, [["email_address"], ["postcode"]]) == (("email_address",),
                                                                    ("postcode",))
    with pytest.raises(ValueError, match="'city'"):
        move_block(names, ["city"])
    with pytest.raises(ValueError, match="two blocks"):
        move_block(names, [["postcode"], ["postcode", "email_address"]])
    # Ten pairs sure of the person (names and dob exact), three of them across a move; two
    # pairs that do not count (a name disagrees; no address).
    exact = np.zeros((12, 4), bool)
    exact[:, [0, 3]] = True
    exact[11, 0] = False
    null = np.zeros((12, 4), bool)
    null[10, [1, 2]] = True
    log_bf = np.full((12, 4), 2.0)
    log_bf[:3, [1, 2]] = -3.0
    log_bf[10:, [1, 2]] = -3.0
    block = ("postcode", "email_address")
    rate = move_rate(names, block, exact, null, log_bf, np.ones(12, bool))
    assert rate == pytest.approx(2 * 3.5 / 11)
    assert move_rate(names, (), exact, null, log_bf, np.ones(12, bool)) == 0.0
    # Each block's rate from the pairs sure of the person on the comparisons outside every
    # block: the same pairs here, the email's straddling pairs those below 0 on the email.
    log_bf[3, 2] = -3.0
    blocks = (("postcode",), ("email_address",))
    rates = [move_rate(names, b, exact, null, log_bf, np.ones(12, bool), blocks)
             for b in blocks]
    assert rates == pytest.approx([2 * 3.5 / 11, 2 * 4.5 / 11])


@pytest.mark.filterwarnings("ignore::sksubsample.diagnostics.ConvergenceWarning")  # 200 draws
@pytest.mark.parametrize("case", ["moved", "blocks"])
def test_the_cached_cluster_statistics_give_the_log_posterior_from_scratch(case):
    # The sweeps keep each cluster's cohesion up to date (and the split-merge moves build
    # theirs record by record); the log posterior recorded with each draw comes from them and
    # must be that of the drawn partition recomputed from the root sums.
    X = _case(case, 0)
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=3, temperature_end=1.0,
                              n_draws=200, random_state=0).fit(X)
    partitions = est.partition_samples_[0]
    assert len({tuple(p) for p in partitions}) > 3  # the chain moves
    scratch = np.array([est.log_potential(np.asarray(p)) for p in partitions])
    np.testing.assert_allclose(est._draws[0, :, 0], scratch, rtol=0, atol=1e-9)


@pytest.mark.parametrize("n_warmup", [0, 2])
def test_a_records_chain_stopped_between_sweeps_continues_as_one_run(n_warmup):
    """Ctrl-C (its progress callable raising) stops a chain between two sweeps with the draws
    it finished, which its continuation extends as one uninterrupted run; stopped before its
    first draw, it has nothing to continue (it runs again from its seed)."""
    import copy

    from sksubsample._partial import join
    from sksubsample._utils import ChainInterrupted

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (four draws)
        est = CorefGibbsClusterer(metric="precomputed", n_sweeps=3, n_draws=4,
                                  n_warmup=n_warmup, n_chains=1,
                                  random_state=3).fit(_problem(7, 3, 0))
    sampler = est._sampler
    chain_fn, args, _, seeds = sampler.restart

    def stopped_at(call):
        calls = []

        def progress(n):
            calls.append(n)
            if len(calls) == call:
                raise ChainInterrupted

        return chain_fn(*args, 20, n_warmup, copy.deepcopy(seeds[0]), progress=progress)

    cut = stopped_at(3 + n_warmup + 5)  # (annealing, warm-up, then the 5th draw)
    assert cut.draws.shape[0] == 5 == cut.extras.partitions.shape[0]
    rest = sampler.continue_fn(*args, 15, cut.state)
    whole = chain_fn(*args, 20, n_warmup, copy.deepcopy(seeds[0]))
    joined = join(cut, rest)
    np.testing.assert_array_equal(joined.draws, whole.draws)
    np.testing.assert_array_equal(joined.extras.partitions, whole.extras.partitions)
    assert joined.n_evaluations == whole.n_evaluations
    if n_warmup:
        early = stopped_at(3 + 1)
        assert early.draws.shape[0] == 0 and early.state is None
