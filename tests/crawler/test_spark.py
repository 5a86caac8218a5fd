"""``neardup recluster --engine spark``: the same clusters as the local engine, on Apache Spark.

Spark runs in local mode, in one session per test worker (the ``spark`` fixture of the
crawler tests' conftest; starting one costs seconds): ``local[2,3]``, two cores, and up to
three attempts per task, so that a task whose Python worker dies is retried as it would be on
a cluster. Every run is compared with the local engine on the same input, byte for byte: same
tokens, same sketches, same decisions. The runs of the command in a process of its own (its
progress and settings, spark-submit) take a JVM each and are marked slow; the agreement on
real pages is not, so the quick loop runs Spark.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from crawler.cli import main  # noqa: E402
from crawler.recluster.inputs import read_jsonl  # noqa: E402
from crawler.recluster.pool import sketch_source  # noqa: E402
from crawler.recluster.run import recluster  # noqa: E402
from crawler.recluster.spark import recluster_spark, tasks  # noqa: E402
from dedup.canonical import html_tokens  # noqa: E402
from dedup.params import DedupParams, SketchParams  # noqa: E402
from storage.records import DocumentRecord  # noqa: E402
from storage.store import Store  # noqa: E402
from storage.texts import stored_text  # noqa: E402
from tests.conftest import html_corpus_or_skip  # noqa: E402
from tests.crawler.test_recluster import (  # noqa: E402
    crawl_into_store,
    store_pages,
    truth_corpus,
    warc_pages,
    write_jsonl,
)
from tests.crawler.test_report import crawled_site  # noqa: E402

PAGES = 160  # real pages of the Debian-packaged documentation, before the planted copies


def cached_frames(spark) -> int:
    """How many frames the session has cached (Spark's cache manager: a test's look inside)."""
    return spark._jsparkSession.sharedState().cacheManager().cachedData().size()


def run(capsys, *argv: str) -> dict:
    assert main(["recluster", *argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def error(capsys, *argv: str) -> str:
    assert main(["recluster", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("neardup recluster: error: ") and "\n" not in err
    return err


def without_timing(report: dict) -> dict:
    drop = {"seconds", "documents_per_second", "engine", "spark", "output", "clustering"}
    return {k: v for k, v in report.items() if k not in drop}


# --- agreement on real pages with planted duplicates ---------------------------------------------


def planted_corpus(folder: Path, count: int = PAGES) -> list[str]:
    """``count`` real HTML pages, then exact copies and edited copies of a third of them (a
    paragraph dropped, a sentence added), interleaved; the file names in input order."""
    pages = html_corpus_or_skip(count)
    rng = random.Random(5)
    chosen = rng.sample(pages, count)
    folder.mkdir()
    names = []
    for n, page in enumerate(chosen):
        body = page.read_bytes()
        names.append(str(folder / f"{n:04d}.html"))
        Path(names[-1]).write_bytes(body)
        if n % 3 == 0:
            kind = ("copy", "drop", "add")[n // 3 % 3]
            if kind == "drop":
                cut = body.find(b"<p", len(body) // 2)
                end = body.find(b"</p>", cut)
                body = body if cut < 0 or end < 0 else body[:cut] + body[end + 4:]
            elif kind == "add":
                body = body.replace(b"</body>", b"<p>One more sentence, planted here.</p></body>")
            names.append(str(folder / f"{n:04d}-{kind}.html"))
            Path(names[-1]).write_bytes(body)
    rng.shuffle(names[len(names) // 2:])  # later copies come in any order, after their pages
    return names


def test_spark_agrees_with_the_local_engine_on_real_pages(spark, tmp_path, capsys):
    names = planted_corpus(tmp_path / "pages")
    local = tmp_path / "local.jsonl"
    expected = run(capsys, "--html", *names, "-o", str(local), "--threshold", "0.8", "-j", "1")
    on_spark = tmp_path / "spark.jsonl"
    got = run(capsys, "--engine", "spark", "--html", *names, "-o", str(on_spark),
              "--threshold", "0.8", "--partitions", "2")
    assert got["engine"] == "spark"
    assert got["spark"] == {"master": "local[2,3]", "cores": 2}  # the session it ran in
    # the cap never bit here, so the two engines must agree on every line
    assert got["clustering"]["capped"] == 0 and expected["clustering"]["capped"] == 0
    assert on_spark.read_bytes() == local.read_bytes()
    assert without_timing(got) == without_timing(expected)
    assert expected["summary"]["mixed_clusters"] >= 10  # the planted edits were found
    assert expected["summary"]["identical_clusters"] >= 10
    for kind in ("kept", "exact_duplicate", "near_duplicate"):
        assert got["clustering"][kind] == expected["clustering"][kind] > 0


@pytest.mark.slow
def test_another_partition_count_and_parquet_give_the_same_rows_in_the_same_order(
        spark, tmp_path, capsys):
    names = planted_corpus(tmp_path / "pages")
    local = tmp_path / "local.jsonl"
    expected = run(capsys, "--html", *names, "-o", str(local), "--threshold", "0.8", "-j", "1")
    parquet = tmp_path / "clusters.parquet"
    again = run(capsys, "--engine", "spark", "--html", *names, "-o", str(parquet),
                "--threshold", "0.8", "--partitions", "3", "--output-format", "parquet")
    assert without_timing(again) == without_timing(expected)
    rows = spark.read.parquet(str(parquet)).orderBy("position").collect()
    lines = [json.loads(line) for line in local.read_text().splitlines()]
    assert [{k: r[k] for k in lines[0]} for r in rows] == lines


@pytest.mark.slow
def test_a_run_tells_its_progress_the_documents_read_then_what_it_does(spark, tmp_path):
    """What the command's progress bar shows: the documents read so far, added by each Spark
    task as it ends (four files: four tasks), all of them once the reading ends, then the
    clustering and the writing."""
    docs, _ = truth_corpus(seed=6, mixed=6, identical=3, singles=8)
    files = [write_jsonl(tmp_path / f"part-{n}.jsonl", docs[n::4]) for n in range(4)]
    told: list[tuple[str, int]] = []
    result = recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(),
                             out=io.StringIO(), on_progress=lambda *said: told.append(said))
    assert result.summary.documents == len(docs)
    phases = [phase for phase, _ in told]
    reading = phases.count("reading")
    assert reading >= 1 and phases == ["reading"] * reading + ["clustering", "writing"]
    read = [n for phase, n in told if phase == "reading"]
    assert read == sorted(read) and read[-1] == len(docs)
    assert told[-2:] == [("clustering", len(docs)), ("writing", len(docs))]


@pytest.mark.slow
def test_containment_rule_and_bad_json_lines_agree(spark, tmp_path, capsys):
    docs, _ = truth_corpus(seed=3, mixed=12, identical=4, singles=10)
    path = write_jsonl(tmp_path / "corpus.jsonl", docs)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("not json at all\n[1, 2]\n" + json.dumps({"id": "x", "body": "no text"}) + "\n")
        fh.write(json.dumps({"text": "an id from the line number, " * 20}) + "\n\n")
    argv = ["--jsonl", str(path), "--threshold", "0.85", "--containment", "0.6"]
    local, on_spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    expected = run(capsys, *argv, "-o", str(local), "-j", "1")
    got = run(capsys, *argv, "-o", str(on_spark), "--engine", "spark", "--partitions", "3")
    assert on_spark.read_bytes() == local.read_bytes()
    assert got["skipped"] == expected["skipped"] == {
        "not_json": 1, "not_an_object": 1, "no_text_field": 1}
    n = len(docs)  # the bad lines follow the documents: each is named by its place
    assert got["first_skipped"] == expected["first_skipped"] == {
        "not_json": f"{path}:{n + 1}", "not_an_object": f"{path}:{n + 2}",
        "no_text_field": f"{path}:{n + 3}"}
    assert without_timing(got) == without_timing(expected)
    assert f'"{path}:' in local.read_text()  # the id from FILE:LINE, as the local engine's


@pytest.mark.slow
def test_chains_of_near_duplicates_take_rounds_and_agree(spark, tmp_path):
    """Each version of a text edits a few words of the one before, so a version's best
    candidate is often the version just before it, itself undecided: with rounds cut into
    ranges of two pending documents, the chain crosses ranges and takes several rounds."""
    rng = random.Random(11)
    words = [f"w{rng.randrange(5000)}" for _ in range(300)]
    docs = []
    for version in range(40):
        docs.append((f"v{version}", list(words)))
        for _ in range(2):
            words[rng.randrange(len(words))] = f"w{rng.randrange(5000)}"
    path = write_jsonl(tmp_path / "versions.jsonl", docs)
    params, dedup = SketchParams(), DedupParams(threshold=0.9)
    expected = io.StringIO()
    recluster(read_jsonl([path]), params, dedup, out=expected, jobs=1)
    runs = {}
    for stretch in (2, 50_000):
        got = io.StringIO()
        result = recluster_spark(spark, tasks(jsonl=[path]), params, dedup, out=got,
                                 partitions=4, stretch=stretch)
        assert got.getvalue() == expected.getvalue()
        runs[stretch] = result.stats["rounds"]
    assert runs[2] > runs[50_000] == 1
    kinds = {json.loads(line)["decision"] for line in expected.getvalue().splitlines()}
    assert kinds == {"kept", "near_duplicate"}
    # a run releases what it cached: a long-lived session (a notebook) does not keep it
    assert cached_frames(spark) == 0


@pytest.mark.slow
def test_cluster_ids_count_kept_documents_across_tasks_partitions_and_empty_tasks(
        spark, tmp_path):
    """A cluster's id is its representative's rank among the kept documents in input order,
    whichever partition numbers it: seven files (seven tasks) over three partitions, a file of
    nothing but exact copies of earlier files (a task with no kept document) and an empty
    file between them, copies and near copies whose representatives sit in other tasks."""
    docs, _ = truth_corpus(seed=8, mixed=10, identical=4, singles=12)
    files = [write_jsonl(tmp_path / f"part-{n}.jsonl", docs[n::5]) for n in range(5)]
    files.insert(2, write_jsonl(tmp_path / "copies.jsonl", [
        (f"again-{doc_id}", words) for doc_id, words in docs[::5]]))
    files.insert(4, write_jsonl(tmp_path / "empty.jsonl", []))
    expected = io.StringIO()
    recluster(read_jsonl(files), SketchParams(), DedupParams(), out=expected, jobs=1)
    for partitions in (3, 1):
        got = io.StringIO()
        recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(), out=got,
                        partitions=partitions)
        assert got.getvalue() == expected.getvalue()
    lines = [json.loads(line) for line in expected.getvalue().splitlines()]
    copies = [line for line in lines if line["id"].startswith("again-")]
    assert copies and all(line["decision"] == "exact_duplicate" for line in copies)
    kept = [line["cluster"] for line in lines if line["decision"] == "kept"]
    assert kept == list(range(len(kept)))
    assert max(line["cluster"] for line in lines) == len(kept) - 1 > 20


@pytest.mark.slow
def test_pairs_estimated_below_the_threshold_and_no_pairs_take_no_round(spark, tmp_path):
    """The rounds are sized by the search's count of documents with a pair to estimate, a
    bound: here every pair estimated falls below the threshold, so no document waits and no
    round is taken; with no shared fingerprint at all there is no pair either. Both runs keep
    every document, as the local engine does."""
    rng = random.Random(5)
    words = [f"w{rng.randrange(5000)}" for _ in range(300)]
    docs = [("original", list(words))]
    for copy in range(5):
        edited = list(words)
        for _ in range(8):  # a resemblance of about 0.8, each time against the original
            edited[rng.randrange(len(edited))] = f"c{copy}w{rng.randrange(5000)}"
        docs.append((f"copy{copy}", edited))
    unrelated = [(f"u{i}", [f"u{i}w{j}" for j in range(50)]) for i in range(4)]
    params, dedup = SketchParams(), DedupParams(threshold=0.95)
    for name, corpus in (("edited", docs), ("unrelated", unrelated)):
        path = write_jsonl(tmp_path / f"{name}.jsonl", corpus)
        expected = io.StringIO()
        recluster(read_jsonl([path]), params, dedup, out=expected, jobs=1)
        got = io.StringIO()
        result = recluster_spark(spark, tasks(jsonl=[path]), params, dedup, out=got,
                                 partitions=2)
        assert got.getvalue() == expected.getvalue()
        assert result.stats["kept"] == len(corpus) and result.stats["rounds"] == 0
        assert (result.stats["comparisons"] > 0) == (name == "edited")


@pytest.mark.slow
def test_arrays_moved_in_many_blobs_agree(spark, tmp_path):
    """In one partition, 3,000 documents' fingerprints, pairs and sketches far exceed one
    blob of :data:`~crawler.recluster.spark.postings.BLOB_BYTES` (a larger one ran the default
    driver out of memory): each step receives its arrays in many blobs and must still agree."""
    from crawler.recluster.spark.postings import BLOB_BYTES

    rng = random.Random(17)
    docs = []
    for base in range(300):
        words = [f"w{rng.randrange(5000)}" for _ in range(200)]
        for version in range(10):
            docs.append((f"t{base}-{version}", list(words)))
            words[rng.randrange(len(words))] = f"w{rng.randrange(5000)}"
    rng.shuffle(docs)
    path = write_jsonl(tmp_path / "many.jsonl", docs)
    params, dedup = SketchParams(), DedupParams(threshold=0.9)
    expected = io.StringIO()
    local = recluster(read_jsonl([path]), params, dedup, out=expected, jobs=1)
    got = io.StringIO()
    result = recluster_spark(spark, tasks(jsonl=[path]), params, dedup, out=got, partitions=1)
    assert got.getvalue() == expected.getvalue()
    assert local.stats["near_duplicate"] > 2000
    # the pairs the one partition estimates (two int64 each) take more than one blob
    assert result.stats["comparisons"] * 16 > BLOB_BYTES


@pytest.mark.slow
def test_exact_cap_cuts_where_the_local_index_cuts_and_agrees(spark, tmp_path, capsys):
    """Families of versions of a page under one template (each version edits three words of
    the one before) share their rarest fingerprints, so a cap of 1 bites. The local index
    keeps a fingerprint's first representative; the search keeps its first leader, which may
    have joined a cluster, so the faster search (--no-exact-cap) misses candidates the local
    engine finds and a few documents are decided differently. With --exact-cap, the default
    for a cap below 64, the search runs again without the leaders that joined, until none
    holds a place under the cap: the local engine's clusters, byte for byte."""
    path = families_under_one_template(tmp_path)
    expected = io.StringIO()
    local = recluster(read_jsonl([path]), SketchParams(), DedupParams(threshold=0.8, cap=1),
                      out=expected, jobs=1)
    assert local.stats["capped"] > 100
    lines = expected.getvalue().splitlines()
    out = tmp_path / "out.jsonl"

    def summary(*extra: str) -> str:
        """The command's summary at a cap of 1, with ``extra`` options; its output in ``out``."""
        assert main(["recluster", "--jsonl", str(path), "--engine", "spark", "--cap", "1",
                     "--threshold", "0.8", *extra, "-o", str(out)]) == 0
        return capsys.readouterr().out

    # the faster search: one pass, a few documents decided otherwise, and the summary points
    # to --exact-cap
    told = summary("--no-exact-cap")
    assert "the candidate search ran" not in told and "--exact-cap picks the same" in told
    got = out.read_text().splitlines()
    assert 0 < sum(a != b for a, b in zip(got, lines)) < len(lines) / 10
    # a cap below the default searches as --exact-cap does by itself, and the summary says how
    # many searches it took and points to --no-exact-cap; asked for, it points nowhere
    for extra, pointer in (((), "--no-exact-cap is faster"), (("--exact-cap",), None)):
        told = summary(*extra)
        assert out.read_text() == expected.getvalue()
        passes = re.search(r"the candidate search ran (\d+) times \(--exact-cap\)", told)
        assert passes and int(passes.group(1)) >= 2, told
        for each in ("--exact-cap picks the same", "--no-exact-cap is faster"):
            assert (each in told) is (each == pointer)
        assert cached_frames(spark) == 0  # every pass released


