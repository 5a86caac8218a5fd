"""``neardup recluster`` measured: accuracy and speed against datasketch, and scale, in one run.

    python -m benchmarks.recluster [--threshold 0.8] [--repeats 3] [--json]
    python -m benchmarks.recluster --skip-scale          # accuracy and speed only
    python -m benchmarks.recluster --sizes 10000,100000  # a shorter scale run

**Accuracy.** At least 3,000 real pages (Debian's documentation, :mod:`benchmarks.corpus`) plus
edited copies of a third of them (:mod:`benchmarks.edits`: a copyright line, changed words, a
dropped paragraph, rewritten navigation), in a shuffled, seeded order. Both pipelines see the
same canonical token streams (``html_tokens``) and the same shingles — the paper's: 4
consecutive 8-byte units, where a word is one unit and a longer word several (§4.3) — and apply
the same greedy rule (a document joins the most resembling earlier cluster at or above the
threshold, compared with the cluster's first member, else starts a cluster):

* **ours**: the real :func:`crawler.recluster.recluster` path (MIN_s of Rabin fingerprints,
  the O(rs) fingerprint → cluster index in LMDB), at datasketch's sample size, s = 128, so
  that the two compare like with like; our default, s = 100, is judged for accuracy too;
* **datasketch**: ``MinHash(num_perm=128)`` and ``MinHashLSH(threshold, num_perm=128)`` fed
  each shingle's 32 bytes: query the LSH for candidate representatives, join the best by
  estimated Jaccard at or above the threshold, else insert the document as a new
  representative.

So both estimate the same quantity, and are judged against it, the exact resemblance (Option
B: the Jaccard coefficient of the two sets of shingles):

* a **false drop** is a member whose exact resemblance to its representative is below
  threshold − 0.1;
* a **missed duplicate** is a representative with an earlier representative at exact
  resemblance ≥ threshold + 0.1. Such pairs are found exactly, without comparing all pairs, by
  a prefix-filter join (:func:`similar_pairs`).

**Speed.** Documents per second end to end: read the files, canonicalise, sketch, cluster, write
clusters.jsonl; ours as ``neardup recluster --html`` runs it (each page read by the worker that
sketches it) with 2 worker processes and with 1, datasketch in one process (it has no
pool of its own; its MinHash permutations are made once and shared, which is the fastest way to
use it). Median of ``--repeats`` runs, in wall time and in CPU time (this process and its
workers): the machine is shared, and CPU time does not count waiting for a core. Reading and
canonicalising alone is timed too: both pipelines pay it, so it bounds how far ahead any
sketching and clustering can put one of them.

The same documents are timed once more as a **text dump** (JSONL of each page's visible text,
``neardup recluster --jsonl``'s input, as web-text exports hold pages): no HTML to parse, so
those rows measure what the two pipelines do differently. The dump's tokens are the pages'
own, and the benchmark checks that each pipeline decides every document as it did from the
HTML.

**Scale.** Synthetic MIN_100 sketches (random values; a planted fraction are near copies of an
earlier document) through :class:`dedup.cluster.GreedyClusterer` over the LMDB
:class:`storage.store.Store` index, as ``recluster`` drives it (batches of
:data:`crawler.recluster.BATCH`, a document record each, the rebuildable index opened with
``durable=False``). Each size runs in a fresh process (up to 100,000 three times, the median
kept: a run of a second or two is at the mercy of the machine), so its memory figures are its
own: the peak resident set (``VmHWM``), which counts the pages of the LMDB file the process has
touched through its map (the kernel's page cache, shared and reclaimable), and the peak of the
process's own memory (``RssAnon``, sampled after every batch), which is what "the index is on
disk" keeps flat. The paper's claim is O(rs): the time per document should not grow with the number
of documents. A size that exceeds ``--scale-budget`` seconds of clustering is stopped and
reported as such, with the rate it had reached.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.edits import edit_page
from crawler.recluster.inputs import SourceDocument, read_html_files, read_jsonl
from crawler.recluster.run import BATCH, recluster
from dedup.canonical import html_text, html_tokens, text_tokens
from dedup.curves import matches_needed
from dedup.params import DedupParams, SketchParams
from dedup.units import to_units

SHINGLE = 4
NUM_PERM = 128
#: ours at datasketch's sample size (128) in every row but one: our default MIN_100, for accuracy
SAME_SIZE = SketchParams(size=NUM_PERM)
DEFAULT = "ours, MIN_100 (default)"
#: the speed rows on the corpus as a JSONL text dump (no HTML to parse)
TEXT_OURS, TEXT_PEER = "text: ours, 2 jobs", "text: datasketch"
ACCURACY_ROWS = ("ours, 2 jobs", DEFAULT, "datasketch")
MIN_PAGES = 3000
#: scale sizes up to this many documents are run three times (median kept)
SCALE_REPEAT_UP_TO = 100_000
_REPO = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the corpus ----------------------------------------------------------------------------------


def real_pages(min_pages: int) -> list[Path]:
    """At least ``min_pages`` real HTML pages from Debian's documentation packages."""
    from benchmarks import corpus

    extra = getattr(corpus, "EXTRA_PACKAGES", ())
    if extra:
        return corpus.html_corpus(min_pages, packages=corpus.PACKAGES + extra)
    return corpus.html_corpus(min_pages)


