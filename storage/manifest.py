"""The store's manifest: the parameters its sketches were made with, fixed at creation.

Two sketches compare only when the same canonicaliser, shingling, Rabin polynomial and sketch
kind made them, so a store records all of that once and every later open is checked against it
(:meth:`Manifest.check`). The copy in the LMDB ``meta`` database is the authoritative one; the
``manifest.json`` beside it is the same object for people and other tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from dedup.canonical import CANONICALISER_VERSION
from dedup.params import ContentArea, SketchParams
from dedup.rabin import RabinFingerprinter
from storage.errors import StoreMismatchError

#: on-disk layout of the store (databases, record and key formats); bump on any change
FORMAT_VERSION = 1

# Keys that the code, not the user, decides: a mismatch means the code changed since.
_CODE_KEYS = ("format_version", "rabin_polynomial", "canonicaliser_version")


@lru_cache(maxsize=8)
def rabin_polynomial(seed: int, bits: int) -> str:
    """The Rabin polynomial for ``seed`` as hex: what a store's fingerprints are residues of."""
    return f"{RabinFingerprinter.from_seed(seed, bits=bits).polynomial:#x}"


@dataclass(frozen=True)
class Manifest:
    format_version: int
    sketch: SketchParams
    #: the irreducible polynomial of degree ``sketch.fingerprint_bits``, in hex
    rabin_polynomial: str
    canonicaliser_version: Any
    #: ISO 8601, UTC
    created: str
    #: which part of a page its tokens came from; a store made before content areas read whole
    #: pages, so a manifest without one reads as the default
    canonical: ContentArea = ContentArea()

    @classmethod
    def for_params(
        cls, params: SketchParams, created: str | None = None, area: ContentArea | None = None
    ) -> Manifest:
        """The manifest a store made now, by this code, with ``params`` (and the content
        ``area``; None: the whole page) would have."""
        if created is None:
            created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return cls(
            format_version=FORMAT_VERSION,
            sketch=params,
            rabin_polynomial=rabin_polynomial(params.seed, params.fingerprint_bits),
            canonicaliser_version=CANONICALISER_VERSION,
            created=created,
            canonical=ContentArea() if area is None else area,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": self.format_version,
            "sketch": self.sketch.to_dict(),
            "rabin_polynomial": self.rabin_polynomial,
            "canonicaliser_version": self.canonicaliser_version,
            "created": self.created,
            "canonical": self.canonical.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Manifest:
        data = json.loads(text)
        try:
            return cls(
                format_version=int(data["format_version"]),
                sketch=SketchParams.from_dict(data["sketch"]),
                rabin_polynomial=str(data["rabin_polynomial"]),
                canonicaliser_version=data["canonicaliser_version"],
                created=str(data["created"]),
                canonical=ContentArea.from_dict(data.get("canonical", {})),
            )
        except KeyError as exc:
            raise ValueError(f"store manifest lacks the key {exc.args[0]!r}") from None

    def compared(self) -> dict[str, Any]:
        """Every value that must agree for two stores' sketches to mix, by dotted key."""
        values: dict[str, Any] = {"format_version": self.format_version}
        values.update({f"sketch.{k}": v for k, v in self.sketch.to_dict().items()})
        values["rabin_polynomial"] = self.rabin_polynomial
        values["canonicaliser_version"] = self.canonicaliser_version
        values.update({f"canonical.{k}": _shown(v) for k, v in self.canonical.to_dict().items()})
        return values

    def check(self, wanted: Manifest, store: str) -> None:
        """Raise :class:`StoreMismatchError` naming the first key where ``wanted`` differs.

        ``self`` is the store's manifest, ``wanted`` the one this run would write.
        """
        mine, theirs = self.compared(), wanted.compared()
        for key, have in mine.items():
            want = theirs[key]
            if have == want:
                continue
            if key in _CODE_KEYS:
                hint = "the code changed since; use another --store, or re-cluster into a new one"
            elif key.startswith("canonical."):
                hint = "use another --store, or re-analyse this one: neardup recluster --store"
            else:
                hint = "use another --store, or the same parameters"
            raise StoreMismatchError(
                f"store {store} was made with {key}={have}; this run asks for {want} ({hint})"
            )


def _shown(value: Any) -> Any:
    """A value as a mismatch line shows it: a list of selectors as its YAML-like flow."""
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return value
