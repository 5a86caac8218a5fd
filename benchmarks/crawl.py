"""What the crawl-time dedup stage costs, and how right its decisions are, in one run.

    python -m benchmarks.crawl [--pages 2400] [--repeats 3] [--seed 1] [--inline] [--json]

**The site.** :func:`benchmarks.crawl_site.build_site` generates *The Handbook Digest*: by
default 2,400 pages on one template (articles made of real sentences from Debian's
documentation, listing pages, a robots.txt), 35% of them copies of an original: exact mirrors,
markup-only variants, a copyright line added, links rewritten for a mirror, a few words
changed, printable versions, truncated transfers. It is written to a temporary directory and
served by :func:`crawler.demo.server.serve` on 127.0.0.1, so a crawl from ``/`` reaches every page.

**The crawls.** Each in a fresh Python process (no reactor state or heap carried over) and a
fresh store, through :func:`crawler.cli.crawl.crawl`, the function ``neardup crawl``
runs, with the built-in configuration and no progress line:

* **with** the dedup stage: :data:`crawler.cli.crawl.PIPELINES` (dedup, then storage),
  whose work runs in its worker process beside the crawl (:mod:`crawler.pipelines.session`);
* **no budget**: the same with ``crawl.duplicate_link_budget`` off (``NEARDUP_DUPLICATE_BUDGET
  =-1``), so every duplicate's links are followed: what the spider-trap rule
  (:mod:`crawler.work.links`) costs, and, as the site has no trap, that it loses no page;
* **inline** (with ``--inline``): the same, ``NEARDUP_WORKER="inline"``, so the work runs on
  Scrapy's own thread, as it did before the worker process: what the worker saves;
* **without** it: the same spider and settings with ``NEARDUP_ENABLED=False``, so both
  pipelines are ``NotConfigured``. The spider still canonicalises every page (it does so
  whatever the setting), so this difference is the pipelines' cost alone;
* **fetch only** (unless ``--no-fetch-only``): as *without*, and the spider's
  ``document_tokens`` replaced by a stub in that process, to show what canonicalisation costs
  on top: the difference to a crawler that has no dedup at all.

In the crawls with the stage, each stage's ``process_item`` and the session's handling of the
worker's replies are wrapped to count the CPU time they take on the event-loop thread (two
clock reads per call), which the stats' wall-clock split cannot tell on a busy machine; the
worker process reports its own CPU time (``neardup/worker_cpu_seconds``), which the *CPU s*
column includes: it is the CPU the crawl costs the machine, on either core.
The variants alternate (ABC, CBA, ...) and each figure is the median of ``--repeats`` runs.
Concurrency is the config default (8 requests, 8 per host). The throttle
(``crawl.autothrottle``, :mod:`crawler.extensions.throttle`) is *off* (unless
``--autothrottle``): with it, requests are spaced by a delay taken from the latency measured,
one request per interval, so the concurrency of 8 no longer applies; on a loopback server that
latency is mostly the time our own busy reactor takes to read a response, so each
variant would set its own request rate from its own load, a feedback loop rather than a fixed
workload. Off, both variants get the same offered load (8 requests in flight) and the
difference is the work. robots.txt is obeyed in every variant.

**The judgement**, against the site's truth (exact resemblance: the Jaccard coefficient of the
sets of shingles the sketches sample, 4 consecutive 8-byte units of the canonical token stream
(§4.3), Option B; :class:`benchmarks.recluster.ExactSets`), for each *with* run:

* a **false drop** is a dropped page whose exact resemblance to the page it was matched with
  (the log's ``duplicate_of``) is below threshold − 0.1;
* a **missed duplicate** is a kept page with an earlier kept page (by decision order) at
  exact resemblance ≥ threshold + 0.1 (at most 1.0), found with the exact prefix-filter join
  :func:`benchmarks.recluster.similar_pairs`.

The machine is shared and noisy: read the ratios, which compare runs made side by side, and
the CPU seconds, which do not count time spent waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VARIANTS = ("with", "no_budget", "inline", "without", "fetch_only")
#: the variants that run the dedup stage: in its worker process, or inline on Scrapy's thread
DEDUP_VARIANTS = ("with", "no_budget", "inline")
LABELS = {
    "with": "with dedup stage",
    "no_budget": "with, no duplicate budget",
    "inline": "with, NEARDUP_WORKER=inline",
    "without": "without (NEARDUP_ENABLED=False)",
    "fetch_only": "fetch only (no canonicalise)",
}
PARTS = ("canonicalise", "sketch", "index", "store")
GOAL = 0.15  # the dedup stage may add at most this much wall time
DROPS = ("exact_duplicate", "near_duplicate", "contained")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- one crawl, in a child process ---------------------------------------------------------------


def child_main(spec_path: str) -> None:
    """Run one crawl as ``neardup crawl`` does; write what it did as JSON to spec["out"]."""
    from dataclasses import replace

    spec = json.loads(Path(spec_path).read_text("utf-8"))
    from crawler.cli.crawl import crawl
    from crawler.config import Config, apply_overrides

    config = apply_overrides(replace(Config(), store=spec["store"]), spec["overrides"])
    settings: dict[str, Any] = dict(spec.get("settings", {}))
    if spec["variant"] not in DEDUP_VARIANTS:
        settings["NEARDUP_ENABLED"] = False
    if spec["variant"] == "inline":
        settings["NEARDUP_WORKER"] = "inline"
    if spec["variant"] == "no_budget":
        settings["NEARDUP_DUPLICATE_BUDGET"] = -1
    if spec["variant"] == "fetch_only":
        import crawler.spiders.site as site_module

        from dedup.units import JoinedTokens

        def no_canonicalise(*_: Any, **__: Any) -> JoinedTokens:
            return JoinedTokens(b"page", 1)

        setattr(site_module, "document_tokens", no_canonicalise)  # noqa: B010 - a stub, on purpose
    pipeline_cpu = _time_pipelines() if spec["variant"] in DEDUP_VARIANTS else {}
    before = resource.getrusage(resource.RUSAGE_SELF)
    outcome = crawl(config, [spec["url"]], progress=False, settings=settings)
    after = resource.getrusage(resource.RUSAGE_SELF)
    # the dedup stage's worker process says what it used (none inline or without the stage)
    worker_cpu = float(outcome.stats.get("neardup/worker_cpu_seconds", 0.0))
    if worker_cpu:
        pipeline_cpu["worker"] = worker_cpu
    stats = outcome.stats
    result = {
        "variant": spec["variant"],
        "seconds": outcome.seconds,
        # the crawl's process and its worker (the CPU the crawl costs the machine)
        "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        + worker_cpu,
        "system_cpu_seconds": after.ru_stime - before.ru_stime,
        "max_rss_mb": after.ru_maxrss / 1024,
        "reason": outcome.reason,
        "exit_status": outcome.exit_status,
        "responses": stats.get("response_received_count", 0),
        "elapsed_time_seconds": stats.get("elapsed_time_seconds"),
        "items_scraped": stats.get("item_scraped_count", 0),
        "items_dropped": stats.get("item_dropped_count", 0),
        "decisions": outcome.decisions,
        "skipped": outcome.skipped,
        "stats": {k: v for k, v in stats.items() if k.startswith("neardup/")},
        "log": str(outcome.log),
        "pipeline_cpu_seconds": pipeline_cpu,
    }
    Path(spec["out"]).write_text(json.dumps(result), "utf-8")


def _time_pipelines() -> dict[str, float]:
    """Count the event-loop thread's CPU time by wrapping methods (two clock reads per call):
    each stage's ``process_item`` (which hands the page to the worker process, or does the work
    itself when it runs inline), and the session's reading and settling of outcomes, timer and
    close. The worker process's CPU is added by the caller (``worker``)."""
    import functools

    from crawler.pipelines import DedupPipeline, StoragePipeline
    from crawler.pipelines.session import DedupSession
    from crawler.work.process import Worker

    spent: dict[str, float] = {}

    def wrap(cls: type, name: str, key: str) -> None:
        method = getattr(cls, name)

        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.thread_time() - started

        setattr(cls, name, timed)

    wrap(DedupPipeline, "process_item", "dedup")
    wrap(StoragePipeline, "process_item", "storage")
    wrap(Worker, "_readable", "session")
    wrap(DedupSession, "_resolve", "session")
    wrap(DedupSession, "_tick", "session")
    wrap(DedupSession, "open", "session")
    wrap(DedupSession, "close", "session")
    return spent


