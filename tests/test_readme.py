"""README is the contract with a new user: its two set-up commands and the files it names stay true.

The commands are checked step by step against what makes them work (the extras pyproject
declares, the script it installs, CI's copy of the test command) and the main one is run; every
repository path and dotted module name the README mentions must exist.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: what pip installed from pyproject.toml: the extras and the scripts the commands rely on
INSTALLED = metadata.distribution("neardup")

#: the top-level folders and files of the repository a README mention may name
_TOP = r"(?:crawler|dedup|storage|tests|benchmarks|docs)"
_PATH = re.compile(rf"(?<![\w./-])({_TOP}/[\w./-]*|config\.yaml|pyproject\.toml|\.ci/run)")
#: a dotted module or name; ``dedup.threshold=0.8`` is a config key being set, not a module
_DOTTED = re.compile(rf"(?<![\w./-])({_TOP}(?:\.[A-Za-z_]\w*)+)(?![\w=])")


def _commands() -> list[str]:
    head = README[: README.index("\n## ")]
    return re.findall(r"```sh\n(.+?)\n```", head)


def _steps(command: str) -> list[list[str]]:
    return [shlex.split(step) for step in command.split("&&")]


def _installs(command: str) -> list[str]:
    """The targets of the command's ``pip install -e``: ``.`` or ``.[extra,...]``."""
    return [step[step.index("-e") + 1] for step in _steps(command) if "install" in step]


def test_readme_opens_with_two_commands():
    assert len(_commands()) == 2
    main, test = _commands()
    assert _steps(main)[0] == _steps(test)[0] == ["python3", "-m", "venv", ".venv"]


def test_ci_runs_exactly_the_readme_test_command():
    test_command = _commands()[1]
    assert _steps(test_command)[-1] == [".venv/bin/python", "-m", "pytest"]
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines


def test_the_commands_install_this_project_with_extras_it_declares():
    main, test = _commands()
    assert _installs(main) == ["."]  # the main job needs no extra
    assert _installs(test) == [".[test]"]
    assert "test" in INSTALLED.metadata.get_all("Provides-Extra", [])
    requirements = INSTALLED.requires or []
    assert any(re.match(r"pytest\b.*extra == .test.", line) for line in requirements)


def test_the_main_command_calls_the_script_the_project_installs():
    program, *_ = _steps(_commands()[0])[-1]
    name = Path(program).name
    assert program == f".venv/bin/{name}"
    (script,) = [
        e for e in INSTALLED.entry_points if (e.group, e.name) == ("console_scripts", name)
    ]
    assert callable(script.load())


def test_the_main_command_works_and_leaves_the_store_the_readme_names(tmp_path):
    # the last step of README's main command, run as written by the script pip installed
    program, *arguments = _steps(_commands()[0])[-1]
    script = Path(sys.executable).parent / Path(program).name
    assert script.is_file(), f"{script} missing: run README's first command to install it"
    done = subprocess.run([str(script), *arguments], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TRUTH.json agrees" in done.stdout
    store = re.search(r"fresh store, `(\./[^`]+)`", README)
    assert store is not None, "README no longer says where the demo's store goes"
    assert (tmp_path / store.group(1) / "manifest.json").is_file()


def test_every_repository_path_in_the_readme_exists():
    paths = {path.rstrip(".") for path in _PATH.findall(README)}
    assert {"crawler/", "dedup/_probes.c", "config.yaml"} <= paths  # the pattern still finds them
    missing = sorted(path for path in paths if not (ROOT / path).exists())
    assert missing == []


def test_the_documents_stay_short_enough_to_read():
    # README is for users; depth goes to docs/, one subject a file
    assert len(README.splitlines()) <= 250
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert len(doc.read_text(encoding="utf-8").splitlines()) <= 400, doc.name
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).is_file(), link


#: an internal milestone (the word stop or session and a number), which no reader can know: git
#: keeps history
_MILESTONE = re.compile(r"\b(?:stop|session) \d{1,3}\b", re.IGNORECASE)


def test_no_internal_milestone_numbers_in_the_tree():
    found = []
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if not path.is_file() or parts[0].startswith(".") or path.suffix not in _TEXT:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _MILESTONE.search(line) and "spark session" not in line.lower():
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert found == []


_TEXT = {".py", ".md", ".yaml", ".toml", ".txt", ".c", ".j2"}


def _resolves(dotted: str) -> bool:
    """True when ``dotted`` is a module, or a module followed by attributes it has."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.util.find_spec(".".join(parts[:cut])) is not None
        except ModuleNotFoundError:  # a parent is missing
            found = False
        if found:
            break
    else:
        return False
    if cut == len(parts):
        return True  # a module: found, not imported (benchmarks need the bench extra)
    value: object = importlib.import_module(".".join(parts[:cut]))
    for attribute in parts[cut:]:
        if not hasattr(value, attribute):
            return False
        value = getattr(value, attribute)
    return True


def test_every_module_and_name_in_the_readme_exists():
    names = set(_DOTTED.findall(README))
    assert {"dedup.document.Sketcher", "crawler.pipelines.DedupPipeline"} <= names
    assert sorted(name for name in names if not _resolves(name)) == []


def test_the_readme_python_one_liners_run():
    snippets = re.findall(r'`python -c "([^"`]+)"`', README)
    assert snippets  # the FAST_IMPLEMENTATION check, at least
    for snippet in snippets:
        done = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0 and done.stdout.strip(), (snippet, done.stderr[-2000:])
