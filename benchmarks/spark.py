"""``neardup recluster --engine spark`` measured against the local engine and Spark ML, in one run.

    python -m benchmarks.spark                      # the full run (about half an hour on 2 cores)
    python -m benchmarks.spark --pages 1500 --sizes 10000 --repeats 1   # a quick look
    python -m benchmarks.spark --skip-speed         # the scale part only
    python -m benchmarks.spark --skip-speed --baseline 5169c56 --scale-repeats 3
                                                    # the scale part, this tree against another
    python -m benchmarks.spark --pages 4000 --sizes "" --baseline 5169c56
                                                    # Spark ML against both trees' engines
    python -m benchmarks.spark --json               # the figures for a machine to read
    python -m benchmarks.spark --spark-conf spark.buffer.pageSize=1m
                                                    # a setting of every session this tree starts

**Corpus.** ``--pages`` real pages drawn (seeded) from six Debian documentation packages
(:mod:`benchmarks.corpus`: Python, PostgreSQL, Apache, SQLite, the Java 17 API, Rust; about
45,000 pages, many of them generated API pages alike), plus edited copies of a third of them
(:func:`benchmarks.recluster.build_corpus`), in a shuffled, seeded order, read as ``neardup
recluster --html`` reads them. The default, 15,000 pages (20,000 documents), is large enough
that a distributed engine's throughput is measured rather than its start-up.

**Speed** (documents per second, end to end: read, canonicalise, sketch, cluster, write
clusters.jsonl; median of ``--repeats`` interleaved rounds). A row's cores are the CPUs it may
run on: each run is pinned to that many (``taskset`` for a child, ``sched_setaffinity`` in
process; the JVM and the Python workers inherit it), so that "per core" means per CPU used:

* the local engine with 1 worker process, on 1 CPU (its documents/s per core);
* datasketch's ``MinHash`` + ``MinHashLSH`` with the same greedy first-member rule
  (:func:`benchmarks.recluster.run_datasketch`), one process on 1 CPU, what a Python user
  writes on one machine;
* the Spark engine in ``local[1]`` on 1 CPU and ``local[2]`` on 2 (per core: documents/s over
  the cores), so the scaling from one core to two, and the ratio to the local engine per core;
  and ``local[1]`` unpinned, as a user starts it on this machine: its JVM's threads may then
  run on the other CPU beside its one task, so it is not a one-core figure;
* Spark ML as a Spark user reaches for it first: ``MinHashLSH`` (16 hash tables) over 5-word
  shingles (``HashingTF``), ``approxSimilarityJoin`` at Jaccard ≥ the threshold, in ``local[2]``
  with the default driver memory, once; if that fails (out of memory, say), its failure is
  printed and it runs once more with an 8 GB driver, so that there is a ratio. It finds similar
  pairs only (no clusters), so the ratio flatters it. Template pages fill its buckets and it
  does not finish the whole corpus in half an hour, so it runs on the corpus's first
  ``--sparkml-documents``, and so does the Spark engine in ``local[2]``, for the ratio (with
  ``--baseline``, that commit's engine too: a first run in a fresh session each). A run
  longer than ``--sparkml-timeout`` is stopped and reported as a bound.

Each Spark run is a child process with a session of its own, started as the command starts
one; the session's creation is not timed, the first Python task's start-up is (it starts the
Python workers). Both are printed on their own, from a fresh session that runs a one-row
Python task twice. The ``local[1]`` and ``local[2]`` children then run the same job once more
in their session: the *warm session* rows, what a notebook, a long job or a second input
gets once the JVM has loaded and compiled its code (the local engine's row is a median of
runs in one process: warm after its first). The goals are printed for both. The Spark
engine's output is compared with the local engine's line by line (they should agree, also
under a small boilerplate cap, where the command searches as ``--exact-cap`` by default; and
once more with the other search, ``--exact-cap`` at the default cap and ``--no-exact-cap`` at
the small one, with its searches and time), and its shuffle (bytes written by every stage,
from Spark's own metrics) and its number of greedy rounds are reported.

**This machine's ceiling.** Two CPUs of a machine do not always do twice one CPU's work:
busy together, they share caches, memory bandwidth and, on a virtual machine, a host. So the
local engine (one process, no Spark) runs on the corpus's first 5,000 documents alone on one
CPU, then twice at once, one per CPU, ``--repeats`` times: two at once against one alone is
the most a scaling from one core to two can reach here (:func:`ceiling`).

**Scale.** The clustering stages alone (exact duplicates, candidates, estimates, greedy rounds,
cluster ids) on synthetic MIN_100 sketches made in the executors (random values; a planted
fraction are near copies of an earlier document,
:func:`benchmarks.recluster.synthetic_values`), at each of ``--sizes`` in ``local[2]``: the
time per document should not grow with the number of documents (goal: flat within 1.5×).
Each size runs in a fresh session, then once more in it (warm), ``--scale-repeats`` times.
With ``--baseline COMMIT`` the same children also run from a copy of that commit's tree
(``git archive``, its C helpers built there), interleaved with this tree's, and the table
prints both and the ratio of their medians' time per document (goal: within 1.15×).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
#: the Spark ML row's driver memory when the default one fails
BIG_DRIVER = "8g"
LOCAL = "local engine, 1 process"
ML = "Spark ML local[2]"
ML_BIG = f"Spark ML local[2], {BIG_DRIVER} driver"
FEW = "spark local[2], Spark ML corpus"
#: the longer chain of :func:`stage_floor`: enough stages that their cost is not noise
FLOOR_STAGES = 21
#: the same Spark runs again in their session: what a notebook, a long job or a second input
#: gets once the JVM has loaded and compiled its code and the Python workers are up (the
#: local engine's row is a median over runs in one process, so it is warm after its first)
WARM1, WARM2 = "spark local[1], warm session", "spark local[2], warm session"
DATASKETCH = "datasketch MinHashLSH, 1 process"
#: the variable that hands ``--spark-conf`` to this tree's children (a baseline tree's ignore it)
SPARK_CONF = "NEARDUP_BENCH_SPARK_CONF"
#: local[1] as a user starts it: its JVM's threads may run on the machine's other CPU
FREE1, FREE1_WARM = "spark local[1], unpinned", "spark local[1], unpinned, warm session"


def cpu_set(cpus: int) -> set[int]:
    """The first ``cpus`` of the CPUs this process may run on."""
    return set(sorted(os.sched_getaffinity(0))[:cpus])


def pinned(cpus: int, run: Any) -> Any:
    """``run()`` with this thread (and whatever it starts) on ``cpus`` CPUs, then as before."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpu_set(cpus))
    try:
        return run()
    finally:
        os.sched_setaffinity(0, before)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- children: one Spark session each ------------------------------------------------------------


