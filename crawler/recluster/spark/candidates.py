"""Exact duplicates, candidate pairs and their estimates: which earlier documents each document
could join, in the order greedy clustering prefers them.

1. **Exact duplicates** by content hash: the first document of each hash (its *leader*) is
   clustered; every later copy joins its leader's cluster, as the local index's exact table
   makes it.
2. **Candidates.** Each leader indexes the rarest part of its sketch that
   :func:`dedup.cluster.indexed_count` proves sufficient (rarest by the corpus's own
   fingerprint counts, ties by the smaller value, as :class:`dedup.frequency.FingerprintFrequency`
   breaks them; with ``exact_cap``, by that count-min sketch's own estimates at the leader's
   place in the input, as the local clusterer picks it), joined on fingerprint with every
   leader's whole sketch. A fingerprint's postings are cut at the boilerplate cap (the
   ``cap`` lowest keys, as the local index keeps the lowest cluster ids; where the cap
   bites, a leader that joined a cluster can take a place the local index gives to a
   representative, which ``exact_cap`` corrects with more passes, :meth:`Search.settled`); a
   pair is estimated only when it meets :func:`dedup.cluster.hits_needed` indexed fingerprints
   (under the containment rule, when the resemblance bound allows it), in the local engine's
   arithmetic. This fingerprint-level work, a hundred values per document, is numpy's in
   executors (:mod:`.postings`); Spark moves the arrays between its steps.
3. **Estimates and preferences**, in executors: the pairs worth estimating stay in the
   partition that judged them, and each sketch they need is served there once (a template page
   that is a candidate of thousands of pages crosses the network once per partition, not once
   per pair); :func:`dedup.estimators.estimate` on each pair's sketches, then
   :func:`crawler.recluster.rounds.preference` orders a document's qualifying candidates as the
   sequential clusterer would try them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from crawler.recluster.rounds import preference
from crawler.recluster.spark.postings import (
    bucket_of,
    changed,
    contested,
    document_cells,
    indexed,
    meet,
    pack,
    pack_bytes,
    rarest_counted,
    running_counts,
    shared,
    tally,
    unpack,
    unpack_bytes,
    verdicts,
    within,
)
from crawler.recluster.spark.routes import routes
from crawler.recluster.spark.sketch import SparkJob
from crawler.recluster.spark.steps import python_step
from dedup.estimators import estimate
from dedup.sketches import sketch_from_bytes

__all__ = ["PREFERENCES", "Search", "split_copies"]

#: a document's qualifying candidates, ``pos`` 0 first: (document, place in its preference
#: order, candidate, decision kind if it joins that candidate, estimated resemblance)
PREFERENCES = "d long, pos int, e long, kind string, r double"


def split_copies(documents: Any) -> tuple[Any, Any]:
    """The leaders (every sketched document that is the first of its content hash) and the
    copies ``(key, leader, self_r)`` of the rest."""
    from pyspark.sql import functions as F

    sketched = documents.where("sketch IS NOT NULL")
    firsts = (
        sketched.groupBy("hash")
        .agg(F.min("key").alias("leader"), F.count("*").alias("n"))
        .where("n > 1")
    )
    copies = (
        sketched.select("key", "hash", "self_r")
        .join(firsts, "hash")
        .where("key != leader")
        .select("key", "leader", "self_r")
    )
    leaders = sketched.join(copies.select("key"), "key", "left_anti")
    return leaders, copies


class Search:
    """The candidate search of one run, from the leaders to their :data:`PREFERENCES`.

    Six shuffles, each bringing together what one step of :mod:`.postings` needs: the rows of
    a fingerprint (to count it; to meet its postings), of a document (to pick its rarest part;
    to sum its pairs), of a sketch (to serve it to the partitions whose pairs need it), of a
    partition's pairs (to estimate them). What Spark moves is a few packed arrays per bucket of
    fingerprints, documents or sketches, not a row per fingerprint or per pair.

    ``preferences`` is the DataFrame of the result; :meth:`stats` runs the search up to the
    verdicts (cached, for the preferences) and sets ``waiting``, the documents with a pair to
    estimate; :meth:`release` unpersists what the search cached, once the preferences are
    checkpointed.
    """

    #: documents with a pair to estimate, once :meth:`stats` has run: the most that can wait
    #: for a greedy round (a pair may estimate below the threshold)
    waiting: int | None = None
    #: documents whose pairs this pass estimates: in a pass after the first, those whose
    #: pairs differ from the pass before's (:meth:`settled`), once :meth:`stats` has run
    changed: int | None = None

    def __init__(self, leaders: Any, job: SparkJob, sketched: Any) -> None:
        """``sketched``: every document with a sketch, leaders and copies; with
        ``job.exact_cap`` each leader's indexed part is then ranked by the local clusterer's
        running count-min estimates over them (:func:`.postings.rarest_counted`) rather than
        by the corpus's counts, for the local engine's very postings."""
        partitions = job.partitions
        buckets = routes(partitions * _BUCKETS_PER_PARTITION, partitions)
        bound = None
        if job.need <= 0:
            containment = job.dedup.containment
            bound = job.dedup.threshold if containment is None else min(job.dedup.threshold, containment)

        of = of_kind

        def moved(*frames: Any) -> Any:
            union = frames[0]
            for frame in frames[1:]:
                union = union.unionByName(frame)
            return union.repartition(partitions, "bucket")

        as_local = job.exact_cap and job.need > 0  # else every fingerprint is indexed
        spread = python_step(leaders.select("key", "fps", "k", "least", "den", "sketch"),
                             _spread(buckets, own=as_local), _MOVED).persist()
        counted = python_step(moved(of(spread, _HELD)), _count(buckets), _MOVED).persist()
        self._cached = [spread, counted]
        if as_local:
            # the count-min counters as the local clusterer fills them, in input order: a
            # shuffle by counter, then each count back to its document
            hits = python_step(sketched.select("key", "fps"), _hits(buckets), _MOVED)
            running = python_step(moved(hits), _running(buckets), _MOVED)
            posted = python_step(  # cached: every search reads it
                moved(of(spread, _DOCUMENT), of(spread, _OWN), running), _index_counted(buckets),
                _MOVED).persist()
            self._cached.append(posted)
        else:
            posted = python_step(moved(of(spread, _DOCUMENT), of(counted, _COUNTED)),
                                 _index(buckets), _MOVED)

        def search(left_out: Any, before: Any = None) -> tuple[Any, Any]:
            """One pass from the postings to the preferences: its verdicts and preferences.
            ``before``: the verdicts of the pass before, whose pairs this one's are compared
            with; then only the documents whose pairs changed are estimated again."""
            met = python_step(moved(of(counted, _MEMBER), posted),
                              _meet(buckets, job.dedup.cap, left_out, job.exact_cap), _MOVED)
            judging = [of(spread, _DOCUMENT), met]
            if before is not None:  # the pairs kept before, to the partition that kept them
                judging.append(of(before, _KEPT).selectExpr("bucket", f"CAST({_BEFORE} AS BYTE)"
                                                            " AS kind", "data"))
            again = before is not None
            judged = python_step(moved(*judging), _verdicts(bound, buckets, left_out, again),
                                 _MOVED).persist()
            pairs = _FRESH if again else _KEPT
            served = python_step(moved(of(judged, _WANTED), of(spread, _SKETCH)), _serve, _MOVED)
            return judged, python_step(moved(of(judged, pairs), served),
                                       _prefer(job.dedup.threshold, job.dedup.containment, pairs),
                                       PREFERENCES)

        self._search = search
        self._context = leaders.sparkSession.sparkContext
        self._left_out = np.empty(0, dtype=np.int64)
        self._broadcasts: list[Any] = []
        self._spent: list[Any] = []
        self._judged, self.preferences = search(None)
        #: passes of the search so far (see :meth:`settled`)
        self.passes = 1

    def settled(self, decisions: Any, prefs: Any) -> bool:
        """Whether the greedy rounds' ``decisions`` (:data:`.greedy.DECISIONS`), made from the
        preferences ``prefs``, are final; if not, the next pass is planned (its
        :attr:`preferences`, for :meth:`stats` and the rounds).

        The local index posts representatives only, and its boilerplate cap keeps each
        fingerprint's ``cap`` lowest of them; this search posts every leader. The decisions
        are final when no leader that joined a cluster sits among the ``cap + 1`` lowest
        postings of a fingerprint the cap cuts, and every leader left out still joined one
        (:func:`.postings.contested`): the search then found what the local index finds.
        Otherwise the joined leaders are left out of the postings and the search runs again.
        Whether a document's candidates are right depends only on the documents before it, so
        each pass settles a longer stretch of the input (the first document it got wrong is
        right in the next, so the passes end). No pass is needed when the first cut nothing
        (:meth:`stats`' ``capped`` 0).

        A pass after the first compares each document's pairs with the pass before's and
        estimates only the pairs of the documents whose pairs changed (:attr:`changed`); the
        others keep their preferences: a candidate newly left out joined a cluster, so the
        rounds passed over it anyway. On 20,000 real pages at the default cap, of the 17,234
        documents with a pair to estimate, the second pass estimated again the pairs of 1,165,
        the third of 1 (at a cap of 4: 3,554 and 529 of 18,004)."""
        joined = decisions.where("kind != 'kept'").select("key")
        long = python_step(of_kind(self._judged, _LONG), _rows("key", "top"),
                           "key long, top long")
        rows = python_step(long.join(joined, "key"), _packed_keys, "data binary").collect()
        key, top = unpack([r.data for r in rows], 2)
        left_out = np.unique(key)
        back = np.setdiff1d(self._left_out, left_out, assume_unique=True)
        newly_cut = np.setdiff1d(key[top == 1], self._left_out)
        if not back.size and not newly_cut.size:
            return True
        self._left_out = left_out
        self._broadcasts.append(self._context.broadcast(left_out))
        before = self._judged
        self._spent.append(before)  # read by this pass's verdicts, then released (stats)
        self._judged, fresh = self._search(self._broadcasts[-1], before)
        changed = python_step(of_kind(self._judged, _CHANGED), _rows("d"), "d long")
        self.preferences = prefs.join(changed, "d", "left_anti").unionByName(fresh)
        self.passes += 1
        return False

    def stats(self) -> dict[str, int]:
        """The counters of the search, as the local clusterer keeps them: pairs estimated
        (``comparisons``) and skipped by the bound (``pruned``), fingerprints the cap cut
        (``capped``) and the documents they belong to."""
        total = np.zeros(len(_TALLIED) + 2, dtype=np.int64)
        for row in of_kind(self._judged, _TALLY).select("data").collect():
            total += np.frombuffer(row.data, dtype=np.int64)
        self.waiting, self.changed = int(total[-2]), int(total[-1])
        for spent in self._spent:  # the verdicts before, compared and no longer read
            spent.unpersist()
        self._spent.clear()
        return dict(zip(_TALLIED, map(int, total)))

    def release(self) -> None:
        """Unpersist the steps cached on the way, and the sets of leaders left out that were
        broadcast; call once the preferences are checkpointed."""
        for held in (*self._cached, *self._spent, self._judged, *self._broadcasts):
            held.unpersist()


def of_kind(frame: Any, kind: int) -> Any:
    """The rows of moved arrays of one kind."""
    return frame.where(f"kind = {kind}")  # SQL text: one round trip to the JVM


#: what Spark moves between the steps: packed int64 columns (:func:`.postings.pack`) or
#: sketches (:func:`.postings.pack_bytes`) bound for a bucket
_MOVED = "bucket int, kind byte, data binary"
#: buckets per partition: a bucket travels to its partition under its route (:mod:`.routes`);
#: many small buckets let a skewed fingerprint or document weigh little
_BUCKETS_PER_PARTITION = 16
#: the kinds of moved arrays: (d, f) of every leader; (d, size, k, least, den) of every
#: leader; (d, f, count) of shared fingerprints, to their document; (d, f) of shared
#: fingerprints, to their fingerprint; (f, e) postings; (d, e, hits, over) partial sums;
#: leaders' sketches, to their key's bucket; (d, e) pairs to estimate; a partition's
#: counters; (key, home) sketches a partition's pairs need; sketches served to that home;
#: (key, top) of the leaders posted under a fingerprint the cap cuts (:func:`.postings.contested`)
(_HELD, _DOCUMENT, _COUNTED, _MEMBER, _POSTED, _MET, _SKETCH, _KEPT, _TALLY, _WANTED,
 _SERVED, _LONG) = range(12)
#: in a pass after the first: the pairs the pass before kept, back to the partition that kept
#: them; the pairs to estimate again (of the documents whose pairs changed); those documents
_BEFORE, _FRESH, _CHANGED = range(15, 18)
#: with ``exact_cap``: (d, f) of every leader, to its document; (cell, key) count-min counters
#: a document hits, to their counter; (key, cell, count) their values there, to the document
_OWN, _HIT, _RUNNING = range(12, 15)
#: the counters of :func:`.postings.tally`, in its order, but for its last (``Search.waiting``)
#: and the count the verdicts add after it (``Search.changed``)
_TALLIED = ("comparisons", "pruned", "capped", "capped_documents")


def _arrow_moved(bucket: list[int], kind: list[int], data: list[bytes]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [pa.array(bucket, pa.int32()), pa.array(kind, pa.int8()), pa.array(data, pa.binary())],
        names=["bucket", "kind", "data"])


def _cut(by: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts rows by the bucket of ``by``, and where each bucket starts in it;
    ``buckets`` holds each bucket's route (:func:`.routes.routes`)."""
    where = bucket_of(by, buckets.size)
    order = np.argsort(where, kind="stable")
    return order, np.searchsorted(where[order], np.arange(buckets.size + 1))


def _routed(
    kind: int, by: np.ndarray, columns: tuple[np.ndarray, ...], buckets: np.ndarray
) -> Any:
    """One Arrow batch: the rows of ``columns`` cut by the bucket of ``by``, packed, each blob
    under its bucket's route."""
    order, starts = _cut(by, buckets)
    bucket, data = [], []
    for b, route in enumerate(buckets.tolist()):
        lo, hi = starts[b], starts[b + 1]
        if hi > lo:
            blobs = pack(*(c[order[lo:hi]] for c in columns))
            bucket += [route] * len(blobs)
            data += blobs
    return _arrow_moved(bucket, [kind] * len(bucket), data)


def _received(batches: Iterable[Any]) -> tuple[dict[int, list[bytes]], int]:
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


def _spread(buckets: np.ndarray, own: bool = False) -> Callable[[Iterable[Any]], Iterator]:
    """``own``: also each leader's fingerprints to its own document (:data:`_OWN`)."""

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
        yield _routed(_HELD, f, (d, f), buckets)
        if own:
            yield _routed(_OWN, d, (d, f), buckets)
        yield _routed(_DOCUMENT, key, (key, np.concatenate(sizes), np.concatenate(ks),
                                       np.concatenate(leasts), np.concatenate(dens)), buckets)
        order, starts = _cut(key, buckets)
        bucket, data = [], []
        for b, route in enumerate(buckets.tolist()):
            rows = order[starts[b] : starts[b + 1]]
            if rows.size:
                blobs = pack_bytes(key[rows], [sketches[i] for i in rows])
                bucket += [route] * len(blobs)
                data += blobs
        yield _arrow_moved(bucket, [_SKETCH] * len(bucket), data)

    return run


def _count(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        d, f = unpack(_received(batches)[0].get(_HELD, []), 2)
        d, f, count = shared(d, f)
        yield _routed(_COUNTED, d, (d, f, count), buckets)
        yield _routed(_MEMBER, f, (d, f), buckets)

    return run


def _index(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = _received(batches)
        doc, size, k, _, _ = unpack(got.get(_DOCUMENT, []), 5)
        d, f, count = unpack(got.get(_COUNTED, []), 3)
        f, e = indexed(d, f, count, doc, size, k)
        yield _routed(_POSTED, f, (f, e), buckets)

    return run


def _hits(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        read = [_fingerprints(batch) for batch in batches]
        if not read:
            return
        key, size, f = (np.concatenate(column) for column in zip(*read))
        cell, key = document_cells(key, size, f)
        yield _routed(_HIT, cell, (cell, key), buckets)

    return run


def _running(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        cell, key = unpack(_received(batches)[0].get(_HIT, []), 2)
        key, cell, count = running_counts(cell, key)
        yield _routed(_RUNNING, key, (key, cell, count), buckets)

    return run


def _index_counted(buckets: np.ndarray) -> Callable[[Iterable[Any]], Iterator]:
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = _received(batches)
        doc, _, k, _, _ = unpack(got.get(_DOCUMENT, []), 5)
        d, f = unpack(got.get(_OWN, []), 2)
        f, e = rarest_counted(d, f, doc, k, *unpack(got.get(_RUNNING, []), 3))
        yield _routed(_POSTED, f, (f, e), buckets)

    return run


def _meet(
    buckets: np.ndarray, cap: int, left_out: Any, exact_cap: bool
) -> Callable[[Iterable[Any]], Iterator]:
    """``left_out``: None, or a broadcast sorted array of the leaders whose postings are left
    out; ``exact_cap``: also what :meth:`Search.settled` reads."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, _ = _received(batches)
        d, f = unpack(got.get(_MEMBER, []), 2)
        pf, pe = unpack(got.get(_POSTED, []), 2)
        out = None if left_out is None else left_out.value
        d, e, hits, over = meet(d, f, pf, pe, cap, out)
        yield _routed(_MET, d, (d, e, hits, over), buckets)
        if exact_cap:
            long, top = contested(pf, pe, cap, out)
            yield _routed(_LONG, long, (long, top), buckets)

    return run


def _verdicts(
    bound: float | None, buckets: np.ndarray, left_out: Any = None, again: bool = False
) -> Callable[[Iterable[Any]], Iterator]:
    """The pairs kept stay at this partition's home, with its counters; the sketches the
    pairs to estimate need are asked for from their keys' buckets, once each. ``again``: a
    pass after the first, whose pairs to estimate are those of the documents whose pairs
    differ from the pass before's (:data:`_BEFORE`, but for the leaders ``left_out`` now)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        got, home = _received(batches)
        doc, _, _, least, den = unpack(got.get(_DOCUMENT, []), 5)
        d, e, hits, over = unpack(got.get(_MET, []), 4)
        d, e, hits, capped, keep = verdicts(d, e, hits, over, doc, least, den, bound)
        kd, ke = d[keep], e[keep]
        counters = tally(d, hits, capped, keep)
        estimated = counters[-1]  # in a first pass, every document with a pair
        if again:
            bd, be = unpack(got.get(_BEFORE, []), 2)
            if left_out is not None:
                stays = ~within(be, left_out.value)
                bd, be = bd[stays], be[stays]
            moved_on = changed(kd, ke, bd, be)
            estimated = moved_on.size
            fresh = within(kd, moved_on)
            kd, ke = kd[fresh], ke[fresh]
            yield _arrow_moved(*_at(home, _FRESH, pack(kd, ke)))
            yield _arrow_moved(*_at(home, _CHANGED, pack(moved_on)))
        yield _arrow_moved(*_at(home, _TALLY, [np.append(counters, estimated).tobytes()]))
        yield _arrow_moved(*_at(home, _KEPT, pack(d[keep], e[keep])))
        needed = np.unique(np.concatenate((kd, ke)))
        yield _routed(_WANTED, needed, (needed, np.full(needed.size, home)), buckets)
        long = got.get(_LONG, [])  # kept with the verdicts, for Search.settled
        yield _arrow_moved([home] * len(long), [_LONG] * len(long), long)

    return run


def _at(home: int, kind: int, blobs: list[bytes]) -> tuple[list[int], list[int], list[bytes]]:
    """The columns of :func:`_arrow_moved` for ``blobs`` of one kind, all bound for ``home``."""
    return [home] * len(blobs), [kind] * len(blobs), blobs


def _rows(*names: str) -> Callable[[Iterable[Any]], Iterator]:
    """A step that turns packed arrays of ``len(names)`` columns into rows of those names: the
    (key, top) of :data:`_LONG`, to join with the decisions; the documents of :data:`_CHANGED`,
    to leave their preferences out."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        blobs = [b for batch in batches for b in batch.column("data").to_pylist()]
        columns = unpack(blobs, len(names))
        yield pa.RecordBatch.from_arrays([pa.array(c) for c in columns], names=list(names))

    return run


def _packed_keys(batches: Iterable[Any]) -> Iterator[Any]:
    """(key, top) rows packed again, to collect a few blobs rather than a row each."""
    import pyarrow as pa

    keys, tops = [], []
    for batch in batches:
        keys.append(batch.column("key").to_numpy())
        tops.append(batch.column("top").to_numpy())
    if keys:
        yield pa.RecordBatch.from_arrays(
            [pa.array(pack(np.concatenate(keys), np.concatenate(tops)), pa.binary())],
            names=["data"])


def _serve(batches: Iterable[Any]) -> Iterator[Any]:
    """Each sketch asked for, to the home of every partition that asked (a few blobs per
    home)."""
    got, _ = _received(batches)
    keys, values = unpack_bytes(got.get(_SKETCH, []))
    sketches = dict(zip(keys.tolist(), values))
    key, home = unpack(got.get(_WANTED, []), 2)
    order = np.argsort(home, kind="stable")
    key, home = key[order], home[order]
    homes, starts = np.unique(home, return_index=True)
    bucket, data = [], []
    for to, lo, hi in zip(homes.tolist(), starts, [*starts[1:], home.size]):
        blobs = pack_bytes(key[lo:hi], [sketches[k] for k in key[lo:hi].tolist()])
        bucket += [to] * len(blobs)
        data += blobs
    yield _arrow_moved(bucket, [_SERVED] * len(data), data)


def _prefer(
    threshold: float, containment: float | None, pairs: int
) -> Callable[[Iterable[Any]], Iterator]:
    """A partition's pairs (of the kind ``pairs``: :data:`_KEPT` in a first pass,
    :data:`_FRESH` after) estimated, each document's candidates in its preference order."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        got, _ = _received(batches)
        keys, values = unpack_bytes(got.get(_SERVED, []))
        raw = dict(zip(keys.tolist(), values))  # this partition's sketches, parsed when needed
        parsed: dict[int, Any] = {}

        def sketch(key: int) -> Any:
            found = parsed.get(key)
            if found is None:
                found = parsed[key] = sketch_from_bytes(raw.pop(key))
            return found

        d, e = unpack(got.get(pairs, []), 2)
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
                yield pa.RecordBatch.from_pydict(out, schema=_PREFERENCES_ARROW())
                out = {name: [] for name in out}
            lo = hi
        yield pa.RecordBatch.from_pydict(out, schema=_PREFERENCES_ARROW())

    return run


def _PREFERENCES_ARROW() -> Any:  # noqa: N802 - a constant made on first use (pyarrow is lazy)
    import pyarrow as pa

    return pa.schema([("d", pa.int64()), ("pos", pa.int32()), ("e", pa.int64()),
                      ("kind", pa.string()), ("r", pa.float64())])
