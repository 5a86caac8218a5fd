"""HTML → text with its block boundaries marked: the markup layer of the canonicaliser (§2).

Broder's canonical token stream ignores "formatting commands"; for HTML that means tags,
attributes, comments and everything a reader never sees. What a reader *does* see of the markup is
where blocks begin and end: ``<li>Home</li><li>About</li>`` reads as two words, while
``fo<b>o</b>bar`` reads as one. So this module turns a document into its text with one mark,
:data:`BREAK`, at every block boundary, and nothing at all for inline tags, comments, processing
instructions or removed elements. :mod:`dedup.canonical` makes tokens and lines of that text.

The rules, shared by both engines:

* the elements in :data:`REMOVED_TAGS` (``script``, ``style``, ``template``) are dropped with
  their content, but not the text after them;
* comments, processing instructions, doctypes and attributes are ignored;
* every element in :data:`BLOCK_TAGS` puts a :data:`BREAK` before and after its content (``br``
  and ``hr`` too: an empty block is still a line break);
* inside the pre-formatted elements of :data:`PRE_TAGS` a newline is a line break, so it becomes
  a :data:`BREAK` too; anywhere else a newline is only whitespace, as in a browser;
* ``title`` is kept (it is a block, so it is a line of its own).

There are two engines, which must give the same tokens:

* ``"reference"``: BeautifulSoup with the ``html5ever`` tree builder (soup5ever: Servo's HTML5
  parser, in Rust, building BeautifulSoup's Python tree), walked in document order. It is the
  definition, easy to read and slow.
* ``"fast"`` (the default): lexbor, the C parser inside selectolax, walked in C by
  :mod:`dedup.lexbor_text` (``benchmarks.sketch`` measures both against peers).

Both parsers implement the tree construction of the WHATWG HTML standard, independently, so they
build the tree a browser builds, broken markup included: a ``<td>`` outside any table is no cell,
text misplaced in a table moves before it, a stray ``</p>`` is an empty paragraph, a ``<select>``
may hold any content (the 2025 rules). The corpus test (``tests/dedup/test_canonical_corpus.py``)
checks that the engines give the same tokens on ~1,700 real pages, and the tag-soup property tests
that they give the same marked text. One difference is known: html5ever still treats ``<isindex>``
(dropped from the standard in 2016) as an element an end tag's search stops at, so text around
an end tag that follows an ``<isindex>`` can be joined differently.

A document whose elements nest more than :data:`MAX_DEPTH` deep raises :class:`DocumentTooDeep`
in both engines: a tree's cost grows with the square of its depth.

Bytes are decoded once, here, by :func:`decode_html`, and both engines parse the same UTF-8 bytes
(BeautifulSoup told so), so a ``<meta charset>`` or an XML declaration cannot make the engines
read the bytes differently. A document whose bytes already are that UTF-8 (the usual case) is
parsed from them as they are: :func:`extract_document` skips a decode and an encode that would
only give them back.
"""

from __future__ import annotations

import codecs
import re
import warnings
from typing import Any, NamedTuple

import soup5ever  # noqa: F401  (registers BeautifulSoup's "html5ever" tree builder)
from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning
from bs4.element import NavigableString, PreformattedString, Tag
from selectolax.lexbor import LexborHTMLParser, LexborNode

from dedup import lexbor_text
from dedup.content_area import STANDARDS_MODE, context, resolve
from dedup.lexbor_text import LexborText
from dedup.params import ContentArea

__all__ = [
    "BLOCK_TAGS",
    "BREAK",
    "ENGINES",
    "FAST_FALLBACK",
    "FAST_IMPLEMENTATION",
    "MAX_DEPTH",
    "PRE_TAGS",
    "REMOVED_TAGS",
    "DocumentTooDeep",
    "charset_of",
    "decode_html",
    "extract",
    "extract_document",
    "extract_utf8",
    "looks_binary",
    "looks_like_html",
]

#: the block boundary mark: U+FDD0, a Unicode noncharacter, "reserved for internal use", so no
#: text means it. A raw U+FDD0 in a document is replaced (by U+FFFD) before parsing; one written
#: as ``&#xFDD0;`` would still read as a break, in both engines alike.
BREAK = "\ufdd0"

