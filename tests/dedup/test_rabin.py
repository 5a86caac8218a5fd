"""Rabin fingerprints against a bit-by-bit long division, and the vectorised paths against the
scalar one."""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dedup import gf2, rabin
from dedup.rabin import ALLOWED_BITS, RabinFingerprinter, occurrence_labels
from dedup.units import to_units, units_to_bytes

SEEDS = (0, 1, 7, 2024)
ROSE = ["a", "rose", "is", "a", "rose", "is", "a", "rose"]  # the paper's example


def slow_fingerprint(data: bytes, polynomial: int) -> int:
    """The definition as a shift register: feed the bits of ``data`` and then ℓ zero bits (the
    appended nulls), most significant first, subtracting P whenever the degree reaches ℓ."""
    ell = polynomial.bit_length() - 1
    bits = [(byte >> (7 - i)) & 1 for byte in data for i in range(8)] + [0] * ell
    r = 0
    for bit in bits:
        r = (r << 1) | bit
        if r >> ell:
            r ^= polynomial
    return r


def slow_field_product(a: int, b: int, polynomial: int) -> int:
    """a · b in GF(2)[x]/P: shift-and-add over the bits of b, reducing after every shift."""
    ell = polynomial.bit_length() - 1
    result = 0
    for i in range(ell - 1, -1, -1):
        result <<= 1
        if result >> ell:
            result ^= polynomial
        if (b >> i) & 1:
            result ^= a
    return result


@pytest.fixture(scope="module", params=[(bits, seed) for bits in (64, 40) for seed in SEEDS])
def rf(request: pytest.FixtureRequest) -> RabinFingerprinter:
    bits, seed = request.param
    return RabinFingerprinter.from_seed(seed, bits=bits)


unit_arrays = hnp.arrays(
    np.uint64,
    st.integers(min_value=0, max_value=40),
    # small values repeat (like common words), extremes test every byte position
    elements=st.one_of(
        st.integers(0, 3), st.sampled_from([2**64 - 1, 2**63, 1 << 56]), st.integers(0, 2**64 - 1)
    ),
)


# -- scalar -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=100))
def test_fingerprint_matches_long_division(rf: RabinFingerprinter, data: bytes) -> None:
    assert rf.fingerprint(data) == slow_fingerprint(data, rf.polynomial)


@pytest.mark.parametrize("bits", ALLOWED_BITS)
def test_every_allowed_width(bits: int) -> None:
    rf = RabinFingerprinter.from_seed(3, bits=bits)
    assert rf.bits == bits and gf2.degree(rf.polynomial) == bits
    rng = np.random.default_rng(bits)
    for size in (0, 1, 7, 8, 9, 33):
        data = rng.bytes(size)
        assert rf.fingerprint(data) == slow_fingerprint(data, rf.polynomial)
    units = rng.integers(0, 2**64, size=30, dtype=np.uint64)
    for w in (3, 7):  # straight from the unit tables, and through the residue shift tables
        expected = [rf.fingerprint(units_to_bytes(units[i : i + w])) for i in range(31 - w)]
        assert rf.shingle_fingerprints(units, w).tolist() == expected


def test_known_values() -> None:
    rf = RabinFingerprinter((1 << 64) | 0b11011)
    assert rf.fingerprint(b"") == 0
    assert rf.fingerprint(b"\x01") == 0b11011  # 1 · x^64 mod P
    assert rf.fingerprint(b"\x00\x01") == 0b11011  # leading zero bytes add nothing
    assert rf.fingerprint(b"\x02") == 0b110110


def test_fingerprints_are_below_two_to_the_ell() -> None:
    rf = RabinFingerprinter.from_seed(5, bits=40)
    units = np.random.default_rng(0).integers(0, 2**64, size=5000, dtype=np.uint64)
    assert int(rf.shingle_fingerprints(units, 4).max()) < 2**40
    assert rf.fingerprint(b"\xff" * 50) < 2**40


