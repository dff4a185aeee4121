"""Intersphinx inventories of scikit-learn, NumPy, SciPy and ArviZ, written offline.

The documentation builds without network access, so intersphinx cannot download the
``objects.inv`` files of the projects it links to. Instead, this module imports the installed
packages, walks the public names of their public modules and writes one Sphinx inventory
(format version 2) per project, with the URL each project's documentation gives that object
(``https://scikit-learn.org/stable/modules/generated/sklearn.pipeline.Pipeline.html``, and so
on). A link therefore points at the documentation of the release named in the inventory
header, the installed one, under the project's ``stable`` URL.

Pure Python (no Sphinx import).
"""

from __future__ import annotations

import importlib
import inspect
import warnings
import zlib
from pathlib import Path

_MISSING = object()


def _public(name):
    return not name.startswith("_")


def _get(owner, name):
    """``getattr`` that survives lazy attributes which raise (experimental, deprecated)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(owner, name)
    except Exception:
        return _MISSING


# ----------------------------------------------------------------------------- URL schemes


def _sklearn_module(name):
    return f"api/{name}.html"


def _sklearn_object(qual, member=None):
    page = f"modules/generated/{qual}.html"
    return f"{page}#{qual}.{member}" if member else f"{page}#{qual}"


def _scipy_module(name):
    return f"reference/{name.removeprefix('scipy.')}.html#module-{name}"


def _generated(prefix):
    """Scheme of NumPy, SciPy and ArviZ: one page per object and per method."""
    def url(qual, member=None):
        full = f"{qual}.{member}" if member else qual
        return f"{prefix}{full}.html#{full}"
    return url


_NUMPY_MODULES = {
    "numpy": "reference/index.html#module-numpy",
    "numpy.random": "reference/random/index.html#module-numpy.random",
    "numpy.linalg": "reference/routines.linalg.html#module-numpy.linalg",
    "numpy.fft": "reference/routines.fft.html#module-numpy.fft",
}
_NUMPY_RANDOM_PAGES = {
    "Generator": "reference/random/generator.html",
    "default_rng": "reference/random/generator.html",
    "RandomState": "reference/random/legacy.html",
    "SeedSequence": "reference/random/bit_generators/generated/numpy.random.SeedSequence.html",
    "BitGenerator": "reference/random/bit_generators/generated/numpy.random.BitGenerator.html",
}


def _numpy_object(qual, member=None):
    module, _, name = qual.rpartition(".")
    if member is not None:
        folder = "reference/random/generated" if module == "numpy.random" else "reference/generated"
        return f"{folder}/{qual}.{member}.html#{qual}.{member}"
    if module == "numpy.random":
        if name in _NUMPY_RANDOM_PAGES:
            return f"{_NUMPY_RANDOM_PAGES[name]}#{qual}"
        if name in ("MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64"):
            return f"reference/random/bit_generators/{name.lower()}.html#{qual}"
        return f"reference/random/generated/{qual}.html#{qual}"
    obj = _get(importlib.import_module(module), name)
    import numpy
    if isinstance(obj, type) and issubclass(obj, numpy.generic):
        return f"reference/arrays.scalars.html#{qual}"
    return f"reference/generated/{qual}.html#{qual}"


#: name -> (project title, base URL, modules walked, module URL, object URL)
PROJECTS = {
    "sklearn": (
        "scikit-learn", "https://scikit-learn.org/stable/",
        ("sklearn", "sklearn.base", "sklearn.calibration", "sklearn.cluster",
         "sklearn.compose", "sklearn.covariance", "sklearn.datasets", "sklearn.decomposition",
         "sklearn.dummy", "sklearn.ensemble", "sklearn.exceptions", "sklearn.feature_selection",
         "sklearn.gaussian_process", "sklearn.impute", "sklearn.inspection",
         "sklearn.linear_model", "sklearn.metrics", "sklearn.mixture", "sklearn.model_selection",
         "sklearn.multiclass", "sklearn.multioutput", "sklearn.naive_bayes",
         "sklearn.neighbors", "sklearn.pipeline", "sklearn.preprocessing", "sklearn.svm",
         "sklearn.tree", "sklearn.utils", "sklearn.utils.validation"),
        _sklearn_module, _sklearn_object),
    "numpy": (
        "NumPy", "https://numpy.org/doc/stable/",
        ("numpy", "numpy.random", "numpy.linalg", "numpy.fft"),
        _NUMPY_MODULES.get, _numpy_object),
    "scipy": (
        "SciPy", "https://docs.scipy.org/doc/scipy/",
        ("scipy.fft", "scipy.integrate", "scipy.interpolate", "scipy.linalg", "scipy.optimize",
         "scipy.sparse", "scipy.sparse.csgraph", "scipy.sparse.linalg", "scipy.spatial",
         "scipy.special", "scipy.stats"),
        _scipy_module, _generated("reference/generated/")),
    "arviz": (
        "ArviZ", "https://python.arviz.org/en/stable/",
        ("arviz",),
        lambda name: "api/index.html#module-arviz", _generated("api/generated/")),
}


# ----------------------------------------------------------------------------- walking


def _exported(module):
    """Public names a module exports: its ``__all__``, else its public attributes defined in
    the same package."""
    names = getattr(module, "__all__", None)
    if names is None:
        root = module.__name__.split(".")[0]
        names = [n for n in dir(module) if _public(n)
                 and (getattr(_get(module, n), "__module__", "") or "").startswith(root)]
    return [n for n in names if _public(n) and _get(module, n) is not _MISSING]


def _role(obj):
    if inspect.isclass(obj):
        return "py:exception" if issubclass(obj, BaseException) else "py:class"
    if callable(obj):
        return "py:function"
    return "py:data"


def entries(project):
    """``(name, role, uri)`` of every public module, object and class member of ``project``."""
    _, _, modules, module_url, object_url = PROJECTS[project]
    seen = {}
    for module_name in modules:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(module_name)
        except ImportError:  # an optional part of the package is missing: skip it
            continue
        uri = module_url(module_name)
        if uri:
            seen.setdefault(module_name, ("py:module", uri))
        for name in _exported(module):
            obj = _get(module, name)
            if inspect.ismodule(obj):
                continue
            qual = f"{module_name}.{name}"
            seen.setdefault(qual, (_role(obj), object_url(qual)))
            if inspect.isclass(obj):
                for member in dir(obj):
                    if not _public(member):
                        continue
                    attr = inspect.getattr_static(obj, member, None)
                    role = ("py:method" if callable(attr) or isinstance(
                        attr, (classmethod, staticmethod)) else "py:attribute")
                    seen.setdefault(f"{qual}.{member}", (role, object_url(qual, member)))
    return [(name, role, uri) for name, (role, uri) in sorted(seen.items())]


def write_inventory(project, path):
    """Write the inventory of ``project`` to ``path`` unless one for the installed version is
    there already; return ``(base URL, path)`` for ``intersphinx_mapping``."""
    title, base, modules, _, _ = PROJECTS[project]
    version = importlib.import_module(modules[0].split(".")[0]).__version__
    header = (f"# Sphinx inventory version 2\n# Project: {title}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n").encode()
    path = Path(path)
    if not (path.exists() and path.read_bytes().startswith(header)):
        body = "".join(f"{name} {role} 1 {uri} -\n" for name, role, uri in entries(project))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(header + zlib.compress(body.encode()))
    return base, str(path)


def intersphinx_mapping(directory):
    """``intersphinx_mapping`` with a local inventory for every project in :data:`PROJECTS`."""
    return {name: write_inventory(name, Path(directory) / f"{name}.inv") for name in PROJECTS}
