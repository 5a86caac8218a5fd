"""The Spark engine's candidate search steps (:mod:`crawler.recluster.spark.postings`) against a
plain oracle of the search they implement, on generated corpora cut into buckets as Spark cuts
them: same pairs, same hit counts, same capped counts, same verdicts."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.recluster.spark import postings as P

# a small alphabet so that fingerprints are shared; negative values are the upper half of the
# unsigned range, whose order the rarest-first ties must respect
ALPHABET = st.integers(-40, 40).map(lambda v: v * 0x0123456789ABCDE)


@st.composite
def corpora(draw):
    n = draw(st.integers(1, 25))
    keys = sorted(draw(st.sets(st.integers(0, 1 << 40), min_size=n, max_size=n)))
    docs = []
    for key in keys:
        fps = sorted(draw(st.sets(ALPHABET, min_size=1, max_size=12)))
        k = draw(st.integers(1, len(fps)))
        least = draw(st.sampled_from([-1, 1, 2, 3]))
        den = draw(st.sampled_from([-1, len(fps), len(fps) + 3]))
        docs.append((key, fps, k, least, den))
    return docs, draw(st.integers(1, 4)), draw(st.sampled_from([None, 0.5, 0.8]))


def posted_lists(docs, left_out):
    """The oracle's postings, by fingerprint (the part of :func:`oracle` before meeting)."""
    counts = Counter(f for _, fps, *_ in docs for f in fps)
    posted = defaultdict(list)
    for key, fps, k, _, _ in docs:
        common_first = sorted((f for f in fps if counts[f] > 1),
                              key=lambda f: (-counts[f], -(f % (1 << 64))))
        for place, f in enumerate(common_first, 1):
            if place >= len(fps) - k + 1 and key not in left_out:
                posted[f].append(key)
    return posted, counts


def oracle(docs, cap, bound, left_out=()):
    """The search, a fingerprint and a pair at a time; the documents of ``left_out`` post
    nothing."""
    posted, counts = posted_lists(docs, left_out)
    hits, over = Counter(), Counter()
    for key, fps, *_ in docs:
        for f in fps:
            if counts[f] < 2:
                continue
            for rank, e in enumerate(sorted(posted[f])[: cap + 1], 1):
                if e < key:
                    hits[key, e] += rank <= cap
                    over[key, e] += rank == cap + 1
    terms = {key: (least, den) for key, _, _, least, den in docs}
    out = {}
    for d, e in hits.keys() | over.keys():
        capped = sum(n for (dd, _), n in over.items() if dd == d)
        least, den = terms[d]
        met = hits[d, e] + capped
        if bound is None:
            keep = least < 0 or met >= least
        else:
            keep = den <= 0 or not (min(met, den) / den < bound)
        out[d, e] = (hits[d, e], capped, hits[d, e] > 0 and keep)
    return out


def bucketed(groups, buckets):
    """Each step run once per bucket, as each Spark partition runs it on what reached it."""
    return [[tuple(c[P.bucket_of(by, buckets) == b] for c in cols) for by, cols in groups]
            for b in range(buckets)]


def search(docs, cap, bound, buckets, left_out=()):
    key = np.array([d[0] for d in docs], dtype=np.int64)
    size = np.array([len(d[1]) for d in docs], dtype=np.int64)
    k, least, den = (np.array([d[i] for d in docs], dtype=np.int64) for i in (2, 3, 4))
    d = np.repeat(key, size)
    f = np.array([v for doc in docs for v in doc[1]], dtype=np.int64)

    def cat(parts):
        return [np.concatenate(c) for c in zip(*parts)]

    counted, members = [], []
    for (held,) in bucketed([(f, (d, f))], buckets):
        sd, sf, count = P.shared(*held)
        counted.append((sd, sf, count))
        members.append((sd, sf))
    counted, members = cat(counted), cat(members)
    posted = []
    for (docs_here, rows) in bucketed([(key, (key, size, k)), (counted[0], counted)], buckets):
        posted.append(P.indexed(*rows, *docs_here))
    posted = cat(posted)
    out = np.array(sorted(left_out), dtype=np.int64)
    met, contested = [], []
    for (m, p) in bucketed([(members[1], members), (posted[0], posted)], buckets):
        met.append(P.meet(*m, *p, cap, out))
        contested.append(P.contested(*p, cap, out))
    met = cat(met)
    long = {}  # a document posted in several buckets is top if it is top in any
    for keys, tops in contested:
        for e, top in zip(keys.tolist(), tops.tolist()):
            long[e] = long.get(e, 0) | top
    pairs, counters = {}, np.zeros(5, dtype=np.int64)
    for (docs_here, rows) in bucketed([(key, (key, least, den)), (met[0], met)], buckets):
        judged = P.verdicts(*rows, *docs_here, bound)
        counters += P.tally(judged[0], *judged[2:])
        for dd, e, hits, capped, keep in zip(*judged):
            pairs[int(dd), int(e)] = (int(hits), int(capped), bool(keep))
    return pairs, counters.tolist(), long