def build_corpus(
    pages: list[Path], directory: Path, seed: int, edit_fraction: float
) -> tuple[list[Path], dict[str, tuple[str, list[str]]]]:
    """Copy the pages and edited versions of ``edit_fraction`` of them into ``directory``, named
    in a shuffled order. Returns the files in that order and, per edited file, its original's
    file and the edits made."""
    rng = random.Random(seed)
    # replacement words: real words of the corpus itself, so an edit does not stand out
    vocabulary = sorted({t for page in rng.sample(pages, 50) for t in html_tokens(page.read_bytes())})
    docs: list[tuple[str, bytes, int | None, list[str]]] = []
    for i, page in enumerate(pages):
        docs.append((f"page-{i}", page.read_bytes(), None, []))
    for i in sorted(rng.sample(range(len(pages)), round(edit_fraction * len(pages)))):
        edited, kinds = edit_page(docs[i][1], rng, vocabulary)
        docs.append((f"edit-{i}", edited, i, kinds))
    order = list(range(len(docs)))
    rng.shuffle(order)
    directory.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    name_of: dict[int, str] = {}
    for position, index in enumerate(order):
        name = f"{position:06d}-{docs[index][0]}.html"
        name_of[index] = name
        (directory / name).write_bytes(docs[index][1])
        files.append(directory / name)
    edits = {
        name_of[i]: (name_of[original], kinds)
        for i, (_, _, original, kinds) in enumerate(docs)
        if original is not None
    }
    return files, edits


def unit_shingles(tokens: Sequence[str], w: int = SHINGLE) -> list[bytes]:
    """The w-shingles our sketches sample, as bytes: w consecutive 8-byte units (§4.3), so
    datasketch hashes exactly the shingles we fingerprint. A document shorter than w units is
    one shingle (our rule too)."""
    units = to_units(tokens)
    data = units.astype(">u8").tobytes()
    if units.size < w:
        return [data] if units.size else []
    width = 8 * w
    return [data[i : i + width] for i in range(0, len(data) - width + 8, 8)]


# --- exact resemblance, and the pairs above a threshold without comparing all pairs ----------


class ExactSets:
    """Every document's set of shingles, as a sorted array of global shingle ranks.

    Ranks order the shingles from the rarest to the most common (ties by hash), which is the
    order the prefix filter needs; equal arrays mean equal sets.
    """

    def __init__(self, token_streams: list[list[str]]) -> None:
        hashed = [
            np.unique(np.fromiter(map(hash, unit_shingles(t)), dtype=np.int64))
            for t in token_streams
        ]
        values, counts = np.unique(np.concatenate(hashed), return_counts=True)
        order = np.lexsort((values, counts))
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        self.sets = [np.sort(rank[np.searchsorted(values, h)]) for h in hashed]

    def resemblance(self, i: int, j: int) -> float:
        a, b = self.sets[i], self.sets[j]
        if a.size == 0 and b.size == 0:
            return 1.0
        shared = np.intersect1d(a, b, assume_unique=True).size
        return shared / (a.size + b.size - shared)


def similar_pairs(exact: ExactSets, t: float) -> list[tuple[int, int, float]]:
    """Every pair ``i < j`` with exact resemblance ≥ t, by a prefix-filter join.

    With the elements of every set in one global order, two sets of Jaccard ≥ t share an
    element among the first ``|x| − ⌈t·|x|⌉ + 1`` of each (else their intersection would be
    too small), so only pairs sharing such a prefix element are compared; a size filter
    (``t·|x| ≤ |y| ≤ |x|/t``) skips more. Rare elements come first, so the candidate lists stay
    short. Exact, not a sample.
    """
    postings: dict[int, list[int]] = defaultdict(list)
    pairs = []
    for j, s in enumerate(exact.sets):
        if s.size == 0:
            continue
        prefix = s.size - matches_needed(t, s.size) + 1
        candidates: set[int] = set()
        for element in s[:prefix].tolist():
            bucket = postings[element]
            candidates.update(bucket)
            bucket.append(j)
        for i in sorted(candidates):
            small, large = sorted((exact.sets[i].size, s.size))
            if small < t * large - 1e-9:
                continue
            r = exact.resemblance(i, j)
            if r >= t:
                pairs.append((i, j, r))
    return pairs


