"""``neardup recluster --engine spark``: the same clusters as the local engine, on Apache Spark.

Spark runs in local mode, in one session for the whole module (starting one costs seconds):
``local[2,3]``, two cores, and up to three attempts per task, so that a task whose Python
worker dies is retried as it would be on a cluster. Every run is compared with the local
engine on the same input, byte for byte: same tokens, same sketches, same decisions.
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
from crawler.recluster.spark import (  # noqa: E402
    recluster_spark,
    spark_session,
    stop_session,
    tasks,
)
from crawler.recluster.spark.session import (  # noqa: E402
    LOG_CONFIG,
    local_java_options,
    page_size,
)
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


@pytest.fixture(scope="module")
def spark():
    session, made = spark_session("local[2,3]")
    yield session
    if made:
        stop_session(session)


@pytest.fixture(params=[None, 0], ids=["one-stage search", "six-stage search"])
def broadcast(request):
    """Documents up to which the candidate search runs in one stage, every task holding the
    whole input (``BroadcastSearch``): the default, which every corpus here is under, and 0,
    the six shuffled steps of a larger input (``Search``)."""
    return request.param


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


def planted_corpus(folder: Path) -> list[str]:
    """Real HTML pages, then exact copies and edited copies of a third of them (a paragraph
    dropped, a sentence added), interleaved; the file names in input order."""
    pages = html_corpus_or_skip(PAGES)
    rng = random.Random(5)
    chosen = rng.sample(pages, PAGES)
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

    # another partition count, and Parquet: the same rows in the same order
    parquet = tmp_path / "clusters.parquet"
    again = run(capsys, "--engine", "spark", "--html", *names, "-o", str(parquet),
                "--threshold", "0.8", "--partitions", "3", "--output-format", "parquet")
    assert without_timing(again) == without_timing(expected)
    rows = spark.read.parquet(str(parquet)).orderBy("position").collect()
    lines = [json.loads(line) for line in local.read_text().splitlines()]
    assert [{k: r[k] for k in lines[0]} for r in rows] == lines



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
    assert without_timing(got) == without_timing(expected)
    assert f'"{path}:' in local.read_text()  # the id from FILE:LINE, as the local engine's


def test_chains_of_near_duplicates_take_rounds_and_agree(spark, tmp_path, broadcast):
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
                                 partitions=4, stretch=stretch, broadcast=broadcast)
        assert got.getvalue() == expected.getvalue()
        runs[stretch] = result.stats["rounds"]
    assert runs[2] > runs[50_000] == 1
    kinds = {json.loads(line)["decision"] for line in expected.getvalue().splitlines()}
    assert kinds == {"kept", "near_duplicate"}
    # a run releases what it cached: a long-lived session (a notebook) does not keep it
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()


def test_cluster_ids_count_kept_documents_across_tasks_partitions_and_empty_tasks(
        spark, tmp_path, broadcast):
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
                        partitions=partitions, broadcast=broadcast)
        assert got.getvalue() == expected.getvalue()
    lines = [json.loads(line) for line in expected.getvalue().splitlines()]
    copies = [line for line in lines if line["id"].startswith("again-")]
    assert copies and all(line["decision"] == "exact_duplicate" for line in copies)
    kept = [line["cluster"] for line in lines if line["decision"] == "kept"]
    assert kept == list(range(len(kept)))
    assert max(line["cluster"] for line in lines) == len(kept) - 1 > 20


def test_pairs_estimated_below_the_threshold_and_no_pairs_take_no_round(
        spark, tmp_path, broadcast):
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
                                 partitions=2, broadcast=broadcast)
        assert got.getvalue() == expected.getvalue()
        assert result.stats["kept"] == len(corpus) and result.stats["rounds"] == 0
        assert (result.stats["comparisons"] > 0) == (name == "edited")


def test_arrays_moved_in_many_blobs_agree(spark, tmp_path, broadcast):
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
    result = recluster_spark(spark, tasks(jsonl=[path]), params, dedup, out=got, partitions=1,
                             broadcast=broadcast)
    assert got.getvalue() == expected.getvalue()
    assert local.stats["near_duplicate"] > 2000
    # the pairs the one partition estimates (two int64 each) take more than one blob
    assert result.stats["comparisons"] * 16 > BLOB_BYTES


def test_a_small_input_is_searched_in_one_stage_with_the_same_candidates_and_counters(
        spark, tmp_path):
    """Up to ``broadcast`` documents (20,000 by default) the candidate search runs in one stage,
    every task holding the whole input, instead of six shuffled steps: the same candidates,
    hence the same clusters, and the same counters (pairs estimated and pruned, fingerprints
    the cap cut, passes of --exact-cap), under the containment rule and at a cap that bites,
    with the local engine's output where the search is exact; and in fewer stages."""
    import urllib.request

    docs, _ = truth_corpus(seed=6, mixed=12, identical=4, singles=10)
    truth = write_jsonl(tmp_path / "truth.jsonl", docs)
    families = families_under_one_template(tmp_path)
    context = spark.sparkContext
    api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/jobs"
    cases = ((truth, DedupParams(threshold=0.85, containment=0.6), None),
             (families, DedupParams(threshold=0.8, cap=1), False),
             (families, DedupParams(threshold=0.8, cap=1), True))
    for case, (path, dedup, exact) in enumerate(cases):
        expected = io.StringIO()
        recluster(read_jsonl([path]), SketchParams(), dedup, out=expected, jobs=1)
        outputs, stats, stages = {}, {}, {}
        for limit in (None, 0):
            group = f"searched {case} {limit}"
            context.setJobGroup(group, group)
            try:
                got = io.StringIO()
                result = recluster_spark(spark, tasks(jsonl=[path]), SketchParams(), dedup,
                                         out=got, partitions=2, exact_cap=exact,
                                         broadcast=limit)
            finally:
                for key in ("spark.jobGroup.id", "spark.job.description"):
                    context.setLocalProperty(key, None)
            outputs[limit], stats[limit] = got.getvalue(), result.stats
            with urllib.request.urlopen(api) as answer:
                jobs = [job for job in json.load(answer) if job.get("jobGroup") == group]
            # the search's own jobs; the rest of a run's stage count moves by one or two from
            # run to run (a summary job beside the write may find its rows cached, or not)
            stages[limit] = sum(job["numCompletedStages"] for job in jobs
                                if "candidate pairs" in job.get("description", ""))
        assert outputs[None] == outputs[0]
        assert (stats[None].pop("broadcast"), stats[0].pop("broadcast")) == (True, False)
        assert stats[None] == stats[0] and stats[0]["comparisons"] > 0
        assert (outputs[0] == expected.getvalue()) is (exact is not False)
        passes = stats[0]["passes"]
        assert (passes > 1) is bool(exact)
        # the first pass: a stage that gathers what is broadcast and the search's, where the
        # six-step search runs five up to its verdicts; a later pass: two against four
        assert stages[None] + 3 + (passes > 1) <= stages[0], (stages, passes)