#: the engines of :func:`extract`
ENGINES = ("fast", "reference")

#: elements dropped with their content (their tail text stays)
REMOVED_TAGS = frozenset({"script", "style", "template"})

#: elements whose newlines are line breaks (HTML's ``white-space: pre`` elements)
PRE_TAGS = frozenset({"listing", "plaintext", "pre", "textarea", "xmp"})

#: elements that start and end a line: HTML's block-level, list, table and form-control
#: elements, ``br``/``hr``, and the document-level ones (``html``, ``head``, ``title``, ``body``).
#: Anything else (``a``, ``b``, ``span``, ``em``, ``img``, unknown tags, ...) is inline and does not
#: separate tokens.
BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "br", "button", "caption", "center",
        "col", "colgroup", "dd", "details", "dialog", "dir", "div", "dl", "dt", "fieldset",
        "figcaption", "figure", "footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4",
        "h5", "h6", "head", "header", "hgroup", "hr", "html", "legend", "li", "main", "menu",
        "nav", "noframes", "ol", "optgroup", "option", "p", "search", "section", "select",
        "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr", "ul",
    }
) | PRE_TAGS  # fmt: skip

#: the deepest an element may be (``<html>`` is 1): building an HTML5 tree costs time quadratic in
#: its depth, so a deeper document is refused (:class:`DocumentTooDeep`) rather than parsed for
#: minutes. Real pages nest a few dozen levels; browsers stop nesting at 512 (Chromium) or so.
MAX_DEPTH = 4096


class DocumentTooDeep(ValueError):
    """An HTML document whose elements nest deeper than :data:`MAX_DEPTH`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"elements nested more than {limit:,} deep")


_SNIFF_BYTES = 1024  # how far decode_html looks for a declared charset (HTML's prescan)


# -- bytes → str ---------------------------------------------------------------------------------

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))  # fmt: skip
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([a-z0-9_.:-]+)", re.I)
_XML_ENCODING = re.compile(rb"^\s*<\?xml[^>]*?encoding\s*=\s*[\"']([a-z0-9_.:-]+)", re.I)
# labels that WHATWG's Encoding standard reads as a wider encoding than Python's codec of that name
_WIDER = {"ascii": "cp1252", "latin_1": "cp1252", "iso8859_9": "cp1254", "iso8859_11": "cp874",
          "gb2312": "gb18030", "gbk": "gb18030"}  # fmt: skip
# a document that can declare UTF-16 or UTF-32 in ASCII bytes is in neither (WHATWG: UTF-8)
_NOT_DECLARABLE = {"utf_16", "utf_16_le", "utf_16_be", "utf_32", "utf_32_le", "utf_32_be"}


def _codec(label: str, declared: bool) -> str | None:
    """The Python codec for a charset label, or None if Python has none by that name."""
    try:
        name = codecs.lookup(label).name.replace("-", "_")
    except LookupError:
        return None
    if declared and name in _NOT_DECLARABLE:
        return "utf_8"
    return _WIDER.get(name, name)


def _declared_codec(head: bytes) -> str | None:
    """The codec of the charset that the first bytes declare, if any and known."""
    match = _XML_ENCODING.search(head) or _META_CHARSET.search(head)
    return None if match is None else _codec(match.group(1).decode("ascii"), declared=True)


def decode_html(data: bytes, encoding: str | None = None) -> str:
    """Decode an HTML document's bytes, the same way for both engines.

    In order: a byte-order mark; else ``encoding`` (the transport's charset, e.g. from an HTTP
    ``Content-Type`` header), if Python knows it; else the charset that a ``<meta>`` or an XML
    declaration in the first KB states; else UTF-8 if the bytes are valid UTF-8; else
    windows-1252, the web's default for undeclared legacy pages. Bytes invalid in the chosen
    encoding become U+FFFD; this never raises.

    Our own helper rather than bs4's ``UnicodeDammit`` because that one asks whichever of
    ``chardet``/``charset-normalizer`` happens to be installed, so the same bytes could decode,
    and hash, differently on two machines.

    >>> decode_html('<meta charset="latin-1"><p>café'.encode("latin-1"))[-4:]
    'café'
    >>> decode_html("<p>café".encode("utf-8"))[-4:]
    'café'
    >>> decode_html(b"<p>caf\\xe9")[-4:]
    'café'
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    for codec in (
        None if encoding is None else _codec(encoding, declared=False),
        _declared_codec(data[:_SNIFF_BYTES]),
    ):
        if codec is not None:
            try:
                return data.decode(codec, errors="replace")
            except (LookupError, UnicodeError, ValueError):
                pass  # no text codec ("hex"), or one that fails even so ("idna", "undefined")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


