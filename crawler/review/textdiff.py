"""Two token streams side by side, shared passages plain, differing passages marked.

``neardup explain`` shows a dropped page beside the page it duplicated. The streams are the
canonical tokens the sketches were made from, so what is marked here is exactly what the
resemblance measured, not the markup or the punctuation the canonicaliser ignored.

The alignment is :class:`difflib.SequenceMatcher` over tokens, exact, with a long page first cut at
the words both pages have once, as ``git diff --patience`` cuts (:func:`_opcodes`), so that a long
page stays fast. Each column flows as text; the columns are re-aligned at the start of every
*hunk*, a run of differences and the short shared passages between them. Long shared passages
between hunks are shown once per column (``context=None``) or cut to ``context`` tokens on each
side of a difference, the rest counted in one line.

Where the context is cut is decided once, by :func:`cut_context`, for this view and for the
report's (:mod:`crawler.review.report`), which marks the same passages in HTML.

Marking: on a terminal, words only in A are red and words only in B green (:func:`use_colour`
decides, following https://no-color.org). Elsewhere the marks are plain text, as ``wdiff`` writes
them: ``[-only in A-]`` and ``{+only in B+}``; a ``*`` between the columns flags a line with a
difference.

>>> a = "the walk starts at the old mill and climbs the fell".split()
>>> b = "the walk starts at the new mill and climbs the fell".split()
>>> [(p.kind, p.a_text, p.b_text) for p in differences(a, b)]
[('replace', 'old', 'new')]
>>> print(side_by_side(a, b, width=43, titles=("A", "B")))
A                    | B
---------------------+---------------------
the walk starts at   | the walk starts at
the [-old-] mill and * the {+new+} mill and
climbs the fell      | climbs the fell
"""

from __future__ import annotations

import os
import textwrap
import unicodedata
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import IO, Any

from dedup.canonical import SEPARATORS

__all__ = [
    "ELIDED",
    "Passage",
    "cut_context",
    "differences",
    "passages",
    "side_by_side",
    "truncate_middle",
    "use_colour",
    "width_of",
]

_NOUNS = {"word": "words", "char": "characters", "line": "lines"}

_RED, _GREEN, _DIM, _RESET = "\x1b[1;31m", "\x1b[1;32m", "\x1b[2m", "\x1b[0m"
_PLAIN_MARKS = {"del": ("[-", "-]"), "ins": ("{+", "+}")}
_COLOURS = {"del": _RED, "ins": _GREEN, "dim": _DIM}

# (kind, a_start, a_end, b_start, b_end), as SequenceMatcher.get_opcodes gives them
_Opcode = tuple[str, int, int, int, int]

#: the kind of a shared passage :func:`cut_context` leaves out
ELIDED = "elided"


@dataclass(frozen=True)
class Passage:
    """One stretch of the alignment: ``a[a_start:a_end]`` against ``b[b_start:b_end]``.

    ``kind`` is ``equal`` (shared), ``replace`` (different text in both), ``delete`` (only in
    A) or ``insert`` (only in B), as :meth:`difflib.SequenceMatcher.get_opcodes` names them;
    :func:`cut_context` adds ``elided``: shared, and left out of the view.
    """

    kind: str
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    #: the passage's text in A and in B, tokens joined as their unit is
    a_text: str
    b_text: str

    @property
    def shared(self) -> bool:
        return self.kind in ("equal", ELIDED)

    @property
    def elided(self) -> bool:
        return self.kind == ELIDED

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "a": [self.a_start, self.a_end],
            "b": [self.b_start, self.b_end],
            "a_text": self.a_text,
            "b_text": self.b_text,
        }


#: the most token pairs a stretch may have for difflib to align it exactly
_EXACT_PAIRS = 4_000_000

# (a_start, b_start, size): a matching block, as SequenceMatcher.get_matching_blocks gives them
_Block = tuple[int, int, int]


