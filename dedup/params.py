"""The parameters that decide what a sketch is.

Two sketches can only be compared when they were made with the same parameters, so the store
records a :class:`SketchParams` when it is created and refuses to mix. Validation happens here,
at construction, so a bad value is reported once, by name, before any work is done.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

UNITS = ("word", "char", "line")
OPTIONS = ("A", "B")
SKETCH_KINDS = ("min", "mod", "minmod", "tiered", "permutation")
FINGERPRINT_BITS = (40, 64)
#: the boilerplate cap unless the config says otherwise (:attr:`DedupParams.cap`)
DEFAULT_CAP = 64


@dataclass(frozen=True)
class SketchParams:
    """How a canonical token stream becomes a sketch (paper §2–§4).

    >>> SketchParams().shingle_size
    4
    >>> SketchParams(option="C")
    Traceback (most recent call last):
    ...
    ValueError: sketch.option must be one of A, B; got 'C'
    """

    #: token unit of the canonical stream: words, characters or lines (§2)
    unit: str = "word"
    #: w, the number of consecutive tokens in a shingle
    shingle_size: int = 4
    #: "A" labels each shingle with its occurrence number (a bag); "B" keeps the set
    option: str = "B"
    #: min = MIN_s, mod = MOD_m, minmod = MIN_s of MOD_m, tiered = L_i, permutation = k minima
    kind: str = "min"
    #: s for min and minmod, k for permutation; unused by mod and tiered
    size: int = 100
    #: m for mod and minmod
    modulus: int = 16
    #: ℓ, the degree of the Rabin polynomial and the width of a fingerprint
    fingerprint_bits: int = 64
    #: seed of the random irreducible polynomial (and of the permutations)
    seed: int = 1

    def __post_init__(self) -> None:
        _choice("sketch.unit", self.unit, UNITS)
        _choice("sketch.option", self.option, OPTIONS)
        _choice("sketch.kind", self.kind, SKETCH_KINDS)
        _choice("sketch.fingerprint_bits", self.fingerprint_bits, FINGERPRINT_BITS)
        _positive_int("sketch.shingle_size", self.shingle_size)
        _positive_int("sketch.size", self.size)
        _positive_int("sketch.modulus", self.modulus)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"sketch.seed must be a non-negative integer; got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SketchParams:
        return cls(**_known_fields(cls, data, "sketch"))

    def describe(self) -> str:
        """One line for humans, e.g. in a summary or an error."""
        what = {
            "min": f"MIN_{self.size}",
            "mod": f"MOD_{self.modulus}",
            "minmod": f"MIN_{self.size}(MOD_{self.modulus})",
            "tiered": "L_i (size-tiered MOD_2^i)",
            "permutation": f"{self.size}-permutation min-hash",
        }[self.kind]
        return (
            f"{what} over {self.shingle_size}-{self.unit} shingles, option {self.option}, "
            f"{self.fingerprint_bits}-bit Rabin fingerprints, seed {self.seed}"
        )


def _known_fields(cls: type, data: dict[str, Any], section: str) -> dict[str, Any]:
    """``data``, once every key is a field of ``cls`` (else the first unknown one is named)."""
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"unknown {section} parameter {unknown[0]!r}")
    return data


def _choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed or isinstance(value, bool):
        listed = ", ".join(str(a) for a in allowed)
        raise ValueError(f"{name} must be one of {listed}; got {value!r}")


def _positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")


REPRESENTATIVES = ("first", "popular")
ENGINES = ("fast", "reference")


@dataclass(frozen=True)
class DedupParams:
    """When a document counts as a duplicate of a cluster (paper §4.4).

    >>> DedupParams(threshold=1.5)
    Traceback (most recent call last):
    ...
    ValueError: dedup.threshold must be a number in [0, 1]; got 1.5
    """

    #: estimated resemblance at or above which a document joins a cluster
    threshold: float = 0.9
    #: if set, a document contained in a representative at or above this also joins it
    containment: float | None = None
    #: "first" member, or the s most "popular" fingerprints of the cluster
    representative: str = "first"
    #: HTML canonicaliser: "fast" (lexbor) or "reference" (BeautifulSoup); same tokens either way
    canonicaliser: str = "fast"
    #: clusters read per fingerprint: the boilerplate cap that keeps clustering O(rs) (a
    #: fingerprint shared by more clusters, such as a site template's, costs this many lookups)
    cap: int = DEFAULT_CAP

    def __post_init__(self) -> None:
        _unit_interval("dedup.threshold", self.threshold)
        if self.containment is not None:
            _unit_interval("dedup.containment", self.containment)
        _choice("dedup.representative", self.representative, REPRESENTATIVES)
        _choice("dedup.canonicaliser", self.canonicaliser, ENGINES)
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise ValueError(f"dedup.cap must be a positive integer; got {self.cap!r}")


def _unit_interval(name: str, value: object) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1
    if not ok:
        raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")


CONTENT_AREAS = ("all", "main")


@dataclass(frozen=True)
class ContentArea:
    """Which part of an HTML page its tokens come from (config section ``canonical``).

    ``content_area`` is ``"all"`` (the whole page, as the paper has it: the default) or
    ``"main"`` (the main content: navigation, sidebars, banners and footers left out, see
    :mod:`dedup.content_area`). ``include`` (CSS selectors) replaces the choice of where the
    content is: only the text of the elements they match counts; ``exclude`` leaves out the
    elements it matches, with their content. Whether two pages on one template are near
    duplicates depends on it, so a store records it, like the sketch parameters.

    >>> ContentArea().is_whole_page
    True
    >>> ContentArea("main", exclude=[".ads"]).exclude
    ('.ads',)
    >>> ContentArea("body")
    Traceback (most recent call last):
    ...
    ValueError: canonical.content_area must be one of all, main; got 'body'
    >>> ContentArea(include=["div["])
    Traceback (most recent call last):
    ...
    ValueError: canonical.include: not a CSS selector both engines read: 'div['
    """

    #: "all" (the whole page) or "main" (the main content, boilerplate left out)
    content_area: str = "all"
    #: CSS selectors of the elements whose text is the content (none: decided by content_area)
    include: tuple[str, ...] = ()
    #: CSS selectors of elements left out with their content
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _choice("canonical.content_area", self.content_area, CONTENT_AREAS)
        for name in ("include", "exclude"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise ValueError(f"canonical.{name} must be a list of CSS selectors; got {value!r}")
            object.__setattr__(self, name, tuple(value))
            for selector in value:
                _selector(f"canonical.{name}", selector)

    @property
    def is_whole_page(self) -> bool:
        """True for the default: every token of the page, as before content areas existed."""
        return self.content_area == "all" and not self.include and not self.exclude

    def to_dict(self) -> dict[str, Any]:
        return {"content_area": self.content_area, "include": list(self.include),
                "exclude": list(self.exclude)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentArea:
        return cls(**_known_fields(cls, data, "canonical"))

    def describe(self) -> str:
        """One line for humans: ``all``, ``main``, ``main, include: main, exclude: .ads``."""
        parts = [self.content_area]
        if self.include:
            parts.append("include: " + "; ".join(self.include))
        if self.exclude:
            parts.append("exclude: " + "; ".join(self.exclude))
        return ", ".join(parts)


def _selector(name: str, value: object) -> None:
    """A selector both canonicaliser engines parse (soupsieve and lexbor), else one line."""
    from dedup.content_area import selector_error  # (lazy: it imports the HTML parsers)

    if not isinstance(value, str) or not value.strip() or selector_error(value):
        raise ValueError(f"{name}: not a CSS selector both engines read: {value!r}")
