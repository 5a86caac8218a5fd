"""The page store's WARC files are ordinary WARC files: warcio reads them, record by record."""

from __future__ import annotations

import gzip
import re
from http import HTTPStatus

import pytest
from warcio.archiveiterator import ArchiveIterator

from storage.errors import PageReadError
from storage.records import PageLocation
from storage.store import Store

PAGES = [
    (
        "http://a.test/",
        200,
        [("Content-Type", "text/html"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
        b"<html>caf\xc3\xa9</html>",
    ),
    ("http://a.test/gone", 404, [("Content-Type", "text/plain")], b"not here"),
    ("http://a.test/empty", 204, [], b""),
    ("http://a.test/bin", 200, [("Content-Type", "application/octet-stream")], bytes(range(256))),
]


def write_pages(path, **kwargs):
    locations = []
    with Store.open(path, **kwargs) as store, store.batch():
        for url, status, headers, body in PAGES:
            locations.append(store.pages.append(url, status, headers, body, time=1.7e9))
    return locations


def test_warcio_reads_status_headers_and_body_as_given(tmp_path):
    write_pages(tmp_path / "s")
    warc = tmp_path / "s" / "pages" / "pages-00001.warc.gz"
    with open(warc, "rb") as fh:
        records = list(
            (
                r.rec_type,
                r.rec_headers.get_header("WARC-Target-URI"),
                r.rec_headers.get_header("WARC-Date"),
                r.http_headers,
                r.content_stream().read(),
            )
            for r in ArchiveIterator(fh)
        )
    assert records[0][0] == "warcinfo"
    assert len(records) == 1 + len(PAGES)
    for (kind, url, date, http, body), (want_url, status, headers, want_body) in zip(
        records[1:], PAGES, strict=True
    ):
        assert (kind, url, body) == ("response", want_url, want_body)
        assert date == "2023-11-14T22:13:20Z"
        assert http.protocol == "HTTP/1.1"
        assert http.get_statuscode() == str(status)
        assert http.headers == headers
    assert records[2][3].statusline == "404 Not Found"


def test_each_location_is_a_whole_warc_file_on_its_own(tmp_path):
    locations = write_pages(tmp_path / "s")
    data = (tmp_path / "s" / "pages" / "pages-00001.warc.gz").read_bytes()
    for location, (url, _, _, body) in zip(locations, PAGES, strict=True):
        member = data[location.offset : location.offset + location.length]
        assert gzip.decompress(member).endswith(body + b"\r\n\r\n")
        with Store.open(tmp_path / "s", readonly=True) as store:
            assert store.read_page(location).url == url


def test_files_rotate_at_the_size_limit(tmp_path):
    locations = write_pages(tmp_path / "s", warc_max_bytes=600)
    files = sorted(p.name for p in (tmp_path / "s" / "pages").iterdir())
    assert len(files) == len({loc.file for loc in locations}) >= 2
    with Store.open(tmp_path / "s", readonly=True) as store:
        pages = [store.read_page(loc) for loc in locations]
        heads = [store.pages.read_head(loc) for loc in locations]
    assert [(p.url, p.status, p.headers, p.body) for p in pages] == PAGES
    # what a revisit of each needs, without its body
    assert [(p.url, p.status, p.headers, p.body) for p in heads] == [
        (url, status, headers, b"") for url, status, headers, _ in PAGES
    ]
    for name in files:  # every file starts with its warcinfo record
        with open(tmp_path / "s" / "pages" / name, "rb") as fh:
            assert next(iter(ArchiveIterator(fh))).rec_type == "warcinfo"


def test_a_bad_location_is_a_clear_error(tmp_path):
    (location, *_) = write_pages(tmp_path / "s")
    with Store.open(tmp_path / "s", readonly=True) as store:
        with pytest.raises(PageReadError, match="pages-00002.warc.gz is missing"):
            store.read_page(PageLocation("pages-00002.warc.gz", 0, 10))
        with pytest.raises(PageReadError, match="not a readable WARC record"):
            store.read_page(PageLocation(location.file, location.offset + 1, location.length))
        with pytest.raises(PageReadError, match="ends before the record"):
            store.read_page(PageLocation(location.file, location.offset, 10**7))
        with pytest.raises(PermissionError, match="read-only"):
            store.pages.append("http://a.test/", 200, [], b"")


def test_records_carry_digests_warcio_checks(tmp_path):
    write_pages(tmp_path / "s")
    warc = tmp_path / "s" / "pages" / "pages-00001.warc.gz"
    with open(warc, "rb") as fh:
        # check_digests="raise": a wrong payload or block digest is an exception
        records = ArchiveIterator(fh, check_digests="raise")
        checked = 0
        for record in records:
            if record.rec_type == "response":
                assert record.rec_headers.get_header("WARC-Payload-Digest").startswith("sha1:")
                assert record.rec_headers.get_header("WARC-Block-Digest").startswith("sha1:")
                records.read_to_end(record)
                assert record.digest_checker.passed is True, record.digest_checker.problems
                checked += 1
        assert checked == len(PAGES)


def test_records_are_the_bytes_warcio_writes(tmp_path):
    """Our record builder against warcio's own writer: the same record, byte for byte (but for
    the random record id)."""
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from storage.pages import response_record

    for url, status, headers, body in PAGES:
        ours = gzip.decompress(response_record(url, status, headers, body, time=1.7e9))
        out = BytesIO()
        writer = WARCWriter(out, gzip=False)
        http = StatusAndHeaders(f"{status} {HTTPStatus(status).phrase}", headers, "HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            url, "response", payload=BytesIO(body), length=len(body), http_headers=http,
            warc_headers_dict={"WARC-Date": "2023-11-14T22:13:20Z"}))  # fmt: skip
        theirs = out.getvalue()
        record_id = re.compile(rb"<urn:uuid:[0-9a-f-]{36}>")
        assert record_id.sub(b"<id>", ours) == record_id.sub(b"<id>", theirs)


def test_headers_that_are_not_ascii_are_percent_encoded(tmp_path):
    with Store.open(tmp_path / "s") as store, store.batch():
        plain = store.pages.append("http://a.test/", 200, [("X-Name", "café")], b"x")
        # a parameter: RFC 8187's form, as warcio writes it
        param = store.pages.append("http://a.test/p", 200, [("X-N", 'a; b="é"')], b"x")
        # warcio's own encoder fails on this one; each value is %-encoded whole instead
        quoted = store.pages.append("http://a.test/q", 200, [("X-N", 'café; b="é"')], b"x")
    with Store.open(tmp_path / "s", readonly=True) as store:
        assert store.read_page(plain).headers == [("X-Name", "caf%C3%A9")]
        assert store.read_page(param).headers == [("X-N", "a; b*=UTF-8''%C3%A9")]
        assert store.read_page(quoted).headers == [("X-N", 'caf%C3%A9; b="%C3%A9"')]
