"""Byte forms and the manifest: what goes to disk comes back the same."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dedup.params import SketchParams
from storage.errors import StoreMismatchError
from storage.history import Capture, UrlState
from storage.manifest import Manifest
from storage.records import DECISIONS, DocumentRecord, PageLocation, warc_name, warc_number

u64 = st.integers(0, 2**64 - 1)
locations = st.builds(
    PageLocation,
    file=st.integers(1, 99_999).map(warc_name),
    offset=st.integers(0, 2**63),
    length=st.integers(1, 2**40),
)
records = st.builds(
    DocumentRecord,
    url=st.text(max_size=300),
    decision=st.sampled_from(DECISIONS),
    time=st.floats(allow_nan=False, allow_infinity=False),
    cluster_id=st.none() | u64,
    content_hash=st.none() | u64,
    page=st.none() | locations,
)


@given(records)
def test_document_record_round_trip(record):
    assert DocumentRecord.from_bytes(record.to_bytes()) == record


def test_document_record_rejects_unknown_decisions_and_bad_locations():
    with pytest.raises(ValueError, match="decision must be one of kept"):
        DocumentRecord("u", "dropped", 0.0)
    with pytest.raises(ValueError, match="pages-00001.warc.gz"):
        PageLocation("other.warc.gz", 0, 10)
    with pytest.raises(ValueError, match="length > 0"):
        PageLocation("pages-00001.warc.gz", 0, 0)
    with pytest.raises(ValueError, match="version"):
        DocumentRecord.from_bytes(b"\x09" + DocumentRecord("u", "kept", 0.0).to_bytes()[1:])


def test_warc_names_round_trip_and_sort_by_number():
    names = [warc_name(n) for n in (1, 2, 10, 99_999)]
    assert [warc_number(n) for n in names] == [1, 2, 10, 99_999]
    assert sorted(names) == names
    assert warc_number("pages-1.warc.gz") is None


def test_manifest_round_trip_and_mismatch_names_key_and_both_values():
    made = Manifest.for_params(SketchParams(shingle_size=4))
    assert Manifest.from_json(made.to_json()) == made
    assert made.rabin_polynomial.startswith("0x")
    asked = Manifest.for_params(SketchParams(shingle_size=5))
    with pytest.raises(StoreMismatchError) as err:
        made.check(asked, "neardup-store")
    assert str(err.value) == (
        "store neardup-store was made with sketch.shingle_size=4; this run asks for 5 "
        "(use another --store, or the same parameters)"
    )
    assert isinstance(err.value, ValueError)
    made.check(Manifest.for_params(SketchParams(shingle_size=4)), "neardup-store")


def test_a_different_seed_is_a_different_polynomial():
    one = Manifest.for_params(SketchParams(seed=1))
    two = Manifest.for_params(SketchParams(seed=2))
    assert one.rabin_polynomial != two.rabin_polynomial
    with pytest.raises(StoreMismatchError, match="sketch.seed=1; this run asks for 2"):
        one.check(two, "s")


texts = st.none() | st.text(max_size=40)
captures = st.none() | st.builds(Capture, st.integers(1, 2**32 - 1), st.integers(0, 2**63),
                                 st.integers(1, 2**63), st.text(max_size=30), st.text(max_size=60))  # fmt: skip
url_states = st.builds(
    UrlState, st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 999),
    st.floats(0, 2e9), texts, texts, texts, captures, st.booleans(),
    st.none() | st.tuples(st.integers(0, 2**64 - 1), st.integers(1, 0xFFFF)),
    st.none() | st.integers(0, 2**32 - 1),
)  # fmt: skip


@given(url_states)
def test_url_state_round_trip(state):
    assert UrlState.from_bytes(state.to_bytes()) == state


@given(url_states)
def test_a_url_state_written_before_depths_were_kept_reads_with_none(state):
    """A store's states from before the link depth was kept end after their texts: they read
    back whole, with no depth; a state with one begins with the same bytes, which is all a
    reader from then reads."""
    depthless = replace(state, depth=None)
    with_depth = replace(state, depth=3).to_bytes()
    assert with_depth.startswith(depthless.to_bytes())
    assert len(with_depth) == len(depthless.to_bytes()) + 4
    assert UrlState.from_bytes(depthless.to_bytes()) == depthless
