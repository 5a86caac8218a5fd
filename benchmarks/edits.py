"""Edited copies of real HTML pages, the way pages get copied around the web.

A mirror or a syndicated copy of a page is rarely byte-identical: a copyright line is added, a
few words change, a paragraph is dropped, the navigation is rewritten for the new site. The
accuracy benchmark needs such copies with a *spread* of resemblances around the threshold, so
:func:`edit_page` applies a random mix of those four edits at a random strength. How alike the
copy really is to its original is not decided here: it is measured afterwards on the canonical
token streams (exact Jaccard of the shingle sets), so nothing relies on a model of the edits.

    >>> import random
    >>> page = b"<html><body><p>one two three four five six</p><p>seven eight nine</p></body></html>"
    >>> edited, kinds = edit_page(page, random.Random(1), ["alpha", "beta"], kinds=("copyright",))
    >>> kinds, b"rights reserved" in edited
    (['copyright'], True)
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import lxml.html

from dedup.canonical import decode_html

__all__ = ["EDITS", "edit_page"]

#: the kinds of edit, each applied with this probability (at least one is always applied)
EDITS = {"copyright": 0.5, "words": 0.7, "paragraph": 0.4, "links": 0.3}

_OWNERS = ("Example Mirror Ltd", "DocsArchive.org", "The Reference Library", "Manuals Online")
_LABELS = ("read more", "go to page", "see also", "continue reading", "open", "link")
_WORD = re.compile(r"\w+")
_BLOCKS = ("p", "li", "dd", "pre", "dt", "tr")
_PARSER = lxml.html.HTMLParser(encoding="utf-8")


def edit_page(
    html: bytes,
    rng: random.Random,
    vocabulary: Sequence[str],
    *,
    kinds: Sequence[str] | None = None,
    max_word_fraction: float = 0.06,
) -> tuple[bytes, list[str]]:
    """An edited copy of ``html`` (UTF-8 bytes) and the edits made.

    ``kinds`` forces which edits (default: each of :data:`EDITS` with its probability, at least
    one). ``words`` replaces a fraction of the page's words, uniform in ``[0,
    max_word_fraction]``, by words of ``vocabulary``: with 4-word shingles each replaced word
    removes up to 4 shingles, so 0.06 reaches resemblances near 0.6 and the spread straddles a
    0.8 threshold.
    """
    if kinds is None:
        kinds = [kind for kind, p in EDITS.items() if rng.random() < p]
        if not kinds:
            kinds = [rng.choice(list(EDITS))]
    unknown = sorted(set(kinds) - set(EDITS))
    if unknown:
        raise ValueError(f"unknown edit {unknown[0]!r}; choose from {', '.join(EDITS)}")
    # decoded as the canonicaliser decodes, then parsed as UTF-8 whatever the page declares
    utf8 = decode_html(html).encode("utf-8", "surrogatepass")
    root = lxml.html.document_fromstring(utf8, parser=_PARSER)
    body = root.find("body")
    if body is None:
        body = root
    done = []
    for kind in kinds:
        if kind == "copyright":
            _add_copyright(body, rng)
        elif kind == "words":
            _change_words(root, rng, vocabulary, rng.uniform(0.0, max_word_fraction))
        elif kind == "paragraph" and not _drop_block(body, rng):
            continue
        elif kind == "links" and not _rewrite_links(root, rng):
            continue
        done.append(kind)
    _declare_utf8(root)
    data: bytes = lxml.html.tostring(root, encoding="utf-8", method="html", doctype="<!DOCTYPE html>")
    return data, done


def _add_copyright(body: lxml.html.HtmlElement, rng: random.Random) -> None:
    line = lxml.html.fragment_fromstring(
        f"<p>Copyright &copy; {rng.randint(1998, 2025)} {rng.choice(_OWNERS)}. "
        "All rights reserved. Mirrored with permission.</p>"
    )
    body.append(line)


def _text_slots(root: lxml.html.HtmlElement) -> list[tuple[lxml.html.HtmlElement, str, int]]:
    """(element, "text" or "tail", words) for every piece of visible text with words."""
    slots = []
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag in ("script", "style", "head", "title"):
            continue
        for attr in ("text", "tail"):
            value = getattr(el, attr)
            if value:
                words = len(_WORD.findall(value))
                if words:
                    slots.append((el, attr, words))
    return slots


def _change_words(
    root: lxml.html.HtmlElement, rng: random.Random, vocabulary: Sequence[str], fraction: float
) -> None:
    slots = _text_slots(root)
    total = sum(words for _, _, words in slots)
    changes = round(fraction * total)
    if not changes:
        return
    picked = rng.choices(range(len(slots)), weights=[w for _, _, w in slots], k=changes)
    for index in picked:
        el, attr, _ = slots[index]
        value = getattr(el, attr)
        matches = list(_WORD.finditer(value))
        m = rng.choice(matches)
        setattr(el, attr, value[: m.start()] + rng.choice(vocabulary) + value[m.end() :])


def _drop_block(body: lxml.html.HtmlElement, rng: random.Random) -> bool:
    blocks = [el for el in body.iter(*_BLOCKS) if (el.text_content() or "").strip()]
    if len(blocks) < 2:  # never drop a page's only block
        return False
    rng.choice(blocks).drop_tree()  # keeps the element's tail text, as a browser would show it
    return True


def _rewrite_links(root: lxml.html.HtmlElement, rng: random.Random) -> bool:
    """New labels for the navigation: the first and last dozen links of the page."""
    links = [a for a in root.iter("a") if (a.text_content() or "").strip()]
    if not links:
        return False
    chosen = links[:12] + links[12:][-12:]
    for a in chosen:
        tail = a.tail
        for child in list(a):
            a.remove(child)
        a.text = rng.choice(_LABELS)
        a.tail = tail
        a.set("href", "/mirror" + (a.get("href") or "/"))
    return True


def _declare_utf8(root: lxml.html.HtmlElement) -> None:
    """The copy is written as UTF-8, so any charset the original declared must say so too."""
    for meta in root.iter("meta"):
        if meta.get("charset") is not None:
            meta.set("charset", "utf-8")
        elif (meta.get("http-equiv") or "").lower() == "content-type":
            meta.set("content", "text/html; charset=utf-8")
