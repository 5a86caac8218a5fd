"""config.yaml: the one place defaults live, read once and checked by name.

The built-in defaults are the dataclass defaults (``dedup.params`` and :class:`Config`);
``config.yaml`` at the top of the repository states them again with comments, and a test keeps
the two equal. Reading is strict: an unknown key or a bad value is a :class:`ConfigError` whose
message names the key, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from dedup.params import ContentArea, DedupParams, SketchParams

#: read when no --config is given and it exists in the working directory
DEFAULT_CONFIG_NAME = "config.yaml"


class ConfigError(ValueError):
    """A bad configuration file, key or value; the message is one line for the user."""


@dataclass(frozen=True)
class CrawlParams:
    """What the spider fetches and how politely; mapped onto Scrapy settings."""

    #: hosts the crawl may visit; empty means the start URLs' hosts
    allowed_domains: tuple[str, ...] = ()
    #: link depth from the start URLs; 0 means no limit
    max_depth: int = 0
    #: stop after this many responses; 0 means no limit
    max_pages: int = 0
    #: the links of a page dropped as a duplicate are followed only while it is at most the
    #: N-th page in a row of one cluster along its link path (a spider trap repeats one
    #: page); 0 never follows a duplicate's links, None always does (docs/crawling.md)
    duplicate_link_budget: int | None = 2
    #: a link whose path repeats a segment, or a run of segments, more than N times in a row
    #: (``/a/a/a/``: a directory linked to itself or its parent), or has more than
    #: ``max_path_segments`` segments, is not followed; 0: no limit (crawler.spiders.paths)
    max_path_repeats: int = 2
    max_path_segments: int = 20
    #: a recrawl asks for each URL the store knows with the validators of its last response
    #: (If-None-Match, If-Modified-Since), so an unchanged page costs a 304 (docs/crawling.md)
    conditional_requests: bool = True
    #: regular expressions; when any is given a URL must match one to be followed
    include: tuple[str, ...] = ()
    #: regular expressions; a URL matching one is not followed
    exclude: tuple[str, ...] = ()
    #: requests in flight at once (Scrapy CONCURRENT_REQUESTS)
    concurrency: int = 8
    #: adapt the delay to the server's latency, the median of its last few responses
    #: (crawler.extensions.throttle), so that one slow page does not set the pace
    autothrottle: bool = True
    #: seconds between requests to one host: the throttle's start and floor
    download_delay: float = 0.0
    #: obey robots.txt
    robots_txt: bool = True
    #: larger bodies are skipped with a reason (bytes, after decompression)
    max_page_bytes: int = 10 * 1024 * 1024
    #: seconds before a request is abandoned (the others go on meanwhile)
    timeout: float = 30.0
    #: User-Agent header
    user_agent: str = "neardup/0.1 (near-duplicate aware crawler)"
    #: pages per LMDB write transaction (and at most batch_seconds between commits)
    batch_size: int = 64
    batch_seconds: float = 2.0

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_pages", "max_path_repeats", "max_path_segments"):
            _check(f"crawl.{name}", getattr(self, name), int, minimum=0)
        if self.duplicate_link_budget is not None:
            _check("crawl.duplicate_link_budget", self.duplicate_link_budget, int, minimum=0)
        for name in ("concurrency", "max_page_bytes", "batch_size"):
            _check(f"crawl.{name}", getattr(self, name), int, minimum=1)
        for name in ("download_delay", "timeout", "batch_seconds"):
            _check(f"crawl.{name}", getattr(self, name), (int, float), minimum=0)
        for name in ("autothrottle", "robots_txt"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"crawl.{name} must be true or false; got {getattr(self, name)!r}")
        for name in ("allowed_domains", "include", "exclude"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"crawl.{name} must be a list of strings; got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for name in ("include", "exclude"):
            for pattern in getattr(self, name):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"crawl.{name}: bad regular expression {pattern!r}: {exc}")
        if not isinstance(self.user_agent, str) or not self.user_agent:
            raise ValueError(f"crawl.user_agent must be a non-empty string; got {self.user_agent!r}")

    @property
    def duplicate_budget_setting(self) -> int:
        """``duplicate_link_budget`` as the Scrapy setting carries it: -1 for no budget."""
        budget = self.duplicate_link_budget
        return -1 if budget is None else budget


def _check(name: str, value: object, kind: type | tuple[type, ...], minimum: float) -> None:
    if isinstance(value, bool) or not isinstance(value, kind) or value < minimum:  # type: ignore[operator]
        raise ValueError(f"{name} must be a number >= {minimum}; got {value!r}")


@dataclass(frozen=True)
class ReviewParams:
    """What the store keeps so people can audit decisions (``neardup explain``, ``report``)."""

    #: keep the canonical text of dropped pages (compressed, in the store's index, not the WARCs)
    keep_text: bool = True
    #: canonical text longer than this (bytes of UTF-8, before compression) is cut to it
    max_text_bytes: int = 262144

    def __post_init__(self) -> None:
        if not isinstance(self.keep_text, bool):
            raise ValueError(f"review.keep_text must be true or false; got {self.keep_text!r}")
        _check("review.max_text_bytes", self.max_text_bytes, int, minimum=0)


@dataclass(frozen=True)
class Config:
    store: str = "neardup-store"
    sketch: SketchParams = field(default_factory=SketchParams)
    dedup: DedupParams = field(default_factory=DedupParams)
    crawl: CrawlParams = field(default_factory=CrawlParams)
    review: ReviewParams = field(default_factory=ReviewParams)
    canonical: ContentArea = field(default_factory=ContentArea)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, not tuples), as config.yaml spells it."""
        return _plain(dataclasses.asdict(self))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_SECTIONS: dict[str, type] = {
    "sketch": SketchParams,
    "dedup": DedupParams,
    "crawl": CrawlParams,
    "review": ReviewParams,
    "canonical": ContentArea,
}


