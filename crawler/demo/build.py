"""Build the bundled demo site: ``site/`` (what ``neardup demo`` serves) and ``TRUTH.json``.

The site is an imaginary walking club's: distinct articles from ``articles.txt`` on one template
(navigation, sidebar, footer), and copies of some of them of each kind a crawler meets on the
web: exact mirrors (the same bytes, or the same text in other markup), near duplicates (a
copyright line added, links rewritten for a mirror host, a few words changed), printable
versions (the article without the template, plus a route card), a PNG and a PDF, and a page
that robots.txt forbids. ``TRUTH.json`` says what each path is, of which original, and the
exact Option-B 4-word-shingle resemblance and containment of each copy to its original,
measured with :mod:`dedup`'s own canonicaliser, so the demo's decisions can be checked.

    python -m crawler.demo.build           # rewrite site/ and TRUTH.json
    python -m crawler.demo.build --check   # exit 1 if they are not what this builds

The build refuses to write a site that misses its own targets: every near duplicate at
resemblance >= 0.93 to its original, every exact mirror with the same tokens, and no two
distinct pages above 0.3 (the template must not make different articles alike).
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import re
import struct
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from dedup.canonical import CANONICALISER_VERSION, html_tokens
from dedup.estimators import exact_containment, exact_resemblance
from dedup.shingles import shingles

HERE = Path(__file__).resolve().parent
SITE = HERE / "site"
TRUTH = HERE / "TRUTH.json"
SOURCE = HERE / "articles.txt"

CLUB = "Ashgill Valley Walking Club"
MIRROR_HOST = "http://mirror.ashgill-walkers.example"
SHINGLE_SIZE = 4
OPTION = "B"
NEAR_MIN = 0.93  # every near duplicate resembles its original at least this much
DISTINCT_MAX = 0.3  # no two distinct pages resemble each other more than this


@dataclass(frozen=True)
class Article:
    path: str  # file path under site/, e.g. "walks/wenlow-tarn.html"
    title: str
    paragraphs: tuple[str, ...]

    @property
    def url_path(self) -> str:
        return url_path(self.path)


@dataclass
class Page:
    path: str
    data: bytes
    kind: str
    of: str | None = None
    change: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def url_path(file_path: str) -> str:
    """``walks/index.html`` -> ``/walks/``; ``index.html`` -> ``/``."""
    if file_path == "index.html":
        return "/"
    if file_path.endswith("/index.html"):
        return "/" + file_path[: -len("index.html")]
    return "/" + file_path


def read_articles(source: Path = SOURCE) -> dict[str, Article]:
    articles: dict[str, Article] = {}
    for block in re.split(r"^=== ", source.read_text(encoding="utf-8"), flags=re.M)[1:]:
        head, _, text = block.partition("\n")
        path, _, title = (part.strip() for part in head.partition("|"))
        paragraphs = tuple(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())
        articles[path] = Article(path, title, paragraphs)
    return articles


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def paragraph_html(text: str) -> str:
    """One paragraph; ``[text](/path)`` becomes a link, everything else is escaped."""
    out, last = [], 0
    for match in _LINK.finditer(text):
        out.append(html.escape(text[last : match.start()], quote=False))
        out.append(f'<a href="{html.escape(match[2])}">{html.escape(match[1], quote=False)}</a>')
        last = match.end()
    out.append(html.escape(text[last:], quote=False))
    return "<p>" + "".join(out) + "</p>"


def body_html(paragraphs: tuple[str, ...]) -> str:
    return "\n".join(paragraph_html(p) for p in paragraphs)


STYLE = (
    "body{font-family:Georgia,serif;max-width:62em;margin:0 auto;padding:0 1em;color:#222}"
    "nav ul{list-style:none;padding:0}nav li{display:inline;margin-right:1em}"
    ".columns{display:flex;gap:2em}main{flex:3}aside{flex:1;font-size:90%}"
    "footer{border-top:1px solid #999;margin-top:2em;font-size:85%}"
)

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} - {club}</title>
<style>{style}</style>
</head>
<body>
<header>
<p class="brand"><a href="/">{club}</a></p>
<nav>
<ul>
<li><a href="/">Home</a></li>
<li><a href="/walks/">Walks</a></li>
<li><a href="/guides/map-and-compass.html">Guides</a></li>
<li><a href="/club/about.html">About the club</a></li>
<li><a href="/sitemap.html">Every page</a></li>
</ul>
</nav>
</header>
<div class="columns">
<main>
<h1>{title}</h1>
{body}
</main>
<aside>
<h2>Next meets</h2>
<p>Saturday walks leave the Market Cross at half past eight, and Sunday rounds leave the weir \
at ten. Bring waterproofs, a packed lunch and a map.</p>
<ul>
<li><a href="/media/ashgill-trail-map.png">Trail map of the valley (image)</a></li>
<li><a href="/media/membership-form.pdf">Membership form (PDF)</a></li>
</ul>
</aside>
</div>
<footer>
{footer_extra}<p>The {club} and its valley are imaginary: this site exists to demonstrate a \
crawler that notices near-duplicate pages. Walk within your limits and leave gates as you find \
them.</p>
</footer>
</body>
</html>
"""