# -- the appended nulls ------------------------------------------------------------------------


def test_last_byte_difference_reaches_the_high_bits(rf: RabinFingerprinter) -> None:
    """With the nulls, strings differing only in the last byte differ all over the fingerprint.

    Without them (plain b(x) mod P) the difference c(x) - c'(x) has degree < 8 and so only the
    low eight bits change. Over 300 random pairs the XOR of the two fingerprints is a nonzero
    residue f(δ), roughly uniform, so its popcount averages ℓ/2 with standard deviation
    sqrt(ℓ)/2 per pair, i.e. at most 0.24 for the mean of 300; we allow ±1.5.
    """
    rng = np.random.default_rng(rf.polynomial % 2**32)
    popcounts = []
    for _ in range(300):
        prefix = rng.bytes(int(rng.integers(0, 20)))
        a, b = rng.choice(256, size=2, replace=False)
        s, t = prefix + bytes([a]), prefix + bytes([b])
        plain = gf2.mod(int.from_bytes(s, "big"), rf.polynomial) ^ gf2.mod(
            int.from_bytes(t, "big"), rf.polynomial
        )
        assert 0 < plain < 256  # the problem the trick solves
        diff = rf.fingerprint(s) ^ rf.fingerprint(t)
        assert diff >> 8 != 0
        popcounts.append(diff.bit_count())
    assert abs(np.mean(popcounts) - rf.bits / 2) < 1.5


# -- windows -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(unit_arrays, st.integers(min_value=1, max_value=9))
def test_shingles_match_scalar_fingerprints(
    rf: RabinFingerprinter, units: np.ndarray, w: int
) -> None:
    fps = rf.shingle_fingerprints(units, w)
    assert fps.dtype == np.uint64
    n = len(units)
    if n == 0:
        expected = []
    elif n < w:
        expected = [rf.fingerprint(units_to_bytes(units))]  # one id for the whole short document
    else:
        expected = [rf.fingerprint(units_to_bytes(units[i : i + w])) for i in range(n - w + 1)]
    assert fps.tolist() == expected
    with numpy_windows():  # the twin the C loop of dedup/_tokens.c replaces, where it is built
        assert rf.shingle_fingerprints(units, w).tolist() == expected


@contextlib.contextmanager
def numpy_windows() -> Iterator[None]:
    saved, rabin._c_tokens = rabin._c_tokens, None
    try:
        yield
    finally:
        rabin._c_tokens = saved


def test_the_c_window_loop_is_built_and_refuses_bad_buffers() -> None:
    if os.environ.get("CI"):
        assert rabin._c_tokens is not None
    if rabin._c_tokens is None:
        pytest.skip("dedup._tokens was not built")
    table = RabinFingerprinter.from_seed(1)._t.unit_windows().byte_entries
    units, out = np.arange(5, dtype=np.uint64), np.empty(5, dtype=np.uint64)
    with pytest.raises(ValueError, match="w <= maps"):
        rabin._c_tokens.windows(table, 4, units, 5, out)
    with pytest.raises(ValueError, match="smaller than"):
        rabin._c_tokens.windows(table[:100], 4, units, 2, out)
    with pytest.raises(ValueError, match="must hold"):
        rabin._c_tokens.windows(table, 4, units, 2, out[:3])
    with pytest.raises(ValueError, match="read-only"):
        rabin._c_tokens.windows(table, 4, units, 2, table)


@pytest.mark.parametrize("w", range(1, 10))
def test_shingles_against_long_division(w: int) -> None:
    rf = RabinFingerprinter.from_seed(w, bits=64 if w % 2 else 40)
    units = np.random.default_rng(w).integers(0, 2**64, size=25, dtype=np.uint64)
    expected = [
        slow_fingerprint(units_to_bytes(units[i : i + w]), rf.polynomial)
        for i in range(len(units) - w + 1)
    ]
    assert rf.shingle_fingerprints(units, w).tolist() == expected


