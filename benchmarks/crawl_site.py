"""A generated site for the crawl benchmark: thousands of pages on one template, a third copies.

The site of an imaginary magazine, *The Handbook Digest*, deterministic from a seed. Its
articles are made of **real sentences**: the prose paragraphs of Debian's Python and PostgreSQL
documentation (:func:`benchmarks.corpus.html_corpus`), split into sentences, keyed by their
canonical tokens (:func:`dedup.canonical.text_tokens`) so that no sentence is used twice, and
dealt out in a seeded order. Where that corpus cannot be installed, or with ``text="zipf"``, a
seeded word generator with a Zipf vocabulary writes the sentences instead (the result says
which).

Besides the originals and the listing pages that link them, about a third of the pages are
copies of an original, of the kinds a crawler meets on the web:

============== ==================================================================== ==========
kind           what changed                                                         expected
============== ==================================================================== ==========
exact_mirror   nothing: the same bytes under another path                           exact
markup_variant the same text in other markup (attributes, wrappers, comments, case) exact
copyright      a copyright line added at the end of the article                     near
links_rewritten every site link pointed at a mirror host, and a banner added        near
words_changed  one to six words of the article replaced                             near, mostly
printable      the article alone, without the template, plus a "printed from" line  by r
truncated      the response cut off, from 60% into the article to its footer        by r
============== ==================================================================== ==========

What each page is, and how alike each copy is to its original, is the :attr:`Site.truth`:
the exact Option-B resemblance and both containments of the sets of 4-word shingles of the
canonical token streams (:func:`dedup.canonical.html_tokens`, :func:`dedup.shingles.shingles`,
:func:`dedup.estimators.exact_resemblance`), measured on the bytes served, so nothing relies
on a model of the edits. "expected" above is only what the edits usually give.

    >>> site = build_site(pages=120, seed=3, text="zipf")
    >>> len(site.html_pages), site.truth["/"]["kind"]
    (120, 'listing')
    >>> sum(p.of is not None for p in site.pages) >= 0.3 * len(site.html_pages)
    True
    >>> all(site.truth[p.path]["resemblance"] == 1.0 for p in site.pages
    ...     if p.kind in ("exact_mirror", "markup_variant"))
    True
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dedup.canonical import html_tokens, text_tokens
from dedup.estimators import exact_containment, exact_resemblance
from dedup.shingles import shingles

__all__ = [
    "COPY_KINDS",
    "SHINGLE_SIZE",
    "Site",
    "SitePage",
    "build_site",
    "corpus_sentences",
    "zipf_sentences",
]

SITE_NAME = "The Handbook Digest"
SHINGLE_SIZE = 4
OPTION = "B"
#: the copy kinds and how often each is made
COPY_KINDS = {
    "exact_mirror": 0.13,
    "markup_variant": 0.13,
    "copyright": 0.15,
    "links_rewritten": 0.12,
    "words_changed": 0.19,
    "printable": 0.10,
    "truncated": 0.18,
}
COPY_PREFIX = {
    "exact_mirror": "/mirror",
    "markup_variant": "/partners",
    "copyright": "/newsletter",
    "links_rewritten": "/syndicated",
    "words_changed": "/archive",
    "printable": "/print",
    "truncated": "/cache",
}
#: pages per listing page
PER_LISTING = 40
#: pages robots.txt forbids (fetched by neither crawl)
PRIVATE_PAGES = 3
_OWNERS = ("Northfield Press", "The Evening Courier", "Library Services", "Digest Partners Ltd")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip


@dataclass(frozen=True)
class SitePage:
    """One file of the site: its URL path, bytes, and what it is."""

    path: str
    data: bytes
    #: listing, original, private, one of COPY_KINDS, or robots_txt
    kind: str
    #: URL path of the original, for a copy
    of: str | None = None
    change: str | None = None


@dataclass
class Site:
    """The pages, what each is (:attr:`truth`), and the canonical tokens of each HTML page."""

    pages: list[SitePage]
    truth: dict[str, dict[str, Any]]
    tokens: dict[str, list[str]]
    #: where the sentences came from, in words
    text_source: str
    seed: int
    extra: dict[str, Any] = field(default_factory=dict)

    def write(self, root: Path) -> Path:
        """Write the site under ``root/site`` and the truth to ``root/TRUTH.json``; the site
        directory (to serve)."""
        site = root / "site"
        for page in self.pages:
            relative = page.path.lstrip("/")
            if not relative or relative.endswith("/"):
                relative += "index.html"
            target = site / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(page.data)
        (root / "TRUTH.json").write_text(json.dumps(self.truth, indent=1) + "\n", "utf-8")
        return site

    @property
    def html_pages(self) -> list[SitePage]:
        return [p for p in self.pages if p.kind != "robots_txt"]

    def digest(self) -> str:
        """A short hash of every path and byte: equal digests, equal sites."""
        h = hashlib.sha256()
        for page in sorted(self.pages, key=lambda p: p.path):
            h.update(page.path.encode() + b"\0" + page.data + b"\0")
        return h.hexdigest()[:16]

    def summary(self) -> dict[str, Any]:
        kinds = Counter(p.kind for p in self.html_pages)
        copies = sum(n for k, n in kinds.items() if k in COPY_KINDS)
        return {
            "pages": len(self.html_pages),
            "kinds": dict(kinds),
            "copies": copies,
            "copy_fraction": round(copies / max(len(self.html_pages), 1), 3),
            "megabytes": round(sum(len(p.data) for p in self.pages) / 1e6, 2),
            "text_source": self.text_source,
            "seed": self.seed,
            "digest": self.digest(),
            **self.extra,
        }


# --- sentences --------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def corpus_sentences(needed: int, rng: random.Random) -> tuple[list[str], int]:
    """At least ``needed`` distinct prose sentences of the Debian documentation corpus, in a
    seeded order, and how many corpus pages they came from.

    Prose only: the text of ``<p>`` elements, cut after ``.``, ``!`` or ``?``, kept when it
    starts with a capital, ends with a full stop, has 6 to 40 canonical tokens and is mostly
    words (not code). Two sentences with the same canonical tokens count once, so that distinct
    articles never share a sentence. Raises ``RuntimeError`` if the corpus cannot be
    installed or is too small.
    """
    import lxml.html

    from benchmarks.corpus import html_corpus

    files = list(html_corpus())
    rng.shuffle(files)
    seen: set[tuple[str, ...]] = set()
    sentences: list[str] = []
    used = 0
    for path in files:
        if len(sentences) >= needed:
            break
        used += 1
        try:
            root = lxml.html.fromstring(path.read_bytes())
        except (ValueError, lxml.etree.ParserError):
            continue
        for element in root.iter("p"):
            text = " ".join(element.text_content().split())
            for sentence in _SENTENCE_END.split(text):
                if not (sentence[:1].isupper() and sentence[-1:] in ".!?"):
                    continue
                tokens = text_tokens(sentence)
                if not 6 <= len(tokens) <= 40:
                    continue
                if sum(t.isalpha() for t in tokens) < 0.8 * len(tokens):
                    continue
                key = tuple(tokens)
                if key not in seen:
                    seen.add(key)
                    sentences.append(sentence)
    if len(sentences) < needed:
        raise RuntimeError(f"the corpus gave {len(sentences):,} sentences; {needed:,} needed")
    rng.shuffle(sentences)
    return sentences, used


def zipf_sentences(needed: int, rng: random.Random, vocabulary: int = 20_000) -> list[str]:
    """``needed`` sentences of 6 to 28 made-up words drawn from a Zipf law (exponent 1.05).

    The words are syllable strings, distinct, ranked at random; word *k* has weight
    ``1 / k**1.05``, as word frequencies in English roughly have.
    """
    syllables = [c + v for c in "bdfghklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ay", "or")]
    words: set[str] = set()
    while len(words) < vocabulary:
        words.add("".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
    ranked = sorted(words)
    rng.shuffle(ranked)
    cumulative = list(_accumulate(1 / (k + 1) ** 1.05 for k in range(len(ranked))))
    out = []
    for _ in range(needed):
        length = rng.randint(6, 28)
        chosen = rng.choices(ranked, cum_weights=cumulative, k=length)
        out.append(" ".join(chosen).capitalize() + ".")
    return out


def _accumulate(values: Any) -> Any:
    total = 0.0
    for v in values:
        total += v
        yield total


# --- articles and their HTML ------------------------------------------------------------------


@dataclass
class Article:
    path: str
    title: str
    date: str
    paragraphs: list[str]
    #: (path, title) of three other articles
    related: list[tuple[str, str]] = field(default_factory=list)


STYLE = (
    "body{font-family:Georgia,serif;max-width:64em;margin:0 auto;padding:0 1em;color:#222}"
    "nav ul{list-style:none;padding:0}nav li{display:inline;margin-right:1em}"
    ".columns{display:flex;gap:2em}main{flex:3}aside{flex:1;font-size:90%}"
    "footer{border-top:1px solid #999;margin-top:2em;font-size:85%}"
)

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} - {site}</title>
<style>{style}</style>
</head>
<body>
<header>
<p class="brand"><a href="/">{site}</a></p>
<nav>
<ul>
<li><a href="/">Home</a></li>
<li><a href="/list/0001.html">Latest articles</a></li>
<li><a href="/about.html">About the digest</a></li>
</ul>
</nav>
</header>
<div class="columns">
<main>
{main}
</main>
<aside>
<h2>About this digest</h2>
<p>Every week the editors collect notes on programming languages and databases from the \
manuals, and publish the ones readers asked about. Suggestions are welcome at the front desk.</p>
<p><a href="/list/0001.html">Browse every article</a></p>
</aside>
</div>
<footer>
{footer_extra}<p>{site} is an imaginary magazine: this site exists to measure a crawler that \
notices near-duplicate pages. Its articles are sentences taken from free documentation.</p>
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
<p>Printed from {site}.</p>
<h1>{title}</h1>
<p class="byline">{date}</p>
{body}
</body>
</html>
"""


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def article_body(article: Article) -> str:
    return "\n".join(f"<p>{_esc(p)}</p>" for p in article.paragraphs)


