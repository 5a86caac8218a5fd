"""What several commands share: the config flags and reading documents."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawler.config import Config, ConfigError, apply_overrides, load_config, parse_assignment
from dedup.canonical import document_tokens, looks_like_html


class UserError(Exception):
    """A mistake the user can fix; printed as one line."""


class RunFailed(Exception):
    """Work that could not finish for a reason that is not the command line's (a cluster's
    job failed); printed as one line, exit status 1."""


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="configuration file (default: ./config.yaml if present)"
    )
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one setting, e.g. --set sketch.size=128 (repeatable)",
    )


def add_sketch_arguments(parser: argparse.ArgumentParser) -> None:
    """The sketch flags; each left unset falls back to the config file."""
    g = parser.add_argument_group("sketch parameters (default: the config file's sketch section)")
    g.add_argument("--shingle-size", "-w", type=int, metavar="W", help="tokens per shingle")
    g.add_argument("--option", choices=["A", "B"], help="A: labelled shingles (bag); B: set")
    g.add_argument(
        "--sketch",
        choices=["min", "mod", "minmod", "tiered", "permutation"],
        help="sketch kind: MIN_s, MOD_m, MIN_s of MOD_m, size-tiered L_i, k-permutation",
    )
    g.add_argument("--sketch-size", "-s", type=int, metavar="S", help="s (or k)")
    g.add_argument("--modulus", "-m", type=int, metavar="M", help="m for mod and minmod")
    g.add_argument("--seed", type=int, help="seed of the Rabin polynomial and permutations")
    g.add_argument("--unit", choices=["word", "char", "line"], help="token unit")


_SKETCH_FLAGS = {
    "shingle_size": "sketch.shingle_size",
    "option": "sketch.option",
    "sketch": "sketch.kind",
    "sketch_size": "sketch.size",
    "modulus": "sketch.modulus",
    "seed": "sketch.seed",
    "unit": "sketch.unit",
}


def resolve_config(args: argparse.Namespace) -> Config:
    """Config file, then --set, then the dedicated flags (the most specific wins)."""
    config = load_config(args.config)
    overrides: dict[str, Any] = dict(parse_assignment(a) for a in args.set)
    for attr, key in _SKETCH_FLAGS.items():
        value = getattr(args, attr, None)
        if value is not None:
            overrides[key] = value
    if overrides:
        config = apply_overrides(config, overrides)
    return config


@dataclass(frozen=True)
class LoadedDocument:
    name: str
    kind: str  # "html" or "text"
    tokens: list[str]


def read_document(name: str, config: Config) -> LoadedDocument:
    """A file (or ``-`` for stdin) as canonical tokens; HTML or plain text is detected."""
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {name}: {exc.strerror}") from None
    kind = "html" if looks_like_html(data) else "text"
    tokens = document_tokens(
        data, kind, config.sketch.unit, config.dedup.canonicaliser, area=config.canonical
    )
    return LoadedDocument(name, kind, tokens.tokens())


__all__ = [
    "ConfigError",
    "LoadedDocument",
    "UserError",
    "add_config_arguments",
    "add_sketch_arguments",
    "read_document",
    "resolve_config",
]
