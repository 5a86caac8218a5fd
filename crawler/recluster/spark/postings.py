"""The candidate search's fingerprint work, on numpy arrays: what each step of
:class:`crawler.recluster.spark.candidates.Search` computes inside one partition (the steps,
:mod:`crawler.recluster.spark.search_steps`, unpack what reached it and call these).

Spark moves the arrays between the steps; these functions do the work on them, vectorised.
A step's input is the concatenation of whatever reached its partition: every function groups
by its own key and is indifferent to order and to how many groups it holds.

Fingerprints are int64 views of the unsigned values; documents are their int64 keys.
"""

from __future__ import annotations

import numpy as np

from dedup.frequency import COUNTERS, counter_cells

__all__ = [
    "BLOB_BYTES", "bucket_of", "changed", "contested", "document_cells", "fresh", "indexed",
    "meet", "pack", "pack_bytes", "rarest_counted", "running_counts", "shared", "tally",
    "unpack", "unpack_bytes", "verdicts", "within",
]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: spreads keys that share low bits


def bucket_of(values: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket (0 to ``buckets`` - 1) of each int64 value, the same in every process."""
    mixed = values.view(np.uint64) * _MIX
    return ((mixed >> np.uint64(32)) % np.uint64(buckets)).astype(np.int64)


#: bytes of one packed blob at most. Spark copies a row into a buffer twice its size, and the
#: JVM's G1 collector places any object of half a heap region or more (512 KB in the default
#: 1 GB driver) in whole contiguous regions, which a full heap may not have: one blob per
#: partition (tens of MB) can run the default driver out of memory
BLOB_BYTES = 1 << 17


def pack(*columns: np.ndarray) -> list[bytes]:
    """Equal-length int64 columns as byte strings of at most :data:`BLOB_BYTES` each (the rows
    Spark moves: a few per bucket); none for no rows."""
    stacked = np.stack([np.asarray(c, dtype=np.int64) for c in columns])
    step = max(1, BLOB_BYTES // (8 * len(columns)))
    return [stacked[:, lo : lo + step].tobytes() for lo in range(0, stacked.shape[1], step)]


def unpack(blobs: list[bytes], width: int) -> list[np.ndarray]:
    """The ``width`` columns of every blob of :func:`pack`, concatenated."""
    if not blobs:
        return [np.empty(0, dtype=np.int64) for _ in range(width)]
    parts = [np.frombuffer(b, dtype=np.int64).reshape(width, -1) for b in blobs]
    return list(np.concatenate(parts, axis=1))


def pack_bytes(keys: np.ndarray, values: list[bytes]) -> list[bytes]:
    """Byte strings under int64 keys as blobs of at most :data:`BLOB_BYTES` (a longer value is
    a blob of its own): each holds its count, its keys, where each value ends, then the bytes
    (sketches, moved a few blobs per bucket like the int64 columns)."""
    keys = np.asarray(keys, dtype=np.int64)
    sizes = np.array([len(v) for v in values], dtype=np.int64)
    total = np.cumsum(sizes + 16)  # a value's bytes, its key and its end, and all before it
    blobs, lo = [], 0
    while lo < len(values):
        before = int(total[lo - 1]) if lo else 0
        room = before + BLOB_BYTES - 8  # the blob's count takes 8 bytes
        hi = max(lo + 1, int(np.searchsorted(total, room, side="right")))
        blob_ends = np.cumsum(sizes[lo:hi])
        head = np.concatenate(([hi - lo], keys[lo:hi], blob_ends)).astype(np.int64)
        blobs.append(head.tobytes() + b"".join(values[lo:hi]))
        lo = hi
    return blobs


def unpack_bytes(blobs: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
    """The keys and byte strings of every blob of :func:`pack_bytes`, concatenated."""
    keys, values = [np.empty(0, dtype=np.int64)], []
    for data in blobs:
        n = int(np.frombuffer(data, dtype=np.int64, count=1)[0])
        head = np.frombuffer(data, dtype=np.int64, count=1 + 2 * n)
        ends = head[1 + n :].tolist()
        body = memoryview(data)[8 * (1 + 2 * n) :]
        keys.append(head[1 : 1 + n])
        values += [bytes(body[a:b]) for a, b in zip([0, *ends[:-1]], ends)]
    return np.concatenate(keys), values


def _starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal keys begins in a sorted array."""
    if sorted_keys.size == 0:
        return np.empty(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1))


def _lengths(starts: np.ndarray, size: int) -> np.ndarray:
    """The length of each run that begins at ``starts`` in an array of ``size``."""
    return np.diff(np.append(starts, size))