def test_a_small_input_is_decided_and_numbered_in_one_task_with_the_same_clusters(
        spark, tmp_path):
    """Up to ``broadcast`` and ``stretch`` documents, and the cap searched the faster way, the
    one-stage search also finds the exact duplicates, and one task decides every document
    and numbers the clusters (small_input.py): the same output and counters as the rounds
    after a one-stage search (a stretch shorter than the input) and after the six-stage one,
    on copies, near copies and contained pages over several files, under the containment
    rule and at a cap that bites; and a run of fewer jobs and stages than either."""
    import urllib.request

    docs, _ = truth_corpus(seed=12, mixed=12, identical=5, singles=10)
    files = [write_jsonl(tmp_path / f"part-{n}.jsonl", docs[n::3]) for n in range(3)]
    files.insert(1, write_jsonl(tmp_path / "copies.jsonl", [
        (f"again-{doc_id}", words) for doc_id, words in docs[::4]]))
    families = families_under_one_template(tmp_path)
    context = spark.sparkContext
    api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/jobs"
    ways = {"one task": {}, "rounds": {"stretch": 2}, "six stages": {"broadcast": 0}}
    for case, (paths, dedup) in enumerate(((files, DedupParams(threshold=0.85, containment=0.6)),
                                           ([families], DedupParams(threshold=0.8, cap=1)))):
        expected = io.StringIO()
        recluster(read_jsonl(paths), SketchParams(), dedup, out=expected, jobs=1)
        outputs, stats, work = {}, {}, {}
        for way, options in ways.items():
            group = f"small input {case} {way}"
            context.setJobGroup(group, group)
            try:
                got = io.StringIO()
                result = recluster_spark(spark, tasks(jsonl=paths), SketchParams(), dedup,
                                         out=got, partitions=2, exact_cap=False, **options)
            finally:
                for key in ("spark.jobGroup.id", "spark.job.description"):
                    context.setLocalProperty(key, None)
            outputs[way], stats[way] = got.getvalue(), result.stats
            stats[way].pop("broadcast")
            with urllib.request.urlopen(api) as answer:
                jobs = [job for job in json.load(answer) if job.get("jobGroup") == group]
            work[way] = (len(jobs), sum(job["numCompletedStages"] for job in jobs))
        assert outputs["one task"] == outputs["rounds"] == outputs["six stages"]
        # a stretch of two documents takes rounds; the one task, and the six-stage search's
        # rounds over one stretch, one
        assert stats["rounds"].pop("rounds") >= stats["six stages"]["rounds"] == 1
        assert stats["one task"].pop("rounds") == stats["six stages"].pop("rounds")
        assert stats["one task"] == stats["rounds"] == stats["six stages"]
        assert stats["one task"]["comparisons"] > 0
        if case == 0:  # at the default cap, the local engine's output; copies among it
            assert outputs["one task"] == expected.getvalue()
            assert stats["one task"]["exact_duplicate"] >= len(docs[::4])
        else:
            assert stats["one task"]["capped"] > 0
        for other in ("rounds", "six stages"):
            assert all(a < b for a, b in zip(work["one task"], work[other])), work


