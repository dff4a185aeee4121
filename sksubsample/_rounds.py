"""Draws until converged: the rounds of ``n_draws="auto"`` and the convergence check of every
fit's draws, mixed into :class:`~sksubsample._base.MCMCEstimator`."""

from __future__ import annotations

import numpy as np

from .diagnostics import check_convergence, effective_sample_size, split_rhat

__all__ = ["AUTO_FIRST_DRAWS", "AUTO_MAX_DRAWS", "AUTO_MAX_RHAT", "AUTO_MIN_ESS",
           "ConvergenceRounds"]

#: ``n_draws="auto"``: draws per chain of the first round, the criteria every parameter must
#: meet (Vehtari et al. 2021, Section 4.3: bulk and tail ESS of at least 400, i.e. 100 per
#: chain for four chains, and rank-normalised split R-hat at most 1.01), and the most draws
#: per chain the rounds may reach in all.
AUTO_FIRST_DRAWS = 1000
AUTO_MIN_ESS = 400.0
AUTO_MAX_RHAT = 1.01
AUTO_MAX_DRAWS = 10_000
#: A round asks for this much more than the ESS measured so far says the criteria need
#: (ESS grows about linearly with the draws, and its estimate is noisy), and for at least
#: this fraction of the draws so far (R-hat, which does not say how far off it is, then
#: gets its next look on a markedly longer chain).
_AUTO_MARGIN = 1.2
_AUTO_MIN_GROWTH = 0.5


class ConvergenceRounds:
    """How many draws a fit takes and whether they have converged (needs ``n_draws``,
    ``_draws``, ``_sampler`` and ``posterior_names_`` of the estimator)."""

    def _auto_draws(self):
        return isinstance(self.n_draws, str) and self.n_draws == "auto"

    def _first_round_draws(self):
        """Draws per chain of ``fit``'s first (with an integer ``n_draws``, only) run."""
        return AUTO_FIRST_DRAWS if self._auto_draws() else int(self.n_draws)

    def _auto_criteria(self):
        """``(met, summary)``: whether every parameter's bulk and tail ESS reach
        :data:`AUTO_MIN_ESS` and its R-hat is at most :data:`AUTO_MAX_RHAT`, and the worst
        of each."""
        draws = self._draws
        tail = effective_sample_size(draws, method="tail")
        summary = {"min_bulk_ess": float(np.min(self.ess_)), "min_tail_ess": float(np.min(tail)),
                   "max_rhat": float(np.max(self.rhat_))}
        met = bool(np.all(self.ess_ >= AUTO_MIN_ESS) and np.all(tail >= AUTO_MIN_ESS)
                   and np.all(self.rhat_ <= AUTO_MAX_RHAT))
        return met, summary

    def _next_round(self):
        """``(draws per chain of the next round, why the rounds stop)``: 0 and
        ``"converged"``, ``"budget"`` (:data:`AUTO_MAX_DRAWS` reached) or ``"cannot
        continue"`` when they stop, else the draws the ESS so far says are missing (with a
        margin, at least half the draws so far, within the budget) and None."""
        met, summary = self._auto_criteria()
        if met:
            return 0, "converged"
        n = self._draws.shape[1]
        if n >= AUTO_MAX_DRAWS:
            return 0, "budget"
        if self._sampler.continue_fn is None:
            return 0, "cannot continue"
        worst = min(summary["min_bulk_ess"], summary["min_tail_ess"])
        wanted = (n * _AUTO_MARGIN * AUTO_MIN_ESS / worst
                  if np.isfinite(worst) and worst > 0 else AUTO_MAX_DRAWS)
        more = max(int(np.ceil(wanted)) - n, int(np.ceil(_AUTO_MIN_GROWTH * n)))
        return min(more, AUTO_MAX_DRAWS - n), None

    def _convergence_summary(self, rounds, stopped):
        """The ``convergence_`` of a fit with ``n_draws="auto"`` after ``rounds`` rounds."""
        return {"rounds": rounds, "stopped": stopped, "max_draws": AUTO_MAX_DRAWS,
                **self._auto_criteria()[1]}

    def _check(self, stacklevel, tail=False):
        """The convergence diagnostics of the draws, with a ConvergenceWarning when they fail
        (``tail``: when the tail ESS of :meth:`_auto_criteria` fails too)."""
        draws = self._draws
        if draws.shape[1] == 0:  # a fit that asked for no draws (a search, not a sample)
            self.rhat_ = self.ess_ = np.full(draws.shape[2], np.nan)
            return
        if stacklevel is None:  # quietly, between the rounds of n_draws="auto"
            self.rhat_ = split_rhat(draws)
            self.ess_ = effective_sample_size(draws)
            return
        # (stacklevel counts the frames above _store or _sample, whichever called this)
        options = ({"ess_per_chain": AUTO_MIN_ESS / draws.shape[0],
                    "rhat_threshold": AUTO_MAX_RHAT, "tail": True} if tail else {})
        self.rhat_, self.ess_ = check_convergence(draws, self.posterior_names_,
                                                  stacklevel=stacklevel, **options)

    def _draw_until_converged(self, label, stacklevel):
        """``fit``'s draws with ``n_draws="auto"``: a first round, then rounds that continue
        the chains (as :meth:`sample_more` does) until the criteria hold or the budget is
        spent, then the convergence check (a warning naming the worst parameters when the
        budget ran out first)."""
        self._advance(self._first_round_draws(), first=True, desc=f"{label} (round 1)",
                      stacklevel=None)
        rounds, stopped = 1, None
        while stopped is None:
            more, stopped = self._next_round()
            if more:
                rounds += 1
                self._advance(more, first=False, desc=f"{label} (round {rounds})",
                              stacklevel=None)
        self.convergence_ = self._convergence_summary(rounds, stopped)
        self._check(stacklevel=stacklevel, tail=True)
