"""Shingling (§2, errata 1–2) and the exact measures' properties."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup.estimators import exact_containment, exact_resemblance
from dedup.shingles import shingle_bag, shingles

ROSE = ["a", "rose", "is", "a", "rose", "is", "a", "rose"]
FLOWER = ["a", "rose", "is", "a", "flower", "which", "is", "a", "rose"]

SETTINGS = settings(database=None, deadline=None, max_examples=200)
tokens = st.lists(st.sampled_from("abc"), max_size=9)
widths = st.integers(min_value=1, max_value=4)
options = st.sampled_from(["A", "B"])


# --- errata item 1 ----------------------------------------------------------------------------


def test_errata_1_bag():
    assert shingle_bag(ROSE, 4) == Counter(
        {
            ("a", "rose", "is", "a"): 2,
            ("rose", "is", "a", "rose"): 2,
            ("is", "a", "rose", "is"): 1,
        }
    )
    assert sum(shingle_bag(ROSE, 4).values()) == len(ROSE) - 4 + 1


def test_errata_1_option_a():
    assert shingles(ROSE, 4, "A") == {
        (("a", "rose", "is", "a"), 1),
        (("rose", "is", "a", "rose"), 1),
        (("is", "a", "rose", "is"), 1),
        (("a", "rose", "is", "a"), 2),
        (("rose", "is", "a", "rose"), 2),
    }


def test_errata_1_option_b():
    assert shingles(ROSE, 4, "B") == {
        ("a", "rose", "is", "a"),
        ("rose", "is", "a", "rose"),
        ("is", "a", "rose", "is"),
    }
    assert shingles(ROSE, 4) == shingles(ROSE, 4, "B")  # B is the default


def test_option_a_labels_in_order_of_appearance():
    assert shingles(["x", "y", "x", "x"], 1, "A") == {
        (("x",), 1),
        (("y",), 1),
        (("x",), 2),
        (("x",), 3),
    }


# --- errata item 2 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "w", "expected"),
    [
        ("A", 1, Fraction(7, 10)),
        ("A", 2, Fraction(1, 2)),
        ("A", 3, Fraction(3, 10)),
        ("A", 4, Fraction(1, 10)),
        ("B", 1, Fraction(3, 5)),
        ("B", 2, Fraction(1, 2)),
        ("B", 3, Fraction(3, 7)),
        ("B", 4, Fraction(1, 8)),
    ],
)
def test_errata_2_resemblance(option, w, expected):
    a, b = shingles(ROSE, w, option), shingles(FLOWER, w, option)
    assert exact_resemblance(a, b) == pytest.approx(float(expected), abs=1e-15)
    # the exact counts, not only the ratio
    assert Fraction(len(a & b), len(a | b)) == expected


# --- short documents and argument checks ------------------------------------------------------


@pytest.mark.parametrize("option", ["A", "B"])
def test_short_document_is_one_shingle(option):
    got = shingles(["only", "two"], 5, option)
    assert got == ({(("only", "two"), 1)} if option == "A" else {("only", "two")})
    assert shingle_bag(["only", "two"], 5) == Counter({("only", "two"): 1})


@pytest.mark.parametrize("option", ["A", "B"])
def test_empty_document_has_no_shingles(option):
    assert shingles([], 3, option) == set()
    assert shingle_bag([], 3) == Counter()


def test_exactly_w_tokens_is_one_window():
    assert shingles(list("abc"), 3) == {("a", "b", "c")}


@pytest.mark.parametrize("w", [0, -1])
def test_bad_width(w):
    with pytest.raises(ValueError, match="w must be >= 1"):
        shingles(ROSE, w)
    with pytest.raises(ValueError, match="w must be >= 1"):
        shingle_bag(ROSE, w)


def test_bad_option():
    with pytest.raises(ValueError, match="option must be 'A'"):
        shingles(ROSE, 2, "b")


def test_accepts_any_hashable_tokens():
    assert shingles((1, 2, 1, 2), 2) == {(1, 2), (2, 1)}


# --- properties of r and c on shingle sets ----------------------------------------------------


@SETTINGS
@given(tokens, widths, options)
def test_self_resemblance_is_one(doc, w, option):
    s = shingles(doc, w, option)
    assert exact_resemblance(s, s) == 1.0
    assert exact_containment(s, s) == 1.0


@SETTINGS
@given(tokens, tokens, widths, options)
def test_symmetry_and_range(x, y, w, option):
    a, b = shingles(x, w, option), shingles(y, w, option)
    assert exact_resemblance(a, b) == exact_resemblance(b, a)
    assert 0.0 <= exact_resemblance(a, b) <= min(exact_containment(a, b), exact_containment(b, a))


@SETTINGS
@given(st.data(), st.lists(st.sampled_from("abc"), min_size=1, max_size=12), widths, options)
def test_contiguous_subsequence_is_contained(data, doc, w, option):
    """c(A, B) = 1 when A is a contiguous run of B and has at least w tokens.

    Option A too: every window of A is a window of B, so each shingle occurs in B at least as
    often as in A, and the labels 1..count_A are among 1..count_B.
    """
    start = data.draw(st.integers(0, len(doc) - 1))
    stop = data.draw(st.integers(start + 1, len(doc)))
    part = doc[start:stop]
    if len(part) >= w:
        assert exact_containment(shingles(part, w, option), shingles(doc, w, option)) == 1.0


def test_contiguous_subsequence_shorter_than_w_is_not_contained():
    """The short-document rule makes a run shorter than w its own shingle, absent from B."""
    doc = ["a", "b", "c", "d", "e"]
    assert exact_containment(shingles(doc[1:3], 3), shingles(doc, 3)) == 0.0


def test_option_a_containment_counts_repeats():
    """A non-contiguous rearrangement with more repeats than B is not contained under A."""
    a, b = ["x", "x", "x"], ["x", "y", "x"]
    assert exact_containment(shingles(a, 1, "B"), shingles(b, 1, "B")) == 1.0
    assert exact_containment(shingles(a, 1, "A"), shingles(b, 1, "A")) == pytest.approx(2 / 3)


@SETTINGS
@given(tokens, tokens, widths)
def test_option_a_containment_one_iff_bag_inclusion(x, y, w):
    a, b = shingle_bag(x, w), shingle_bag(y, w)
    bag_included = all(b[key] >= count for key, count in a.items())
    assert (exact_containment(shingles(x, w, "A"), shingles(y, w, "A")) == 1.0) == bag_included


@SETTINGS
@given(tokens, tokens, tokens, widths, options)
def test_triangle_inequality(x, y, z, w, option):
    """d = 1 − r is a metric (§2): d(A, C) <= d(A, B) + d(B, C)."""
    a, b, c = (shingles(t, w, option) for t in (x, y, z))

    def d(p, q):
        return 1.0 - exact_resemblance(p, q)

    assert d(a, c) <= d(a, b) + d(b, c) + 1e-12
    assert (d(a, b) == 0.0) == (a == b)


def test_permutations_can_resemble_fully():
    """§2: (a, c, a, b, a) resembles (a, b, a, c, a) 100% for size 2 (Option A)."""
    x, y = list("acaba"), list("abaca")
    assert exact_resemblance(shingles(x, 2, "A"), shingles(y, 2, "A")) == 1.0
    assert exact_resemblance(shingles(x, 3, "A"), shingles(y, 3, "A")) < 1.0
