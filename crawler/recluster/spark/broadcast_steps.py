"""The candidate search of a small input in one stage, as each task runs it
(:class:`.candidates.BroadcastSearch` plans it).

Spark broadcasts what every leader holds (its fingerprints, sizes and sketch, packed by
:func:`.search_steps.spread` as for one bucket) to every task of the stage; each task then does
the work of all six shuffled steps of :class:`.candidates.Search`, in one process, with the same
functions (:mod:`.postings`): it counts every fingerprint and indexes every leader's rarest part
(work every task repeats, a few numpy sorts over the whole input), then meets, judges and
estimates the pairs of its *share* of the documents only (those whose key falls in its bucket),
which is most of the work. Its output is the verdicts' (:func:`.search_steps.verdicts`), bound
for its own share: the counters, the preferences packed (:data:`PREFERENCES`), and, with
``exact_cap``, the contested leaders of its share of the fingerprints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

# not `from crawler.recluster.spark import ...` (see the same import in .candidates)
import crawler.recluster.spark.postings as postings  # noqa: PLR0402
from crawler.recluster.spark.search_steps import (
    CHANGED, DOCUMENT, HELD, HIT, LONG, SKETCH, TALLY, at_home, estimated, moved_batch,
    preferences_arrow, received,
)

__all__ = [
    "PREFERENCE_KINDS", "PREFERENCES", "SHARE", "broadcast_blobs", "preferences", "search_share",
    "searched",
]

#: the kind of moved arrays that holds a share's preferences (d, pos, e, kind, r), each
#: column an int64 (``kind`` its place in :data:`PREFERENCE_KINDS`, ``r`` the double's bits)
PREFERENCES = 18
#: the column of the stage's input that says which share of the documents a task searches for
SHARE = "share"
#: the decision kinds a preference can carry (:func:`crawler.recluster.rounds.preference`)
PREFERENCE_KINDS = ("near_duplicate", "contained")


def search_share(
    shares: int, cap: int, bound: float | None, threshold: float, containment: float | None,
    *, exact_cap: bool, counted: bool, left_out: Any = None, before: Any = None,
    again: bool = False,
) -> Callable[[Iterable[Any]], Iterator]:
    """The step of one task: its share (of ``shares``) of the search, from the broadcast
    leaders (:data:`~.search_steps.DOCUMENT`, :data:`~.search_steps.HELD`,
    :data:`~.search_steps.SKETCH`; with ``counted``, every sketched document's count-min
    counters, :data:`~.search_steps.HIT`, for the local clusterer's ranking). ``left_out``:
    None, or a broadcast sorted array of the leaders left out of the postings. ``again``: a
    pass after the first, which estimates only the pairs of the documents whose pairs differ
    from the pass before's, found again here with the leaders ``before`` left out (None:
    none)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        share, got = broadcast_blobs(batches)
        if share is None:  # no leader: nothing to search
            return
        yield from searched(
            share, shares, got, cap, bound, threshold, containment, exact_cap=exact_cap,
            counted=counted, left_out=None if left_out is None else left_out.value,
            before=None if before is None else before.value, again=again)

    return run


