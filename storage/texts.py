"""The canonical text of a dropped page, as the store keeps it for ``neardup explain``.

A dropped page never reaches the WARC files, so the crawl keeps its canonical token stream as
text (``review.keep_text``, cut at ``review.max_text_bytes``) and the review reads it back. The
two directions live here, apart from the review commands, because the crawl's worker process
writes the text: it imports this module and nothing of Scrapy or of the review.
"""

from __future__ import annotations

from collections.abc import Sequence

from dedup.canonical import SEPARATORS

__all__ = ["stored_text", "tokens_of_text"]


def stored_text(tokens: Sequence[str], unit: str, max_bytes: int | None = None) -> str:
    """A canonical token stream as the text the store keeps, cut to ``max_bytes`` of UTF-8.

    Tokens are joined as their unit is (words by a space, characters directly, lines by a
    newline): a canonical token never holds its unit's separator, so :func:`tokens_of_text`
    gives the stream back exactly. A cut falls between tokens, so a cut text is still a prefix
    of the stream.

    >>> stored_text(["a", "rose", "is", "a", "rose"], "word")
    'a rose is a rose'
    >>> cut = stored_text(["a", "rose", "is", "a", "rose"], "word", max_bytes=8)
    >>> cut, tokens_of_text(cut, "word")
    ('a rose', ['a', 'rose'])
    """
    sep = SEPARATORS[unit]
    text = sep.join(tokens)
    if max_bytes is None:
        return text
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0; got {max_bytes}")
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    cut = data[:max_bytes].decode("utf-8", "ignore")  # never half a character
    if sep and not data[max_bytes:].startswith(sep.encode()):
        cut = cut.rpartition(sep)[0]  # never half a token
    return cut.rstrip(sep) if sep else cut


def tokens_of_text(text: str, unit: str) -> list[str]:
    """The token stream of a text made by :func:`stored_text` (its exact inverse).

    >>> tokens_of_text("to be", "char")
    ['t', 'o', ' ', 'b', 'e']
    >>> tokens_of_text("", "line")
    []
    """
    sep = SEPARATORS[unit]
    if not text:
        return []
    return list(text) if not sep else text.split(sep)