# --- the two pipelines ---------------------------------------------------------------------------


def file_sources(files: list[Path]) -> Iterator[SourceDocument]:
    """The pages as ``neardup recluster --html`` reads them: each file is read by the process
    that sketches it. Their ids are their paths; :func:`_name` takes the file name back."""
    return read_html_files(files)


def _name(doc_id: str) -> str:
    """The corpus file name of a clusters.jsonl id (a path for ours, a name for datasketch)."""
    return doc_id.rsplit("/", 1)[-1]


def run_ours(files: list[Path], out: Path, threshold: float, jobs: int,
             params: SketchParams | None = None) -> float:
    """Our end-to-end time in seconds (the real recluster path; a temporary LMDB index)."""
    started = time.perf_counter()
    with open(out, "w", encoding="utf-8") as fh:
        recluster(file_sources(files), params or SketchParams(), DedupParams(threshold=threshold),
                  out=fh, jobs=jobs)
    return time.perf_counter() - started


def write_text_dump(files: list[Path], path: Path) -> None:
    """The corpus as a JSONL text dump (``id``, ``text``: each page's visible text, as a
    web-text export holds it), for the text-input speed rows. Its tokens are the pages' own."""
    with open(path, "w", encoding="utf-8") as fh:
        for f in files:
            fh.write(json.dumps({"id": f.name, "text": html_text(f.read_bytes())}) + "\n")


def run_ours_text(dump: Path, out: Path, threshold: float, jobs: int,
                  params: SketchParams) -> float:
    """Our end-to-end time on the text dump: ``neardup recluster --jsonl``'s path."""
    started = time.perf_counter()
    with open(out, "w", encoding="utf-8") as fh:
        recluster(read_jsonl([dump]), params, DedupParams(threshold=threshold), out=fh,
                  jobs=jobs)
    return time.perf_counter() - started


def run_datasketch_text(dump: Path, out: Path, threshold: float) -> float:
    """datasketch on the text dump: read each line, tokenise, then as :func:`run_datasketch`."""
    started = time.perf_counter()
    with open(dump, encoding="utf-8") as fh:
        docs = ((d["id"], text_tokens(d["text"])) for d in map(json.loads, fh))
        _datasketch_greedy(docs, out, threshold)
    return time.perf_counter() - started


def run_canonicalise_only(files: list[Path]) -> float:
    """Reading and canonicalising alone: the part both pipelines share, for the bound below."""
    started = time.perf_counter()
    for path in files:
        html_tokens(path.read_bytes())
    return time.perf_counter() - started


def run_datasketch(files: list[Path], out: Path, threshold: float) -> float:
    """datasketch MinHash + MinHashLSH with the same greedy first-member rule; one process."""
    started = time.perf_counter()
    _datasketch_greedy(((f.name, html_tokens(f.read_bytes())) for f in files), out, threshold)
    return time.perf_counter() - started


def _datasketch_greedy(
    docs: Iterator[tuple[str, list[str]]], out: Path, threshold: float
) -> None:
    """Greedy first-member clustering of ``(id, tokens)`` with datasketch; clusters.jsonl."""
    from datasketch import MinHash, MinHashLSH

    template = MinHash(num_perm=NUM_PERM, seed=1)  # the default scheme (affine32 since 2.0)
    permutations, scheme = template.permutations, template.scheme
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    representatives: dict[str, tuple[int, MinHash]] = {}
    with open(out, "w", encoding="utf-8") as fh:
        for doc_id, tokens in docs:
            if not tokens:
                continue
            m = MinHash(num_perm=NUM_PERM, seed=1, permutations=permutations, scheme=scheme)
            m.update_batch(set(unit_shingles(tokens)))
            best: tuple[float, int] | None = None
            for key in lsh.query(m):
                cluster, rep = representatives[key]
                j = m.jaccard(rep)
                if j >= threshold and (best is None or (j, -cluster) > (best[0], -best[1])):
                    best = (j, cluster)
            if best is None:
                cluster = len(representatives)
                key = str(cluster)
                lsh.insert(key, m)
                representatives[key] = (cluster, m)
                line = {"id": doc_id, "cluster": cluster, "representative": True,
                        "resemblance": 1.0}
            else:
                line = {"id": doc_id, "cluster": best[1], "representative": False,
                        "resemblance": round(best[0], 6)}
            fh.write(json.dumps(line) + "\n")


