"""The API reference pages, written from each public module's ``__all__``.

Pure Python (no Sphinx import), so the test suite can check the lists without Sphinx: every
name a public module exports gets an ``autosummary`` entry, hence a page of its own.
"""

from __future__ import annotations

import importlib
from pathlib import Path

#: (module, title) of every public module, in reference order.
PUBLIC_MODULES = (
    ("sksubsample", "Estimators"),
    ("sksubsample.algorithms", "Algorithms"),
    ("sksubsample.cluster", "Clustering"),
    ("sksubsample.diagnostics", "Diagnostics"),
    ("sksubsample.metrics", "Metrics"),
    ("sksubsample.datasets", "Datasets"),
)


def public_names(module_name):
    """The names of ``module.__all__`` that get a page (dunder names such as ``__version__``
    excluded, and names the top-level package re-exports, which get theirs there), sorted
    case-insensitively."""
    module = importlib.import_module(module_name)
    names = [n for n in module.__all__ if not (n.startswith("__") and n.endswith("__"))]
    if module_name != "sksubsample":
        top = importlib.import_module("sksubsample")
        names = [n for n in names if getattr(top, n, None) is not getattr(module, n)]
    return sorted(names, key=str.lower)


def page_name(module_name):
    """File stem of the reference page of ``module_name``."""
    return module_name.replace(".", "_")


def module_page(module_name, title):
    """reStructuredText of one module's reference page: an autosummary of its public names."""
    names = public_names(module_name)
    heading = f"{title}: ``{module_name}``"
    lines = [
        heading, "=" * len(heading), "",
        f".. automodule:: {module_name}", "   :no-members:", "",
        f".. currentmodule:: {module_name}", "",
        ".. autosummary::", "   :toctree: generated/", "   :nosignatures:", "",
        *(f"   {name}" for name in names), "",
    ]
    return "\n".join(lines)


def index_page():
    """reStructuredText of the API index: one toctree entry per public module."""
    lines = ["API reference", "=============", "",
             "Every public name of the package, generated from each module's ``__all__``.", "",
             ".. toctree::", "   :maxdepth: 1", "",
             *(f"   {page_name(m)}" for m, _ in PUBLIC_MODULES), ""]
    return "\n".join(lines)


def write_pages(directory):
    """Write ``index.rst`` and one page per public module into ``directory`` (only files whose
    text changed are rewritten, so Sphinx does not rebuild unchanged pages)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pages = {"index.rst": index_page()}
    for module_name, title in PUBLIC_MODULES:
        pages[f"{page_name(module_name)}.rst"] = module_page(module_name, title)
    for name, text in pages.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return sorted(pages)


def documented_names(directory):
    """``{module: [names]}`` listed by the autosummary blocks of the pages in ``directory``."""
    found = {}
    for module_name, _ in PUBLIC_MODULES:
        path = Path(directory) / f"{page_name(module_name)}.rst"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        block = text.split(".. autosummary::", 1)[1] if ".. autosummary::" in text else ""
        found[module_name] = [line.strip() for line in block.splitlines()
                              if line.startswith("   ") and not line.strip().startswith(":")
                              and line.strip()]
    return found
