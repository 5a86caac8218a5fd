"""``neardup recluster`` on broken input: a WARC file that breaks off, bad JSON lines, repeated ids.

The WARC files are written here with warcio from the demo site's real pages, then cut or
damaged; what must come out is worked out from the whole file (each record's offset and
length, as warcio reads them), not written down: the records before the break are clustered,
one line per file names the break (file, byte offset, records before it), the summary counts
the broken files, and no id has two lines in clusters.jsonl.
"""

from __future__ import annotations

import gzip as gzip_module
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.cli import main
from crawler.recluster.inputs import BrokenInput, InputError, read_jsonl, read_warc_stream
from crawler.recluster.run import ReclusterResult
from crawler.recluster.spark.tasks import Task, read_task, tasks
from dedup.params import SketchParams
from dedup.summary import ClusterSummary

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "crawler" / "demo" / "site"
PAGES = sorted(SITE.rglob("*.html"))


def write_warc(path: Path, host: str, gzip: bool = True) -> list[tuple[str, int, int]]:
    """The demo site's pages as response records of ``host``; returns each record's URL,
    offset and length in the file, as warcio reads them back."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=gzip)
        for page in PAGES:
            body = page.read_bytes()
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"),
                                               ("Content-Length", str(len(body)))],
                                    protocol="HTTP/1.1")  # fmt: skip
            url = f"http://{host}/{page.relative_to(SITE)}"
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http))
    records = []
    with open(path, "rb") as fh:
        reader = ArchiveIterator(fh)
        for record in reader:
            url = record.rec_headers.get_header("WARC-Target-URI")
            records.append((url, reader.get_record_offset(), reader.get_record_length()))
    assert len(records) == len(PAGES) > 20
    return records


def inside(records: list[tuple[str, int, int]], at: int) -> int:
    """The first record that ends after byte ``at`` (their number, if none does)."""
    return next((k for k, (_, offset, length) in enumerate(records) if at < offset + length),
                len(records))  # fmt: skip


def recluster(*argv: str, cwd: Path) -> tuple[dict, list[str]]:
    """The real command in a process of its own: its JSON summary, and its stderr lines."""
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", "recluster", *argv, "--json", "-q", "-j", "2"],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.splitlines()


def test_warc_files_that_break_off_are_named_and_their_records_before_the_break_used(tmp_path):
    made: dict[str, tuple[list[tuple[str, int, int]], int]] = {}  # name: records, the broken one

    def broken(name: str, gzip: bool, damage) -> None:
        records = write_warc(tmp_path / name, name.split(".")[0] + ".test", gzip)
        data = (tmp_path / name).read_bytes()
        data, record = damage(data, records)
        (tmp_path / name).write_bytes(data)
        made[name] = (records, record)

    def cut_at(at):
        return lambda data, records: (data[:at(data, records)], inside(records, at(data, records)))

    def middle(k):
        return lambda data, records: records[k][1] + records[k][2] // 2

    def sixty_percent(data, records):
        at = int(len(data) * 0.6)
        _, offset, length = records[inside(records, at)]
        # not in a gzip member's last bytes (its checksum): a cut there loses no record's data
        return min(at, offset + length - 16)

    def zeroed(k):
        def damage(data, records):
            _, offset, length = records[k]
            middle = offset + length // 2
            return data[:middle] + bytes(40) + data[middle + 40:], k
        return damage

    broken("early.warc.gz", True, cut_at(middle(2)))
    broken("sixty.warc.gz", True, cut_at(sixty_percent))
    broken("header.warc.gz", True, cut_at(lambda data, records: records[9][1] + 10))
    broken("last.warc.gz", True, cut_at(middle(len(PAGES) - 1)))
    broken("zeroed.warc.gz", True, zeroed(11))
    broken("plain.warc", False, cut_at(middle(14)))
    whole = write_warc(tmp_path / "whole.warc.gz", "whole.test")
    names = ["early.warc.gz", "whole.warc.gz", "sixty.warc.gz", "header.warc.gz",
             "last.warc.gz", "zeroed.warc.gz", "plain.warc"]

    report, stderr = recluster("--warc", *names, "-o", "clusters.jsonl", cwd=tmp_path)

    expected_lines, expected_ids = [], []
    for name in names:
        if name == "whole.warc.gz":
            expected_ids += [url for url, _, _ in whole]
            continue
        records, k = made[name]
        expected_ids += [url for url, _, _ in records[:k]]
        expected_lines.append((name, records[k][1], k))
    got = [BrokenInput(b["file"], b["offset"], b["records"], b["cause"]) for b in report["broken"]]
    assert [(b.path, b.offset, b.records) for b in got] == expected_lines
    assert report["broken_files"] == len(expected_lines) == 6
    # one line per broken file on stderr, and nothing else: no word from warcio on its own
    assert stderr == [b.line() for b in got]
    for line, (name, offset, k) in zip(stderr, expected_lines):
        assert line.startswith(f"{name}: broken at byte {offset}, after {k} records (")
        assert line.endswith("); the records before it were used")
    lines = [json.loads(line) for line in (tmp_path / "clusters.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == expected_ids
    assert report["summary"]["documents"] == len(expected_ids)
    assert report["skipped"] == {}


def test_a_corrupt_gzip_member_in_the_middle_is_named_in_one_line(tmp_path):
    records = write_warc(tmp_path / "c.warc.gz", "c.test")
    data = bytearray((tmp_path / "c.warc.gz").read_bytes())
    _, offset, length = records[5]
    for at in range(offset + 40, offset + length - 20, 7):  # the member's deflate data
        data[at] ^= 0x5A
    (tmp_path / "c.warc.gz").write_bytes(bytes(data))
    report, stderr = recluster("--warc", "c.warc.gz", "-o", "out.jsonl", cwd=tmp_path)
    assert report["broken"] == [{"file": "c.warc.gz", "offset": offset, "records": 5,
                                 "cause": "unreadable record: Invalid WARC record"}]  # fmt: skip
    assert stderr == [f"c.warc.gz: broken at byte {offset}, after 5 records (unreadable "
                      "record: Invalid WARC record); the records before it were used"]
    ids = [json.loads(line)["id"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert ids == [url for url, _, _ in records[:5]]


def test_a_file_that_is_no_warc_at_all_is_still_a_one_line_error(tmp_path, capsys):
    (tmp_path / "notes.warc.gz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(40))
    (tmp_path / "notes.warc").write_text("these are notes, not a WARC file\n")
    for name in ("notes.warc.gz", "notes.warc"):
        code = main(["recluster", "--warc", str(tmp_path / name), "-o", str(tmp_path / "o"),
                     "-q", "-j", "1"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert f"{tmp_path / name} is not a WARC file" in err


def test_repeated_ids_keep_their_first_document_and_are_named_once(tmp_path, capsys, caplog):
    # JSON Lines: "a" twice (the second a copy of "b": clustered, it would join b's cluster),
    # then each bad kind of line once; a WARC holding one URL twice; a directory named twice
    lines = [
        {"id": "a", "text": "the first document called a, about walking boots and blisters"},
        {"id": "b", "text": "the only document called b, about maps and compasses here"},
        {"id": "a", "text": "the only document called b, about maps and compasses here"},
        "this line is not JSON",
        [1, 2, 3],
        {"id": "c", "body": "no text field"},
        {"text": "a line without an id takes its file and line number as its id"},
        {"id": 7, "text": "an id that is a number is its decimal string in clusters.jsonl"},
        {"id": "7", "text": "so this line repeats the id of the line before it, as a string"},
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n"
                              for x in lines))  # fmt: skip
    twice = tmp_path / "twice.warc.gz"
    with open(twice, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for page in (PAGES[0], PAGES[1], PAGES[0]):
            body = page.read_bytes()
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                f"http://twice.test/{page.name}", "response", payload=io.BytesIO(body),
                length=len(body), http_headers=http))
    pages = tmp_path / "pages"
    pages.mkdir()
    for page in PAGES[:3]:
        (pages / page.name).write_bytes(page.read_bytes())

    out = tmp_path / "clusters.jsonl"
    with caplog.at_level(logging.WARNING, logger="crawler.recluster.run"):
        code = main(["recluster", "--warc", str(twice), "--jsonl", str(corpus), "--html",
                     str(pages), str(pages), "-o", str(out), "--json", "-q", "-j", "2"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    # repeated: the WARC's third record, the second "a", the string "7", the second directory
    assert report["skipped"] == {"repeated_id": 1 + 1 + 1 + 3, "not_json": 1,
                                 "not_an_object": 1, "no_text_field": 1}  # fmt: skip
    written = [json.loads(line) for line in out.read_text().splitlines()]
    ids = [line["id"] for line in written]
    assert len(ids) == len(set(ids)) == report["summary"]["documents"]
    assert ids == [f"http://twice.test/{PAGES[0].name}", f"http://twice.test/{PAGES[1].name}",
                   "a", "b", f"{corpus}:7", "7", *sorted(str(pages / p.name) for p in PAGES[:3])]
    by_id = {line["id"]: line for line in written}
    assert by_id["a"]["decision"] == by_id["b"]["decision"] == "kept"  # the later "a" is gone
    first_two = [str(p) for p in sorted(pages.iterdir())[:2]]
    assert report["repeated_ids"] == [f"http://twice.test/{PAGES[0].name}", "a", "7", *first_two]
    said = [r.getMessage() for r in caplog.records if r.name == "crawler.recluster.run"]
    assert said == [
        f'6 documents skipped as repeated_id: an earlier document had the id '
        f'("http://twice.test/{PAGES[0].name}", "a", "7", "{first_two[0]}", "{first_two[1]}", '
        '...)'
    ]
    assert report["broken_files"] == 0


@pytest.mark.parametrize("repeats", [1, 7])
def test_the_repeated_ids_line_names_the_first_five(tmp_path, capsys, caplog, repeats):
    corpus = tmp_path / "c.jsonl"
    docs = [{"id": f"d{n}", "text": f"document {n} has words of its own, {n} and more"}
            for n in range(repeats)]  # fmt: skip
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs + docs))
    with caplog.at_level(logging.WARNING, logger="crawler.recluster.run"):
        assert main(["recluster", "--jsonl", str(corpus), "-o", str(tmp_path / "o.jsonl"),
                     "--json", "-q", "-j", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["skipped"] == {"repeated_id": repeats}
    assert report["repeated_ids"] == [f"d{n}" for n in range(min(repeats, 5))]
    (line,) = [r.getMessage() for r in caplog.records]
    named = ", ".join(f'"d{n}"' for n in range(min(repeats, 5)))
    noun = "document" if repeats == 1 else "documents"
    more = ", ..." if repeats > 5 else ""
    assert line == (f"{repeats} {noun} skipped as repeated_id: an earlier document had the id "
                    f"({named}{more})")


class Archives(dict):
    """gzip (True/False) → the demo site's WARC file: its bytes, each record's URL, offset and
    length; shown by name, not by its bytes, in a failing example."""

    def __repr__(self) -> str:
        return "<the demo site as a WARC.gz and a WARC>"


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    folder = tmp_path_factory.mktemp("archives")
    made = Archives()
    for gzip in (True, False):
        path = folder / ("site.warc.gz" if gzip else "site.warc")
        records = write_warc(path, "site.test", gzip)
        made[gzip] = (path.read_bytes(), records)
    return made


@settings(max_examples=200, deadline=None)
@given(gzip=st.booleans(), fraction=st.floats(0.0, 1.0, exclude_max=True))
def test_a_cut_anywhere_keeps_the_records_before_it_and_names_where(archives, gzip, fraction):
    data, records = archives[gzip]
    cut = 1 + int((len(data) - 1) * fraction)
    read = list(read_warc_stream(io.BytesIO(data[:cut]), "site"))
    breaks = [(b.offset, b.records) for b in map(BrokenInput.from_reason,
                                                   (d.skip_reason for d in read)) if b]
    documents = [d.id for d in read if not BrokenInput.from_reason(d.skip_reason)]
    urls = [url for url, _, _ in records]
    k = inside(records, cut)
    if k == len(records) or cut <= records[k][1]:
        # between two records, or after the last: a file of k whole records, not a broken one
        assert not breaks and documents == urls[:k]
        return
    _, offset, length = records[k]
    if not breaks:
        # only a cut in a gzip member's last bytes (the end of its deflate stream, its
        # checksum and size) leaves the record's data whole: it is read, and the file ends
        assert gzip and cut > offset + length - 16
        assert documents == urls[: k + 1]
    else:
        assert breaks == [(offset, k)]
        assert documents == urls[:k]
        assert read[-1].skip_reason.startswith("broken_input ")


def test_a_warc_gzipped_as_a_whole_is_named_in_one_line_by_either_engine(tmp_path, capsys):
    """``gzip file.warc`` makes one gzip member of every record, which warcio reads no further
    than the first record: the file is refused before any work, with the way to mend it."""
    plain = tmp_path / "site.warc"
    write_warc(plain, "whole.test", gzip=False)
    whole = tmp_path / "site.warc.gz"
    whole.write_bytes(gzip_module.compress(plain.read_bytes()))
    code = main(["recluster", "--warc", str(whole), "-o", str(tmp_path / "o"), "-q", "-j", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    said = (f"{whole} is gzipped as a whole, not record by record as WARC files are: "
            f"'warcio recompress {whole} NEW.warc.gz' writes one that can be read")  # fmt: skip
    assert err == f"neardup recluster: error: {said}\n"
    with pytest.raises(InputError) as spark_said:  # the Spark engine's driver, before a job
        tasks(warc=[str(whole)])
    assert str(spark_said.value) == said
    per_record = tmp_path / "records.warc.gz"
    write_warc(per_record, "whole.test", gzip=True)
    assert tasks(warc=[str(per_record)])  # a WARC file gzipped record by record is taken


def test_json_lines_that_python_cannot_nest_or_that_hold_a_bare_cr_or_a_bom(tmp_path):
    """A line nested deeper than Python's stack is skipped as too_deep (the file goes on); a
    bare carriage return is JSON whitespace, not a line break; a byte-order mark is not part of
    the first line. The file read where it is and the bytes Spark reads give the same."""
    lines = [
        b'\xef\xbb\xbf{"id": "first", "text": "the first line after a byte-order mark"}',
        b'{"id": "cr", "text":\r"a carriage return between a key and its value"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"text": "the fourth line, named by its place"}',
    ]
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    local = [(d.id, d.skip_reason) for d in read_jsonl([path])]
    assert local == [("first", None), ("cr", None), (f"{path}:3", "too_deep"),
                     (f"{path}:4", None)]  # fmt: skip
    task = Task(0, "jsonl", str(path))
    assert [(d.id, d.skip_reason) for d in read_task(task)] == local
    assert [(d.id, d.skip_reason) for d in read_task(task, path.read_bytes())] == local


def test_a_store_whose_warc_file_is_cut_keeps_the_pages_before_the_cut(tmp_path, capsys):
    """A store's WARC file cut in half (a damaged disk): the pages before the cut are
    clustered, each page after it is skipped as unreadable with the file named, and the run
    goes on, as on Spark (both read a store's pages with one function)."""
    from tests.crawler.test_recluster import crawl_into_store, store_pages

    store = tmp_path / "store"
    kept = crawl_into_store(store, store_pages(seed=5, groups=20, kinds=("base", "far")),
                            SketchParams(), 0.9)  # fmt: skip
    (warc,) = (store / "pages").glob("*.warc.gz")
    warc.write_bytes(warc.read_bytes()[: warc.stat().st_size // 2])
    code = main(["recluster", "--store", str(store), "-o", str(tmp_path / "c.jsonl"), "--json",
                 "-q", "-j", "1"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    reason = f"unreadable (PageReadError in {warc})"
    assert set(summary["skipped"]) == {reason}, summary["skipped"]
    unread = summary["skipped"][reason]
    assert 0 < unread < len(kept) and summary["summary"]["documents"] == len(kept) - unread


def test_gzipped_json_lines_read_as_the_plain_file_and_a_cut_one_keeps_its_lines(tmp_path):
    """corpus.jsonl.gz is read as corpus.jsonl is (ids name the file as given), where it is
    and from the bytes Spark reads; gzip data that breaks off keeps the lines before the
    break, and a marker names the file and the line after which it broke, on either engine."""
    docs = [{"id": f"d{n}", "text": f"document {n} " + "word " * n} for n in range(200)]
    plain = tmp_path / "corpus.jsonl"
    plain.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    packed = tmp_path / "corpus.jsonl.gz"
    packed.write_bytes(gzip_module.compress(plain.read_bytes()))
    read = [(d.id, d.content) for d in read_jsonl([plain])]
    assert [(d.id, d.content) for d in read_jsonl([packed])] == read
    task = Task(0, "jsonl", str(packed))
    assert [(d.id, d.content) for d in read_task(task, packed.read_bytes())] == read
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    local = list(read_jsonl([cut]))
    *used, marker = local
    broken = BrokenInput.from_reason(marker.skip_reason)
    assert broken is not None and broken.path == str(cut) and broken.offset is None
    # every line before the break, whole, and the count names the last of them
    assert 0 < len(used) == broken.records < len(docs)
    assert [(d.id, d.content) for d in used] == read[: len(used)]
    assert broken.line().startswith(f"{cut}: broken after line {len(used)} (the gzip data "
                                    "breaks off")  # fmt: skip
    on_spark = list(read_task(Task(0, "jsonl", str(cut)), cut.read_bytes()))
    assert [(d.id, d.content, d.skip_reason) for d in on_spark] == [
        (d.id, d.content, d.skip_reason) for d in local]


def test_skipped_json_lines_are_located_and_ids_that_are_not_strings_keep_their_json(
    tmp_path, capsys
):
    """The summary names the first document skipped for each reason (FILE:LINE for a JSON
    line, whatever id it has); an id that is a number or a list is its JSON text."""
    path = tmp_path / "corpus.jsonl"
    words = [f"w{n}" for n in range(400)]
    lines = [json.dumps({"id": n, "text": " ".join(words[n : n + 60])}) for n in range(6)]
    lines += [json.dumps({"id": ["a", 1], "text": " ".join(words[200:260])}),
              "{broken", json.dumps({"id": "x", "body": "no text field"}), "[1]",
              "also not json"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "clusters.jsonl"
    assert main(["recluster", "--jsonl", str(path), "-o", str(out), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped"] == {"not_json": 2, "no_text_field": 1, "not_an_object": 1}
    assert summary["first_skipped"] == {"not_json": f"{path}:8", "no_text_field": f"{path}:9",
                                        "not_an_object": f"{path}:10"}  # fmt: skip
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == ["0", "1", "2", "3", "4", "5", '["a", 1]']
    assert main(["recluster", "--jsonl", str(path), "-o", str(out), "-q"]) == 0
    said = capsys.readouterr().out
    assert f"2 not_json (first: {path}:8)" in said
    assert f"1 no_text_field (first: {path}:9)" in said


def test_skip_reasons_are_told_most_first_then_by_name_whatever_order_they_were_counted():
    """The local engine counts skips in input order, Spark in the order its tasks end: the
    summary and --json list them the same way for both."""
    counts = [("not_html (text/css)", 4), ("http_301", 1), ("not_html (text/javascript)", 1),
              ("http_404", 156)]
    told = []
    for order in (counts, counts[::-1]):
        result = ReclusterResult(ClusterSummary())
        for reason, n in order:
            result.count_skipped(reason, n, first=f"first {reason}")
        told.append((result.skipped_by_count(), list(result.to_dict()["skipped"])))
    assert told[0] == told[1]
    assert told[0][1] == ["http_404", "not_html (text/css)", "http_301",
                          "not_html (text/javascript)"]


def test_a_run_that_clusters_nothing_fails_in_one_line_and_keeps_the_old_clusters(
    tmp_path, capsys
):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": n, "body": f"text {n}"}) + "\n"
                            for n in range(3)), encoding="utf-8")  # fmt: skip
    out = tmp_path / "clusters.jsonl"
    out.write_text("the clusters of an earlier run\n")
    # the text is under "body", and the run was told --text-field txt
    code = main(["recluster", "--jsonl", str(path), "--text-field", "txt", "-o", str(out), "-q"])
    said = capsys.readouterr()
    assert code == 1 and not said.out
    assert said.err.strip().splitlines() == [
        f"neardup recluster: error: nothing was clustered: every document was skipped: "
        f"3 no_txt_field (first: {path}:1); --text-field names the field that holds the text"]
    assert out.read_text() == "the clusters of an earlier run\n"
