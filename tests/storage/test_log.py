"""The dedup log: one flushed JSON line per decision, read back across runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from storage.log import FIELDS, DedupLog, list_runs, read_log
from storage.store import Store


def test_every_line_has_the_contract_keys_and_is_flushed_at_once(tmp_path):
    log = DedupLog(tmp_path, run_id="r1")
    log.write("http://a.test/", "kept", doc_id=0, cluster_id=0, tokens=10, shingles=7)
    # readable before close: flushed per line
    line = json.loads((tmp_path / "r1.jsonl").read_text(encoding="utf-8"))
    assert list(line)[: len(FIELDS)] == list(FIELDS)
    assert line["decision"] == "kept" and line["resemblance"] is None
    log.write(
        "http://a.test/copy",
        "near_duplicate",
        doc_id=1,
        cluster_id=0,
        duplicate_of="http://a.test/",
        resemblance=np.float64(0.93),
        containment=0.95,
        tokens=np.int64(11),
        matches=93,
    )
    log.close()
    entries = list(read_log(tmp_path))
    assert [e["url"] for e in entries] == ["http://a.test/", "http://a.test/copy"]
    assert entries[1]["resemblance"] == 0.93 and entries[1]["matches"] == 93
    assert entries[1]["run"] == "r1"


def test_runs_are_read_in_order_and_a_cut_last_line_is_skipped(tmp_path):
    with DedupLog(tmp_path, run_id="20250101T000000Z-1") as log:
        log.write("http://a.test/1", "kept")
    with DedupLog(tmp_path, run_id="20250102T000000Z-1") as log:
        log.write("http://a.test/2", "skipped", reason="not HTML")
    with open(tmp_path / "20250102T000000Z-1.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"url": "http://a.test/3", "deci')  # killed mid-line
    assert list_runs(tmp_path) == ["20250101T000000Z-1", "20250102T000000Z-1"]
    assert [(e["run"][:8], e["url"]) for e in read_log(tmp_path)] == [
        ("20250101", "http://a.test/1"),
        ("20250102", "http://a.test/2"),
    ]
    assert [e["reason"] for e in read_log(tmp_path, ["20250102T000000Z-1"])] == ["not HTML"]


def test_bad_input_is_named(tmp_path):
    with pytest.raises(ValueError, match="run id must be"):
        DedupLog(tmp_path, run_id="../escape")
    with DedupLog(tmp_path, run_id="r") as log:
        with pytest.raises(ValueError, match="'run' is reserved"):
            log.write("u", "kept", run="v")
    (tmp_path / "bad.jsonl").write_text("[1]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a JSON object"):
        list(read_log(tmp_path, ["bad"]))


def test_the_store_keeps_logs_in_its_logs_directory(tmp_path):
    with Store.open(tmp_path / "s") as store:
        with store.log() as log:
            log.write("http://a.test/", "kept", doc_id=0)
        assert log.path.parent == tmp_path / "s" / "logs"
        assert [e["url"] for e in store.read_log()] == ["http://a.test/"]


def test_a_batch_of_lines_is_written_as_one_write_and_reads_as_single_writes(tmp_path):
    entries = [
        {"url": "http://a.test/", "decision": "kept", "doc_id": 0, "time": 1.5},
        {"url": "http://a.test/c", "decision": "near_duplicate", "doc_id": 1,
         "duplicate_of": "http://a.test/", "resemblance": np.float64(0.95), "matches": 95,
         "time": 2.5},
    ]  # fmt: skip
    with DedupLog(tmp_path, run_id="many") as log:
        assert log.write_many(entries) == 2
        assert log.write_many([]) == 0
        # flushed at once: readable before the log is closed
        assert [e["url"] for e in read_log(tmp_path)] == ["http://a.test/", "http://a.test/c"]
    with DedupLog(tmp_path, run_id="one") as log:
        for entry in entries:
            fields = dict(entry)
            log.write(fields.pop("url"), fields.pop("decision"), **fields)
    many, one = (tmp_path / "many.jsonl").read_text(), (tmp_path / "one.jsonl").read_text()
    assert many == one  # the same lines, the contract's keys first, the extras after
    with DedupLog(tmp_path, run_id="r") as log:
        with pytest.raises(ValueError, match="'run' is reserved"):
            log.write_many([{"url": "u", "decision": "kept", "run": "v"}])
