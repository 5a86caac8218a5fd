"""The C walk of lexbor's tree is used only when it binds and agrees with the Python walk.

Each way of falling back is met for real: a library that is no shared object, one without
lexbor's functions, a module that is not there, and a Python walk that expects other text.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from selectolax.lexbor import LexborHTMLParser

from dedup import html_text, lexbor_text
from dedup.lexbor_text import (
    FIXTURE, FIXTURE_ROOTS, FIXTURE_SKIP, FIXTURE_TAGS, LexborText, bind_c, check_c_walk,
)

ROOT = Path(__file__).resolve().parent.parent.parent

try:
    from dedup import _lexbor_text  # type: ignore[attr-defined]
except ImportError:
    _lexbor_text = None
built = pytest.mark.skipif(_lexbor_text is None, reason="dedup._lexbor_text was not built")


def test_the_fixture_has_the_tricky_parts() -> None:
    walk = LexborText(*FIXTURE_TAGS, use_c=False)
    words = walk(FIXTURE, lines=False, max_depth=100).decode("utf-8").split()
    assert words[:3] == ["Café", "&", "été"]  # an entity; the style and the script are gone
    assert "foobar" in words and "¬anentity;" in words and "<tag>" in words  # inline; entities
    assert words.index("fostered") < words.index("one")  # text in a table moves before it
    assert "comment" not in words and "kept" not in words  # a comment, a template
    assert "日本語" in words and "🙂" in words
    text = walk(FIXTURE, lines=True, max_depth=100).decode("utf-8")
    assert "line one\ufdd0line  two" in text  # pre: \r\n is one line break
    assert walk(FIXTURE, lines=True, max_depth=8) is None  # the inner table is deeper


def test_the_fixture_area_has_the_tricky_parts() -> None:
    walk = LexborText(*FIXTURE_TAGS, use_c=False)
    tree = LexborHTMLParser(FIXTURE)
    roots = [(node, *lexbor_text._context(node, walk.pre)) for node in tree.css(FIXTURE_ROOTS)]
    assert [(node.tag, depth, pre) for node, depth, pre in roots if node.tag == "b"] == [("b", 3, 1)]
    skip = frozenset(node.mem_id for node in tree.css(FIXTURE_SKIP))
    text = walk.tree_text(tree, True, 100, roots, skip).decode("utf-8")
    assert text.count("in\ufdd0pre") == 2  # the pre, and the root inside it: its \r a break too
    assert "Home" in text and "Ab" not in text  # the second item is left out
    # the inner table's row is left out, but its cell is a root: the walk reads what it is given
    # (resolve() drops a root inside a left-out element)
    assert "one\ufdd0\ufdd0after" in text and "inner\tcell" in text
    # the whole tree less the left-out elements; the inner table's rows are too deep at 8
    assert "fostered" in walk.tree_text(tree, False, 100, None, skip).decode("utf-8")
    assert walk.tree_text(tree, False, 8, None, skip) is None
    assert walk.tree_text(tree, False, 8, None, frozenset()) is None
    assert walk.fits(FIXTURE, 100) and not walk.fits(FIXTURE, 8)


@built
def test_the_c_walk_passes_its_check_and_runs() -> None:
    assert check_c_walk(_lexbor_text) is None
    assert lexbor_text.FALLBACK is None and html_text.FAST_FALLBACK is None
    assert html_text.FAST_IMPLEMENTATION == "C"


@built
def test_a_c_walk_that_disagrees_is_not_used() -> None:
    # the real C walk against a Python walk that expects other text: li is no block for it
    block, removed, pre = FIXTURE_TAGS
    expects_otherwise = (block - {"li"}, removed, pre)
    problem = check_c_walk(_lexbor_text, expects_otherwise)
    assert problem is not None
    assert problem.startswith("the C walk and the Python walk disagree on the fixture (lines=True")
    module, why = bind_c(python_tags=expects_otherwise)
    assert (module, why) == (None, problem)
    # and the walk is checked again with what it must give: it still binds
    assert bind_c() == (_lexbor_text, None)


@built
def test_a_library_that_does_not_bind_is_not_used(tmp_path: Path) -> None:
    not_a_library = tmp_path / "liblexbor.so"
    not_a_library.write_bytes(b"#!/bin/sh\n")
    module, why = bind_c(library=str(not_a_library))
    assert module is None
    assert why is not None and why.startswith(f"could not bind lexbor in {not_a_library}: ")
    libc = ctypes.util.find_library("c")
    if libc is not None:  # a real shared object, without lexbor's functions
        module, why = bind_c(library=libc)
        assert module is None and why is not None and "lxb_html_document_create" in why
    # a failed bind keeps the functions bound before: the engine still gives the same text
    assert html_text.extract("<p>a<b>b</b></p><p>c", lines=False).split() == ["ab", "c"]
    assert check_c_walk(_lexbor_text) is None


def test_without_the_c_module_the_python_walk_runs_and_says_why() -> None:
    # a fresh interpreter where dedup._lexbor_text cannot be imported, as after an install
    # without a C compiler: the fast engine runs in Python and gives the same text
    probe = (
        "import json, sys; sys.modules['dedup._lexbor_text'] = None; "
        "import dedup.html_text as h; "
        "print(json.dumps([h.FAST_IMPLEMENTATION, h.FAST_FALLBACK, "
        "h.extract(sys.argv[1], lines=False)]))"
    )
    html = "<ul><li>Home<li>Ab<b>ou</b>t</ul><script>x</script>caf&eacute;"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", probe, html], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    implementation, why, text = json.loads(done.stdout)
    assert implementation == "Python"
    assert why == "dedup._lexbor_text was not built (no C compiler at install)"
    assert text == html_text.extract(html, lines=False)
