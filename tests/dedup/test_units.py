"""Fixed-width units (§4.3): both cutters (C, and numpy where C is not built) against a plain
per-token reference."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup import units as units_module
from dedup.units import UNIT_BYTES, JoinedTokens, to_units, units_to_bytes

#: the public cutter (C where built) and the numpy one it falls back to
CUTTERS = pytest.mark.parametrize("cut", [to_units, units_module._to_units_numpy],
                                  ids=["to_units", "numpy"])  # fmt: skip


def slow_units(tokens: list[str]) -> list[int]:
    """The definition, one token and one chunk at a time."""
    out = []
    for token in tokens:
        data = token.encode("utf-8")
        for i in range(0, len(data), UNIT_BYTES):
            out.append(int.from_bytes(data[i : i + UNIT_BYTES].ljust(UNIT_BYTES, b"\0"), "big"))
    return out


def padded(tokens: list[str]) -> bytes:
    parts = []
    for token in tokens:
        data = token.encode("utf-8")
        size = -(-len(data) // UNIT_BYTES) * UNIT_BYTES
        parts.append(data.ljust(size, b"\0"))
    return b"".join(parts)


# Any non-empty text without NUL (surrogates cannot be encoded, so they are excluded too).
tokens_strategy = st.lists(
    st.text(
        alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
        min_size=1,
        max_size=30,
    ),
    max_size=40,
)


@CUTTERS
@settings(max_examples=300)
@given(tokens_strategy)
def test_matches_reference(cut, tokens: list[str]) -> None:
    units = cut(tokens)
    assert units.dtype == np.uint64
    assert units.tolist() == slow_units(tokens)
    assert units_to_bytes(units) == padded(tokens)


@CUTTERS
@settings(max_examples=200)
@given(tokens_strategy)
def test_joined_tokens_give_the_same_units(cut, tokens: list[str]) -> None:
    joined = JoinedTokens.of(tokens)
    assert len(joined) == len(tokens)
    assert joined.tokens() == tokens
    assert cut(joined).tolist() == slow_units(tokens)


@CUTTERS
def test_joined_tokens_that_miscount_or_hold_an_empty_token_are_refused(cut) -> None:
    with pytest.raises(ValueError, match="token 1 is empty"):
        cut(JoinedTokens(b"ab\x00", 2))
    with pytest.raises(ValueError, match="token 0 is empty"):
        cut(JoinedTokens(b"\x00ab", 2))
    with pytest.raises(ValueError, match="are 2, not the 3 counted"):
        cut(JoinedTokens(b"ab\x00cd", 3))


@CUTTERS
@given(st.lists(st.sampled_from(["é", "日本", "😀", "a", "ab", "abcdefg", "€uro"]), max_size=50))
def test_multibyte_characters_split_across_units(cut, tokens: list[str]) -> None:
    assert cut(tokens).tolist() == slow_units(tokens)


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("a", [b"a\0\0\0\0\0\0\0"]),
        ("rosebuds", [b"rosebuds"]),  # exactly 8 bytes: one unit, no padding
        ("rosebuds!", [b"rosebuds", b"!\0\0\0\0\0\0\0"]),  # 9 bytes: two units
        ("abcdefgé", [b"abcdefg\xc3", b"\xa9\0\0\0\0\0\0\0"]),  # é cut after its first byte
        ("abcdef😀", [b"abcdef\xf0\x9f", b"\x98\x80\0\0\0\0\0\0"]),  # emoji cut in half
        ("日本語", [b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa", b"\x9e\0\0\0\0\0\0\0"]),
        ("x" * 16, [b"x" * 8, b"x" * 8]),
    ],
)
def test_cutting_and_padding(token: str, expected: list[bytes]) -> None:
    units = to_units([token, "z"])
    assert [int(u).to_bytes(8, "big") for u in units] == [*expected, b"z\0\0\0\0\0\0\0"]


def test_big_endian_reading() -> None:
    assert int(to_units(["\x01"])[0]) == 1 << 56
    assert int(to_units(["\x01\x02\x03\x04\x05\x06\x07\x08"])[0]) == 0x0102030405060708


def test_distinct_tokens_give_distinct_unit_strings() -> None:
    # Padding with NUL is safe only because tokens never contain NUL: "a" and "a\0" would collide.
    tokens = ["a", "aa", "aaaaaaaa", "aaaaaaaaa", "b"]
    seen = {units_to_bytes(to_units([t])) for t in tokens}
    assert len(seen) == len(tokens)


def test_empty_stream() -> None:
    units = to_units([])
    assert units.dtype == np.uint64 and units.shape == (0,)
    assert units_to_bytes(units) == b""


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ([""], "token 0 is empty"),
        (["a", "", "b"], "token 1 is empty"),
        (["a", "b", ""], "token 2 is empty"),
        (["a", "b\x00c"], "token 1 contains a NUL"),
        (["\x00"], "token 0 contains a NUL"),
        (["", "\x00"], "token 0 is empty"),
    ],
)
@CUTTERS
def test_rejects_bad_tokens(cut, tokens: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cut(tokens)


def test_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError, match="not a single str"):
        to_units("rose")


def test_accepts_any_sequence() -> None:
    assert to_units(("a", "rose")).tolist() == to_units(["a", "rose"]).tolist()


@CUTTERS
def test_long_stream_with_mixed_lengths(cut) -> None:
    rng = np.random.default_rng(5)
    alphabet = list("abcdefghijklmnopqrstuvwxyzé日😀")
    tokens = ["".join(rng.choice(alphabet, size=int(k))) for k in rng.integers(1, 25, size=5000)]
    assert cut(tokens).tolist() == slow_units(tokens)
    units = cut(tokens)
    units[0] = 0  # a fresh array the caller may write to
    assert units.flags.writeable


def test_units_to_bytes_accepts_lists_and_strided_arrays() -> None:
    units = np.array([1, 2, 3, 4], dtype=np.uint64)
    assert units_to_bytes(units[::2]) == (1).to_bytes(8, "big") + (3).to_bytes(8, "big")
    assert units_to_bytes([2**64 - 1]) == b"\xff" * 8


def test_streams_longer_than_the_shared_offsets() -> None:
    # more units than the precomputed offsets hold (4,096), so they grow, and shorter streams
    # afterwards still read the right prefix
    long_tokens = ["abcdefghijk"] * 3000  # two units each
    assert to_units(long_tokens).tolist() == slow_units(long_tokens)
    short = ["x" * 9, "y"]
    assert to_units(short).tolist() == slow_units(short)


@CUTTERS
@pytest.mark.parametrize("size", [1, 7, 8, 9, 15, 16, 17, 64, 65])
def test_padding_is_cleared_whatever_follows(cut, size: int) -> None:
    # the bytes after a token in the joined text belong to the next token: none may leak
    for neighbour in ("\x7f" * 9, "\xff" * 9, "é" * 9, "\U0001f600" * 3):
        tokens = ["a" * size, neighbour, "b" * size]
        assert cut(tokens).tolist() == slow_units(tokens), neighbour


def test_the_c_cutter_is_built() -> None:
    # CI installs with a compiler: a failed build must not pass unnoticed as the numpy cutter
    if os.environ.get("CI"):
        assert units_module._c_tokens is not None
