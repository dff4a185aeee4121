"""The records model's components: in shards, each with its own random stream, run by threads;
the small ones drawn exactly."""

import dataclasses

import joblib
import numpy as np
import pytest

from sksubsample.cluster import CorefGibbsClusterer, RecordPairs
from sksubsample.cluster import _records_chain as chain
from sksubsample.cluster._partition import canonical_labels

from .test_records import (
    _frequencies,
    _moved_problem,
    _posterior,
    _problem,
    _tv,
    _two_block_problem,
)


def _joined(*problems):
    """The problems' records side by side, every pair within each scored, none across: one
    connected component each, in one model (the first problem's ``m`` of each comparison
    and move term, given to the others too, so that each is the model's restriction)."""
    first = problems[0]
    problems = [dataclasses.replace(p, log_m_exact=first.log_m_exact,
                                    moved_comparisons=first.moved_comparisons,
                                    move_rate=first.move_rate) for p in problems]
    shift = np.cumsum([0] + [p.n_records for p in problems])
    joined = RecordPairs(
        ids=np.arange(shift[-1]), pairs=np.concatenate([p.pairs + s for p, s in
                                                        zip(problems, shift, strict=False)]),
        **{name: np.concatenate([getattr(p, name) for p in problems])
           for name in ("log_odds", "proposed", "comparison_log_bf", "exact", "null")},
        comparisons=first.comparisons, log_m_exact=first.log_m_exact,
        prior_log_odds=first.prior_log_odds, moved_comparisons=first.moved_comparisons,
        move_rate=first.move_rate)
    return joined, problems, shift


def _two_components():
    """Five records and four records: the four drawn exactly, the five by the sweeps."""
    joined, (a, b), _ = _joined(_problem(5, 3, 0), _problem(4, 3, 1))
    return joined, a, b


def test_shards_cut_consecutive_components_by_their_work():
    cstart = np.array([0, 3, 4, 9, 11, 12])  # sizes 3, 1, 5, 2, 1: work 9, 1, 25, 4, 1
    assert chain.shards(cstart, work=10).tolist() == [0, 2, 3, 5]
    assert chain.shards(cstart, work=1000).tolist() == [0, 5]
    assert chain.shards(cstart, work=1).tolist() == [0, 1, 2, 3, 4, 5]


@pytest.mark.filterwarnings("ignore::sksubsample.diagnostics.ConvergenceWarning")  # 100 draws
def test_the_draws_do_not_depend_on_the_threads(monkeypatch):
    # One shard per component, each its own stream: on one thread or on two (the threading
    # backend runs the chain in this process and leaves both workers to its components) the
    # draws are the same; another random_state gives others (the comparison can fail).
    monkeypatch.setattr(chain, "SHARD_WORK", 1)
    X, _, _ = _two_components()

    def fit(seed, n_jobs=None):
        return CorefGibbsClusterer(metric="precomputed", n_sweeps=2, temperature_end=1.0,
                                   n_draws=100, n_jobs=n_jobs,
                                   random_state=seed).fit(X).partition_samples_

    used = []
    original = chain._Threads.__init__

    def spy(self, model, state, n_threads):
        original(self, model, state, n_threads)
        used.append(self.n_threads)

    monkeypatch.setattr(chain._Threads, "__init__", spy)
    alone = fit(0, n_jobs=1)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        together = fit(0)
    assert used == [1, 2]
    np.testing.assert_array_equal(alone, together)
    assert not np.array_equal(alone, fit(1, n_jobs=1))


def test_by_default_each_chains_components_run_on_every_core():
    # n_jobs=None with no joblib context: the chains one after the other, each chain's
    # components on cpu_count // n_chains threads; a number asked for, by the estimator or by
    # a joblib context, is kept.
    from sksubsample.cluster._coref import _component_threads

    cores = joblib.cpu_count()
    assert _component_threads(None, 1) == cores
    assert _component_threads(None, 2 * cores) == 1
    assert _component_threads(1, 1) == 1
    with joblib.parallel_config(n_jobs=1):
        assert _component_threads(None, 1) == 1
    with joblib.parallel_config(backend="threading", n_jobs=2):
        assert _component_threads(None, 1) == 2


@pytest.mark.filterwarnings("ignore::sksubsample.diagnostics.ConvergenceWarning")
def test_sharded_components_match_their_enumerated_posteriors(monkeypatch):
    # Two components in two shards (two streams): each component's partitions are drawn from
    # its own enumerated posterior.
    monkeypatch.setattr(chain, "SHARD_WORK", 1)
    X, a, b = _two_components()
    n_draws = 20_000
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=n_draws, n_warmup=50, random_state=0).fit(X)
    draws = est.sample_posterior()
    for part, sub in ((slice(0, 5), a), (slice(5, 9), b)):
        local = np.array([canonical_labels(d) for d in draws[:, part]])
        exact, _ = _posterior(sub)
        wrong, _ = _posterior(sub, dedup=False)
        freq = _frequencies(local)
        # As in the one-component tests: an effective sample of at least n_draws / 10 gives
        # an expected TV below 0.02 for 52 (or 15) partitions.
        assert _tv(freq, exact) < 0.04
        # Negative control: a model without the dedup of equal values is another target.
        assert _tv(exact, wrong) > 0.1
        assert _tv(freq, wrong) > 0.08