PRINT_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} (printable)</title>
</head>
<body>
<p>Printed from the {club} website.</p>
<h1>{title}</h1>
{body}
<h2>Route card</h2>
<p>Before you set out, leave a copy of this card with someone at home: where you start, the \
time you expect to finish, how many are in your party and the registration of your car.</p>
</body>
</html>
"""


def page_html(title: str, body: str, footer_extra: str = "") -> str:
    return TEMPLATE.format(
        title=html.escape(title, quote=False),
        club=CLUB,
        style=STYLE,
        body=body,
        footer_extra=footer_extra,
    )


def article_html(article: Article, printable: str | None = None) -> str:
    extra = f'<p><a href="{printable}">Printable version</a></p>\n' if printable else ""
    return page_html(article.title, body_html(article.paragraphs), extra)


def replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"expected {old!r} exactly once")
    return text.replace(old, new)


# --- variants -------------------------------------------------------------------------------------


def remarked(page: str) -> str:
    """The same text in other markup: attributes, comments, wrappers, indentation, tag case."""
    page = page.replace("<p>", '<p class="copy">').replace("<main>", '<main id="content">')
    page = replace_once(page, "<body>", "<BODY>\n<!-- copied from the club's own site -->")
    page = replace_once(page, "</body>", "</BODY>")
    page = replace_once(page, "<h1>", '<div class="mirror-copy">\n<h1 class="title">')
    page = replace_once(page, "</main>", "</div>\n</main>")
    return "\n".join("    " + line if line.startswith("<") else line for line in page.splitlines())


def with_links_rewritten(page: str) -> str:
    """Every site-relative link pointing at the mirror host, and a banner saying so."""
    page = re.sub(r'href="/', f'href="{MIRROR_HOST}/', page)
    banner = (
        f"<p>You are reading a mirrored copy kept at {MIRROR_HOST.split('//')[1]}.</p>\n<h1>"
    )
    return replace_once(page, "<h1>", banner)


# --- binary files ---------------------------------------------------------------------------------


def png_map(width: int = 64, height: int = 40) -> bytes:
    """A tiny picture of the valley: sky, two fells, a tarn. A real, valid PNG."""

    def pixel(x: int, y: int) -> tuple[int, int, int]:
        fell = min(abs(x - 18) * 0.9 + 12, abs(x - 46) * 1.1 + 8)
        if (x - 32) ** 2 / 90 + (y - 33) ** 2 / 6 < 1:
            return (60, 110, 170)  # the tarn
        if y > fell:
            return (70 + y, 120 + y // 2, 60)  # grass and bracken
        return (170, 200, 230 - y)  # sky

    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height)
    )

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def pdf_form() -> bytes:
    """A one-page PDF membership form, written out by hand (objects, xref table, trailer)."""
    lines = [
        f"{CLUB} - membership form",
        "Name: ______________________________",
        "Address: ___________________________",
        "Adult (12 pounds) [ ]   Junior (4 pounds) [ ]",
        "Post this form through the village hall letterbox.",
    ]
    text = "BT /F1 14 Tf 72 770 Td 20 TL " + " ".join(f"({t}) '" for t in lines) + " ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text.encode("latin-1")),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


ROBOTS = b"""# The committee's minutes are for members only.
User-agent: *
Disallow: /private/
"""

PRIVATE = page_html(
    "Committee minutes",
    body_html(
        (
            "Present: the chair, the treasurer, the walks secretary and four members of the "
            "committee. The treasurer reported a small surplus after the annual dinner.",
            "It was agreed to buy two new group shelters and to repaint the noticeboard. The "
            "next meeting will be held in the village hall after the November walk.",
        )
    ),
)


# --- the site -------------------------------------------------------------------------------------

PRINTABLE = ("walks/skelly-crag-scramble.html", "guides/weather-on-the-tops.html")


def print_path(path: str) -> str:
    return "print/" + path


def build() -> list[Page]:
    articles = read_articles()
    pages: list[Page] = []

    def add(path: str, text: str | bytes, kind: str, **kw: object) -> None:
        data = text.encode("utf-8") if isinstance(text, str) else text
        pages.append(Page(path, data, kind, **kw))  # type: ignore[arg-type]

    originals: dict[str, str] = {}
    for path, article in articles.items():
        printable = "/" + print_path(path) if path in PRINTABLE else None
        originals[path] = article_html(article, printable)
        add(path, originals[path], "original")

    add("sitemap.html", sitemap_html(articles), "original")

    # exact mirrors: the same bytes; the same text in other markup (twice)
    add("mirror/walks/wenlow-tarn.html", originals["walks/wenlow-tarn.html"], "exact_mirror",
        of="walks/wenlow-tarn.html", change="byte-identical copy")  # fmt: skip
    add("mirror/guides/packing-list.html", remarked(originals["guides/packing-list.html"]),
        "exact_mirror", of="guides/packing-list.html",
        change="same text; other markup, attributes, comments and indentation")  # fmt: skip
    add("mirror/club/history.html", remarked(originals["club/history.html"]), "exact_mirror",
        of="club/history.html", change="same text; other markup and indentation")  # fmt: skip

    # near duplicates
    harrow = "walks/harrow-fell-ridge.html"
    copyright_line = (
        f"<p>Copyright 2024 {CLUB}. Reprinted in the spring newsletter with permission.</p>\n"
        "</main>"
    )
    add("news/2024/harrow-fell-ridge.html", replace_once(originals[harrow], "</main>",
        copyright_line), "near_duplicate", of=harrow, change="a copyright line added")  # fmt: skip
    maps = "guides/map-and-compass.html"
    add("syndicated/map-and-compass.html", with_links_rewritten(originals[maps]),
        "near_duplicate", of=maps,
        change=f"links rewritten for the mirror host {MIRROR_HOST} and a banner added")  # fmt: skip
    mossop = "walks/mossop-beck-waterfalls.html"
    changed = originals[mossop]
    for old, new in (
        ("nearly six hundred feet", "nearly five hundred feet"),
        ("The round trip is three miles", "The round trip is four miles"),
        ("the best months are October to March", "the best months are October to April"),
    ):
        changed = replace_once(changed, old, new)
    add("archive/mossop-beck-waterfalls.html", changed, "near_duplicate", of=mossop,
        change="three words changed")  # fmt: skip
    junior = "club/junior-section.html"
    changed = originals[junior]
    for old, new in (
        ("take place on the second Saturday", "take place on the third Saturday"),
        ("no charge for the first two outings", "no charge for the first three outings"),
    ):
        changed = replace_once(changed, old, new)
    add("archive/2023/junior-section.html", changed, "near_duplicate", of=junior,
        change="an older version: two words differ")  # fmt: skip

    # printable versions: the article without the template, plus a route card
    for path in PRINTABLE:
        article = articles[path]
        text = PRINT_TEMPLATE.format(
            title=html.escape(article.title, quote=False), club=CLUB,
            body=body_html(article.paragraphs),
        )  # fmt: skip
        add(print_path(path), text, "printable", of=path,
            change="the article without the site template, plus a route card")  # fmt: skip

    add("media/ashgill-trail-map.png", png_map(), "not_html", change="image/png")
    add("media/membership-form.pdf", pdf_form(), "not_html", change="application/pdf")
    add("private/committee-minutes.html", PRIVATE, "disallowed", change="robots.txt: /private/")
    add("robots.txt", ROBOTS, "robots_txt")
    return pages


def sitemap_html(articles: dict[str, Article]) -> str:
    def item(path: str, text: str) -> str:
        return f'<li><a href="{url_path(path)}">{html.escape(text, quote=False)}</a></li>'

    sections = []
    for heading, prefix in (("Walks", "walks/"), ("Guides", "guides/"), ("The club", "club/")):
        links = [item(p, a.title) for p, a in articles.items() if p.startswith(prefix)]
        sections.append(f"<h2>{heading}</h2>\n<ul>\n" + "\n".join(links) + "\n</ul>")
    copies = [
        item("mirror/walks/wenlow-tarn.html", "Wenlow Tarn, copied for the tarn's visitor board"),
        item("mirror/guides/packing-list.html", "Kit list, as kept by the outdoor shop"),
        item("mirror/club/history.html", "Club history, as kept by the village archive"),
        item("news/2024/harrow-fell-ridge.html", "Newsletter reprint: the Harrow ridge"),
        item("syndicated/map-and-compass.html", "Navigation notes on our mirror host"),
        item("archive/mossop-beck-waterfalls.html", "An earlier Mossop Beck write-up"),
        item("archive/2023/junior-section.html", "Junior rambles, last year's page"),
        item("print/walks/skelly-crag-scramble.html", "Skelly Crag, printable"),
        item("print/guides/weather-on-the-tops.html", "Mountain weather, printable"),
    ]
    sections.append("<h2>Copies and archives</h2>\n<ul>\n" + "\n".join(copies) + "\n</ul>")
    sections.append(
        "<h2>Downloads</h2>\n<ul>\n"
        + item("media/ashgill-trail-map.png", "A sketch map of the valley")
        + "\n"
        + item("media/membership-form.pdf", "Membership form to print")
        + "\n</ul>"
    )
    intro = "<p>Everything on this website, listed in one place for readers and for robots.</p>"
    return page_html("Every page", intro + "\n" + "\n".join(sections))


# --- truth ----------------------------------------------------------------------------------------


def tokens_of(data: bytes) -> list[str]:
    return html_tokens(data.decode("utf-8"), unit="word", engine="fast")


def truth(pages: list[Page]) -> dict[str, object]:
    """What every path is, and the exact measures of each copy against its original."""
    by_path = {p.path: p for p in pages}
    sets: dict[str, set[object]] = {}
    for page in pages:
        if page.kind not in ("not_html", "robots_txt"):
            sets[page.path] = shingles(tokens_of(page.data), SHINGLE_SIZE, OPTION)

    entries: dict[str, dict[str, object]] = {}
    for page in pages:
        entry: dict[str, object] = {"kind": page.kind}
        if page.of is not None:
            a, b = sets[page.path], sets[page.of]
            entry["of"] = url_path(page.of)
            entry["resemblance"] = round(exact_resemblance(a, b), 4)
            entry["containment_in_original"] = round(exact_containment(a, b), 4)
            entry["original_contained"] = round(exact_containment(b, a), 4)
            if page.kind == "exact_mirror":
                entry["identical_bytes"] = page.data == by_path[page.of].data
        if page.change is not None:
            entry["change"] = page.change
        entries[url_path(page.path)] = entry

    distinct = [p.path for p in pages if p.kind == "original"]
    worst = max(
        itertools.combinations(distinct, 2),
        key=lambda pair: exact_resemblance(sets[pair[0]], sets[pair[1]]),
    )
    return {
        "about": f"The {CLUB} demo site: what each path is and how alike the copies are.",
        "measure": {
            "tokens": "dedup.canonical.html_tokens, unit word",
            "canonicaliser_version": CANONICALISER_VERSION,
            "shingle_size": SHINGLE_SIZE,
            "option": OPTION,
            "resemblance": "|S(A) & S(B)| / |S(A) | S(B)|, exact, over whole shingle sets",
            "containment_in_original": "|S(A) & S(B)| / |S(A)|, A the copy, B its original",
            "original_contained": "|S(A) & S(B)| / |S(B)|",
        },
        "kinds": {
            "original": "a distinct page",
            "exact_mirror": "the same text as 'of' (same bytes, or other markup only)",
            "near_duplicate": "'of' with a small change",
            "printable": "'of' without the site template, plus a little extra",
            "not_html": "an image or a PDF: skipped, with reason not_html",
            "disallowed": "forbidden by robots.txt: never fetched",
            "robots_txt": "the robots.txt file itself",
        },
        "most_alike_distinct_pages": {
            "pages": [url_path(worst[0]), url_path(worst[1])],
            "resemblance": round(exact_resemblance(sets[worst[0]], sets[worst[1]]), 4),
        },
        "pages": entries,
    }


def check_targets(report: dict[str, object]) -> list[str]:
    problems = []
    entries = report["pages"]
    assert isinstance(entries, dict)
    for path, entry in entries.items():
        if entry["kind"] == "near_duplicate" and not entry["resemblance"] >= NEAR_MIN:
            problems.append(f"{path}: resemblance {entry['resemblance']} < {NEAR_MIN}")
        if entry["kind"] == "exact_mirror" and entry["resemblance"] != 1.0:
            problems.append(f"{path}: an exact mirror with other tokens")
    worst = report["most_alike_distinct_pages"]
    assert isinstance(worst, dict)
    if worst["resemblance"] > DISTINCT_MAX:
        problems.append(f"distinct pages {worst['pages']} resemble at {worst['resemblance']}")
    return problems


def outputs() -> dict[Path, bytes]:
    pages = build()
    report = truth(pages)
    problems = check_targets(report)
    if problems:
        raise SystemExit("demo site misses its targets:\n  " + "\n  ".join(problems))
    files = {SITE / page.path: page.data for page in pages}
    files[TRUTH] = (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    files = outputs()
    stale = sorted(
        str(p.relative_to(HERE))
        for p, data in files.items()
        if not p.is_file() or p.read_bytes() != data
    )
    extra = sorted(
        str(p.relative_to(HERE)) for p in SITE.rglob("*") if p.is_file() and p not in files
    ) if SITE.is_dir() else []
    if args.check:
        for name in stale + extra:
            print(f"out of date: {name}", file=sys.stderr)
        return 1 if stale or extra else 0
    for name in extra:
        (HERE / name).unlink()
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
    print(f"wrote {len(files)} files under {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