def _session(master: str, driver_memory: str | None = None) -> Any:
    """A session started as the command starts its own, with the benchmark's ``--spark-conf``
    (:data:`SPARK_CONF`); ``driver_memory`` reaches the JVM before it starts."""
    from crawler.recluster.spark import spark_session

    settings = json.loads(os.environ.get(SPARK_CONF, "{}"))
    if driver_memory is not None:
        settings["spark.driver.memory"] = driver_memory
    session, _ = spark_session(master, settings)
    return session


def _conf(session: Any) -> dict[str, str | None]:
    """The settings both kinds of Spark row must share, as the session has them."""
    conf = session.sparkContext.getConf()
    keys = ("spark.driver.bindAddress", "spark.driver.memory")
    return {key: conf.get(key) for key in keys}


def _shuffle_bytes(session: Any) -> int:
    """Bytes written to shuffle files by every stage of this session (Spark's REST API)."""
    sc = session.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    with urllib.request.urlopen(url, timeout=30) as response:
        stages = json.load(response)
    return sum(int(s.get("shuffleWriteBytes", 0)) for s in stages)


def _group_work(session: Any, group: str) -> tuple[float, int, int]:
    """What the jobs of ``group`` (``SparkContext.setJobGroup``) ran: their tasks' seconds
    summed over cores (the executors' work, without the driver's planning and waiting between
    jobs), the jobs, and the stages that ran (not those skipped, their output already there);
    from Spark's REST API."""
    sc = session.sparkContext
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    with urllib.request.urlopen(f"{api}/jobs", timeout=30) as response:
        jobs = [job for job in json.load(response) if job.get("jobGroup") == group]
    ids = {i for job in jobs for i in job["stageIds"]}
    with urllib.request.urlopen(f"{api}/stages", timeout=30) as response:
        ran = [s for s in json.load(response) if s["stageId"] in ids and s["status"] == "COMPLETE"]
    return sum(int(s.get("executorRunTime", 0)) for s in ran) / 1000, len(jobs), len(ran)


def stage_floor(session: Any, partitions: int, repeats: int = 3) -> float:
    """Seconds a stage costs here when it moves nothing: one job of :data:`FLOOR_STAGES`
    stages, each a shuffle into ``partitions`` tasks that pass a few rows through Python as
    the clustering stages' steps do (:func:`~crawler.recluster.spark.steps.python_step`),
    planned and run, warm (the median of ``repeats``), per stage."""
    from crawler.recluster.spark.steps import python_step

    session.conf.set("spark.sql.shuffle.partitions", str(partitions))

    def chain() -> float:
        started = time.perf_counter()
        frame = python_step(session.range(0, 1000, 1, partitions), passed_through, "id long")
        for _ in range(FLOOR_STAGES - 1):
            frame = python_step(frame.repartition(partitions, "id"), passed_through, "id long")
        frame.collect()
        return time.perf_counter() - started

    chain()  # its code paths run once before the clock
    return statistics.median(chain() for _ in range(repeats)) / FLOOR_STAGES


def passed_through(batches: Any) -> Any:
    """A Python step that does nothing: what a task costs however little it holds."""
    yield from batches


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds used so far by process ``root`` (this one by default) and every process under
    it: the JVM, its Python daemon and workers. A child that has exited and been waited for
    counts in its parent's own figures, so the difference of two readings is the CPU the tree
    spent in between, on however many cores; on a machine shared with other work it is the
    steadier measure of cost per core than wall time."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone since the listing
        stats[int(entry)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry))
    ticks, total, todo = os.sysconf("SC_CLK_TCK"), 0, [root]
    while todo:
        pid = todo.pop()
        fields = stats.get(pid)
        if fields is not None:  # utime, stime, and those of waited-for children
            total += sum(int(x) for x in fields[11:15])
        todo.extend(children.get(pid, ()))
    return total / ticks


def _failure(text: str, last: bool = False) -> str:
    """The line that says why a Spark run failed: an out-of-memory error wherever it is in a
    Java stack trace, else the first exception named (``last``: the last, as a Python traceback
    ends with it), else the first line."""
    lines = [line.strip(" :") for line in text.strip().splitlines() if line.strip(" :")] or ["?"]
    if last:
        lines.reverse()
    for marks in (("OutOfMemoryError",), ("Exception:", "Error:")):
        for line in lines:
            if any(mark in line for mark in marks):
                return line[:240]
    return lines[0][:240]


def child_engine(master: str, files: str, threshold: float, out: str,
                 cap: int | None = None, warm: bool = False,
                 exact_cap: bool | None = None) -> dict[str, Any]:
    """One engine run in a fresh session; ``warm``: then the same run again in that session,
    whose time is reported as ``warm_seconds``; ``exact_cap``: as ``--exact-cap`` (True) or
    ``--no-exact-cap`` (False), else the command's default."""
    from crawler.recluster.spark import recluster_spark, tasks
    from dedup.params import DedupParams, SketchParams

    files = json.loads(Path(files).read_text())
    session = _session(master)
    dedup = DedupParams(threshold=threshold, **({} if cap is None else {"cap": cap}))
    timed, shuffle = [], 0
    for _ in range(1 + warm):
        started, cpu = time.perf_counter(), tree_cpu()
        with open(out, "w", encoding="utf-8") as fh:
            result = recluster_spark(session, tasks(html=files), SketchParams(), dedup, out=fh,
                                     exact_cap=exact_cap)
        timed.append((time.perf_counter() - started, tree_cpu() - cpu))
        if len(timed) == 1:
            shuffle = _shuffle_bytes(session)  # the first run's (the session counts them all)
    return {"seconds": timed[0][0], "cpu_seconds": timed[0][1],
            **({"warm_seconds": timed[1][0], "warm_cpu_seconds": timed[1][1]} if warm else {}),
            "documents": result.summary.documents,
            "shuffle_bytes": shuffle, "rounds": result.stats["rounds"],
            "capped": result.stats["capped"], "passes": result.stats["passes"],
            "exact_cap": result.stats["exact_cap"], "conf": _conf(session)}


