"""neardup verify: a sound store passes, real damage is found and named, a crash tail is cut."""

from __future__ import annotations

import gzip
import io
import json
import struct
import subprocess
import sys

import lmdb
import pytest
from warcio.warcwriter import WARCWriter

from crawler.cli import COMMANDS, main
from crawler.cli import verify as verify_command
from storage.lmdb_env import pack_id
from storage.records import DocumentRecord
from storage.store import Store
from storage.verify import verify_store
from tests.storage.helpers import add_kept, sketch_for


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


# --- each check of the layout, on a store damaged where that check looks -----------------------
#
# The damage is written with the store's own transactions, as a bug in a writer would write it,
# and says what verify must find. make_store's store: documents 0-5 kept (clusters 0-5, one page
# each, three WARC files of two pages after a warcinfo record), document 6 an exact duplicate of
# document 0 (cluster 0, no page).

_HEAD = struct.Struct(">QQB")  # a clusters value: first doc, size, identical; then the sketch
_EXACT = struct.Struct(">QQ")  # a hashes value: doc id, cluster id


def _put(db, key, value, problem):
    def damage(store, path):
        store._txns.put(db, key, value)
        return problem

    return damage


def _delete(db, key, problem):
    def damage(store, path):
        store._txns.delete(db, key)
        return problem

    return damage


def _rewrite(store, doc_id, **changes):
    record = store.document(doc_id)
    fields = {name: getattr(record, name)
              for name in ("url", "decision", "time", "cluster_id", "content_hash", "page")}
    store._txns.put("docs", pack_id(doc_id), DocumentRecord(**{**fields, **changes}).to_bytes())
    return record


def _cluster_size(store, path):
    value = store._txns.get("clusters", pack_id(1))
    first, _, identical = _HEAD.unpack_from(value)
    store._txns.put("clusters", pack_id(1), _HEAD.pack(first, 3, identical) + value[_HEAD.size:])
    return "cluster 1: size 3 but 1 members"


def _fewer_than_needed(store, path):
    # with an index need of 0.8, a MIN_20 representative needs 7 of its 20 fingerprints indexed
    store.index.set_index_need(0.8)
    for fp in store.index.representative(3).distinct().tolist()[:16]:
        store._txns.delete("fp_clusters", pack_id(fp), pack_id(3))
    return ("cluster 3: 4 of its representative's 20 fingerprints are indexed, fewer than the 7 "
            "it needs")


def _cluster_of_nothing(store, path):
    _rewrite(store, 6, cluster_id=40)
    return "document 6: its cluster 40 is missing"


def _one_page_twice(store, path):
    page = store.document(0).page
    _rewrite(store, 6, page=page)
    return f"documents 0 and 6 share the page at {page.file}:{page.offset}"


def _record_elsewhere(store, path):
    page = _rewrite(store, 1, url="http://site.test/moved").page
    return (f"document 1: {page.file}:{page.offset} holds http://site.test/1 ({page.length} "
            f"bytes), the document says http://site.test/moved ({page.length} bytes)")


def _shorter_warc(store, path):
    warc = path / "pages" / "pages-00003.warc.gz"
    size = warc.stat().st_size
    warc.write_bytes(warc.read_bytes()[:-10])
    return f"pages-00003.warc.gz has {size - 10} bytes, but {size} were committed"


def _garbled_warc(store, path):
    warc = path / "pages" / "pages-00001.warc.gz"
    data = bytearray(warc.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 40] = b"\0" * 40
    warc.write_bytes(bytes(data))
    return "pages-00001.warc.gz: unreadable after byte "


