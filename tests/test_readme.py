"""README's two set-up commands are the contract with a new user; keep them true."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_opens_with_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = text[: text.index("\n## ")]
    assert len(re.findall(r"```sh\n", head)) == 2


def test_ci_runs_exactly_the_readme_test_command():
    test_command = _commands()[1]
    assert "pytest" in test_command
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines


def test_main_command_names_files_that_exist():
    main_command = _commands()[0]
    for path in re.findall(r"crawler/\S+\.html", main_command):
        assert (ROOT / path).is_file(), path