def _opcodes(a: Sequence[str], b: Sequence[str]) -> list[_Opcode]:
    """The alignment of ``a`` and ``b`` as difflib's opcodes.

    difflib aligns exactly only without its "junk" heuristic, and then a long page costs
    minutes (its common words match everywhere). With the heuristic on, the words of a long
    page that occur most are never where a match starts, and two near-identical pages with a
    passage repeated (a table of contents at the top and the bottom) were aligned at that
    passage, the rest of both pages shown as differing. So, as ``git diff --patience`` does,
    a long stretch is cut at the words that occur once in each page, in the order both pages
    have them, and difflib aligns the short stretches between them exactly.
    """
    blocks: list[_Block] = []
    _match(list(a), list(b), 0, len(a), 0, len(b), blocks)
    ops: list[_Opcode] = []
    i = j = 0
    for ai, bj, size in [*_merged(blocks), (len(a), len(b), 0)]:
        kind = "replace" if i < ai and j < bj else "delete" if i < ai else "insert"
        if i < ai or j < bj:
            ops.append((kind, i, ai, j, bj))
        if size:
            ops.append(("equal", ai, ai + size, bj, bj + size))
        i, j = ai + size, bj + size
    return ops


def _match(
    a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int, out: list[_Block]
) -> None:
    """Append the matching blocks of ``a[alo:ahi]`` and ``b[blo:bhi]`` to ``out``, in order."""
    start = alo
    while alo < ahi and blo < bhi and a[alo] == b[blo]:  # a shared beginning
        alo, blo = alo + 1, blo + 1
    if alo > start:
        out.append((start, blo - (alo - start), alo - start))
    end = ahi
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:  # and end
        ahi, bhi = ahi - 1, bhi - 1
    shared_end = (ahi, bhi, end - ahi)
    if alo < ahi and blo < bhi:
        anchors = [] if (ahi - alo) * (bhi - blo) <= _EXACT_PAIRS else _anchors(
            a, b, alo, ahi, blo, bhi)  # fmt: skip
        if anchors:
            for i, j in anchors:
                _match(a, b, alo, i, blo, j, out)
                out.append((i, j, 1))
                alo, blo = i + 1, j + 1
            _match(a, b, alo, ahi, blo, bhi, out)
        else:  # short, or without a word once in each: difflib, exactly only if short
            exact = (ahi - alo) * (bhi - blo) <= _EXACT_PAIRS
            found = SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=not exact)
            out.extend((alo + i, blo + j, n) for i, j, n in found.get_matching_blocks() if n)
    if shared_end[2]:
        out.append(shared_end)


def _anchors(
    a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int
) -> list[tuple[int, int]]:
    """The words once in ``a[alo:ahi]`` and once in ``b[blo:bhi]``, as (i, j), the longest
    chain of them in the same order in both (patience sorting)."""
    counts: dict[str, list[int]] = {}
    for i in range(alo, ahi):
        seen = counts.setdefault(a[i], [0, i, 0, -1])
        seen[0] += 1
    for j in range(blo, bhi):
        seen = counts.get(b[j])
        if seen is not None:
            seen[2] += 1
            seen[3] = j
    pairs = sorted((i, j) for n, i, m, j in counts.values() if n == 1 and m == 1)
    # longest increasing run of j: tops[k] ends the best chain of length k + 1
    tops: list[int] = []
    back: list[int] = [-1] * len(pairs)
    ends: list[int] = []
    for n, (_, j) in enumerate(pairs):
        k = bisect_left(tops, j)
        if k == len(tops):
            tops.append(j)
            ends.append(n)
        else:
            tops[k], ends[k] = j, n
        back[n] = ends[k - 1] if k else -1
    chain: list[tuple[int, int]] = []
    n = ends[-1] if ends else -1
    while n >= 0:
        chain.append(pairs[n])
        n = back[n]
    return chain[::-1]


def _merged(blocks: list[_Block]) -> list[_Block]:
    """Matching blocks with the adjacent ones joined."""
    merged: list[_Block] = []
    for i, j, n in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        else:
            merged.append((i, j, n))
    return merged