_CONTROL = bytes(c for c in range(32) if c not in b"\t\n\x0c\r") + b"\x7f"
_NOT_CONTROL = bytes(c for c in range(256) if c not in _CONTROL)
_BINARY_SNIFF_BYTES = 8192


def looks_binary(data: bytes) -> bool:
    """True when the start of ``data`` is no text: a NUL byte, or over 5% control bytes, in
    its first 8 KB. Text in UTF-16 is full of NUL bytes, so data that starts with a byte-order
    mark is text.

    The one rule for "is this a document at all": the spider skips such a response as
    ``binary``, and the canonicaliser gives it no tokens, so a re-clustered corpus and a crawl
    agree on which pages have text.

    >>> looks_binary(b"<html><body>caf\\xe9</body></html>")
    False
    >>> looks_binary(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR")
    True
    >>> looks_binary("<p>h\\u00e9</p>".encode("utf-16"))
    False
    """
    head = data[:_BINARY_SNIFF_BYTES]
    if not head or head.startswith(tuple(bom for bom, _ in _BOMS)):
        return False
    if b"\x00" in head:
        return True
    controls = len(head.translate(None, _NOT_CONTROL))
    return controls * 20 > len(head)


_CHARSET = re.compile(r"""charset\s*=\s*["']?([^"';\s]+)""", re.I)


def charset_of(content_type: str) -> str | None:
    """The charset label of a Content-Type value, unchecked (:func:`decode_html` checks it):
    what the crawl passes as ``encoding``, and what re-clustering a stored page passes too.

    >>> charset_of('text/html; charset="ISO-8859-1"')
    'ISO-8859-1'
    >>> charset_of("text/html") is None
    True
    """
    match = _CHARSET.search(content_type)
    return match.group(1) if match else None


_HTML_SIGNS = re.compile(
    r"<(?:!doctype\s+html|html|head|body|title|meta|link|script|style|p|div|span|br|hr|table|"
    r"tr|td|ul|ol|li|dl|h[1-6]|a\s|img|form|pre|b|i|em|strong)[\s/>]",
    re.I,
)


def looks_like_html(data: str | bytes) -> bool:
    """True when the first 4 KB of ``data`` show an HTML tag (``<html``, ``<!doctype html``,
    ``<body``, ``<p>``, ...): for inputs that may be HTML or plain text.

    >>> looks_like_html(b"<!DOCTYPE html><title>x</title>")
    True
    >>> looks_like_html("if a < b and b > c: print('<no tags here>')")
    False
    """
    head = data[:4096]
    if isinstance(head, bytes):
        if looks_binary(head):
            return False
        head = decode_html(head)
    return _HTML_SIGNS.search(head) is not None


_BREAK_UTF8 = BREAK.encode("utf-8")


def _prepare(html: str) -> bytes:
    """The one input both engines parse: UTF-8, no BOM, no lone surrogates, no raw BREAK."""
    try:
        data = html.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the parsers take only valid UTF-8
        data = html.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8")
    return _clean_utf8(data)


