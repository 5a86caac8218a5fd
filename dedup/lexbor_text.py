"""The fast engine of :mod:`dedup.html_text`: lexbor's HTML5 tree, walked without Python per node.

selectolax parses with lexbor, a C HTML5 parser several times faster than libxml2 and faithful to
the WHATWG parsing algorithm, which html5ever (the reference engine's parser) implements too.
But selectolax's own API costs a Python object per node, and the marked text needs a look at
every element. So the walk is done in C (``dedup/_lexbor_text.c``, built at install): it calls
lexbor through the functions selectolax's extension exports, whose addresses :class:`LexborText`
finds with ctypes. Where that module was not built (no C compiler at install), cannot bind, or
gives other text than the Python walk on :data:`FIXTURE` (checked once, at import), the same walk
runs in Python over selectolax's nodes: the same text, slower. :data:`FALLBACK` says why.

Building an HTML5 tree takes time quadratic in its depth, so both walks take a ``max_depth``
and give None for a document whose elements nest deeper; the C one also stops parsing as soon as
the tree under construction is that deep (see ``_lexbor_text.c``). The Python one cannot (its
parser takes the document whole), so there a page of a million nested elements still costs its
minutes: one more reason to install with a C compiler.

A content area (:mod:`dedup.content_area`) needs selectolax's own tree, where lexbor's selectors
find the roots and the elements left out: :meth:`LexborText.tree_text` walks that tree from the
roots, the C walk by the nodes' addresses (selectolax's ``mem_id``), with the text and marks of
the Python walk. Its depth check comes first, by :meth:`LexborText.fits`: selectolax's parse
does not stop at a tree too deep.

>>> walk = LexborText(block={"p", "li"}, removed={"script"}, pre={"pre"})
>>> walk(b"<li>Home<li>Ab<b>ou</b>t<script>x</script>", lines=False, max_depth=10)
b'\\nHome\\n\\nAbout\\n'
>>> walk(b"<div>" * 20, lines=False, max_depth=10) is None
True
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import Any

import selectolax.lexbor
from selectolax.lexbor import LexborHTMLParser, LexborNode

from dedup.content_area import context

__all__ = ["FALLBACK", "FIXTURE", "MARK", "LexborText", "bind_c", "check_c_walk"]

#: the mark at a block boundary in ``lines`` mode: :data:`dedup.html_text.BREAK` in UTF-8
MARK = "\ufdd0".encode("utf-8")
_WORD_MARK = b"\n"  # without lines: a plain newline separates words as well, and stays ASCII

# the lexbor functions the C walk calls, in the order its bind() takes their addresses
_FUNCTIONS = (
    "lxb_html_document_create",
    "lxb_html_document_clean",
    "lxb_html_document_parse_chunk_begin",
    "lxb_html_document_parse_chunk",
    "lxb_html_document_parse_chunk_end",
    "lxb_html_document_destroy",
    "lxb_dom_node_first_child_noi",
    "lxb_dom_node_last_child_noi",
    "lxb_dom_node_next_noi",
    "lxb_dom_node_parent_noi",
    "lxb_dom_node_type_noi",
    "lxb_dom_node_tag_id_noi",
    "lxb_dom_element_local_name",
    "lxb_dom_node_text_content",
    "lxb_dom_document_destroy_text_noi",
)


class LexborText:
    """``walk(data, lines, max_depth)``: the marked text of one UTF-8 HTML document, as UTF-8 bytes.

    Blocks are marked with :data:`MARK` (``lines=True``, and newlines inside ``pre`` become
    marks too) or with ``"\\n"`` (``lines=False``: for words only); removed elements,
    comments, doctypes and processing instructions leave nothing. :attr:`implementation` says
    which walk runs: ``"C"`` or ``"Python"``.
    """

    def __init__(
        self,
        block: Iterable[str],
        removed: Iterable[str],
        pre: Iterable[str],
        use_c: bool = True,
        c_module: Any = None,
    ) -> None:
        """``c_module``: the C module to walk with instead of the bound and checked one (what
        :func:`check_c_walk` checks)."""
        self.block, self.removed, self.pre = frozenset(block), frozenset(removed), frozenset(pre)
        self._c = (c_module or _C) if use_c else None
        # each walker its own sets (and its own cache of lexbor's tag ids), in C
        self._kinds = None if self._c is None else self._c.kinds(
            sorted(self.block), sorted(self.removed), sorted(self.pre)
        )
        self.implementation = "Python" if self._c is None else "C"

    def __call__(self, data: bytes, lines: bool, max_depth: int) -> bytes | None:
        """The marked text, or None when an element is more than ``max_depth`` levels deep
        (``<html>`` is level 1)."""
        if self._c is not None:
            text: bytes | None = self._c.marked_text(self._kinds, data, lines, max_depth)
            return text
        return self._walk(LexborHTMLParser(data), lines, max_depth)

    def fits(self, data: bytes, max_depth: int) -> bool:
        """Whether the walk gives ``data`` text, not None: no element more than ``max_depth``
        levels deep (the C walk parses and walks the same, without writing the text).

        >>> walk = LexborText(block={"p"}, removed=(), pre=())
        >>> walk.fits(b"<div>" * 6, 8), walk.fits(b"<div>" * 7, 8)  # in <html><body>
        (True, False)
        """
        if self._c is not None:
            return bool(self._c.fits(self._kinds, data, max_depth))
        return self._walk(LexborHTMLParser(data), False, max_depth) is not None

    def tree_text(
        self,
        tree: LexborHTMLParser,
        lines: bool,
        max_depth: int,
        roots: list[tuple[LexborNode, int, int]] | None,
        skip: frozenset[int],
    ) -> bytes | None:
        """The marked text of a parsed ``tree``'s ``roots`` (node, depth, how many ``pre`` it is
        in), each a block of its own, without the elements whose ``mem_id`` is in ``skip``:
        a content area (:mod:`dedup.content_area`). ``roots=None``: the whole tree, as one.

        >>> walk = LexborText(block={"p", "li"}, removed={"script"}, pre={"pre"})
        >>> tree = LexborHTMLParser(b"<p>a<b>b</b></p><ul><li>Home<li class=x>About</ul><p>c")
        >>> roots = [(node, 3, 0) for node in tree.css("p, ul")]  # in <html><body>
        >>> walk.tree_text(tree, False, 10, roots, frozenset(n.mem_id for n in tree.css(".x")))
        b'\\n\\nab\\n\\n\\n\\nHome\\n\\n\\n\\nc\\n\\n'
        """
        if self._c is None:
            return self._walk(tree, lines, max_depth, roots, skip)
        # the C walk reads the nodes by address: ``tree`` keeps them alive meanwhile
        if roots is None:
            starts = [] if tree.root is None else [(tree.root.mem_id, 0, 0)]
        else:
            starts = [(node.mem_id, depth, pre) for node, depth, pre in roots]
        text: bytes | None = self._c.tree_text(
            self._kinds, starts, skip, lines, max_depth, roots is not None
        )
        return text

    def _walk(
        self,
        tree: LexborHTMLParser,
        lines: bool,
        max_depth: int,
        roots: list[tuple[LexborNode, int, int]] | None = None,
        skip: frozenset[int] = frozenset(),
    ) -> bytes | None:
        """The C walk's twin, in Python: the same order, the same marks."""
        mark = MARK if lines else _WORD_MARK
        parts: list[bytes] = []
        # a document's text lives under its <html> element, which HTML5 always makes
        if roots is None:
            roots = [] if tree.root is None else [(tree.root, 0, 0)]
            around = b""
        else:
            around = mark
        for root, above, pre in roots:
            parts.append(around)
            # (node, depth, leaving): an explicit stack, so any depth is fine
            todo: list[tuple[LexborNode, int, bool]] = [(root, above + 1, False)]
            while todo:
                node, depth, leaving = todo.pop()
                if node.is_text_node:
                    text = (node.text_content or "").encode("utf-8", "surrogatepass")
                    in_pre = lines and pre > 0
                    parts.append(
                        text.replace(b"\r", b"\n").replace(b"\n", mark) if in_pre else text
                    )
                    continue
                if not node.is_element_node:
                    continue  # comments, doctypes
                if depth > max_depth:
                    return None
                tag = node.tag or ""
                if tag in self.removed or (skip and node.mem_id in skip):
                    continue
                if leaving:
                    if tag in self.block:
                        parts.append(mark)
                    if tag in self.pre:
                        pre -= 1
                    continue
                if tag in self.block:
                    parts.append(mark)
                if tag in self.pre:
                    pre += 1
                todo.append((node, depth, True))
                children = []
                child = node.child
                while child is not None:
                    children.append(child)
                    child = child.next
                todo.extend((child, depth + 1, False) for child in reversed(children))
            parts.append(around)
        return b"".join(parts)