def article_html(article: Article, footer_extra: str = "", after_body: str = "") -> str:
    related = "\n".join(
        f'<li><a href="{path}">{_esc(title)}</a></li>' for path, title in article.related
    )
    main = (
        f"<article>\n<h1>{_esc(article.title)}</h1>\n"
        f'<p class="byline">Published {article.date}</p>\n'
        f"{article_body(article)}\n{after_body}</article>\n"
        f'<section class="related">\n<h2>Related reading</h2>\n<ul>\n{related}\n</ul>\n'
        "</section>"
    )
    return page_html(article.title, main, footer_extra)


def page_html(title: str, main: str, footer_extra: str = "") -> str:
    return TEMPLATE.format(
        title=_esc(title), site=SITE_NAME, style=STYLE, main=main, footer_extra=footer_extra
    )


def listing_html(number: int, total: int, links: Sequence[tuple[str, str]]) -> str:
    items = "\n".join(f'<li><a href="{path}">{_esc(title)}</a></li>' for path, title in links)
    pager = []
    if number > 1:
        pager.append(f'<a href="/list/{number - 1:04d}.html">Newer articles</a>')
    if number < total:
        pager.append(f'<a href="/list/{number + 1:04d}.html">Older articles</a>')
    main = (
        f"<h1>Articles, page {number} of {total}</h1>\n<ul>\n{items}\n</ul>\n"
        f"<p>{' | '.join(pager)}</p>"
    )
    return page_html(f"Articles, page {number}", main)


