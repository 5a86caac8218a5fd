"""``neardup compare A B``: exact and estimated resemblance and containment of two documents."""

from __future__ import annotations

import argparse
import json
import math

from crawler.cli.common import (
    add_config_arguments,
    add_sketch_arguments,
    read_document,
    resolve_config,
)
from dedup.document import Sketcher
from dedup.estimators import estimate, exact_containment, exact_resemblance

HELP = "how alike are two documents (exact and estimated from sketches)"
DESCRIPTION = """\
Compare two documents (files, or - for standard input; HTML or plain text, detected).

Prints the exact resemblance r(A,B) = |S(A) & S(B)| / |S(A) | S(B)| and containment
c(A,B) = |S(A) & S(B)| / |S(A)| over the full shingle sets, and the same quantities estimated
from the two sketches alone, as a crawl would see them. Near 1 means "roughly the same" or
"roughly contained".

examples:
  neardup compare page1.html page2.html                 how alike, with the crawl's sketch
  neardup compare article.html printable.html --sketch tiered
  curl -s https://example.org/ | neardup compare - saved.html
  neardup compare a.txt b.txt --json | jq .estimate
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="first document (path, or - for stdin)")
    parser.add_argument("b", metavar="B", help="second document (path, or - for stdin)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_sketch_arguments(parser)
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    doc_a = read_document(args.a, config)
    doc_b = read_document(args.b, config)
    sketcher = Sketcher(config.sketch)
    sk_a, sk_b = sketcher.sketch(doc_a.tokens), sketcher.sketch(doc_b.tokens)
    set_a, set_b = sketcher.exact_shingles(doc_a.tokens), sketcher.exact_shingles(doc_b.tokens)
    est = estimate(sk_a.sketch, sk_b.sketch)
    report = {
        "a": {"name": doc_a.name, "format": doc_a.kind, "tokens": sk_a.tokens,
              "shingles": len(set_a)},
        "b": {"name": doc_b.name, "format": doc_b.kind, "tokens": sk_b.tokens,
              "shingles": len(set_b)},
        "identical": sk_a.content_hash == sk_b.content_hash,
        "exact": {
            "resemblance": exact_resemblance(set_a, set_b),
            "containment_a_in_b": exact_containment(set_a, set_b),
            "containment_b_in_a": exact_containment(set_b, set_a),
            "shared_shingles": len(set_a & set_b),
        },
        "estimate": {
            "resemblance": _number(est.resemblance),
            "containment_a_in_b": _number(est.containment_a_in_b),
            "containment_b_in_a": _number(est.containment_b_in_a),
            "matches": est.matches,
            "sample_size": est.sample_size,
        },
        "parameters": config.sketch.to_dict(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report, config.sketch.describe()))
    return 0


def _number(value: float) -> float | None:
    """JSON has no NaN: an estimate without evidence (an empty MOD_m sample) is null."""
    return None if math.isnan(value) else value


def _cell(value: float | None) -> str:
    return f"{'n/a':>10}" if value is None else f"{value:>10.4f}"


def render(report: dict, described: str) -> str:
    a, b, ex, es = report["a"], report["b"], report["exact"], report["estimate"]
    width = max(len(a["name"]), len(b["name"]), 8)
    lines = [
        f"A  {a['name']:<{width}}  {a['format']:<4}  {a['tokens']:>7} tokens  "
        f"{a['shingles']:>7} shingles",
        f"B  {b['name']:<{width}}  {b['format']:<4}  {b['tokens']:>7} tokens  "
        f"{b['shingles']:>7} shingles",
        f"sketch: {described}",
        "",
        f"{'':<22}{'exact':>8}{'estimate':>10}",
        f"{'resemblance r(A,B)':<22}{ex['resemblance']:>8.4f}{_cell(es['resemblance'])}",
        f"{'containment c(A,B)':<22}{ex['containment_a_in_b']:>8.4f}"
        f"{_cell(es['containment_a_in_b'])}",
        f"{'containment c(B,A)':<22}{ex['containment_b_in_a']:>8.4f}"
        f"{_cell(es['containment_b_in_a'])}",
        "",
        f"{ex['shared_shingles']} shingles shared; "
        f"{es['matches']} of {es['sample_size']} sketch entries matched.",
    ]
    if report["identical"]:
        lines.append("The canonical token streams are identical (an exact duplicate).")
    return "\n".join(lines)
