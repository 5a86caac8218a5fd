"""``neardup recluster --engine spark`` measured against the local engine and Spark ML, in one run.

    python -m benchmarks.spark [--min-pages 3000] [--repeats 3] [--sizes 10000,100000,1000000]

**Corpus.** :mod:`benchmarks.recluster`'s: real pages of Debian's documentation plus edited copies
of a third of them, in a shuffled, seeded order, read as ``neardup recluster --html`` reads them.

**Speed** (documents per second, end to end: read, canonicalise, sketch, cluster, write
clusters.jsonl; median of ``--repeats`` interleaved rounds):

* the local engine with 1 worker process (its documents/s per core);
* the Spark engine in ``local[1]`` and ``local[2]`` (per core: documents/s over the cores), so
  the scaling from one core to two, and the ratio to the local engine per core;
* Spark ML as a Spark user reaches for it first: ``MinHashLSH`` (16 hash tables) over 5-word
  shingles (``HashingTF``), ``approxSimilarityJoin`` at Jaccard ≥ the threshold, with the default
  driver memory, in ``local[2]``; it finds similar pairs only (no clusters), so the ratio
  flatters it.

Each Spark run is a child process with a session of its own (its start-up is not timed). The
Spark engine's output is compared with the local engine's line by line (they should agree), and
its shuffle (bytes written by every stage, from Spark's own metrics) and its number of greedy
rounds are reported per document.

**Scale.** The clustering stages alone (exact duplicates, candidates, estimates, greedy rounds,
cluster ids) on synthetic MIN_100 sketches made in the executors (random values; a planted
fraction are near copies of an earlier document), at each of ``--sizes`` in ``local[2]``: the
time per document should not grow with the number of documents.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)

_REPO = Path(__file__).resolve().parent.parent


# --- children: one Spark session each ------------------------------------------------------------


def _session(master: str) -> Any:
    from crawler.recluster.spark import spark_session

    session, _ = spark_session(master)
    return session


def _shuffle_bytes(session: Any) -> int:
    """Bytes written to shuffle files by every stage of this session (Spark's REST API)."""
    sc = session.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    with urllib.request.urlopen(url, timeout=30) as response:
        stages = json.load(response)
    return sum(int(s.get("shuffleWriteBytes", 0)) for s in stages)


def child_engine(master: str, files: str, threshold: float, out: str,
                 cap: int | None = None) -> dict[str, Any]:
    from crawler.recluster.spark import recluster_spark, tasks
    from dedup.params import DedupParams, SketchParams

    files = json.loads(Path(files).read_text())
    session = _session(master)
    started = time.perf_counter()
    with open(out, "w", encoding="utf-8") as fh:
        dedup = DedupParams(threshold=threshold, **({} if cap is None else {"cap": cap}))
        result = recluster_spark(session, tasks(html=files), SketchParams(), dedup, out=fh)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "documents": result.summary.documents,
            "shuffle_bytes": _shuffle_bytes(session), "rounds": result.stats["rounds"],
            "capped": result.stats["capped"]}