def run_crawl(variant: str, url: str, work: Path, name: str, overrides: dict[str, Any],
              timeout: float, settings: dict[str, Any] | None = None,
              ) -> dict[str, Any]:  # fmt: skip
    """One crawl in a fresh process and a fresh store; its result, with the dedup log read.

    ``overrides`` are config keys (``{"crawl.autothrottle": False}``), ``settings`` Scrapy
    settings given as ``neardup crawl -s`` gives them.
    """
    store = work / "stores" / name
    out = work / f"{name}.result.json"
    spec = {"variant": variant, "url": url, "store": str(store), "overrides": overrides,
            "settings": settings or {}, "out": str(out)}  # fmt: skip
    spec_path = work / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec), "utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.crawl", "--child", str(spec_path)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    process_seconds = time.perf_counter() - started
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"crawl {name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    result["process_seconds"] = process_seconds
    if result["reason"] != "finished" or result["exit_status"] != 0:
        raise RuntimeError(f"crawl {name} did not finish cleanly: {result['reason']}\n"
                           f"{proc.stderr[-4000:]}")  # fmt: skip
    if variant in DEDUP_VARIANTS:
        result["log_lines"] = [
            json.loads(line) for line in Path(result["log"]).read_text("utf-8").splitlines()
        ]
    shutil.rmtree(store, ignore_errors=True)
    return result


