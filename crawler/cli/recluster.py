"""``neardup recluster``: cluster a corpus again, with any parameters."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawler.cli.common import (
    RunFailed,
    UserError,
    add_config_arguments,
    add_sketch_arguments,
    resolve_config,
)
from crawler.cli.output_file import check_not_an_input, check_parquet_directory, replaced_file
from crawler.cli.progress_bar import progress_bar
from crawler.config import apply_overrides
from crawler.recluster.inputs import (
    InputError,
    SourceDocument,
    read_html_files,
    read_jsonl,
    read_store,
    read_warc,
)
from dedup.params import DEFAULT_CAP
from storage.errors import StoreError

HELP = "cluster a corpus (a store, WARC, JSON Lines, HTML files) into near-duplicate clusters"
DESCRIPTION = """\
Re-cluster a corpus with Broder's greedy clustering: each document, in input order, joins the
most resembling earlier cluster at or above --threshold, or starts a new one.

Inputs (any mix; read in this order, whatever the order on the command line, and the files of
each kind in the order given): --store DIR (the kept pages of a crawl; repeated, the stores of
a distributed crawl's nodes, read in the crawl's order), --warc FILE... (WARC or WARC.gz; HTML
responses canonicalised exactly as the crawler does), --jsonl FILE... (one JSON object per
line, plain or gzipped; --id-field and --text-field name the fields), --html PATH... (HTML
files, and the .html/.htm files under directories, such as a mirror made with wget --mirror;
each page's id is its path).

Output: -o clusters.jsonl, one line per document:
  {"id": ..., "cluster": 7, "representative": false, "resemblance": 0.93, "decision": ...}
and a summary like the paper's experiment (clusters of 2 or more, identical-only, mixed).
The index is kept in LMDB (a temporary directory, or --index DIR), so memory stays flat.

examples:
  neardup recluster --warc crawl-*.warc.gz -o clusters.jsonl --threshold 0.8
  neardup recluster --jsonl corpus.jsonl --text-field body --sketch tiered --containment 0.9
  neardup recluster --html mirror/example.org -o clusters.jsonl
  neardup recluster --store neardup-store --shingle-size 8 --json
  neardup recluster --store neardup-store --diff --threshold 0.8
                                        which pages a threshold of 0.8 would drop or keep
  neardup recluster --store node-1 --store node-2 --store node-3 --diff --threshold 0.8
                                        the same for a crawl on three nodes: every node's store
  neardup recluster --store neardup-store --content-area main
                                        the kept pages again, by their main content only
  neardup recluster --store neardup-store --exclude .sidebar --exclude "#comments"
  neardup recluster --engine spark --warc crawl/*.warc.gz -o clusters.jsonl
                                        the same clusters, computed by Apache Spark
  neardup recluster --engine spark --store neardup-store --diff --threshold 0.8
                                        the same --diff, re-clustered by Apache Spark
  neardup recluster --engine spark --master spark://head:7077 --html pages/ \\
      --spark-conf spark.pyspark.python=/opt/neardup/bin/python
                                        on a standalone cluster whose nodes have neardup there
  spark-submit --master yarn .../crawler/cli/__main__.py recluster --engine spark --warc hdfs://... \\
      --output-format parquet -o hdfs://.../clusters.parquet

A store's kept pages are read with the store's own sketch parameters and content area unless
flags (or --config/--set) give others: --content-area main compares pages by their main
content (navigation, sidebars and footers left out), --include/--exclude by CSS selectors.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("inputs")
    src.add_argument("--store", metavar="DIR", action="append",
                     help="a neardup store (its kept pages); repeat it for the nodes of a "
                          "distributed crawl, read together in the crawl's order")
    src.add_argument("--warc", metavar="FILE", nargs="+", default=[], help="WARC files")
    src.add_argument("--jsonl", metavar="FILE", nargs="+", default=[], help="JSON Lines files")
    src.add_argument("--html", metavar="PATH", nargs="+", default=[],
                     help="HTML files, or directories of them (searched recursively)")
    src.add_argument("--id-field", default="id", help="JSON Lines id field (default: id)")
    src.add_argument("--text-field", default="text", help="JSON Lines text field (default: text)")
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="FILE",
                     help="clusters, one JSON line per document (default: clusters.jsonl, or "
                          "clusters.parquet with --output-format parquet; - for stdout); it "
                          "replaces the file once the run has finished")
    out.add_argument("--json", action="store_true", help="print the summary as JSON")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    out.add_argument("--diff", action="store_true",
                     help="with --store: which crawl-time decisions these parameters would "
                          "change (a table, or --json; writes no clusters file; either engine; "
                          "for a distributed crawl, every node's --store)")
    cl = parser.add_argument_group("clustering (default: the config's dedup section)")
    cl.add_argument("--threshold", type=float, help="resemblance needed to join a cluster")
    cl.add_argument("--containment", type=float,
                    help="also join when contained in the representative at least this much")
    cl.add_argument("--representative", choices=["first", "popular"],
                    help="first member, or the s most popular fingerprints")
    cl.add_argument("--cap", type=int,
                    help="clusters read per fingerprint (the boilerplate cap; default: dedup.cap)")
    cl.add_argument("--index", metavar="DIR", help="keep the LMDB index here (default: temporary)")
    cl.add_argument("--jobs", "-j", type=int, help="worker processes (default: all cores)")
    area = parser.add_argument_group(
        "content area (default: the store's, else the config's canonical section)")
    area.add_argument("--content-area", choices=["all", "main"],
                      help="all: the whole page; main: its main content, boilerplate left out")
    area.add_argument("--include", metavar="SELECTOR", action="append",
                      help="CSS selector of the elements whose text counts (repeatable)")
    area.add_argument("--exclude", metavar="SELECTOR", action="append",
                      help="CSS selector of elements left out with their content (repeatable)")
    sp = parser.add_argument_group("engine")
    sp.add_argument("--engine", choices=["local", "spark"], default="local",
                    help="local: this machine's cores (default); spark: Apache Spark, on "
                         "--master or under spark-submit (pip install 'neardup[spark]')")
    sp.add_argument("--master", metavar="URL",
                    help="with --engine spark: the Spark master (default: local[*]; "
                         "under spark-submit, the one spark-submit was given)")
    sp.add_argument("--partitions", type=int,
                    help="with --engine spark: partitions of the clustering stages "
                         "(default: one per 20,000 documents, at least the cores, rounded up "
                         "to a multiple of them)")
    sp.add_argument("--exact-cap", action=argparse.BooleanOptionalAction,
                    help="with --engine spark: where the boilerplate cap bites, decide as "
                         "the local engine does: each document's indexed part ranked by the "
                         "local engine's running fingerprint counts, and the search run again "
                         "without the documents that joined a cluster until the cap cuts where "
                         "the local index's does (which keeps a fingerprint's first --cap "
                         "representatives; the search keeps its first --cap documents): the "
                         "local engine's clusters, for more passes of the search. Default: on "
                         f"when --cap is below {DEFAULT_CAP}, the default cap, where the cap "
                         "bites often enough for the faster search to decide a few documents "
                         "otherwise")
    sp.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                    help="with --engine spark: a Spark setting of the session the command "
                         "starts, as spark-submit's --conf (repeatable; e.g. "
                         "spark.driver.memory=8g, spark.local.dir=/big/disk, "
                         "spark.pyspark.python=PATH for the executors' Python). Under "
                         "spark-submit, give them to spark-submit")
    sp.add_argument("--output-format", choices=["jsonl", "parquet"], default="jsonl",
                    help="with --engine spark: jsonl (one file, as the local engine writes) "
                         "or parquet (a dataset directory at --output)")
    add_sketch_arguments(parser)
    add_config_arguments(parser)


def _sources(args: argparse.Namespace) -> Iterator[SourceDocument]:
    readers = []
    if args.store:
        readers.append(read_store(args.store))
    if args.warc:
        readers.append(read_warc(args.warc))
    if args.jsonl:
        readers.append(read_jsonl(args.jsonl, args.id_field, args.text_field))
    if args.html:
        readers.append(read_html_files(args.html))
    return itertools.chain.from_iterable(readers)


#: the options only one engine takes: (flag, what the namespace holds, the engine)
ENGINE_OPTIONS = (
    ("--index", "index", "local"),
    ("--jobs", "jobs", "local"),
    ("--master", "master", "spark"),
    ("--partitions", "partitions", "spark"),
    ("--exact-cap", "exact_cap", "spark"),
    ("--spark-conf", "spark_conf", "spark"),
    ("--output-format parquet", "output_format", "spark"),
)
#: what an option left out holds
_UNSET = (None, [], "jsonl")


def run(args: argparse.Namespace) -> int:
    if not (args.store or args.warc or args.jsonl or args.html):
        raise UserError(
            "nothing to cluster: "
            "give --store DIR, --warc FILE..., --jsonl FILE... or --html PATH..."
        )
    for flag, value in (("--cap", args.cap), ("--jobs", args.jobs),
                        ("--partitions", args.partitions)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1; got {value}")
    if args.output is None and not args.diff:
        args.output = "clusters.parquet" if args.output_format == "parquet" else "clusters.jsonl"
    manifest = _store_manifest(args.store) if args.store else None
    config = _config(args, manifest)
    if args.diff:
        _check_diff(args, config, manifest)
    for flag, attr, engine in ENGINE_OPTIONS:
        if engine != args.engine and getattr(args, attr) not in _UNSET:
            if attr == "exact_cap" and args.exact_cap is False:
                flag = "--no-exact-cap"
            raise UserError(f"{flag} needs --engine spark" if engine == "spark" else
                            f"{flag} is an option of --engine local (Spark sizes its own work)")
    if args.engine == "spark":
        _check_spark(args, config)
    elif args.index:
        _check_index_dir(Path(args.index))
    _check_output(args)
    if args.diff:
        return _run_diff(args, config)
    return (_run_spark if args.engine == "spark" else _run_local)(args, config)


def _config(args: argparse.Namespace, manifest: Any) -> Any:
    """The run's configuration: the config file, --set and the flags, and for a store its own
    sketch parameters and content area unless flags name others."""
    config = resolve_config(args)
    overrides = {f"dedup.{k}": getattr(args, k) for k in ("threshold", "containment",
                                                          "representative", "cap")
                 if getattr(args, k) is not None}
    if manifest is not None and not any(getattr(args, k, None) is not None for k in (
            "shingle_size", "option", "sketch", "sketch_size", "modulus", "seed", "unit")):
        overrides.update({f"sketch.{k}": v for k, v in manifest.sketch.to_dict().items()})
    area = {f"canonical.{k}": getattr(args, k) for k in ("content_area", "include", "exclude")
            if getattr(args, k, None) is not None}
    if manifest is not None and not area:
        area = {f"canonical.{k}": v for k, v in manifest.canonical.to_dict().items()}
    overrides.update(area)
    return apply_overrides(config, overrides, "") if overrides else config


def _check_spark(args: argparse.Namespace, config: Any) -> None:
    """What --engine spark refuses, and its settings read (``args.spark_conf``, a dict from
    here on)."""
    if config.dedup.representative == "popular":
        raise UserError("--engine spark keeps the first member as representative: a 'popular' "
                        "one moves as its cluster grows, which rounds cannot follow; use "
                        "--engine local")
    args.spark_conf = spark_settings(args.spark_conf)
    if args.output_format == "parquet":
        if args.diff:
            raise UserError("--diff writes no clusters file: drop --output-format parquet")
        if args.output == "-":
            raise UserError("--output-format parquet writes a directory: give -o DIR")


@contextmanager
def _output(args: argparse.Namespace) -> Iterator[Any]:
    """The clusters.jsonl file the run writes (stdout for ``-o -``; None for Parquet, which
    Spark writes itself), in place once the run has finished (:mod:`crawler.cli.output_file`)."""
    if args.output_format == "parquet":
        yield None
    elif args.output == "-":
        yield sys.stdout
    else:
        with replaced_file(args.output) as handle:
            yield handle


def _check_output(args: argparse.Namespace) -> None:
    """What -o may not be: one of the input files, or (Parquet) a directory of other files."""
    if args.diff:
        return
    if args.output_format == "parquet":
        check_parquet_directory(args.output)
    else:
        check_not_an_input(args.output, [*(args.warc or ()), *(args.jsonl or ()),
                                         *(args.html or ())])  # fmt: skip


def _run_local(args: argparse.Namespace, config: Any) -> int:
    """``--engine local``: this machine's cores (crawler.recluster.run)."""
    from crawler.recluster.run import recluster

    bar = None
    if not args.quiet:
        bar = progress_bar(unit=" docs")

    def progress(documents: int, clusters: int) -> None:
        bar.update(1)  # type: ignore[union-attr]
        if documents % 256 == 0:
            bar.set_postfix_str(f"{clusters:,} clusters", refresh=False)  # type: ignore[union-attr]

    try:
        with _output(args) as handle:
            result = recluster(
                _sources(args), config.sketch, config.dedup, out=handle, index_dir=args.index,
                jobs=args.jobs, on_progress=progress if bar is not None else None,
                area=config.canonical,
            )
            _check_clustered(result)
    except (InputError, StoreError) as exc:
        raise UserError(str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    return _report(args, config, result, to_stderr=args.output == "-")


def _report(args: argparse.Namespace, config: Any, result: Any, *, to_stderr: bool,
            spark: dict[str, Any] | None = None) -> int:
    """The summary both engines print: a table for people, or --json; ``spark``: where the
    Spark engine ran (its master and cores, which spark-submit may have chosen)."""
    report = result.to_dict()
    report["engine"] = args.engine
    if spark is not None:
        report["spark"] = spark
    report["parameters"] = {"sketch": config.sketch.to_dict(),
                            "threshold": config.dedup.threshold,
                            "containment": config.dedup.containment,
                            "canonical": config.canonical.to_dict()}
    report["output"] = args.output
    if args.json:
        print(json.dumps(report, indent=2), file=sys.stderr if to_stderr else sys.stdout)
        return 0
    lines = [
        f"sketch: {config.sketch.describe()}; threshold {config.dedup.threshold}"
        + (f", containment {config.dedup.containment}" if config.dedup.containment else "")
        + f"; content area {config.canonical.describe()}",
        "",
        result.summary.render(),
    ]
    if result.skipped:
        skipped = ", ".join(_skipped(reason, n, result.first_skipped.get(reason))
                            for reason, n in result.skipped_by_count())  # fmt: skip
        lines += ["", f"skipped {sum(result.skipped.values())}: {skipped}"]
    capped = result.stats.get("capped", 0)
    lines += [
        "",
        f"{result.summary.documents:,} documents in {result.seconds:.1f} s "
        f"({report['documents_per_second'] or 0:,.0f}/s); "
        f"boilerplate cap {config.dedup.cap} bit on {capped:,} fingerprints"
        + _spark_passes(result.stats),
        f"clusters written to {args.output}",
    ]
    if spark is not None:
        cores = spark["cores"]
        lines[-2] += f"; on Spark, master {spark['master']}, {cores} core{'s' * (cores != 1)}"
        lines[-2] += "".join(f", {k}={v}" for k, v in spark.get("settings", {}).items())
        if capped and not result.stats.get("exact_cap"):
            # the search posts every leader, the local index representatives only (docs/spark.md)
            lines.insert(-1, "where the cap bit, a few documents may join another near duplicate "
                             "than the local engine picks; --exact-cap picks the same")
        elif result.stats.get("exact_cap") and args.exact_cap is None:
            lines.insert(-1, f"a cap below the default of {DEFAULT_CAP} searches as --exact-cap "
                             "does, for the local engine's decisions; --no-exact-cap is faster "
                             "and may decide a few documents otherwise")
        if _local_is_faster(spark["master"], result.summary.documents):
            lines.insert(-1, "on one machine an input of this size clusters faster with "
                             "--engine local")
    print("\n".join(lines), file=sys.stderr if to_stderr else sys.stdout)
    return 0


#: documents up to which the local engine, on the cores of one machine, beats Spark's local
#: mode there (docs/benchmarks.md)
LOCAL_FASTER = 100_000


def _check_clustered(result: Any) -> None:
    """A run whose every document was skipped (a mistyped --text-field, inputs that are not
    what they were said to be) fails with one line, and leaves -o's file as it was."""
    if result.summary.documents or not (result.skipped or result.broken):
        return
    why = [_skipped(reason, n, result.first_skipped.get(reason))
           for reason, n in result.skipped_by_count()]  # fmt: skip
    if result.broken:
        files = len(result.broken)
        why.append(f"{files} file{'s' * (files != 1)} broken off before any document")
    hint = ""
    if any(reason.startswith("no_") and reason.endswith("_field") for reason in result.skipped):
        hint = "; --text-field names the field that holds the text"
    raise RunFailed(f"nothing was clustered: every document was skipped: {', '.join(why)}{hint}")


def _skipped(reason: str, n: int, first: str | None) -> str:
    """``3 not_json (first: a.jsonl:17)``: how many, why, and where the first is."""
    return f"{n} {reason}" + (f" (first: {first})" if first is not None else "")


def _local_is_faster(master: str, documents: int) -> bool:
    """Whether the summary of a Spark run says that the local engine would have been faster:
    a run in local mode, on an input under :data:`LOCAL_FASTER` documents.

    >>> _local_is_faster("local[2]", 3_000), _local_is_faster("spark://head:7077", 3_000)
    (True, False)
    """
    from crawler.recluster.spark.kept import on_one_machine

    return on_one_machine(master) and documents < LOCAL_FASTER


def _spark_passes(stats: dict[str, int]) -> str:
    """The Spark engine's rounds and searches, for the summary (nothing for the local one).

    >>> _spark_passes({"rounds": 1, "passes": 1}), _spark_passes({"rounds": 2, "passes": 3})
    ('; 1 greedy round', '; 2 greedy rounds; the candidate search ran 3 times (--exact-cap)')
    """
    if "rounds" not in stats:
        return ""
    rounds, passes = stats["rounds"], stats.get("passes", 1)
    return f"; {rounds} greedy round{'s' * (rounds != 1)}" + (
        f"; the candidate search ran {passes} times (--exact-cap)" if passes > 1 else "")


def _run_spark(args: argparse.Namespace, config: Any) -> int:
    """``--engine spark``: the same clustering on Apache Spark (crawler.recluster.spark)."""
    from crawler.recluster.spark import recluster_spark, tasks

    try:
        work = tasks(store=args.store, warc=args.warc, jsonl=args.jsonl, html=args.html,
                     id_field=args.id_field, text_field=args.text_field)
    except InputError as exc:
        raise UserError(str(exc)) from None
    bar = None
    try:
        with _output(args) as handle, _spark_session(args) as session:
            if not args.quiet:
                bar = _SparkBar(work)
            result = recluster_spark(
                session, work, config.sketch, config.dedup, out=handle,
                parquet=args.output if handle is None else None, partitions=args.partitions,
                area=config.canonical, exact_cap=args.exact_cap, on_progress=bar,
            )
            _check_clustered(result)
            context = session.sparkContext
            spark = {"master": context.master, "cores": context.defaultParallelism}
            if args.spark_conf:  # as the session has them
                conf = context.getConf()
                spark["settings"] = {key: conf.get(key) for key in args.spark_conf}
    except InputError as exc:
        raise UserError(str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    return _report(args, config, result, to_stderr=args.output == "-", spark=spark)


class _SparkBar:
    """The progress bar of ``--engine spark``, in place of Spark's own stage bars: documents
    read so far (each Spark task adds its own as it ends), out of how many there are when the
    input names its documents (HTML files, a store), then what the run is doing."""

    def __init__(self, work: list[Any]) -> None:
        named = all(task.items for task in work)
        self._bar = progress_bar(total=sum(len(task.items) for task in work) if named else None,
                                 unit=" docs")  # fmt: skip

    def __call__(self, phase: str, documents: int) -> None:
        self._bar.set_description_str(phase, refresh=False)
        self._bar.update(documents - self._bar.n)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


@contextmanager
def _spark_session(args: argparse.Namespace) -> Iterator[Any]:
    """The Spark session of ``--master`` (or spark-submit's), stopped after if made here; no
    Java, no PySpark, a bad master or a job that failed is one line (exit status 2 when the
    cluster's setup is the cause, 1 otherwise)."""
    from crawler.recluster.spark import SparkUnavailable, spark_session
    from crawler.recluster.spark.failures import explain

    try:
        session, made_here = spark_session(args.master, args.spark_conf)
    except SparkUnavailable as exc:
        raise UserError(str(exc)) from None
    if args.spark_conf and not made_here:
        raise UserError("--spark-conf sets up the Spark session the command starts, and this "
                        "one was started before it (spark-submit): give them to spark-submit's "
                        "--conf")
    url = session.sparkContext.uiWebUrl
    if made_here and url and not args.quiet:
        _note(f"Spark's web UI for this run (its jobs, stages and tasks): {url}")
    try:
        yield session
    except Exception as exc:
        # a job that failed: one line, what to do when the cluster's setup is the cause
        failure = explain(exc, session.sparkContext.pythonExec)
        if failure is None:
            raise
        raise (UserError if failure.setup else RunFailed)(failure.line) from None
    finally:
        if made_here:
            session.stop()


def spark_settings(given: list[str]) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` items as a dict, the last of a key winning; a key that is not
    Spark's (Spark itself would only warn and drop it) is a mistake.

    >>> spark_settings(["spark.driver.memory=4g", "spark.sql.ansi.enabled = false"])
    {'spark.driver.memory': '4g', 'spark.sql.ansi.enabled': 'false'}
    """
    settings = {}
    for item in given:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key.startswith("spark.") or not value:
            raise UserError(f"--spark-conf {item!r}: give KEY=VALUE with a Spark key, "
                            "e.g. spark.driver.memory=8g")
        settings[key] = value
    return settings


def _note(message: str) -> None:
    print(f"neardup recluster: {message}", file=sys.stderr, flush=True)


def _check_index_dir(path: Path) -> None:
    """--index must be a new or empty directory that can be created and written."""
    if path.exists() and not path.is_dir():
        raise UserError(f"--index {path} is not a directory; name a new directory")
    if path.is_dir() and any(path.iterdir()):
        raise UserError(f"--index {path} is not empty; name a new directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --index {path}: {exc.strerror}") from None


def _store_manifest(paths: list[str]) -> Any:
    """A store's manifest (its sketch parameters and content area), read once per command; of
    several, the stores of one crawl's nodes, the first's once they are known to be that
    (:func:`crawler.recluster.inputs.crawl_stores`)."""
    from crawler.recluster.inputs import crawl_stores

    try:
        with crawl_stores(paths) as stores:
            return stores[0].manifest
    except (OSError, ValueError, StoreError) as exc:
        if len(paths) > 1:  # the message names the stores
            raise UserError(str(exc)) from None
        raise UserError(f"cannot open store {paths[0]}: {exc}") from None


def _check_diff(args: argparse.Namespace, config: Any, manifest: Any) -> None:
    """``--diff`` reads one store, with the content area its dropped pages' texts were kept in."""
    if manifest is None or args.warc or args.jsonl or args.html:
        raise UserError("--diff compares a store's crawl with a re-clustering: give --store "
                        "DIR and no --warc, --jsonl or --html")  # fmt: skip
    if manifest.canonical.to_dict() != config.canonical.to_dict():
        raise UserError("--diff compares with the crawl's dropped pages, whose text was kept "
                        "with the store's content area: drop --diff to re-cluster with another")
    if args.output is not None:
        raise UserError("--diff writes no clusters file, only its report (on stdout): drop -o")


def _run_diff(args: argparse.Namespace, config: Any) -> int:
    """``neardup recluster --diff``: the command-line end of
    :func:`crawler.recluster.diff.diff_store` (and, with ``--engine spark``, of
    :func:`crawler.recluster.spark.diff.diff_store_spark`)."""
    from crawler.recluster.diff import diff_store

    try:
        if args.engine == "spark":
            from crawler.recluster.spark.diff import diff_store_spark

            with _spark_session(args) as session:
                diff = diff_store_spark(session, args.store, config.sketch, config.dedup,
                                        partitions=args.partitions, area=config.canonical,
                                        exact_cap=args.exact_cap)
        else:
            diff = diff_store(args.store, config.sketch, config.dedup, jobs=args.jobs,
                              index_dir=args.index, area=config.canonical)  # fmt: skip
    except (StoreError, InputError) as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps(diff.to_dict(), indent=2, ensure_ascii=False))
        return 0
    rule = f"threshold {config.dedup.threshold}"
    if config.dedup.containment is not None:
        rule += f", containment {config.dedup.containment}"
    if len(args.store) > 1:
        read = (f"the stores of {len(args.store)} nodes ({', '.join(args.store)}) in the "
                "crawl's order")  # fmt: skip
    else:
        read = args.store[0]
    print(f"re-clustered {read} with {config.sketch.describe()}; {rule}\n")
    print(diff.render())
    return 0
