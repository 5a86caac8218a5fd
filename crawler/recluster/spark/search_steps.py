"""The candidate search's steps, as each runs in an executor (:class:`.candidates.Search` plans
them): what reaches a partition is packed arrays of one :class:`Kind` each, bound for a bucket
(:data:`MOVED`); a step unpacks what it needs, does its part of the work with numpy
(:mod:`.postings`), and sends on packed arrays to the buckets of the next step, or rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from enum import IntEnum, auto
from typing import Any

import numpy as np

# not `from crawler.recluster.spark import postings` (see the same import in .candidates)
import crawler.recluster.spark.postings as postings  # noqa: PLR0402
from crawler.recluster.rounds import preference
from crawler.recluster.spark.steps import column_names, record_batch
from dedup.estimators import estimate
from dedup.sketches import sketch_from_bytes

__all__ = [
    "MOVED", "PACKED", "PREFERENCES", "Kind", "as_rows", "count", "estimated", "hits",
    "index", "index_counted", "meet", "moved_batch", "packed_keys", "prefer", "received",
    "running", "serve", "spread", "verdicts",
]

#: what Spark moves between the steps: packed int64 columns (:func:`.postings.pack`) or
#: sketches (:func:`.postings.pack_bytes`) bound for a bucket, of a :class:`Kind`
MOVED = "bucket int, kind byte, data binary"
#: a document's qualifying candidates, ``pos`` 0 first: (document, place in its preference
#: order, candidate, decision kind if it joins that candidate, estimated resemblance)
PREFERENCES = "d long, pos int, e long, kind string, r double"


class Kind(IntEnum):
    """What a moved blob holds: the ``kind`` column of :data:`MOVED`, the one list of them."""

    HELD = auto()  #: (d, f) of every leader, to its fingerprint (to be counted)
    DOCUMENT = auto()  #: (d, size, k, least, den) of every leader, to its own bucket
    COUNTED = auto()  #: (d, f, count) of shared fingerprints, to their document
    MEMBER = auto()  #: (d, f) of shared fingerprints, to their fingerprint
    POSTED = auto()  #: (f, e) postings, to their fingerprint
    MET = auto()  #: (d, e, hits, over) partial sums of a pair, to d
    SKETCH = auto()  #: leaders' sketches, to their key's bucket
    KEPT = auto()  #: (d, e) pairs to estimate, where they were judged
    TALLY = auto()  #: a partition's counters (:func:`.postings.tally`)
    WANTED = auto()  #: (key, home) sketches a partition's pairs need
    SERVED = auto()  #: sketches served to that home
    LONG = auto()  #: (key, top) of leaders under a fingerprint the cap cuts (.postings.contested)
    OWN = auto()  #: with ``exact_cap``: (d, f) of every leader, to its document
    HIT = auto()  #: with ``exact_cap``: (cell, key) count-min counters hit, to the counter
    RUNNING = auto()  #: with ``exact_cap``: (key, cell, count) their values, to the document
    BEFORE = auto()  #: a later pass: the pairs the pass before kept, back where they were kept
    FRESH = auto()  #: a later pass: the pairs to estimate again (documents whose pairs changed)
    CHANGED = auto()  #: a later pass: those documents


def moved_batch(kind: int, sent: Iterable[tuple[int, list[bytes]]]) -> Any:
    """One Arrow batch of :data:`MOVED` rows of one ``kind``: each ``(route, blobs)`` of
    ``sent``, its blobs bound for that route."""
    bucket, data = [], []
    for route, blobs in sent:
        bucket += [route] * len(blobs)
        data += blobs
    return record_batch(MOVED, (bucket, [int(kind)] * len(bucket), data))


def _bucketed(by: np.ndarray, buckets: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(route, rows)`` of each bucket of ``by`` that holds any rows, in bucket order;
    ``buckets`` holds each bucket's route (:func:`.routes.routes`)."""
    where = postings.bucket_of(by, buckets.size)
    order = np.argsort(where, kind="stable")
    starts = np.searchsorted(where[order], np.arange(buckets.size + 1))
    for route, lo, hi in zip(buckets.tolist(), starts[:-1], starts[1:]):
        if hi > lo:
            yield route, order[lo:hi]


