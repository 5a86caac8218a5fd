"""``neardup recluster`` end to end: real files, real LMDB, the real command line, nothing mocked.

The corpora are made here with a known truth: random base documents over a seeded vocabulary,
and edited versions whose *exact* resemblance to their base is set by construction (k single-word
substitutions, 4 apart, give ``(m − 4k)/(m + 4k)`` over the base's ``m`` distinct 4-shingles)
and checked with dedup's exact measures. Whether a sketch puts an edit in its base's cluster is
random; how many mistakes are allowed comes from the binomial curve (``p_at_least``), not from a
guess (see :func:`allowed_mistakes`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.cli import main
from crawler.recluster.inputs import FileContent, SourceDocument, read_jsonl
from crawler.recluster.run import clusters_line, json_number, recluster
from dedup.canonical import html_tokens, text_tokens
from dedup.cluster import Assignment, Decision, GreedyClusterer, cluster_documents
from dedup.curves import matches_needed, p_at_least
from dedup.document import Sketcher
from dedup.estimators import exact_resemblance
from dedup.params import DedupParams, SketchParams
from dedup.summary import ClusterSummary
from storage.errors import StoreMismatchError
from storage.records import DocumentRecord
from storage.store import Store
from storage.verify import verify_store

ROOT = Path(__file__).resolve().parents[2]
W = 4  # shingle size of the default parameters
S = 100  # sketch size of the default parameters
THRESHOLD = 0.8
#: the chance we accept that a correct implementation fails a statistical assertion here
FAILURE_RISK = 1e-6


# --- corpora with a known truth -----------------------------------------------------------------


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Distinct lower-case words of 3 to 8 letters: one 8-byte unit each, so shingles of units
    are shingles of words, and no word has a digit (edits insert words with digits: fresh)."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 8))))
    return sorted(words)


def base_document(rng: random.Random, vocab: list[str], n: int = 300) -> list[str]:
    """``n`` random words whose ``n − W + 1`` shingles are all distinct (so m is known)."""
    while True:
        tokens = rng.choices(vocab, k=n)
        if len(set(zip(*(tokens[i:] for i in range(W))))) == n - W + 1:
            return tokens


class Fresh:
    """Words no base holds (they have digits), never the same twice."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"e{self.count}"


def substitute(base: list[str], k: int, rng: random.Random, fresh: Fresh) -> list[str]:
    """``base`` with ``k`` words replaced by fresh ones, at positions at least W apart and W − 1
    from either end: each replacement removes W base shingles and adds W new ones, none shared
    with another replacement, so the exact resemblance is ``(m − W·k) / (m + W·k)``."""
    slots = list(range(W - 1, len(base) - W + 1, W))
    edited = list(base)
    for position in rng.sample(slots, k):
        edited[position] = fresh()
    return edited


def designed_resemblance(n: int, k: int) -> float:
    m = n - W + 1
    return (m - W * k) / (m + W * k)


def p_joins(r: float, threshold: float = THRESHOLD) -> float:
    """The chance that a MIN_s estimate of a pair of resemblance r reaches the threshold.

    Binomial (§4.2): the MIN_s count is hypergeometric, whose tails are no heavier than the
    binomial's (Hoeffding 1963), so the allowance built on this is conservative.
    """
    return p_at_least(matches_needed(threshold, S), S, r)


def allowed_mistakes(probabilities: list[float], risk: float = FAILURE_RISK) -> int:
    """The smallest m with P[more than m mistakes] <= risk, mistakes independent with the given
    probabilities (the exact Poisson-binomial distribution, by dynamic programming)."""
    dist = [1.0]
    for p in probabilities:
        nxt = [0.0] * (len(dist) + 1)
        for j, q in enumerate(dist):
            nxt[j] += q * (1 - p)
            nxt[j + 1] += q * p
        dist = nxt
    tail = 1.0
    for m, q in enumerate(dist):
        tail -= q
        if tail <= risk:
            return m
    return len(dist) - 1


#: edits per mixed group: substitutions k → exact resemblance with n = 300 words
EDITS = (2, 4, 12, 20)  # 0.948, 0.898, 0.722, 0.576