@pytest.mark.parametrize(("bits", "w"), [(64, 4), (64, 7), (40, 4), (64, 1), (40, 16)])
def test_shingles_across_block_boundaries(bits: int, w: int) -> None:
    rf = RabinFingerprinter.from_seed(11, bits=bits)
    n = 2 * rabin._BLOCK + 123
    units = np.random.default_rng(w).integers(0, 2**64, size=n, dtype=np.uint64)
    fps = rf.shingle_fingerprints(units, w)
    assert len(fps) == n - w + 1
    check = list(range(300)) + list(range(rabin._BLOCK - 300, rabin._BLOCK + 300))
    check += list(range(len(fps) - 300, len(fps)))
    for i in check:
        assert int(fps[i]) == rf.fingerprint(units_to_bytes(units[i : i + w])), i


@pytest.mark.parametrize("block", [2, 5, 8, 13])
def test_tiny_blocks(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """Blocking is invisible: with blocks of a few words every seam and the short last block
    are exercised, including windows wider than a block."""
    monkeypatch.setattr(rabin, "_BLOCK", block)
    rf = RabinFingerprinter.from_seed(block, bits=40)
    units = np.random.default_rng(block).integers(0, 2**64, size=40, dtype=np.uint64)
    for w in (1, 2, 3, 4, 7, 20):
        expected = [rf.fingerprint(units_to_bytes(units[i : i + w])) for i in range(41 - w)]
        assert rf.shingle_fingerprints(units, w).tolist() == expected, w
    assert rf.unit_fingerprints(units).tolist() == [
        rf.fingerprint(units_to_bytes([u])) for u in units
    ]
    fps = np.array([5, 6, 5, 5, 7, 5, 6] * 3, dtype=np.uint64)
    labels = occurrence_labels(fps)
    ids = rf.labelled_ids(fps, labels)
    for f, lab, i in zip(fps.tolist(), labels.tolist(), ids.tolist(), strict=True):
        label_fp = slow_fingerprint(lab.to_bytes(8, "big"), rf.polynomial)
        assert i == slow_field_product(f, label_fp, rf.polynomial)


def test_sliding_window_property() -> None:
    """§4.3: each window follows from the previous one, f(b‖c) = f(a‖b)·x^64 − f(a)·x^(64w) + f(c)."""
    rf = RabinFingerprinter.from_seed(2)
    units = np.random.default_rng(2).integers(0, 2**64, size=50, dtype=np.uint64)
    w, p = 4, rf.polynomial
    fps = rf.shingle_fingerprints(units, w).tolist()
    single = rf.unit_fingerprints(units).tolist()
    for i in range(len(fps) - 1):
        rolled = gf2.mulmod(fps[i], gf2.powmod_x(64, p), p)
        rolled ^= gf2.mulmod(single[i], gf2.powmod_x(64 * w, p), p)
        rolled ^= single[i + w]
        assert rolled == fps[i + 1]


def test_shingle_inputs() -> None:
    rf = RabinFingerprinter.from_seed(1)
    units = np.arange(10, dtype=np.uint64) * 12345
    expected = rf.shingle_fingerprints(units[::2].copy(), 2).tolist()
    assert rf.shingle_fingerprints(units[::2], 2).tolist() == expected  # strided
    assert rf.shingle_fingerprints([int(u) for u in units[::2]], 2).tolist() == expected  # list
    assert (
        rf.shingle_fingerprints(units, np.int64(2)).tolist()
        == rf.shingle_fingerprints(units, 2).tolist()
    )
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            rf.shingle_fingerprints(units, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1-d"):
        rf.shingle_fingerprints(units.reshape(2, 5), 2)


def test_tokens_to_shingles_end_to_end() -> None:
    rf = RabinFingerprinter.from_seed(1)
    tokens = ROSE
    fps = rf.shingle_fingerprints(to_units(tokens), 4).tolist()
    assert len(fps) == 5
    assert fps[0] == fps[3] and fps[1] == fps[4]  # (a rose is a) and (rose is a rose) repeat
    assert len(set(fps)) == 3


def test_threads_share_tables_safely() -> None:
    rf = RabinFingerprinter.from_seed(9)
    rng = np.random.default_rng(9)
    inputs = [rng.integers(0, 2**64, size=int(n), dtype=np.uint64) for n in (10, 999, 5000, 9000)]
    expected = [rf.shingle_fingerprints(u, 5).tolist() for u in inputs]
    failures: list[int] = []

    def work(k: int) -> None:
        for _ in range(20):
            if rf.shingle_fingerprints(inputs[k], 5).tolist() != expected[k]:
                failures.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# -- Option A ----------------------------------------------------------------------------------


def test_occurrence_labels_paper_example() -> None:
    rf = RabinFingerprinter.from_seed(1)
    fps = rf.shingle_fingerprints(to_units(ROSE), 4)
    assert occurrence_labels(fps).tolist() == [1, 1, 1, 2, 2]  # errata 1


@given(st.lists(st.integers(0, 5), max_size=60))
def test_occurrence_labels_match_counting(values: list[int]) -> None:
    seen: Counter[int] = Counter()
    expected = []
    for v in values:
        seen[v] += 1
        expected.append(seen[v])
    labels = occurrence_labels(np.array(values, dtype=np.uint64))
    assert labels.tolist() == expected
    assert labels.dtype == np.uint64


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=30), st.lists(st.integers(0, 4), max_size=60))
def test_labelled_ids_match_slow_product(
    rf: RabinFingerprinter, pool: list[int], picks: list[int]
) -> None:
    # Few distinct shingles, repeated often, so labels run past the tabled ones (1..8).
    pool = [v % 2**rf.bits for v in pool] or [0]
    fps = np.array([pool[k % len(pool)] for k in picks], dtype=np.uint64)
    labels = occurrence_labels(fps)
    ids = rf.labelled_ids(fps, labels)
    expected = [
        slow_field_product(
            f, slow_fingerprint(lab.to_bytes(8, "big"), rf.polynomial), rf.polynomial
        )
        for f, lab in zip(fps.tolist(), labels.tolist(), strict=True)
    ]
    assert ids.tolist() == expected