def child_sparkml(master: str, files: str, threshold: float,
                  driver_memory: str | None = None) -> dict[str, Any]:
    from pyspark.ml.feature import HashingTF, MinHashLSH
    from pyspark.sql.functions import size

    from dedup.canonical import html_tokens

    files = json.loads(Path(files).read_text())
    session = _session(master, driver_memory)
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
    except Exception as exc:  # noqa: BLE001 - out of memory is the finding, not a crash
        found, error = None, _failure(str(exc))
    seconds = time.perf_counter() - started
    try:
        shuffled = _shuffle_bytes(session)
    except OSError:  # a driver that ran out of memory may not answer
        shuffled = None
    return {"seconds": seconds, "documents": len(files), "pairs": found, "error": error,
            "shuffle_bytes": shuffled, "conf": _conf(session)}


def child_startup(master: str) -> dict[str, Any]:
    """What a fresh session costs before any work: its creation (outside every row's timing)
    and its first one-row Python task (inside: it starts the Python workers), beside the same
    task run again."""
    started = time.perf_counter()
    session = _session(master)
    created = time.perf_counter() - started
    one_row = session.range(0, 1, 1, numPartitions=1)

    def task() -> float:
        begun = time.perf_counter()
        one_row.mapInArrow(passed_through, "id long").collect()
        return time.perf_counter() - begun

    first = task()
    again = statistics.median(task() for _ in range(3))
    return {"master": master, "session": created, "first_task": first, "later_task": again}


def child_local(files: str, threshold: float, out: str) -> dict[str, Any]:
    """The local engine, one worker process, once (for :func:`ceiling`)."""
    from benchmarks.recluster import run_ours

    names = [Path(f) for f in json.loads(Path(files).read_text())]
    cpu = tree_cpu()
    seconds = run_ours(names, Path(out), threshold, 1)
    return {"seconds": seconds, "cpu_seconds": tree_cpu() - cpu, "documents": len(names)}


