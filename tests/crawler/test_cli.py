"""The compare and curve commands, run as a user runs them."""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.cli import main

ROOT = Path(__file__).resolve().parents[2]
ARTICLE = ROOT / "tests" / "crawler" / "samples" / "article.html"
MIRROR = ROOT / "tests" / "crawler" / "samples" / "article-mirror.html"


def run_json(capsys, *argv: str):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_compare_json_has_the_contract_keys(capsys):
    out = run_json(capsys, "compare", str(ARTICLE), str(MIRROR))
    for section in ("exact", "estimate"):
        for key in ("resemblance", "containment_a_in_b", "containment_b_in_a"):
            assert 0.0 <= out[section][key] <= 1.0
    assert out["a"]["format"] == "html"
    assert out["identical"] is False
    # The mirror differs by links, a copyright sentence and two words: near, not identical.
    assert 0.75 < out["exact"]["resemblance"] < 1.0
    assert out["exact"]["containment_b_in_a"] < out["exact"]["containment_a_in_b"]


def test_compare_estimate_tracks_exact_within_the_sampling_error(capsys):
    # MIN_s: matches among s entries ~ hypergeometric, sd <= sqrt(r(1-r)/s); allow 4 sd.
    s = 100
    for seed in (1, 2, 3):
        out = run_json(capsys, "compare", str(ARTICLE), str(MIRROR), "--seed", str(seed))
        r = out["exact"]["resemblance"]
        sd = math.sqrt(r * (1 - r) / s)
        assert abs(out["estimate"]["resemblance"] - r) <= 4 * sd + 1e-9


def test_compare_a_document_with_itself(capsys):
    for kind in ("min", "mod", "minmod", "tiered", "permutation"):
        out = run_json(capsys, "compare", str(ARTICLE), str(ARTICLE), "--sketch", kind)
        assert out["identical"] is True
        assert out["exact"]["resemblance"] == 1.0
        assert out["estimate"]["resemblance"] == 1.0
        assert out["estimate"]["containment_a_in_b"] == 1.0


def test_compare_text_and_option_a(tmp_path, capsys):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text("a rose is a rose is a rose", encoding="utf-8")
    b.write_text("A rose is a flower which is a rose.", encoding="utf-8")
    # Errata item 2: Option A, w = 1..3 → 0.7, 0.5, 0.3; Option B → 0.6, 0.5, 3/7.
    for w, ra, rb in ((1, 0.7, 0.6), (2, 0.5, 0.5), (3, 0.3, 3 / 7)):
        out_a = run_json(capsys, "compare", str(a), str(b), "-w", str(w), "--option", "A")
        out_b = run_json(capsys, "compare", str(a), str(b), "-w", str(w), "--option", "B")
        assert out_a["a"]["format"] == "text"
        assert out_a["exact"]["resemblance"] == pytest.approx(ra)
        assert out_b["exact"]["resemblance"] == pytest.approx(rb)


def test_compare_human_output(capsys):
    assert main(["compare", str(ARTICLE), str(MIRROR)]) == 0
    out = capsys.readouterr().out
    assert "resemblance r(A,B)" in out
    assert "sketch entries matched" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compare", "missing.html", str(ARTICLE)], "cannot read missing.html"),
        (["compare", str(ARTICLE), str(MIRROR), "--set", "sketch.shingle_sise=5"],
         "sketch.shingle_sise"),
        (["compare", str(ARTICLE), str(MIRROR), "-s", "0"], "sketch.size"),
        (["curve", "-s", "10", "-k", "11"], "--matches"),
        (["curve", "--plot", "curve.gif"], ".png or .svg"),
    ],
)
def test_user_mistakes_are_one_line(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_curve_reproduces_the_lecture(capsys):
    rows = run_json(capsys, "curve", "--sketch-size", "100", "--matches", "90")
    assert [row["resemblance"] for row in rows] == [i / 100 for i in range(101)]
    by_r = {row["resemblance"]: row["probability"] for row in rows}
    assert round(by_r[0.8], 4) == 0.0057
    assert round(by_r[0.9], 4) == 0.5832
    assert round(by_r[0.95], 4) == 0.9885
    assert by_r[0.5] == pytest.approx(1.5e-17, rel=0.05)
    assert by_r[1.0] == 1.0


def test_curve_defaults_come_from_the_config(capsys):
    assert main(["curve"]) == 0
    out = capsys.readouterr().out
    assert "at least 90 of 100" in out
    assert " 0.90        0.5832" in out


def test_curve_plots(tmp_path, capsys):
    png, svg = tmp_path / "c.png", tmp_path / "c.svg"
    assert main(["curve", "--plot", str(png)]) == 0
    assert main(["curve", "--plot", str(svg), "-s", "200", "-k", "170"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]


def test_console_script_and_stdin():
    exe = shutil.which("neardup", path=str(Path(sys.executable).parent))
    assert exe, "the neardup console script is installed"
    done = subprocess.run(
        [exe, "compare", "-", str(ARTICLE), "--json"],
        input=ARTICLE.read_bytes(), capture_output=True, check=True,
    )
    assert json.loads(done.stdout)["exact"]["resemblance"] == 1.0
    helped = subprocess.run([exe, "compare", "--help"], capture_output=True, text=True, check=True)
    assert "--sketch-size" in helped.stdout and "resemblance" in helped.stdout


def _examples(text: str) -> list[str]:
    """The example commands of a help text: indented lines that start with ``neardup``, a line
    that ends in a backslash continued by the next, as a shell reads them."""
    commands, lines = [], iter(text.splitlines())
    for line in lines:
        if line.startswith("  neardup "):
            command = line.strip()
            while command.endswith("\\"):
                command = command[:-1].rstrip() + " " + next(lines).strip()
            commands.append(command)
    return commands


def _words(command: str) -> list[str]:
    """The words a shell hands the command, up to a pipe or a redirection."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(itertools.takewhile(lambda word: word not in ("|", ">", "<", ">>", "&&", ";"),
                                    lexer))


def test_every_help_example_is_a_command_the_parser_takes():
    """What --help shows as an example can be copied as it is: the parser accepts it, and no
    part of it sits where the help's explanations go (after a wide gap)."""
    from crawler.cli import COMMANDS, EPILOG, build_parser

    parser = build_parser()
    texts = {"neardup": EPILOG, **{name: module.DESCRIPTION for name, module in COMMANDS.items()}}
    checked = 0
    for where, text in texts.items():
        for example in _examples(text):
            command, explained = [*re.split(r"\s{2,}", example, maxsplit=1), ""][:2]
            assert not explained.startswith("-"), f"{where} --help: {example!r}"
            parser.parse_args(_words(command)[1:])
            checked += 1
    assert checked >= 2 * len(COMMANDS)
