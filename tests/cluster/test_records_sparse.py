"""The records model on the stored pairs alone (large components): the same model as the dense
layout where every pair is stored, restricted to the partitions whose clusters the pair graph
connects where not, sampled from that posterior."""

import dataclasses
import math

import numpy as np
import pytest

from sksubsample.cluster import CorefGibbsClusterer, _records
from sksubsample.cluster import _records_chain as chain
from sksubsample.cluster import _records_sparse as sp
from sksubsample.cluster._partition import canonical_labels
from sksubsample.cluster._records import records_model
from sksubsample.cluster._splink import component_pairs

from .test_records import (
    _frequencies,
    _moved_problem,
    _posterior,
    _problem,
    _reference_log_posterior,
    _set_partitions,
    _tv,
    _two_block_problem,
)

#: Pairs left out of the six records' graph (it stays connected): blocking did not propose
#: them.
_DROPPED = ((0, 3), (1, 4), (2, 5), (0, 5), (3, 4))


def _moved(seed, moved):
    """The five records of the moved person (``moved`` True) or of the person with three
    (address, email) tuples (``"blocks"``), or six records without an address block."""
    if moved == "blocks":
        return _two_block_problem(seed)
    return _moved_problem(seed) if moved else _problem(6, 3, seed)


def _incomplete(seed, moved=False):
    """Six records (or the five of a moved problem, :func:`_moved`) with some pairs not
    stored."""
    X = _moved(seed, moved)
    drop = set(_DROPPED[:3] if moved else _DROPPED)
    keep = np.array([(int(a), int(b)) not in drop for a, b in X.pairs])
    return dataclasses.replace(
        X, pairs=X.pairs[keep], log_odds=X.log_odds[keep], proposed=X.proposed[keep],
        comparison_log_bf=X.comparison_log_bf[keep], exact=X.exact[keep], null=X.null[keep])


def _connected(X, block):
    stored = {(int(a), int(b)) for a, b in X.pairs}
    reached, todo = {block[0]}, [block[0]]
    while todo:
        a = todo.pop()
        for b in block:
            if b not in reached and (min(a, b), max(a, b)) in stored:
                reached.add(b)
                todo.append(b)
    return len(reached) == len(block)


def _restricted_posterior(X, restrict=True):
    """The enumerated posterior on the partitions whose clusters the pairs connect (every
    partition when not ``restrict``, the dense layout's); unstored pairs count as missing
    values."""
    return _posterior(X, allowed=(lambda b: _connected(X, b)) if restrict else None)


@pytest.mark.parametrize("moved", [False, True, "blocks"])
def test_a_complete_component_has_the_dense_layouts_log_posterior(moved):
    X = _moved(0, moved)
    dense = records_model(X)
    sparse = records_model(X, dense_up_to=0)
    assert dense.scstart.size == 1 and sparse.cstart.size == 1  # all dense; all sparse
    assert sparse.sp_nbr.size == 2 * X.pairs.shape[0]
    for p in list(_set_partitions(list(range(X.n_records))))[::3]:
        labels = np.empty(X.n_records, dtype=np.int64)
        for g, block in enumerate(p):
            labels[block] = g
        a = chain.labels_log_posterior(dense, labels)
        b = chain.labels_log_posterior(sparse, labels)
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9), (p, a, b)
        assert math.isclose(a, _reference_log_posterior(X, p), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize(("seed", "moved"), [(0, False), (1, False), (0, True),
                                             (0, "blocks")])
def test_sparse_sweeps_match_the_enumerated_connected_posterior(seed, moved, monkeypatch):
    monkeypatch.setattr(_records, "DENSE_UP_TO", 0)
    X = _incomplete(seed, moved)
    exact, logp = _restricted_posterior(X)
    n_draws = 20_000
    est = CorefGibbsClusterer(metric="precomputed", n_sweeps=1, temperature_end=1.0,
                              n_draws=n_draws, n_warmup=50, random_state=seed).fit(X)
    assert est._records.cstart.size == 1  # the component on the sparse layout
    draws = est.sample_posterior()
    freq = _frequencies(draws)
    # Only partitions of connected clusters are drawn.
    assert all(exact.get(k, 0.0) > 0.0 for k in freq)
    # At most 203 partitions, fewer connected ones: with an effective sample of at least
    # n_draws / 10 the expected TV is below sqrt(K / (2π n_eff)) / 2 ≈ 0.04 for K = 203.
    tv = _tv(freq, exact)
    assert tv < 0.05, tv
    # Negative control: the same frequencies are far from the model without the dedup of
    # equal values on the same support (a different target).
    wrong, _ = _posterior(X, dedup=False, allowed=lambda b: _connected(X, b))
    assert _tv(exact, wrong) > 0.1
    assert _tv(freq, wrong) > 0.08
    # The unrestricted posterior puts mass on disconnected clusters, the draws none.
    loose, _ = _restricted_posterior(X, restrict=False)
    assert sum(v for k, v in loose.items() if k not in freq) > 0.0
    # The fitted log posterior is the reference's, -inf off the support.
    keys = list(logp)
    fitted = np.array([est.log_potential(np.array(k)) for k in keys])
    ref = np.array([logp[k] for k in keys])
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(fitted), finite)
    assert np.allclose(fitted[finite] - fitted[finite][0], ref[finite] - ref[finite][0])