def test_labelled_ids_with_many_labels(rf: RabinFingerprinter) -> None:
    # A page that repeats itself: labels up to 400, all through the bit-serial product.
    fps = np.tile(np.array([3, 2**rf.bits - 1, 12345], dtype=np.uint64), 400)
    labels = occurrence_labels(fps)
    assert int(labels.max()) == 400
    ids = rf.labelled_ids(fps, labels)
    for i in range(0, len(fps), 37):
        label_fp = rf.fingerprint(int(labels[i]).to_bytes(8, "big"))
        assert int(ids[i]) == slow_field_product(int(fps[i]), label_fp, rf.polynomial)
    assert len(set(ids.tolist())) == len(fps)  # distinct (shingle, label) pairs, distinct ids


def test_labels_break_the_linear_structure() -> None:
    """Fingerprinting "shingle ‖ label" would make id(s, 1) ^ id(s, 2) the same constant for every
    shingle s: the dependence §4.3 warns about. The field product does not."""
    rf = RabinFingerprinter.from_seed(4)
    rng = np.random.default_rng(4)
    shingles = [rng.bytes(32) for _ in range(50)]
    one, two = (1).to_bytes(8, "big"), (2).to_bytes(8, "big")
    concatenated = {rf.fingerprint(s + one) ^ rf.fingerprint(s + two) for s in shingles}
    assert len(concatenated) == 1  # linear: the same XOR for all shingles
    fps = np.array([rf.fingerprint(s) for s in shingles], dtype=np.uint64)
    first = rf.labelled_ids(fps, np.ones(50, dtype=np.uint64))
    second = rf.labelled_ids(fps, np.full(50, 2, dtype=np.uint64))
    assert len(set((first ^ second).tolist())) == 50