def child_scale(master: str, size: int, planted: float, seed: int) -> dict[str, Any]:
    import numpy as np

    from benchmarks.recluster import synthetic_values
    from crawler.recluster.pool import SketchedDocument
    from crawler.recluster.spark.run import (
        SHUFFLE_PARTITIONS, cluster, default_partitions, run_settings,
    )
    from crawler.recluster.spark.sketch import DOCUMENTS, SparkJob, document_batch, document_row
    from crawler.recluster.spark.tasks import document_key
    from dedup.params import DedupParams, SketchParams
    from dedup.sketches import MinSketch

    session = _session(master)
    sc = session.sparkContext
    s, n, batch = 100, 1000, 1024
    partitions = default_partitions(sc.defaultParallelism, size)  # as recluster_spark does
    per_task = min(10_000, -(-size // partitions))  # at least a task per partition
    counts = [min(per_task, size - t * per_task) for t in range(-(-size // per_task))]
    job = SparkJob(SketchParams(), DedupParams(threshold=0.9), partitions)
    need, containment = job.need, job.dedup.containment is not None

    def documents(batches: Any) -> Any:
        for tasks in batches:
            for task in tasks.column(0).to_pylist():
                rng = np.random.default_rng([seed, task, 1])
                rows = []
                for i in range(counts[task]):
                    doc = task * per_task + i
                    values = synthetic_values(seed, doc, planted, rng, s)
                    made = SketchedDocument(f"doc-{doc}", MinSketch(values[:s], s, n),
                                            int(values[0]) ^ doc)
                    rows.append(document_row(document_key(task, i), made, need, containment))
                    if len(rows) == batch:
                        yield document_batch(rows)
                        rows = []
                if rows:
                    yield document_batch(rows)

    tasks = sc.parallelize(range(len(counts)), len(counts)).map(lambda t: (t,)).toDF("task long")
    made = tasks.mapInArrow(documents, DOCUMENTS).persist()
    made.count()  # made before the clock starts: only clustering is timed
    runs = []
    for run in ("first", "warm"):
        before = _shuffle_bytes(session)
        sc.setJobGroup(run, f"clustering stages, {run} run")
        started = time.perf_counter()
        with run_settings(session) as held:  # as the engine runs them once it has counted
            session.conf.set(SHUFFLE_PARTITIONS, str(partitions))
            clustered = cluster(made, job, held)
            kinds = dict(clustered.rows.groupBy("kind").count().collect())
        runs.append((time.perf_counter() - started, _shuffle_bytes(session) - before,
                     *_group_work(session, run)))
    (seconds, shuffled, tasks, _, _), (warm, _, warm_tasks, jobs, stages) = runs
    stage_cost = stage_floor(session, partitions)
    return {"size": size, "seconds": seconds, "us_per_doc": seconds / size * 1e6,
            "warm_seconds": warm, "warm_us_per_doc": warm / size * 1e6,
            "task_us_per_doc": tasks / size * 1e6, "warm_task_us_per_doc": warm_tasks / size * 1e6,
            "partitions": partitions, "tasks": len(counts), "rounds": clustered.stats["rounds"],
            "jobs": jobs, "stages": stages, "stage_floor": stage_cost,
            "kinds": kinds, "shuffle_bytes": shuffled}


CHILDREN = {"engine": child_engine, "sparkml": child_sparkml, "startup": child_startup,
            "scale": child_scale, "local": child_local}


def _child(kind: str, timeout: float | None = None, cpus: int | None = None,
           on: set[int] | None = None, tree: Path = _REPO, **kwargs: Any) -> dict[str, Any]:
    """Run one child in a process group of its own (its JVM and Python workers with it), on
    ``cpus`` CPUs, or on the CPUs ``on`` (None: all), with the code of ``tree`` (this one, or
    a :class:`Baseline`'s); its result as a dict, or ``{"error": ...}``. A JVM that ran out of
    memory names the error on its own output only: it is added to the child's error."""
    command = [sys.executable, "-m", "benchmarks.spark", "--child", json.dumps([kind, kwargs])]
    if on is None and cpus is not None:
        on = cpu_set(cpus)
    if on is not None:
        command = ["taskset", "--cpu-list", ",".join(map(str, sorted(on))), *command]
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the tree's packages before the installed
    child = subprocess.Popen(command, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, env=env)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGTERM)  # the JVM's shutdown hooks remove its shuffle files
        try:
            child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
        return {"error": f"stopped after {timeout:,.0f} s", "timeout": timeout}
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if child.returncode < 0:  # not this benchmark's doing: only a timeout stops a child here
        name = signal.Signals(-child.returncode).name
        result = {"error": f"killed by {name} from outside the benchmark"}
    elif child.returncode or not lines:
        result = {"error": f"child exited {child.returncode}: {_failure(stderr, last=True)}"}
    else:
        result = json.loads(lines[-1])
    if result.get("error") and "OutOfMemoryError" in stderr:
        result["error"] = f"{_failure(stderr)} ({result['error']})"
    return result


# --- the parent ----------------------------------------------------------------------------------


def differing_lines(a: Path, b: Path) -> int:
    """Lines of two clusters.jsonl files that differ (one extra cluster early on renumbers
    every later one, so this counts a difference's reach)."""
    left, right = a.read_text().splitlines(), b.read_text().splitlines()
    return sum(x != y for x, y in zip(left, right)) + abs(len(left) - len(right))


def decisions(path: Path) -> dict[str, tuple[str, str]]:
    """Each document's decision and its cluster's representative, by id: what two runs must
    agree on whatever their cluster numbers."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    leader = {r["cluster"]: r["id"] for r in records if r["representative"]}
    return {r["id"]: (r["decision"], leader.get(r["cluster"], "?")) for r in records}


def decided_differently(a: Path, b: Path, examples: int = 3) -> dict[str, Any]:
    """How many documents two clusters.jsonl files decide differently (kind or representative),
    and the first few: file name, then each file's decision and representative."""
    from benchmarks.recluster import _name

    left, right = decisions(a), decisions(b)
    differ = sorted(doc for doc in left.keys() | right.keys() if left.get(doc) != right.get(doc))

    def named(decision: tuple[str, str] | None) -> list[str] | None:
        return None if decision is None else [decision[0], _name(decision[1])]

    return {"documents": len(differ),
            "examples": [[_name(doc), named(left.get(doc)), named(right.get(doc))]
                         for doc in differ[:examples]]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, metavar="N", default=15_000,
                        help="real pages drawn from the corpus; a third more are edited copies "
                             "(default: %(default)s; 1500 for a quick run)")
    parser.add_argument("--threshold", type=float, metavar="T", default=0.8,
                        help="resemblance threshold of every pipeline (default: %(default)s)")
    parser.add_argument("--repeats", type=int, metavar="N", default=3,
                        help="interleaved rounds of the speed rows; medians are printed "
                             "(default: %(default)s; Spark ML runs once)")
    parser.add_argument("--seed", type=int, metavar="N", default=1,
                        help="draws the pages, their edits and order, and the synthetic sketches")
    parser.add_argument("--sizes", metavar="N,N,...", default="10000,100000,1000000",
                        help="synthetic documents per scale run, comma-separated; empty: no "
                             "scale part (default: %(default)s)")
    parser.add_argument("--scale-repeats", type=int, metavar="N", default=1,
                        help="fresh sessions per size of the scale part; medians are printed "
                             "(default: %(default)s)")
    parser.add_argument("--baseline", metavar="COMMIT",
                        help="also run the scale part and the Spark ML corpus row from a copy "
                             "of COMMIT's tree, interleaved with this one's; print the ratio of "
                             "their time per document, and each one's against Spark ML")
    parser.add_argument("--planted", type=float, metavar="FRACTION", default=0.3,
                        help="fraction of near copies among the synthetic sketches "
                             "(default: %(default)s)")
    parser.add_argument("--small-cap", type=int, metavar="N", default=4,
                        help="a boilerplate cap small enough to bite, for the second agreement "
                             "row (default: %(default)s)")
    parser.add_argument("--sparkml-timeout", type=float, metavar="SECONDS", default=1800,
                        help="seconds a Spark ML run may take before it is stopped and reported "
                             "as a bound (default: %(default)s)")
    parser.add_argument("--sparkml-documents", type=int, metavar="N", default=4_000,
                        help="the first N documents of the corpus, on which Spark ML and "
                             "spark local[2] both run (default: %(default)s)")
    parser.add_argument("--skip-speed", action="store_true",
                        help="no corpus, no speed or agreement rows: the scale part only")
    parser.add_argument("--skip-sparkml", action="store_true", help="no Spark ML row")
    parser.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                        help="a Spark setting of every session this tree's runs start (Spark "
                             "ML's too), as the command's --spark-conf; a --baseline tree's "
                             "sessions keep their own (repeatable)")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as JSON instead of the table")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, kwargs = json.loads(args.child)
        print(json.dumps(CHILDREN[kind](**kwargs)), flush=True)
        return

    from crawler.cli.common import UserError
    from crawler.cli.recluster import spark_settings

    try:
        settings = spark_settings(args.spark_conf)
    except UserError as exc:
        parser.error(str(exc))
    results: dict[str, Any] = {"threshold": args.threshold, "spark_conf": settings}
    os.environ[SPARK_CONF] = json.dumps(settings)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-spark-") as work:
        work_dir = Path(work)
        sizes = [int(x) for x in args.sizes.split(",") if x]
        baseline = None
        if args.baseline and (sizes or not args.skip_speed):
            baseline = Baseline(args.baseline, work_dir / "baseline")
            baseline.prepare()
            results["baseline"] = baseline.name
        if not args.skip_speed:
            results["speed"] = speed(args, work_dir, baseline)
            log("start-up: a fresh session's creation and first Python task")
            results["startup"] = [_child("startup", cpus=cpus, master=f"local[{cpus}]")
                                  for cpus in (1, 2)]
        trees = {"this tree": _REPO}
        if baseline is not None:
            trees[baseline.name] = baseline.directory
        results["scale"] = {name: [] for name in trees}
        for n in sizes:
            for repeat in range(args.scale_repeats):
                for name, tree in trees.items():
                    log(f"scale: {n:,} synthetic sketches in local[2], {name}, "
                        f"{repeat + 1} of {args.scale_repeats}")
                    results["scale"][name].append(_child(
                        "scale", cpus=2, tree=tree, master="local[2]", size=n,
                        planted=args.planted, seed=args.seed))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))


class Baseline:
    """Another commit's tree, for the scale part to run beside this one's: ``git archive`` of
    the commit into a directory (no worktree, nothing of it kept), its C helpers built as an
    install builds them (a wheel) and put in place: without them its estimates would run
    their Python twins. An older tree that writes a JVM class archive writes it into the
    same directory, not into the user's cache."""

    def __init__(self, commit: str, directory: Path) -> None:
        self.commit = commit
        self.directory = directory
        self.name = f"baseline {commit}"

    def prepare(self) -> Path:
        self.directory.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", self.commit], cwd=_REPO, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(self.directory)], input=archive, check=True)
        wheels = self.directory / "wheel"
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
             str(self.directory)], capture_output=True, text=True, check=False)
        helpers = []
        for wheel in wheels.glob("*.whl") if not built.returncode else ():
            with zipfile.ZipFile(wheel) as unpacked:
                helpers = [n for n in unpacked.namelist() if n.endswith(".so")]
                unpacked.extractall(self.directory, helpers)
        if not helpers:
            log(f"{self.name}: its C helpers did not build; it runs their Python twins")
        os.environ["NEARDUP_CLASS_ARCHIVE"] = str(self.directory / "class-archive")
        if "child_archive" in (self.directory / "benchmarks" / "spark.py").read_text():
            log(f"{self.name}: its JVM class archive, before any timed run")
            _child("archive", cpus=2, tree=self.directory)
        return self.directory