# --- judging a clustering ------------------------------------------------------------------------


def _decisions(out: Path) -> list[tuple[str, int]]:
    """(id, cluster) of each line of a clusters.jsonl, in order."""
    with open(out, encoding="utf-8") as fh:
        return [(_name(d["id"]), d["cluster"]) for d in map(json.loads, fh)]


def judge(
    out: Path, index_of: dict[str, int], exact: ExactSets, pairs: list[tuple[int, int, float]],
    threshold: float, edits: dict[str, tuple[str, list[str]]],
) -> dict[str, Any]:
    """False drops, missed duplicates and the join rate of edited copies by exact resemblance."""
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    first: dict[int, int] = {}
    cluster_of: dict[int, int] = {}
    false_drops = []
    for line in lines:
        doc = index_of[_name(line["id"])]
        cluster_of[doc] = line["cluster"]
        if line["representative"]:
            first[line["cluster"]] = doc
            continue
        r = exact.resemblance(doc, first[line["cluster"]])
        if r < threshold - 0.1:
            false_drops.append({"id": _name(line["id"]), "exact": round(r, 3),
                                "estimate": line["resemblance"]})
    representatives = set(first.values())
    missed = sorted({j for i, j, _ in pairs if i in representatives and j in representatives})
    # how often an edited copy ended in its original's cluster, by exact resemblance
    bins = [0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.01]
    joined: dict[str, list[int]] = {}
    for name, (original, _) in edits.items():
        e, o = index_of[name], index_of[original]
        if e not in cluster_of or o not in cluster_of:
            continue
        r = exact.resemblance(e, o)
        k = next(b for b in range(len(bins) - 1) if bins[b] <= r < bins[b + 1])
        label = f"{bins[k]:.2f}-{min(bins[k + 1], 1.0):.2f}" if bins[k] < 1.0 else "1.00"
        joined.setdefault(label, [0, 0])
        joined[label][0] += 1
        joined[label][1] += cluster_of[e] == cluster_of[o]
    return {
        "documents": len(lines),
        "clusters": len(first),
        "dropped": len(lines) - len(first),
        "false_drops": len(false_drops),
        "missed_duplicates": len(missed),
        "false_drop_examples": false_drops[:5],
        "edits_joined_by_resemblance": {k: joined[k] for k in sorted(joined)},
    }


# --- scale: synthetic sketches through the LMDB index -------------------------------------------


def rss_anon_kb() -> int:
    """This process's own resident memory now (heap, numpy arrays), without mapped files."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_kb() -> int:
    """This process's peak resident set, in KB.

    ``VmHWM`` where Linux has it: ``getrusage``'s ``ru_maxrss`` survives ``exec``, so a child
    started by a large parent reports the parent's peak (here the 10,000-document child
    reported the benchmark's own 889 MB). RSS counts the LMDB pages the process has touched
    through its map.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def synthetic_values(seed: int, doc: int, planted: float, rng: np.random.Generator,
                     s: int = 100) -> np.ndarray:  # fmt: skip
    """The sorted sampled ids of synthetic document ``doc``: its own random ids, or, with
    probability ``planted``, a near copy of an earlier document's (5 of its ``s`` ids replaced).
    The scale runs here and in ``benchmarks.spark`` draw their corpora with it."""

    def own(d: int) -> np.ndarray:
        return np.random.default_rng([seed, d]).integers(0, 2**64 - 1, size=s, dtype=np.uint64)

    if doc and rng.random() < planted:
        values = own(int(rng.integers(0, doc)))
        values[rng.choice(s, 5, replace=False)] = own(doc)[:5]
    else:
        values = own(doc)
    return np.unique(values)


