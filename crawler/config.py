"""config.yaml: the one place defaults live, read once and checked by name.

The built-in defaults are the dataclass defaults (``dedup.params`` and :class:`Config`);
``config.yaml`` at the top of the repository states them again with comments, and a test keeps
the two equal. Reading is strict: an unknown key or a bad value is a :class:`ConfigError` whose
message names the key, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from dedup.params import DedupParams, SketchParams

#: read when no --config is given and it exists in the working directory
DEFAULT_CONFIG_NAME = "config.yaml"


class ConfigError(ValueError):
    """A bad configuration file, key or value; the message is one line for the user."""


@dataclass(frozen=True)
class Config:
    store: str = "neardup-store"
    sketch: SketchParams = field(default_factory=SketchParams)
    dedup: DedupParams = field(default_factory=DedupParams)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SECTIONS: dict[str, type] = {"sketch": SketchParams, "dedup": DedupParams}


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read a config file; with no path, ./config.yaml if present, else the built-in defaults."""
    if path is None:
        if not Path(DEFAULT_CONFIG_NAME).is_file():
            return Config()
        path = DEFAULT_CONFIG_NAME
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {where}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
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
                raise ConfigError(f"{where}: '{key}' must be a mapping of keys to values")
            values[key] = _section(key, value, where)
        elif key == "store":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: store must be a directory name; got {value!r}")
            values[key] = value
        else:
            raise ConfigError(f"{where}: unknown key '{key}' (known: {', '.join(_known_top())})")
    return Config(**values)


def apply_overrides(config: Config, overrides: dict[str, Any]) -> Config:
    """Replace dotted keys, e.g. ``{"sketch.size": 128}``; values already typed."""
    data = config.to_dict()
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        if key:
            if section not in _SECTIONS or not isinstance(data.get(section), dict):
                raise ConfigError(f"unknown key '{dotted}'")
            data[section][key] = value
        else:
            data[section] = value
    return config_from_dict(data, "setting")


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
                f"{where}: unknown key '{name}.{key}' (known: {', '.join(known)})"
            )
    try:
        return replace(cls(), **data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _known_top() -> list[str]:
    return ["store", *_SECTIONS]