def home_html(listings: int, private: Sequence[str]) -> str:
    pages = "\n".join(
        f'<li><a href="/list/{n:04d}.html">Articles, page {n}</a></li>'
        for n in range(1, listings + 1)
    )
    members = "\n".join(f'<li><a href="{p}">Contributor notes {i}</a></li>'
                        for i, p in enumerate(private, 1))  # fmt: skip
    main = (
        f"<h1>Welcome to {SITE_NAME}</h1>\n<p>Notes on programming and databases, collected "
        f"from the manuals every week.</p>\n<h2>Every page of articles</h2>\n<ul>\n{pages}\n</ul>\n"
        f"<h2>For contributors</h2>\n<ul>\n{members}\n</ul>\n"
        '<p><a href="/about.html">About the digest</a></p>'
    )
    return page_html("Home", main)


ABOUT = page_html(
    "About the digest",
    "<h1>About the digest</h1>\n<p>The digest is written by a small team of volunteers who "
    "read the manuals so that you do not have to. It has no advertising and no tracking.</p>",
)

ROBOTS = b"User-agent: *\nDisallow: /private/\n"


# --- the copies ---------------------------------------------------------------------------------


def remarked(page: str) -> str:
    """The same text in other markup: attributes, wrappers, comments, indentation, tag case."""
    page = page.replace("<p>", '<p class="para">').replace("</p>", "</P>")
    page = page.replace("<article>", '<ARTICLE class="story">\n<!-- partner feed copy -->')
    page = page.replace("</article>", "</ARTICLE>")
    page = page.replace("<main>", '<div id="wrap"><main role="main">').replace(
        "</main>", "</main></div>"
    )
    return "\n".join("  " + line if line.startswith("<") else line for line in page.splitlines())


