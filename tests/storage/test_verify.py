"""neardup verify: a sound store passes, real damage is found and named, a crash tail is cut."""

from __future__ import annotations

import json

import pytest

from crawler.cli import COMMANDS, main
from crawler.cli import verify as verify_command
from storage.lmdb_env import pack_id
from storage.records import DocumentRecord
from storage.store import Store
from storage.verify import verify_store
from tests.storage.helpers import add_kept


def make_store(path, documents=6, **kwargs):
    with Store.open(path, **kwargs) as store:
        for _ in range(2):
            with store.batch():
                for _ in range(documents // 2):
                    add_kept(store)
        with store.batch():  # an exact duplicate: in a cluster, no page
            dup = store.next_doc_id()
            store.index.add_member(0, dup, identical=True)
            store.put_document(
                dup, DocumentRecord("http://site.test/dup", "exact_duplicate", 0.0, 0, 0)
            )
    return path


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The command as the CLI registers it (whether or not crawler.cli lists it yet)."""
    monkeypatch.setitem(COMMANDS, "verify", verify_command)


def run_verify(capsys, *argv):
    code = main(["verify", *argv])
    return code, capsys.readouterr()


def test_a_sound_store_passes(tmp_path, capsys):
    path = make_store(tmp_path / "s", warc_max_bytes=700)
    code, out = run_verify(capsys, "--store", str(path))
    assert code == 0, out.out
    assert f"store {path}: consistent" in out.out
    assert "repaired: nothing to repair" in out.out
    code, out = run_verify(capsys, "--store", str(path), "--json")
    report = json.loads(out.out)
    assert code == 0 and report["ok"] is True
    assert (report["documents"], report["pages"], report["clusters"]) == (7, 6, 6)
    assert report["warc_records"] == 6 and report["warc_files"] >= 2
    assert report["fingerprints"] == 6 * 20


def test_a_deleted_warc_file_is_damage(tmp_path, capsys):
    path = make_store(tmp_path / "s", warc_max_bytes=700)
    (path / "pages" / "pages-00001.warc.gz").unlink()
    code, out = run_verify(capsys, "--store", str(path))
    assert code == 1
    assert "DAMAGED" in out.out
    assert "pages-00001.warc.gz is missing" in out.out
    assert "document 0 (http://site.test/0): no WARC record at pages-00001.warc.gz" in out.out


def test_a_bogus_fingerprint_entry_is_damage(tmp_path):
    path = make_store(tmp_path / "s")
    with Store.open(path) as store, store.batch():
        store._txns.put("fp_clusters", pack_id(12345), pack_id(1))  # cluster 1 lacks it
        store._txns.put("fp_clusters", pack_id(54321), pack_id(99))  # no such cluster
    report = verify_store(path)
    assert not report.ok
    assert report.problems == [
        "fingerprint 0x3039 points at cluster 1, whose representative does not hold it",
        "fingerprint 0xd431 points at missing cluster 99",
    ]


def test_a_missing_index_entry_and_a_stray_page_are_damage(tmp_path):
    path = make_store(tmp_path / "s")
    with Store.open(path) as store, store.batch():
        fp = int(store.index.representative(2).values[0])
        store._txns.delete("fp_clusters", pack_id(fp), pack_id(2))
        store.pages.append("http://site.test/stray", 200, [], b"stored, never recorded")
        store._txns.delete("docs", pack_id(6))  # the exact duplicate, still a member
    problems = verify_store(path).problems
    assert f"cluster 2: representative fingerprint {fp:#x} is not indexed" in problems
    assert any("page http://site.test/stray is referenced by no document" in p for p in problems)
    assert "cluster 0: member document 6 is missing" in problems


def test_verify_cuts_off_an_uncommitted_tail_and_reports_it(tmp_path):
    path = make_store(tmp_path / "s")
    warc = path / "pages" / "pages-00001.warc.gz"
    size = warc.stat().st_size
    with open(warc, "ab") as fh:
        fh.write(b"\x1f\x8b\x08 a record cut by a crash")
    report = verify_store(path, repair=False)  # check only: left alone, and not damage
    assert report.ok and warc.stat().st_size == size + 27
    assert report.notes == [
        "pages-00001.warc.gz has 27 bytes past the last commit (left by an interrupted write; "
        "verify without --no-repair cuts it off)"
    ]
    report = verify_store(path)
    assert report.ok, report.problems
    assert report.repaired == [
        f"truncated pages-00001.warc.gz from {size + 27} to {size} bytes "
        "(a tail written after the last commit)"
    ]
    assert warc.stat().st_size == size


def test_verify_beside_a_writer_checks_without_repairing(tmp_path):
    path = make_store(tmp_path / "s")
    with Store.open(path) as writer, writer.batch():
        add_kept(writer)
        writer.pages.flush()  # durable but not committed: what a reader may see
        report = verify_store(path)
    assert report.ok, report.problems
    assert report.repaired == []
    assert any("another process is writing" in n for n in report.notes)
    assert report.documents == 7


def test_no_store_is_a_one_line_error(tmp_path, capsys):
    code, out = run_verify(capsys, "--store", str(tmp_path / "none"))
    assert code == 2
    assert out.err.strip() == (
        f"neardup verify: error: no store at {tmp_path / 'none'} "
        f"(no {tmp_path / 'none'}/index/data.mdb)"
    )
    assert not (tmp_path / "none").exists()


def test_help_teaches(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = capsys.readouterr().out
    assert "Exit status: 0 if the store is consistent" in out
    assert "--no-repair" in out and "--store DIR" in out