def passages(
    a: Sequence[str],
    b: Sequence[str],
    unit: str = "word",
    known: Sequence[Passage] | None = None,
) -> list[Passage]:
    """The whole alignment of ``a`` and ``b``, shared and differing passages in order.

    ``known``: the differing passages, as :func:`differences` found them before (an
    :class:`~crawler.review.explain.Comparison` keeps them); the shared passages are the gaps
    between them, so the streams are not aligned again.

    >>> [p.kind for p in passages(["x", "y", "z"], ["x", "z", "w"])]
    ['equal', 'delete', 'equal', 'insert']
    >>> found = differences(["x", "y", "z"], ["x", "z", "w"])
    >>> passages(["x", "y", "z"], ["x", "z", "w"], known=found) == passages(["x", "y", "z"],
    ...                                                                    ["x", "z", "w"])
    True
    """
    sep = _separator(unit)
    if known is None:
        ops = _opcodes(a, b)
    else:
        ops, i, j = [], 0, 0
        for p in [*known, Passage("end", len(a), len(a), len(b), len(b), "", "")]:
            if p.a_start - i != p.b_start - j or p.a_start < i:
                raise ValueError("the known differences are not an alignment of these streams")
            if p.a_start > i:
                ops.append(("equal", i, p.a_start, j, p.b_start))
            if p.kind != "end":
                ops.append((p.kind, p.a_start, p.a_end, p.b_start, p.b_end))
            i, j = p.a_end, p.b_end
    return [
        Passage(kind, i1, i2, j1, j2, sep.join(a[i1:i2]), sep.join(b[j1:j2]))
        for kind, i1, i2, j1, j2 in ops
    ]


def differences(a: Sequence[str], b: Sequence[str], unit: str = "word") -> list[Passage]:
    """Only the passages that differ (what a reader looks for first)."""
    return [p for p in passages(a, b, unit) if not p.shared]


def cut_context(
    found: Sequence[Passage],
    a: Sequence[str],
    b: Sequence[str],
    context: int,
    unit: str = "word",
) -> list[Passage]:
    """The alignment ``found`` (:func:`passages` of ``a`` and ``b``) as a reader is shown it.

    Every shared passage longer than ``2·context`` tokens keeps ``context`` tokens beside each
    difference it touches (none before the first difference, none after the last); the
    tokens between become one passage of kind ``elided``, for the view to count rather than
    show. Streams without a difference are not cut: there is no difference to give context to.
    Both the terminal's side-by-side view and the report's cut here, so they cut alike.

    >>> a = "a b c d e f g h".split()
    >>> b = "a b c d e f g X".split()
    >>> [(p.kind, p.a_text) for p in cut_context(passages(a, b), a, b, 2)]
    [('elided', 'a b c d e'), ('equal', 'f g'), ('replace', 'h')]
    """
    if context < 0:
        raise ValueError(f"context must be >= 0; got {context}")
    if all(p.shared for p in found):
        return list(found)
    sep = _separator(unit)

    def part(kind: str, p: Passage, start: int, end: int) -> Passage:
        i, j = p.a_start + start, p.b_start + start
        i2, j2 = p.a_start + end, p.b_start + end
        return Passage(kind, i, i2, j, j2, sep.join(a[i:i2]), sep.join(b[j:j2]))

    out: list[Passage] = []
    last = len(found) - 1
    for n, p in enumerate(found):
        length = p.a_end - p.a_start
        if p.kind != "equal" or length <= 2 * context:
            out.append(p)
            continue
        before = context if n > 0 else 0
        after = context if n < last else 0
        if before:
            out.append(part("equal", p, 0, before))
        out.append(part(ELIDED, p, before, length - after))
        if after:
            out.append(part("equal", p, length - after, length))
    return out


# --- layout helpers ---------------------------------------------------------------------------