def test_pair_split_merge_moves_alone_leave_the_connected_posterior_invariant():
    X = _incomplete(2)
    exact, _ = _restricted_posterior(X)
    model = records_model(X, dense_up_to=0)
    state = chain.start_state(model, np.arange(model.n), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    buf = sp.scratch(model.n_comparisons, 4)  # smaller than a cluster may grow: reallocates
    pos = np.empty(model.n + 1, dtype=np.int64)
    loc = np.full(model.n, -1, dtype=np.int64)
    n_draws = 20_000
    draws = np.empty((n_draws, model.n), dtype=np.int64)
    accepted = 0
    for s in range(n_draws):
        _, acc = sp._split_merge(model, state.cache, 0, 1.0, rng, 3, buf, pos, loc)
        accepted += acc
        draws[s] = canonical_labels(chain.records_labels(model, state.cache.z))
    assert accepted > n_draws // 10
    # The cached cohesions are those from scratch.
    assert math.isclose(chain.log_posterior(model, state),
                        chain.labels_log_posterior(model, draws[-1]), abs_tol=1e-9)
    tv = _tv(_frequencies(draws), exact)
    assert tv < 0.05, tv


def test_a_disconnected_cluster_is_outside_the_support():
    X = _incomplete(0)
    model = records_model(X, dense_up_to=0)
    labels = np.array([0, 1, 1, 0, 1, 1])  # records 0 and 3: their pair is not stored
    assert chain.labels_log_posterior(model, labels) == -np.inf
    assert np.isfinite(chain.labels_log_posterior(model, np.zeros(6, dtype=np.int64)))
    with pytest.raises(ValueError, match="connect"):
        chain.start_state(model, labels, np.random.default_rng(0))


def test_the_linker_completes_only_the_components_kept_dense():
    # A path of 3 records and a path of 5: with up_to=4 only the first gains its missing pair.
    pairs = np.array([[0, 1], [1, 2], [3, 4], [4, 5], [5, 6], [6, 7]])
    extra, _ = component_pairs(8, pairs, up_to=4)
    assert extra.tolist() == [[0, 2]]
    extra, _ = component_pairs(8, pairs, up_to=5)
    assert len(extra) == 1 + 10 - 4


def test_the_start_of_a_sparse_component_is_made_of_cliques_of_strong_pairs():
    # Strongly linked records whose pairs are not all stored: the components of the strong
    # pairs chain them, the start's clusters are cliques of them (connected, so on the support).
    X = _incomplete(0)
    strong = dataclasses.replace(X, comparison_log_bf=np.abs(X.comparison_log_bf) + 3.0)
    model = records_model(strong, dense_up_to=0)
    labels = chain.records_labels(model, model.init)
    assert 1 < labels.max() + 1 < X.n_records  # some records start together, not all
    for k in range(labels.max() + 1):
        block = np.flatnonzero(labels == k).tolist()
        assert all((a, b) not in _DROPPED for a in block for b in block)
    state = chain.start_state(model, model.init, np.random.default_rng(0))
    assert math.isclose(chain.log_posterior(model, state),
                        chain.labels_log_posterior(model, labels), abs_tol=1e-9)


@pytest.mark.parametrize("moved", [False, True, "blocks"])
def test_sparse_gibbs_alone_on_cached_root_sums_leaves_the_connected_posterior_invariant(moved):
    # Single-record updates scored from the records' cached root sums (no split-merge moves):
    # connected partitions are reachable by moves that keep clusters connected (a spanning
    # tree's leaf leaves and joins), so their draws converge to the restricted posterior.
    X = _incomplete(0, moved)
    exact, _ = _restricted_posterior(X)
    model = records_model(X, dense_up_to=0)
    state = chain.start_state(model, np.arange(model.n), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    F, n = model.n_comparisons, model.n
    buf = sp.scratch(F, 2)  # smaller than a cluster may grow: the scores make larger ones
    pos = np.empty(n + 1, dtype=np.int64)
    loc = np.full(n, -1, dtype=np.int64)
    logits, scores = np.empty(n + 2), np.empty(n + 2)
    labels, tally = np.empty(n + 2, dtype=np.int64), np.zeros(n, dtype=np.int64)
    # The person with three (address, email) tuples has two modes (one cluster; records 0-1
    # apart) that single-record updates cross through improbable states: the indicator of
    # the most probable partition keeps an autocorrelation of 0.7 at lag 10 and 0.2 at lag
    # 100, so ten times the draws give the effective sample of the others.
    n_draws = 200_000 if moved == "blocks" else 20_000
    draws = np.empty((n_draws, n), dtype=np.int64)
    moves = 0
    for s in range(n_draws + 50):
        _, mv = sp._gibbs(model, state.cache, 0, 1.0, rng, buf, pos, loc, logits, labels,
                          scores, tally)
        moves += mv
        if s >= 50:
            draws[s - 50] = canonical_labels(chain.records_labels(model, state.cache.z))
    assert moves > n_draws // 10
    assert np.all(loc == -1)
    # The cached sums and cohesions are those from scratch.
    R, N = state.cache.R.copy(), state.cache.N.copy()
    assert sp.build_sparse(model, state.cache)
    assert np.allclose(state.cache.R, R, atol=1e-9) and np.array_equal(state.cache.N, N)
    assert math.isclose(chain.log_posterior(model, state),
                        chain.labels_log_posterior(model, draws[-1]), abs_tol=1e-9)
    # At most 203 partitions (52 of five records): with an effective sample of at least
    # n_draws / 10, the expected TV is below sqrt(K / (2π n_eff)) / 2 ≈ 0.04 for K = 203.
    freq = _frequencies(draws)
    assert all(exact.get(k, 0.0) > 0.0 for k in freq)
    tv = _tv(freq, exact)
    assert tv < 0.05, tv
    # Negative control: a different target on the same support (no dedup of equal values;
    # with two addresses, no move term either), at least 0.17 from the posterior: the draws
    # are more than 0.17 - 0.05 from it.
    wrong, _ = _posterior(X, dedup=False, move=not moved, allowed=lambda b: _connected(X, b))
    assert _tv(exact, wrong) > 0.17
    assert _tv(freq, wrong) > 0.12