def test_labelled_ids_validation() -> None:
    rf = RabinFingerprinter.from_seed(1, bits=40)
    fps = np.array([1, 2], dtype=np.uint64)
    assert rf.labelled_ids(fps[:0], fps[:0]).shape == (0,)
    with pytest.raises(ValueError, match="equal length"):
        rf.labelled_ids(fps, np.array([1], dtype=np.uint64))
    with pytest.raises(ValueError, match="labels must lie"):
        rf.labelled_ids(fps, np.array([0, 1]))
    with pytest.raises(ValueError, match="integers"):
        rf.labelled_ids(fps, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="below 2\\^40"):
        rf.labelled_ids(np.array([2**40], dtype=np.uint64), np.array([1]))


# -- construction ------------------------------------------------------------------------------


def test_validation_names_the_problem() -> None:
    with pytest.raises(ValueError, match="degree 40 or 64.*got degree 63"):
        RabinFingerprinter((1 << 63) | 0b11)  # irreducible, but not a whole number of bytes
    with pytest.raises(ValueError, match="got degree 128"):
        RabinFingerprinter((1 << 128) | 0b10000111)
    with pytest.raises(ValueError, match="reducible"):
        RabinFingerprinter((1 << 64) | 1)
    with pytest.raises(TypeError, match="must be an int"):
        RabinFingerprinter("0x1b")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bits must be 40 or 64"):
        RabinFingerprinter.from_seed(1, bits=12)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        RabinFingerprinter.from_seed(-1)


def test_same_polynomial_shares_tables() -> None:
    a = RabinFingerprinter.from_seed(123)
    b = RabinFingerprinter.from_seed(123)
    c = RabinFingerprinter.from_seed(124)
    assert a._t is b._t and a == b and hash(a) == hash(b)
    assert a != c and a.polynomial != c.polynomial
    assert a.polynomial == gf2.random_irreducible(64, 123)
    clone = pickle.loads(pickle.dumps(a))
    assert clone == a and clone._t is a._t
    assert repr(a) == f"RabinFingerprinter({a.polynomial:#x})"


def test_results_do_not_share_scratch_memory() -> None:
    """The window path reuses per-thread scratch buffers; what it returns must be its own."""
    rf, other = RabinFingerprinter.from_seed(3), RabinFingerprinter.from_seed(4, bits=40)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**64, size=500, dtype=np.uint64)
    b = rng.integers(0, 2**64, size=5000, dtype=np.uint64)
    first = rf.shingle_fingerprints(a, 4)
    kept = first.copy()
    for w in (1, 3, 4, 6):
        rf.shingle_fingerprints(b, w)
        other.shingle_fingerprints(b, w)
    assert first.tolist() == kept.tolist()
    assert first.tolist() == [rf.fingerprint(units_to_bytes(a[i : i + 4])) for i in range(497)]


def test_wide_tables_match_the_byte_tables() -> None:
    """Each 16-bit table entry is the XOR of the two byte-table entries it stands for."""
    rf = RabinFingerprinter.from_seed(6, bits=40)
    wide = rf._t.unit_windows()
    table = wide.table.view(np.uint64).reshape(wide.chunks, 1 << 16, wide.maps)
    rng = np.random.default_rng(6)
    for j in range(wide.maps):
        narrow = rf._t.times_x_power(rf.bits + 64 * j, 64).table.reshape(8, 256)
        for k in range(wide.chunks):
            for value in rng.integers(0, 1 << 16, size=50):
                expected = narrow[2 * k, value & 0xFF] ^ narrow[2 * k + 1, value >> 8]
                assert table[k, value, j] == expected
    assert not wide.table.flags.writeable


def test_huge_page_memory_is_zeroed_and_aligned() -> None:
    memory = rabin._huge_pages(3 << 20)
    assert memory.dtype == np.uint8 and len(memory) == 3 << 20
    assert memory.ctypes.data % rabin._HUGE_PAGE == 0
    assert not memory.any()
    memory[-1] = 7  # writable