def width_of(text: str) -> int:
    """Terminal cells ``text`` takes: wide East Asian characters two, combining marks none.

    >>> width_of("abc"), width_of("日本"), width_of("e\\u0301")
    (3, 4, 1)
    """
    if text.isascii():
        return len(text)
    cells = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        cells += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return cells


def _fit(text: str, cells: int) -> str:
    """The longest prefix of ``text`` that takes at most ``cells`` cells."""
    if width_of(text) <= cells:
        return text
    out, used = [], 0
    for char in text:
        w = width_of(char)
        if used + w > cells:
            break
        out.append(char)
        used += w
    return "".join(out)


def truncate_middle(text: str, width: int, ellipsis: str = "…") -> str:
    """``text`` cut in the middle to at most ``width`` cells, so both ends stay readable.

    URLs differ at their ends (host, last path segment), so the middle is what goes.

    >>> truncate_middle("http://example.org/a/very/long/path/page.html", 30)
    'http://example.…path/page.html'
    >>> truncate_middle("short", 30)
    'short'
    """
    if width_of(text) <= width:
        return text
    room = width - width_of(ellipsis)
    if room <= 0:
        return _fit(ellipsis, width)
    head = _fit(text, (room + 1) // 2)
    tail_cells = room - width_of(head)
    tail = ""
    for char in reversed(text):
        if width_of(tail) + width_of(char) > tail_cells:
            break
        tail = char + tail
    return head + ellipsis + tail


def use_colour(stream: IO[str] | Any, mode: str = "auto") -> bool:
    """Whether to colour output for ``stream``: ``always``, ``never``, or ``auto``.

    ``auto`` colours only a terminal, and never when ``NO_COLOR`` is set to a non-empty value
    (https://no-color.org) or ``TERM`` is ``dumb``.
    """
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"colour mode must be auto, always or never; got {mode!r}")
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _separator(unit: str) -> str:
    if unit not in SEPARATORS:
        raise ValueError(f"unit must be one of {', '.join(SEPARATORS)}; got {unit!r}")
    return SEPARATORS[unit]


# --- the side-by-side view --------------------------------------------------------------------

# a piece of a column: its text and its style (None = shared, "del", "ins", "dim")
_Piece = tuple[str, str | None]


@dataclass
class _Row:
    """One aligned block: the two columns start on the same line."""

    left: list[_Piece]
    right: list[_Piece]
    #: "hunk" (differences and short shared passages), "shared" or "elided"
    kind: str


def _rows(a: Sequence[str], b: Sequence[str], cut: list[Passage], elide: bool,
          noun: str) -> list[_Row]:  # fmt: skip
    """Group the passages :func:`cut_context` gave into hunks; each elided passage is a row of
    its own: counted (``elide``) or shown whole, so the columns re-align after it."""
    rows: list[_Row] = []
    hunk = _Row([], [], "hunk")
    for p in cut:
        left, right = a[p.a_start : p.a_end], b[p.b_start : p.b_end]
        if not p.elided:
            hunk.left += [(t, None if p.shared else "del") for t in left]
            hunk.right += [(t, None if p.shared else "ins") for t in right]
            continue
        if hunk.left or hunk.right:
            rows.append(hunk)
        hunk = _Row([], [], "hunk")
        if elide:
            many = noun if len(left) != 1 else noun[:-1]
            count = [(f"... {len(left):,} shared {many} ...", "dim")]
            rows.append(_Row(list(count), list(count), "elided"))
        else:
            shared = [(t, None) for t in left]
            rows.append(_Row(shared, list(shared), "shared"))
    if hunk.left or hunk.right:
        rows.append(hunk)
    return rows


def _marked(pieces: list[_Piece], colour: bool) -> list[_Piece]:
    """Plain output: put wdiff's brackets around each run of marked tokens."""
    if colour:
        return pieces
    out: list[_Piece] = []
    for n, (text, style) in enumerate(pieces):
        if style in _PLAIN_MARKS:
            opening, closing = _PLAIN_MARKS[style]
            if n == 0 or pieces[n - 1][1] != style:
                text = opening + text
            if n == len(pieces) - 1 or pieces[n + 1][1] != style:
                text = text + closing
        out.append((text, style))
    return out


