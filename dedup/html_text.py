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

* ``"reference"``: BeautifulSoup with the ``lxml`` parser, walked in document order. It is the
  definition, easy to read and slow (2–3 MB/s).
* ``"fast"``: lxml used directly (≥ 50 MB/s): a C tree, then one XSLT pass, also in C, that drops
  the removed elements and writes the text with the breaks. A document beyond libxml2's tree
  limits (deeper than 256 levels, a text node over 10 MB) cannot become a whole tree, so it goes
  through lxml's event interface instead, the one BeautifulSoup itself listens to: same events,
  same text, any depth.

Both parse with libxml2's HTML parser, so they see the same elements; the corpus test
(``tests/dedup/test_canonical_corpus.py``) checks they give the same tokens on ~1,700 real pages.
Their marked texts may differ in one way, which no token and no line sees: BeautifulSoup turns
every string that is all whitespace into one ``"\\n"`` or ``" "`` (outside ``pre`` and
``textarea``), where libxml2 keeps it whole; so ``"<p>\\n   <a>x</a>"`` reads ``"\\nx"`` in one and
``"\\n   x"`` in the other, and inside ``listing`` a run of blank lines can shrink to one; and
whitespace before the first element (``"&#13;x"``) has no place in libxml2's tree.

Bytes are decoded once, here, by :func:`decode_html`, and both engines parse the same ``str`` given
to libxml2 as UTF-8 with the encoding stated, so a ``<meta charset>`` or an XML declaration cannot
make the engines read the bytes differently. A document whose bytes already are that UTF-8 (the
usual case) is parsed from them as they are: :func:`extract_document` skips a decode and an
encode that would only give them back.
"""

from __future__ import annotations

import codecs
import re
import threading
import warnings
from typing import Any

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning
from bs4.element import NavigableString, PreformattedString, Tag
from lxml import etree

__all__ = [
    "BLOCK_TAGS",
    "BREAK",
    "ENGINES",
    "PRE_TAGS",
    "REMOVED_TAGS",
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

_SNIFF_BYTES = 1024  # how far decode_html and looks_binary look, as in HTML's encoding prescan


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


def looks_binary(data: bytes) -> bool:
    """True when ``data`` is no text document: a NUL byte in its first KB, and no UTF-16 BOM.

    >>> looks_binary(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR")
    True
    >>> looks_binary("<p>h\\u00e9</p>".encode("utf-16"))
    False
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in data[:_SNIFF_BYTES]


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
    except UnicodeEncodeError:  # lone surrogates: libxml2 takes only valid UTF-8
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

_LEAVE_BLOCK = object()  # walk sentinels: "this block ends here", "this pre-formatted one ends"
_LEAVE_PRE = object()
_PRE_NEWLINES = str.maketrans({"\n": BREAK, "\r": BREAK})


def _reference(data: bytes) -> str:
    with warnings.catch_warnings():
        # bs4 warns when markup looks like XML or like a file name; both are fine here
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        soup = BeautifulSoup(data, "lxml", from_encoding="utf-8")
    parts: list[str] = []
    pre = 0
    todo: list[Any] = [soup]  # an explicit stack: documents 100,000 levels deep are fine
    while todo:
        node = todo.pop()
        if node is _LEAVE_BLOCK:
            parts.append(BREAK)
        elif node is _LEAVE_PRE:
            pre -= 1
        elif isinstance(node, Tag):
            name = node.name
            if name in REMOVED_TAGS:
                continue
            if name in BLOCK_TAGS:
                parts.append(BREAK)
                todo.append(_LEAVE_BLOCK)
            if name in PRE_TAGS:
                pre += 1
                todo.append(_LEAVE_PRE)
            todo.extend(reversed(node.contents))
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
            # PreformattedString: comments, CDATA, processing instructions, doctypes
            parts.append(node.translate(_PRE_NEWLINES) if pre else str(node))
    return "".join(parts)


# -- the fast engine: lxml -----------------------------------------------------------------------


def _names(tags: frozenset[str]) -> str:
    return "|".join(sorted(tags))


def _stylesheet(lines: bool) -> str:
    """XSLT that writes the marked text in one pass over the tree, in C.

    With ``lines``, mode "pre" is the same walk inside a pre-formatted element, where newlines in
    text become breaks too. Without, it is for words only: blocks are marked by a plain newline
    (ASCII keeps the tokeniser on its fast path) and newlines in ``pre`` stay newlines; both
    separate words as a :data:`BREAK` does. Comments and PIs never reach it (the parser drops
    them).
    """
    if lines:
        block, mark = _names(BLOCK_TAGS - PRE_TAGS), f"<xsl:text>{BREAK}</xsl:text>"
    else:
        block, mark = _names(BLOCK_TAGS), "<xsl:text>&#10;</xsl:text>"
    templates = [
        f'<xsl:template match="{_names(REMOVED_TAGS)}"/>',
        # apply-imports: no template is imported, so it is the built-in "process the children",
        # which libxslt runs without building a node-set (apply-templates builds one)
        f'<xsl:template match="{block}">{mark}<xsl:apply-imports/>{mark}</xsl:template>',
    ]
    if lines:
        pre = '<xsl:apply-templates mode="pre"/>'
        templates += [
            f'<xsl:template match="{_names(REMOVED_TAGS)}" mode="pre"/>',
            f'<xsl:template match="{_names(PRE_TAGS)}">{mark}{pre}{mark}</xsl:template>',
            f'<xsl:template match="{_names(BLOCK_TAGS)}" mode="pre">{mark}{pre}{mark}'
            "</xsl:template>",
            '<xsl:template match="text()" mode="pre">'
            f"<xsl:value-of select=\"translate(., '&#10;&#13;', '{BREAK}{BREAK}')\"/>"
            "</xsl:template>",
        ]
    return (
        '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
        '<xsl:output method="text" encoding="utf-8"/>' + "".join(templates) + "</xsl:stylesheet>"
    )


class _Local(threading.local):
    """Per-thread lxml objects: a parser keeps its last error log, so threads must not share."""

    def __init__(self) -> None:
        # the options BeautifulSoup's lxml builder uses (recover, no huge_tree), plus dropping
        # comments and PIs early; collect_ids=False skips an id table we never read
        self.parser = etree.HTMLParser(
            encoding="utf-8", remove_comments=True, remove_pis=True, collect_ids=False
        )
        self.words = etree.XSLT(etree.XML(_stylesheet(lines=False)))
        self.lines = etree.XSLT(etree.XML(_stylesheet(lines=True)))


_local = _Local()


class _EventText:
    """lxml parser target that writes the marked text from parse events: no tree, any depth."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.stack: list[str] = []  # open elements, to know what an end event closes
        self.removed = 0  # open removed elements
        self.pre = 0  # open pre-formatted elements

    def start(self, tag: str, attrib: object) -> None:
        self.stack.append(tag)
        if tag in REMOVED_TAGS:
            self.removed += 1
        elif self.removed:
            return
        if tag in BLOCK_TAGS:
            self.parts.append(BREAK)
        if tag in PRE_TAGS:
            self.pre += 1

    def end(self, tag: str) -> None:
        tag = self.stack.pop() if self.stack else tag
        if tag in REMOVED_TAGS:
            self.removed -= 1
        elif self.removed:
            return
        if tag in BLOCK_TAGS:
            self.parts.append(BREAK)
        if tag in PRE_TAGS:
            self.pre -= 1

    def data(self, text: str) -> None:
        if not self.removed:
            self.parts.append(text.translate(_PRE_NEWLINES) if self.pre else text)

    def close(self) -> str:
        return "".join(self.parts)


def _by_events(data: bytes) -> str:
    parser = etree.HTMLParser(target=_EventText(), encoding="utf-8")
    parser.feed(data)
    text: str = parser.close()
    return text


def _fast(data: bytes, lines: bool) -> bytes:
    local = _local
    root = etree.fromstring(data, local.parser)
    log = local.parser.error_log
    if log and any(error.level == etree.ErrorLevels.FATAL for error in log):
        # libxml2 stopped building the tree at one of its limits (deeper than 256 levels, a
        # text node over 10 MB): the rest of the document is not in it
        return _by_events(data).encode("utf-8")
    if root is None:  # nothing but whitespace, comments, ...
        return b""
    return bytes((local.lines if lines else local.words)(root))


def extract_document(
    data: bytes, encoding: str | None = None, engine: str = "fast", lines: bool = True
) -> bytes:
    """:func:`extract_utf8` of an HTML document's bytes: ``b""`` for binary data, else the
    text of ``decode_html(data, encoding)``. A UTF-8 document is parsed from its own bytes,
    without a decode and an encode that would give them back unchanged.

    >>> extract_document("<p>caf\u00e9</p>".encode("utf-8")).decode("utf-8").split(BREAK)[3]
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
        return extract_utf8(decode_html(data, encoding), engine, lines)
    if not prepared:
        return b""
    return _fast(prepared, lines) if engine == "fast" else _reference(prepared).encode("utf-8")


def extract_utf8(html: str, engine: str = "fast", lines: bool = True) -> bytes:
    """:func:`extract`, as UTF-8 bytes (what the tokeniser reads, so the fast path skips a
    decode and an encode)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not html or html.isspace():
        return b""
    data = _prepare(html)
    return _fast(data, lines) if engine == "fast" else _reference(data).encode("utf-8")


def extract(html: str, engine: str = "fast", lines: bool = True) -> str:
    """The text of ``html`` with :data:`BREAK` at every block boundary (see the module notes).

    ``lines=False`` is for callers that want only words: the fast engine then marks blocks
    with plain newlines and leaves newlines inside ``pre`` alone (cheaper; the same words).

    >>> extract("<ul><li>Home</li><li>Ab<b>ou</b>t</li></ul>").split(BREAK)
    ['', '', '', '', 'Home', '', 'About', '', '', '', '']
    >>> extract("<ul><li>Home</li><li>Ab<b>ou</b>t</li></ul>", lines=False).split()
    ['Home', 'About']
    """
    return extract_utf8(html, engine, lines).decode("utf-8")
