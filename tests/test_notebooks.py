"""The notebooks use only the public API and run, at small size, outside the repository.

Each notebook's kernel runs with its working folder outside the repository and the package as
this environment installed it (so that the kernels share the compiled-kernel cache the other
tests fill: compiling every kernel again for a copy of the package would double the suite's
time). What a checkout has and an install lacks is checked apart: the notebooks import only
the public API and no module of the repository, and a non-editable install of the package holds
every file of the source package and finds its data.
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


@pytest.fixture(scope="module")
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
    return target


def _package_files(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_installed_package_holds_every_file_and_loads_its_data(installed_package):
    """What the notebooks need besides code: a non-editable install holds every file of the
    source package (modules and data), and, imported from there, finds its data files (the
    Barker correction tables of every shipped sigma)."""
    source_files = _package_files(ROOT / "sksubsample")
    installed_files = _package_files(installed_package / "sksubsample")
    assert source_files - installed_files == set()
    script = (
        "import pathlib, sys, sksubsample\n"
        "from sksubsample.algorithms import BarkerCorrection\n"
        "from sksubsample.algorithms.mh._correction import SHIPPED_SIGMAS\n"
        f"site = pathlib.Path({str(installed_package)!r}).resolve()\n"
        "assert pathlib.Path(sksubsample.__file__).resolve().is_relative_to(site)\n"
        "for sigma in SHIPPED_SIGMAS:\n"
        "    assert BarkerCorrection(sigma).from_table, sigma\n"
        "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(installed_package)}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=False, cwd=installed_package)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


#: Top-level names of the repository that are not the package: a notebook importing one runs
#: only from a checkout.
REPOSITORY_ONLY = {p.stem for p in ROOT.iterdir()
                   if p.stem not in ("sksubsample", "") and not p.name.startswith(".")
                   and (p.is_dir() or p.suffix == ".py")}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_imports_nothing_of_the_repository(path):
    for source in _code_cells(path):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules = [node.module]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] not in REPOSITORY_ONLY, f"{path.name}: {module}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_outside_the_repository(path, monkeypatch, tmp_path):
    """Each notebook runs, at small size, in a kernel whose working folder is outside the
    repository, with the package this environment installed (its kernel cache is the one the
    rest of the tests fill)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("SKSUBSAMPLE_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(path, as_version=4)
    check = nbformat.v4.new_code_cell(
        "import pathlib\n"
        f"assert not pathlib.Path.cwd().resolve().is_relative_to({str(ROOT)!r})")
    nb.cells.insert(0, check)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
