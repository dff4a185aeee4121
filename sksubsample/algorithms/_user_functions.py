"""One wrapper for the user functions the algorithms evaluate on data: checked and counted.

Every algorithm of the core calls a function supplied by the user on a batch of inputs: the
per-datum log-likelihood ratios of an MH test, the rewards of a race, the log-factors of a
discrete sampler, the log-density of A* sampling. Each answer must have a known shape, must be
float64, and is the unit the papers count work in (one entry = one data term evaluated).
:class:`CountedFunction` does those three things in one place, so that every algorithm reports
``n_evaluations`` the same way and rejects the same bad values with the same message.

Values: ``-inf`` is allowed (a zero-probability term: a proposal with zero likelihood, a state
or arm whose population mean is therefore ``-inf``); ``NaN`` and ``+inf`` mean the model is
undefined at the input and raise ``ValueError``. The common, all-finite case costs one pass
(``isfinite(...).all()``); the classification is done only when a value is not finite.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CountedFunction", "checked_array"]


def checked_array(values, expected, signature):
    """``values`` as a float64 array of shape ``expected``, or ``ValueError`` naming the
    function of ``signature`` that returned another shape (values themselves unchecked)."""
    if type(values) is not np.ndarray or values.dtype != np.float64:
        try:
            values = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{signature} must return an array of real numbers of shape {expected}, got "
                f"{type(values).__name__} ({exc})"
            ) from None
    if values.shape != expected:
        raise ValueError(
            f"{signature} must return an array of shape {expected}, got shape {values.shape}"
        )
    return values


class CountedFunction:
    """Call ``fn``, check the shape and the values of its answer, count the entries computed.

    Parameters
    ----------
    fn : callable
        The user's function.
    signature : str
        How the function is called, e.g. ``"log_ratio_terms(idx)"``; used in error messages.
    shape : callable
        ``shape(*args) -> tuple``: the shape the answer to ``fn(*args)`` must have.

    Attributes
    ----------
    n_evaluations : int
        Entries of all answers so far (data terms evaluated).
    saw_neg_inf : bool
        Whether any answer held ``-inf``.

    Examples
    --------
    >>> import numpy as np
    >>> f = CountedFunction(lambda idx: np.zeros(len(idx)), "terms(idx)", lambda idx: (len(idx),))
    >>> f(np.arange(3)).shape, f.n_evaluations
    ((3,), 3)
    """

    __slots__ = ("fn", "n_evaluations", "saw_neg_inf", "shape", "signature")

    def __init__(self, fn, signature, shape):
        if not callable(fn):
            raise TypeError(f"{signature} must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.signature = signature
        self.shape = shape
        self.n_evaluations = 0
        self.saw_neg_inf = False

    def __call__(self, *args):
        values = checked_array(self.fn(*args), self.shape(*args), self.signature)
        self.n_evaluations += values.size
        if not np.isfinite(values).all():
            if np.isnan(values).any() or np.isposinf(values).any():
                raise ValueError(
                    f"{self.signature} returned NaN or +inf: the model is undefined there "
                    "(values must be finite, or -inf for a zero-probability term)"
                )
            self.saw_neg_inf = True
        return values