def with_copyright(article: Article, rng: random.Random) -> str:
    owner = rng.choice(_OWNERS)
    line = (f"<p>Copyright {rng.randint(2015, 2025)} {owner}. Reprinted with permission; "
            "all rights reserved.</p>\n")  # fmt: skip
    return article_html(article, after_body=line)


def with_links_rewritten(page: str, host: str) -> str:
    """Every site-relative link pointed at ``host``, and a banner saying so."""
    page = page.replace('href="/', f'href="http://{host}/')
    banner = f"<p>You are reading a copy kept by the mirror at {host}.</p>\n<article>"
    return page.replace("<article>", banner, 1)


def with_words_changed(
    article: Article, rng: random.Random, vocabulary: list[str]
) -> tuple[Article, int]:
    """The article with one to six of its words replaced by other words."""
    paragraphs = [p.split(" ") for p in article.paragraphs]
    slots = [(i, j) for i, words in enumerate(paragraphs) for j, w in enumerate(words)
             if w.isalpha() and len(w) > 2]  # fmt: skip
    count = min(rng.randint(1, 6), len(slots))
    for i, j in rng.sample(slots, count):
        old = paragraphs[i][j]
        new = rng.choice(vocabulary)
        while new.lower() == old.lower():
            new = rng.choice(vocabulary)
        paragraphs[i][j] = new
    changed = Article(article.path, article.title, article.date,
                      [" ".join(words) for words in paragraphs], article.related)  # fmt: skip
    return changed, count


def printable_html(article: Article) -> str:
    return PRINT_TEMPLATE.format(
        title=_esc(article.title), site=SITE_NAME, date=article.date, body=article_body(article)
    )