def test_exact_cap_cuts_where_the_local_index_cuts_and_agrees(spark, tmp_path, capsys, broadcast):
    """Families of versions of a page under one template (each version edits three words of
    the one before) share their rarest fingerprints, so a cap of 1 bites. The local index
    keeps a fingerprint's first representative; the search keeps its first leader, which may
    have joined a cluster, so the faster search (--no-exact-cap) misses candidates the local
    engine finds and a few documents are decided differently. With --exact-cap, the default
    for a cap below 64, the search runs again without the leaders that joined, until none
    holds a place under the cap: the local engine's clusters, byte for byte."""
    path = families_under_one_template(tmp_path)
    params, dedup = SketchParams(), DedupParams(threshold=0.8, cap=1)
    expected = io.StringIO()
    local = recluster(read_jsonl([path]), params, dedup, out=expected, jobs=1)
    assert local.stats["capped"] > 100
    lines = expected.getvalue().splitlines()
    got = io.StringIO()
    first = recluster_spark(spark, tasks(jsonl=[path]), params, dedup, out=got, partitions=2,
                            exact_cap=False, broadcast=broadcast)
    assert first.stats["passes"] == 1 and first.stats["exact_cap"] is False
    assert 0 < sum(a != b for a, b in zip(got.getvalue().splitlines(), lines)) < len(lines) / 10
    exact = io.StringIO()
    again = recluster_spark(spark, tasks(jsonl=[path]), params, dedup, out=exact, partitions=2,
                            broadcast=broadcast)
    assert exact.getvalue() == expected.getvalue()
    assert again.stats["passes"] >= 2 and again.stats["exact_cap"] is True
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()  # every pass released
    # the command line says how many searches it took, and --exact-cap asks for them at the
    # default cap too
    report = run(capsys, "--jsonl", str(path), "--engine", "spark", "--cap", "1",
                 "--threshold", "0.8", "-o", str(tmp_path / "out.jsonl"))
    assert report["clustering"]["passes"] == again.stats["passes"]
    assert (tmp_path / "out.jsonl").read_text() == expected.getvalue()
    asked = run(capsys, "--jsonl", str(path), "--engine", "spark", "--threshold", "0.8",
                "--exact-cap", "-o", str(tmp_path / "out.jsonl"))
    unasked = run(capsys, "--jsonl", str(path), "--engine", "spark", "--threshold", "0.8",
                  "-o", str(tmp_path / "out.jsonl"))
    assert (asked["clustering"]["exact_cap"], unasked["clustering"]["exact_cap"]) == (True, False)
    # the summary points to --exact-cap where the cap bit and the faster search ran, and to
    # --no-exact-cap where the small cap chose the exact search by itself; only then
    for extra, told in ((("--no-exact-cap",), "--exact-cap picks the same"),
                        ((), "--no-exact-cap is faster"), (("--exact-cap",), None)):
        argv = ["recluster", "--jsonl", str(path), "--engine", "spark", "--cap", "1",
                "--threshold", "0.8", *extra, "-o", str(tmp_path / "out.jsonl")]
        assert main(argv) == 0
        summary = capsys.readouterr().out
        for pointer in ("--exact-cap picks the same", "--no-exact-cap is faster"):
            assert (pointer in summary) is (pointer == told)


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


def test_a_pass_after_the_first_estimates_only_what_changed_and_finds_a_full_pass_s_candidates(
    spark, tmp_path, broadcast
):
    """A pass of --exact-cap after the first estimates again only the documents whose pairs
    changed, and keeps the others' preferences. Its preferences must be a whole pass's with the
    same leaders left out (but for candidates left out, which joined a cluster and which the
    rounds pass over): the same candidates, in the same order, one row per place."""
    from crawler.recluster.spark.run import Plan, cluster
    from crawler.recluster.spark.sketch import SparkJob, documents

    job = SparkJob(SketchParams(), DedupParams(threshold=0.8, cap=1), 2, exact_cap=True)
    work = tasks(jsonl=[families_under_one_template(tmp_path)])
    docs = documents(spark, work, job).persist()
    plan = Plan(spark, docs, job, None if broadcast == 0 else docs.count())
    assert plan.whole is (broadcast is None)
    try:
        cluster(plan)
        search = plan.search
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
    finally:
        plan.drop()
        docs.unpersist()


def test_a_plan_made_for_other_partitions_is_made_again_and_agrees(spark, tmp_path, caplog):
    """The clustering stages are planned while the documents are sketched, for the partitions
    the tasks suggest (a JSON Lines file counts as 1,024 documents): 60 small files suggest
    four partitions where their few hundred documents want two, so the plan is made again."""
    docs, _ = truth_corpus(seed=5, mixed=20, identical=5, singles=20)
    paths = [write_jsonl(tmp_path / f"part-{i:02d}.jsonl", docs[i::60]) for i in range(60)]
    params, dedup = SketchParams(), DedupParams(threshold=0.8)
    expected = io.StringIO()
    recluster(read_jsonl(paths), params, dedup, out=expected, jobs=1)
    got = io.StringIO()
    with caplog.at_level("DEBUG", logger="crawler.recluster.spark.run"):
        recluster_spark(spark, tasks(jsonl=paths), params, dedup, out=got)
    assert "planned for 4 partitions" in caplog.text and "want 2: planned again" in caplog.text
    assert got.getvalue() == expected.getvalue()
    assert len(expected.getvalue().splitlines()) == len(docs) > 60


@pytest.mark.parametrize("partitions", [1, 2, 3, 6, 50])
def test_each_bucket_reaches_its_partition_and_partitions_get_equal_shares(spark, partitions):
    """The search's buckets travel under routes (:mod:`crawler.recluster.spark.routes`) so that
    Spark's hash partitioning gives every partition the same number of them (its own hash of
    the bucket numbers gives 12 and 20 of 32 to two partitions). Checked against Spark itself:
    its ``hash``, and where ``repartition`` really puts each route."""
    import numpy as np

    from crawler.recluster.spark.routes import routes, spark_partition

    values = [*range(-300, 3000), 2**31 - 1, -(2**31)]
    frame = spark.createDataFrame([(v,) for v in values], "b int")
    spark_says = [r.p for r in frame.selectExpr(f"pmod(hash(b), {partitions}) AS p").collect()]
    assert spark_partition(np.array(values), partitions).tolist() == spark_says

    buckets = 16 * partitions
    route = routes(buckets, partitions)
    assert len(set(route.tolist())) == buckets
    placed = (
        spark.createDataFrame([(int(r), b) for b, r in enumerate(route)], "bucket int, b int")
        .repartition(partitions, "bucket")
        .selectExpr("b", "spark_partition_id() AS p")
        .collect()
    )
    assert sorted((row.b, row.p) for row in placed) == [(b, b % partitions) for b in range(buckets)]


