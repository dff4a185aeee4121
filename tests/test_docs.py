"""The documentation site's generators: API page lists, result tables, offline inventories.

These tests need no Sphinx: they check the pure-Python helpers under ``docs/_ext`` that
``docs/conf.py`` runs before a build. Only the checks of the Sphinx side (the inventory file
Sphinx reads, the table nodes) skip when Sphinx is not installed.
"""

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "docs" / "_ext"


@pytest.fixture(scope="module")
def ext():
    """The helper modules of ``docs/_ext``, imported by name as ``conf.py`` does."""
    sys.path.insert(0, str(EXT))
    try:
        yield {name: importlib.import_module(name)
               for name in ("api_pages", "results_tables", "inventories")}
    finally:
        sys.path.remove(str(EXT))


def _public(module_name):
    names = importlib.import_module(module_name).__all__
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def test_every_public_name_has_an_api_page(ext, tmp_path):
    api = ext["api_pages"]
    api.write_pages(tmp_path)
    documented = api.documented_names(tmp_path)
    top = importlib.import_module("sksubsample")
    for module_name, _ in api.PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        # A name the top-level package re-exports is documented there, once.
        expected = {n for n in _public(module_name) if module_name == "sksubsample"
                    or getattr(top, n, None) is not getattr(module, n)}
        assert set(documented[module_name]) == expected, module_name
    estimators = set(documented["sksubsample"])
    assert {"BayesianLogisticRegressionMH", "ARCHOrderSelector",
            "CorefGibbsClusterer"} <= estimators
    assert "__version__" not in estimators


def test_the_reference_covers_every_public_module(ext):
    """Every module the notebooks may import from (the public API) has a reference page."""
    from tests.test_notebooks import PUBLIC_MODULES

    assert set(PUBLIC_MODULES) == {m for m, _ in ext["api_pages"].PUBLIC_MODULES}


def test_api_index_lists_every_module_page(ext, tmp_path):
    api = ext["api_pages"]
    written = api.write_pages(tmp_path)
    index = (tmp_path / "index.rst").read_text()
    for module_name, _ in api.PUBLIC_MODULES:
        stem = api.page_name(module_name)
        assert f"{stem}.rst" in written
        assert re.search(rf"^   {re.escape(stem)}$", index, re.MULTILINE)


def test_result_tables_render_the_stored_results(ext):
    tables = ext["results_tables"]
    for name, generator in tables.TABLES.items():
        table = generator()
        assert table.rows, f"{name}: no rows from {tables.RESULTS}"
        assert all(len(row) == len(table.header) for row in table.rows), name


def test_result_tables_tolerate_missing_files_and_keys(ext, tmp_path):
    tables = ext["results_tables"]
    for name, generator in tables.TABLES.items():
        if name == "barker_correction_shipped":  # reads the package's data, not a results file
            continue
        assert generator(results=tmp_path).rows == [], name
    # A record written by another version of a script: unknown keys are ignored, missing
    # ones show as a dash.
    (tmp_path / "gumbel_tree_timing.json").write_text(json.dumps(
        {"rows": [{"m": 1000, "select_us_min": 9.0, "new_key": 1}]}))
    table = tables.tree_timing(results=tmp_path)
    assert table.rows == [["1,000", "9.0", "–", "–", "–", "–"]]
    assert "–" in table.title
    assert tables.value("gumbel_tree_timing", "rows.0.m", ",", results=tmp_path) == "1,000"
    assert tables.value("gumbel_tree_timing", "rows.3.m", results=tmp_path) == "–"
    assert tables.value("absent", "a.b", results=tmp_path) == "–"


def test_docs_pages_use_only_known_tables(ext):
    known = set(ext["results_tables"].TABLES)
    used = set()
    for page in (ROOT / "docs").rglob("*.md"):
        if "_build" in page.parts:
            continue
        used |= set(re.findall(r"```\{results-table\} (\w+)", page.read_text()))
    assert used and used <= known, used - known


def test_inventory_urls_follow_each_projects_scheme(ext):
    entries = {name: uri for name, _, uri in ext["inventories"].entries("numpy")}
    assert entries["numpy.random.Generator"] == (
        "reference/random/generator.html#numpy.random.Generator")
    assert entries["numpy.linspace"] == "reference/generated/numpy.linspace.html#numpy.linspace"
    sklearn_url = ext["inventories"].PROJECTS["sklearn"][4]
    assert sklearn_url("sklearn.pipeline.Pipeline") == (
        "modules/generated/sklearn.pipeline.Pipeline.html#sklearn.pipeline.Pipeline")


def test_inventory_file_is_readable_by_sphinx(ext, tmp_path):
    inventory = pytest.importorskip("sphinx.util.inventory")
    base, path = ext["inventories"].write_inventory("numpy", tmp_path / "numpy.inv")
    with open(path, "rb") as stream:
        data = stream.read()
    if hasattr(inventory.InventoryFile, "loads"):
        loaded = inventory.InventoryFile.loads(data, uri=base)
    else:  # Sphinx < 8.2
        import io

        loaded = inventory.InventoryFile.load(io.BytesIO(data), base, lambda *a: "/".join(a))
    items = loaded.data if hasattr(loaded, "data") else loaded
    target = items["py:class"]["numpy.random.Generator"]
    uri = target.uri if hasattr(target, "uri") else target[2]
    assert uri == base + "reference/random/generator.html#numpy.random.Generator"


def test_result_table_becomes_a_docutils_table(ext):
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(EXT))
    try:
        directive = importlib.import_module("results_directive")
    finally:
        sys.path.remove(str(EXT))
    table = ext["results_tables"].Table("title", ["a", "b"], [["1", "2"], ["3", "4"]])
    node = directive.table_node(table)
    assert node.astext().split() == ["title", "a", "b", "1", "2", "3", "4"]


def test_readme_builds_the_docs_as_ci_does():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.+?)\n```", layout)
    assert len(commands) == 1 and "sphinx" in commands[0] and ".[docs]" in commands[0]
    build = commands[0].split("&& ")[-1]
    assert "-W" in build.split()
    ci = (ROOT / ".ci" / "run").read_text()
    assert any(line.strip().startswith(build) for line in ci.splitlines()), build