def corpus(args: argparse.Namespace, work: Path) -> list[Path]:
    """The speed corpus: ``args.pages`` real pages drawn from every package, and edited copies
    of a third of them, written to ``work`` in a shuffled order."""
    from benchmarks.corpus import EXTRA_PACKAGES, LARGE_PACKAGES, PACKAGES, html_corpus
    from benchmarks.recluster import build_corpus

    every = html_corpus(args.pages, packages=PACKAGES + EXTRA_PACKAGES + LARGE_PACKAGES)
    pages = random.Random(args.seed).sample(every, args.pages)
    files, _ = build_corpus(pages, work / "corpus", args.seed, 1 / 3)
    log(f"corpus: {len(files):,} documents ({len(pages):,} real pages of {len(every):,}, "
        "the rest edited copies)")
    return files


def speed(args: argparse.Namespace, work: Path,
          baseline: Baseline | None = None) -> dict[str, Any]:
    """The speed rows; with ``baseline``, its Spark ML corpus row too, interleaved with
    this tree's."""
    from benchmarks.recluster import run_datasketch, run_ours

    files = corpus(args, work)
    names = str(work / "files.json")  # the children read the file names from here
    Path(names).write_text(json.dumps([str(f) for f in files]))
    runs: dict[str, list[dict[str, Any]]] = {
        LOCAL: [], DATASKETCH: [], "spark local[1]": [], "spark local[2]": [], WARM1: [],
        WARM2: [], FREE1: [], FREE1_WARM: []}
    local_out, spark_out = work / "local.jsonl", work / "spark.jsonl"
    in_process = ((LOCAL, lambda: run_ours(files, local_out, args.threshold, 1)),
                  (DATASKETCH, lambda: run_datasketch(files, work / "datasketch.jsonl",
                                                      args.threshold)))
    children = (("local[1]", 1, "spark local[1]", WARM1), ("local[2]", 2, "spark local[2]", WARM2),
                ("local[1]", None, FREE1, FREE1_WARM))
    for round_ in range(args.repeats):
        log(f"speed: round {round_ + 1} of {args.repeats}")
        for name, run in in_process:
            cpu = tree_cpu()
            seconds = pinned(1, run)
            runs[name].append({"seconds": seconds, "cpu_seconds": tree_cpu() - cpu,
                               "documents": len(files)})
        for master, cpus, first, warm in children:
            run = _child("engine", cpus=cpus, master=master, files=names,
                         threshold=args.threshold, out=str(spark_out), warm=True)
            runs[first].append(run)
            runs[warm].append(run if run.get("error") else
                              {**run, "seconds": run["warm_seconds"],
                               "cpu_seconds": run["warm_cpu_seconds"]})
    ceiling_runs = ceiling(files, args.threshold, work, args.repeats)
    if not args.skip_sparkml and args.sparkml_documents:
        # on a prefix of the corpus that Spark ML can finish: both engines, same documents
        few = str(work / "few.json")
        Path(few).write_text(json.dumps([str(f) for f in files[: args.sparkml_documents]]))
        ml = {"master": "local[2]", "files": few, "threshold": args.threshold}
        trees = {FEW: _REPO}
        if baseline is not None:
            trees[f"{FEW}, {baseline.name}"] = baseline.directory
        for round_ in range(args.repeats):
            for name, tree in trees.items():
                log(f"speed: {name}, {round_ + 1} of {args.repeats}")
                runs.setdefault(name, []).append(_child(
                    "engine", cpus=2, tree=tree, out=str(work / "few.jsonl"), **ml))
        log("speed: Spark ML MinHashLSH, default driver memory")  # once: it is the slow one
        runs[ML] = [_child("sparkml", timeout=args.sparkml_timeout, cpus=2, **ml)]
        if runs[ML][0].get("error") and not runs[ML][0].get("timeout"):
            log(f"speed: Spark ML failed ({runs[ML][0]['error']}); again with a "
                f"{BIG_DRIVER} driver")
            runs[ML_BIG] = [_child("sparkml", timeout=args.sparkml_timeout, cpus=2,
                                   driver_memory=BIG_DRIVER, **ml)]
    # an unpinned local[1] counts as one core, as a user would count it (it is not: see FREE1)
    cores = {LOCAL: 1, DATASKETCH: 1, "spark local[1]": 1, "spark local[2]": 2, WARM1: 1,
             WARM2: 2, FREE1: 1, FREE1_WARM: 1, FEW: 2, ML: 2, ML_BIG: 2}
    rows = {}
    for name, done in runs.items():
        ok = [r for r in done if not r.get("error")]
        if not ok:
            rows[name] = {k: done[0][k] for k in ("error", "timeout", "conf") if k in done[0]}
            continue
        seconds = statistics.median(r["seconds"] for r in ok)
        count = ok[0]["documents"]
        used = cores[FEW if name.startswith(FEW) else name]  # a baseline's row too
        rows[name] = {"seconds": seconds, "runs": [r["seconds"] for r in ok],
                      "documents": count, "docs_per_s": count / seconds,
                      "docs_per_s_per_core": count / seconds / used,
                      **({"docs_per_cpu_s": count / statistics.median(
                          r["cpu_seconds"] for r in ok)} if "cpu_seconds" in ok[0] else {}),
                      **{k: ok[0][k] for k in ("shuffle_bytes", "rounds", "pairs", "capped", "conf")
                         if k in ok[0]}}
    differing = {"lines": differing_lines(local_out, spark_out),
                 **decided_differently(local_out, spark_out),
                 "twin": _twin(names, local_out, work, args.threshold, None, exact_cap=True)}
    # where the engines can differ: a boilerplate cap small enough to bite
    log(f"agreement with a cap of {args.small_cap}")
    from crawler.recluster.inputs import read_html_files
    from crawler.recluster.run import recluster
    from dedup.params import DedupParams, SketchParams

    with open(local_out, "w", encoding="utf-8") as fh:
        capped_local = recluster(read_html_files(files), SketchParams(),
                                 DedupParams(threshold=args.threshold, cap=args.small_cap),
                                 out=fh, jobs=2)
    capped_spark = _child("engine", cpus=2, master="local[2]", files=names,
                          threshold=args.threshold, out=str(spark_out), cap=args.small_cap)
    return {"documents": len(files), "pages": args.pages, "rows": rows,
            "ceiling": ceiling_runs, "differing": differing,
            "small_cap": {"cap": args.small_cap,
                          "differing_lines": differing_lines(local_out, spark_out),
                          **decided_differently(local_out, spark_out),
                          "capped_local": capped_local.stats["capped"],
                          "capped_spark": capped_spark.get("capped"),
                          "seconds": capped_spark.get("seconds"),
                          "passes": capped_spark.get("passes"),
                          "exact_cap": capped_spark.get("exact_cap"),
                          "error": capped_spark.get("error"),
                          "twin": _twin(names, local_out, work, args.threshold, args.small_cap,
                                        exact_cap=False)}}