def _moved_four(seed, blocks=False):
    """Four of the five records of the moved person (:func:`_moved_problem`), the move term
    on: records 0, 1 at one address, 3, 4 at the other; or (``blocks``) of the person with
    three (address, email) tuples (:func:`_two_block_problem`), two address blocks."""
    X = _two_block_problem(seed) if blocks else _moved_problem(seed)
    keep = [0, 1, 3, 4]
    new = -np.ones(5, dtype=np.int64)
    new[keep] = np.arange(4)
    inside = np.isin(X.pairs, keep).all(axis=1)
    return dataclasses.replace(
        X, ids=np.arange(4), pairs=new[X.pairs[inside]], log_odds=X.log_odds[inside],
        proposed=X.proposed[inside], comparison_log_bf=X.comparison_log_bf[inside],
        exact=X.exact[inside], null=X.null[inside])


@pytest.mark.parametrize("moved", [False, True, "blocks"])
def test_small_components_log_posteriors_are_the_enumerated_ones(moved):
    from sksubsample.cluster._records import records_model
    from sksubsample.cluster._records_exact import PARTITIONS, small_log_posteriors

    blocks = moved == "blocks"
    parts = ((_moved_four(0, blocks), _moved_four(1, blocks)) if moved
             else (_problem(4, 3, 2), _problem(3, 3, 3)))
    X, problems, shift = _joined(*parts, _problem(2, 3, 4) if not moved
                                 else _moved_four(2, blocks))
    model = records_model(X)
    offset, logp = small_log_posteriors(model)
    apart = 0.0
    for c, (p, s) in enumerate(zip(problems, shift, strict=False)):
        assert model.perm[model.cstart[c]] == s  # components in the problems' order
        _, ref = _posterior(p)
        rows = PARTITIONS[p.n_records]
        ours = logp[offset[c]:offset[c] + rows.shape[0]]
        theirs = np.array([ref[tuple(r)] for r in rows])
        np.testing.assert_allclose(ours - ours[0], theirs - theirs[0], atol=1e-9)
        _, wrong = _posterior(p, move=False) if moved else _posterior(p, dedup=False)
        other = np.array([wrong[tuple(r)] for r in rows])
        apart = max(apart, np.abs((other - other[0]) - (theirs - theirs[0])).max())
    # Negative control: the model without the move term (or the dedup) is another one.
    assert apart > 0.1


@pytest.mark.filterwarnings("ignore::sksubsample.diagnostics.ConvergenceWarning")
def test_small_components_are_drawn_from_their_posteriors():
    # Components of 4, 3 and 2 records drawn exactly at every sweep: the draws are
    # independent, so with n draws the expected TV is below sqrt(K / (2π n)) / 2 for K
    # partitions (15: 0.017 at n = 2000).
    X, problems, shift = _joined(_problem(4, 3, 5), _problem(3, 3, 6), _problem(2, 3, 7))
    n_draws = 2000
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=n_draws, random_state=0).fit(X)
    draws = est.sample_posterior()
    controls = 0
    for p, s in zip(problems, shift, strict=False):
        local = np.array([canonical_labels(d) for d in draws[:, s:s + p.n_records]])
        exact, _ = _posterior(p)
        freq = _frequencies(local)
        assert _tv(freq, exact) < 0.04
        # Negative control, where the model without the dedup of equal values is another
        # target: the draws are far from it.
        wrong, _ = _posterior(p, dedup=False)
        if _tv(exact, wrong) > 0.1:
            assert _tv(freq, wrong) > 0.05
            controls += 1
    assert controls >= 1


def test_the_memo_of_scores_gives_the_draws_of_scores_computed_afresh():
    # Three components swept and split-merged (5 records with a move term, 8 and 9), at the
    # annealing's temperatures and then at T = 1: a chain whose memo of scores and merged
    # cohesions is forgotten before every sweep (each record's scores computed again) holds,
    # sweep after sweep, the same partition and the same bits of every cluster's cohesion.
    from sksubsample.cluster._records import records_model

    X, _, _ = _joined(_moved_problem(0), _problem(8, 3, 0), _problem(9, 3, 1))
    model = records_model(X)
    kept = chain.start_state(model, model.init, np.random.default_rng(0))
    afresh = chain.start_state(model, model.init, np.random.default_rng(0))
    shards = range(kept.cuts.size - 1)
    moves = 0
    for inv_t in [*np.geomspace(1.0, 10.0, 10), *np.ones(40)]:
        afresh.cache.memo_ver[:] = -1
        afresh.cache.merged_ver[:] = -1
        moves += chain._run(model, kept, inv_t, shards)[1]
        chain._run(model, afresh, inv_t, shards)
        np.testing.assert_array_equal(kept.z, afresh.z)
        np.testing.assert_array_equal(kept.cache.h, afresh.cache.h)
    assert moves > 0  # the memo was invalidated by moves, not only filled


@pytest.mark.filterwarnings("ignore::sksubsample.diagnostics.ConvergenceWarning")  # 300 draws
def test_the_annealing_proposes_every_split(monkeypatch):
    # Three components of 5, 8 and 9 records, the pairs from log-odds 3 up strong: the
    # annealing proposes every split whatever the strong pairs, so its trace and labels_ are
    # those of a fit without any (every split proposed throughout); the draws, where the
    # strong pairs' splits are rarer, are not.
    import math

    X, _, _ = _joined(_moved_problem(0), _problem(8, 3, 0), _problem(9, 3, 1))

    def fit(strong):
        monkeypatch.setattr(chain, "STRONG_LOG_ODDS", strong)
        return CorefGibbsClusterer(metric="precomputed", n_sweeps=20, n_draws=300,
                                   track_labels=True, random_state=0).fit(X)

    rarer = fit(3.0)
    assert chain.strong_pairs(rarer._records, 3.0).any()
    every = fit(math.inf)
    np.testing.assert_array_equal(rarer.labels_trace_, every.labels_trace_)
    np.testing.assert_array_equal(rarer.labels_, every.labels_)
    assert not np.array_equal(rarer.partition_samples_, every.partition_samples_)