# --- WARC files, stores, and input that cannot be used -------------------------------------------


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
    (pages / "latin1.htm").write_bytes("<p>caf\xe9 cr\xe8me br\xfbl\xe9e </p>".encode("latin-1") * 40)
    params = SketchParams(shingle_size=3, size=64)
    store = tmp_path / "store"
    crawl_into_store(store, store_pages(seed=4, groups=5), params, threshold=0.9)
    argv = ["--store", str(store), "--html", str(pages), "--threshold", "0.5"]
    main_content = ["--content-area", "main"]  # read as the local engine reads it, too
    local, on_spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    expected = run(capsys, *argv, "--warc", str(warc), "-o", str(local), "-j", "1")
    assert {"too_deep", "empty", "not_html (image/png)", "http_404"} <= set(expected["skipped"])
    got = run(capsys, *argv, "--warc", str(warc), "-o", str(on_spark), "--engine", "spark")
    assert on_spark.read_bytes() == local.read_bytes()
    assert without_timing(got) == without_timing(expected)
    by_main = [tmp_path / "main-local.jsonl", tmp_path / "main-spark.jsonl"]
    expected_main = run(capsys, *argv, *main_content, "--warc", str(warc), "-o", str(by_main[0]))
    got_main = run(capsys, *argv, *main_content, "--warc", str(warc), "-o", str(by_main[1]),
                   "--engine", "spark")
    assert by_main[1].read_bytes() == by_main[0].read_bytes()
    assert without_timing(got_main) == without_timing(expected_main)
    assert expected_main["parameters"]["canonical"] != expected["parameters"]["canonical"]

    # in both engines the records before the break count; the local engine names the break
    # (crawler.recluster.inputs.BrokenInput), which Spark still counts as one skipped document
    # whose reason holds it
    local_broken = run(capsys, *argv, "--warc", str(broken), "-o", str(tmp_path / "b.jsonl"))
    assert [b["file"] for b in local_broken["broken"]] == [str(broken)]
    with_broken = tmp_path / "with-broken.jsonl"
    got = run(capsys, *argv, "--warc", str(warc), str(broken), "-o", str(with_broken),
              "--engine", "spark")
    skipped = dict(got["skipped"])
    breaks = [reason for reason in skipped if reason.startswith("broken_input ")]
    assert len(breaks) == 1 and skipped.pop(breaks[0]) == 1
    for reason, n in expected["skipped"].items():
        assert skipped[reason] >= n
    ids = [json.loads(line)["id"] for line in with_broken.read_text().splitlines()]
    local_ids = [json.loads(line)["id"] for line in local.read_text().splitlines()]
    html = [i for i in local_ids if i.startswith(str(pages))]
    store_and_warc = local_ids[: -len(html)]
    warc_ids = [i for i in store_and_warc if not i[len("http://site.test/"):][:1].isdigit()]
    # input order: the store, the whole WARC, the broken WARC's first records, then the HTML
    assert ids[: len(store_and_warc)] == store_and_warc
    assert ids[-len(html):] == html
    before_break = ids[len(store_and_warc): -len(html)]
    assert before_break and before_break == warc_ids[: len(before_break)] != warc_ids


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


# --- --diff against a store ------------------------------------------------------------------------


def diff_table(capsys, *argv: str) -> str:
    assert main(["recluster", "--diff", *argv, "--quiet"]) == 0
    return capsys.readouterr().out


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


def test_the_workers_are_warmed_once_per_application_a_task_per_core(spark):
    """A run first warms the workers (a task per core through Arrow), once per application:
    a long-lived session's later runs do not pay for it again."""
    from crawler.recluster.spark import run as engine

    context = spark.sparkContext
    engine._warmed.discard(context.applicationId)  # as if no run had come before
    context.setJobGroup("warming", "warm_workers, twice")
    try:
        engine.warm_workers(spark)
        engine.warm_workers(spark)
        tracker = context.statusTracker()
        jobs = tracker.getJobIdsForGroup("warming")
        assert len(jobs) == 1
        (stage,) = tracker.getJobInfo(jobs[0]).stageIds
        assert tracker.getStageInfo(stage).numTasks == context.defaultParallelism
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def test_every_job_of_a_run_is_in_the_caller_s_job_group_and_says_what_it_does(
        spark, tmp_path):
    """A Spark user follows or cancels what a call runs by its job group, and shares a cluster
    through scheduler pools, both Spark properties of the calling thread: every job of a run
    carries them, those started in threads beside the driver's planning too (the warm-up,
    the reading's count, the summary), which a plain thread would start without them. And in
    Spark's UI each job says which step of the run it is, after the caller's description."""
    import urllib.request

    from crawler.recluster.spark import run as engine

    docs, _ = truth_corpus(seed=4, mixed=4, identical=2, singles=5)
    files = [write_jsonl(tmp_path / f"part-{n}.jsonl", docs[n::2]) for n in range(2)]
    context = spark.sparkContext
    engine._warmed.discard(context.applicationId)  # the warm-up's job among them
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
    assert len(ours) >= 6  # the warm-up, the reading, ...

    assert context.uiWebUrl.startswith("http://127.0.0.1:")  # the session's own UI
    api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/jobs"
    with urllib.request.urlopen(api) as answer:
        described = {job["jobId"]: job.get("description", "") for job in json.load(answer)}
    caller = "recluster_spark, in a group · neardup: "
    undescribed = sorted((job, described[job]) for job in ours
                         if not described[job].startswith(caller))
    assert not undescribed, undescribed
    steps = {described[job].removeprefix(caller) for job in ours}
    # an input this small is decided and numbered in one task, in the first job that reads
    # its rows (the summary's or the write's): no round of its own (small_input.py)
    assert steps >= {"starting the Python workers", "reading and sketching", "candidate pairs",
                     "summary", "writing clusters.jsonl"}
    assert "estimates and greedy round 1" not in steps
    assert given_back == "recluster_spark, in a group"  # the caller's own, after the run


