"""Acceptance tests by name: the factories and :func:`get_acceptance_test`."""

from __future__ import annotations

import inspect

from ._exact_tests import barker, bounded_barker, metropolis
from ._minibatch_tests import adaptive_subsampling, austerity, minibatch_barker, racing

__all__ = ["ACCEPTANCE_TESTS", "get_acceptance_test"]

ACCEPTANCE_TESTS = {
    "metropolis": metropolis,
    "barker": barker,
    "bounded_barker": bounded_barker,
    "minibatch_barker": minibatch_barker,
    "austerity": austerity,
    "adaptive_subsampling": adaptive_subsampling,
    "racing": racing,
}

#: Aliases that fix one option of a factory.
_ALIASES = {"racing-normal": ("racing", {"bound": "normal"}),
            "racing-ebs": ("racing", {"bound": "ebs"})}


def _factory_options(factory):
    """The keyword options a factory takes, read from its signature."""
    return set(inspect.signature(factory).parameters)


def get_acceptance_test(test, **options):
    """Build an acceptance test from a name (or pass a callable through).

    Parameters
    ----------
    test : str or callable
        One of ``"metropolis"``, ``"barker"``, ``"bounded_barker"``, ``"minibatch_barker"``,
        ``"austerity"``, ``"adaptive_subsampling"``, ``"racing"``, ``"racing-normal"``,
        ``"racing-ebs"``, or a callable with the signature of this module.
    **options
        Options of the factory. Options a factory does not take are ignored when their value
        is ``None``, so a driver can forward ``batch_size=None, delta=None`` to any test; an
        option that is set but unused raises ``ValueError``. ``batch_size`` is forwarded to
        racing as ``first_batch``.

    Returns
    -------
    callable

    Examples
    --------
    >>> test = get_acceptance_test("austerity", epsilon=0.01, batch_size=200)
    >>> test.name
    'austerity'
    """
    if callable(test):
        if any(v is not None for v in options.values()):
            raise ValueError("options cannot be combined with a callable test")
        return test
    if not isinstance(test, str):
        raise TypeError(f"test must be a str or a callable, got {type(test).__name__}")
    name, fixed = _ALIASES.get(test, (test, {}))
    if name not in ACCEPTANCE_TESTS:
        raise ValueError(
            f"test must be one of {sorted([*ACCEPTANCE_TESTS, *_ALIASES])} or a callable, "
            f"got {test!r}"
        )
    factory = ACCEPTANCE_TESTS[name]
    allowed = _factory_options(factory)
    if "first_batch" in allowed and options.get("batch_size") is not None:
        # The race's first minibatch plays the role of the other tests' batch_size.
        if options.get("first_batch") is not None:
            raise ValueError("give batch_size or first_batch for racing, not both")
        options["first_batch"] = options.pop("batch_size")
    kwargs = dict(fixed)
    for key, value in options.items():
        if value is None:
            continue
        if key not in allowed:
            raise ValueError(f"test {test!r} does not take the option {key!r} (an option of "
                             f"test_options, or batch_size or delta; it takes "
                             f"{sorted(allowed)})")
        kwargs[key] = value
    return factory(**kwargs)