def _twin(names: str, local_out: Path, work: Path, threshold: float, cap: int | None, *,
          exact_cap: bool) -> dict[str, Any]:
    """The Spark engine in ``local[2]`` with the other search than its default at ``cap``
    (``--exact-cap`` at the default cap, ``--no-exact-cap`` below it) against the local
    engine's ``local_out`` (same cap): documents decided differently, searches, seconds."""
    out = work / "twin.jsonl"
    run = _child("engine", cpus=2, master="local[2]", files=names, threshold=threshold,
                 out=str(out), cap=cap, exact_cap=exact_cap)
    if run.get("error"):
        return {"error": run["error"], "exact_cap": exact_cap}
    return {**decided_differently(local_out, out), "passes": run["passes"],
            "seconds": run["seconds"], "exact_cap": exact_cap}


def ceiling(files: list[Path], threshold: float, work: Path, repeats: int,
            documents: int = 5_000) -> dict[str, Any]:
    """What two CPUs of this machine give two single-CPU jobs at once: the local engine (one
    process, no Spark) on the corpus's first ``documents``, alone on one CPU, then two copies
    at once, one on each CPU. Their speed-up over one alone is the most any 1 → 2 core
    scaling can reach here, Spark's or another engine's: whatever two busy CPUs share (caches,
    memory bandwidth, a host's other guests) slows both."""
    from concurrent.futures import ThreadPoolExecutor

    names = work / "ceiling.json"
    names.write_text(json.dumps([str(f) for f in files[:documents]]))
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) < 2:
        return {"error": "fewer than 2 CPUs"}

    def once(cpu: int) -> dict[str, Any]:
        return _child("local", on={cpu}, files=str(names), threshold=threshold,
                      out=str(work / f"ceiling-{cpu}.jsonl"))

    alone, together = [], []
    for round_ in range(repeats):
        log(f"ceiling: the local engine alone, then two at once, {round_ + 1} of {repeats}")
        alone.append(once(cpus[0]))
        with ThreadPoolExecutor(2) as pool:
            together.append(list(pool.map(once, cpus)))
    failed = [r for r in [*alone, *sum(together, [])] if r.get("error")]
    if failed:
        return {"error": failed[0]["error"]}
    one = statistics.median(r["seconds"] for r in alone)
    # two documents' worth of work per pair: the pair's time is its slower run's
    two = statistics.median(max(a["seconds"], b["seconds"]) for a, b in together)
    cpu_one = statistics.median(r["cpu_seconds"] for r in alone)
    cpu_two = statistics.median((a["cpu_seconds"] + b["cpu_seconds"]) / 2 for a, b in together)
    return {"documents": min(documents, len(files)), "alone": one, "together": two,
            "speedup": 2 * one / two, "cpu_alone": cpu_one, "cpu_together": cpu_two}


# --- the table -----------------------------------------------------------------------------------


def render(results: dict[str, Any]) -> str:
    out = [f"this tree's sessions with --spark-conf {key}={value}"
           for key, value in results.get("spark_conf", {}).items()]
    if results.get("speed"):
        out += _render_speed(results["speed"], results["threshold"], results.get("startup", []))
    scale = {name: medians(runs) for name, runs in results.get("scale", {}).items() if runs}
    for name, runs in scale.items():
        out += [""] * bool(out) + _render_scale(runs, name)
    if len(scale) > 1:
        out += [""] + _render_against(scale["this tree"], scale[results["baseline"]],
                                      results["baseline"])
    return "\n".join(out)


#: the figures of a scale run that a median over repeated runs is taken of
_MEDIAN = ("seconds", "us_per_doc", "warm_seconds", "warm_us_per_doc", "task_us_per_doc",
           "warm_task_us_per_doc", "stage_floor", "shuffle_bytes")