def test_a_run_ended_or_failed_gives_the_caller_s_session_back_as_it_was(spark, tmp_path):
    """The run plans its shuffles for its own partitions through the session's
    ``spark.sql.shuffle.partitions``, and caches what it reads more than once; a notebook's
    session, which goes on after the run, has its own setting back, or none, as before, and
    nothing of the run's cached, whether the run ended or failed."""
    cache = spark._jsparkSession.sharedState().cacheManager()
    cached_before = cache.cachedData().size()
    docs, _ = truth_corpus(seed=3, mixed=3, identical=1, singles=3)
    files = [write_jsonl(tmp_path / "docs.jsonl", docs)]
    key = "spark.sql.shuffle.partitions"
    for before in ("7", None):
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
        result = recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(),
                                 out=io.StringIO(), partitions=3)
        assert result.summary.documents == len(docs)
        assert spark.conf.get(key, None) == before
        assert cache.cachedData().size() == cached_before
    # and a run that fails gives it back too
    spark.conf.set(key, "7")
    with pytest.raises(Exception, match="Python worker exited unexpectedly"):
        recluster_spark(spark, tasks(jsonl=files), SketchParams(), DedupParams(),
                        out=io.StringIO(), partitions=3, sketch=_dies)
    assert spark.conf.get(key, None) == "7"
    assert cache.cachedData().size() == cached_before
    spark.conf.unset(key)


def _dies(doc):
    os._exit(1)  # every attempt: the job fails


def _collector_view(batches):
    """What the garbage collector of this worker would walk, as a step starts."""
    import gc

    import pyarrow as pa

    frozen, tracked = gc.get_freeze_count(), len(gc.get_objects())
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"frozen": [frozen], "tracked": [tracked]})


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


# --- the JVM of a session the engine starts --------------------------------------------------------


def test_a_session_started_here_runs_the_throughput_collector_on_a_full_heap(spark):
    """The JVM of a local session started by the engine collects with Parallel GC (not G1,
    which the JVM picks on two CPUs), its heap starting at its maximum; a collector the
    environment picks is left alone, since the JVM refuses two."""
    if not spark.sparkContext.getConf().get("spark.driver.defaultJavaOptions"):
        pytest.skip("the session was not started by the engine")
    jvm = spark.sparkContext._jvm
    management = jvm.java.lang.management.ManagementFactory
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    if "UseParallelGC" in local_java_options():  # unless the environment picks a collector
        assert collectors == {"PS Scavenge", "PS MarkSweep"}
    hotspot = management.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    heap = {name: int(hotspot.getVMOption(name).getValue())
            for name in ("InitialHeapSize", "MaxHeapSize")}
    assert heap["InitialHeapSize"] == heap["MaxHeapSize"] > 0
    assert "UseParallelGC" not in local_java_options({"JDK_JAVA_OPTIONS": "-XX:+UseZGC"})
    assert "UseParallelGC" not in local_java_options(
        {"PYSPARK_SUBMIT_ARGS": "--conf spark.driver.extraJavaOptions=-XX:+UseG1GC pyspark-shell"})


def test_a_session_started_here_gives_its_tasks_pages_of_one_megabyte(spark):
    """Spark would size a task's memory pages at 16 MB on the default 1 GB driver and two
    cores; a session the engine starts asks for 1 MB pages, more only on a heap that 8,192
    pages of 1 MB (the most a task may hold) would not cover (:func:`.session.page_size`)."""
    if not spark.sparkContext.getConf().get("spark.driver.defaultJavaOptions"):
        pytest.skip("the session was not started by the engine")
    assert spark.sparkContext.getConf().get("spark.buffer.pageSize") == page_size() == "1m"
    assert page_size({"spark.driver.memory": "8192m"}, {}) == "1m"
    assert page_size({"spark.driver.memory": "8193m"}, {}) == "2m"
    assert page_size({"spark.driver.memory": "1t"}, {}) == "64m"  # Spark's largest page
    assert page_size({"spark.driver.memory": "lots"}, {}) == "1m"  # Spark says what is wrong