def _wrap(pieces: list[_Piece], width: int, sep: str) -> list[list[_Piece]]:
    """Greedy wrapping at token boundaries; a token wider than a line is cut into lines.

    With ``sep == "\\n"`` (line tokens) every token starts a line of its own.
    """
    lines: list[list[_Piece]] = []
    line: list[_Piece] = []
    used = 0

    def flush() -> None:
        nonlocal line, used
        if line:
            lines.append(line)
        line, used = [], 0

    for text, style in pieces:
        cells = width_of(text)
        if sep == "\n" or (line and used + len(sep) + cells > width):
            flush()
        while cells > width:  # a token longer than the column: cut it
            part = _fit(text, width) or text[0]
            lines.append([(part, style)])
            text = text[len(part) :]
            cells = width_of(text)
        if not text:
            continue
        if line and sep:
            # inside a run of one style the separator takes it too (one colour span, not many)
            line.append((sep, style if line[-1][1] == style else None))
            used += len(sep)
        line.append((text, style))
        used += cells
    flush()
    return lines


def _render(line: list[_Piece], width: int, colour: bool) -> str:
    cells = sum(width_of(text) for text, _ in line)
    if colour:
        runs: list[_Piece] = []
        for text, style in line:  # one escape sequence per run of a style
            if runs and runs[-1][1] == style:
                runs[-1] = (runs[-1][0] + text, style)
            else:
                runs.append((text, style))
        body = "".join(f"{_COLOURS[s]}{t}{_RESET}" if s else t for t, s in runs)
    else:
        body = "".join(t for t, _ in line)
    return body + " " * max(0, width - cells)


def side_by_side(
    a: Sequence[str],
    b: Sequence[str],
    *,
    width: int = 80,
    colour: bool = False,
    context: int | None = 12,
    unit: str = "word",
    titles: tuple[str, str] = ("A", "B"),
) -> str:
    """``a`` (left) beside ``b`` (right) in ``width`` columns, differences marked.

    ``context``: shared tokens shown on each side of a difference, the rest of a long shared
    passage counted in one line; ``None`` shows every token. ``unit`` says how the tokens are
    joined into text (``word``: with spaces, ``char``: directly, ``line``: one per line).
    """
    sep = _separator(unit)
    if width < 23:
        raise ValueError(f"width must be at least 23 columns; got {width}")
    if context is not None and context < 0:
        raise ValueError(f"context must be >= 0 or None; got {context}")
    column = (width - 3) // 2
    found = passages(a, b, unit)
    head = [
        (_cell(titles[0], column) + " | " + truncate_middle(titles[1], column)).rstrip(),
        f"{'-' * column}-+-{'-' * column}",
    ]
    if all(p.shared for p in found):
        noun = _NOUNS[unit]
        head += textwrap.wrap(f"(identical: the same {len(a):,} {noun} in both)", width)
        return "\n".join(head)
    # without a context, long shared passages still get rows of their own, shown whole
    cut = cut_context(found, a, b, 8 if context is None else context, unit)
    out = list(head)
    for row in _rows(a, b, cut, context is not None, _NOUNS[unit]):
        row_sep = sep if row.kind != "elided" else " "
        left = _wrap(_marked(row.left, colour), column, row_sep)
        right = _wrap(_marked(row.right, colour), column, row_sep)
        for n in range(max(len(left), len(right))):
            lp = left[n] if n < len(left) else []
            rp = right[n] if n < len(right) else []
            changed = any(s in ("del", "ins") for _, s in lp + rp)
            gutter = " * " if changed else " | "
            out.append((_render(lp, column, colour) + gutter + _render(rp, 0, colour)).rstrip())
    return "\n".join(out)


def _cell(text: str, width: int) -> str:
    """``text`` in exactly ``width`` cells: cut in the middle, or padded."""
    text = truncate_middle(text, width)
    return text + " " * max(0, width - width_of(text))
