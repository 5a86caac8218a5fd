"""w-shingling of a canonical token sequence (Broder 1997, §2).

A *shingle* is a contiguous run of ``w`` tokens. The w-shingling of a document is the *bag* of
all its shingles; the paper offers two ways to turn that bag into the set ``S(D, w)`` whose
resemblance and containment we measure:

* **Option A** labels each shingle with its occurrence number (1, 2, ... in order of appearance),
  so repeated passages count as often as they occur. Its elements are ``(shingle, label)`` pairs.
* **Option B** keeps each distinct shingle once. It is cheaper and the crawler's default.

The example of §2 as corrected by errata item 1:

>>> doc = "a rose is a rose is a rose".split()
>>> sorted(shingles(doc, 4, "B"))
[('a', 'rose', 'is', 'a'), ('is', 'a', 'rose', 'is'), ('rose', 'is', 'a', 'rose')]
>>> sorted(shingles(doc, 4, "A"))  # doctest: +NORMALIZE_WHITESPACE
[(('a', 'rose', 'is', 'a'), 1), (('a', 'rose', 'is', 'a'), 2), (('is', 'a', 'rose', 'is'), 1),
 (('rose', 'is', 'a', 'rose'), 1), (('rose', 'is', 'a', 'rose'), 2)]

**Short documents.** A document with fewer than ``w`` tokens has no w-shingle at all, so two
different short pages would both get the empty set and "resemble" each other fully. We give such
a document the single shingle made of all its tokens instead; the fingerprinting code follows the
same rule so that a shingle set and its fingerprints always agree. The empty document has no
shingles.

>>> shingles(["hello", "world"], 4)
{('hello', 'world')}
>>> shingles([], 4)
set()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

__all__ = ["OPTIONS", "shingle_bag", "shingles"]

#: The two ways of §2 to turn the bag of shingles into a set.
OPTIONS = ("A", "B")

Shingle = tuple[Hashable, ...]


def _windows(tokens: Sequence[Hashable], w: int) -> list[Shingle]:
    """All w-token windows in order, with the short-document rule applied."""
    if w < 1:
        raise ValueError(f"shingle size w must be >= 1, got {w}")
    toks = tuple(tokens)
    if not toks:
        return []
    if len(toks) < w:
        return [toks]
    return [toks[i : i + w] for i in range(len(toks) - w + 1)]


def shingle_bag(tokens: Sequence[Hashable], w: int) -> Counter[Shingle]:
    """The w-shingling of ``tokens``: the bag (multiset) of its shingles, as a Counter.

    >>> shingle_bag("a rose is a rose is a rose".split(), 4)[("a", "rose", "is", "a")]
    2
    """
    return Counter(_windows(tokens, w))


def shingles(tokens: Sequence[Hashable], w: int, option: str = "B") -> set[Hashable]:
    """The set ``S(D, w)`` of §2: labelled shingles (option "A") or distinct shingles ("B").

    Option A elements are ``(shingle, occurrence_number)`` pairs, numbered from 1 in the order
    the shingle appears. Option B elements are the shingle tuples themselves.

    >>> sorted(shingles("a b a b".split(), 2, "A"))
    [(('a', 'b'), 1), (('a', 'b'), 2), (('b', 'a'), 1)]
    >>> shingles("x", 1, "C")
    Traceback (most recent call last):
    ...
    ValueError: option must be 'A' (labelled) or 'B' (plain), got 'C'
    """
    if option not in OPTIONS:
        raise ValueError(f"option must be 'A' (labelled) or 'B' (plain), got {option!r}")
    windows = _windows(tokens, w)
    if option == "B":
        return set(windows)
    seen: Counter[Shingle] = Counter()
    labelled: set[Hashable] = set()
    for shingle in windows:
        seen[shingle] += 1
        labelled.add((shingle, seen[shingle]))
    return labelled
