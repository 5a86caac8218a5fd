"""``neardup recluster -o``: the clusters file appears whole once the run has finished, a run
that fails leaves what the file held, and no run writes over its own input or deletes files
that are not its own."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from crawler.cli import main

DOCS = [{"id": f"doc-{n}", "text": " ".join(f"w{n}x{i}" for i in range(40))} for n in range(6)]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    return path


def recluster(capsys, *argv: str) -> tuple[int, str]:
    local = [] if "spark" in argv else ["-j", "1"]
    code = main(["recluster", *argv, "-q", *local])
    return code, capsys.readouterr().err


def test_the_clusters_file_replaces_the_old_one_whole(tmp_path, corpus, capsys):
    out = tmp_path / "clusters.jsonl"
    out.write_text("an older run's clusters\n")
    out.chmod(0o640)
    code, err = recluster(capsys, "--jsonl", str(corpus), "-o", str(out))
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [d["id"] for d in DOCS]
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the file's own mode is kept
    assert sorted(os.listdir(tmp_path)) == ["clusters.jsonl", "docs.jsonl"]  # nothing left


def test_a_run_that_fails_leaves_the_file_as_it_was(tmp_path, corpus, capsys):
    out = tmp_path / "clusters.jsonl"
    out.write_text("an older run's clusters\n")
    code, err = recluster(capsys, "--jsonl", str(corpus), str(tmp_path / "missing.jsonl"),
                          "-o", str(out))  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "missing.jsonl" in err, err
    assert out.read_text() == "an older run's clusters\n"
    assert sorted(os.listdir(tmp_path)) == ["clusters.jsonl", "docs.jsonl"]


def test_an_input_is_never_the_output(tmp_path, corpus, capsys):
    before = corpus.read_bytes()
    code, err = recluster(capsys, "--jsonl", str(corpus), "-o", str(corpus))
    assert code == 2, err
    assert err == f"neardup recluster: error: -o {corpus} is one of the inputs ({corpus}): " \
                  "give another file\n"
    assert corpus.read_bytes() == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_full_disk_is_one_line(corpus, capsys):
    code, err = recluster(capsys, "--jsonl", str(corpus), "-o", "/dev/full")
    assert code == 1, err
    assert err == "neardup recluster: error: cannot write /dev/full: No space left on device\n"


def test_a_parquet_directory_of_other_files_is_refused_before_spark_starts(tmp_path, corpus,
                                                                          capsys):  # fmt: skip
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("not Spark's")
    code, err = recluster(capsys, "--engine", "spark", "--jsonl", str(corpus),
                          "--output-format", "parquet", "-o", str(target))  # fmt: skip
    assert code == 2, err
    assert "holds files of no Parquet dataset (notes.txt), which Spark would delete" in err
    assert (target / "notes.txt").read_text() == "not Spark's"