#: a small document with the walk's tricky parts: entities, whitespace runs and carriage returns,
#: block and inline elements, script, style and template, comments, a doctype and a processing
#: instruction, nested tables with misplaced text, ``pre``, a stray end tag, non-ASCII text
FIXTURE = """<!DOCTYPE html><?php echo 1 ?><html><head><title>Caf\u00e9 &amp; \u00e9t\u00e9</title>
<style>p { color: red }</style><script>if (a < b) document.write("<p>x</p>")</script></head>
<body>  <p>fo<b>o</b>bar&nbsp;baz &eacute;&#233;&#x263A; &notanentity; &lt;tag&gt;</p><!-- hidden
<p>comment</p> --><ul><li>Home<li>Ab<span>ou</span>t</ul>
<table>fostered<tr><td>one<table><tr><td>inner\tcell</td></tr></table>after<td>two</table>
<pre>line one\r\nline  two\n\n<b>in\rpre</b></pre><template><p>kept apart</p></template>tail</p>
<div>\u65e5\u672c\u8a9e \U0001f642 \u0639\u0631\u0628\u064a<br>x\u00a0y</div>
""".encode("utf-8")

#: the tag sets the fixture is walked with
FIXTURE_TAGS = (
    frozenset({"html", "head", "title", "body", "p", "ul", "li", "table", "tr", "td", "div", "br",
               "pre"}),
    frozenset({"script", "style", "template"}),
    frozenset({"pre"}),
)  # fmt: skip


