"""``neardup curve``: the S-shaped chance that a pair is called a duplicate (lecture Fig. 12.3)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crawler.cli.common import UserError, add_config_arguments, resolve_config
from dedup.curves import curve, matches_needed

HELP = "probability that at least K of S sketch entries match, by resemblance"
DESCRIPTION = """\
Each sketch entry matches with probability r, the resemblance of the two documents, so the number
of matches among S entries is Binomial(S, r) and a pair is called a near duplicate with
probability P[at least K of S match]. The curve is an S: pairs well below K/S are almost never
dropped, pairs well above almost always are. Use it to choose --sketch-size and the threshold.

examples:
  neardup curve                                 S and K from the config (size, threshold)
  neardup curve -s 100 -k 90 --plot curve.svg   the lecture's Figure 12.3
  neardup curve --json | jq '.[90]'
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sketch-size", "-s", type=int, metavar="S",
                        help="sketch entries compared (default: sketch.size)")
    parser.add_argument("--matches", "-k", type=int, metavar="K",
                        help="matches needed (default: dedup.threshold x S, rounded up)")
    parser.add_argument("--json", action="store_true",
                        help='print [{"resemblance": r, "probability": p}] for r = 0.00 ... 1.00')
    parser.add_argument("--plot", metavar="FILE", help="draw the curve to FILE (.png or .svg)")
    add_config_arguments(parser)


def resolve(args: argparse.Namespace) -> tuple[int, int]:
    config = resolve_config(args)
    s = args.sketch_size if args.sketch_size is not None else config.sketch.size
    if s < 1:
        raise UserError(f"--sketch-size must be at least 1; got {s}")
    k = args.matches
    if k is None:
        k = matches_needed(config.dedup.threshold, s)
    if not 0 <= k <= s:
        raise UserError(f"--matches must be between 0 and the sketch size {s}; got {k}")
    return s, k


def run(args: argparse.Namespace) -> int:
    s, k = resolve(args)
    if args.plot:
        plot(args.plot, s, k)
    points = curve(s, k)  # r = 0.00, 0.01, ..., 1.00
    if args.json:
        print(json.dumps([{"resemblance": r, "probability": p} for r, p in points]))
        return 0
    print(f"P[at least {k} of {s} sketch entries match | resemblance r]")
    print(f"{'r':>5}  {'probability':>12}")
    for r, p in points[50:]:
        bar = "#" * round(p * 40)
        print(f"{r:>5.2f}  {_fmt(p):>12}  {bar}")
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


def _fmt(p: float) -> str:
    return f"{p:.4f}" if p == 0 or p >= 1e-4 else f"{p:.2e}"


def plot(path: str, s: int, k: int) -> None:
    """The lecture's Figure 12.3 for these S and K: the report's S-curve, over all of r."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".png", ".svg"):
        raise UserError(f"--plot must end in .png or .svg; got {path!r}")
    from crawler.review.plots import s_curve_figure

    fig = s_curve_figure(s, k, low=0.0, size=(6.4, 4.2), dpi=120, steps=500)
    import matplotlib.pyplot as plt  # after the figure: plots chose the Agg backend first

    try:
        fig.savefig(path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