def scale_child(size: int, planted: float, budget: float, seed: int) -> dict[str, Any]:
    """Cluster ``size`` synthetic sketches in this process; the figures as a dict."""
    from dedup.cluster import GreedyClusterer
    from dedup.sketches import MinSketch
    from storage.records import DocumentRecord
    from storage.store import Store

    s, n = 100, 1000  # a MIN_100 sample of a document of 1,000 distinct shingles
    rng = np.random.default_rng(seed)
    directory = tempfile.mkdtemp(prefix="neardup-scale-")
    clustering = generating = 0.0
    done = peak_anon = 0
    window: list[tuple[int, float]] = [(0, 0.0)]
    last_report = time.monotonic()
    try:
        with Store.open(directory, SketchParams(), durable=False) as store:
            clusterer = GreedyClusterer(store.index, DedupParams(threshold=0.9))
            while done < size and clustering < budget:
                t0 = time.perf_counter()
                count = min(BATCH, size - done)
                sketches = []
                for doc in range(done, done + count):
                    values = synthetic_values(seed, doc, planted, rng, s)
                    sketches.append((MinSketch(values[:s], s, n), int(values[0]) ^ doc))
                t1 = time.perf_counter()
                generating += t1 - t0
                with store.batch():
                    for sketch, content_hash in sketches:
                        doc_id = store.next_doc_id()
                        a = clusterer.assign(doc_id, sketch, content_hash)
                        record = DocumentRecord(f"doc-{doc_id}", "kept", 0.0, a.cluster_id,
                                                content_hash)
                        store.put_document(doc_id, record)
                clustering += time.perf_counter() - t1
                peak_anon = max(peak_anon, rss_anon_kb())
                done += count
                window.append((done, clustering))
                if time.monotonic() - last_report > 10:
                    last_report = time.monotonic()
                    log(f"  scale {size:,}: {done:,} documents, "
                        f"{clustering / done * 1e6:.0f} µs/doc so far")
            used = store.stats()["used_bytes"]
            stats = dict(clusterer.stats)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    # the marginal cost: the last tenth of the documents done
    cut = next(i for i, (d, _) in enumerate(window) if d >= done * 0.9)
    tail_docs = done - window[cut - 1][0] if cut else done
    tail_secs = clustering - (window[cut - 1][1] if cut else 0.0)
    return {
        "size": size,
        "done": done,
        "finished": done == size,
        "seconds": round(clustering, 2),
        "generating_seconds": round(generating, 2),
        "us_per_doc": round(clustering / max(done, 1) * 1e6, 1),
        "us_per_doc_last_tenth": round(tail_secs / max(tail_docs, 1) * 1e6, 1),
        "peak_rss_mb": round(peak_rss_kb() / 1024, 1),
        "peak_anon_mb": round(peak_anon / 1024, 1),
        "index_mb": round(used / 2**20, 1),
        "new_clusters": stats["kept"],
        "near_duplicates": stats["near_duplicate"],
    }


def run_scale(sizes: list[int], planted: float, budget: float, seed: int) -> list[dict[str, Any]]:
    """One row per size. A short run (a second or two at 10,000) is at the mercy of whatever
    else the machine does in that second, so sizes up to :data:`SCALE_REPEAT_UP_TO` run three
    times and the run with the median time per document is kept."""
    rows = []
    for size in sizes:
        repeats = 3 if size <= SCALE_REPEAT_UP_TO else 1
        runs = []
        for _ in range(repeats):
            log(f"scale: {size:,} synthetic sketches in a fresh process (budget {budget:.0f} s)")
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.recluster", "--scale-child", str(size),
                 "--planted", str(planted), "--scale-budget", str(budget), "--seed", str(seed)],
                cwd=_REPO, stdout=subprocess.PIPE, text=True, check=False,  # progress: stderr
            )
            if done.returncode != 0:
                raise RuntimeError(f"scale run of {size} failed with exit status {done.returncode}")
            runs.append(json.loads(done.stdout))
        runs.sort(key=lambda row: row["us_per_doc"])
        row = runs[len(runs) // 2]
        row["runs_us_per_doc"] = [r["us_per_doc"] for r in runs]
        rows.append(row)
    return rows


# --- the run -------------------------------------------------------------------------------------


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the pool's workers)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def measured(repeats: int, runs: dict[str, Callable[[], float]]) -> dict[str, dict[str, Any]]:
    """Median wall time and median CPU time of ``repeats`` runs of each pipeline.

    The runs are interleaved, a round of every pipeline at a time: the machine is shared, and
    its speed drifts over minutes, which would favour whichever pipeline ran in a fast spell.
    Wall time includes waiting for a core another process holds, CPU time does not, so docs
    per CPU-second compares the pipelines' work whatever the load.
    """
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats):
        log(f"speed: round {round_ + 1} of {repeats}: {', '.join(runs)}")
        for name, run in runs.items():
            cpu = cpu_seconds()
            walls[name].append(run())
            cpus[name].append(cpu_seconds() - cpu)
    return {
        name: {"seconds": statistics.median(walls[name]), "runs": walls[name],
               "cpu_seconds": statistics.median(cpus[name])}
        for name in runs
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--repeats", type=int, default=3, help="speed runs per pipeline")
    parser.add_argument("--edit-fraction", type=float, default=1 / 3)
    parser.add_argument("--min-pages", type=int, default=MIN_PAGES)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="scale sizes")
    parser.add_argument("--planted", type=float, default=0.3,
                        help="fraction of near copies among the synthetic sketches")
    parser.add_argument("--scale-budget", type=float, default=900.0,
                        help="seconds of clustering allowed per scale size")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--scale-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.scale_child is not None:
        print(json.dumps(scale_child(args.scale_child, args.planted, args.scale_budget,
                                     args.seed)))
        return

    results: dict[str, Any] = {"threshold": args.threshold,
                               "load_average_at_start": round(os.getloadavg()[0], 2)}
    work = Path(tempfile.mkdtemp(prefix="neardup-bench-recluster-"))
    try:
        if not (args.skip_accuracy and args.skip_speed):
            results.update(accuracy_and_speed(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not args.skip_scale:
        sizes = [int(x) for x in args.sizes.split(",") if x]
        results["scale"] = run_scale(sizes, args.planted, args.scale_budget, args.seed)
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))


