"""crawler.review.log and crawler.review.explain (the facts behind ``log``, ``explain``,
``report``) on stores of real crawls, and crawler.review.textdiff (the side-by-side view
``explain`` prints)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.cli import main
from crawler.config import Config
from crawler.demo import SITE_DIR, load_truth
from crawler.review.explain import UnknownURL, explain
from crawler.review.log import LogFilter, decisions, parse_since
from crawler.review.textdiff import cut_context, differences, passages, side_by_side
from dedup.canonical import html_tokens, text_tokens
from dedup.document import content_hash
from storage.records import DROPPED
from storage.store import Store
from storage.texts import stored_text, tokens_of_text
from storage.verify import verify_store
from tests.conftest import html_corpus_or_skip

ROOT = Path(__file__).resolve().parents[2]
TRUTH = load_truth()["pages"]


def neardup(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command line in a child process (a crawl runs a reactor, once per process)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "crawler.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store made by ``neardup demo``: a real crawl of the bundled site, texts kept."""
    store = tmp_path_factory.mktemp("review") / "demo"
    proc = neardup("demo", "--store", str(store), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return {"store": store, "base": report["site"], "log": Path(report["log"])}


@pytest.fixture(scope="module")
def cut(demo_site: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real crawl that keeps at most 300 bytes of each dropped page's text."""
    store = tmp_path_factory.mktemp("review") / "cut"
    proc = neardup("crawl", demo_site + "/", "--store", str(store), "--quiet",
                   "--set", "crawl.concurrency=1", "--set", "crawl.autothrottle=false",
                   "--set", "review.max_text_bytes=300")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return store


def _path(url: str, base: str) -> str:
    return url[len(base) :]


# --- decisions() --------------------------------------------------------------------------------


def test_decisions_are_the_log_lines_parsed_and_verbatim(demo):
    found = list(decisions(demo["store"]))
    lines = demo["log"].read_text(encoding="utf-8").splitlines()
    assert [d.line for d in found] == lines
    assert [d.log_id for d in found] == [demo["log"].stem] * len(lines)
    assert [d.url for d in found] == [json.loads(line)["url"] for line in lines]
    assert {_path(d.url, demo["base"]) for d in found} == set(TRUTH) - {"/robots.txt"}
    # an open store works as well as its directory
    with Store.open(demo["store"], readonly=True) as store:
        assert [d.line for d in decisions(store)] == lines


def test_decision_filters(demo):
    store, base = demo["store"], demo["base"]

    def paths(**kw: Any) -> list[str]:
        return [_path(d.url, base) for d in decisions(store, LogFilter(**kw))]

    near = {p for p, t in TRUTH.items() if t["kind"] == "near_duplicate"}
    mirrors = {p for p, t in TRUTH.items() if t["kind"] == "exact_mirror"}
    assert set(paths(decisions=["near_duplicate"])) == near
    assert set(paths(decisions=["dropped"])) == near | mirrors
    assert set(paths(decisions=["dropped", "skipped"])) == near | mirrors | {
        p for p, t in TRUTH.items() if t["kind"] in ("not_html", "disallowed")
    }
    assert paths(url_contains="/ARCHIVE/") == paths(url_contains="/archive/") != []
    assert all("/archive/" in p for p in paths(url_contains="/archive/"))
    everything = paths()
    assert paths(limit=3) == everything[:3]
    assert paths(limit=0) == []
    assert paths(decisions=["near_duplicate"], limit=1) == paths(decisions=["near_duplicate"])[:1]
    assert paths(since=time.time() + 3600) == []
    assert paths(since=time.time() - 3600) == everything
    with pytest.raises(ValueError, match="unknown decision 'nearly'.*known: kept"):
        LogFilter(decisions=["nearly"])


def test_decisions_skip_a_line_cut_by_a_crash_and_name_a_broken_one(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_text('{"url": "u1", "decision": "kept", "time": 1}\n{"url": "u2"')
    assert [d.url for d in decisions(tmp_path)] == ["u1"]
    (logs / "b.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match=r"b\.jsonl:1: not a JSON object"):
        list(decisions(tmp_path))
    assert list(decisions(tmp_path / "nowhere")) == []


def test_parse_since():
    now = datetime(2025, 3, 4, 12, 0, tzinfo=timezone.utc)
    for text, age in (("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1w", 604800),
                      ("1.5h", 5400), (" 2H ", 7200)):  # fmt: skip
        assert parse_since(text, now) == (now - timedelta(seconds=age)).timestamp()
    assert parse_since("2025-03-04T10:00:00Z") == parse_since("2h", now)
    assert parse_since("2025-03-04T11:00+01:00") == parse_since("2h", now)
    assert parse_since("2025-03-04") == datetime(2025, 3, 4).timestamp()  # local midnight
    for bad in ("yesterday", "", "2h ago", "-2h"):
        with pytest.raises(ValueError, match="cannot read"):
            parse_since(bad)


# --- the stored text --------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)


@given(texts, st.sampled_from(["word", "char", "line"]), st.integers(0, 400))
def test_a_stored_text_gives_back_a_prefix_of_the_stream_within_the_limit(text, unit, limit):
    tokens = text_tokens(text, unit)
    assert tokens_of_text(stored_text(tokens, unit), unit) == tokens  # lossless
    kept = tokens_of_text(stored_text(tokens, unit, limit), unit)
    assert kept == tokens[: len(kept)]  # a prefix, cut between tokens
    assert len(stored_text(tokens, unit, limit).encode("utf-8")) <= limit
    if len(kept) < len(tokens):  # and the longest prefix that fits
        assert len(stored_text(tokens[: len(kept) + 1], unit).encode("utf-8")) > limit


def test_the_crawl_keeps_the_text_of_dropped_pages_only(demo):
    with Store.open(demo["store"], readonly=True) as store:
        for doc_id, record in store.documents():
            text = store.text(doc_id)
            if record.decision in DROPPED:
                assert text is not None
                tokens = tokens_of_text(text, store.params.unit)
                # the very stream the page was sketched from
                assert content_hash(tokens) == record.content_hash
            else:
                assert text is None, record.url
    assert verify_store(demo["store"]).ok


# --- explain() ----------------------------------------------------------------------------------


def _log_entry(demo: dict[str, Any], url: str) -> dict[str, Any]:
    return next(d.entry for d in decisions(demo["store"]) if d.url == url)


@pytest.mark.parametrize(
    "path", [p for p, t in TRUTH.items() if t["kind"] in ("near_duplicate", "exact_mirror")]
)
def test_explain_a_dropped_page(demo, path, capsys):
    url = demo["base"] + path
    with Store.open(demo["store"], readonly=True) as store:
        e = explain(store, url)
    truth, log = TRUTH[path], _log_entry(demo, url)
    assert e.dropped and e.original is not None and e.comparison is not None
    assert e.original.url == demo["base"] + truth["of"]
    assert e.original.decision == "kept" and e.original.text_source == "page store"
    assert e.page.text_source == "kept text" and e.page.text_complete and not e.notes
    c = e.comparison
    # the estimate is the crawl's: the representative ("first") is the original's sketch
    assert c.estimated_resemblance == pytest.approx(log["resemblance"], abs=5e-5)
    assert (c.matches, c.sample_size) == (log["matches"], log["sample_size"])
    assert c.sample_size == e.params.size
    # exact values are neardup compare's on the two files of the site
    assert main(["compare", str(SITE_DIR / path.lstrip("/")),
                 str(SITE_DIR / truth["of"].lstrip("/")), "--json"]) == 0  # fmt: skip
    compared = json.loads(capsys.readouterr().out)["exact"]
    assert c.exact_resemblance == compared["resemblance"]
    assert c.exact_containment_a_in_b == compared["containment_a_in_b"]
    assert c.exact_containment_b_in_a == compared["containment_b_in_a"]
    assert c.shared_shingles == compared["shared_shingles"]
    assert not c.exact_partial
    if truth["kind"] == "exact_mirror":
        assert c.differences == () and c.exact_resemblance == 1.0
    else:
        assert c.differences and c.exact_resemblance < 1.0
    d = e.to_dict()
    json.dumps(d)  # plain data
    assert d["duplicate_of"]["url"] == e.original.url
    assert d["comparison"]["estimate"]["matches"] == log["matches"]


def test_explain_marks_the_three_changed_words(demo):
    url = demo["base"] + "/archive/mossop-beck-waterfalls.html"
    with Store.open(demo["store"], readonly=True) as store:
        c = explain(store, url).comparison
    assert c is not None
    changes = [(p.kind, p.a_text, p.b_text) for p in c.differences]
    assert changes == [("replace", "five", "six"), ("replace", "four", "three"),
                       ("replace", "april", "march")]  # fmt: skip
    assert c.shared_tokens == 423


def test_explain_a_kept_page_lists_the_pages_dropped_into_its_cluster(demo):
    with Store.open(demo["store"], readonly=True) as store:
        for path, truth in TRUTH.items():
            if truth["kind"] not in ("original", "printable"):
                continue
            e = explain(store, demo["base"] + path)
            copies = {p for p, t in TRUTH.items() if t.get("of") == path and
                      t["kind"] in ("near_duplicate", "exact_mirror")}  # fmt: skip
            assert e.page.decision == "kept" and e.original is None and e.cluster is not None
            assert e.cluster.first_url == e.page.url
            assert {_path(m.url, demo["base"]) for m in e.cluster.members} == copies
            assert e.cluster.size == 1 + len(copies)
            for m in e.cluster.members:
                assert m.resemblance is not None and m.resemblance >= 0.9
                assert m.decision == ("exact_duplicate" if TRUTH[_path(m.url, demo["base"])][
                    "kind"] == "exact_mirror" else "near_duplicate")  # fmt: skip


def test_explain_a_skipped_page_and_an_unknown_url(demo):
    with Store.open(demo["store"], readonly=True) as store:
        e = explain(store, demo["base"] + "/media/membership-form.pdf")
        assert e.page.decision == "skipped" and e.reason == "not_html"
        assert e.original is None and e.comparison is None and e.cluster is None
        with pytest.raises(UnknownURL, match="no decision for .*/nowhere.html.*--url-contains"):
            explain(store, demo["base"] + "/nowhere.html")


def test_a_cut_text_gives_exact_values_of_its_prefix_and_says_so(cut):
    with Store.open(cut, readonly=True) as store:
        dropped = [(d, r) for d, r in store.documents() if r.decision == "near_duplicate"]
        assert dropped
        for doc_id, record in dropped:
            assert len(store.text(doc_id).encode("utf-8")) <= 300
            e = explain(store, record.url)
            assert not e.page.text_complete and e.page.text_source == "kept text"
            assert any("only the first" in n and "review.max_text_bytes" in n for n in e.notes)
            c = e.comparison
            assert c is not None and c.exact_partial and c.has_exact
            # the estimates need no text: still the crawl's own
            assert c.matches is not None and c.estimated_resemblance >= 0.9
            # a prefix of ~45 words against the whole original: largely contained, little alike
            assert c.exact_containment_a_in_b > 0.5 and c.exact_resemblance < 0.3
            assert len(e.page.tokens) < 60 < len(e.original.tokens)


# --- crawler.review.textdiff: the side-by-side view explain prints --------------------------------------

words = st.lists(st.sampled_from(["a", "rose", "is", "the", "fell", "longerword"]), max_size=60)
_MARKS = re.compile(r"\[-|-\]|\{\+|\+\}")


def _columns(out: str, width: int) -> tuple[str, str]:
    column = (width - 3) // 2
    body = out.splitlines()[2:]
    left = " ".join(line[:column] for line in body)
    right = " ".join(line[column + 3 :] for line in body)
    return " ".join(_MARKS.sub("", left).split()), " ".join(_MARKS.sub("", right).split())


@given(words, words, st.integers(23, 100))
def test_the_full_view_shows_both_streams_whole_within_the_width(a, b, width):
    out = side_by_side(a, b, width=width, context=None)
    assert all(len(line) <= width for line in out.splitlines())  # long words are cut to fit
    if a == b:
        assert "identical" in out
    elif width >= 31:  # a column holds the longest marked word whole: "{+longerword+}"
        assert _columns(out, width) == (" ".join(a), " ".join(b))


@given(words, words, st.integers(0, 5))
def test_every_difference_is_marked_and_context_cut_to_size(a, b, context):
    # wide enough that no passage wraps: each marked run is on one line
    out = side_by_side(a, b, width=2000, context=context)
    marked = "\n".join(out.splitlines()[2:])
    for p in differences(a, b):
        if p.a_text:
            assert f"[-{p.a_text}-]" in marked
        if p.b_text:
            assert f"{{+{p.b_text}+}}" in marked
    # long shared passages are counted, not shown: no more than 2·context shared words between
    # two differences
    for p in passages(a, b) if a != b else []:
        if p.shared and p.a_end - p.a_start > 2 * context:
            # context is shown next to a difference on either side (an insertion into B at the
            # end of A still follows this passage)
            before = context if p.a_start > 0 or p.b_start > 0 else 0
            after = context if p.a_end < len(a) or p.b_end < len(b) else 0
            assert f"... {p.a_end - p.a_start - before - after:,} shared word" in marked
    # colour codes take no room
    coloured = side_by_side(a, b, width=80, context=context, colour=True)
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    assert all(len(ansi.sub("", line)) <= 80 for line in coloured.splitlines())


@given(words, words, st.integers(0, 5))
def test_cut_context_keeps_the_context_of_every_difference_and_counts_the_rest(a, b, context):
    found = passages(a, b)
    cut = cut_context(found, a, b, context)
    # the pieces still tile both streams, in order, with every difference untouched
    assert [(p.a_start, p.b_start) for p in cut[1:]] == [(p.a_end, p.b_end) for p in cut[:-1]]
    assert (cut[0].a_start, cut[-1].a_end) == (0, len(a)) if cut else a == b == []
    assert [p for p in cut if not p.shared] == [p for p in found if not p.shared]
    for n, p in enumerate(cut):
        if p.elided:  # only what lies more than `context` tokens from every difference
            assert p.a_text == " ".join(a[p.a_start : p.a_end]) == p.b_text
            neighbours = cut[max(0, n - 1) : n + 2]
            assert all(q.kind == "equal" and q.a_end - q.a_start == context
                       for q in neighbours if q is not p and context)  # fmt: skip
    # a shared passage is cut exactly when it is longer than 2·context: the terminal's rule
    if any(not p.shared for p in found):
        long = [p for p in found if p.shared and p.a_end - p.a_start > 2 * context]
        assert len(long) == sum(p.elided for p in cut)
    else:
        assert cut == found  # nothing to give context to: nothing cut


@given(words, words)
def test_passages_rebuilt_from_known_differences_are_the_alignment(a, b):
    # what the report does with explain's Comparison.differences: no second alignment
    assert passages(a, b, known=differences(a, b)) == passages(a, b)
    if a and b and differences(a, b):
        with pytest.raises(ValueError, match="not an alignment"):
            passages(a, b + ["extra"] * 3, known=differences(a, b))


def test_a_small_edit_of_a_real_page_is_all_the_alignment_shows():
    """Real pages, each with two words put in near the top, a little further down or in the
    middle: the alignment shows those two words and every other word as shared. difflib's
    "junk" heuristic alone aligned some such pages at a passage they repeat (a table of
    contents above and below), every other word then shown as differing."""
    pages = html_corpus_or_skip(300)[::10]
    wrong = []
    for path in pages:
        a = html_tokens(path.read_bytes())
        if len(a) < 300:
            continue
        for share in (0.02, 0.05, 0.1, 0.5):
            at = int(len(a) * share)
            b = [*a[:at], "two", "words", *a[at:]]
            found = [(p.kind, p.a_start, p.b_start, p.b_text) for p in differences(a, b)]
            if found != [("insert", at, at, "two words")]:
                wrong.append((path.name, share, found[:3]))
    assert not wrong, wrong


def test_long_streams_are_aligned_at_the_words_they_have_once_and_stay_exact():
    """Long streams (where difflib alone would take minutes or guess): the passages still tile
    both streams, shared passages are equal, and no word outside the edits is left out."""
    every = [w for path in html_corpus_or_skip(300)[:200] for w in html_tokens(path.read_bytes())]
    a = every[:40_000]
    rng = random.Random(7)
    b, edited = list(a), 0
    for _ in range(100):  # words replaced, and runs of five taken out
        at = rng.randrange(len(b))
        b[at], edited = "replacement", edited + 1
        at = rng.randrange(len(b) - 5)
        del b[at : at + 5]
        edited += 5
    found = passages(a, b)
    assert [(p.a_start, p.b_start) for p in found[1:]] == [(p.a_end, p.b_end) for p in found[:-1]]
    assert (found[0].a_start, found[0].b_start, found[-1].a_end, found[-1].b_end) == (
        0, 0, len(a), len(b))  # fmt: skip
    assert all(a[p.a_start : p.a_end] == b[p.b_start : p.b_end] for p in found if p.shared)
    assert sum(p.a_end - p.a_start for p in found if p.shared) >= len(a) - edited


def test_side_by_side_of_characters_and_lines():
    a, b = list("to be or not"), list("to be and not")
    out = side_by_side(a, b, unit="char", width=41)
    assert "to be [-or-] not" in out and "to be {+and+} not" in out
    lines = side_by_side(["first line", "second"], ["first line", "changed"], unit="line",
                         width=41).splitlines()  # fmt: skip
    assert lines[2].startswith("first line ") and lines[3].split() == ["[-second-]", "*",
                                                                       "{+changed+}"]  # fmt: skip
    with pytest.raises(ValueError, match="unit must be one of"):
        side_by_side(a, b, unit="sentence")


def test_the_review_config_reaches_the_crawl_settings():
    from scrapy.settings import Settings

    from crawler.config import apply_overrides
    from crawler.pipelines.session import session_settings
    from crawler.settings import scrapy_settings

    config = apply_overrides(Config(), {"review.keep_text": False, "review.max_text_bytes": 99})
    settings = session_settings(Settings(scrapy_settings(config)))
    assert (settings.keep_text, settings.max_text_bytes) == (False, 99)
    default = session_settings(Settings(scrapy_settings(Config())))
    assert (default.keep_text, default.max_text_bytes) == (True, Config().review.max_text_bytes)
    with pytest.raises(ValueError, match="NEARDUP_MAX_TEXT_BYTES must be >= 0; got -1"):
        session_settings(Settings({"NEARDUP_MAX_TEXT_BYTES": -1}))