# --- the judgement -------------------------------------------------------------------------------


class Judge:
    """Checks one crawl's decisions against the site's truth and exact resemblances."""

    def __init__(self, site: Any, base: str, threshold: float) -> None:
        from benchmarks.crawl_site import OPTION, SHINGLE_SIZE
        from dedup.shingles import shingles

        self.site = site
        self.base = base
        self.threshold = threshold
        self.sets = {p: shingles(t, SHINGLE_SIZE, OPTION) for p, t in site.tokens.items()}

    def path(self, url: str) -> str:
        if not url.startswith(self.base):
            raise ValueError(f"a decision for a URL off the site: {url}")
        return url[len(self.base) :] or "/"

    def resemblance(self, a: str, b: str) -> float:
        from dedup.estimators import exact_resemblance

        return exact_resemblance(self.sets[a], self.sets[b])

    def __call__(self, lines: list[dict[str, Any]]) -> dict[str, Any]:
        from benchmarks.recluster import ExactSets, similar_pairs

        t = self.threshold
        decided: dict[str, dict[str, Any]] = {}
        for line in lines:
            path = self.path(line["url"])
            if path in decided:
                raise ValueError(f"two decisions for {path}")
            decided[path] = line
        counts = Counter(line["decision"] for line in lines)
        skipped = Counter(line["reason"] for line in lines if line["decision"] == "skipped")

        false_drops = []
        for path, line in decided.items():
            if line["decision"] not in DROPS:
                continue
            matched = self.path(line["duplicate_of"])
            r = self.resemblance(path, matched)
            if line["decision"] == "exact_duplicate" and r != 1.0:
                false_drops.append({"page": path, "matched": matched, "exact": round(r, 4),
                                    "estimate": None, "why": "exact duplicate, other text"})  # fmt: skip
            elif r < t - 0.1:
                false_drops.append({"page": path, "matched": matched, "exact": round(r, 4),
                                    "estimate": line["resemblance"]})  # fmt: skip

        kept = sorted((p for p, line in decided.items() if line["decision"] == "kept"),
                      key=lambda p: decided[p]["doc_id"])  # fmt: skip
        exact = ExactSets([self.site.tokens[p] for p in kept])
        missed = sorted({j for _, j, _ in similar_pairs(exact, min(1.0, t + 0.1))})
        grey = similar_pairs(exact, t)
        grey_pages = sorted({j for _, j, _ in grey})

        def joined(page: Any) -> bool:
            """True when a copy and its original ended in one cluster (either was dropped as
            a duplicate of the other, or both of a third page)."""
            a, b = decided.get(page.path), decided.get(page.of)
            return a is not None and b is not None and a["cluster_id"] == b["cluster_id"]

        by_kind: dict[str, Counter[str]] = {}
        resemblances: dict[str, list[float]] = defaultdict(list)
        spread: dict[str, list[float]] = {}
        for page in self.site.html_pages:
            row = by_kind.setdefault(page.kind, Counter())
            row["pages"] += 1
            own = decided.get(page.path)
            row[own["decision"] if own else "not decided"] += 1
            entry = self.site.truth[page.path]
            if page.of is not None:
                resemblances[page.kind].append(entry["resemblance"])
                row["joined"] += joined(page)
        for kind, values in resemblances.items():
            spread[kind] = [min(values), statistics.median(values), max(values)]
        # copies by their exact resemblance to their original: how many joined its cluster
        bands = [(0.0, t - 0.1), (t - 0.1, t), (t, t + 0.05), (t + 0.05, 1.0), (1.0, 1.01)]
        banded = []
        for lo, hi in bands:
            members = [p for p in self.site.html_pages if p.of is not None
                       and lo <= self.site.truth[p.path]["resemblance"] < hi]  # fmt: skip
            banded.append({"band": [lo, min(hi, 1.0)], "copies": len(members),
                           "joined": sum(map(joined, members))})  # fmt: skip
        return {
            "decided": len(lines),
            "kept": counts["kept"],
            "exact_duplicate": counts["exact_duplicate"],
            "near_duplicate": counts["near_duplicate"],
            "contained": counts["contained"],
            "skipped": dict(skipped),
            "false_drops": len(false_drops),
            "false_drop_examples": false_drops[:5],
            "missed_duplicates": len(missed),
            "missed_examples": [kept[j] for j in missed[:5]],
            "kept_with_earlier_kept_at_or_above_threshold": len(grey_pages),
            "grey_examples": [
                {"page": kept[j], "earlier": kept[i], "exact": round(r, 4)} for i, j, r in grey[:5]
            ],
            "by_kind": {
                k: {**v, **({"resemblance": spread[k]} if k in spread else {})}
                for k, v in sorted(by_kind.items())
            },
            "copies_by_resemblance": banded,
        }