def counted(pairs):
    """The search's counters, a pair at a time: estimated, pruned, capped, capped documents,
    documents with a pair to estimate."""
    capped = {d: c for (d, _), (_, c, _) in pairs.items()}
    return [sum(keep for *_, keep in pairs.values()),
            sum(hits > 0 and not keep for hits, _, keep in pairs.values()),
            sum(capped.values()), sum(c > 0 for c in capped.values()),
            len({d for (d, _), (*_, keep) in pairs.items() if keep})]


def contested_oracle(docs, cap, left_out):
    """Each document posted under a fingerprint of more than ``cap`` postings: 1 if it is one
    of the ``cap + 1`` lowest of one that keeps more than ``cap`` without ``left_out``."""
    every, _ = posted_lists(docs, ())
    kept, _ = posted_lists(docs, left_out)
    long = {}
    for f, keys in every.items():
        if len(keys) > cap:
            rest = sorted(kept.get(f, []))
            top = set(rest[: cap + 1]) if len(rest) > cap else set()
            for key in keys:
                long[key] = long.get(key, 0) | (key in top)
    return long


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(corpora(), st.integers(1, 5), st.data())
def test_steps_in_buckets_agree_with_the_oracle(corpus, buckets, data):
    docs, cap, bound = corpus
    # some leaders left out of the postings, as a later pass leaves out the joined ones
    left_out = data.draw(st.sets(st.sampled_from([d[0] for d in docs])), "left_out")
    expected = oracle(docs, cap, bound, left_out)
    assert search(docs, cap, bound, buckets, left_out) == (
        expected, counted(expected), contested_oracle(docs, cap, left_out))


def test_a_template_fingerprint_is_cut_at_the_cap():
    # ten pages share one fingerprint, each also a rare one: with a cap of 3 the fingerprint's
    # postings are its 3 lowest pages, and page 3, the first past the cap, is met as "over"
    docs = [(key, [7, 100 + key], 2, 1, -1) for key in range(10)]
    got, counters, long = search(docs, 3, None, 2)
    assert got[(3, 2)] == (1, 0, True)  # page 3 is the cut one: nothing cut before it
    assert got[(9, 0)] == (1, 1, True)  # a later page: one capped fingerprint
    assert got[(9, 3)] == (0, 1, False)  # met past the cap only: not estimated
    assert (9, 5) not in got
    assert got == oracle(docs, 3, None)
    assert counters[2:4] == [6, 6]  # pages 4 to 9 each lost the template's one fingerprint
    assert counters[4] == 9  # every page but the first has an earlier one to estimate


def test_pack_round_trips_columns():
    a, b = np.arange(5, dtype=np.int64), -np.arange(5, dtype=np.int64) * (1 << 40)
    blobs = P.pack(a, b)
    got = P.unpack(blobs + blobs, 2)
    assert got[0].tolist() == a.tolist() * 2 and got[1].tolist() == b.tolist() * 2
    assert [c.size for c in P.unpack([], 3)] == [0, 0, 0]
    assert P.pack(np.empty(0, dtype=np.int64)) == []


def test_pack_cuts_many_rows_into_blobs_under_the_limit():
    rows = 3 * P.BLOB_BYTES // 16 + 7  # three full blobs of two columns, and a few rows more
    a = np.arange(rows, dtype=np.int64)
    blobs = P.pack(a, -a)
    assert len(blobs) == 4 and max(map(len, blobs)) <= P.BLOB_BYTES
    got = P.unpack(blobs, 2)
    assert got[0].tolist() == a.tolist() and got[1].tolist() == (-a).tolist()


def test_pack_bytes_round_trips_keyed_byte_strings():
    keys = np.array([5, -(1 << 62), 9], dtype=np.int64)
    got_keys, got = P.unpack_bytes(P.pack_bytes(keys, [b"sketch", b"", b"\x00\xff"]))
    assert got_keys.tolist() == keys.tolist() and got == [b"sketch", b"", b"\x00\xff"]
    assert P.pack_bytes(np.empty(0, dtype=np.int64), []) == []
    assert P.unpack_bytes([])[1] == []