#: the fixture's content area for the rooted walk: its roots (cells inside cells, a ``pre`` and
#: an element inside it, an empty one) and the elements it leaves out (one too deep for the
#: smaller depth limit, as a left-out element is too deep all the same)
FIXTURE_ROOTS, FIXTURE_SKIP = "title, td, pre, pre > b, ul, br", "span, table table tr, li + li"


def check_c_walk(
    c_module: Any, python_tags: tuple[Iterable[str], ...] = FIXTURE_TAGS
) -> str | None:
    """None when the C walk gives the Python walk's text of :data:`FIXTURE` (both marking modes,
    and a depth limit it exceeds; and :meth:`LexborText.fits` alike), of the whole document and
    of a content area of it (roots
    :data:`FIXTURE_ROOTS`, without :data:`FIXTURE_SKIP`); else what went wrong. ``python_tags``:
    the Python walk's tag sets, :data:`FIXTURE_TAGS` (another value makes the walks disagree, to
    test the fallback)."""
    c_walk = LexborText(*FIXTURE_TAGS, c_module=c_module)
    python_walk = LexborText(*python_tags, use_c=False)
    tree = LexborHTMLParser(FIXTURE)
    roots = [(node, *_context(node, python_walk.pre)) for node in tree.css(FIXTURE_ROOTS)]
    skip = frozenset(node.mem_id for node in tree.css(FIXTURE_SKIP))
    walks = {
        "the fixture": lambda walk, lines, depth: walk(FIXTURE, lines, depth),
        "the fixture's depth": lambda walk, lines, depth: walk.fits(FIXTURE, depth),
        "the fixture's area": lambda walk, lines, depth: walk.tree_text(
            tree, lines, depth, roots, skip),
        "the fixture less its area's skipped elements": lambda walk, lines, depth: walk.tree_text(
            tree, lines, depth, None, skip),
    }  # fmt: skip
    for what, run in walks.items():
        for lines in (True, False):
            for max_depth in (100, 8):  # the inner cells are 10 deep
                try:
                    got = run(c_walk, lines, max_depth)
                except Exception as error:  # noqa: BLE001  (any failure means: do not use it)
                    return f"the C walk failed on {what}: {error!r}"
                want = run(python_walk, lines, max_depth)
                if got != want:
                    return (
                        f"the C walk and the Python walk disagree on {what} "
                        f"(lines={lines}, max_depth={max_depth}): {got!r:.80} != {want!r:.80}"
                    )
    return None


def _context(node: LexborNode, pre: frozenset[str]) -> tuple[int, int]:
    return context(node, lambda n: n.parent, lambda n: n.tag if n.is_element_node else None, pre)


def bind_c(
    library: str = selectolax.lexbor.__file__,
    python_tags: tuple[Iterable[str], ...] = FIXTURE_TAGS,
) -> tuple[Any, str | None]:
    """The C walk bound to lexbor in ``library`` (selectolax's extension) and checked with
    :func:`check_c_walk`, and None; or None and why the Python walk must run instead."""
    try:
        from dedup import _lexbor_text  # type: ignore[attr-defined]
    except ImportError:
        return None, "dedup._lexbor_text was not built (no C compiler at install)"
    try:
        handle = ctypes.CDLL(library)
        addresses = tuple(
            ctypes.cast(getattr(handle, name), ctypes.c_void_p).value for name in _FUNCTIONS
        )
        _lexbor_text.bind(addresses)  # checks every address before it keeps any
    except Exception as error:  # noqa: BLE001  (not a library, a function gone, a bad address)
        return None, f"could not bind lexbor in {library}: {error}"
    problem = check_c_walk(_lexbor_text, python_tags)
    if problem is not None:
        return None, problem
    return _lexbor_text, None


_BOUND = bind_c()
#: the C module, bound and checked once for every walker (None: the Python walk runs)
_C: Any = _BOUND[0]
#: why the Python walk runs instead of the C one (None: the C one runs)
FALLBACK: str | None = _BOUND[1]
