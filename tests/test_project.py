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
