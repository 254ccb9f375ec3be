"""report.html: written beside report.md (a run, and ``eval compare --out``), self-contained (no
outside URL), every string escaped, and, opened in headless Chromium, showing the questions sorted
as the URL asks, the contexts, and the questions that moved."""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from evalfakes import (
    GET_USER,
    LIST_USERS,
    POST_USERS,
    USER_CREATE,
    demo_queries,
    engine_a,
    engine_b,
    make_context,
    users_lookup,
)
from specrag.cli import main
from specrag.evals.html_report import gold_ranks, write_comparison
from specrag.evals.querysets import EvalQuery, GoldEndpoint
from specrag.evals.runner import run_eval, write_run

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; "
                                                              ".ci/run installs it): the page is not opened in a browser")
# hostile strings: markup, an outside URL, quotes; none may become an element, an attribute or a request
HOSTILE = ('<img src="https://evil.example/x.png" onerror="document.title=\'pwned\'"></td></table>'
           '<script>document.title="pwned"</script> & "q" \'s\'')
HOSTILE_ID = 'h"><b onmouseover=x>1</b>'


class FixedBaseline:
    """A baseline whose ranking is the same list for every query: LIST_USERS, POST_USERS, GET_USER."""

    name = "flat"

    def rank(self, query: str, gold_apis: list[str], depth: int = 10) -> list[str]:
        return [LIST_USERS, POST_USERS, GET_USER][:depth]


def _queries() -> list[EvalQuery]:
    post = [GoldEndpoint(api="users_api", method="post", path="/users")]
    return [*demo_queries(), EvalQuery(id=HOSTILE_ID, query=HOSTILE, apis=["users_api"], endpoints=post,
                                       set_name="demo")]


def _run(engine, out: Path) -> Path:
    engine.answers[HOSTILE] = make_context(HOSTILE, [POST_USERS], [USER_CREATE], selected_apis=["users_api"])
    run = run_eval(_queries(), engine, users_lookup(), mode="offline", setting="fleet", run_info={},
                   progress=False, baselines=[FixedBaseline()])
    write_run(run, out)
    return out


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    return _run(engine_a(), tmp_path / "a"), _run(engine_b(), tmp_path / "b")


