"""The notebooks use only the public API and run, at small size, from a non-editable install.

The package is installed once per session with ``pip install --no-deps --target`` from a copy
of the source tree (so that the build leaves no files in the repository), and every notebook's
kernel runs with that directory first on ``PYTHONPATH`` and its working directory outside the
repository. A first injected cell checks that ``sksubsample`` is imported from the installed
copy: a notebook that reached into the source tree (``sys.path`` edits, ``benchmarks/``) or
that needs files absent from the wheel fails here.
"""

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PUBLIC_MODULES = ("sksubsample", "sksubsample.algorithms", "sksubsample.cluster",
                  "sksubsample.datasets", "sksubsample.metrics", "sksubsample.diagnostics")


def _code_cells(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def _markdown(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_imports_only_the_public_api(path):
    for source in _code_cells(path):
        assert "sys.path" not in source, f"{path.name}: edits sys.path"
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [(node.module, [alias.name for alias in node.names])]
            else:
                continue
            for module, names in modules:
                if not module.startswith("sksubsample"):
                    continue
                assert module in PUBLIC_MODULES, f"{path.name}: import of {module}"
                public = importlib.import_module(module).__all__
                for name in names or ():
                    assert name in public, f"{path.name}: {name} is not in {module}.__all__"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_states_its_run_time_and_small_mode(path):
    header = _markdown(path)[0]
    assert "SKSUBSAMPLE_SMALL=1" in header
    assert re.search(r"run ?time", header, re.IGNORECASE), header


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_stores_the_figures_it_draws(path):
    """The documentation renders the stored outputs: a notebook that plots must store figures
    (a run under a non-interactive matplotlib backend stores none)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    if not any("plt." in "".join(c["source"]) for c in code):
        pytest.skip(f"{path.name} draws no figure")
    images = [o for c in code for o in c.get("outputs", ()) if "image/png" in o.get("data", {})]
    assert images, f"{path.name} plots but its stored outputs hold no figure"


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory):
    """A regular (non-editable) install of the package into a fresh directory."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "sksubsample", source / "sksubsample",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
         str(target), str(source)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (target / "sksubsample" / "__init__.py").is_file()
    return target


@pytest.mark.xdist_group("installed_package")  # one install, one kernel cache, for all
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_from_the_installed_package(path, installed_package, monkeypatch,
                                                      tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("SKSUBSAMPLE_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(installed_package), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = nbformat.read(path, as_version=4)
    check = nbformat.v4.new_code_cell(
        "import pathlib, sksubsample\n"
        f"_site = pathlib.Path({str(installed_package)!r}).resolve()\n"
        "_used = pathlib.Path(sksubsample.__file__).resolve()\n"
        "assert _used.is_relative_to(_site), f'sksubsample imported from {_used}'\n"
        f"assert not pathlib.Path.cwd().resolve().is_relative_to({str(ROOT)!r})")
    nb.cells.insert(0, check)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