def child_sparkml(master: str, files: str, threshold: float) -> dict[str, Any]:
    from pyspark.ml.feature import HashingTF, MinHashLSH
    from pyspark.sql.functions import size

    from dedup.canonical import html_tokens

    from pyspark.sql import SparkSession

    files = json.loads(Path(files).read_text())
    # not through crawler.*: it imports Scrapy, whose zope.interface confuses pyspark.ml's
    # parameter discovery (AttributeError: __provides__)
    session = (SparkSession.builder.master(master)
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter()

    def shingles(path: str) -> tuple[str, list[str]]:
        with open(path, "rb") as fh:
            tokens = html_tokens(fh.read())
        return path, [" ".join(tokens[i:i + 5]) for i in range(max(0, len(tokens) - 4))]

    try:
        rdd = session.sparkContext.parallelize(files, max(2, len(files) // 200)).map(shingles)
        frame = session.createDataFrame(rdd, ["id", "shingles"]).where(size("shingles") > 0)
        features = HashingTF(inputCol="shingles", outputCol="features", binary=True,
                             numFeatures=1 << 20).transform(frame).cache()
        model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=16,
                           seed=1).fit(features)
        pairs = model.approxSimilarityJoin(features, features, 1 - threshold,
                                           distCol="distance")
        found = pairs.where("datasetA.id < datasetB.id").count()
        error = None
    except Exception as exc:  # out of memory is the finding, not a crash of the benchmark
        found, error = None, str(exc).strip().splitlines()[0][:200]
    return {"seconds": time.perf_counter() - started, "documents": len(files), "pairs": found,
            "error": error, "shuffle_bytes": _shuffle_bytes(session)}


def child_scale(master: str, size: int, planted: float, seed: int) -> dict[str, Any]:
    import numpy as np

    from crawler.recluster.spark import (
        DOCUMENTS_PER_PARTITION,
        RECORD_BITS,
        KeyRanges,
        SparkJob,
        cluster,
    )
    from benchmarks.recluster import synthetic_values
    from dedup.params import DedupParams, SketchParams
    from dedup.sketches import MinSketch

    session = _session(master)
    sc = session.sparkContext
    s, n = 100, 1000
    per_task = 10_000
    counts = [min(per_task, size - t * per_task) for t in range(-(-size // per_task))]

    def documents(task: int):
        rng = np.random.default_rng([seed, task, 1])
        for i in range(counts[task]):
            doc = task * per_task + i
            values = synthetic_values(seed, doc, planted, rng, s)
            key = (task << RECORD_BITS) + i
            yield key, (f"doc-{doc}", MinSketch(values[:s], s, n), int(values[0]) ^ doc, None)

    partitions = max(2, sc.defaultParallelism, -(-size // DOCUMENTS_PER_PARTITION))
    sketched = sc.parallelize(range(len(counts)), len(counts)).flatMap(documents).persist()
    sketched.count()  # made before the clock starts: only clustering is timed
    made = _shuffle_bytes(session)
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    job = SparkJob(SketchParams(), DedupParams(threshold=0.9), partitions)
    started = time.perf_counter()
    clustered = cluster(session, sketched, job, KeyRanges(starts, partitions))
    kinds = clustered.rows.map(lambda kv: kv[1][3]).countByValue()
    seconds = time.perf_counter() - started
    return {"size": size, "seconds": seconds, "us_per_doc": seconds / size * 1e6,
            "rounds": clustered.stats["rounds"], "kinds": dict(kinds),
            "shuffle_bytes": _shuffle_bytes(session) - made}


def _child(kind: str, **kwargs: Any) -> dict[str, Any]:
    """Run one child in a process of its own; its result as a dict."""
    command = [sys.executable, "-m", "benchmarks.spark", "--child", json.dumps([kind, kwargs])]
    done = subprocess.run(command, cwd=_REPO, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"child exited {done.returncode}: {tail}"}
    return json.loads(lines[-1])


# --- the parent ----------------------------------------------------------------------------------


def differing_lines(a: Path, b: Path) -> int:
    left, right = a.read_text().splitlines(), b.read_text().splitlines()
    return sum(x != y for x, y in zip(left, right)) + abs(len(left) - len(right))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-pages", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--planted", type=float, default=0.3)
    parser.add_argument("--small-cap", type=int, default=4,
                        help="a boilerplate cap that bites, for the agreement row")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-sparkml", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, kwargs = json.loads(args.child)
        run = {"engine": child_engine, "sparkml": child_sparkml, "scale": child_scale}[kind]
        print(json.dumps(run(**kwargs)))
        return

    results: dict[str, Any] = {"threshold": args.threshold}
    with tempfile.TemporaryDirectory(prefix="neardup-bench-spark-") as work:
        work_dir = Path(work)
        if not args.skip_speed:
            results["speed"] = speed(args, work_dir)
        sizes = [int(x) for x in args.sizes.split(",") if x]
        results["scale"] = []
        for n in sizes:
            log(f"scale: {n:,} synthetic sketches in local[2]")
            results["scale"].append(_child("scale", master="local[2]", size=n,
                                           planted=args.planted, seed=args.seed))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))


def speed(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    # imported here: a Spark ML child must not import Scrapy (see child_sparkml)
    from benchmarks.recluster import build_corpus, real_pages, run_ours

    pages = real_pages(args.min_pages)
    files, _ = build_corpus(pages, work / "corpus", args.seed, 1 / 3)
    names = str(work / "files.json")  # the children read the file names from here
    Path(names).write_text(json.dumps([str(f) for f in files]))
    log(f"corpus: {len(files):,} pages ({len(pages):,} real, the rest edited copies)")
    runs: dict[str, list[dict[str, Any]]] = {
        "local, 1 job": [], "spark local[1]": [], "spark local[2]": [], "Spark ML local[2]": []}
    local_out, spark_out = work / "local.jsonl", work / "spark.jsonl"
    for round_ in range(args.repeats):
        log(f"speed: round {round_ + 1} of {args.repeats}")
        runs["local, 1 job"].append({"seconds": run_ours(files, local_out, args.threshold, 1),
                                     "documents": len(files)})
        for master in ("local[1]", "local[2]"):
            runs[f"spark {master}"].append(_child("engine", master=master, files=names,
                                                  threshold=args.threshold,
                                                  out=str(spark_out)))
        if not args.skip_sparkml and round_ == 0:  # one run: it is the slow one
            runs["Spark ML local[2]"].append(_child("sparkml", master="local[2]", files=names,
                                                    threshold=args.threshold))
    cores = {"local, 1 job": 1, "spark local[1]": 1, "spark local[2]": 2, "Spark ML local[2]": 2}
    rows = {}
    for name, done in runs.items():
        ok = [r for r in done if "error" not in r or r.get("error") is None]
        if not ok:
            rows[name] = {"error": done[0].get("error") if done else "not run"}
            continue
        seconds = statistics.median(r["seconds"] for r in ok)
        rows[name] = {"seconds": seconds, "docs_per_s": len(files) / seconds,
                      "docs_per_s_per_core": len(files) / seconds / cores[name],
                      **{k: ok[0][k] for k in ("shuffle_bytes", "rounds", "pairs", "capped")
                         if k in ok[0]}}
    differing = differing_lines(local_out, spark_out)
    # where the engines can differ: a boilerplate cap small enough to bite
    log(f"agreement with a cap of {args.small_cap}")
    from crawler.recluster.run import recluster
    from crawler.recluster.inputs import read_html_files
    from dedup.params import DedupParams, SketchParams

    with open(local_out, "w", encoding="utf-8") as fh:
        capped_local = recluster(read_html_files(files), SketchParams(),
                                 DedupParams(threshold=args.threshold, cap=args.small_cap),
                                 out=fh, jobs=2)
    capped_spark = _child("engine", master="local[2]", files=names, threshold=args.threshold,
                          out=str(spark_out), cap=args.small_cap)
    return {"documents": len(files), "rows": rows, "differing_lines": differing,
            "small_cap": {"cap": args.small_cap,
                          "differing_lines": differing_lines(local_out, spark_out),
                          "capped_local": capped_local.stats["capped"],
                          "capped_spark": capped_spark.get("capped")}}


def render(results: dict[str, Any]) -> str:
    out = []
    speed = results.get("speed")
    if speed:
        rows = speed["rows"]
        base = rows["local, 1 job"]["docs_per_s_per_core"]
        two = rows["spark local[2]"]
        out.append(f"speed: {speed['documents']:,} pages, threshold {results['threshold']} "
                   "(medians)")
        out.append(f"{'':<22}{'docs/s':>9}{'per core':>10}{'vs local/core':>15}"
                   f"{'shuffle B/doc':>15}{'rounds':>8}")
        for name, r in rows.items():
            if "error" in r:
                out.append(f"{name:<22}  failed: {r['error']}")
                continue
            shuffle = r.get("shuffle_bytes")
            per_doc = "" if shuffle is None else f"{shuffle / speed['documents']:,.0f}"
            out.append(
                f"{name:<22}{r['docs_per_s']:>9.1f}{r['docs_per_s_per_core']:>10.1f}"
                f"{r['docs_per_s_per_core'] / base:>14.2f}×{per_doc:>15}"
                f"{r.get('rounds', ''):>8}"
            )
        one = rows["spark local[1]"]
        if "error" not in one and "error" not in two:
            out.append(f"scaling local[1] → local[2]: {two['docs_per_s'] / one['docs_per_s']:.2f}× "
                       "(goal ≥ 1.7×)")
            out.append(f"spark per core vs local per core: "
                       f"{two['docs_per_s_per_core'] / base:.2f}× (goal ≥ 0.5×)")
        ml = rows["Spark ML local[2]"]
        if "error" not in ml and "error" not in two:
            out.append(f"spark engine vs Spark ML MinHashLSH (local[2]): "
                       f"{two['docs_per_s'] / ml['docs_per_s']:.1f}× (goal ≥ 10×; "
                       f"{ml.get('pairs')} similar pairs found)")
        out.append(f"lines differing from the local engine: {speed['differing_lines']} "
                   f"of {speed['documents']:,}")
        small = speed.get("small_cap")
        if small:
            share = small["differing_lines"] / speed["documents"]
            out.append(f"with --cap {small['cap']}: {small['differing_lines']} lines differ "
                       f"({share:.2%}; goal < 0.1%); the cap bit on {small['capped_local']:,} "
                       f"fingerprints locally, {small['capped_spark']} on Spark")
    if results.get("scale"):
        out.append("")
        out.append("scale (clustering stages, synthetic MIN_100 sketches, local[2]):")
        out.append(f"{'documents':>12}{'seconds':>10}{'µs/doc':>10}{'vs first':>10}"
                   f"{'rounds':>8}{'shuffle B/doc':>15}")
        first = None
        for r in results["scale"]:
            if "error" in r:
                out.append(f"{'?':>12}  failed: {r['error']}")
                continue
            first = first or r["us_per_doc"]
            out.append(f"{r['size']:>12,}{r['seconds']:>10.1f}{r['us_per_doc']:>10.0f}"
                       f"{r['us_per_doc'] / first:>9.2f}×{r['rounds']:>8}"
                       f"{r['shuffle_bytes'] / r['size']:>15,.0f}")
        out.append("goal: time per document flat within 1.5×")
    return "\n".join(out)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
