"""Race or exact: what a raced term and an exact one cost, measured once per kind of kernel.

The exact-or-race choices of ``method="auto"`` (:func:`~sksubsample.algorithms.sample_discrete`,
:func:`~sksubsample.algorithms.race`, the ARCH order sampler) weigh three costs of one kind of
kernel:

* ``exact``: seconds per term of the exact sums (a tight loop over contiguous terms);
* ``race``: seconds per term a race reads (a random index, the term, the running moments);
* ``setup``: the seconds of a race that stops at its first look (building it, its first round,
  its result): what ``method="auto"`` loses against the exact sums when its race stops at once.

From them, :class:`RaceCosts` answers the two questions of ``method="auto"``: whether to race
at all (:meth:`RaceCosts.race_first`: only when the set-up is a small share, :data:`SLACK`, of
the exact sums), and when a race has stopped paying (:attr:`RaceCosts.bail_ratio`, a raced term
over an exact one, which the race weighs against the terms it projects it would still read).

How fast a kernel runs depends on the machine, on the kernel (a table lookup costs a nanosecond,
a logistic term with 20 features tens) and on how many bytes its terms span, not on the values
of its data. So :func:`race_costs` times the kernels that will run, on the data they will run
on, once per *kind* (a key the caller builds from the kernel and the size class of its data)
and stores the result with :func:`~._calibration.measured`: the same inputs then make the same
choice on a given machine, in this process and later ones, and a seed gives the same draws.
A measurement takes milliseconds (a block of at most 65 536 exact terms and a dozen short
races, each timed a few times), once per kind and machine. With measuring off
(:func:`~._calibration.measuring`), the choices follow :func:`rough_costs`, fixed costs that are
the same on every machine; a NumPy callable, whose calls are the user's (they may have effects,
or cost seconds), is never timed and always follows them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ._calibration import SECONDS, fastest, measured, measuring

__all__ = ["ROUGH_BAIL_RATIO", "SLACK", "RaceCosts", "race_costs", "rough_costs"]

#: The share of the exact sums' cost that a race's set-up may take for ``method="auto"`` to
#: race at all. A race that does not pay stops only once the terms it projects it would still
#: read cost more than the exact sums, and its projection, made from the terms it has read,
#: cannot see further than a small multiple of them (each gap is taken a standard error
#: larger than estimated): whatever the cost ratio, it reads a share of the exact sums' cost
#: before it can stop, and its set-up on top. Where the set-up is a sizeable share of the exact
#: sums, these are so cheap (a millisecond or less) that a race gains little, while a race that
#: stops pays that share again: the exact sums are chosen.
SLACK = 0.025
#: The rough cost of a raced term over an exact one, by kind of kernel, with which the choices
#: are made when costs are not measured: NumPy callables (a race's rounds call back from
#: compiled code on sorted random indices, the exact sums call once per block of contiguous
#: ones), compiled per-term functions (the exact sums run a tight compiled loop), and the ARCH
#: sampler's terms (a conditional variance over the order's lags, a Student-t log density and a
#: control variate's quadratic: about 230 ns each in the exact sums, half as much again raced,
#: on the machine where it was set; measured, they cost about as much raced as exact).
#: Each is the low end of what ``benchmarks/racing_wall_time.py`` and
#: ``benchmarks/racing_guard.py`` measured on the machine they were first run on, so that a race
#: stops only when it has clearly stopped paying.
ROUGH_BAIL_RATIO = {"callable": 2.0, "compiled": 4.0, "arch": 1.5}
#: Timings per measurement (the fastest counts: the others met interruptions).
_ROUNDS = 5
#: The least seconds per term taken as measured (a loop the compiler removed reads as 0).
_TICK = 1e-12
_FIELDS = {"exact": SECONDS, "race": SECONDS, "setup": SECONDS}


class RaceCosts(NamedTuple):
    """Seconds of the parts of an exact-or-race choice, for one kind of kernel.

    Attributes
    ----------
    exact : float
        Seconds per term of the exact sums.
    race : float
        Seconds per term a race reads.
    setup : float
        Seconds of a race that stops at its first look (0 in the rough costs: the choice to
        race is then always made, and the bail rule alone weighs what racing costs).
    measured : bool
        Whether these were measured on this machine (False: :func:`rough_costs`).
    probe_seconds : float
        Time this call spent measuring (0 when the costs were stored or rough).
    """

    exact: float
    race: float
    setup: float
    measured: bool = False
    probe_seconds: float = 0.0

    @property
    def bail_ratio(self):
        """A raced term's cost over an exact one's: the race stops when the terms it projects
        it would still read, times this, cost more than the exact sums of its survivors."""
        return self.race / self.exact

    def race_first(self, n_terms):
        """Whether to race exact sums of ``n_terms`` terms: when the race's set-up costs at
        most :data:`SLACK` of them.

        Parameters
        ----------
        n_terms : int
            Terms of the exact sums (every arm's population, summed).

        Returns
        -------
        bool
        """
        return self.setup <= SLACK * self.exact * n_terms


def rough_costs(kind):
    """The fixed costs of ``kind`` (a key of :data:`ROUGH_BAIL_RATIO`), the same on every
    machine: a nanosecond per exact term, the kind's ratio for a raced one, no set-up.

    Parameters
    ----------
    kind : str

    Returns
    -------
    RaceCosts
    """
    return RaceCosts(1e-9, ROUGH_BAIL_RATIO[kind] * 1e-9, 0.0, measured=False)


def _measure(run_exact, run_race, races):
    """The fields of :class:`RaceCosts`: the exact sums' seconds per term; the seconds of a race
    stopped at its first look (the set-up; ``run_race`` runs ``races`` of them), and per term
    from the difference between those races and ones whose first look reads more."""
    exact, n_exact = fastest(run_exact, _ROUNDS)
    exact = max(exact / max(n_exact, 1), _TICK)
    short, n_short = fastest(lambda: run_race(False), _ROUNDS)
    long, n_long = fastest(lambda: run_race(True), _ROUNDS)
    # A raced term does all an exact one does, and more (a random index, the moments).
    per_term = max((long - short) / max(n_long - n_short, 1), exact)
    return {"exact": exact, "race": per_term, "setup": short / races}


def race_costs(kind, key, run_exact: Callable[[], int], run_race: Callable[[bool], int], *,
               races=1):
    """The :class:`RaceCosts` of a kind of kernel on this machine.

    Measured, or read from the store (:mod:`._calibration`), when measuring is on; the rough
    costs of ``kind`` (:func:`rough_costs`) otherwise.

    Parameters
    ----------
    kind : str
        The kind of kernel (a key of :data:`ROUGH_BAIL_RATIO`).
    key : str
        What the costs depend on beyond the machine: the kernel and the size class of its data
        (not its values), so that data of one kind share one measurement.
    run_exact : callable
        ``run_exact() -> terms``: runs the exact sums of some terms, returns how many.
    run_race : callable
        ``run_race(longer) -> terms``: runs the race to be chosen, stopped at its first look,
        returns the terms it read; with ``longer``, the same race with a longer first look.
    races : int, default 1
        The races one call of ``run_race`` runs (in one compiled loop, so that what calling
        compiled code from Python costs is not taken for a race's set-up).

    Returns
    -------
    RaceCosts
    """
    if not measuring():
        return rough_costs(kind)
    value, seconds = measured(f"race|{kind}|{key}", lambda: _measure(run_exact, run_race, races),
                             _FIELDS)
    return RaceCosts(float(value["exact"]), float(value["race"]), float(value["setup"]),
                     measured=True, probe_seconds=seconds)