def families_under_one_template(tmp_path: Path) -> Path:
    """A JSON Lines file of 8 families of 12 versions of a page under one template, each version
    three words edited from the one before, in a shuffled order."""
    rng = random.Random(2)
    template = [f"t{rng.randrange(5000)}" for _ in range(100)]
    docs = []
    for family in range(8):
        words = [f"w{rng.randrange(50000)}" for _ in range(200)]
        for version in range(12):
            docs.append((f"f{family}v{version}", template + words))
            for _ in range(3):
                words[rng.randrange(len(words))] = f"w{rng.randrange(50000)}"
    rng.shuffle(docs)
    return write_jsonl(tmp_path / "families.jsonl", docs)


@pytest.mark.slow
def test_a_pass_after_the_first_estimates_only_what_changed_and_finds_a_full_pass_s_candidates(
    spark, tmp_path
):
    """A pass of --exact-cap after the first estimates again only the documents whose pairs
    changed, and keeps the others' preferences. Its preferences must be a whole pass's with the
    same leaders left out (but for candidates left out, which joined a cluster and which the
    rounds pass over): the same candidates, in the same order, one row per place."""
    from crawler.recluster.spark.candidates import Search, split_copies
    from crawler.recluster.spark.greedy import greedy_rounds
    from crawler.recluster.spark.kept import kept
    from crawler.recluster.spark.run import SHUFFLE_PARTITIONS, run_settings
    from crawler.recluster.spark.sketch import SparkJob, documents

    job = SparkJob(SketchParams(), DedupParams(threshold=0.8, cap=1), 2, exact_cap=True)
    work = tasks(jsonl=[families_under_one_template(tmp_path)])
    with run_settings(spark) as held:  # the search and the rounds as a run drives them
        spark.conf.set(SHUFFLE_PARTITIONS, "2")
        docs = documents(spark, work, job).persist()
        held.append(docs)
        leaders, _ = split_copies(docs)
        search = Search(leaders, job, docs.where("sketch IS NOT NULL"))
        held.append(search)
        settled = False
        while not settled:
            search.stats()
            prefs = kept(search.preferences, held)
            rounds = greedy_rounds(leaders, prefs, 2, job.stretch, search.waiting)
            held += rounds.steps
            settled = search.settled(rounds.decisions, prefs)
        assert search.passes >= 2 and 0 < search.changed < search.waiting
        left_out = set(search._left_out.tolist())
        _, whole = search._search(spark.sparkContext.broadcast(search._left_out))

        def candidates(frame):
            rows = frame.collect()
            places = [(r.d, r.pos) for r in rows]
            assert len(places) == len(set(places))  # one row per place
            by_document = {}
            for r in sorted(rows, key=lambda r: (r.d, r.pos)):
                if r.e not in left_out:
                    by_document.setdefault(r.d, []).append((r.e, r.kind, r.r))
            return by_document

        assert candidates(search.preferences) == candidates(whole)