def test_a_session_started_here_interprets_its_plans_and_compiles_no_code(spark):
    """Spark's code generation is off in a local session the engine starts: a query that
    projects, filters and joins compiles nothing (Spark's own counter of compilations stays
    put), and still answers right. (A few small pieces of fixed shape, an aggregation's row
    joiner and a sort's ordering, Spark compiles whatever the setting.)"""
    if not spark.sparkContext.getConf().get("spark.driver.defaultJavaOptions"):
        pytest.skip("the session was not started by the engine")
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics \
        .METRIC_COMPILATION_TIME()
    before = compiled.getCount()
    numbers = spark.range(0, 1000, 1, 2).selectExpr("id", "id % 7 AS k", "id * 3 + 1 AS v")
    sevens = numbers.where("k = 0").select("id", "v").join(numbers.select("id", "k"), "id")
    got = sorted((r["id"], r["v"], r["k"]) for r in sevens.collect())
    assert got == [(i, 3 * i + 1, 0) for i in range(0, 1000, 7)]
    assert compiled.getCount() == before


def _described_to_the_ui(spark, frame, description: str) -> str:
    """The plan description Spark's UI keeps for the query that collects ``frame``."""
    context = spark.sparkContext
    context.setJobDescription(description)
    try:
        frame.collect()
    finally:
        context.setJobDescription(None)
    store = spark._jsparkSession.sharedState().statusStore()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the UI's listener keeps it a moment later
        executions = store.executionsList()
        for i in range(executions.size()):
            execution = executions.apply(i)
            if execution.description() == description:
                return execution.physicalPlanDescription()
        time.sleep(0.1)
    raise AssertionError(f"no query described {description!r} in the UI")


def test_a_session_started_here_describes_each_query_to_the_ui_as_a_plain_tree(spark):
    """Before each query's jobs start, the driver writes the plan description Spark's UI
    shows. A local session the engine starts writes the operators' tree alone (Spark's
    "simple"), not the "formatted" description that details each operator again below the
    tree, the slower one to write (README); a session can ask for it back."""
    if not spark.sparkContext.getConf().get("spark.driver.defaultJavaOptions"):
        pytest.skip("the session was not started by the engine")
    mode = "spark.sql.ui.explainMode"
    assert spark.conf.get(mode) == "simple"
    cached = spark.range(0, 100, 1, 2).selectExpr("id", "id % 3 AS k").persist()
    try:
        query = cached.groupBy("k").count()
        plain = _described_to_the_ui(spark, query, "described plainly")
        spark.conf.set(mode, "formatted")
        try:
            formatted = _described_to_the_ui(spark, query, "described in detail")
        finally:
            spark.conf.set(mode, "simple")
    finally:
        cached.unpersist()
    details = re.compile(r"^\(\d+\) \w+", re.M)  # "(3) HashAggregate": an operator detailed
    assert plain.startswith("== Physical Plan ==") and "InMemoryTableScan" in plain
    assert not details.search(plain)
    assert len(details.findall(formatted)) >= 3  # the same query, the detailed way


def _where_pyspark_is(batches):
    import sys

    import pyarrow as pa

    import pyspark

    for _ in batches:
        zips = [p for p in sys.path if p.endswith("pyspark.zip")]
        yield pa.RecordBatch.from_pydict({"file": [pyspark.__file__], "zips": [len(zips)]})


def test_a_session_started_here_has_its_workers_import_the_installed_pyspark(spark):
    """Spark puts its zip of PySpark first on its workers' path, where Python caches no
    bytecode; the engine's daemon takes it off when it lies inside the installed PySpark, so
    the workers import that package, the one the driver imports."""
    import pyspark

    if spark.sparkContext.getConf().get("spark.python.daemon.module") is None:
        pytest.skip("the session was not started by the engine")
    rows = spark.range(0, 2, 1, 2).mapInArrow(_where_pyspark_is, "file string, zips long").collect()
    assert {(row.file, row.zips) for row in rows} == {(pyspark.__file__, 0)}


def _daemon_s_worker(batches):
    import sys

    import pyarrow as pa

    for _ in batches:
        daemon = sys.modules.get("pyspark.daemon")  # the daemon imported it, then forked us
        name = "" if daemon is None else daemon.worker.__qualname__
        yield pa.RecordBatch.from_pydict({"worker": [name]})


#: PySpark's worker as it is, then as the engine's daemon wraps it, each on a socket whose other
#: end (the JVM's) is closed, in a process of its own as the daemon forks one (PySpark's worker
#: leaves its files open for the process's exit to close); then a worker's own failure, wrapped
_HUNG_UP = """
import os, socket, sys
from pyspark import daemon
from crawler.recluster.spark_daemon import quiet_on_hang_up
def hung_up():
    ours, theirs = socket.socketpair()
    theirs.close()
    return ours
def broken(sock, authenticated):
    raise ValueError("a worker's own bug")
for worker in (daemon.worker, quiet_on_hang_up(daemon.worker), quiet_on_hang_up(broken)):
    try:
        print(worker(hung_up(), True))
    except Exception as exc:
        print(type(exc).__name__)
sys.stdout.flush()
os._exit(0)
"""