def medians(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per size: the first good run's, with the medians of :data:`_MEDIAN` over the
    size's good runs and how many there were (``runs``); a size none of whose runs ended is
    its first failure.

    >>> medians([{"size": 5, "seconds": 1.0}, {"size": 5, "seconds": 3.0},
    ...          {"size": 5, "seconds": 2.0}])
    [{'size': 5, 'seconds': 2.0, 'runs': 3}]
    """
    by_size: dict[Any, list[dict[str, Any]]] = {}
    failed = []
    for run in runs:
        if "error" in run:
            failed.append(run)
        else:
            by_size.setdefault(run["size"], []).append(run)
    rows = []
    for done in by_size.values():
        row = {**done[0], "runs": len(done)}
        for key in _MEDIAN:
            if key in row:
                row[key] = statistics.median(r[key] for r in done)
        rows.append(row)
    return sorted(rows, key=lambda r: r["size"]) + failed[: not rows]


def _render_against(ours: list[dict[str, Any]], theirs: list[dict[str, Any]],
                    name: str) -> list[str]:
    """Time per document at each size, this tree's median over the baseline's."""
    base = {r["size"]: r for r in theirs if "error" not in r}
    out = [f"this tree against {name}, time per document (medians; goal: within 1.15×):"]
    for r in ours:
        b = base.get(r.get("size"))
        if b is None or "error" in r:
            continue
        out.append(f"{r['size']:>12,}  first run {r['us_per_doc']:.0f} against "
                   f"{b['us_per_doc']:.0f} µs, {r['us_per_doc'] / b['us_per_doc']:.2f}×; "
                   f"warm {r['warm_us_per_doc']:.0f} against {b['warm_us_per_doc']:.0f} µs, "
                   f"{r['warm_us_per_doc'] / b['warm_us_per_doc']:.2f}×")
    return out


def _render_speed(speed: dict[str, Any], threshold: float,
                  startup: list[dict[str, Any]]) -> list[str]:
    rows, documents = speed["rows"], speed["documents"]
    out = [(f"speed: {documents:,} documents ({speed['pages']:,} real pages and edited copies), "
            f"threshold {threshold} (medians)"),
           (f"{'':<42}{'docs/s':>9}{'per core':>10}{'vs local/core':>15}"
            f"{'shuffle B/doc':>15}{'rounds':>8}")]
    base = rows[LOCAL].get("docs_per_s_per_core")
    for name, r in rows.items():
        if "error" in r:
            out.append(f"{name:<42}  failed: {r['error']}")
            continue
        shuffle = r.get("shuffle_bytes")
        per_doc = "" if shuffle is None else f"{shuffle / r.get('documents', documents):,.0f}"
        ratio = f"{r['docs_per_s_per_core'] / base:>14.3f}×" if base else f"{'':>15}"
        out.append(f"{name:<42}{r['docs_per_s']:>9.1f}{r['docs_per_s_per_core']:>10.1f}"
                   f"{ratio}{per_doc:>15}{r.get('rounds', ''):>8}")
    sketch = rows.get(DATASKETCH, {})
    for label, (one, two, free) in (
            ("first run in a fresh session",
             (rows["spark local[1]"], rows["spark local[2]"], rows.get(FREE1, {}))),
            ("warm session", (rows.get(WARM1, {}), rows.get(WARM2, {}), rows.get(FREE1_WARM, {})))):
        if not one or not two or "error" in one or "error" in two:
            continue
        out.append(f"{label}: scaling local[1] → local[2] "
                   f"{two['docs_per_s'] / one['docs_per_s']:.2f}× (goal ≥ 1.7×)"
                   + (f"; local[2] per core vs local per core "
                      f"{two['docs_per_s_per_core'] / base:.3f}× (goal ≥ 0.5×)" if base else "")
                   + (f"; local[2] vs datasketch {two['docs_per_s'] / sketch['docs_per_s']:.2f}×"
                      if "docs_per_s" in sketch else ""))
        if "docs_per_s" in free:
            out.append(f"    local[1] unpinned (free to use both CPUs): "
                       f"{free['docs_per_s']:,.0f} docs/s, "
                       f"{free['docs_per_s'] / one['docs_per_s']:.2f}× local[1] on one CPU; "
                       f"local[2] against it {two['docs_per_s'] / free['docs_per_s']:.2f}×")
        cpu = rows[LOCAL].get("docs_per_cpu_s")
        if cpu and "docs_per_cpu_s" in one and "docs_per_cpu_s" in two:
            out.append(f"    documents per CPU-second (every process of each run): local "
                       f"{cpu:,.0f}, spark local[1] {one['docs_per_cpu_s']:,.0f} "
                       f"({one['docs_per_cpu_s'] / cpu:.3f}×), spark local[2] "
                       f"{two['docs_per_cpu_s']:,.0f} ({two['docs_per_cpu_s'] / cpu:.3f}×)")
    top = speed.get("ceiling", {})
    if "speedup" in top:
        out.append(f"    this machine's ceiling: two local-engine processes at once, one per CPU, "
                   f"do {top['speedup']:.2f}× the work of one alone in the same time "
                   f"({top['documents']:,} documents: {top['alone']:.1f} s alone, "
                   f"{top['together']:.1f} s two at once; CPU-seconds per run "
                   f"{top['cpu_alone']:.1f} alone, {top['cpu_together']:.1f} two at once)")
    elif top.get("error"):
        out.append(f"    this machine's ceiling: failed: {top['error']}")
    for engine in (name for name in rows if name.startswith(FEW) and "error" not in rows[name]):
        few = rows[engine]
        for name in (ML, ML_BIG):
            ml = rows.get(name)
            if ml is None:
                continue
            if "error" not in ml:
                out.append(f"{engine} vs {name}: {few['docs_per_s'] / ml['docs_per_s']:.1f}× "
                           f"(goal ≥ 10× with the default driver; {ml.get('pairs')} similar "
                           "pairs)")
            elif ml.get("timeout"):
                out.append(f"{engine} vs {name}: more than "
                           f"{ml['timeout'] / few['seconds']:.1f}× (it did not finish)")
    for r in startup:
        if "error" in r:
            out.append(f"start-up, {r.get('master', '?')}: failed: {r['error']}")
            continue
        share = ""
        row = rows.get(f"spark {r['master']}", {})
        if "seconds" in row:
            share = f", {r['first_task'] / row['seconds']:.1%} of its row's median time"
        out.append(f"start-up, {r['master']}: session {r['session']:.1f} s "
                   "(outside every row); "
                   f"first Python task {r['first_task']:.2f} s (inside each Spark row{share}; "
                   f"the same task again: {r['later_task']:.2f} s)")
    same = speed["differing"]
    out.append(f"differing from the local engine: {same['lines']} lines of {documents:,}, "
               f"{same['documents']} documents decided differently")
    out += _examples(same)
    out += _twin_line(same.get("twin"), "", documents, None)
    small = speed.get("small_cap")
    if small and small.get("error"):
        out.append(f"with --cap {small['cap']}: the Spark run failed: {small['error']}")
    elif small:
        moved = small["documents"]
        search = "--exact-cap" if small.get("exact_cap") else "--no-exact-cap"
        out.append(f"with --cap {small['cap']} (the default search there: {search}, "
                   f"{small['passes']} searches, {small['seconds']:.1f} s in local[2]): "
                   f"{moved} documents decided differently ({moved / documents:.2%}; goal < "
                   f"0.1%), {small['differing_lines']} lines differ (cluster numbers shift "
                   f"after a difference); the cap bit on {small['capped_local']:,} "
                   f"fingerprints locally, {small['capped_spark']:,} on Spark")
        out += _examples(small)
        out += _twin_line(small.get("twin"), f" --cap {small['cap']}", documents,
                          small.get("seconds"))
    return out


def _twin_line(twin: dict[str, Any] | None, cap: str, documents: int,
               seconds: float | None) -> list[str]:
    """The run with the other search's agreement, searches and time (against the default's)."""
    if not twin:
        return []
    flag = "--exact-cap" if twin.get("exact_cap", True) else "--no-exact-cap"
    if twin.get("error"):
        return [f"with{cap} {flag}: the Spark run failed: {twin['error']}"]
    than = f" (the default search: {seconds:.1f} s)" if seconds else ""
    moved = twin["documents"]
    return [f"with{cap} {flag}: {moved} documents decided differently "
            f"({moved / documents:.2%}); {twin['passes']} search{'es' * (twin['passes'] != 1)}, "
            f"{twin['seconds']:.1f} s in local[2]{than}", *_examples(twin)]


def _examples(differing: dict[str, Any]) -> list[str]:
    """The first documents decided differently: the local engine's decision, then Spark's."""

    def said(decision: list[str] | None) -> str:
        return "absent" if decision is None else f"{decision[0]} ({decision[1]})"

    return [f"    {doc}: local {said(local)}, spark {said(spark)}"
            for doc, local, spark in differing.get("examples", [])]


def _marginal_and_fixed(done: list[dict[str, Any]], key: str) -> tuple[list[float], float]:
    """µs per further document between each two consecutive sizes, and the seconds a run
    takes beyond its documents' share: the time at the least size less its documents at the
    first of those rates.

    >>> _marginal_and_fixed([{"size": 10, "s": 3.0}, {"size": 20, "s": 3.5}], "s")
    ([50000.0], 2.5)
    """
    runs = sorted(done, key=lambda r: r["size"])
    steps = [(b[key] - a[key]) / (b["size"] - a["size"]) * 1e6 for a, b in zip(runs, runs[1:])]
    return steps, runs[0][key] - steps[0] * runs[0]["size"] / 1e6


def _task_time(r: dict[str, Any]) -> str:
    """The tasks' core-µs per document, first run / warm (absent from older results)."""
    if "task_us_per_doc" not in r:
        return "?"
    return f"{r['task_us_per_doc']:.0f}/{r['warm_task_us_per_doc']:.0f}"


