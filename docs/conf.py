"""Sphinx configuration of the sksubsample documentation.

Build with ``python -m sphinx -W -b html docs docs/_build/html`` (extra ``docs``). Before
Sphinx reads any page, this file writes, into folders that are not kept in the repository:

* ``docs/api/``: the API reference, one autosummary entry per name of each public module's
  ``__all__`` (``_ext/api_pages.py``);
* ``docs/notebooks/``: copies of ``notebooks/*.ipynb``, rendered with their stored outputs
  (never executed here);
* ``docs/_generated/inventories/``: intersphinx inventories of scikit-learn, NumPy, SciPy and
  ArviZ made from the installed packages (``_ext/inventories.py``), so no download is needed.

Result tables are rendered from ``benchmarks/results/*.json`` while the pages are read
(``_ext/results_tables.py``).
"""

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

import api_pages  # noqa: E402
import inventories  # noqa: E402

import sksubsample  # noqa: E402

# -- generated sources -----------------------------------------------------------------------

api_pages.write_pages(DOCS / "api")


def _copy_notebooks():
    """Mirror ``notebooks/*.ipynb`` into ``docs/notebooks`` (unchanged files are kept)."""
    target = DOCS / "notebooks"
    target.mkdir(exist_ok=True)
    sources = {p.name: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
    for stale in target.glob("*.ipynb"):
        if stale.name not in sources:
            stale.unlink()
    for name, source in sources.items():
        copy = target / name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            shutil.copyfile(source, copy)


_copy_notebooks()

# -- project ---------------------------------------------------------------------------------

project = "sksubsample"
author = "the sksubsample developers"
copyright = "the sksubsample developers"
release = sksubsample.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "results_directive",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "README.md", "**.ipynb_checkpoints"]
root_doc = "index"

# -- API reference ---------------------------------------------------------------------------

autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Document a class's members only when sksubsample implements them: what scikit-learn,
    NumPy or ``tuple`` provide (``get_params``, ``count``, ...) is documented by its project."""
    if what != "class":
        return None
    target = getattr(obj, "fget", obj)
    target = getattr(target, "__func__", target)
    module = getattr(target, "__module__", None)
    if isinstance(module, str) and not module.startswith("sksubsample"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)


# -- intersphinx, offline --------------------------------------------------------------------

intersphinx_mapping = inventories.intersphinx_mapping(DOCS / "_generated" / "inventories")
intersphinx_timeout = 1

# -- notebooks and Markdown ------------------------------------------------------------------

nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# -- HTML ------------------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"sksubsample {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_static_path = []
html_show_sourcelink = False
toc_object_entries_show_parents = "hide"