def _rank(sorted_keys: np.ndarray) -> np.ndarray:
    """1-based place of each row within its run of equal keys."""
    starts = _starts(sorted_keys)
    return np.arange(sorted_keys.size) - np.repeat(starts, _lengths(starts, sorted_keys.size)) + 1


def _rows_of(doc: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Where each document of ``d`` stands in ``doc`` (every one of them is there)."""
    by_doc = np.argsort(doc)
    return by_doc[np.searchsorted(doc, d, sorter=by_doc)]


def shared(d: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``(d, f, count)`` rows of the fingerprints held by two documents or more (a
    fingerprint of one document meets no other), with how many documents hold each."""
    _, inverse, counts = np.unique(f, return_inverse=True, return_counts=True)
    count = counts[inverse]
    more = count > 1
    return d[more], f[more], count[more]


def indexed(
    d: np.ndarray, f: np.ndarray, count: np.ndarray,
    doc: np.ndarray, size: np.ndarray, k: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The postings ``(f, e)`` of the shared fingerprints each document indexes: the ``k`` rarest
    of its ``size`` (by the corpus's counts, ties by the smaller unsigned value, as
    :class:`dedup.frequency.FingerprintFrequency` ranks them). Its unshared ones are the rarest
    of all, so counted from the most common end a shared fingerprint is indexed when its place
    there reaches ``size - k + 1``. ``doc``, ``size``, ``k``: every document of ``d``."""
    if d.size == 0:
        return d, f
    # sort by document, then most common first, then the larger unsigned value first
    order = np.lexsort((~f.view(np.uint64), -count, d))
    d, f = d[order], f[order]
    at = _rows_of(doc, d)
    keep = _rank(d) >= size[at] - k[at] + 1
    return f[keep], d[keep]


def document_cells(
    key: np.ndarray, size: np.ndarray, f: np.ndarray, counters: int = COUNTERS
) -> tuple[np.ndarray, np.ndarray]:
    """``(cell, key)``: the counters of the local clusterer's count-min sketch
    (:func:`dedup.frequency.counter_cells`) that each document's ``size`` fingerprints of ``f``
    hit, each once per document, as :meth:`dedup.frequency.FingerprintFrequency.add` counts a
    counter met twice in one document."""
    cells = counter_cells(f.view(np.uint64), counters).view(np.int64)
    cell = cells.ravel()
    d = np.tile(np.repeat(key, size), cells.shape[0])
    order = np.lexsort((cell, d))
    cell, d = cell[order], d[order]
    first = np.ones(cell.size, dtype=bool)
    first[1:] = (cell[1:] != cell[:-1]) | (d[1:] != d[:-1])
    return cell[first], d[first]


def running_counts(cell: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(key, cell, count)``: each counter's value once the local clusterer has added document
    ``key``, the documents before it in input order and itself; ``(cell, key)`` pairs of
    :func:`document_cells`, every document of the corpus that hit the counter here."""
    order = np.lexsort((key, cell))
    cell, key = cell[order], key[order]
    return key, cell, _rank(cell)


#: bits of a counter's number in a (document, counter) lookup key (the sketch's two rows)
_CELL_BITS = (2 * COUNTERS).bit_length()


def rarest_counted(
    d: np.ndarray, f: np.ndarray, doc: np.ndarray, k: np.ndarray,
    counted_key: np.ndarray, counted_cell: np.ndarray, count: np.ndarray,
    counters: int = COUNTERS,
) -> tuple[np.ndarray, np.ndarray]:
    """The postings ``(f, e)`` of each document's indexed part as the local clusterer picks a new
    representative's (:meth:`dedup.frequency.FingerprintFrequency.rarest`): its ``k`` rarest
    fingerprints by the count-min estimate at its own place in the input, the least of its
    counters' values there (:func:`running_counts`), ties by the smaller unsigned value.
    ``(d, f)``: every fingerprint of the documents ``doc`` (with their ``k``)."""
    if d.size == 0:
        return f, d
    # documents numbered densely, so that a (document, counter) pair is one sortable int64;
    # the counters of documents not here (exact copies, which index nothing) are not read
    docs = np.unique(doc)
    at = np.searchsorted(docs, counted_key)
    here = docs[np.minimum(at, docs.size - 1)] == counted_key
    table = (at[here] << _CELL_BITS) | counted_cell[here]
    order = np.argsort(table)
    table, count = table[order], count[here][order]
    number = np.searchsorted(docs, d)
    at_doc = number << _CELL_BITS
    estimate = None
    for row in counter_cells(f.view(np.uint64), counters).view(np.int64):
        value = count[np.searchsorted(table, at_doc | row)]  # every pair is there
        estimate = value if estimate is None else np.minimum(estimate, value)
    # by document, then estimate, then the smaller unsigned value: a stable sort by (document,
    # estimate) in one int64 (an estimate counts documents: under 2^34) after one by value
    by_value = np.argsort(f.view(np.uint64))
    order = by_value[np.argsort(((number << 34) | estimate)[by_value], kind="stable")]
    d, f = d[order], f[order]
    keep = _rank(d) <= k[_rows_of(doc, d)]
    return f[keep], d[keep]


def _sorted_postings(
    posted_f: np.ndarray, posted_e: np.ndarray, left_out: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The postings sorted by fingerprint, then document, without those of the documents in
    ``left_out`` (sorted, or None for none)."""
    if left_out is not None and left_out.size:
        kept = ~within(posted_e, left_out)
        posted_f, posted_e = posted_f[kept], posted_e[kept]
    order = np.lexsort((posted_e, posted_f))
    return posted_f[order], posted_e[order]


def within(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each value is in ``sorted_set`` (one binary search each).

    >>> within(np.array([3, 4, 9]), np.array([1, 3, 9])).tolist()
    [True, False, True]
    >>> within(np.array([3]), np.array([], dtype=np.int64)).tolist()
    [False]
    """
    if not sorted_set.size:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[at] == values


def changed(
    d: np.ndarray, e: np.ndarray, before_d: np.ndarray, before_e: np.ndarray
) -> np.ndarray:
    """The documents (sorted) whose pairs ``(d, e)`` differ from their pairs ``(before_d,
    before_e)``: each side a set of distinct pairs, a document's all there or none.

    >>> changed(np.array([1, 1, 2, 5]), np.array([0, 3, 1, 4]),
    ...         np.array([1, 1, 2, 3]), np.array([3, 0, 0, 1])).tolist()  # 2: 1 not 0; 3 gone
    [2, 3, 5]
    """
    both_d, both_e = np.concatenate((d, before_d)), np.concatenate((e, before_e))
    order = np.lexsort((both_e, both_d))
    both_d, both_e = both_d[order], both_e[order]
    twice = (both_d[1:] == both_d[:-1]) & (both_e[1:] == both_e[:-1])
    paired = np.zeros(both_d.size, dtype=bool)
    paired[1:] |= twice
    paired[:-1] |= twice
    return np.unique(both_d[~paired])


def fresh(
    d: np.ndarray, e: np.ndarray, before_d: np.ndarray, before_e: np.ndarray,
    left_out: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(documents, d, e)``: the documents whose pairs ``(d, e)`` differ from the pass before's
    ``(before_d, before_e)``, once the candidates now ``left_out`` (sorted, or None) are taken
    out of those, and the pairs of just those documents (what a later pass estimates again).

    >>> [a.tolist() for a in fresh(np.array([1, 2]), np.array([0, 0]),
    ...                            np.array([1, 2, 2]), np.array([0, 0, 5]), np.array([5]))]
    [[], [], []]
    """
    if left_out is not None:
        stays = ~within(before_e, left_out)
        before_d, before_e = before_d[stays], before_e[stays]
    moved_on = changed(d, e, before_d, before_e)
    again = within(d, moved_on)
    return moved_on, d[again], e[again]


def meet(
    d: np.ndarray, f: np.ndarray, posted_f: np.ndarray, posted_e: np.ndarray, cap: int,
    left_out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(d, e, hits, over)`` for every document d of the memberships ``(d, f)`` and earlier
    document e of the postings ``(f, e)``: how many of d's fingerprints meet e's postings
    within the boilerplate cap (a fingerprint keeps its ``cap`` lowest documents, as the local
    index keeps the lowest cluster ids), and how many meet e as the first posting past it.
    The postings of the documents in ``left_out`` (sorted) are not there: leaders that joined
    a cluster, which the local index never holds (see :func:`contested`)."""
    pf, pe = _sorted_postings(posted_f, posted_e, left_out)
    rank = _rank(pf)
    kept = rank <= cap + 1
    pf, pe, rank = pf[kept], pe[kept], rank[kept]
    first = np.searchsorted(pf, f, side="left")
    many = np.searchsorted(pf, f, side="right") - first
    total = int(many.sum())
    row = np.repeat(np.arange(d.size), many)
    offsets = np.cumsum(many) - many
    at = np.repeat(first, many) + np.arange(total) - np.repeat(offsets, many)
    md, me, mrank = d[row], pe[at], rank[at]
    earlier = me < md
    md, me, mrank = md[earlier], me[earlier], mrank[earlier]
    return _summed(md, me, (mrank <= cap).astype(np.int64), (mrank == cap + 1).astype(np.int64))


def contested(
    posted_f: np.ndarray, posted_e: np.ndarray, cap: int, left_out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(long, top)``: the documents posted under a fingerprint of more than ``cap`` postings
    (before ``left_out`` is taken out), and whether each is one of the ``cap + 1`` lowest of a
    fingerprint that still has more than ``cap`` once it is (1) or not (0).

    The leaders to leave out are the joined ones among ``long``, and the search is settled
    once none is among ``top`` (:meth:`.candidates.Search.settled` says why).

    >>> f = np.array([7, 7, 7, 9], dtype=np.int64)
    >>> e = np.array([3, 1, 2, 1], dtype=np.int64)
    >>> [a.tolist() for a in contested(f, e, 2)]
    [[1, 2, 3], [1, 1, 1]]
    >>> [a.tolist() for a in contested(f, e, 1, np.array([2]))]  # 1 and 3 past the cap of 1
    [[1, 2, 3], [1, 0, 1]]
    >>> [a.tolist() for a in contested(f, e, 2, np.array([2]))]  # two left: none cut
    [[1, 2, 3], [0, 0, 0]]
    """
    pf, pe = _sorted_postings(posted_f, posted_e, None)
    starts = _starts(pf)
    many = np.repeat(_lengths(starts, pf.size) > cap, _lengths(starts, pf.size))
    long = np.unique(pe[many])
    pf, pe = _sorted_postings(pf[many], pe[many], left_out)
    starts = _starts(pf)
    cut = np.repeat(_lengths(starts, pf.size) > cap, _lengths(starts, pf.size))
    top = np.unique(pe[cut & (_rank(pf) <= cap + 1)])
    return long, within(long, top).astype(np.int64)


def _summed(
    d: np.ndarray, e: np.ndarray, *values: np.ndarray
) -> tuple[np.ndarray, ...]:
    """``(d, e, *sums)``: the values summed per pair."""
    order = np.lexsort((e, d))
    d, e = d[order], e[order]
    if d.size == 0:
        return (d, e, *(v[order] for v in values))
    starts = np.concatenate(([0], np.flatnonzero((d[1:] != d[:-1]) | (e[1:] != e[:-1])) + 1))
    return (d[starts], e[starts], *(np.add.reduceat(v[order], starts) for v in values))


def verdicts(
    d: np.ndarray, e: np.ndarray, hits: np.ndarray, over: np.ndarray,
    doc: np.ndarray, least: np.ndarray, den: np.ndarray, bound: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(d, e, hits, capped, keep)`` per pair, from the partial sums of :func:`meet`.

    ``capped`` is how many of d's fingerprints the cap cut (each may hide one more hit on any
    candidate); ``keep``: the pair is worth estimating, as
    :meth:`dedup.cluster.GreedyClusterer.decide` filters candidates: with a resemblance bound
    (``bound`` None), when it met ``least`` of e's indexed fingerprints, counting the capped
    ones; under the containment rule, when ``min(hits + capped, den) / den`` can reach
    ``bound``. ``least`` and ``den`` are -1 where a document has no such term (then every
    candidate it met is kept)."""
    d, e, hits, over = _summed(d, e, hits, over)
    starts = _starts(d)
    capped = np.repeat(np.add.reduceat(over, starts), _lengths(starts, d.size)) if d.size else over
    at = _rows_of(doc, d)
    met = hits + capped
    if bound is None:
        need = least[at]
        keep = (need < 0) | (met >= need)
    else:
        whole = den[at]
        proven = whole > 0
        upper = np.minimum(met, whole) / np.where(proven, whole, 1)
        keep = ~proven | ~(upper < bound)
    return d, e, hits, capped, (hits > 0) & keep


def tally(d: np.ndarray, hits: np.ndarray, capped: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The search's counters over :func:`verdicts`' rows (sorted by document, each document's
    rows all here): pairs to estimate (``comparisons``), pairs the bound pruned, fingerprints
    the cap cut, the documents that lost any (``capped`` is per document, on each row), and
    the documents with a pair to estimate (the most that can wait for a greedy round)."""
    per_document = capped[_starts(d)]
    return np.array([keep.sum(), ((hits > 0) & ~keep).sum(), per_document.sum(),
                     (per_document > 0).sum(), _starts(d[keep]).size], dtype=np.int64)