def truncated(page: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The page cut off at a space, as a transfer that broke off leaves it: anywhere from 60%
    of the way through its article to the end of its footer; and where."""
    start = page.index(b'<p class="byline">')
    end = page.index(b"</article>")
    stop = page.index(b"</footer>")
    at = rng.randint(start + int(0.6 * (end - start)), stop)
    cut = page.rfind(b" ", start, at)
    cut = cut if cut > start else at
    where = (
        f"after {(cut - start) / (end - start):.0%} of the article"
        if cut < end
        else (
            "after the article, in the "
            + ("footer" if cut > page.index(b"<footer>") else "related links and sidebar")
        )
    )
    return page[:cut], where


# --- the site ---------------------------------------------------------------------------------


def _title(sentence: str, used: set[str]) -> str:
    title = " ".join(re.sub(r"[^\w\s'-]", " ", sentence).split()[:6]) or "Untitled"
    base, n = title, 2
    while title in used:
        title, n = f"{base} ({n})", n + 1
    used.add(title)
    return title


def build_site(
    pages: int = 2400, seed: int = 1, copy_fraction: float = 0.35, text: str = "corpus"
) -> Site:
    """The site: ``pages`` HTML pages (robots.txt aside), ``copy_fraction`` of them copies.

    ``text`` is ``"corpus"`` (real sentences, falling back to ``"zipf"`` if the corpus cannot
    be installed) or ``"zipf"``.
    """
    if pages < 20:
        raise ValueError(f"pages must be at least 20; got {pages}")
    if not 0 <= copy_fraction < 0.9:
        raise ValueError(f"copy_fraction must be in [0, 0.9); got {copy_fraction}")
    if text not in ("corpus", "zipf"):
        raise ValueError(f"text must be 'corpus' or 'zipf'; got {text!r}")
    rng = random.Random(seed)
    fixed = 2 + PRIVATE_PAGES  # home, about, private pages
    listings = math.ceil((pages - fixed) / (PER_LISTING + 1))
    content = pages - fixed - listings
    copies = math.ceil(copy_fraction * pages)
    originals = content - copies
    if originals < 4:
        raise ValueError(f"{pages} pages leave too few originals ({originals})")

    # the sentences: about 22 per article on average (3-9 paragraphs of 2-5 sentences)
    plan = [[rng.randint(2, 5) for _ in range(rng.randint(3, 9))] for _ in range(originals)]
    needed = sum(map(sum, plan)) + originals  # and some to spare for titles
    extra: dict[str, Any] = {}
    source = text
    if text == "corpus":
        try:
            pool, used = corpus_sentences(needed, random.Random(rng.random()))
            extra["corpus_pages_used"] = used
            text_source = (f"real sentences from {used:,} pages of Debian's Python and "
                           "PostgreSQL documentation (benchmarks.corpus), none used twice")  # fmt: skip
        except RuntimeError as exc:
            source, extra["corpus_error"] = "zipf", str(exc)
    if source == "zipf":
        pool = zipf_sentences(needed, random.Random(rng.random()))
        text_source = "a seeded word generator with a Zipf vocabulary of 20,000 made-up words"
    vocabulary = sorted({w for s in pool[:2000] for w in s.split() if w.isalpha() and len(w) > 2})

    used_titles: set[str] = set()
    articles: list[Article] = []
    sentences = iter(pool)
    for number, shape in enumerate(plan, 1):
        paragraphs = [" ".join(next(sentences) for _ in range(n)) for n in shape]
        title = _title(paragraphs[0], used_titles)
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:48] or "article"
        date = f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(2012, 2025)}"
        articles.append(Article(f"/articles/{number:05d}-{slug}.html", title, date, paragraphs))
    for article in articles:
        others = rng.sample(articles, 4)
        article.related = [(a.path, a.title) for a in others if a is not article][:3]

    out: list[SitePage] = []
    original_html: dict[str, str] = {}
    for article in articles:
        original_html[article.path] = article_html(article)
        out.append(SitePage(article.path, original_html[article.path].encode(), "original"))

    kinds = list(COPY_KINDS)
    weights = list(COPY_KINDS.values())
    taken: set[str] = set()
    listed: list[tuple[str, str]] = [(a.path, a.title) for a in articles]
    for _ in range(copies):
        kind = rng.choices(kinds, weights)[0]
        article = rng.choice(articles)
        path = COPY_PREFIX[kind] + article.path
        n = 2
        while path in taken:
            path = f"{COPY_PREFIX[kind]}{article.path[:-5]}-{n}.html"
            n += 1
        taken.add(path)
        data, change = _copy(kind, article, original_html[article.path], rng, vocabulary)
        out.append(SitePage(path, data, kind, of=article.path, change=change))
        listed.append((path, article.title))

    rng.shuffle(listed)
    total = listings
    for number in range(1, total + 1):
        chunk = listed[(number - 1) * PER_LISTING : number * PER_LISTING]
        out.append(SitePage(f"/list/{number:04d}.html",
                            listing_html(number, total, chunk).encode(), "listing"))  # fmt: skip
    private = [f"/private/notes-{i}.html" for i in range(1, PRIVATE_PAGES + 1)]
    for i, path in enumerate(private, 1):
        body = f"<h1>Contributor notes {i}</h1>\n<p>For the editors only: draft {i}.</p>"
        out.append(SitePage(path, page_html(f"Contributor notes {i}", body).encode(), "private"))
    out.append(SitePage("/", home_html(total, private).encode(), "listing"))
    out.append(SitePage("/about.html", ABOUT.encode(), "listing"))
    out.append(SitePage("/robots.txt", ROBOTS, "robots_txt"))
    leftover = listed[total * PER_LISTING :]
    if leftover:
        raise AssertionError(f"{len(leftover)} pages were not linked")

    tokens = {p.path: html_tokens(p.data) for p in out if p.kind != "robots_txt"}
    site = Site(out, measure(out, tokens), tokens, text_source, seed, extra)
    problems = check(site)
    if problems:
        raise AssertionError("the generated site misses its targets:\n  " + "\n  ".join(problems))
    return site


def _copy(
    kind: str, article: Article, original: str, rng: random.Random, vocabulary: list[str]
) -> tuple[bytes, str]:
    if kind == "exact_mirror":
        return original.encode(), "byte-identical copy"
    if kind == "markup_variant":
        return remarked(original).encode(), "same text in other markup"
    if kind == "copyright":
        return with_copyright(article, rng).encode(), "a copyright line added"
    if kind == "links_rewritten":
        host = f"mirror{rng.randint(1, 9)}.digest-copies.example"
        return with_links_rewritten(original, host).encode(), f"links rewritten for {host}"
    if kind == "words_changed":
        changed, count = with_words_changed(article, rng, vocabulary)
        return article_html(changed).encode(), f"{count} word{'s' * (count > 1)} changed"
    if kind == "printable":
        return printable_html(article).encode(), "the article alone, without the template"
    if kind == "truncated":
        data, where = truncated(original.encode(), rng)
        return data, f"cut off {where}"
    raise ValueError(f"unknown copy kind {kind!r}")


def measure(pages: list[SitePage], tokens: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """The truth: each page's kind and, for a copy, its original and the exact measures."""
    sets = {path: shingles(t, SHINGLE_SIZE, OPTION) for path, t in tokens.items()}
    truth: dict[str, dict[str, Any]] = {}
    for page in pages:
        entry: dict[str, Any] = {"kind": page.kind}
        if page.of is not None:
            a, b = sets[page.path], sets[page.of]
            entry.update(
                of=page.of,
                resemblance=round(exact_resemblance(a, b), 4),
                containment_in_original=round(exact_containment(a, b), 4),
                original_contained=round(exact_containment(b, a), 4),
                same_tokens=tokens[page.path] == tokens[page.of],
                change=page.change,
            )
        truth[page.path] = entry
    return truth


def check(site: Site) -> list[str]:
    """What would make the benchmark's judgement meaningless, if any."""
    problems = []
    for page in site.pages:
        entry = site.truth[page.path]
        if page.kind in ("exact_mirror", "markup_variant") and not entry["same_tokens"]:
            problems.append(f"{page.path}: a {page.kind} with other tokens than {page.of}")
        if page.kind in ("copyright", "links_rewritten") and entry["resemblance"] < 0.8:
            problems.append(f"{page.path}: {page.kind} at resemblance {entry['resemblance']}")
    return problems
