"""Whether the ARCH order sampler races, and when a race stops paying: ``method="auto"``.

The sampler's two races (the Gibbs step over the orders and the MH test) read per-term ARCH
log-likelihoods: a conditional variance over the order's lags, a Student-t log density and a
control variate's quadratic. What a raced term costs against an exact one depends on the
machine and on the data's shape (the lags, the orders, the terms), so ``method="auto"`` asks the
package's cost service (:func:`~sksubsample.algorithms.kernels.race_costs`) with the kernels
that will run, on the model that will run them: the exact sums of a block of the Gibbs step's
terms, and the Gibbs race itself stopped at its first look, then with a longer first look. The
measurement is made once per machine and kind of data and stored, so a seed gives the same
draws on a given machine; with measuring off the rough costs (``"arch"``) are used, the same on
every machine.

From the costs, a race that stops paying is finished by the exact sums of its survivors at the
measured bail ratio (a raced term's cost over an exact one's). The chains race from the start
whatever the set-up costs: the choice to race at all
(:meth:`~sksubsample.algorithms.kernels.RaceCosts.race_first`) is made for one draw, while a
chain repeats the same race thousands of times, and on this sampler a race whose first look
reads a tenth of the terms still pays (at N = 500 terms, orders 0-5, the raced chain took
0.4 of the exact chain's CPU time), so racing with the bail rule is never far behind the exact
sums and often far ahead.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..algorithms.kernels import (
    exact_sums,
    njit,
    race_config,
    race_costs,
    restart_race,
    rough_costs,
    shared_race,
    shared_rounds,
    shared_stored,
    whole_in_first_round,
)
from ._sweep import OrderRewards, _gibbs_log_prior, new_races, new_work

__all__ = ["choose_racing", "race_parts"]

#: Terms of the exact sums timed (at most, over every order).
_EXACT_TERMS = 1 << 16
#: The longer first look reads this many times the terms of the race's own.
_LONGER = 32
#: The seed of the timed races.
_PROBE_SEED = np.uint64(0x5EED)
#: Races run in one compiled call of the timing: the call's own cost (Python passing the
#: model's arrays to compiled code, tens of microseconds) is not a race's, whose chain calls it
#: from compiled code.
_REPEATS = 32


def race_parts(n_terms, n_orders, batch_size, delta, bail_ratio):
    """The race fields of a :class:`~._chain_model.ChainModel` for a first minibatch of
    ``batch_size`` and a race's ``bail_ratio`` (0: races run to their end; ``inf``: they stop
    at their first look).

    Returns
    -------
    dict
        ``gibbs_first``, ``mh_first``, ``gibbs_whole``, ``gibbs_race``, ``gibbs_stored`` and
        ``mh_race``.
    """
    # The races need first minibatches of at least 2 (and at most N).
    first = min(max(2, int(batch_size)), n_terms)
    sizes = np.full(n_orders, n_terms, dtype=np.int64)
    n_rounds = int(shared_rounds(n_terms, first))
    options = {"delta": delta, "bound": "normal", "variance": "pairwise", "first_batch": first,
               "bail_ratio": bail_ratio}
    return {"gibbs_first": first, "mh_first": first,
            "gibbs_whole": bool(whole_in_first_round(sizes, first)),
            "gibbs_race": race_config(max(n_orders, 2), n_terms, n_rounds, **options),
            "gibbs_stored": int(shared_stored(n_terms, first)) if n_orders > 2 else 0,
            "mh_race": race_config(2, n_terms, n_rounds, **options)}


@njit
def _exact_block(m, xs, log_pi, w, r, sizes):
    """The exact sums of the Gibbs step's terms ``sizes[j]`` of each order: the terms read."""
    _gibbs_log_prior(m, xs, log_pi, w.params, w.lp)
    _, evaluations = exact_sums(OrderRewards(m, w.params), sizes, r.ones, r.zeros, w.sums)
    return evaluations


@njit
def _first_looks(seed, m, xs, log_pi, w, r, repeats):
    """``repeats`` Gibbs races of ``m`` (configured to stop at their first look), as a sweep
    starts them: the terms read."""
    n_terms = m.y2.size
    total = 0
    for k in range(repeats):
        _gibbs_log_prior(m, xs, log_pi, w.params, w.lp)
        for j in range(m.q1.size):
            r.gibbs.offset[j] = w.lp[j] / n_terms
        restart_race(r.gibbs)
        _, evaluations = shared_race(OrderRewards(m, w.params), seed + np.uint64(k), r.gibbs,
                                     m.gibbs_race, r.draws)
        total += evaluations
    return total


def _probe(model, first):
    """``run()`` of the race of ``model`` with first minibatch ``first``, stopped at its first
    look, at the pseudo-priors' means."""
    probe = model._replace(**race_parts(model.n_terms, model.n_orders, first, model.delta,
                                        math.inf))
    work = new_work(probe)
    races = new_races(probe, work)
    xs, log_pi = np.array(model.mean), np.array(model.log_adjusted_prior0)
    return lambda: int(_first_looks(_PROBE_SEED, probe, xs, log_pi, work, races, _REPEATS))


def _exact(model):
    """``run()`` of the exact sums of a block of each order's terms, at the pseudo-priors'
    means."""
    n, n_orders = model.n_terms, model.n_orders
    work = new_work(model)
    races = new_races(model, work)
    block = np.full(n_orders, max(1, min(n, _EXACT_TERMS // n_orders)), dtype=np.int64)
    # Writable state, as the chains' (the model's arrays are read-only, as theirs).
    xs, log_pi = np.array(model.mean), np.array(model.log_adjusted_prior0)
    return lambda: int(_exact_block(model, xs, log_pi, work, races, block))


def _measured_costs(model):
    """The cost service's :class:`~sksubsample.algorithms.kernels.RaceCosts` of ``model``'s
    races (rough when measuring is off)."""
    n, n_orders, first = model.n_terms, model.n_orders, model.gibbs_first
    # The runs and their buffers (each a few times N) are made when the costs are measured,
    # not when they are read from the store.
    exact = functools.cache(lambda: _exact(model))
    short = functools.cache(lambda: _probe(model, first))
    longer = functools.cache(lambda: _probe(model, max(first, min(_LONGER * first, n // 4))))
    # What a term costs depends on the lags and the control variates, not on their values.
    key = (f"orders{n_orders}|lags{model.z.shape[1] - 1}|cv{int(model.gibbs_cv)}"
           f"|n{round(math.log2(n))}|first{first}")
    return race_costs("arch", key, lambda: exact()(),
                      lambda long: (longer if long else short)()(), races=_REPEATS)


def choose_racing(model):
    """``model`` (built with races run to their end) as ``method="auto"`` runs it: each race
    finished by the exact sums of its survivors once the terms it projects it would still read,
    at the measured cost of a raced term, cost more than those sums.

    Parameters
    ----------
    model : ChainModel

    Returns
    -------
    ChainModel
    """
    if model.gibbs_whole or model.n_orders < 2:
        # The Gibbs step is exact anyway: no race of it to time.
        costs = rough_costs("arch")
    else:
        costs = _measured_costs(model)
    return model._replace(**race_parts(model.n_terms, model.n_orders, model.gibbs_first,
                                       model.delta, costs.bail_ratio))
