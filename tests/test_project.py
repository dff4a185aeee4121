"""Project-level checks: README commands and CI stay in sync."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_readme_has_exactly_two_fresh_machine_commands():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert "sksubsample.demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _readme_commands()[1] in ci.splitlines()


# ----------------------------------------------------------------------------- import contracts

#: One import of each kind the layering forbids, planted at the end of a module.
_PLANTED = {
    "the estimators' base imports an estimator": (
        "_base.py", "from .linear_model import BayesianLogisticRegressionMH"),
    "a lower subpackage of the core imports a higher one": (
        "algorithms/sampling/_gumbel.py", "from ..mh import Proposal"),
    "an estimator imports another estimator's private module": (
        "linear_model/_logistic.py", "from ..cluster import _coref"),
    "an estimator imports a private module of the core": (
        "linear_model/_logistic.py", "from ..algorithms.glm import _target"),
}


def _lint_imports(tree):
    import os
    import subprocess
    import sys

    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(lint), "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def _scratch_copy(tmp_path):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "sksubsample", tree / "sksubsample",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_import_contracts_hold_on_the_tree(tmp_path):
    result = _lint_imports(_scratch_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_import_contracts_catch_each_kind_of_violation(tmp_path):
    for kind, (module, line) in _PLANTED.items():
        tree = _scratch_copy(tmp_path / kind.replace(" ", "_").replace("'", ""))
        path = tree / "sksubsample" / module
        path.write_text(path.read_text() + f"\n{line}  # planted\n")
        result = _lint_imports(tree)
        assert result.returncode != 0 and "BROKEN" in result.stdout, (
            f"{kind} was not caught:\n{result.stdout}{result.stderr}")