def test_the_workers_of_a_session_started_here_end_quietly_when_the_jvm_hangs_up(spark):
    """A session that stops closes its idle workers' sockets, and PySpark's worker, finding the
    JVM gone as it reports, raises ``BrokenPipeError``, which its daemon prints as a traceback
    after the command's last line. The engine's daemon runs PySpark's worker wrapped, so that
    the worker exits (returns 1) as it would, without the traceback; other failures raise."""
    from crawler.recluster.spark_daemon import quiet_on_hang_up

    if spark.sparkContext.getConf().get("spark.python.daemon.module") is None:
        pytest.skip("the session was not started by the engine")
    rows = spark.range(0, 2, 1, 2).mapInArrow(_daemon_s_worker, "worker string").collect()
    # (the daemon runs as __main__: its functions' module is that)
    assert {row.worker for row in rows} == {f"{quiet_on_hang_up.__qualname__}.<locals>.run"}
    # what Spark sets in its workers' environment: a worker whose last flush fails raises
    env = {**os.environ, "PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE": "true"}
    done = subprocess.run([sys.executable, "-c", _HUNG_UP], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.split() == ["BrokenPipeError", "1", "ValueError"], done.stderr


def test_the_daemon_leaves_off_only_zips_of_pyspark_inside_the_installed_package(tmp_path):
    """:func:`redundant_zips` on real directories: a zip inside the PySpark package the path
    would import goes; a zip of another Spark home, or one with no package beside it, stays."""
    from crawler.recluster.spark_daemon import redundant_zips

    installed = tmp_path / "site-packages"
    (installed / "pyspark" / "python" / "lib").mkdir(parents=True)
    (installed / "pyspark" / "__init__.py").write_text("")
    inside = installed / "pyspark" / "python" / "lib" / "pyspark.zip"
    elsewhere = tmp_path / "opt" / "spark" / "python" / "lib" / "pyspark.zip"
    py4j = installed / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip"
    for archive in (inside, elsewhere, py4j):
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(b"")
    assert redundant_zips([str(inside), str(py4j), str(installed)]) == [str(inside)]
    assert redundant_zips([str(elsewhere), str(installed)]) == []
    assert redundant_zips([str(inside), str(tmp_path / "empty")]) == []
    assert redundant_zips([str(installed)]) == []


# --- the JVM's class archive ----------------------------------------------------------------------

#: a local session in a process of its own: which archives of ``NEARDUP_CLASS_ARCHIVE`` its JVM
#: mapped (read from the JVM's own memory map), its options, and a query's answer
_ARCHIVE_RUN = """
import json, sys
from pyspark import SparkContext
from crawler.recluster.spark import spark_session, stop_session
session, _ = spark_session("local[1]")
maps = open(f"/proc/{SparkContext._gateway.proc.pid}/maps").read().splitlines()
mapped = sorted({line.split()[-1] for line in maps if line.startswith(tuple("0123456789abcdef"))
                 and line.endswith(".jsa") and line.split()[-1].startswith(sys.argv[1])})
options = session.sparkContext.getConf().get("spark.driver.defaultJavaOptions")
answer = session.range(0, 5, 1, 1).selectExpr("sum(id) AS s").collect()[0].s
stop_session(session, lambda message: print("note:", message, file=sys.stderr))
print(json.dumps({"mapped": mapped, "options": options, "answer": answer}))
"""


def _archive_run(directory: Path | str) -> tuple[dict, str]:
    env = {**os.environ, "NEARDUP_CLASS_ARCHIVE": str(directory)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "-c", _ARCHIVE_RUN, str(directory)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # nothing but the answer on stdout: the JVM's own words about its archive are silenced
    return json.loads(done.stdout), done.stderr


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the JVM's memory map")
def test_the_first_local_session_writes_the_class_archive_and_later_ones_map_it(tmp_path):
    """The first session writes the archive as its JVM exits, and says so; the next maps it
    (its JVM's memory map holds the file); a damaged archive is ignored, not fatal; ``off``
    leaves the JVM's options as they were."""
    cache = tmp_path / "cache"
    first, said = _archive_run(cache)
    assert first["answer"] == 10 and first["mapped"] == []
    assert "ArchiveClassesAtExit" in first["options"] and "faster starts" in said
    written = sorted(p.name for p in cache.iterdir())
    assert len(written) == 1 and written[0].startswith("spark-") and written[0].endswith(".jsa")
    archive = cache / written[0]
    assert archive.stat().st_size > 10_000_000  # thousands of classes, not an empty file

    second, said = _archive_run(cache)
    assert second["answer"] == 10 and second["mapped"] == [str(archive)]
    assert "SharedArchiveFile" in second["options"] and "faster starts" not in said
    assert sorted(p.name for p in cache.iterdir()) == written

    archive.chmod(0o644)
    archive.write_bytes(b"not an archive" * 1000)
    damaged, _ = _archive_run(cache)
    assert damaged["answer"] == 10 and damaged["mapped"] == []

    off, _ = _archive_run("off")
    assert off["answer"] == 10 and "Archive" not in off["options"]
    # the local options and the log's configuration, nothing else
    assert off["options"] == f"{local_java_options()} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"


def test_one_process_at_a_time_writes_the_class_archive(tmp_path):
    """While one process writes the archive (its lock is fresh), another starts without; a
    lock left by a process that died is cleared. The archive's name follows the Java, the
    Spark and the JVM options it was written for."""
    from crawler.recluster.spark.archive import ClassArchive

    env = {"NEARDUP_CLASS_ARCHIVE": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    writer = ClassArchive.from_environ(env, "-Xmx1g")
    assert "ArchiveClassesAtExit" in writer.java_options() and writer.writing
    other = ClassArchive.from_environ(env, "-Xmx1g")
    assert other.java_options() == "" and not other.writing
    assert writer.keep(None) is False  # no JVM wrote it: nothing kept, the lock given up
    assert list(tmp_path.iterdir()) == []

    blocked = ClassArchive.from_environ(env, "-Xmx1g")
    blocked.java_options()
    lock = blocked.path.with_suffix(".lock")
    assert lock.read_text() == str(os.getpid())
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    lock.write_text(gone)  # as if the process that took the lock had died writing
    half = blocked.path.with_name(f"{blocked.path.stem}.dead.part")
    half.write_bytes(b"half an archive")
    later = ClassArchive.from_environ(env, "-Xmx1g")
    assert "ArchiveClassesAtExit" in later.java_options() and not half.exists()
    later.keep(None)

    # the archives of the installs used last are kept, older ones removed as a new one starts
    olds = [tmp_path / f"spark-{n}.jsa" for n in range(5)]
    for age, old in enumerate(olds):
        old.write_bytes(b"an archive")
        os.utime(old, (time.time() - 3600 * (age + 1),) * 2)
    os.utime(olds[4])  # the oldest written, but used just now
    fresh = ClassArchive.from_environ(env, "-Xmx1g")
    assert fresh.java_options() and fresh.writing
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == [
        "spark-0.jsa", "spark-1.jsa", "spark-4.jsa"]
    fresh.keep(None)

    names = {ClassArchive.from_environ(e, o).path.name for e, o in [
        (env, "-Xmx1g"), (env, "-Xmx2g"), ({**env, "JAVA_HOME": str(tmp_path)}, "-Xmx1g")]}
    assert len(names) == 3
    assert ClassArchive.from_environ({**env, "NEARDUP_CLASS_ARCHIVE": "off"}, "") is None


# --- under spark-submit, as on a cluster ---------------------------------------------------------


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


def test_a_session_clears_what_killed_writers_of_any_archive_left(tmp_path):
    """A process killed while its JVM wrote an archive leaves its lock and a half-written
    archive of some 170 MB, perhaps for options no later session uses. Any session that starts,
    one that maps its own archive too, removes those whose writer is gone (or that no lock
    covers); a live writer's, and a lock just being taken, stay."""
    from crawler.recluster.spark.archive import ClassArchive

    env = {"NEARDUP_CLASS_ARCHIVE": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    mapped = ClassArchive.from_environ(env, "-Xmx1g")
    mapped.path.write_bytes(b"an archive")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for stem, holder in (("spark-killed", gone), ("spark-unlocked", None),
                         ("spark-writing", str(os.getpid())), ("spark-starting", "")):
        if holder is not None:
            (tmp_path / f"{stem}.lock").write_text(holder)
        (tmp_path / f"{stem}.{stem[6:]}.part").write_bytes(b"half an archive")
    assert mapped.java_options().startswith("-XX:SharedArchiveFile=")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        mapped.path.name, "spark-starting.lock", "spark-starting.starting.part",
        "spark-writing.lock", "spark-writing.writing.part"])


def test_the_command_shows_its_own_progress_and_none_of_spark_s_start_up_lines(tmp_path):
    """A local session started by the command: no stage bars, none of the lines Spark's log
    prints as it starts; one line says where Spark's web UI is, and the command's own bar goes
    from reading to writing."""
    docs, _ = truth_corpus(seed=4, mixed=3, identical=2, singles=3)
    text = write_jsonl(tmp_path / "t.jsonl", docs)
    env = {**os.environ, "NEARDUP_CLASS_ARCHIVE": "off"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", "recluster", "--engine", "spark",
         "--master", "local[1]", "--jsonl", str(text), "-o", str(tmp_path / "c.jsonl")],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{len(docs)} documents" in done.stdout  # the summary
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


def test_spark_settings_reach_the_session_the_command_starts(tmp_path):
    """``--spark-conf`` as a Spark user gives ``--conf`` to spark-submit: the session the
    command starts has them (the driver's memory, set before its JVM starts, among them), over
    the engine's own, and the summary says so; the clusters are the same."""
    docs, _ = truth_corpus(seed=4, mixed=3, identical=2, singles=3)
    text = write_jsonl(tmp_path / "t.jsonl", docs)
    env = {**os.environ, "NEARDUP_CLASS_ARCHIVE": "off"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    settings = {"spark.driver.memory": "900m", "spark.sql.adaptive.enabled": "true",
                "spark.ui.enabled": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", "recluster", "--engine", "spark",
         "--master", "local[1]", "--jsonl", str(text), "-o", str(tmp_path / "c.jsonl"),
         *(f"--spark-conf={k}={v}" for k, v in settings.items()), "--json"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["spark"] == {"master": "local[1]", "cores": 1, "settings": settings}
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


# --- mistakes: one line, exit 2 --------------------------------------------------------------------


def test_wrong_options_missing_java_and_bad_masters_are_one_line_errors(
        spark, tmp_path, capsys, monkeypatch):
    path = write_jsonl(tmp_path / "c.jsonl", truth_corpus(mixed=1, identical=1, singles=1)[0])
    spark_run = ["--jsonl", str(path), "--engine", "spark", "-o", str(tmp_path / "out")]
    assert "popular" in error(capsys, *spark_run, "--representative", "popular")
    assert "--index" in error(capsys, *spark_run, "--index", str(tmp_path / "i"))
    assert "--diff compares a store's crawl" in error(capsys, *spark_run, "--diff")
    assert "--partitions" in error(capsys, *spark_run, "--partitions", "0")
    assert "--engine spark" in error(capsys, "--jsonl", str(path), "--output-format", "parquet")
    assert "--engine spark" in error(capsys, "--jsonl", str(path), "--master", "local[2]")
    for exact in ("--exact-cap", "--no-exact-cap"):
        assert "--exact-cap needs --engine spark" in error(capsys, "--jsonl", str(path), exact)
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
