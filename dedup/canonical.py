"""Canonical token streams (Broder 1997, §2), from plain text and from HTML.

The paper assumes "a parser program that takes an arbitrary document and reduces it to a
canonical sequence of tokens", where canonical "means that any two documents that differ only in
formatting or other information that we chose to ignore, for instance punctuation, formatting
commands, capitalization, and so on, will be reduced to the same sequence". Everything after this
module (shingles, fingerprints, sketches) sees only that sequence, so what it ignores is what the
whole system ignores. Here it ignores:

* **markup**: tags, attributes, comments, processing instructions, ``script``/``style``/
  ``template`` elements (see :mod:`dedup.html_text`); inline tags do not even separate words
  (``fo<b>o</b>bar`` is ``foobar``), block tags do (``<li>Home</li><li>About</li>``);
* **formatting**: how much whitespace, and of which kind, separates words;
* **punctuation and symbols**: they only separate words;
* **capitalisation and compatibility variants**: text is Unicode NFKC-normalised, then
  ``str.casefold()``-ed, then NFKC-normalised again, so ``ﬁ`` (a ligature) is ``fi``, full-width
  ``Ａ`` is ``a``, ``Straße`` is ``strasse``. The second NFKC is what makes streams fixed points:
  casefold can leave text that NFKC composes differently (``H`` + U+0302 + U+0331 casefolds to
  ``ĥ`` + U+0331, whose NFKC is ``ẖ`` + U+0302, whose casefold is ``h`` + U+0331 + U+0302 ...);
  ``NFKC(casefold(NFKC(x)))`` is stable (checked for every letter with up to two marks);
* **invisible format characters** inside words: Unicode's default-ignorable code points (soft
  hyphen, zero-width joiners, bidi controls, variation selectors, ...) are deleted first, so
  ``soft\\u00adware`` is ``software``. Only the zero-width *space* U+200B stays a separator: it is
  how Thai, Khmer or Lao text marks word boundaries.

**Words.** After that folding, a word is a maximal run of letters and digits (Python's
``[^\\W_]``: punctuation, underscore, symbols, whitespace, control characters and NUL all
separate words), *plus the combining marks attached to it*: a mark (Unicode category M) continues
a word but never starts one. Without that, ``[^\\W_]+`` would cut Hindi ``हिन्दी`` into three
consonants and drop its vowel signs; NFKC already composes most Latin accents, so for Latin text
the difference is nil. Tokens are never empty and never contain NUL, control characters,
whitespace or lone surrogates.

**Units** (the ``unit`` argument):

* ``"word"`` (default): the words;
* ``"char"``: the characters of the words joined by one space, i.e. ``list(" ".join(words))``,
  so word boundaries survive as ``" "`` tokens but formatting does not;
* ``"line"``: one token per line that has words, the line's words joined by one space. Lines of
  text end where ``str.splitlines()`` ends them; lines of HTML end at block boundaries (and at
  newlines inside ``pre``), never at a newline that a browser would show as a space.

Canonical streams are fixed points: ``text_tokens(" ".join(text_tokens(x))) == text_tokens(x)``.

>>> text_tokens("A rose is a ROSE, is a rose!")
['a', 'rose', 'is', 'a', 'rose', 'is', 'a', 'rose']
>>> html_tokens("<p>A <b>ro</b>se</p><ul><li>is</li><li>a&nbsp;rose</li></ul>")
['a', 'rose', 'is', 'a', 'rose']
>>> text_tokens("Der ﬁnale Straße-Ｆｉｘ")
['der', 'finale', 'strasse', 'fix']
>>> text_tokens("to be, or\\nnot to be", unit="char")[:6]
['t', 'o', ' ', 'b', 'e', ' ']
>>> text_tokens("To be, or\\n\\n  not -- to be!", unit="line")
['to be or', 'not to be']
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

import numpy as np

from dedup.html_text import (
    BREAK,
    ENGINES,
    decode_html,
    extract_document,
    extract_utf8,
    looks_like_html,
)
from dedup.params import ContentArea
from dedup.units import JoinedTokens

try:
    from dedup import _tokens as _c_tokens  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the numpy way
    _c_tokens = None

__all__ = [
    "CANONICALISER_VERSION",
    "ENGINES",
    "KINDS",
    "SEPARATORS",
    "UNITS",
    "decode_html",
    "document_tokens",
    "html_joined_tokens",
    "html_text",
    "html_tokens",
    "looks_like_html",
    "text_joined_tokens",
    "text_tokens",
]

#: Recorded by every store: bump the leading number whenever any document's tokens change. The
#: Unicode version is part of it because NFKC, casefold and "is a letter" all come from Python's
#: ``unicodedata``, so a Python with a newer Unicode may canonicalise some text differently.
CANONICALISER_VERSION = f"2+unicode{unicodedata.unidata_version}"

#: the token units
UNITS = ("word", "char", "line")

#: how each unit's tokens are joined back into text (a canonical token never holds its unit's
#: separator, so splitting on it gives the tokens back; ``char`` tokens are split per character)
SEPARATORS = {"word": " ", "char": "", "line": "\n"}

#: what a document's bytes are read as (:func:`document_tokens`); "auto" looks for HTML tags
KINDS = ("html", "text", "auto")

# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties), less U+200B ZERO WIDTH SPACE
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200C, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
_IGNORABLE = frozenset(chr(c) for lo, hi in _IGNORABLE_RANGES for c in range(lo, hi + 1))
_IGNORABLE_RE = re.compile(
    "[" + "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in _IGNORABLE_RANGES)
    + "]"
)

# ASCII is folded with one bytes.translate: A-Z to a-z, every other ASCII byte that is not a
# letter or digit to a space; bytes >= 0x80 (UTF-8 of everything else) pass unchanged
_ASCII_FOLD = bytes(
    b + 32 if 0x41 <= b <= 0x5A else b if (0x61 <= b <= 0x7A or 0x30 <= b <= 0x39 or b >= 0x80)
    else 0x20
    for b in range(256)
)  # fmt: skip
_ASCII_BYTES = bytes(range(0x80))
_SPACE = ord(" ")

# what the fast path does with a non-ASCII character, before NFKC and casefold
_DROP, _BLANK, _KEEP = 0, 1, 2


def _is_mark(char: str) -> bool:
    return unicodedata.category(char)[0] == "M"


@functools.lru_cache(maxsize=1 << 16)
def _class(char: str) -> int:
    """_DROP an ignorable; _BLANK a character that is no part of any word, before or after NFKC;
    _KEEP the rest (letters, digits, marks, and the symbols whose NFKC has letters, like ½).

    Blanking before NFKC gives the same words as after: such a character, and all of its NFKC,
    is a starter (combining class 0) that is never the second of a canonical composition, and
    whatever it composes with a following mark is again no letter (checked over all of Unicode
    when this was written, and by the property tests against :func:`_words_simple`).
    """
    if char in _IGNORABLE:
        return _DROP
    if any(c.isalnum() or _is_mark(c) for c in unicodedata.normalize("NFKC", char)):
        return _KEEP  # letters, digits, marks, and symbols such as ½ (NFKC: 1⁄2)
    return _BLANK


@functools.cache
def _word_re() -> re.Pattern[str]:
    """The definition of a word, on folded text: a letter or digit, then letters, digits, marks."""
    marks = []
    start = None
    for code in range(sys.maxunicode + 2):
        is_mark = code <= sys.maxunicode and _is_mark(chr(code))
        if is_mark and start is None:
            start = code
        elif not is_mark and start is not None:
            marks.append(f"{re.escape(chr(start))}-{re.escape(chr(code - 1))}")
            start = None
    return re.compile(rf"[^\W_](?:[^\W_]|[{''.join(marks)}])*")


def _others(data: bytes) -> set[str]:
    """The distinct non-ASCII characters of UTF-8 ``data`` (bytes.translate keeps only theirs)."""
    return set(data.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass"))


def _nfkc(text: str) -> str:
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


def _fold(data: bytes, keep: str = "") -> tuple[bytes | str, str]:
    """UTF-8 ``data`` folded for splitting, and the combining marks in it; a fold that is all
    ASCII (most are) stays ``bytes``.

    Folded: ignorables deleted, NFKC, casefold, NFKC, and every character that is neither a
    letter, a digit, a mark nor in ``keep`` a space. Its ``split()`` is the words but for marks
    at the start of a word, which :func:`_unmark` removes.

    The fast way round, equal in result to :func:`_words_simple` (the property tests check it):
    one ``bytes.translate`` lowers A-Z and blanks the rest of ASCII that is no letter or digit
    (ASCII never changes under NFKC or casefold otherwise). Most text is then ASCII with a few
    other characters, so the rest goes by the *distinct* non-ASCII characters: each is dropped
    or blanked with one ``str.replace``, and NFKC and casefold run only when a character left
    needs them. (An English page whose only other characters are quotes and a pilcrow folds to
    ASCII: it goes back to ``bytes``, which :func:`_joined_words` reads without splitting.)
    """
    data = data.translate(_ASCII_FOLD)
    if data.isascii():
        return data, ""
    text = data.decode("utf-8", "surrogatepass")
    rest = []
    for char in _others(data):
        kind = _class(char)
        if kind == _KEEP:
            rest.append(char)
        elif kind == _DROP:
            text = text.replace(char, "")
        elif char not in keep:
            text = text.replace(char, " ")
    if not rest:
        if not keep:
            folded = text.encode("utf-8", "surrogatepass")
            if folded.isascii():
                return folded, ""
        return text, ""
    distinct = "".join(rest)
    if distinct.casefold() != distinct or not unicodedata.is_normalized("NFKC", text):
        # casefold maps each character on its own, so the distinct ones tell whether it acts
        text = _nfkc(_nfkc(text).casefold())
        # NFKC may make ASCII capitals or punctuation (Ｋ is K, ℀ is a/c): fold ASCII again
        data = text.encode("utf-8", "surrogatepass").translate(_ASCII_FOLD)
        text = data.decode("utf-8", "surrogatepass")
        rest = list(_others(data))  # (from the bytes: a set of the whole str costs far more)
        for char in rest:  # and what NFKC made of a letter-like symbol may be no letter (½)
            if not (char.isalnum() or _is_mark(char) or char in keep):
                text = text.replace(char, " ")
    return text, "".join(char for char in rest if _is_mark(char))


def _folded(data: bytes, keep: str = "") -> tuple[str, str]:
    """:func:`_fold`, always as ``str``."""
    text, marks = _fold(data, keep)
    return (text.decode("ascii") if isinstance(text, bytes) else text), marks


def _unmark(words: list[str], marks: str) -> list[str]:
    """``words`` without the marks they start with: a mark after a non-word is no word."""
    out = []
    for word in words:
        if word[0] in marks:
            word = word.lstrip(marks)
            if not word:
                continue
        out.append(word)
    return out


def _words(data: bytes) -> list[str]:
    """The words of UTF-8 ``data`` (fast; equal to :func:`_words_simple`, which defines them)."""
    folded, marks = _folded(data)
    words = folded.split()
    return _unmark(words, marks) if marks else words


def _joined_words(data: bytes) -> JoinedTokens:
    """``JoinedTokens.of(_words(data))``, made without the list unless a word starts with a mark.

    The fold is letters, digits and marks separated by spaces, so its UTF-8 is the words
    separated by runs of the space byte (no other character's UTF-8 holds that byte): each run
    becomes one NUL, in C (``dedup/_tokens.c``) or by :func:`_join_numpy`.
    """
    folded, marks = _fold(data)
    if marks:  # what _unmark does, on the whole text: marks that start a word go
        folded = re.sub(f"(?:^|(?<= ))[{re.escape(marks)}]+", "", folded)
    if isinstance(folded, str):
        folded = folded.encode("utf-8", "surrogatepass")
    if _c_tokens is None:
        return _join_numpy(folded)
    joined, count = _c_tokens.join_words(folded)
    return JoinedTokens(joined, count)


def _join_numpy(folded: bytes) -> JoinedTokens:
    """The words of ``folded`` (separated by runs of spaces) joined by NUL: keep every other
    byte and the first space after each word, and make those spaces NULs."""
    chars = np.frombuffer(folded, dtype=np.uint8)
    in_word = chars != _SPACE
    keep = in_word.copy()
    keep[1:] |= in_word[:-1]
    joined = np.compress(keep, chars).tobytes().replace(b" ", b"\x00")
    if joined.endswith(b"\x00"):
        joined = joined[:-1]
    return JoinedTokens(joined, joined.count(b"\x00") + 1 if joined else 0)


def _lines(data: bytes, separator: str) -> list[str]:
    """The lines of UTF-8 ``data``, cut at ``separator``, as their words joined by one space;
    lines without words are left out."""
    folded, marks = _folded(data, keep=separator)
    lines = []
    for line in folded.split(separator):
        words = line.split()
        if marks and words:
            words = _unmark(words, marks)
        if words:
            lines.append(" ".join(words))
    return lines


def _words_simple(text: str) -> list[str]:
    """The words of ``text``, as the module docstring defines them, plainly and slowly.

    >>> _words_simple("Ein ﬁ\\u00adxer Text_mit 12,5 %")
    ['ein', 'fixer', 'text', 'mit', '12', '5']
    """
    text = unicodedata.normalize("NFKC", _IGNORABLE_RE.sub("", text))
    return _word_re().findall(unicodedata.normalize("NFKC", text.casefold()))


def _check(unit: str) -> None:
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")


def _as_unit(words: list[str], unit: str) -> list[str]:
    return words if unit == "word" else list(" ".join(words))


def text_tokens(text: str, unit: str = "word") -> list[str]:
    """The canonical token stream of plain ``text`` (see the module docstring).

    >>> text_tokens("  \\t\\n")
    []
    >>> text_tokens("x", unit="sentence")
    Traceback (most recent call last):
    ...
    ValueError: unit must be one of ('word', 'char', 'line'), got 'sentence'
    """
    _check(unit)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    if unit == "line":
        # U+FDD0 is no word character, so blanking it first changes no token
        text = BREAK.join(text.replace(BREAK, " ").splitlines())
        return _lines(text.encode("utf-8", "surrogatepass"), BREAK)
    return _as_unit(_words(text.encode("utf-8", "surrogatepass")), unit)


def _marked(
    html: str | bytes,
    engine: str,
    encoding: str | None,
    lines: bool = True,
    area: ContentArea | None = None,
) -> bytes:
    """The document's text with its block marks, in UTF-8 (:func:`dedup.html_text.extract`),
    of its content ``area`` (None: the whole page)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if isinstance(html, (bytes, bytearray, memoryview)):
        return extract_document(bytes(html), encoding, engine, lines, area)
    if not isinstance(html, str):
        raise TypeError(f"html must be str or bytes, got {type(html).__name__}")
    return extract_utf8(html, engine, lines, area)


def html_tokens(
    html: str | bytes,
    unit: str = "word",
    engine: str = "fast",
    *,
    encoding: str | None = None,
    area: ContentArea | None = None,
) -> list[str]:
    """The canonical token stream of an HTML document.

    ``engine`` is ``"fast"`` (lexbor) or ``"reference"`` (BeautifulSoup); both give the same
    tokens. Bytes are decoded by :func:`decode_html`; ``encoding`` is the transport's charset
    (e.g. from the HTTP ``Content-Type``), if known. ``area`` is the content area
    (:class:`dedup.params.ContentArea`; None: the whole page). Malformed markup never raises;
    empty, whitespace-only and binary input gives ``[]``.

    >>> html_tokens("<title>T</title><p>one<br>two</p>", unit="line")
    ['t', 'one', 'two']
    >>> html_tokens(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00")
    []
    >>> html_tokens("<nav>Home</nav><main>The text</main>", area=ContentArea("main"))
    ['the', 'text']
    """
    _check(unit)
    text = _marked(html, engine, encoding, lines=unit == "line", area=area)
    if unit == "line":
        return _lines(text, BREAK)
    return _as_unit(_words(text), unit)


def text_joined_tokens(text: str, unit: str = "word") -> JoinedTokens:
    """``JoinedTokens.of(text_tokens(text, unit))``: what a sketch reads, without the list of
    ``str`` objects when it can (words of text that folds to ASCII).

    >>> text_joined_tokens("A rose, is a ROSE").data
    b'a\\x00rose\\x00is\\x00a\\x00rose'
    """
    if unit != "word" or not isinstance(text, str):
        return JoinedTokens.of(text_tokens(text, unit))
    return _joined_words(text.encode("utf-8", "surrogatepass"))


def html_joined_tokens(
    html: str | bytes,
    unit: str = "word",
    engine: str = "fast",
    *,
    encoding: str | None = None,
    area: ContentArea | None = None,
) -> JoinedTokens:
    """``JoinedTokens.of(html_tokens(html, unit, engine, encoding=encoding))``, made without
    the list of ``str`` objects when it can: the sketching path (crawl and re-cluster) needs
    only the joined bytes, and splitting a page into thousands of strings costs more than
    its sketch.

    >>> html_joined_tokens("<p>A <b>ro</b>se</p><ul><li>is</li><li>a&nbsp;rose</li></ul>").data
    b'a\\x00rose\\x00is\\x00a\\x00rose'
    """
    if unit != "word":
        return JoinedTokens.of(html_tokens(html, unit, engine, encoding=encoding, area=area))
    return _joined_words(_marked(html, engine, encoding, lines=False, area=area))


def html_text(
    html: str | bytes,
    engine: str = "fast",
    *,
    encoding: str | None = None,
    area: ContentArea | None = None,
) -> str:
    """The visible text of an HTML document, one line per block, whitespace collapsed.

    Case and punctuation are kept (it is for people: ``explain``, ``compare``); its tokens are
    the document's: ``text_tokens(html_text(h), unit) == html_tokens(h, unit)`` for every unit.

    >>> print(html_text("<h1>Title</h1><p>Some  <i>text</i>,\\n here.<!-- no --></p>"))
    Title
    Some text, here.
    """
    text = _marked(html, engine, encoding, area=area).decode("utf-8")
    lines = (" ".join(segment.split()) for segment in text.split(BREAK))
    return "\n".join(line for line in lines if line)


def document_tokens(
    data: str | bytes,
    kind: str = "html",
    unit: str = "word",
    engine: str = "fast",
    *,
    encoding: str | None = None,
    area: ContentArea | None = None,
) -> JoinedTokens:
    """The canonical token stream of one document, joined: the one way from a document to its
    tokens, for every caller (the spider, the crawl's worker, re-clustering, ``explain``,
    ``compare``), so a page gives the same tokens wherever it is read.

    ``kind`` is ``"html"``, ``"text"`` (bytes are UTF-8, invalid bytes replaced) or
    ``"auto"`` (HTML when the first 4 KB show an HTML tag). ``encoding`` is an HTML document's
    transport charset, if known (:func:`dedup.html_text.charset_of` reads it from a
    Content-Type). ``area`` is the content area of an HTML document
    (:class:`dedup.params.ContentArea`; None or the default: the whole page); a text document
    has no elements, so it is read whole. ``.tokens()`` gives the list.

    >>> document_tokens(b"<p>A <b>ro</b>se</p>").tokens()
    ['a', 'rose']
    >>> document_tokens(b"a < b, and <p> is a tag", kind="text").tokens()
    ['a', 'b', 'and', 'p', 'is', 'a', 'tag']
    >>> document_tokens(b"<p>One<br>two", kind="auto", unit="line").tokens()
    ['one', 'two']
    """
    if kind == "auto":
        kind = "html" if looks_like_html(data) else "text"
    if kind == "html":
        return html_joined_tokens(data, unit, engine, encoding=encoding, area=area)
    if kind != "text":
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    return text_joined_tokens(text, unit)