class _RepeatedKey(ValueError):
    """A mapping of the file gives one key twice (YAML would keep the last, silently)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if isinstance(key, str) and key in lines:
                raise _RepeatedKey(f"'{key}' is given twice (lines {lines[key]} and {line})")
            if isinstance(key, str):
                lines[key] = line
        return super().construct_mapping(node, deep)


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read a config file; with no path, ./config.yaml if present, else the built-in defaults."""
    if path is None:
        if not Path(DEFAULT_CONFIG_NAME).is_file():
            return Config()
        path = DEFAULT_CONFIG_NAME
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {where}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{where}: line {line} is not UTF-8 text (byte "
                          f"0x{raw[exc.start]:02x}); save the file as UTF-8") from None  # fmt: skip
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except _RepeatedKey as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{where}: not valid YAML{at}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of keys to values at the top level")
    return config_from_dict(data, where)


def config_from_dict(data: dict[str, Any], where: str = "config") -> Config:
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ConfigError(f"{_at(where)}'{key}' must be a mapping of keys to values")
            values[key] = _section(key, value, where)
        elif key == "store":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{_at(where)}store must be a directory name; got {value!r}")
            values[key] = value
        else:
            raise ConfigError(f"{_at(where)}unknown key '{key}' (known: {', '.join(_known_top())})")
    return Config(**values)


def apply_overrides(config: Config, overrides: dict[str, Any], where: str = "--set") -> Config:
    """Replace dotted keys, e.g. ``{"sketch.size": 128}``; values already typed. ``where``
    names the overrides in a message (``--set``, or the flags that gave them)."""
    data = config.to_dict()
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        if key:
            if section not in _SECTIONS or not isinstance(data.get(section), dict):
                raise ConfigError(f"{_at(where)}unknown key '{dotted}' (known: "
                                  f"{', '.join(_known_top())})")  # fmt: skip
            data[section][key] = value
        else:
            data[section] = value
    return config_from_dict(data, where)


def parse_assignment(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line, the value read as YAML (so 0.8 is a float)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _section(name: str, data: dict[str, Any], where: str) -> Any:
    cls = _SECTIONS[name]
    known = [f.name for f in fields(cls)]
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{_at(where)}unknown key '{name}.{key}' (known: {', '.join(known)})"
            )
    try:
        return replace(cls(), **data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{_at(where)}{exc}") from None


def _at(where: str) -> str:
    """How a message names where the values came from ("" for nowhere in particular)."""
    return f"{where}: " if where else ""


def _known_top() -> list[str]:
    return ["store", *_SECTIONS]