def truth_corpus(seed: int = 7, mixed: int = 40, identical: int = 10, singles: int = 30):
    """Documents (id, tokens) and the truth about each.

    ``mixed`` groups: a base, an exact copy and one edit per :data:`EDITS`; ``identical``
    groups: a base and two copies; ``singles`` bases alone. All bases come first, then every
    other document in a shuffled order, so each base is its cluster's first member.
    """
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    fresh = Fresh()
    params = SketchParams()
    sketcher = Sketcher(params)
    bases, others = [], []
    truth: dict[str, dict] = {}
    for g in range(mixed + identical + singles):
        base = base_document(rng, vocab)
        bid = f"base-{g}"
        bases.append((bid, base))
        truth[bid] = {"base": bid, "r": 1.0, "kind": "base"}
        if g < mixed:
            others.append((f"copy-{g}", base))
            truth[f"copy-{g}"] = {"base": bid, "r": 1.0, "kind": "copy"}
            base_set = sketcher.exact_shingles(base)
            assert len(base_set) == len(base) - W + 1
            for k in EDITS:
                edited = substitute(base, k, rng, fresh)
                r = exact_resemblance(base_set, sketcher.exact_shingles(edited))
                assert r == designed_resemblance(len(base), k)
                others.append((f"edit-{g}-{k}", edited))
                truth[f"edit-{g}-{k}"] = {"base": bid, "r": r, "kind": "edit"}
        elif g < mixed + identical:
            for c in range(2):
                others.append((f"copy-{g}-{c}", base))
                truth[f"copy-{g}-{c}"] = {"base": bid, "r": 1.0, "kind": "copy"}
    rng.shuffle(others)
    return bases + others, truth