def _routed(
    kind: int, by: np.ndarray, columns: tuple[np.ndarray, ...], buckets: np.ndarray
) -> Any:
    """One Arrow batch: the rows of ``columns`` cut by the bucket of ``by``, packed, each blob
    under its bucket's route."""
    return moved_batch(kind, ((route, postings.pack(*(c[rows] for c in columns)))
                              for route, rows in _bucketed(by, buckets)))


def received(batches: Iterable[Any]) -> tuple[dict[int, list[bytes]], int]:
    """The blobs that reached this partition, by kind, and its *home*: the least route among
    them, which Spark sends to this same partition again when it repartitions the same way."""
    got: dict[int, list[bytes]] = {}
    home = None
    for batch in batches:
        if batch.num_rows:
            least = min(batch.column("bucket").to_pylist())
            home = least if home is None else min(home, least)
        for kind, data in zip(batch.column("kind").to_pylist(), batch.column("data").to_pylist()):
            got.setdefault(kind, []).append(data)
    return got, 0 if home is None else home


def _fingerprints(batch: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of documents' keys, how many distinct fingerprints each holds, and all of them
    in a row."""
    arrays = [np.frombuffer(b, dtype=np.int64) for b in batch.column("fps").to_pylist()]
    size = np.array([a.size for a in arrays], dtype=np.int64)
    return (batch.column("key").to_numpy(), size,
            np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64))


def spread(buckets: np.ndarray, own: bool = False) -> Callable[[Iterable[Any]], Iterator]:
    """Each leader sent where the steps after need it: its fingerprints to theirs
    (:attr:`Kind.HELD`, to be counted), its sizes (:attr:`Kind.DOCUMENT`) and its sketch
    (:attr:`Kind.SKETCH`) to its own bucket. ``own``: also its fingerprints to its own document
    (:attr:`Kind.OWN`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        keys, sizes, ks, leasts, dens, held, sketches = [], [], [], [], [], [], []
        for batch in batches:
            key, size, values = _fingerprints(batch)
            keys.append(key)
            sizes.append(size)
            ks.append(batch.column("k").to_numpy(zero_copy_only=False).astype(np.int64))
            leasts.append(batch.column("least").fill_null(-1).to_numpy().astype(np.int64))
            dens.append(batch.column("den").fill_null(-1).to_numpy().astype(np.int64))
            held.append((np.repeat(key, size), values))
            sketches += batch.column("sketch").to_pylist()
        if not keys:
            return
        d = np.concatenate([h[0] for h in held])
        f = np.concatenate([h[1] for h in held])
        key = np.concatenate(keys)
        yield _routed(Kind.HELD, f, (d, f), buckets)
        if own:
            yield _routed(Kind.OWN, d, (d, f), buckets)
        yield _routed(Kind.DOCUMENT, key, (key, np.concatenate(sizes), np.concatenate(ks),
                                       np.concatenate(leasts), np.concatenate(dens)), buckets)
        yield moved_batch(Kind.SKETCH, (
            (route, postings.pack_bytes(key[rows], [sketches[i] for i in rows]))
            for route, rows in _bucketed(key, buckets)))

    return run


def count(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    """At a fingerprint: how many leaders hold it, to each holder's document (:attr:`Kind.COUNTED`,
    to pick its rarest part), and the holders themselves back to the fingerprint
    (:attr:`Kind.MEMBER`, to meet its postings); a fingerprint of one leader meets no other."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        d, f = postings.unpack(received(batches)[0].get(Kind.HELD, []), 2)
        d, f, counts = postings.shared(d, f)
        yield _routed(Kind.COUNTED, d, (d, f, counts), buckets)
        yield _routed(Kind.MEMBER, f, (d, f), buckets)

    return run


def index(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    """At a document: its indexed part, its rarest shared fingerprints by the corpus's counts,
    posted to each fingerprint (:attr:`Kind.POSTED`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = received(batches)
        doc, size, k, _, _ = postings.unpack(got.get(Kind.DOCUMENT, []), 5)
        d, f, counts = postings.unpack(got.get(Kind.COUNTED, []), 3)
        f, e = postings.indexed(d, f, counts, doc, size, k)
        yield _routed(Kind.POSTED, f, (f, e), buckets)

    return run


def hits(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    """With ``exact_cap``: each document's count-min counters, to each (:attr:`Kind.HIT`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        read = [_fingerprints(batch) for batch in batches]
        if not read:
            return
        key, size, f = (np.concatenate(column) for column in zip(*read))
        cell, key = postings.document_cells(key, size, f)
        yield _routed(Kind.HIT, cell, (cell, key), buckets)

    return run


def running(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    """At a counter: its value as each document that hits it is added in input order, back to
    that document (:attr:`Kind.RUNNING`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        cell, key = postings.unpack(received(batches)[0].get(Kind.HIT, []), 2)
        key, cell, counts = postings.running_counts(cell, key)
        yield _routed(Kind.RUNNING, key, (key, cell, counts), buckets)

    return run


def index_counted(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    """With ``exact_cap``, at a document: its indexed part ranked by the running count-min
    estimates at its place in the input, as the local clusterer ranks it, posted to each
    fingerprint (:attr:`Kind.POSTED`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = received(batches)
        doc, _, k, _, _ = postings.unpack(got.get(Kind.DOCUMENT, []), 5)
        d, f = postings.unpack(got.get(Kind.OWN, []), 2)
        f, e = postings.rarest_counted(d, f, doc, k, *postings.unpack(got.get(Kind.RUNNING, []), 3))
        yield _routed(Kind.POSTED, f, (f, e), buckets)

    return run


def meet(
    buckets: np.ndarray, cap: int, left_out: Any, exact_cap: bool
) -> Callable[[Iterable[Any]], Iterator]:
    """``left_out``: None, or a broadcast sorted array of the leaders whose postings are left
    out; ``exact_cap``: also what :meth:`.candidates.Search.settled` reads."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = received(batches)
        d, f = postings.unpack(got.get(Kind.MEMBER, []), 2)
        pf, pe = postings.unpack(got.get(Kind.POSTED, []), 2)
        out = None if left_out is None else left_out.value
        d, e, hits, over = postings.meet(d, f, pf, pe, cap, out)
        yield _routed(Kind.MET, d, (d, e, hits, over), buckets)
        if exact_cap:
            long, top = postings.contested(pf, pe, cap, out)
            yield _routed(Kind.LONG, long, (long, top), buckets)

    return run


def verdicts(
    bound: float | None, buckets: np.ndarray, left_out: Any = None, again: bool = False
) -> Callable[[Iterable[Any]], Iterator]:
    """The pairs kept stay at this partition's home, with its counters; the sketches the
    pairs to estimate need are asked for from their keys' buckets, once each. ``again``: a
    pass after the first, whose pairs to estimate are those of the documents whose pairs
    differ from the pass before's (:attr:`Kind.BEFORE`, but for the leaders ``left_out`` now)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, home = received(batches)
        doc, _, _, least, den = postings.unpack(got.get(Kind.DOCUMENT, []), 5)
        d, e, hits, over = postings.unpack(got.get(Kind.MET, []), 4)
        d, e, hits, capped, keep = postings.verdicts(d, e, hits, over, doc, least, den, bound)
        kd, ke = d[keep], e[keep]
        counters = postings.tally(d, hits, capped, keep)
        estimated = counters[-1]  # in a first pass, every document with a pair
        if again:
            bd, be = postings.unpack(got.get(Kind.BEFORE, []), 2)
            out = None if left_out is None else left_out.value
            moved_on, kd, ke = postings.fresh(kd, ke, bd, be, out)
            estimated = moved_on.size
            yield moved_batch(Kind.FRESH, [(home, postings.pack(kd, ke))])
            yield moved_batch(Kind.CHANGED, [(home, postings.pack(moved_on))])
        yield moved_batch(Kind.TALLY, [(home, [np.append(counters, estimated).tobytes()])])
        yield moved_batch(Kind.KEPT, [(home, postings.pack(d[keep], e[keep]))])
        needed = np.unique(np.concatenate((kd, ke)))
        yield _routed(Kind.WANTED, needed, (needed, np.full(needed.size, home)), buckets)
        # kept with the verdicts, for Search.settled
        yield moved_batch(Kind.LONG, [(home, got.get(Kind.LONG, []))])

    return run


def as_rows(schema: str) -> Callable[[Iterable[Any]], Iterator]:
    """A step that turns packed arrays into rows of the DDL ``schema``, a column each: the
    (key, top) of :attr:`Kind.LONG`, to join with the decisions; the documents of
    :attr:`Kind.CHANGED`, to leave their preferences out."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        blobs = [b for batch in batches for b in batch.column("data").to_pylist()]
        yield record_batch(schema, postings.unpack(blobs, len(column_names(schema))))

    return run


#: packed arrays as rows of their own, to collect a few blobs rather than a row each
PACKED = "data binary"


def packed_keys(batches: Iterable[Any]) -> Iterator[Any]:
    """(key, top) rows packed again (:data:`PACKED`)."""
    read = [(batch.column("key").to_numpy(), batch.column("top").to_numpy()) for batch in batches]
    if read:
        yield record_batch(PACKED, [postings.pack(*map(np.concatenate, zip(*read)))])


def serve(batches: Iterable[Any]) -> Iterator[Any]:
    """Each sketch asked for, to the home of every partition that asked (a few blobs per
    home)."""
    got, _ = received(batches)
    keys, values = postings.unpack_bytes(got.get(Kind.SKETCH, []))
    sketches = dict(zip(keys.tolist(), values))
    key, home = postings.unpack(got.get(Kind.WANTED, []), 2)
    order = np.argsort(home, kind="stable")
    key, home = key[order], home[order]
    homes, starts = np.unique(home, return_index=True)
    yield moved_batch(Kind.SERVED, (
        (to, postings.pack_bytes(key[lo:hi], [sketches[k] for k in key[lo:hi].tolist()]))
        for to, lo, hi in zip(homes.tolist(), starts, [*starts[1:], home.size])))


def prefer(
    threshold: float, containment: float | None, pairs: int
) -> Callable[[Iterable[Any]], Iterator]:
    """A partition's pairs (of the kind ``pairs``: :attr:`Kind.KEPT` in a first pass,
    :attr:`Kind.FRESH` after) estimated, each document's candidates in its preference order."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = received(batches)
        keys, values = postings.unpack_bytes(got.get(Kind.SERVED, []))
        d, e = postings.unpack(got.get(pairs, []), 2)
        for rows in estimated(d, e, dict(zip(keys.tolist(), values)), threshold, containment):
            yield record_batch(PREFERENCES, rows.values())

    return run


def estimated(
    d: np.ndarray, e: np.ndarray, raw: dict[int, bytes], threshold: float,
    containment: float | None,
) -> Iterator[dict[str, list[Any]]]:
    """The pairs ``(d, e)`` estimated from the sketches ``raw`` (by key, parsed when first
    needed), each document's qualifying candidates in its preference order: columns of
    :data:`PREFERENCES`, a few thousand rows at a time (at least one, maybe empty)."""
    parsed: dict[int, Any] = {}

    def sketch(key: int) -> Any:
        found = parsed.get(key)
        if found is None:
            found = parsed[key] = sketch_from_bytes(raw.pop(key))
        return found

    order = np.lexsort((e, d))
    d, e = d[order].tolist(), e[order].tolist()
    out: dict[str, list[Any]] = {"d": [], "pos": [], "e": [], "kind": [], "r": []}
    lo = 0
    while lo < len(d):
        current, hi = d[lo], lo
        estimates = []
        while hi < len(d) and d[hi] == current:
            est = estimate(sketch(current), sketch(e[hi]))
            estimates.append((e[hi], est.resemblance, est.containment_a_in_b))
            hi += 1
        for pos, (cand, kind, r) in enumerate(preference(estimates, threshold, containment)):
            for name, value in zip(out, (current, pos, cand, kind, r)):
                out[name].append(value)
        if len(out["d"]) >= 4096:
            yield out
            out = {name: [] for name in out}
        lo = hi
    yield out