DAMAGE = {
    "unreadable cluster": _put("clusters", pack_id(4), b"short",
                               "cluster 4: unreadable record (a cluster record of 5 bytes is "
                               "shorter than its header)"),
    "fewer than needed": _fewer_than_needed,
    "first document missing": _delete("docs", pack_id(5), "cluster 5: first document 5 is missing"),
    "member of a missing cluster": _put("members", pack_id(99), pack_id(6),
                                        "document 6 is a member of missing cluster 99"),
    "member not mapped back": _put("doc_clusters", pack_id(6), pack_id(1),
                                   "cluster 0: member 6 is not mapped back to it"),
    "size and members disagree": _cluster_size,
    "more mapped than members": _put("doc_clusters", pack_id(77), pack_id(1),
                                     "8 documents are mapped to clusters, but clusters have 7 "
                                     "members"),
    "hash of a missing document": _put("hashes", pack_id(0x77), _EXACT.pack(70, 0),
                                       "content hash 0x77: document 70 is missing"),
    "hash of a missing cluster": _put("hashes", pack_id(0x78), _EXACT.pack(6, 70),
                                      "content hash 0x78: cluster 70 is missing"),
    "next cluster id behind": _put("meta", b"next_cluster_id", pack_id(5),
                                   "next cluster id is not past cluster 5"),
    "unreadable document": _put("docs", pack_id(6), b"short",
                                "document 6: unreadable record (document record of 5 bytes is "
                                "shorter than its header)"),
    "document of a missing cluster": _cluster_of_nothing,
    "two documents, one page": _one_page_twice,
    "sketch of a missing document": _put("sketches", pack_id(90), sketch_for(1).to_bytes(),
                                         "sketch of missing document 90"),
    "next document id behind": _put("meta", b"next_doc_id", pack_id(6),
                                    "next document id is not past document 6"),
    "a WARC file shorter than committed": _shorter_warc,
    "a document's record elsewhere": _record_elsewhere,
    "a garbled WARC file": _garbled_warc,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_each_check_finds_its_damage(tmp_path, damage):
    path = make_store(tmp_path / "s", warc_max_bytes=700)
    assert verify_store(path).ok
    with Store.open(path) as store, store.batch():
        problem = DAMAGE[damage](store, path)
    report = verify_store(path, repair=False)
    assert not report.ok
    assert any(p.startswith(problem) for p in report.problems), report.problems


def test_a_committed_record_no_writer_writes_is_damage(tmp_path):
    path = make_store(tmp_path / "s", warc_max_bytes=700)
    warc = path / "pages" / "pages-00003.warc.gz"
    size = warc.stat().st_size
    request = io.BytesIO()
    writer = WARCWriter(request, gzip=True)
    get = b"GET /r HTTP/1.1\r\n\r\n"
    writer.write_record(writer.create_warc_record(
        "http://site.test/r", "request", payload=io.BytesIO(get), length=len(get)))
    record = request.getvalue()
    with open(warc, "ab") as fh:
        fh.write(record)
    # committed as a writer's bug would commit it (a batch's commit records its own position)
    env = lmdb.open(str(path / "index"), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(b"warc_committed", struct.pack(">IQ", 3, size + len(record)),
                db=env.open_db(b"meta", txn=txn))
    env.close()
    report = verify_store(path)
    assert report.problems == [f"pages-00003.warc.gz:{size}: unexpected request record"]


def test_a_file_past_the_last_commit_is_noted_not_damage(tmp_path):
    path = make_store(tmp_path / "s", warc_max_bytes=700)
    (path / "pages" / "pages-00009.warc.gz").write_bytes(gzip.compress(b"WARC/1.0\r\n"))
    report = verify_store(path, repair=False)
    assert report.ok, report.problems
    assert report.notes == [
        "pages-00009.warc.gz is past the last commit (left by an interrupted write; verify "
        "without --no-repair cuts it off)"
    ]
    assert report.warc_files == 4


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


@pytest.mark.parametrize(
    ("command", "left"),
    [
        (["verify"], "half"),
        (["report", "-o", "report.html"], "half"),
        (["recluster", "-o", "clusters.jsonl"], "half"),
        (["crawl", "http://127.0.0.1:9/"], "half"),
        (["verify"], "nothing"),
        (["crawl", "http://127.0.0.1:9/"], "nothing"),
    ],
    ids=lambda value: value if isinstance(value, str) else value[0],
)
def test_an_index_file_cut_short_is_one_line_and_nothing_is_touched(tmp_path, command, left):
    """A data file shorter than the pages its last commit uses (a copy that stopped half way):
    LMDB maps it, and the first read past its end killed the process with SIGBUS, silently. An
    empty one LMDB took for a new environment: verify and the crawl then cut the store's pages
    off as written after its (empty) last commit. Every command that opens the store says what
    is wrong instead, in one line, exit 2, and leaves the files as they were."""
    path = make_store(tmp_path / "s", documents=400)
    data = path / "index" / "data.mdb"
    whole = data.stat().st_size
    with open(data, "r+b") as fh:
        fh.truncate(whole // 2 if left == "half" else 0)
    before = {f: f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file() and
              f.name not in ("lock.mdb", "writer.lock")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", *command, "--store", str(path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"neardup {command[0]}: error: "), done.stderr
    assert f"{data} is cut short: " in done.stderr
    assert "Restore the index from a whole copy; nothing was changed" in done.stderr
    after = {f: f.read_bytes() for f in before}
    assert after == before


def test_an_index_file_of_other_bytes_is_one_line_and_nothing_is_touched(tmp_path, capsys):
    path = make_store(tmp_path / "s")
    data = path / "index" / "data.mdb"
    data.write_bytes(bytes(range(256)) * 64)  # 16 KiB that are not LMDB's
    pages = {f: f.read_bytes() for f in (path / "pages").iterdir()}
    code, out = run_verify(capsys, "--store", str(path))
    assert code == 2
    assert out.err.startswith(f"neardup verify: error: {data} is not an index LMDB can read ("), out
    assert out.err.count("\n") == 1, out.err
    assert {f: f.read_bytes() for f in (path / "pages").iterdir()} == pages


def test_help_teaches(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = capsys.readouterr().out
    assert "Exit status: 0 if the store is consistent" in out
    assert "--no-repair" in out and "--store DIR" in out


def test_a_store_on_a_read_only_file_system_is_checked_as_it_is(tmp_path, capsys):
    """A real read-only mount (tmpfs, remounted ro; skipped where this process may not mount):
    verify checks the store and says it repaired nothing, instead of failing to take the
    writer's lock."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
                      capture_output=True, check=False).returncode != 0:  # fmt: skip
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with Store.open(mount / "store") as store, store.batch():
            store.put_document(0, DocumentRecord("http://a.test/", "skipped", 1.0))
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        assert main(["verify", "--store", str(mount / "store")]) == 0
        out = capsys.readouterr().out
        assert "consistent" in out
        assert "note: the store cannot be written (Read-only file system): checked it as it " \
               "is, repaired nothing" in out
    finally:
        subprocess.run(["umount", str(mount)], check=False)