def accuracy_and_speed(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    t = args.threshold
    pages = real_pages(args.min_pages)
    log(f"corpus: {len(pages):,} real pages; editing {args.edit_fraction:.0%} of them")
    files, edits = build_corpus(pages, work / "docs", args.seed, args.edit_fraction)
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    results["corpus"] = {"real_pages": len(pages), "edited_copies": len(edits),
                         "documents": len(files), "megabytes": round(megabytes, 1)}
    outputs = {"ours, 2 jobs": work / "ours-2.jsonl", "ours, 1 job": work / "ours-1.jsonl",
               "datasketch": work / "datasketch.jsonl",
               TEXT_OURS: work / "ours-text.jsonl", TEXT_PEER: work / "datasketch-text.jsonl"}
    dump = work / "text-dump.jsonl"
    runs: dict[str, Callable[[], float]] = {
        "ours, 2 jobs": lambda: run_ours(files, outputs["ours, 2 jobs"], t, 2, SAME_SIZE),
        "ours, 1 job": lambda: run_ours(files, outputs["ours, 1 job"], t, 1, SAME_SIZE),
        "datasketch": lambda: run_datasketch(files, outputs["datasketch"], t),
        "read+canonicalise": lambda: run_canonicalise_only(files),
        TEXT_OURS: lambda: run_ours_text(dump, outputs[TEXT_OURS], t, 2, SAME_SIZE),
        TEXT_PEER: lambda: run_datasketch_text(dump, outputs[TEXT_PEER], t),
    }
    if not args.skip_speed:
        write_text_dump(files, dump)
        results["corpus"]["text_dump_megabytes"] = round(dump.stat().st_size / 1e6, 1)
        for f in files:  # warm the page cache: every pipeline reads the same cached files
            f.read_bytes()
        speed = {}
        for name, m in measured(args.repeats, runs).items():
            speed[name] = {"seconds": round(m["seconds"], 2),
                           "runs": [round(x, 2) for x in m["runs"]],
                           "docs_per_second": round(len(files) / m["seconds"], 1),
                           "cpu_seconds": round(m["cpu_seconds"], 2),
                           "docs_per_cpu_second": round(len(files) / m["cpu_seconds"], 1)}
        results["speed"] = speed
    if not args.skip_accuracy:
        if args.skip_speed:
            for name in ("ours, 2 jobs", "ours, 1 job", "datasketch"):
                runs[name]()
        # our default sample size, for accuracy only
        outputs[DEFAULT] = work / "ours-100.jsonl"
        run_ours(files, outputs[DEFAULT], t, 2, SketchParams())
        log("accuracy: exact shingle sets of every document")
        streams = [html_tokens(f.read_bytes()) for f in files]
        exact = ExactSets(streams)
        pairs = similar_pairs(exact, min(1.0, t + 0.1))
        index_of = {f.name: i for i, f in enumerate(files)}
        spread = [exact.resemblance(index_of[e], index_of[o]) for e, (o, _) in edits.items()]
        results["corpus"]["pairs_at_or_above_t_plus_0.1"] = len(pairs)
        results["corpus"]["edit_resemblance_quartiles"] = [
            round(float(q), 3) for q in np.quantile(spread, [0.25, 0.5, 0.75])
        ]
        results["accuracy"] = {
            name: judge(outputs[name], index_of, exact, pairs, t, edits)
            for name in ACCURACY_ROWS
        }
        ours_1 = outputs["ours, 1 job"]
        if ours_1.exists():
            same = ours_1.read_bytes() == outputs["ours, 2 jobs"].read_bytes()
            results["accuracy"]["ours, 1 job identical to 2 jobs"] = same
        for name, html_name in ((TEXT_OURS, "ours, 2 jobs"), (TEXT_PEER, "datasketch")):
            if outputs[name].exists():  # the text dump has the pages' tokens: same clusters
                same = _decisions(outputs[name]) == _decisions(outputs[html_name])
                results["accuracy"][f"{name} decided as from HTML"] = same
    return results


def render(results: dict[str, Any]) -> str:
    t = results["threshold"]
    lines: list[str] = []
    corpus = results.get("corpus")
    if corpus:
        lines += [
            f"corpus: {corpus['documents']:,} documents ({corpus['real_pages']:,} real Debian "
            f"documentation pages + {corpus['edited_copies']:,} edited copies), "
            f"{corpus['megabytes']} MB of HTML; threshold {t}",
        ]
        if "edit_resemblance_quartiles" in corpus:
            q = corpus["edit_resemblance_quartiles"]
            lines.append(f"edited copies vs their originals, exact resemblance quartiles: "
                         f"{q[0]} / {q[1]} / {q[2]}; pairs with exact resemblance >= "
                         f"{min(1.0, t + 0.1):.1f}: {corpus['pairs_at_or_above_t_plus_0.1']:,}")
        lines.append("")
    accuracy = results.get("accuracy")
    if accuracy:
        names = [n for n in ACCURACY_ROWS if n in accuracy]
        lines.append("ACCURACY (exact = Jaccard of the sets of 4-unit shingles, §4.3, which both "
                     "pipelines sample)")
        heads = {"ours, 2 jobs": "ours, MIN_128", DEFAULT: "ours, MIN_100"}
        lines.append(f"{'':<34}" + "".join(f"{heads.get(n, n):>16}" for n in names))
        for key, label in (("documents", "documents"), ("clusters", "clusters"),
                           ("dropped", "dropped (joined a cluster)"),
                           ("false_drops", f"false drops (exact < {t - 0.1:.1f})"),
                           ("missed_duplicates", f"missed duplicates (exact >= {t + 0.1:.1f})")):
            lines.append(f"{label:<34}" + "".join(f"{accuracy[n][key]:>16,}" for n in names))
        lines.append("edited copies in their original's cluster, by exact resemblance:")
        labels = sorted({k for n in names for k in accuracy[n]["edits_joined_by_resemblance"]})
        for label in labels:
            cells = []
            for n in names:
                total, joined = accuracy[n]["edits_joined_by_resemblance"].get(label, [0, 0])
                cells.append(f"{joined:>6}/{total:<5} {joined / total if total else 0:>4.0%}")
            lines.append(f"  {label:<32}" + "".join(f"{c:>16}" for c in cells))
        for n in names:
            for ex in accuracy[n]["false_drop_examples"]:
                lines.append(f"  false drop ({heads.get(n, n)}): {ex['id']} exact {ex['exact']}, "
                             f"estimated {ex['estimate']}")
        if "ours, 1 job identical to 2 jobs" in accuracy:
            lines.append(f"ours: 1 job and 2 jobs wrote identical files: "
                         f"{accuracy['ours, 1 job identical to 2 jobs']}")
        for name in (TEXT_OURS, TEXT_PEER):
            key = f"{name} decided as from HTML"
            if key in accuracy:
                lines.append(f"{name} (from the text dump) decided every document as from the "
                             f"HTML: {accuracy[key]}")
        lines.append("")
    speed = results.get("speed")
    if speed:
        lines.append("SPEED (end to end: read, canonicalise, sketch, cluster, write; median)")
        lines.append(f"{'':<20}{'docs/s':>9}{'wall s':>9}{'CPU s':>9}{'docs/CPU-s':>12}   "
                     "wall-time runs")
        for name, row in speed.items():
            note = {"datasketch": "  (single process)", TEXT_PEER: "  (single process)",
                    "read+canonicalise": "  (shared by both; no sketch, no clustering)"}.get(name, "")
            lines.append(f"{name:<20}{row['docs_per_second']:>9,.1f}{row['seconds']:>9.2f}"
                         f"{row['cpu_seconds']:>9.2f}{row['docs_per_cpu_second']:>12,.1f}   "
                         f"{row['runs']}{note}")
        base = speed["datasketch"]
        for name, peer in (("ours, 2 jobs", "datasketch"), ("ours, 1 job", "datasketch"),
                           (TEXT_OURS, TEXT_PEER)):
            if name not in speed:
                continue
            wall = speed[name]["docs_per_second"] / speed[peer]["docs_per_second"]
            cpu = speed[name]["docs_per_cpu_second"] / speed[peer]["docs_per_cpu_second"]
            lines.append(f"ratio {name} / {peer}: {wall:.2f}x docs/s, {cpu:.2f}x docs per "
                         "CPU-second")
        if "read+canonicalise" in speed:
            # if our sketching and clustering cost nothing and 2 cores shared the canonicalising
            bound = speed["read+canonicalise"]["cpu_seconds"] / 2
            lines.append(f"bound: were our sketching and clustering free and canonicalising spread "
                         f"over 2 cores, ours would be {base['cpu_seconds'] / bound:.1f}x "
                         "datasketch's docs/s at most")
        lines.append("")
    scale = results.get("scale")
    if scale:
        lines.append("SCALE (synthetic MIN_100 sketches, GreedyClusterer over the LMDB Store; "
                     "fresh process per size)")
        lines.append(f"{'documents':>10}{'done':>10}{'µs/doc':>10}{'last 10%':>10}"
                     f"{'own MB':>8}{'RSS MB':>8}{'index MB':>10}{'clusters':>10}")
        for row in scale:
            flag = "" if row["finished"] else "  stopped at the time budget"
            lines.append(f"{row['size']:>10,}{row['done']:>10,}{row['us_per_doc']:>10,.0f}"
                         f"{row['us_per_doc_last_tenth']:>10,.0f}{row.get('peak_anon_mb', 0):>8,.0f}"
                         f"{row['peak_rss_mb']:>8,.0f}{row['index_mb']:>10,.0f}"
                         f"{row['new_clusters']:>10,}{flag}")
        lines.append("  own MB: peak of the process's own memory (RssAnon); RSS MB: peak resident "
                     "set (VmHWM), which also counts the index file's pages mapped by LMDB")
        for row in scale:
            if len(row.get("runs_us_per_doc", [])) > 1:
                lines.append(f"  {row['size']:,}: median of runs at "
                             f"{', '.join(f'{x:.0f}' for x in row['runs_us_per_doc'])} µs/doc")
        lines.append("")
    lines += goals(results)
    lines.append(f"(1-minute load average of this shared 2-core machine: "
                 f"{results['load_average_at_start']} at the start, "
                 f"{results['load_average_at_end']} at the end)")
    return "\n".join(lines)


def goals(results: dict[str, Any]) -> list[str]:
    """The figures against the goals, each marked met or not met."""
    out = ["GOALS"]
    speed, accuracy, scale = results.get("speed"), results.get("accuracy"), results.get("scale")
    if speed:
        for name, peer, what in (("ours, 2 jobs", "datasketch", "HTML pages"),
                                 (TEXT_OURS, TEXT_PEER, "the same pages as a text dump")):
            if name in speed:
                ratio = speed[name]["docs_per_second"] / speed[peer]["docs_per_second"]
                out.append(f"  >= 5x datasketch's docs/s, {what}: {ratio:.2f}x  "
                           f"{'met' if ratio >= 5 else 'NOT met'}")
    if accuracy:
        peer = accuracy["datasketch"]
        for name, label in (("ours, 2 jobs", "MIN_128"), (DEFAULT, "MIN_100, our default")):
            if name not in accuracy:
                continue
            ours = accuracy[name]
            for key, what in (("false_drops", "false drops"), ("missed_duplicates", "missed dups")):
                ok = ours[key] <= peer[key]
                out.append(f"  no more {what} than datasketch ({label}): {ours[key]} vs "
                           f"{peer[key]}  {'met' if ok else 'NOT met'}")
    if scale:
        first = scale[0]
        for row in scale[1:]:
            if not row["finished"]:
                out.append(f"  flat time per document to {row['size']:,}: not finished "
                           f"({row['done']:,} in the budget; {row['us_per_doc']:.0f} µs/doc vs "
                           f"{first['us_per_doc']:.0f} at {first['size']:,})  NOT met")
                continue
            growth = row["us_per_doc"] / first["us_per_doc"]
            out.append(f"  flat time per document ({first['size']:,} -> {row['size']:,}, "
                       f"within 1.5x): {growth:.2f}x  {'met' if growth <= 1.5 else 'NOT met'}")
            if first.get("peak_anon_mb"):
                grown = row["peak_anon_mb"] / first["peak_anon_mb"]
                out.append(f"  flat own memory ({first['size']:,} -> {row['size']:,}, within "
                           f"1.5x): {first['peak_anon_mb']:.0f} -> {row['peak_anon_mb']:.0f} MB, "
                           f"{grown:.2f}x  {'met' if grown <= 1.5 else 'NOT met'}")
    return out


if __name__ == "__main__":
    main()
