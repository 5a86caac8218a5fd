"""Which elements of an HTML page are its content: :class:`dedup.params.ContentArea` resolved.

Broder's paper reads a whole document. On a real site the pages of one template share their
navigation, sidebars and footer, often a hundred words or more, so two pages that differ in a few
words of content ("Size: 4 dwords" against "Size: 2 dwords") resemble each other above any
useful threshold. A site audit calls them thin near-duplicates; an archive keeps both. The
content area lets the user say which: ``all`` reads the page as the paper does, ``main`` only its
main content, and ``include``/``exclude`` CSS selectors say exactly which elements count.

Both canonicaliser engines resolve an area the same way, through :func:`resolve`, each with its
own selector engine (lexbor's for the fast one, soupsieve for the reference one):

1. the **roots**: the elements matched by ``include``; else, for ``main``, the elements matched
   by the first of :data:`MAIN_CANDIDATES` that matches any (``<main>``, ``role=main``,
   ``<article>``, else ``<body>``); else (``all``) the whole document;
2. the **left out**: the elements matched by ``exclude`` and, for ``main``, by
   :data:`MAIN_BOILERPLATE` (HTML's navigation, aside, banner and footer elements and roles,
   and the class names documentation generators give theirs), except, for the latter, the
   roots ``main`` chose and what contains them: a layout often names its sidebar on the body
   or a wrapper (``<body class="no-sidebar">`` in Apache's manual, ``has-sidebar`` and
   ``right-sidebar`` in WordPress themes), which is not a sidebar but the whole page;
3. a root inside another root, or inside a left-out element, is dropped; the text is the roots'
   text in document order, each a block of its own, without the left-out elements.

Selectors match as in a standards-mode document (class and id names are case-sensitive): the
two selector engines disagree about quirks mode (lexbor matches class and id names without
regard to case there, soupsieve does not), so a page is parsed as if it began with
``<!DOCTYPE html>`` when a content area applies. The one tree difference that makes for a
doctype-less page is that a ``<table>`` closes an open ``<p>``; both are blocks, so the page's
text and tokens are the same, only ``p`` selectors no longer match the table and what follows.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import soupsieve
from selectolax.lexbor import LexborHTMLParser

__all__ = [
    "MAIN_BOILERPLATE", "MAIN_CANDIDATES", "STANDARDS_MODE", "context", "resolve", "selector_error",
]

#: where ``main`` looks for the content, in order: the first that matches any element wins
MAIN_CANDIDATES = ("main", "[role=main]", "article", "body")

#: what ``main`` leaves out wherever it is: HTML's sectioning elements and ARIA landmarks for
#: navigation, asides, banners and footers, and the class names that documentation generators
#: (Sphinx, DocBook, MkDocs, Javadoc, ...) and common themes give theirs
MAIN_BOILERPLATE = (
    "nav", "aside", "footer", "body > header",
    "[role=navigation]", "[role=banner]", "[role=contentinfo]", "[role=complementary]",
    "[role=search]",
    "[class*=sidebar]", "[id*=sidebar]", "[class*=breadcrumb]", "[id*=breadcrumb]",
    "[class*=navbar]", "[id*=navbar]", "[class~=navheader]", "[class~=navfooter]",
    "[class~=related]", "[class~=footer]", "[id=footer]", "[class~=header]", "[id=header]",
    "[class~=menu]", "[id=menu]", "[class~=toc]", "[id=toc]", "[class~=skip-link]",
)  # fmt: skip

#: what is put before a page when a content area applies (see the module notes)
STANDARDS_MODE = b"<!DOCTYPE html>"

class Area(Protocol):
    """What :func:`resolve` reads of a :class:`dedup.params.ContentArea` (which imports this
    module to check its selectors, so this module does not import it)."""

    content_area: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]


_PROBE = LexborHTMLParser(b"<!DOCTYPE html><p>x</p>")


@functools.lru_cache(maxsize=256)
def selector_error(selector: str) -> str | None:
    """Why one of the engines cannot read ``selector``, or None when both can.

    >>> selector_error("div.note > p, #main") is None
    True
    >>> selector_error("p:first")[:37]
    "soupsieve: ':first' was detected as a"
    >>> selector_error("p:-soup-contains(x)")  # soupsieve's own pseudo-class
    "lexbor: Can't parse CSS selector."
    """
    try:
        with warnings.catch_warnings():  # (a deprecated spelling is still read)
            warnings.simplefilter("ignore")
            soupsieve.compile(selector)
    except Exception as exc:  # soupsieve's SelectorSyntaxError, and ValueError on odd input
        return f"soupsieve: {str(exc).splitlines()[0]}"
    try:
        _PROBE.css(selector)
    except Exception as exc:  # selectolax's SelectolaxError
        return f"lexbor: {exc}"
    return None


def resolve(
    area: Area,
    select: Callable[[str], list[Any]],
    key: Callable[[Any], int],
    parent: Callable[[Any], Any],
) -> tuple[list[Any] | None, frozenset[int]]:
    """The roots (None: the whole document) and the keys of the left-out elements of ``area``,
    given one engine's ``select(selectors)`` (matches in document order), ``key(node)`` (an
    identity) and ``parent(node)`` (None above the root)."""
    main = area.content_area == "main"
    skip = _matched(select, key, area.exclude)
    roots: list[Any] | None = None
    if area.include:
        roots = select(", ".join(area.include))
    elif main:
        for candidate in MAIN_CANDIDATES:
            roots = select(candidate)
            if roots:
                break
    if main:  # the boilerplate, but never main's own roots or what holds them (module notes)
        own = () if area.include else roots or ()
        holding = {key(above) for node in own for above in _up(node, parent)}
        skip |= _matched(select, key, MAIN_BOILERPLATE) - holding
    if roots is None:
        return None, skip
    chosen = frozenset(key(node) for node in roots)
    seen: set[int] = set()
    kept = []
    for node in roots:  # lexbor lists an element once per selector of a list that matches it
        if key(node) not in seen and not _covered(node, chosen, skip, key, parent):
            seen.add(key(node))
            kept.append(node)
    return kept, skip


def _matched(
    select: Callable[[str], list[Any]], key: Callable[[Any], int], selectors: Sequence[str]
) -> frozenset[int]:
    """The keys of the elements any of ``selectors`` matches."""
    if not selectors:
        return frozenset()
    return frozenset(key(node) for node in select(", ".join(selectors)))


def _up(node: Any, parent: Callable[[Any], Any]) -> Iterator[Any]:
    """``node`` and every element it is inside."""
    while node is not None:
        yield node
        node = parent(node)


def _covered(
    node: Any, chosen: frozenset[int], skip: frozenset[int], key: Callable[[Any], int],
    parent: Callable[[Any], Any],
) -> bool:
    """True when ``node`` is left out, or inside another root or a left-out element."""
    if key(node) in skip:
        return True
    return any(key(above) in chosen or key(above) in skip for above in _up(parent(node), parent))


def context(node: Any, parent: Callable[[Any], Any], name: Callable[[Any], str | None],
            pre: frozenset[str]) -> tuple[int, int]:
    """How many elements ``node`` is inside, and how many of them are pre-formatted (so a root
    inside a ``<pre>`` keeps its line breaks). ``name(node)`` is a tag name, None for others."""
    depth = inside_pre = 0
    above = parent(node)
    while above is not None:
        tag = name(above)
        if tag is not None:
            depth += 1
            inside_pre += tag in pre
        above = parent(above)
    return depth, inside_pre