def _clean_utf8(data: bytes, has_break: bool | None = None) -> bytes:
    """UTF-8 without a leading BOM and with every raw BREAK replaced (``has_break``: whether
    the caller already knows if there is one)."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    if has_break is None:
        has_break = _BREAK_UTF8 in data
    if has_break:
        data = data.replace(_BREAK_UTF8, "\ufffd".encode("utf-8"))
    return data


# what str.isspace() accepts among ASCII characters (it counts \x1c-\x1f too)
_ASCII_SPACE_ONLY = re.compile(rb"[\t\n\x0b\x0c\r\x1c-\x1f ]*\Z")


def _utf8_input(data: bytes, encoding: str | None) -> bytes | None:
    """``_prepare(decode_html(data, encoding))`` when :func:`decode_html` would decode ``data``
    as UTF-8 without a replacement: then decoding and encoding again give back the same bytes,
    so skip both (ASCII documents are not even decoded). ``b""`` for a document that is only
    whitespace; ``None`` when the document must go the long way round.
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return None
    else:
        # decode_html's order: the transport's charset, the declared one, then UTF-8 if valid
        codec = None if encoding is None else _codec(encoding, declared=False)
        if codec is None:
            codec = _declared_codec(data[:_SNIFF_BYTES])
        if codec not in (None, "utf_8"):
            return None
    if data.isascii():
        return b"" if _ASCII_SPACE_ONLY.match(data) else _clean_utf8(data, has_break=False)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # decode_html puts U+FFFD (or reads windows-1252): not these bytes
    # (a one-character search in the str is cheaper than a three-byte one in the bytes)
    return b"" if text.isspace() else _clean_utf8(data, has_break=BREAK in text)


# -- the reference engine: BeautifulSoup ---------------------------------------------------------

_PRE_NEWLINES = str.maketrans({"\n": BREAK, "\r": BREAK})


class _End(NamedTuple):
    """On the walk's stack: the element of this name ends here."""

    name: str


def _soup(data: bytes) -> BeautifulSoup:
    with warnings.catch_warnings():
        # bs4 warns when markup looks like XML or like a file name; both are fine here
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        return BeautifulSoup(data, "html5ever", from_encoding="utf-8")


def _reference(data: bytes, area: ContentArea | None = None) -> str:
    if area is None:
        soup = _soup(data)
        return _reference_walk([(child, 0, 0) for child in soup.contents], "", frozenset())
    _reference(data)  # the whole tree once: too deep is too deep, whatever the area
    soup = _soup(STANDARDS_MODE + data)
    roots, skip = resolve(area, soup.select, id, _parent)
    if roots is None:
        return _reference_walk([(child, 0, 0) for child in soup.contents], "", skip)
    starts = [(root, *context(root, _parent, _tag_name, PRE_TAGS)) for root in roots]
    return _reference_walk(starts, BREAK, skip)


def _parent(node: Any) -> Any:
    return node.parent


def _tag_name(node: Any) -> str | None:
    return None if isinstance(node, BeautifulSoup) else node.name


def _reference_walk(roots: list[tuple[Any, int, int]], around: str, skip: frozenset[int]) -> str:
    """The marked text of ``roots`` (node, how many elements it is in, how many ``pre``), each
    with ``around`` before and after it, without the elements whose ``id()`` is in ``skip``."""
    parts: list[str] = []
    for root, above, pre in roots:
        parts.append(around)
        # (node, how many elements it is in): an explicit stack, so any depth is fine
        todo: list[tuple[Any, int]] = [(root, above)]
        while todo:
            node, depth = todo.pop()
            if isinstance(node, _End):
                if node.name in BLOCK_TAGS:
                    parts.append(BREAK)
                if node.name in PRE_TAGS:
                    pre -= 1
            elif isinstance(node, Tag):
                if depth + 1 > MAX_DEPTH:
                    raise DocumentTooDeep(MAX_DEPTH)
                name = node.name
                if name in REMOVED_TAGS or (skip and id(node) in skip):
                    continue
                if name in BLOCK_TAGS:
                    parts.append(BREAK)
                if name in PRE_TAGS:
                    pre += 1
                todo.append((_End(name), depth))
                todo.extend((child, depth + 1) for child in reversed(node.contents))
            elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
                # PreformattedString: comments, CDATA, processing instructions, doctypes
                parts.append(node.translate(_PRE_NEWLINES) if pre else str(node))
        parts.append(around)
    return "".join(parts)


# -- the fast engine: lexbor, walked in C --------------------------------------------------------

_fast_walk = LexborText(BLOCK_TAGS, REMOVED_TAGS, PRE_TAGS)