def distinct_pairs(site: Any, at_least: float) -> int:
    """Pairs of distinct pages (originals and listings) at exact resemblance ≥ ``at_least``:
    the template must not make different articles alike."""
    from benchmarks.recluster import ExactSets, similar_pairs

    distinct = [p.path for p in site.html_pages if p.kind in ("original", "listing")]
    return len(similar_pairs(ExactSets([site.tokens[p] for p in distinct]), at_least))


# --- the whole benchmark -------------------------------------------------------------------------


def _ratios(a: dict[str, Any], b: dict[str, Any], suffix: str) -> dict[str, float]:
    """Wall and CPU time of crawl row ``a`` over row ``b``, keyed ``wall_ratio{suffix}``..."""
    return {
        f"wall_ratio{suffix}": round(a["seconds"] / b["seconds"], 3),
        f"cpu_ratio{suffix}": round(a["cpu_seconds"] / b["cpu_seconds"], 3),
    }


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = statistics.median(r["seconds"] for r in runs)
    cpu = statistics.median(r["cpu_seconds"] for r in runs)
    responses = statistics.median(r["responses"] for r in runs)
    row: dict[str, Any] = {
        "seconds": round(seconds, 3),
        "pages_per_second": round(responses / seconds, 1),
        "cpu_seconds": round(cpu, 3),
        "cpu_ms_per_page": round(1000 * cpu / responses, 3),
        "responses": responses,
        "runs_seconds": [round(r["seconds"], 3) for r in runs],
        "runs_cpu_seconds": [round(r["cpu_seconds"], 3) for r in runs],
        "process_seconds": round(statistics.median(r["process_seconds"] for r in runs), 3),
        "max_rss_mb": round(max(r["max_rss_mb"] for r in runs), 1),
    }
    decided = [r["stats"].get("neardup/decided", 0) for r in runs]
    if any(decided):
        row["ms_per_decided_page"] = {
            part: round(statistics.median(
                1000 * r["stats"].get(f"neardup/seconds/{part}", 0.0)
                / max(r["stats"].get("neardup/decided", 0), 1) for r in runs), 3)
            for part in PARTS
        }  # fmt: skip
        row["pipeline_cpu_ms_per_page"] = {
            part: round(statistics.median(
                1000 * r["pipeline_cpu_seconds"].get(part, 0.0) / r["responses"] for r in runs), 3)
            for part in ("dedup", "storage", "session", "worker")
        }  # fmt: skip
        row["decided"] = statistics.median(decided)
        row["commits"] = statistics.median(r["stats"].get("neardup/commits", 0) for r in runs)
    return row


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.crawl_site import build_site
    from crawler.config import Config
    from crawler.demo.server import serve

    overrides: dict[str, Any] = {}
    if not args.autothrottle:
        overrides["crawl.autothrottle"] = False
    if args.threshold is not None:
        overrides["dedup.threshold"] = args.threshold
    threshold = args.threshold if args.threshold is not None else Config().dedup.threshold
    crawl_config = Config().crawl
    variants = [v for v in VARIANTS if (v != "fetch_only" or args.fetch_only)
                and (v != "inline" or args.inline)]  # fmt: skip

    results: dict[str, Any] = {"load_average_at_start": round(os.getloadavg()[0], 2)}
    started = time.perf_counter()
    site = build_site(pages=args.pages, seed=args.seed, text=args.text)
    results["site"] = site.summary()
    results["site"]["seconds_to_build"] = round(time.perf_counter() - started, 2)
    results["site"]["distinct_pairs_at_or_above_0.5"] = distinct_pairs(site, 0.5)
    log(f"site: {results['site']['pages']:,} pages, {results['site']['copy_fraction']:.0%} "
        f"copies, built in {results['site']['seconds_to_build']} s")  # fmt: skip
    results["settings"] = {
        "threshold": threshold,
        "concurrency": crawl_config.concurrency,
        "autothrottle": args.autothrottle and crawl_config.autothrottle,
        "download_delay": crawl_config.download_delay,
        "robots_txt": crawl_config.robots_txt,
        "repeats": args.repeats,
        "variants": variants,
    }

    work = Path(tempfile.mkdtemp(prefix="neardup-bench-crawl-"))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    judged: dict[str, list[dict[str, Any]]] = {v: [] for v in DEDUP_VARIANTS}
    try:
        root = site.write(work)
        with serve(root) as base:
            judge = Judge(site, base, threshold)
            for repeat in range(args.repeats):
                order = variants if repeat % 2 == 0 else variants[::-1]
                for variant in order:
                    result = run_crawl(variant, base + "/", work, f"{variant}-{repeat}",
                                       overrides, args.timeout)  # fmt: skip
                    log(f"run {repeat + 1}/{args.repeats} {variant:>10}: "
                        f"{result['seconds']:.2f} s, {result['cpu_seconds']:.2f} s CPU, "
                        f"{result['responses']:,} responses")  # fmt: skip
                    if variant in DEDUP_VARIANTS:
                        judged[variant].append(judge(result.pop("log_lines")))
                    runs[variant].append(result)
    finally:
        if args.keep:
            log(f"kept the site and results in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    results["crawls"] = {v: median_row(r) for v, r in runs.items()}
    with_, without = results["crawls"]["with"], results["crawls"]["without"]
    stage = results["dedup_stage"] = {
        **_ratios(with_, without, ""),
        "cpu_ms_per_page_added": round(with_["cpu_ms_per_page"] - without["cpu_ms_per_page"], 3),
        "goal_wall_ratio": 1 + GOAL,
        "goal_met": with_["seconds"] / without["seconds"] <= 1 + GOAL,
    }
    if "fetch_only" in results["crawls"]:
        bare = results["crawls"]["fetch_only"]
        stage.update(_ratios(with_, bare, "_to_fetch_only"))
        stage["canonicalise_cpu_ms_per_page"] = round(
            without["cpu_ms_per_page"] - bare["cpu_ms_per_page"], 3)  # fmt: skip
    if "inline" in results["crawls"]:
        stage.update({f"inline_{k}": v for k, v in
                      _ratios(results["crawls"]["inline"], without, "").items()})  # fmt: skip
    budget = results["duplicate_budget"] = _ratios(with_, results["crawls"]["no_budget"], "")
    budget["links_not_followed"] = sorted(
        {r["stats"].get("neardup/links/duplicate_budget", 0) for r in runs["with"]})
    responses = {v: sorted({r["responses"] for r in rs}) for v, rs in runs.items()}
    results["responses_per_variant"] = responses
    results["judgement"] = judged["with"][0]
    for variant, verdicts in judged.items():
        key = "judgement_per_run" if variant == "with" else f"judgement_{variant}_per_run"
        results[key] = [
            {k: j[k] for k in ("kept", "exact_duplicate", "near_duplicate", "false_drops",
                               "missed_duplicates",
                               "kept_with_earlier_kept_at_or_above_threshold")}
            for j in verdicts
        ]  # fmt: skip
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    return results


# --- the report ----------------------------------------------------------------------------------


def render(results: dict[str, Any]) -> str:
    site, s = results["site"], results["settings"]
    t = s["threshold"]
    kinds = site["kinds"]
    copy_kinds = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())
                           if k not in ("original", "listing", "private"))  # fmt: skip
    lines = [
        (
            f"site: {site['pages']:,} HTML pages + robots.txt, {site['megabytes']} MB, seed "
            f"{site['seed']}, digest {site['digest']}, built in {site['seconds_to_build']} s"
        ),
        (
            f"  {kinds.get('original', 0):,} articles, {kinds.get('listing', 0)} listing pages, "
            f"{kinds.get('private', 0)} pages robots.txt forbids; {site['copies']:,} copies "
            f"({site['copy_fraction']:.0%}): {copy_kinds}"
        ),
        f"  text: {site['text_source']}",
        (
            f"  distinct pages (articles, listings) at exact resemblance >= 0.5 to another: "
            f"{site['distinct_pairs_at_or_above_0.5']} pairs"
        ),
    ]
    if "corpus_error" in site:
        lines.append(f"  (the corpus could not be used: {site['corpus_error']})")
    lines += [
        (
            f"crawls: crawler.cli.crawl.crawl (as neardup crawl, no progress line), each in a "
            f"fresh process and store; concurrency {s['concurrency']}, AutoThrottle "
            f"{'on' if s['autothrottle'] else 'off'}, download delay {s['download_delay']}, "
            f"robots.txt {'obeyed' if s['robots_txt'] else 'ignored'}; median of {s['repeats']} "
            f"runs, variants alternating; load average {results['load_average_at_start']} at "
            f"start, {results['load_average_at_end']} at end ({os.cpu_count()} cores)"
        ),
        "",
        (
            f"{'':34}{'wall s':>8}{'pages/s':>9}{'CPU s':>8}{'CPU ms/page':>13}   "
            "runs: wall s (CPU s)"
        ),
    ]
    for variant, row in results["crawls"].items():
        runs = "  ".join(f"{w:.2f} ({c:.2f})"
                         for w, c in zip(row["runs_seconds"], row["runs_cpu_seconds"]))  # fmt: skip
        lines.append(f"{LABELS[variant]:34}{row['seconds']:8.2f}{row['pages_per_second']:9.1f}"
                     f"{row['cpu_seconds']:8.2f}{row['cpu_ms_per_page']:13.3f}   {runs}")  # fmt: skip
    d = results["dedup_stage"]
    without = results["crawls"]["without"]
    verdict = "met" if d["goal_met"] else "MISSED"
    lines += [
        "",
        (
            f"the dedup stage (with / without): wall x{d['wall_ratio']:.3f} "
            f"({(d['wall_ratio'] - 1):+.1%}; goal at most +{GOAL:.0%}: {verdict}), "
            f"CPU x{d['cpu_ratio']:.3f} ({d['cpu_ms_per_page_added']:+.3f} ms per page)"
        ),
    ]
    if "inline_wall_ratio" in d:
        lines.append(
            f"the same work inline on Scrapy's thread (NEARDUP_WORKER=inline) / without: wall "
            f"x{d['inline_wall_ratio']:.3f} ({d['inline_wall_ratio'] - 1:+.1%}), CPU "
            f"x{d['inline_cpu_ratio']:.3f}"
        )
    b = results["duplicate_budget"]
    lines.append(
        f"the duplicate budget (with / no budget): wall x{b['wall_ratio']:.3f} "
        f"({b['wall_ratio'] - 1:+.1%}), CPU x{b['cpu_ratio']:.3f}; links it held back per run: "
        f"{', '.join(str(n) for n in b['links_not_followed'])}"
    )
    if "wall_ratio_to_fetch_only" in d:
        lines.append(
            f"with / fetch only (all dedup work, canonicalisation included): wall "
            f"x{d['wall_ratio_to_fetch_only']:.3f}, CPU x{d['cpu_ratio_to_fetch_only']:.3f}; "
            f"the spider's canonicalisation costs {d['canonicalise_cpu_ms_per_page']:.3f} ms "
            "CPU per page and is paid by both 'with' and 'without'"
        )
    with_row = results["crawls"]["with"]
    split = with_row.get("ms_per_decided_page")
    if split:
        total = sum(split.values())
        parts = "  ".join(f"{p} {split[p]:.3f}" for p in PARTS)
        lines += [
            (
                f"per-page cost split (neardup/seconds/*, ms per decided page, median run): {parts}  "
                f"total {total:.3f}"
            ),
            (
                "  (perf_counter time inside the crawl process: on a loaded machine it includes time "
                "spent waiting for a core; canonicalise is the spider's, paid by 'without' too)"
            ),
        ]
        for variant in DEDUP_VARIANTS:
            if variant not in results["crawls"]:
                continue
            row = results["crawls"][variant]
            cpu = row["pipeline_cpu_ms_per_page"]
            loop_side = cpu["dedup"] + cpu["storage"] + cpu["session"]
            rest = row["cpu_ms_per_page"] - loop_side - cpu["worker"]
            lines.append(
                f"CPU per page, {LABELS[variant]}: on the event-loop thread in the stages "
                f"{loop_side:.3f} ms (process_item: dedup {cpu['dedup']:.3f}, storage "
                f"{cpu['storage']:.3f}; settling, timer and close {cpu['session']:.3f}); on the "
                f"worker process {cpu['worker']:.3f} ms; the rest of the crawl {rest:.3f} ms "
                f"against {without['cpu_ms_per_page']:.3f} without"
            )
    j = results["judgement"]
    skipped = ", ".join(f"{r} {n}" for r, n in sorted(j["skipped"].items()))
    lines += [
        "",
        f"decisions (first 'with' run) against the truth, threshold {t}:",
        f"  decided {j['decided']:,}: kept {j['kept']:,}, exact duplicates dropped "
        f"{j['exact_duplicate']:,}, near duplicates dropped {j['near_duplicate']:,}"
        + (f", contained {j['contained']:,}" if j["contained"] else "")
        + f", skipped {sum(j['skipped'].values())} ({skipped})",
        (
            f"  false drops (dropped; exact resemblance to the page matched < {t - 0.1:.2f}): "
            f"{j['false_drops']}"
        ),
        (
            f"  missed duplicates (kept; an earlier kept page at exact resemblance >= "
            f"{min(1.0, t + 0.1):.2f}): {j['missed_duplicates']}"
        ),
        (
            f"  for information: kept pages with an earlier kept page at exact resemblance >= {t} "
            f"(the estimate fell below the threshold): "
            f"{j['kept_with_earlier_kept_at_or_above_threshold']}"
        ),
    ]
    for example in j["false_drop_examples"]:
        lines.append(f"    false drop: {example}")
    for example in j["missed_examples"]:
        lines.append(f"    missed: {example}")
    lines += [
        "",
        "  kept/exact/near: the page's own decision (of a copy and its original, the one met",
        "  second is dropped, so an original met after its copy is dropped); joined: the copy",
        "  ended in its original's cluster",
        (
            f"  {'kind':16}{'pages':>7}{'kept':>7}{'exact':>7}{'near':>7}{'skipped':>9}{'joined':>8}"
            "   exact resemblance to original: min / median / max"
        ),
    ]
    for kind, row in j["by_kind"].items():
        r = row.get("resemblance")
        spread = f"{r[0]:.3f} / {r[1]:.3f} / {r[2]:.3f}" if r else ""
        together = f"{row.get('joined', 0):8,}" if r else f"{'':8}"
        lines.append(f"  {kind:16}{row['pages']:7,}{row.get('kept', 0):7,}"
                     f"{row.get('exact_duplicate', 0):7,}{row.get('near_duplicate', 0):7,}"
                     f"{row.get('skipped', 0):9,}{together}   {spread}")  # fmt: skip
    bands = "; ".join(
        f"[{b['band'][0]:.2f}, {b['band'][1]:.2f}{']' if b['band'][0] >= 1.0 else ')'} "
        f"{b['joined']}/{b['copies']}"
        for b in j["copies_by_resemblance"] if b["copies"]
    )  # fmt: skip
    lines.append(f"  copies joined with their original, by exact resemblance to it: {bands}")
    per_run = results["judgement_per_run"]
    for variant in ("no_budget", "inline"):
        others = results.get(f"judgement_{variant}_per_run") or []
        if others:
            same = all(r == per_run[0] for r in others)
            lines.append(f"  the '{LABELS[variant]}' runs decided "
                         + ("the same counts as the 'with' runs" if same
                            else f"differently: {others}"))  # fmt: skip
    if len(per_run) > 1:
        same = all(r == per_run[0] for r in per_run)
        lines.append(f"  the {len(per_run)} 'with' runs decided "
                     + ("the same counts" if same else f"differently: {per_run}"))  # fmt: skip
    responses = results["responses_per_variant"]
    if len({tuple(v) for v in responses.values()}) > 1:
        lines.append(f"note: the variants received different numbers of responses: {responses}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.crawl", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--pages", type=int, default=2400, help="HTML pages of the site")
    parser.add_argument("--repeats", type=int, default=3, help="crawls per variant")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated site")
    parser.add_argument(
        "--text",
        choices=("corpus", "zipf"),
        default="corpus",
        help="article sentences: the Debian corpus, or made-up Zipf words",
    )
    parser.add_argument("--threshold", type=float, help="dedup.threshold (default: config)")
    parser.add_argument(
        "--autothrottle",
        action="store_true",
        help="leave AutoThrottle as the config says (on) instead of off",
    )
    parser.add_argument(
        "--inline",
        action="store_true",
        help="also crawl with NEARDUP_WORKER=inline (the dedup work on Scrapy's thread)",
    )
    parser.add_argument(
        "--no-fetch-only",
        dest="fetch_only",
        action="store_false",
        help="skip the fetch-only variant",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per crawl")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.pages < 2000:
        log(f"note: {args.pages} pages is fewer than the 2,000 the benchmark is meant for")
    results = benchmark(args)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