def write_jsonl(path: Path, docs: list[tuple[str, list[str]]]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for doc_id, tokens in docs:
            # punctuation and capitals are canonicalised away: the stream is the tokens again
            text = " ".join(tokens).capitalize() + "."
            fh.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return path


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_contract(lines: list[dict], ids: list[str]) -> dict[int, list[dict]]:
    """Every line follows the clusters contract; returns the clusters, members in order."""
    assert [line["id"] for line in lines] == ids
    clusters: dict[int, list[dict]] = defaultdict(list)
    for line in lines:
        assert {"id", "cluster", "representative", "resemblance"} <= set(line)
        assert isinstance(line["id"], str)
        assert isinstance(line["cluster"], int) and not isinstance(line["cluster"], bool)
        assert line["cluster"] >= 0
        assert isinstance(line["representative"], bool)
        assert isinstance(line["resemblance"], float) and 0.0 <= line["resemblance"] <= 1.0
        # the representative is the first member (the "first" rule), and resembles itself fully
        assert line["representative"] == (line["cluster"] not in clusters)
        if line["representative"]:
            assert line["resemblance"] == 1.0
        clusters[line["cluster"]].append(line)
    return clusters


def summary_of(clusters: dict[int, list[dict]], content: dict[str, object]) -> dict[str, int]:
    """The paper's table, recounted from the output file and the documents' contents."""
    table = Counter()
    for members in clusters.values():
        size = len(members)
        table["documents"] += size
        table["clusters"] += 1
        if size == 1:
            table["singletons"] += 1
            continue
        table["duplicate_clusters"] += 1
        table["duplicate_documents"] += size
        first = content[members[0]["id"]]
        kind = "identical" if all(content[m["id"]] == first for m in members) else "mixed"
        table[f"{kind}_clusters"] += 1
        table[f"{kind}_documents"] += size
    table["duplicates"] = table["documents"] - table["clusters"]
    return dict(table)


def run_cli(capsys, *argv: str) -> dict:
    assert main(["recluster", *argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


# --- the known truth, through the command line ---------------------------------------------------


@pytest.fixture(scope="module")
def truth():
    return truth_corpus()


def test_clusters_match_the_truth_within_the_binomial_error(tmp_path, capsys, truth):
    docs, known = truth
    corpus = write_jsonl(tmp_path / "corpus.jsonl", docs)
    out = tmp_path / "clusters.jsonl"
    report = run_cli(capsys, "--jsonl", str(corpus), "-o", str(out),
                     "--threshold", str(THRESHOLD), "-j", "2")
    lines = read_lines(out)
    clusters = check_contract(lines, [doc_id for doc_id, _ in docs])
    where = {line["id"]: line for line in lines}

    # certain: bases are unrelated (resemblance ~0), copies are exact duplicates of their base
    probabilities, mistakes = [], []
    for doc_id, fact in known.items():
        line, base = where[doc_id], where[fact["base"]]
        if fact["kind"] == "base":
            assert line["representative"], doc_id
        elif fact["kind"] == "copy":
            assert line["cluster"] == base["cluster"] and line["decision"] == "exact_duplicate"
            assert line["resemblance"] == 1.0
        else:
            should_join = fact["r"] >= THRESHOLD
            joined = line["cluster"] == base["cluster"]
            p = p_joins(fact["r"])
            probabilities.append(1 - p if should_join else p)
            if joined != should_join:
                mistakes.append((doc_id, fact["r"], line["resemblance"]))
            if joined:
                assert line["decision"] == "near_duplicate" and line["resemblance"] >= THRESHOLD
    allowed = allowed_mistakes(probabilities)
    expected = sum(probabilities)
    assert len(mistakes) <= allowed, (mistakes, f"expected {expected:.2f}, allowed {allowed}")
    assert allowed < len(probabilities) / 10  # the allowance leaves the test teeth

    # the summary is the table recounted from the output file; copies make identical-only ones
    content = {doc_id: tuple(tokens) for doc_id, tokens in docs}
    assert report["summary"] == summary_of(clusters, content)
    assert report["summary"]["identical_clusters"] == 10
    assert report["summary"]["identical_documents"] == 30
    assert report["skipped"] == {}
    assert report["parameters"]["threshold"] == THRESHOLD


def test_jobs_1_and_2_write_identical_files(tmp_path, truth):
    docs, _ = truth
    corpus = write_jsonl(tmp_path / "corpus.jsonl", docs)
    outputs = []
    for jobs in (1, 2):
        buffer = io.StringIO()
        result = recluster(read_jsonl([corpus]), SketchParams(), DedupParams(threshold=THRESHOLD),
                           out=buffer, jobs=jobs)
        outputs.append((buffer.getvalue(), result.summary.to_dict()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0].count("\n") == len(docs)


def test_map_growth_from_a_tiny_map_changes_nothing(tmp_path, truth):
    docs, _ = truth
    corpus = write_jsonl(tmp_path / "corpus.jsonl", docs)
    runs = []
    for name, map_size in (("small", 64 * 1024), ("large", 1 << 30)):
        buffer = io.StringIO()
        result = recluster(read_jsonl([corpus]), SketchParams(), DedupParams(threshold=THRESHOLD),
                           out=buffer, jobs=1, index_dir=tmp_path / name, map_size=map_size)
        runs.append((buffer.getvalue(), result.stats))
    (small, small_stats), (large, large_stats) = runs
    assert small_stats["map_growths"] >= 2 and large_stats["map_growths"] == 0
    assert small == large
    for name in ("small", "large"):
        report = verify_store(tmp_path / name)
        assert report.ok, report.problems
        assert report.documents == len(docs)


# --- WARC input: the crawler's canonicalisation, charset included -------------------------------


def _warc_record(writer: WARCWriter, url: str, body: bytes, ctype: str | None, status: str = "200 OK"):
    headers = [("Content-Length", str(len(body)))]
    if ctype is not None:
        headers.insert(0, ("Content-Type", ctype))
    http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                                  length=len(body),
                                                  http_headers=http))


def _html(tokens: list[str], title: str) -> str:
    paragraphs = "".join(f"<p>{' '.join(tokens[i:i + 40])}</p>\n" for i in range(0, len(tokens), 40))
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{paragraphs}</body></html>"


def warc_pages(tmp_path: Path):
    """A WARC.gz file of responses (some near duplicates, a copy, a charset known only from the
    header), plus a PNG, a text/plain page, a 404 page, a request record and a revisit record
    (a copy deduplicated at crawl time); and the HTML pages as (url, body, charset)."""
    rng = random.Random(3)
    vocab, fresh = vocabulary(rng, 1000), Fresh()
    a, b = base_document(rng, vocab, 250), base_document(rng, vocab, 250)
    cyrillic = " ".join(["Съешь же ещё этих мягких французских булок да выпей чаю"] * 12)
    koi8 = f"<html><body><p>{cyrillic}</p></body></html>".encode("koi8-r")
    utf8 = f'<html><head><meta charset="utf-8"></head><body><p>{cyrillic}</p></body></html>'
    pages = [
        ("http://site.test/a", _html(a, "A").encode(), None),
        ("http://site.test/a-edit", _html(substitute(a, 2, rng, fresh), "A").encode(), None),
        ("http://site.test/b", _html(b, "B").encode("utf-8"), "utf-8"),
        ("http://site.test/a-mirror", _html(a, "A").replace("<p>", "<p class=x>").encode(), None),
        ("http://site.test/koi8", koi8, "koi8-r"),
        ("http://site.test/b-far", _html(substitute(b, 20, rng, fresh), "B").encode(), None),
        ("http://site.test/utf8", utf8.encode("utf-8"), None),
    ]
    path = tmp_path / "crawl.warc.gz"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i, (url, body, charset) in enumerate(pages):
            ctype = "text/html" + (f"; charset={charset}" if charset else "")
            _warc_record(writer, url, body, ctype)
            if i == 1:
                _warc_record(writer, "http://site.test/logo.png", b"\x89PNG\r\n\x1a\n\0\0", "image/png")
                request = b"GET /a HTTP/1.1\r\nHost: site.test\r\n\r\n"
                writer.write_record(writer.create_warc_record(
                    "http://site.test/a", "request", payload=io.BytesIO(request),
                    length=len(request)))
            if i == 3:
                _warc_record(writer, "http://site.test/notes.txt", b"plain words " * 50, "text/plain")
                _warc_record(writer, "http://site.test/gone", _html(a, "A").encode(), "text/html",
                             "404 Not Found")
                http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")],
                                        protocol="HTTP/1.1")  # fmt: skip
                writer.write_record(writer.create_revisit_record(
                    "http://site.test/a-copy", "sha1:AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH",
                    "http://site.test/a", "2024-01-02T03:04:05Z", http_headers=http))
    return path, pages


def test_warc_input_is_canonicalised_as_the_crawler_does(tmp_path, capsys):
    path, pages = warc_pages(tmp_path)
    koi8_body = pages[4][1]
    # the test means something: without the header's charset the tokens would differ
    assert html_tokens(koi8_body, encoding="koi8-r") != html_tokens(koi8_body)
    out = tmp_path / "clusters.jsonl"
    report = run_cli(capsys, "--warc", str(path), "-o", str(out), "--threshold", "0.8", "-j", "1")

    params, dedup = SketchParams(), DedupParams(threshold=0.8)
    sketcher = Sketcher(params)
    made = [sketcher.sketch(html_tokens(body, encoding=charset)) for _, body, charset in pages]
    expected = cluster_documents([(m.sketch, m.content_hash) for m in made], dedup)
    lines = read_lines(out)
    check_contract(lines, [url for url, _, _ in pages])
    for line, want in zip(lines, expected):
        assert line["cluster"] == want.cluster_id
        assert line["decision"] == want.decision.kind
        assert line["representative"] == want.representative
        if not want.representative:
            assert line["resemblance"] == round(want.decision.resemblance, 6)
    kinds = [line["decision"] for line in lines]
    # the edit joins a; the re-marked-up mirror and the UTF-8 copy of the KOI8-R page are exact
    assert kinds == ["kept", "near_duplicate", "kept", "exact_duplicate", "kept", "kept",
                     "exact_duplicate"]
    skipped = report["skipped"]
    assert skipped.pop("http_404") == 1
    assert skipped.pop("revisit") == 1  # its content is the record it refers to
    assert sorted(skipped) == ["not_html (image/png)", "not_html (text/plain)"]
    assert sum(skipped.values()) == 2
    assert report["summary"]["documents"] == len(pages)


def test_html_files_are_read_where_they_are_sketched_and_cluster_as_their_pages(
    tmp_path, capsys
):
    # the decisions are those of the pages' bytes sketched here, page for page
    path, pages = warc_pages(tmp_path)
    html = [(url, body) for url, body, charset in pages if charset in (None, "utf-8")]
    mirror = tmp_path / "mirror"
    (mirror / "b").mkdir(parents=True)
    names = []
    for k, (_, body) in enumerate(html):
        name = mirror / ("b" if k % 2 else "") / f"p{k:02d}.html"
        name.write_bytes(body)
        names.append(str(name))
    (mirror / "notes.txt").write_text("not a page")  # no HTML suffix: not read
    out = tmp_path / "clusters.jsonl"
    for jobs in ("1", "2"):
        report = run_cli(capsys, "--html", str(mirror), "-o", str(out), "-j", jobs)
        lines = read_lines(out)
        assert [line["id"] for line in lines] == sorted(names)  # a directory: sorted paths
        by_name = {line["id"]: line for line in lines}
        params, dedup = SketchParams(), DedupParams()
        sketcher = Sketcher(params)
        made = [sketcher.sketch(html_tokens(Path(n).read_bytes())) for n in sorted(names)]
        expected = cluster_documents([(m.sketch, m.content_hash) for m in made], dedup)
        assert {a.decision.kind for a in expected} >= {"kept", "near_duplicate"}
        for name, want in zip(sorted(names), expected):
            assert by_name[name]["cluster"] == want.cluster_id
            assert by_name[name]["decision"] == want.decision.kind
        assert report["summary"]["documents"] == len(names)
    # files named one by one are taken in the order given
    run_cli(capsys, "--html", names[3], names[0], "-o", str(out), "-j", "2")
    assert [line["id"] for line in read_lines(out)] == [names[3], names[0]]


def test_an_html_file_gone_before_it_is_read_is_skipped(tmp_path):
    kept = tmp_path / "kept.html"
    kept.write_text("<p>a page of a few words that stays where it was put</p>")
    docs = [SourceDocument("gone", "html", FileContent(str(tmp_path / "gone.html"))),
            SourceDocument("kept", "html", FileContent(str(kept)))]
    out = io.StringIO()
    result = recluster(docs, SketchParams(), DedupParams(), out=out, jobs=2)
    assert result.skipped == {"unreadable (No such file or directory)": 1}
    assert [json.loads(line)["id"] for line in out.getvalue().splitlines()] == ["kept"]


def test_a_page_nested_too_deep_is_skipped_with_its_reason(tmp_path, capsys):
    # building its tree would take minutes (quadratic in depth): skipped, the rest clustered
    path = tmp_path / "deep.warc.gz"
    deep = "<div>" * 100_000 + "down here" + "</div>" * 100_000
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        _warc_record(writer, "http://site.test/deep", deep.encode(), "text/html")
        _warc_record(writer, "http://site.test/fine", b"<p>shallow words here</p>", "text/html")
    out = tmp_path / "clusters.jsonl"
    report = run_cli(capsys, "--warc", str(path), "-o", str(out), "-j", "2")
    assert report["skipped"] == {"too_deep": 1}
    assert [line["id"] for line in read_lines(out)] == ["http://site.test/fine"]


def test_warc_and_jsonl_of_the_same_canonical_text_cluster_alike(tmp_path, capsys):
    path, pages = warc_pages(tmp_path)
    corpus = tmp_path / "pages.jsonl"
    with open(corpus, "w", encoding="utf-8") as fh:
        for url, body, charset in pages:
            text = " ".join(html_tokens(body, encoding=charset))
            assert text_tokens(text) == html_tokens(body, encoding=charset)
            fh.write(json.dumps({"url": url, "body": text}) + "\n")
    run_cli(capsys, "--warc", str(path), "-o", str(tmp_path / "w.jsonl"), "-j", "1")
    run_cli(capsys, "--jsonl", str(corpus), "--id-field", "url", "--text-field", "body",
            "-o", str(tmp_path / "j.jsonl"), "-j", "1")
    assert read_lines(tmp_path / "w.jsonl") == read_lines(tmp_path / "j.jsonl")


# --- store input: a crawl's kept pages, read-only --------------------------------------------------


HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Server", "test")]


def crawl_into_store(path: Path, bodies: list[tuple[str, bytes]], params: SketchParams,
                     threshold: float, batch: int = 256) -> list[int]:
    """Decide, store and record each page as a crawl does; returns the kept pages' indexes."""
    sketcher = Sketcher(params)
    kept = []
    with Store.open(path, params) as store:
        clusterer = GreedyClusterer(store.index, DedupParams(threshold=threshold))
        for start in range(0, len(bodies), batch):
            with store.batch():
                for i in range(start, min(start + batch, len(bodies))):
                    url, body = bodies[i]
                    made = sketcher.sketch(html_tokens(body, encoding="utf-8"))
                    decision = clusterer.decide(made.sketch, made.content_hash)
                    doc_id = store.next_doc_id()
                    location = None
                    if decision.kind == "kept":
                        location = store.pages.append(url, 200, HEADERS, body)
                        kept.append(i)
                    a = clusterer.apply(doc_id, made.sketch, made.content_hash, decision)
                    decided = decision.kind
                    record = DocumentRecord(url, decided, time.time(), a.cluster_id,
                                            made.content_hash, location)
                    store.put_document(doc_id, record, made.sketch)
    return kept


def store_pages(
    seed: int, groups: int, n: int = 200, kinds: tuple[str, ...] = ("base", "near", "copy", "far")
) -> list[tuple[str, bytes]]:
    """Groups of a base page, a near edit (1 substitution), a copy and a far edit (10), in order.

    With 3-shingles the far edit resembles its base (198 − 30)/(198 + 30) = 0.737: a MIN_64
    crawl at 0.9 keeps it (it drops it with probability 7e-4) and re-clustering at 0.5 joins it
    to its base (misses with probability 1.5e-5), by :func:`dedup.curves.p_at_least`.
    """
    rng = random.Random(seed)
    vocab, fresh = vocabulary(rng, 3000), Fresh()
    pages = []
    for g in range(groups):
        base = base_document(rng, vocab, n)
        for name, tokens in (("base", base), ("near", substitute(base, 1, rng, fresh)),
                             ("copy", base), ("far", substitute(base, 10, rng, fresh))):
            if name in kinds:
                pages.append((f"http://site.test/{g}/{name}", _html(tokens, name).encode()))
    return pages


def checksums(root: Path) -> dict[str, str]:
    """Every file of a store but LMDB's lock file: that is the shared table in which readers
    register by design (it holds no data)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "lock.mdb"
    }


def test_store_input_reclusters_kept_pages_read_only(tmp_path, capsys):
    params = SketchParams(shingle_size=3, size=64)  # not the defaults: the store's are adopted
    pages = store_pages(seed=11, groups=8)
    store = tmp_path / "store"
    kept = crawl_into_store(store, pages, params, threshold=0.9)
    names = Counter(pages[i][0].rsplit("/", 1)[1] for i in kept)
    # the crawl dropped every copy (certain) and kept the bases and nearly all far edits
    assert names["copy"] == 0 and names["base"] == 8 and names["far"] >= 6
    before = checksums(store)
    out = tmp_path / "clusters.jsonl"
    report = run_cli(capsys, "--store", str(store), "-o", str(out), "--threshold", "0.5", "-j", "2")
    assert checksums(store) == before
    assert report["parameters"]["sketch"] == params.to_dict()
    assert report["parameters"]["threshold"] == 0.5

    sketcher = Sketcher(params)
    made = [sketcher.sketch(html_tokens(pages[i][1])) for i in kept]
    expected = cluster_documents([(m.sketch, m.content_hash) for m in made],
                                 DedupParams(threshold=0.5))
    lines = read_lines(out)
    check_contract(lines, [pages[i][0] for i in kept])
    assert [line["cluster"] for line in lines] == [a.cluster_id for a in expected]
    assert [line["resemblance"] for line in lines] == [
        1.0 if a.representative else round(a.decision.resemblance, 6) for a in expected]
    table = ClusterSummary()
    for a in expected:
        table.add(a)
    assert report["summary"] == table.to_dict()
    assert table.mixed_clusters >= 6  # the far edits found their bases again
    assert verify_store(store).ok


def test_reopening_a_store_with_other_parameters_is_a_one_line_error(tmp_path):
    crawl_into_store(tmp_path / "s", store_pages(seed=5, groups=1), SketchParams(shingle_size=3), 0.9)
    with pytest.raises(StoreMismatchError) as info:
        Store.open(tmp_path / "s", SketchParams(shingle_size=5))
    message = str(info.value)
    assert "\n" not in message
    assert "sketch.shingle_size=3" in message and "asks for 5" in message


def test_user_mistakes_are_one_line_errors(tmp_path, capsys):
    index = tmp_path / "index"
    index.mkdir()
    (index / "something").write_text("x")
    corpus = write_jsonl(tmp_path / "c.jsonl", [("a", ["one", "two"])])
    (tmp_path / "a-file").write_text("x")
    cases = [
        (["--jsonl", str(corpus), "--index", str(index)], "is not empty"),
        (["--jsonl", str(corpus), "--index", str(tmp_path / "a-file")], "is not a directory"),
        (["--jsonl", str(corpus), "--index", str(tmp_path / "a-file" / "sub")], "cannot create"),
        (["--jsonl", str(corpus), "-j", "0"], "--jobs must be at least 1"),
        (["--jsonl", str(tmp_path / "missing.jsonl")], "cannot read"),
        (["--html", str(tmp_path / "missing.html")], "cannot read"),
        (["--warc", str(corpus)], "is not a WARC file"),
        (["--store", str(tmp_path / "nowhere")], "cannot open store"),
        ([], "nothing to cluster"),
    ]
    for argv, words in cases:
        code = main(["recluster", "-o", str(tmp_path / "o.jsonl"), "-q", "-j", "1", *argv])
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and err.startswith("neardup recluster: error:"), err
        assert words in err, err
    assert os.listdir(index) == ["something"]


# --- SIGKILL: the input store untouched, both stores verifiable ---------------------------------


def _group_alive(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry))
    return alive


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_sigkill_mid_run_leaves_input_intact_and_index_verifiable(tmp_path):
    store = tmp_path / "store"
    # about 2,200 kept pages: over a second of re-clustering even on an idle machine
    pages = store_pages(seed=13, groups=1100, n=150, kinds=("base", "far"))
    crawl_into_store(store, pages, SketchParams(), 0.9, 1024)
    before = checksums(store)
    rng = random.Random(17)
    committed = []
    for attempt in range(5):
        index, out = tmp_path / f"index-{attempt}", tmp_path / f"out-{attempt}.jsonl"
        proc = subprocess.Popen(
            [sys.executable, "-m", "crawler.cli", "recluster", "--store", str(store),
             "--index", str(index), "-o", str(out), "-q", "-j", "2"],
            cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        # the first kill at a random moment soon after the index is created (most likely
        # before its first commit), the others at a random moment after a commit: lines are
        # written only after their batch commits, so a non-empty output file means one did
        # (the file being written, that is: -o is put in place when the run has finished)
        started = index / "index" / "data.mdb"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            started.exists() and (attempt == 0 or _has_lines(out))
        ):
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        if proc.wait(10) != -signal.SIGKILL:
            # on a quiet machine the run can finish first; that attempt kills nothing
            assert proc.returncode == 0, proc.stderr.read()
        proc.stderr.close()
        # the workers notice and exit: no orphan keeps the index (or its lock) busy
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _group_alive(proc.pid)

        assert checksums(store) == before
        partial = verify_store(index)
        assert partial.ok, partial.problems
        partial_out = _being_written(out)
        written = partial_out.read_text(encoding="utf-8").splitlines() if partial_out else []
        assert out.exists() == (partial_out == out)  # a killed run leaves no -o behind
        # whole batches were written only after their commit: the file never runs ahead
        assert partial.documents >= len(written) - 1
        committed.append(partial.documents)
    assert any(0 < n < len(pages) for n in committed), committed  # some kill landed mid-way
    report = verify_store(store)
    assert report.ok, report.problems


def _being_written(out: Path) -> Path | None:
    """The file a run writes -o into (crawler.cli.output_file), or -o once it is in place."""
    parts = sorted(out.parent.glob(f".{out.name}.*.part"))
    return parts[0] if parts else (out if out.exists() else None)


def _has_lines(out: Path) -> bool:
    path = _being_written(out)
    try:
        return path is not None and path.stat().st_size > 0
    except FileNotFoundError:  # put in place between the two looks
        return False


@settings(max_examples=300, deadline=None)
@given(
    st.text(),
    st.integers(0, 2**63 - 1),
    st.booleans(),
    st.sampled_from(["exact_duplicate", "near_duplicate", "contained"]),
    st.one_of(st.none(), st.floats(0, 1), st.just(float("nan"))),
)
def test_a_clusters_line_is_what_json_dumps_writes(
    doc_id: str, cluster: int, first: bool, kind: str, resemblance: float | None
) -> None:
    # the line is formatted by hand for speed; json.dumps of the record is the contract
    decision = Decision("kept") if first else Decision(kind, cluster, 0, 0, resemblance)
    made = Assignment(5, cluster, decision, first, first)
    record = {
        "id": doc_id,
        "cluster": cluster,
        "representative": first,
        "resemblance": 1.0 if first else json_number(resemblance),
        "decision": decision.kind,
    }
    assert clusters_line(doc_id, made) == json.dumps(record, ensure_ascii=False) + "\n"
    assert json.loads(clusters_line(doc_id, made)) == record
