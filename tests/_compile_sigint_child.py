"""A cold compile of one of the package's kernels, interrupted while numba generates its
machine code; run by tests/test_faults.py in a process group of its own, with an empty
``NUMBA_CACHE_DIR``.

llvmlite's object-cache hook (the ctypes callback LLVM calls with each function's machine
code) waits, the first time, for the test's SIGINT: the signal then comes while the main thread
is inside numba's code generation, as a Ctrl-C during a cold compile often does, and Python
runs its handler inside that callback. Argument: "default" (Python's SIGINT handler) or
"counting" (a handler of the user's own that counts and returns). Prints ``generating`` when
the hook waits, then one JSON line: whether the compile raised ``KeyboardInterrupt``, how many
times the counting handler ran, and the kernel's log-likelihood from a second call in the
same process.
"""

import json
import os
import select
import signal
import sys

from numba.core import codegen

_HOOK = codegen.CPUCodeLibrary._object_compiled_hook.__func__
_WAITED = []
_SIGNALLED, _WAKEUP = os.pipe()
_COUNTED = []


def _waiting_hook(cls, ll_module, buf):
    if not _WAITED:
        _WAITED.append(True)
        print("generating", flush=True)
        # The wake-up pipe gets a byte for each signal, whatever the Python handler does.
        select.select([_SIGNALLED], [], [], 120)
    return _HOOK(cls, ll_module, buf)


def main(handler):
    # Before any compile: numba's JIT engine takes the hook when it is made.
    codegen.CPUCodeLibrary._object_compiled_hook = classmethod(_waiting_hook)
    os.set_blocking(_WAKEUP, False)
    signal.set_wakeup_fd(_WAKEUP)
    if handler == "counting":
        signal.signal(signal.SIGINT, lambda signum, frame: _COUNTED.append(signum))

    import numpy as np

    from sksubsample.algorithms.glm._pass_kernels import logistic_rows

    n, p = 50, 3
    rng = np.random.default_rng(0)
    X, signs = rng.normal(size=(n, p)), np.where(rng.random(n) < 0.5, -1.0, 1.0)

    def call():
        z, c, curvature = np.zeros(n), np.zeros(n), np.zeros(n)
        return logistic_rows(X, True, signs, np.zeros(0), np.full(p + 1, 0.1), 1.0, 4, z, c,
                             curvature, np.zeros(n, np.int64), np.zeros(p + 1),
                             np.zeros((0, p + 1)), np.zeros(n))[0]

    try:
        call()
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    print(json.dumps({"waited": bool(_WAITED), "interrupted": interrupted,
                      "handler_calls": len(_COUNTED), "second_call": float(call())}),
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
