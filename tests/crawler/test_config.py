"""config.yaml equals the built-in defaults, and mistakes are named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crawler.config import Config, ConfigError, apply_overrides, load_config, parse_assignment

ROOT = Path(__file__).resolve().parents[2]


def test_config_yaml_equals_builtin_defaults():
    assert load_config(ROOT / "config.yaml") == Config()


def test_config_yaml_lists_every_key():
    data = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    assert data == Config().to_dict()


def test_every_key_is_commented():
    lines = (ROOT / "config.yaml").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and ":" in stripped:
            assert lines[i - 1].strip().startswith("#"), f"no comment above {stripped!r}"


def test_no_file_gives_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config() == Config()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("sketch:\n  shingle_sise: 5\n", "sketch.shingle_sise"),
        ("skecth:\n  size: 5\n", "skecth"),
        ("sketch:\n  option: C\n", "sketch.option"),
        ("sketch:\n  size: -3\n", "sketch.size"),
        ("sketch:\n  fingerprint_bits: 32\n", "sketch.fingerprint_bits"),
        ("dedup:\n  threshold: 1.5\n", "dedup.threshold"),
        ("dedup:\n  representative: last\n", "dedup.representative"),
        ("sketch: 5\n", "sketch"),
        ("- a\n- b\n", "mapping"),
        ("sketch: [\n", "YAML"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path, text, named):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert named in message
    assert "\n" not in message
    assert str(path) in message


def test_a_key_given_twice_and_a_file_that_is_not_utf8_are_one_line(tmp_path):
    """YAML keeps the last of two equal keys without a word: the crawl would run at a threshold
    the user did not read last. Both are refused, with the lines."""
    path = tmp_path / "config.yaml"
    for text, said in [
        ("dedup:\n  threshold: 0.9\ndedup:\n  threshold: 0.5\n",
         "'dedup' is given twice (lines 1 and 3)"),
        ("dedup:\n  threshold: 0.9\n  cap: 64\n  threshold: 0.5\n",
         "'threshold' is given twice (lines 2 and 4)"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(info.value) == f"{path}: {said}"
    path.write_bytes('# réglages\ncrawl:\n  user_agent: "robot de l’équipe"\n'.encode("cp1252"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: line 1 is not UTF-8 text (byte 0xe9); save the file as UTF-8"


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml")


def test_overrides_are_typed_and_checked():
    config = apply_overrides(Config(), dict([parse_assignment("sketch.size=128")]))
    assert config.sketch.size == 128
    config = apply_overrides(config, dict([parse_assignment("dedup.threshold=0.8")]))
    assert config.dedup.threshold == 0.8
    with pytest.raises(ConfigError, match="sketch.sise"):
        apply_overrides(Config(), {"sketch.sise": 3})
    with pytest.raises(ConfigError, match="dedup.threshold"):
        apply_overrides(Config(), {"dedup.threshold": "high"})
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_assignment("sketch.size")