@pytest.mark.slow
@pytest.mark.parametrize("partitions", [1, 2, 3, 6, 50])
def test_each_bucket_reaches_its_partition_and_partitions_get_equal_shares(spark, partitions):
    """The search's buckets travel under routes (:mod:`crawler.recluster.spark.routes`) so that
    Spark's hash partitioning gives every partition the same number of them (its own hash of
    the bucket numbers gives 12 and 20 of 32 to two partitions). Checked against where
    ``repartition`` really puts each route; and the routes of the output's partitions send
    whole tasks, in order, to each."""
    from crawler.recluster.spark.routes import routes, task_range_route

    buckets = 16 * partitions
    route = routes(spark, buckets, partitions)
    assert len(set(route.tolist())) == buckets
    placed = (
        spark.createDataFrame([(int(r), b) for b, r in enumerate(route)], "bucket int, b int")
        .repartition(partitions, "bucket")
        .selectExpr("b", "spark_partition_id() AS p")
        .collect()
    )
    assert sorted((row.b, row.p) for row in placed) == [(b, b % partitions) for b in range(buckets)]
    tasks = 7
    keys = spark.createDataFrame([(t << 32,) for t in range(tasks)], "key long")
    by_task = (keys.selectExpr("key", f"{task_range_route(spark, 'key', tasks, partitions)} AS r")
               .repartition(partitions, "r").selectExpr("key >> 32 AS t",
                                                        "spark_partition_id() AS p").collect())
    assert sorted((row.t, row.p) for row in by_task) == [
        (t, t * partitions // tasks) for t in range(tasks)]


# --- WARC files, stores, and input that cannot be used -------------------------------------------


@pytest.mark.slow
def test_warc_store_and_html_inputs_with_bad_records(spark, tmp_path, capsys):
    warc, _ = warc_pages(tmp_path)
    # a second WARC that breaks off: its first records count, the break is one skipped document
    # a WARC whose middle is not a record (one gzip member per record, and a stray one)
    whole = Path(warc).read_bytes()
    cut = whole.index(b"\x1f\x8b", len(whole) // 2)
    broken = tmp_path / "broken.warc.gz"
    broken.write_bytes(whole[:cut] + gzip.compress(b"NOT A WARC RECORD\r\n\r\n") + whole[cut:])
    pages = tmp_path / "mirror"
    pages.mkdir()
    (pages / "deep.html").write_text("<div>" * 5000 + "deep" + "</div>" * 5000)
    (pages / "empty.html").write_text("<html><body><script>x()</script></body></html>")
    latin1 = "<p>caf\xe9 cr\xe8me br\xfbl\xe9e </p>".encode("latin-1")
    (pages / "latin1.htm").write_bytes(latin1 * 40)
    params = SketchParams(shingle_size=3, size=64)
    store = tmp_path / "store"
    crawl_into_store(store, store_pages(seed=4, groups=5), params, threshold=0.9)
    argv = ["--store", str(store), "--html", str(pages), "--threshold", "0.5"]
    main_content = ["--content-area", "main"]  # read as the local engine reads it, too
    local = tmp_path / "local.jsonl"
    expected = run(capsys, *argv, "--warc", str(warc), "-o", str(local), "-j", "1")
    assert {"too_deep", "empty", "not_html (image/png)", "http_404"} <= set(expected["skipped"])
    by_main = [tmp_path / "main-local.jsonl", tmp_path / "main-spark.jsonl"]
    expected_main = run(capsys, *argv, *main_content, "--warc", str(warc), "-o", str(by_main[0]))
    got_main = run(capsys, *argv, *main_content, "--warc", str(warc), "-o", str(by_main[1]),
                   "--engine", "spark")
    assert by_main[1].read_bytes() == by_main[0].read_bytes()
    assert without_timing(got_main) == without_timing(expected_main)
    assert expected_main["parameters"]["canonical"] != expected["parameters"]["canonical"]

    # in both engines the records before the break count and the break is named, the same way
    both = ["--warc", str(warc), str(broken)]
    local_broken, on_spark = tmp_path / "local-broken.jsonl", tmp_path / "spark.jsonl"
    with_broken = run(capsys, *argv, *both, "-o", str(local_broken), "-j", "1")
    got = run(capsys, *argv, *both, "-o", str(on_spark), "--engine", "spark")
    assert [b["file"] for b in with_broken["broken"]] == [str(broken)]
    assert without_timing(got) == without_timing(with_broken)
    assert list(got["skipped"]) == list(with_broken["skipped"])  # the summary's order too
    assert on_spark.read_bytes() == local_broken.read_bytes()
    # the broken file's records before the break are the whole file's: repeated ids, and the
    # clusters of the whole WARC, the store and the pages
    assert on_spark.read_bytes() == local.read_bytes()
    repeats = with_broken["skipped"]["repeated_id"] - expected["skipped"].get("repeated_id", 0)
    assert 0 < repeats <= with_broken["broken"][0]["records"]


@pytest.mark.slow
def test_repeated_ids_are_skipped_after_their_first_document_as_the_local_engine_skips_them(
        spark, tmp_path, capsys):
    # "a" three times across two files (its later copies texts of "b" and "c": clustered, they
    # would join those clusters), "b" twice in one file; the repeats are in separate tasks
    text = "a document about {0} walking boots maps compasses and the weather on the hills " * 3
    first = [{"id": "a", "text": text.format("first")}, {"id": "b", "text": text.format("b")},
             {"id": "b", "text": text.format("second b")}]
    second = [{"id": "c", "text": text.format("c")}, {"id": "a", "text": text.format("b")},
              {"id": "a", "text": text.format("c")}]
    paths = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    for path, lines in zip(paths, (first, second)):
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["--jsonl", *map(str, paths), "--threshold", "0.5"]
    local, on_spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    expected = run(capsys, *argv, "-o", str(local), "-j", "1")
    got = run(capsys, *argv, "-o", str(on_spark), "--engine", "spark", "--partitions", "3")
    assert expected["skipped"] == {"repeated_id": 3}
    assert expected["repeated_ids"] == ["b", "a", "a"]
    assert without_timing(got) == without_timing(expected)
    assert on_spark.read_bytes() == local.read_bytes()
    assert [json.loads(line)["id"] for line in local.read_text().splitlines()] == ["a", "b", "c"]


@pytest.mark.slow
def test_files_named_by_url_are_read_by_spark_file_systems(spark, tmp_path, capsys):
    """A URL (hdfs://, s3a://, file://...) is read by Spark's own file systems (binaryFile), the
    way a cluster reads Common Crawl; file:// runs the same route on this machine."""
    warc, _ = warc_pages(tmp_path)
    docs, _ = truth_corpus(seed=3, mixed=4, identical=2, singles=3)
    text = write_jsonl(tmp_path / "t.jsonl", docs)
    local, on_spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    expected = run(capsys, "--warc", str(warc), "--jsonl", str(text), "-o", str(local))
    got = run(capsys, "--warc", Path(warc).absolute().as_uri(), "--jsonl",
              Path(text).absolute().as_uri(), "-o", str(on_spark), "--engine", "spark")
    assert on_spark.read_bytes() == local.read_bytes()
    assert without_timing(got) == without_timing(expected)
    missing = (tmp_path / "gone.warc").absolute().as_uri()
    assert "gone.warc" in error(capsys, "--engine", "spark", "--warc", missing)


# --- --diff against a store ----------------------------------------------------------------------


def diff_table(capsys, *argv: str) -> str:
    assert main(["recluster", "--diff", *argv, "--quiet"]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_diff_on_spark_reports_what_the_local_diff_reports(spark, tmp_path_factory, capsys):
    """A real crawl (the report's site: kept pages stored, dropped pages' texts kept): the same
    report, JSON and table, with the crawl's own parameters (nothing changes) and with a
    threshold that would keep its near duplicates."""
    site = crawled_site(tmp_path_factory)
    own = ["--store", str(site.store), "--diff"]
    expected = run(capsys, *own, "-j", "1")
    got = run(capsys, *own, "--engine", "spark", "--partitions", "2")
    assert got.pop("seconds") > 0 and expected.pop("seconds") > 0
    assert got == expected
    assert expected["changed"] == 0 and expected["compared"] == 30
    assert set(expected["not_compared"]) == {"skipped"}
    higher = ["--store", str(site.store), "--threshold", "0.99"]
    table = diff_table(capsys, *higher, "--engine", "spark")
    assert table == diff_table(capsys, *higher, "-j", "1")
    assert "0 would now be dropped, 5 would now be kept, 22 stay kept, 3 stay dropped" in table
    # under a cap of 1 the diff searches as --exact-cap does (the default below 64): the
    # local diff's report
    capped = ["--store", str(site.store), "--cap", "1"]
    got = run(capsys, "--diff", *capped, "--engine", "spark")
    expected = run(capsys, "--diff", *capped, "-j", "1")
    assert got.pop("seconds") > 0 and expected.pop("seconds") > 0
    assert got == expected


@pytest.mark.slow
def test_diff_on_spark_counts_what_it_cannot_compare_as_the_local_diff_does(
        spark, tmp_path, capsys):
    """A crawl that kept its near duplicates' texts but one (and one of them cut at
    review.max_text_bytes), with an exact mirror (read from its original's stored copy), a
    skipped page and a kept page whose copy was not stored: re-clustered at 0.5, its far edits
    would now be dropped and the cut page kept, and every page either engine could not compare
    is counted under the same reason."""
    pages = store_pages(seed=4, groups=5)
    pages.append(("http://site.test/0/mirror", pages[0][1]))
    params = SketchParams(shingle_size=3, size=64)
    store = tmp_path / "store"
    crawl_into_store(store, pages, params, threshold=0.9)
    now = time.time()
    with Store.open(store) as opened, opened.batch():
        decided = {i: record.decision for i, record in opened.documents()}
        near = [i for i, decision in decided.items() if decision == "near_duplicate"]
        assert len(near) == 10 and decided[len(pages) - 1] == "exact_duplicate"
        for i in near[1:]:  # the first near duplicate's text is not kept
            tokens = list(html_tokens(pages[i][1], encoding="utf-8"))
            opened.put_text(i, stored_text(tokens, "word", 120 if i == near[1] else None))
        opened.put_document(opened.next_doc_id(),
                            DocumentRecord("http://site.test/robots-only", "skipped", now))
        opened.put_document(opened.next_doc_id(),
                            DocumentRecord("http://site.test/unstored", "kept", now, 99, 7))
    argv = ["--store", str(store), "--diff", "--threshold", "0.5"]
    expected = run(capsys, *argv, "-j", "1")
    got = run(capsys, *argv, "--engine", "spark")
    got.pop("seconds"), expected.pop("seconds")
    assert got == expected
    assert {c["url"] for c in expected["now_dropped"]} == {u for u, _ in pages if u.endswith("far")}
    assert [c["url"] for c in expected["now_kept"]] == [pages[near[1]][0]]
    assert expected["unchanged"] == {"kept": 5, "dropped": 8 + 1}  # near duplicates, mirror
    assert {k: v["count"] for k, v in expected["not_compared"].items()} == {
        "no_text": 1, "no_page": 1, "skipped": 1}
    assert expected["cut_texts"] == 1
    # the popular representative is refused on Spark, with --diff too; --diff writes no file
    assert "popular" in error(capsys, *argv, "--engine", "spark", "--representative", "popular")
    assert "--output-format" in error(capsys, *argv, "--engine", "spark",
                                      "--output-format", "parquet")


# --- a task that dies is retried, without lost or repeated output ---------------------------------


@pytest.mark.slow
def test_a_killed_python_worker_is_retried_without_duplicates_or_losses(spark, tmp_path):
    docs, _ = truth_corpus(seed=9, mixed=10, identical=3, singles=6)
    first = write_jsonl(tmp_path / "a.jsonl", docs[: len(docs) // 2])
    second = write_jsonl(tmp_path / "b.jsonl", docs[len(docs) // 2:])
    victim = docs[len(docs) // 2 + 3][0]

    def dies_on_first_attempt(doc):
        from pyspark import TaskContext

        if doc.id == victim and TaskContext.get().attemptNumber() == 0:
            os._exit(1)  # the Python worker dies mid-task, as an OOM kill would
        return sketch_source(doc)

    params, dedup = SketchParams(), DedupParams(threshold=0.85)
    expected = io.StringIO()
    local = recluster(read_jsonl([first, second]), params, dedup, out=expected, jobs=1)
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    got = io.StringIO()
    result = recluster_spark(spark, tasks(jsonl=[first, second]), params, dedup, out=got,
                             partitions=2, sketch=dies_on_first_attempt)
    assert got.getvalue() == expected.getvalue()
    assert result.summary == local.summary
    assert len(got.getvalue().splitlines()) == len(docs)
    # and a task did die: Spark counted the failure and ran it again
    stages = [stage for job in set(tracker.getJobIdsForGroup()) - jobs_before
              for stage in tracker.getJobInfo(job).stageIds]
    failed = [tracker.getStageInfo(stage) for stage in stages]
    assert sum(info.numFailedTasks for info in failed if info is not None) >= 1


@pytest.mark.slow
def test_every_job_of_a_run_is_in_the_caller_s_job_group_and_says_what_it_does(
        spark, tmp_path):
    """A Spark user follows or cancels what a call runs by its job group, and shares a cluster
    through scheduler pools, both Spark properties of the calling thread: every job of a run
    carries them. And in Spark's UI each job says which step of the run it is, after the
    caller's description."""
    import urllib.request

    docs, _ = truth_corpus(seed=4, mixed=4, identical=2, singles=5)
    files = [write_jsonl(tmp_path / f"part-{n}.jsonl", docs[n::2]) for n in range(2)]
    context = spark.sparkContext
    tracker = context.statusTracker()
    outside = set(tracker.getJobIdsForGroup())
    context.setJobGroup("a caller's", "recluster_spark, in a group")
    try:
        result = recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(),
                                 out=io.StringIO())
        given_back = context.getLocalProperty("spark.job.description")
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            context.setLocalProperty(key, None)
    assert result.summary.documents == len(docs)
    assert set(tracker.getJobIdsForGroup()) == outside  # no job of the run outside the group
    ours = set(tracker.getJobIdsForGroup("a caller's"))
    assert len(ours) >= 5  # the reading, the candidates, a round, ...

    assert context.uiWebUrl.startswith("http://127.0.0.1:")  # the session's own UI
    api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/jobs"
    with urllib.request.urlopen(api) as answer:
        described = {job["jobId"]: job.get("description", "") for job in json.load(answer)}
    caller = "recluster_spark, in a group · neardup: "
    undescribed = sorted((job, described[job]) for job in ours
                         if not described[job].startswith(caller))
    assert not undescribed, undescribed
    steps = {described[job].removeprefix(caller) for job in ours}
    assert steps >= {"reading and sketching", "candidate pairs", "estimates and greedy round 1",
                     "summary", "writing clusters.jsonl"}
    assert given_back == "recluster_spark, in a group"  # the caller's own, after the run


@pytest.mark.slow
def test_a_run_ended_or_failed_gives_the_caller_s_session_back_as_it_was(spark, tmp_path):
    """The run plans its shuffles for its own partitions through the session's
    ``spark.sql.shuffle.partitions``, turns adaptive execution off for its queries, and caches
    what it reads more than once; a notebook's session, which goes on after the run, has its
    own settings back, or none, as before, and nothing of the run's cached, whether the run
    ended or failed."""
    from crawler.recluster.spark.run import RUN_SETTINGS, SHUFFLE_PARTITIONS

    cached_before = cached_frames(spark)
    docs, _ = truth_corpus(seed=3, mixed=3, identical=1, singles=3)
    files = [write_jsonl(tmp_path / "docs.jsonl", docs)]
    keys = (SHUFFLE_PARTITIONS, *RUN_SETTINGS)
    assert RUN_SETTINGS == {"spark.sql.adaptive.enabled": "false"}
    for before in ("7", None):
        for key in keys:
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before if key == SHUFFLE_PARTITIONS else "true")
        told = []
        result = recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(),
                                 out=io.StringIO(), partitions=3, on_progress=lambda *said: (
                                     told.append({k: spark.conf.get(k) for k in keys})))
        assert result.summary.documents == len(docs)
        # while it ran: its own; after: the caller's
        assert told[-1] == {SHUFFLE_PARTITIONS: "3", **RUN_SETTINGS}
        assert {k: spark.conf.get(k, None) for k in keys} == {
            k: before if before is None or k == SHUFFLE_PARTITIONS else "true" for k in keys}
        assert cached_frames(spark) == cached_before
    # and a run that fails gives them back too
    spark.conf.set(SHUFFLE_PARTITIONS, "7")
    with pytest.raises(Exception, match="Python worker exited unexpectedly"):
        recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(),
                        out=io.StringIO(), partitions=3, sketch=_dies)
    assert spark.conf.get(SHUFFLE_PARTITIONS, None) == "7"
    assert spark.conf.get("spark.sql.adaptive.enabled", None) is None
    assert cached_frames(spark) == cached_before
    spark.conf.unset(SHUFFLE_PARTITIONS)


def _dies(doc):
    os._exit(1)  # every attempt: the job fails


def _collector_view(batches):
    """What the garbage collector of this worker would walk, as a step starts."""
    import gc

    import pyarrow as pa

    frozen, tracked = gc.get_freeze_count(), len(gc.get_objects())
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"frozen": [frozen], "tracked": [tracked]})


@pytest.mark.slow
def test_a_python_step_leaves_its_worker_s_objects_out_of_the_collections_after_it(spark):
    """PySpark's daemon collects garbage after every task; a step freezes what its worker
    holds as it starts (pyspark's, pyarrow's, the engine's modules), so that collection walks
    only what the step made: many frozen objects, few left to walk, in every task."""
    from crawler.recluster.spark.steps import python_step

    seen = python_step(spark.range(0, 6, 1, 6), _collector_view, "frozen long, tracked long")
    rows = seen.collect()
    assert len(rows) == 6
    for row in rows:
        assert row.frozen > 20_000  # pyspark and pyarrow alone are tens of thousands
        assert row.tracked < row.frozen / 20


# --- under spark-submit, as on a cluster ---------------------------------------------------------


@pytest.mark.slow
def test_the_command_runs_under_spark_submit_in_the_session_spark_submit_made(tmp_path, capsys):
    """What README tells a cluster's user to run: spark-submit, given the command as the file
    ``crawler/cli/__main__.py``. The engine then runs in the session spark-submit started, on
    its master (here ``local[1]``, where the engine alone would take every core), and writes
    what the local engine writes, byte for byte."""
    import crawler.cli

    docs, _ = truth_corpus(seed=4, mixed=4, identical=2, singles=3)
    text = write_jsonl(tmp_path / "t.jsonl", docs)
    local, on_spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    expected = run(capsys, "--jsonl", str(text), "-o", str(local))
    command = Path(crawler.cli.__file__).with_name("__main__.py")
    # loopback only, and this Python for the workers: what a user's conf would say
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    submitted = subprocess.run(
        [str(Path(sys.executable).with_name("spark-submit")), "--master", "local[1]",
         "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
         str(command), "recluster", "--engine", "spark", "--jsonl", str(text),
         "-o", str(on_spark), "--json", "--quiet"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    got = json.loads(submitted.stdout)
    assert got["spark"] == {"master": "local[1]", "cores": 1}
    assert on_spark.read_bytes() == local.read_bytes()
    assert without_timing(got) == without_timing(expected)


@pytest.mark.slow
def test_the_command_shows_its_progress_and_its_settings_and_none_of_spark_s_start_up_lines(
        tmp_path):
    """A local session started by the command, in a process of its own: no stage bars, none of
    the lines Spark's log prints as it starts; one line says where Spark's web UI is, and the
    command's own bar goes from reading to writing. ``--spark-conf``, as a Spark user gives
    ``--conf`` to spark-submit, reaches the session (the driver's memory, set before its JVM
    starts, among them), and the summary says so, and that on one machine an input this small
    clusters faster locally; the clusters are the local engine's."""
    docs, _ = truth_corpus(seed=4, mixed=3, identical=2, singles=3)
    text = write_jsonl(tmp_path / "t.jsonl", docs)
    env = dict(os.environ)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    settings = {"spark.driver.memory": "900m", "spark.sql.session.timeZone": "UTC"}
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", "recluster", "--engine", "spark",
         "--master", "local[1]", "--jsonl", str(text), "-o", str(tmp_path / "c.jsonl"),
         *(f"--spark-conf={k}={v}" for k, v in settings.items())],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = done.stdout
    assert f"{len(docs)} documents" in summary
    assert "on Spark, master local[1], 1 core, spark.driver.memory=900m, " \
           "spark.sql.session.timeZone=UTC" in summary
    assert "clusters faster with --engine local" in summary
    # but for the JVM's own word on the incubator module Spark asks for, and where Spark's web
    # UI is (on loopback), every line is the bar's
    shown = [line.strip() for line in done.stderr.replace("\r", "\n").splitlines()
             if line.strip() and not line.startswith("WARNING: Using incubator")]
    assert re.fullmatch(r"neardup recluster: Spark's web UI for this run \(its jobs, stages and "
                        r"tasks\): http://127\.0\.0\.1:\d+", shown[0]), shown[0]
    bar = shown[1:]
    assert bar and all(" docs" in line for line in bar), bar
    # JSON Lines do not say how many documents they hold: a count, not a share
    assert bar[-1].startswith(f"writing: {len(docs)} docs"), bar
    local = tmp_path / "local.jsonl"
    assert main(["recluster", "--jsonl", str(text), "-o", str(local), "--quiet"]) == 0
    assert (tmp_path / "c.jsonl").read_bytes() == local.read_bytes()


# --- a job that fails: one line -------------------------------------------------------------------


def _breaks(batches):
    raise ValueError("a step that cannot go on")
    yield from batches


def _needs_what_no_executor_has(batches):
    import a_module_no_executor_has  # noqa: F401
    yield from batches


@pytest.mark.slow
def test_a_failed_job_is_told_in_one_line_what_to_do_when_setup_is_the_cause(spark):
    """What the command prints for a Spark job that failed (every attempt of a task): the
    Python error the workers' traceback ends with; when a worker cannot import a module, the
    Python the executors run and how to name another (the cluster's setup, not the run, is
    then the cause). Read from the real exceptions PySpark raises on the driver."""
    from crawler.recluster.spark.failures import JobFailure, explain
    from crawler.recluster.spark.steps import python_step

    python = spark.sparkContext.pythonExec
    told = []
    for step in (_breaks, _needs_what_no_executor_has):
        with pytest.raises(Exception) as caught:
            python_step(spark.range(0, 2, 1, 2), step, "id long").collect()
        told.append(explain(caught.value, python))
    assert told == [
        JobFailure("a Spark job failed: ValueError: a step that cannot go on (Spark's log, above "
                   "or on the executors, has the rest)", setup=False),
        JobFailure(f"the executors' Python ({python}) cannot import 'a_module_no_executor_has': "
                   "install neardup with its spark extra where the executors run, or name a "
                   "Python that has it: --spark-conf spark.pyspark.python=PATH (under "
                   "spark-submit, --conf)", setup=True),
    ]
    assert explain(ValueError("the engine's own"), python) is None  # not Spark's: a traceback


# --- mistakes: one line, exit 2 ------------------------------------------------------------------


@pytest.mark.slow
def test_wrong_options_missing_java_and_bad_masters_are_one_line_errors(
        spark, tmp_path, capsys, monkeypatch):
    path = write_jsonl(tmp_path / "c.jsonl", truth_corpus(mixed=1, identical=1, singles=1)[0])
    spark_run = ["--jsonl", str(path), "--engine", "spark", "-o", str(tmp_path / "out")]
    assert "popular" in error(capsys, *spark_run, "--representative", "popular")
    assert "--index" in error(capsys, *spark_run, "--index", str(tmp_path / "i"))
    assert "--jobs is an option of --engine local" in error(capsys, *spark_run, "-j", "2")
    assert "writes a directory" in error(capsys, *spark_run, "--output-format", "parquet",
                                         "-o", "-")
    assert "--diff compares a store's crawl" in error(capsys, *spark_run, "--diff")
    assert "--partitions" in error(capsys, *spark_run, "--partitions", "0")
    assert "--engine spark" in error(capsys, "--jsonl", str(path), "--output-format", "parquet")
    assert "--engine spark" in error(capsys, "--jsonl", str(path), "--master", "local[2]")
    for exact in ("--exact-cap", "--no-exact-cap"):  # named as given
        assert f"{exact} needs --engine spark" in error(capsys, "--jsonl", str(path), exact)
    assert "not a Spark master" in error(capsys, *spark_run, "--master", "lokal[2]")
    assert "--spark-conf needs --engine spark" in error(
        capsys, "--jsonl", str(path), "--spark-conf", "spark.driver.memory=2g")
    for wrong in ("spark.driver.memory", "driver.memory=2g", "spark.driver.memory="):
        assert f"--spark-conf {wrong!r}: give KEY=VALUE" in error(
            capsys, *spark_run, "--spark-conf", wrong)
    # this process's session was started before the command (as spark-submit starts one)
    assert "give them to spark-submit's --conf" in error(
        capsys, *spark_run, "--spark-conf", "spark.driver.memory=2g")
    assert "cannot read" in error(capsys, "--engine", "spark", "--warc", str(tmp_path / "no.warc"))
    assert "not a WARC" in error(capsys, "--engine", "spark", "--warc", str(path))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert "needs Java" in error(capsys, *spark_run)
    monkeypatch.undo()
    monkeypatch.setitem(__import__("sys").modules, "pyspark.sql", None)
    assert "pip install 'neardup[spark]'" in error(capsys, *spark_run)
