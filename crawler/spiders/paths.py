"""URL paths a crawl does not follow however they are linked: paths that repeat themselves.

A directory linked to itself or to its parent (a symbolic link ``up -> ..`` on a server that
follows links, a relative link written one level too deep) serves the site again under every
deeper path: ``/docs/up/docs/up/docs/up/...``. Its listings are short pages that differ by
their titles, so each is kept as a new page and the duplicate budget, which follows runs of
duplicates, never sees the trap (docs/crawling.md). What gives it away is the URL: a segment,
or a run of segments, again and again in a row. A path that repeats one more than
``crawl.max_path_repeats`` times in a row (2: ``/a/a/`` is followed, ``/a/a/a/`` is not) is
refused, as a link past ``crawl.max_path_segments`` segments is: two such links in one
directory make paths that never repeat three times in a row, and the depth bounds those.
"""

from __future__ import annotations

__all__ = ["path_refusal"]


def path_refusal(path: str, max_repeats: int, max_segments: int) -> str | None:
    """``repeated_path``, ``too_many_segments`` or None for a URL's ``path`` (0: no limit).

    >>> [path_refusal(p, 2, 20) for p in ("/a/a/x.html", "/a/a/a/x.html", "/docs/up/docs/up/")]
    [None, 'repeated_path', None]
    >>> path_refusal("/docs/up/docs/up/docs/up/", 2, 20), path_refusal("/2024/01/01/", 2, 20)
    ('repeated_path', None)
    >>> path_refusal("/a" * 21, 2, 20), path_refusal("/a/b" * 10, 2, 0)
    ('too_many_segments', 'repeated_path')
    """
    segments = [s for s in path.split("/") if s]
    if max_segments and len(segments) > max_segments:
        return "too_many_segments"
    if max_repeats and _repeats(segments, max_repeats + 1):
        return "repeated_path"
    return None


def _repeats(segments: list[str], times: int) -> bool:
    """Whether a run of one or more segments comes ``times`` times in a row in ``segments``."""
    n = len(segments)
    for length in range(1, n // times + 1):
        for start in range(n - length * times + 1):
            run = segments[start : start + length]
            if all(segments[start + k * length : start + (k + 1) * length] == run
                   for k in range(1, times)):  # fmt: skip
                return True
    return False