#: which walk the fast engine runs: "C" (built at install) or "Python" (see FAST_FALLBACK)
FAST_IMPLEMENTATION = _fast_walk.implementation
#: why the Python walk runs: the C one was not built, could not bind to lexbor, or disagreed with
#: the Python walk on a fixture at import (None: the C walk runs)
FAST_FALLBACK = lexbor_text.FALLBACK


def _fast(data: bytes, lines: bool, area: ContentArea | None = None) -> bytes:
    if area is None:
        text = _fast_walk(data, lines, MAX_DEPTH)
        if text is None:
            raise DocumentTooDeep(MAX_DEPTH)
        return text
    # a tree too deep is refused, whatever the area; and checked first, by a parse that stops
    # as soon as the tree is too deep, for selectolax's parse does not stop
    if not _fast_walk.fits(data, MAX_DEPTH):
        raise DocumentTooDeep(MAX_DEPTH)
    # selectors need selectolax's tree, which both walks can read
    tree = LexborHTMLParser(STANDARDS_MODE + data)
    roots, skip = resolve(area, tree.css, _mem_id, _lexbor_parent)
    if roots is None:
        starts = None
    else:
        starts = [(root, *context(root, _lexbor_parent, _lexbor_name, PRE_TAGS)) for root in roots]
    marked = _fast_walk.tree_text(tree, lines, MAX_DEPTH, starts, skip)
    if marked is None:
        raise DocumentTooDeep(MAX_DEPTH)
    return marked


def _mem_id(node: LexborNode) -> int:
    return int(node.mem_id)


def _lexbor_parent(node: LexborNode) -> LexborNode | None:
    return node.parent


def _lexbor_name(node: LexborNode) -> str | None:
    return node.tag if node.is_element_node else None


def extract_document(
    data: bytes,
    encoding: str | None = None,
    engine: str = "fast",
    lines: bool = True,
    area: ContentArea | None = None,
) -> bytes:
    """:func:`extract_utf8` of an HTML document's bytes: ``b""`` for binary data, else the
    text of ``decode_html(data, encoding)``. A UTF-8 document is parsed from its own bytes,
    without a decode and an encode that would give them back unchanged.

    >>> extract_document("<p>caf\u00e9</p>".encode("utf-8")).decode("utf-8").split(BREAK)[5]
    'café'
    >>> extract_document(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00")
    b''
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if looks_binary(data):
        return b""
    prepared = _utf8_input(data, encoding)
    if prepared is None:
        return extract_utf8(decode_html(data, encoding), engine, lines, area)
    return _run(engine, prepared, lines, area)


def extract_utf8(
    html: str, engine: str = "fast", lines: bool = True, area: ContentArea | None = None
) -> bytes:
    """:func:`extract`, as UTF-8 bytes (what the tokeniser reads, so the fast path skips a
    decode and an encode)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not html or html.isspace():
        return b""
    return _run(engine, _prepare(html), lines, area)


def _run(engine: str, data: bytes, lines: bool, area: ContentArea | None) -> bytes:
    """The engine on prepared input; nothing at all for none (HTML5 would still make
    ``<html><head><body>`` of it, and their marks). ``area``: the content area, if not the
    whole page (:mod:`dedup.content_area`)."""
    if not data:
        return b""
    if area is not None and area.is_whole_page:
        area = None
    if engine == "fast":
        return _fast(data, lines, area)
    return _reference(data, area).encode("utf-8")


def extract(
    html: str, engine: str = "fast", lines: bool = True, area: ContentArea | None = None
) -> str:
    """The text of ``html`` with :data:`BREAK` at every block boundary (see the module notes).

    ``lines=False`` is for callers that want only words: the fast engine then marks blocks
    with plain newlines and leaves newlines inside ``pre`` alone (cheaper; the same words).

    >>> extract("<ul><li>Home</li><li>Ab<b>ou</b>t</li></ul>").split(BREAK)
    ['', '', '', '', '', '', 'Home', '', 'About', '', '', '', '']
    >>> extract("<ul><li>Home</li><li>Ab<b>ou</b>t</li></ul>", lines=False).split()
    ['Home', 'About']
    """
    return extract_utf8(html, engine, lines, area).decode("utf-8")