class Page(HTMLParser):
    """What a page is made of: its elements, attributes, style and script text, and per table
    the question bodies (data-id, classes) in document order."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.style, self.scripts, self.text = [], [], "", [], []
        self.bodies: dict[str, list[tuple[str, str]]] = {}
        self.sorted_by: dict[str, str] = {}
        self._table, self._in = None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        self._in = tag if tag in ("style", "script", "title") else None
        if tag == "table":
            self._table = a.get("id")
            if a.get("data-sorted"):
                self.sorted_by[self._table] = a["data-sorted"]
        if tag == "tbody" and "data-id" in a:
            self.bodies.setdefault(self._table, []).append((a["data-id"], a.get("class", "")))
        if tag == "th" and a.get("aria-sort"):
            self.sorted_by.setdefault(f"{self._table}:th", f"{a['data-key']}:{a['aria-sort']}")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "style":
            self.style += data
        elif self._in == "script":
            self.scripts.append(data)
        elif self._in == "title":
            self.title = data
        else:
            self.text.append(data)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_a_run_writes_a_self_contained_report_html_beside_report_md(runs):
    page_text = (runs[0] / "report.html").read_text(encoding="utf-8")
    assert (runs[0] / "report.md").is_file()
    page = Page(page_text)
    # nothing to fetch: no element that loads a resource, no src/href/action but in-page anchors, no CSS url()
    assert not {"img", "iframe", "link", "object", "embed", "audio", "video", "source", "base"} & set(page.tags)
    assert page.tags.count("script") == 1 and page.scripts and "fetch(" not in page.scripts[0]
    assert [(t, k, v) for t, k, v in page.attrs if k in ("src", "href", "action", "srcset", "xlink:href")
            and not v.startswith("#")] == []
    assert not [(t, k) for t, k, _ in page.attrs if k.startswith("on")]  # no event handler attribute at all
    assert "url(" not in page.style and "@import" not in page.style
    # the hostile query is shown as text, escaped; with its escaped form taken out, no URL is left
    assert html.escape(HOSTILE, quote=True) in page_text and HOSTILE not in page_text
    rest = page_text.replace(html.escape(HOSTILE, quote=True), "")
    assert "http://" not in rest and "https://" not in rest
    assert HOSTILE in "".join(page.text) and HOSTILE_ID in [i for i, _ in page.bodies["questions-table"]]
    # plots are inline SVG: one chart per set and overall (engine against the flat baseline), with tokens
    assert page.tags.count("svg") == 2 * 3 and "demo: means" in page_text and "more: means" in page_text


def test_gold_ranks_read_the_engine_and_baseline_rankings():
    run = run_eval(demo_queries(), engine_a(), users_lookup(), mode="offline", setting="fleet", run_info={},
                   progress=False, baselines=[FixedBaseline()])
    q1, q2, q3 = run.queries
    # engine A ranks LIST_USERS, USER_CREATE, POST_USERS...: POST /users is the 2nd endpoint, its chunk in the context
    assert gold_ranks(q1) == [("users_api POST /users", 2, True)]
    assert gold_ranks(q1, q1.baselines["flat"].ranking) == [("users_api POST /users", 2, True)]
    assert gold_ranks(q2) == [("users_api POST /users", None, False)]  # the query errored: no ranking, no context
    assert gold_ranks(q3) == [("users_api GET /users/{id}", 1, True)]


def test_compare_out_writes_both_reports_with_the_moved_questions(runs, tmp_path, capsys, monkeypatch):
    (tmp_path / "empty.env").touch()
    monkeypatch.setenv("SPECRAG_ENV_FILE", str(tmp_path / "empty.env"))
    assert main(["eval", "compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "better (1):" in out and f"written: {tmp_path / 'cmp' / 'report.md'}" in out
    assert "better (1):" in (tmp_path / "cmp" / "report.md").read_text()
    page = Page((tmp_path / "cmp" / "report.html").read_text(encoding="utf-8"))
    assert {t: [i for i, _ in b] for t, b in page.bodies.items()} == {"moves-better-table": ["q1"],
                                                                     "moves-worse-table": ["q3"]}
    text = " ".join(page.text)
    assert "no question got mixed" in text and "contexts A | B" in text and "A: 4 chunks, 40 tok" in text
    assert [(t, k, v) for t, k, v in page.attrs if k in ("src", "href")] == []


@needs_chromium
def test_chromium_shows_the_run_sorted_as_the_url_asks_and_draws_it(runs, tmp_path):
    shot = tmp_path / "report.png"
    proc = _chromium(tmp_path, "--dump-dom", f"--screenshot={shot}", "--window-size=900,700", "--hide-scrollbars",
                     (runs[0] / "report.html").as_uri() + "#sort=mrr:asc")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Page(proc.stdout)  # the DOM after the page's script ran
    run_mrr = {"q1": 0.5, "q2": 0.0, "q3": 1.0, HOSTILE_ID: 1.0}  # engine A: POST /users 2nd; q2 errors
    shown = [i for i, _ in dom.bodies["questions-table"]]
    assert shown == sorted(run_mrr, key=run_mrr.get) == ["q2", "q1", "q3", HOSTILE_ID]  # stable: ties keep order
    assert dom.sorted_by["questions-table"] == "mrr:asc"
    assert dom.sorted_by["questions-table:th"] == "mrr:ascending"
    assert "failed" in dict(dom.bodies["questions-table"])["q2"]  # the erroring question is marked
    # the hostile markup stayed text: no image, one script (the page's), and the title is the page's
    assert "img" not in dom.tags and dom.tags.count("script") == 1 and "pwned" not in dom.title
    assert HOSTILE in "".join(dom.text)
    # and it draws: a PNG of the window's size with text, tables and coloured bars, not a blank page
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (900, 700)
    assert len(set(zlib.decompress(b"".join(_chunks(data, b"IDAT"))))) > 40


@needs_chromium
def test_chromium_opens_the_asked_question_of_a_comparison(runs, tmp_path):
    write_comparison(runs[0], runs[1], tmp_path / "cmp")
    url = (tmp_path / "cmp" / "report.html").as_uri() + "#sort=moves-worse-table.ctx_recall:desc&q=more/q3"
    proc = _chromium(tmp_path, "--dump-dom", url)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Page(proc.stdout)
    assert dict(dom.bodies["moves-worse-table"])["q3"].split() == ["q", "target"]
    assert dom.sorted_by["moves-worse-table"] == "ctx_recall:desc" and "moves-better-table" not in dom.sorted_by
    # q3's contexts, side by side, are open: A delivered GET /users/{userId}, B only GET /users
    opened = re.search(r'<tbody class="q target".*?</tbody>', proc.stdout, re.S).group(0)
    assert re.search(r"<details class=\"ctx\" open(=\"\")?>", opened)
    assert "A: 4 chunks, 40 tok" in opened and "B: 2 chunks, 20 tok" in opened


def _chunks(png: bytes, kind: bytes):
    pos = 8
    while pos < len(png):
        length, name = struct.unpack(">I4s", png[pos:pos + 8])
        if name == kind:
            yield png[pos + 8:pos + 8 + length]
        pos += 12 + length
