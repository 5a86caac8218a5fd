"""``neardup curve``: the S-shaped chance that a pair is called a duplicate (lecture Fig. 12.3)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crawler.cli.common import UserError, add_config_arguments, resolve_config
from dedup.curves import p_at_least

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
        k = -int(-round(config.dedup.threshold * s, 9) // 1)
    if not 0 <= k <= s:
        raise UserError(f"--matches must be between 0 and the sketch size {s}; got {k}")
    return s, k


def run(args: argparse.Namespace) -> int:
    s, k = resolve(args)
    if args.plot:
        plot(args.plot, s, k)
    if args.json:
        rows = [{"resemblance": i / 100, "probability": p_at_least(k, s, i / 100)}
                for i in range(101)]
        print(json.dumps(rows))
        return 0
    print(f"P[at least {k} of {s} sketch entries match | resemblance r]")
    print(f"{'r':>5}  {'probability':>12}")
    for i in range(50, 101):
        r = i / 100
        p = p_at_least(k, s, r)
        bar = "#" * round(p * 40)
        print(f"{r:>5.2f}  {_fmt(p):>12}  {bar}")
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


def _fmt(p: float) -> str:
    return f"{p:.4f}" if p == 0 or p >= 1e-4 else f"{p:.2e}"


def plot(path: str, s: int, k: int) -> None:
    """The lecture's Figure 12.3 for these S and K."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".png", ".svg"):
        raise UserError(f"--plot must end in .png or .svg; got {path!r}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [i / 500 for i in range(501)]
    ps = [p_at_least(k, s, r) for r in rs]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    ax.plot(rs, ps, color="#1f5fa8", linewidth=2)
    ax.axvline(k / s, color="#b03030", linestyle="--", linewidth=1, label=f"K/S = {k / s:.2f}")
    ax.set_xlabel("resemblance r of the two documents")
    ax.set_ylabel(f"P[at least {k} of {s} entries match]")
    ax.set_title(f"Chance a pair is called a near duplicate (S = {s}, K = {k})")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