def searched(
    share: int, shares: int, got: dict[int, list[bytes]], cap: int, bound: float | None,
    threshold: float, containment: float | None, *, exact_cap: bool = False,
    counted: bool = False, left_out: np.ndarray | None = None,
    before: np.ndarray | None = None, again: bool = False, leaders: np.ndarray | None = None,
) -> Iterator[Any]:
    """One task's share of the search, from the broadcast blobs ``got`` by kind, as
    :func:`search_share` takes them (``left_out`` and ``before`` their values). ``leaders``:
    the sorted keys the search is of, when ``got`` holds other documents too (None: it holds
    leaders only). The counters (:data:`~.search_steps.TALLY`) end with the documents whose
    pairs this pass estimates, then, when ``leaders`` is given, the documents with a
    qualifying candidate."""
    doc, size, k, least, den = postings.unpack(got.get(DOCUMENT, []), 5)
    d, f = postings.unpack(got.get(HELD, []), 2)
    if leaders is not None:
        ours = np.isin(doc, leaders, assume_unique=True)
        doc, size, k, least, den = doc[ours], size[ours], k[ours], least[ours], den[ours]
        ours = np.isin(d, leaders)
        d, f = d[ours], f[ours]
    sd, sf, counts = postings.shared(d, f)
    if counted:
        cell, key = postings.unpack(got.get(HIT, []), 2)
        pf, pe = postings.rarest_counted(d, f, doc, k, *postings.running_counts(cell, key))
    else:
        pf, pe = postings.indexed(sd, sf, counts, doc, size, k)
    mine = postings.bucket_of(sd, shares) == share
    md, mf = sd[mine], sf[mine]

    def pairs(out: np.ndarray | None) -> tuple[np.ndarray, ...]:
        met = postings.meet(md, mf, pf, pe, cap, out)
        return postings.verdicts(*met, doc, least, den, bound)

    vd, ve, hits, capped, keep = pairs(left_out)
    counters = postings.tally(vd, hits, capped, keep)
    kd, ke = vd[keep], ve[keep]
    changed = counters[-1]  # in a first pass, every document with a pair
    if again:
        bd, be, _, _, kept_before = pairs(before)
        moved_on, kd, ke = postings.fresh(kd, ke, bd[kept_before], be[kept_before], left_out)
        changed = moved_on.size
        yield moved_batch(*at_home(share, CHANGED, postings.pack(moved_on)))
    if exact_cap:  # each fingerprint's postings judged by one task: its share's
        ours = postings.bucket_of(pf, shares) == share
        long, top = postings.contested(pf[ours], pe[ours], cap, left_out)
        yield moved_batch(*at_home(share, LONG, postings.pack(long, top)))
    keys, values = postings.unpack_bytes(got.get(SKETCH, []))
    rows: dict[str, list[Any]] = {"d": [], "pos": [], "e": [], "kind": [], "r": []}
    for some in estimated(kd, ke, dict(zip(keys.tolist(), values)), threshold, containment):
        for name, column in some.items():
            rows[name] += column
    tallied = [*counters, changed] + ([] if leaders is None else [len(set(rows["d"]))])
    yield moved_batch(*at_home(share, TALLY, [np.array(tallied, dtype=np.int64).tobytes()]))
    kinds = np.array([PREFERENCE_KINDS.index(kind) for kind in rows["kind"]], dtype=np.int64)
    r = np.array(rows["r"], dtype=np.float64).view(np.int64)
    packed = postings.pack(rows["d"], rows["pos"], rows["e"], kinds, r)
    yield moved_batch(*at_home(share, PREFERENCES, packed))


def broadcast_blobs(batches: Iterable[Any]) -> tuple[int | None, dict[int, list[bytes]]]:
    """The task's share and the broadcast blobs, by kind (the share: None when none came)."""
    share = None
    got: dict[int, list[bytes]] = {}
    for batch in batches:
        if batch.num_rows and share is None:
            share = int(batch.column(SHARE)[0].as_py())
        for kind, data in received([batch])[0].items():
            got.setdefault(kind, []).extend(data)
    return share, got


def preferences(batches: Iterable[Any]) -> Iterator[Any]:
    """The packed preferences of the shares as rows (:data:`.candidates.PREFERENCES`)."""
    import pyarrow as pa

    blobs = [b for batch in batches for b in batch.column("data").to_pylist()]
    d, pos, e, kind, r = postings.unpack(blobs, 5)
    names = (np.array(PREFERENCE_KINDS, dtype=object)[kind] if kind.size
             else np.empty(0, dtype=object))
    yield pa.RecordBatch.from_arrays(
        [pa.array(d, pa.int64()), pa.array(pos.astype(np.int32), pa.int32()),
         pa.array(e, pa.int64()), pa.array(names.tolist(), pa.string()),
         pa.array(r.view(np.float64), pa.float64())],
        schema=preferences_arrow())
