"""From a canonical token stream to a sketch: the one path every page takes.

Crawl, re-cluster and ``neardup compare`` all call :class:`Sketcher`, so the same page always
becomes the same ids and the same sketch, whatever brought it in.

The path (paper §2–§4): tokens → fixed-width units (§4.3) → Rabin fingerprint of every window of
``w`` units (the ids f(S(D, w)); the appended nulls play the random permutation π, §4.1) →
for Option A each id is relabelled by its occurrence number → the sketch of the chosen kind.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from dedup.params import SketchParams
from dedup.rabin import RabinFingerprinter, occurrence_labels
from dedup.shingles import shingles
from dedup.sketches import (
    MinModSketch,
    MinSketch,
    ModSketch,
    PermutationSketch,
    Sketch,
    TieredSketch,
)
from dedup.units import JoinedTokens, Tokens, to_units


@dataclass(frozen=True)
class DocumentSketch:
    """What the index needs to know about one document."""

    sketch: Sketch
    #: 64-bit hash of the canonical token stream: equal streams are exact duplicates
    content_hash: int
    tokens: int
    #: number of distinct shingle ids, |f(S(D, w))|
    shingles: int


def content_hash(tokens: Tokens) -> int:
    """A 64-bit hash of the canonical stream, stable across runs and machines.

    The lecture's exact-duplicate test (§12.1). BLAKE2b rather than ``hash()``, whose value changes
    with every interpreter start.

    >>> content_hash(["a", "rose"]) == content_hash(["a", "rose"])
    True
    >>> content_hash(["a", "rose"]) == content_hash(["arose"])
    False
    """
    if not isinstance(tokens, JoinedTokens):
        tokens = JoinedTokens.of(tokens)
    digest = hashlib.blake2b(tokens.data, digest_size=8).digest()
    return int.from_bytes(digest, "big")


class Sketcher:
    """Turns token streams into ids and sketches with one fixed :class:`SketchParams`."""

    def __init__(self, params: SketchParams | None = None) -> None:
        self.params = params or SketchParams()
        self.fingerprinter = RabinFingerprinter.from_seed(
            self.params.seed, bits=self.params.fingerprint_bits
        )

    def ids(self, tokens: Tokens) -> np.ndarray:
        """The shingle ids of a document, one per shingle occurrence (repeats possible)."""
        units = to_units(tokens)
        fps = self.fingerprinter.shingle_fingerprints(units, self.params.shingle_size)
        if self.params.option == "A" and fps.size:
            fps = self.fingerprinter.labelled_ids(fps, occurrence_labels(fps))
        return fps

    def sketch_ids(self, ids: np.ndarray) -> Sketch:
        p = self.params
        if p.kind == "min":
            return MinSketch.from_ids(ids, p.size)
        if p.kind == "mod":
            return ModSketch.from_ids(ids, p.modulus)
        if p.kind == "minmod":
            return MinModSketch.from_ids(ids, p.size, p.modulus)
        if p.kind == "tiered":
            return TieredSketch.from_ids(ids)
        return PermutationSketch.from_ids(ids, p.size, p.seed)

    def sketch(self, tokens: Tokens) -> DocumentSketch:
        if not isinstance(tokens, JoinedTokens):
            tokens = JoinedTokens.of(tokens)  # once, for both the units and the hash
        ids = self.ids(tokens)
        sketch = self.sketch_ids(ids)
        return DocumentSketch(
            sketch=sketch,
            content_hash=content_hash(tokens),
            tokens=len(tokens),
            shingles=int(sketch.n),
        )

    def exact_shingles(self, tokens: Tokens) -> set[object]:
        """The full shingle set S(D, w) over the same units the fingerprints see.

        For exact resemblance and containment, the truth the sketches estimate (up to the
        fingerprint collisions of §4.1, which are negligible at ℓ = 64).
        """
        units = to_units(tokens).tolist()
        return shingles(units, self.params.shingle_size, self.params.option)