def _render_scale(scale: list[dict[str, Any]], name: str = "this tree") -> list[str]:
    runs = max((r.get("runs", 1) for r in scale), default=1)
    out = [f"scale, {name} (clustering stages, synthetic MIN_100 sketches, local[2]; a first "
           "run in a fresh session, then the same again, warm"
           + (f"; medians of {runs} sessions" if runs > 1 else "")
           + "; task µs/doc: the tasks' own time summed over cores, first run / warm):",
           (f"{'documents':>12}{'partitions':>11}{'seconds':>10}{'µs/doc':>10}"
            f"{'warm s':>10}{'warm µs/doc':>13}{'task µs/doc':>13}{'rounds':>8}"
            f"{'shuffle B/doc':>15}")]
    done = [r for r in scale if "error" not in r]
    for r in scale:
        if "error" in r:
            out.append(f"{'?':>12}  failed: {r['error']}")
            continue
        out.append(f"{r['size']:>12,}{r['partitions']:>11}{r['seconds']:>10.1f}"
                   f"{r['us_per_doc']:>10.0f}{r['warm_seconds']:>10.1f}"
                   f"{r['warm_us_per_doc']:>13.0f}{_task_time(r):>13}{r['rounds']:>8}"
                   f"{r['shuffle_bytes'] / r['size']:>15,.0f}")
        if sum(r["kinds"].values()) != r["size"]:
            out.append(f"{'':>12}  decisions for {sum(r['kinds'].values()):,} documents, "
                       f"not {r['size']:,}")
    if len(done) > 1:
        spread = [max(r[k] for r in done) / min(r[k] for r in done)
                  for k in ("us_per_doc", "warm_us_per_doc")]
        out.append(f"most µs/doc over least: first run {spread[0]:.2f}×, warm {spread[1]:.2f}× "
                   f"(goal: flat within 1.5×)")
        for name, key in (("first run", "seconds"), ("warm", "warm_seconds")):
            steps, fixed = _marginal_and_fixed(done, key)
            out.append(f"{name}: each further document costs "
                       + ", then ".join(f"{step:.0f}" for step in steps)
                       + f" µs as the size grows; the fixed cost of a run is {fixed:.1f} s")
        timed = [r for r in done if "task_us_per_doc" in r]
        if len(timed) > 1:
            work = [max(r[k] for r in timed) / min(r[k] for r in timed)
                    for k in ("task_us_per_doc", "warm_task_us_per_doc")]
            out.append(f"the tasks' time alone (core-µs per document, first / warm), most over "
                       f"least: {work[0]:.2f}× / {work[1]:.2f}×; the rest of a run is the "
                       f"driver's planning and Spark's fixed cost per job and stage")
        out += _floor_lines(done)
    else:
        out.append("goal: time per document flat within 1.5×")
    return out


def _floor_lines(done: list[dict[str, Any]]) -> list[str]:
    """What the stages alone cost of the least size's warm run, at Spark's floor, against the
    time the goal allows that run (absent from older results)."""
    least = min(done, key=lambda r: r["size"])
    if "stage_floor" not in least:
        return []
    floor = least["stages"] * least["stage_floor"]
    allowed = 1.5 * min(r["warm_us_per_doc"] for r in done) * least["size"] / 1e6
    return [f"Spark's floor here: a stage of {least['partitions']} Python tasks costs "
            f"{least['stage_floor'] * 1e3:.0f} ms however little it holds (a job of "
            f"{FLOOR_STAGES} such stages, planned and run, warm); the warm run at "
            f"{least['size']:,} ran {least['stages']} stages in {least['jobs']} jobs, "
            f"{floor:.2f} s at that cost, where flat within 1.5× allows the whole run "
            f"{allowed:.2f} s"]


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