def test_pack_bytes_cuts_blobs_under_the_limit_and_keeps_a_long_value_whole():
    rng = np.random.default_rng(5)
    values = [rng.bytes(int(n)) for n in rng.integers(0, 3000, size=400)]
    values[100] = rng.bytes(2 * P.BLOB_BYTES)  # longer than a blob: a blob of its own
    keys = np.arange(len(values), dtype=np.int64) * 7
    blobs = P.pack_bytes(keys, values)
    got_keys, got = P.unpack_bytes(blobs)
    assert got_keys.tolist() == keys.tolist() and got == values
    assert len(blobs) > 2
    assert sum(len(b) > P.BLOB_BYTES for b in blobs) == 1  # only the long value's own
    # a blob just full: 8 bytes of count, then 16 of key and end and 1,000 of bytes per value
    fitting = (P.BLOB_BYTES - 8) // 1016
    assert len(P.pack_bytes(np.arange(fitting), [b"x" * 1000] * fitting)) == 1
    assert len(P.pack_bytes(np.arange(fitting + 1), [b"x" * 1000] * (fitting + 1))) == 2


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(corpora(), st.integers(1, 4), st.sampled_from([1 << 2, 1 << 4, 1 << 20]), st.data())
def test_indexed_parts_ranked_as_the_local_clusterer_ranks_them(corpus, buckets, counters, data):
    """With --exact-cap each leader's indexed part is picked as the local clusterer picks a new
    representative's: its k rarest fingerprints by the count-min sketch of the documents up to
    it, in input order, collisions and all (a few counters: many). The oracle is the
    clusterer's own :class:`~dedup.frequency.FingerprintFrequency`, fed one document at a
    time; the steps run on the documents cut into buckets, as Spark cuts them."""
    from dedup.frequency import FingerprintFrequency

    docs, _, _ = corpus
    frequency = FingerprintFrequency(counters=counters)
    expected = set()
    for key, fps, k, _, _ in docs:
        distinct = np.array(fps, dtype=np.int64).view(np.uint64)
        frequency.add(distinct)
        expected |= {(int(f), key) for f in frequency.rarest(np.sort(distinct), k).view(np.int64)}

    def cut(keys):  # rows to buckets by key, as _routed cuts them
        where = P.bucket_of(np.asarray(keys, dtype=np.int64), buckets)
        return [np.flatnonzero(where == b) for b in range(buckets)]

    keys = np.array([d[0] for d in docs], dtype=np.int64)
    sizes = np.array([len(d[1]) for d in docs], dtype=np.int64)
    ks = np.array([d[2] for d in docs], dtype=np.int64)
    f = np.concatenate([np.array(d[1], dtype=np.int64) for d in docs])
    d = np.repeat(keys, sizes)
    # documents read in any split (a task each), their counters met in buckets of counters
    split = data.draw(st.integers(1, len(docs)), "split")
    hits = [P.document_cells(keys[part], sizes[part], f[np.isin(d, keys[part])], counters)
            for part in (slice(0, split), slice(split, None)) if keys[part].size]
    cell = np.concatenate([h[0] for h in hits])
    owner = np.concatenate([h[1] for h in hits])
    running = [P.running_counts(cell[rows], owner[rows]) for rows in cut(cell)]
    rk, rc, rn = (np.concatenate([r[i] for r in running]) for i in range(3))
    got = set()
    for rows, runs in zip(cut(keys), cut(rk)):
        mine = np.isin(d, keys[rows])
        pf, pe = P.rarest_counted(d[mine], f[mine], keys[rows], ks[rows],
                                  rk[runs], rc[runs], rn[runs], counters)
        got |= set(zip(pf.tolist(), pe.tolist()))
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_changed_names_every_document_whose_pairs_differ_and_no_other(data):
    """A pass of ``--exact-cap`` after the first estimates again the pairs of the documents
    that :func:`~crawler.recluster.spark.postings.changed` names: a document left out would keep
    candidates that are no longer right, one named for nothing would only cost time."""
    pairs = st.sets(st.tuples(st.integers(0, 12), st.integers(-30, 30)), max_size=40)
    before, after = data.draw(pairs), data.draw(pairs)

    def columns(rows):
        rows = sorted(rows)
        return (np.array([d for d, _ in rows], dtype=np.int64),
                np.array([e for _, e in rows], dtype=np.int64))

    by_document = defaultdict(lambda: (set(), set()))
    for d, e in before:
        by_document[d][0].add(e)
    for d, e in after:
        by_document[d][1].add(e)
    expected = sorted(d for d, (was, now) in by_document.items() if was != now)
    assert P.changed(*columns(after), *columns(before)).tolist() == expected
    assert P.changed(*columns(after), *columns(after)).tolist() == []
