"""``report.html``: an eval run, or a comparison of two, as one page a person can look at.

One self-contained file (inline CSS, a little inline JS, SVG plots drawn here), so it opens from
a run folder, a CI artifact or a mail attachment with no network: it names no outside URL.
Written beside ``report.md`` by :func:`specrag.evals.runner.write_run` (a run) and by
:func:`write_comparison` (``specrag eval compare --out``). Every string a run holds (queries, ids, errors, settings) is
escaped: query sets and specs are hostile input. ``results.json`` records each context's chunk
ids and tokens, not its text, so the page shows those.

The question tables sort by a click on a column header; ``#sort=KEY:asc|desc`` in the URL (or
``#sort=TABLE.KEY:dir``) sorts on load, so a link can point at "worst MRR first", and ``#q=SET/ID``
opens that question's context (``#sort=mrr:asc&q=SET/ID`` does both).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path

from specrag.evals import metrics as m
from specrag.evals.compare import MOVES, QUERY_METRICS, RunComparison, compare_loaded, format_comparison
from specrag.evals.report import CONTEXT_COLUMNS, SCORE_COLUMNS, EvalRun, QueryResult, format_p, load_run

# the plotted metrics (all within 0..1): the context's first, then the ranking's
PLOTTED = {**{k: v for k, v in CONTEXT_COLUMNS.items() if k != "context_tokens"},
           **{k: SCORE_COLUMNS[k] for k in ("recall_at_5", "recall_at_10", "all_found_at_10", "mrr", "ndcg_at_10")}}
# the per-question columns of a run: metric key -> header
QUESTION_COLUMNS = {"selection_accuracy": "API acc", "ctx_recall": "R@ctx", "ctx_all_found": "all@ctx",
                    "ctx_api_precision": "prec API", "ctx_op_precision": "prec op", "context_tokens": "tokens",
                    "recall_at_10": "R@10", "mrr": "MRR", "ndcg_at_10": "nDCG@10"}
BASELINE_QUESTION_COLUMNS = {"ctx_recall": "R@ctx", "recall_at_10": "R@10"}
_PALETTE = ("#2563eb", "#f59e0b", "#10b981", "#a855f7", "#ef4444", "#64748b")
_A_COLOR, _B_COLOR = "#94a3b8", "#2563eb"
_LOWER_IS_BETTER = {"context_tokens", "tokens", "errors", "LLM calls/q", "fallback rate", "total ms p50"}
_WHOLE = {"context_tokens", "tokens", "errors", "total ms p50"}  # shown without decimals
_MISSING_RANK = 10_000  # sort key of a gold operation the ranking lacks


def e(value: object) -> str:
    """Text or attribute value, escaped (quotes too)."""
    return html.escape(str(value), quote=True)


# --------------------------------------------------------------------------------------- pages

def write_comparison(run_a: Path, run_b: Path, out_dir: Path) -> RunComparison:
    """Compare run A (the baseline) with run B and write ``report.md`` (the comparison's text) and
    ``report.html`` (:func:`render_compare_html`) into ``out_dir`` (created if missing)."""
    a, b = load_run(run_a), load_run(run_b)
    c = compare_loaded(run_a, a, run_b, b)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.md").write_text(f"# specrag eval compare\n\n```\n{format_comparison(c)}```\n",
                                       encoding="utf-8")
    (out_dir / "report.html").write_text(render_compare_html(c, a, b), encoding="utf-8")
    return c


def render_run_html(run: EvalRun) -> str:
    """The page of one run: its header, per set a plot and table of the engine against the
    baselines, and every question (sortable) with its gold ranks, metrics and context."""
    info = run.run
    title = f"specrag eval: {info.setting} setting, {info.mode} mode"
    body = [f"<h1>{e(title)}</h1>", _run_header(run), "<h2>Per set: the engine against the baselines</h2>",
            "<p class=note>Means over the questions. Context metrics first (what the user receives), then the "
            "ranking's (top 10). p: two-sided paired randomization test of the engine against each baseline.</p>"]
    for name, summary in run.rows():
        body.append(_set_section(name, summary))
    body += [f"<h2 id=questions>Questions ({len(run.queries)})</h2>", _questions_help(),
             _filter_box("questions-table"), _questions_table(run)]
    return _page(title, body)


def render_compare_html(c: RunComparison, a: EvalRun, b: EvalRun) -> str:
    """The page of a comparison: per set A against B, then the questions that got better,
    worse or mixed, with both runs' gold ranks, metrics and contexts side by side."""
    title = "specrag eval compare"
    body = [f"<h1>{e(title)}</h1>", _compare_header(c)]
    body.append("<h2>Per set: A against B</h2><p class=note>p: two-sided paired randomization test over the "
                "questions both runs hold (in that set).</p>")
    for s in c.sets:
        body.append(_compare_set_section(s))
    a_by, b_by = {(q.set, q.id): q for q in a.queries}, {(q.set, q.id): q for q in b.queries}
    paired = sum((q.set, q.id) in b_by for q in a.queries)
    counts = ", ".join(f"{sum(mv.move == g for mv in c.moves)} {g}" for g in MOVES)
    counts += f", {paired - len(c.moves)} unchanged of {paired} in both"
    body.append(f"<h2 id=moves>Questions that moved ({counts})</h2><p class=note>Better: R@ctx, R@10, MRR or "
                "completeness rose and none fell; worse: one fell and none rose; mixed: both. Each metric cell "
                "reads A &rarr; B and sorts by the change. In the contexts, chunks the other run lacks are "
                "marked.</p>")
    for group in MOVES:
        moves = [mv for mv in c.moves if mv.move == group]
        body.append(f"<h3 id=moves-{group}>{e(group)} ({len(moves)})</h3>")
        if not moves:
            body.append(f"<p class=note>no question got {e(group)}</p>")
        else:
            body += [_filter_box(f"moves-{group}-table"),
                     _moves_table(f"moves-{group}-table", [(a_by[(mv.set, mv.id)], b_by[(mv.set, mv.id)])
                                                           for mv in moves])]
    for label, keys in (("only in A", c.only_in_a), ("only in B", c.only_in_b)):
        if keys:
            body.append(f"<h3>{e(label)} ({len(keys)})</h3><p>{e(', '.join(keys))}</p>")
    return _page(title, body)


# --------------------------------------------------------------------------------------- plots

def bar_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, str, Sequence[float | None]]],
              vmax: float = 1.0) -> str:
    """Grouped vertical bars: one group per category, one bar per (name, color, values) series;
    a missing value draws no bar but a dash. Values are in 0..vmax."""
    bar, left, top, plot_h = 18, 34, 34, 150
    group = max(bar * len(series) + 16, 6 * max(map(len, categories), default=0) + 6)
    gap = group - bar * len(series)
    width, height = left + group * len(categories) + 10, top + plot_h + 34
    out = [f'<svg class=chart width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{e(title)}"><title>{e(title)}</title>']
    out += _legend(series, left, 14)
    for i in range(5):
        y = top + plot_h - plot_h * i / 4
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" class=grid />'
                   f'<text x="{left - 4}" y="{y + 3:.1f}" class=axis text-anchor="end">{vmax * i / 4:g}</text>')
    for gi, category in enumerate(categories):
        x0 = left + gi * group + gap / 2
        for si, (name, color, values) in enumerate(series):
            value, x = values[gi], x0 + si * bar
            if value is None:
                out.append(f'<text x="{x + bar / 2:.1f}" y="{top + plot_h - 3}" class=val text-anchor="middle">'
                           f'&#8211;</text>')
                continue
            h = max(0.0, min(value, vmax)) / vmax * plot_h
            out.append(f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar - 2}" height="{h:.1f}" '
                       f'fill="{e(color)}"><title>{e(name)} {e(category)}: {value:.3f}</title></rect>'
                       f'<text x="{x + (bar - 2) / 2:.1f}" y="{top + plot_h - h - 2:.1f}" class=val '
                       f'text-anchor="middle">{_short(value)}</text>')
        out.append(f'<text x="{x0 + bar * len(series) / 2:.1f}" y="{top + plot_h + 14}" class=cat '
                   f'text-anchor="middle">{e(category)}</text>')
    out.append("</svg>")
    return "".join(out)


def hbar_chart(title: str, series: Sequence[tuple[str, str, float | None]], unit: str = "") -> str:
    """One horizontal bar per (name, color, value), scaled to the largest: a quantity with no
    fixed range (context tokens)."""
    label_w, bar_w, row = 110, 260, 20
    top = 22
    vmax = max([v for _, _, v in series if v is not None] + [1.0])
    height = top + row * len(series) + 6
    width = label_w + bar_w + 80
    out = [f'<svg class=chart width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{e(title)}"><title>{e(title)}</title>'
           f'<text x="0" y="13" class=cat>{e(title)}</text>']
    for i, (name, color, value) in enumerate(series):
        y = top + i * row
        out.append(f'<text x="{label_w - 6}" y="{y + 13}" class=cat text-anchor="end">{e(name)}</text>')
        if value is None:
            out.append(f'<text x="{label_w + 4}" y="{y + 13}" class=val>&#8211;</text>')
            continue
        w = value / vmax * bar_w
        out.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 6}" fill="{e(color)}">'
                   f'<title>{e(name)}: {value:.0f}{e(unit)}</title></rect>'
                   f'<text x="{label_w + w + 4:.1f}" y="{y + 13}" class=val>{value:.0f}{e(unit)}</text>')
    out.append("</svg>")
    return "".join(out)


def _legend(series: Sequence[tuple[str, str, object]], x: float, y: float) -> list[str]:
    out = []
    for name, color, _ in series:
        out.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{e(color)}" />'
                   f'<text x="{x + 14:.1f}" y="{y}" class=cat>{e(name)}</text>')
        x += 24 + 7 * len(name)
    return out


def _short(value: float) -> str:
    """A bar's label, narrow enough for the bar: .82, 1, 12."""
    return f"{value:.2f}".lstrip("0") if 0 <= value < 0.995 else f"{value:.0f}" if value.is_integer() or value >= 10 \
        else f"{value:.1f}"


# --------------------------------------------------------------------------------------- run page

def _run_header(run: EvalRun) -> str:
    info = run.run
    rows = [("time", info.timestamp or "-"), ("sets", ", ".join(info.sets) or "-"),
            ("corpus", ", ".join(info.corpus) or "-"), ("prompts", ", ".join(info.prompts) or "-"),
            ("versions", ", ".join(f"{k} {v}" for k, v in info.versions.items()) or "-"),
            ("results", f"schema_version {run.schema_version}, {len(run.queries)} questions")]
    return "<table class=kv>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows) + "</table>"


def _set_section(name: str, s: m.MetricSummary) -> str:
    names = sorted(s.baselines)
    colors = {n: _PALETTE[(i + 1) % len(_PALETTE)] for i, n in enumerate(names)}
    series = [("engine", _PALETTE[0], [s.scores.get(k) for k in PLOTTED])]
    series += [(n, colors[n], [s.baselines[n].get(k) for k in PLOTTED]) for n in names]
    tokens = [("engine", _PALETTE[0], s.mean_context_tokens)]
    tokens += [(n, colors[n], s.baselines[n].get("context_tokens")) for n in names]
    header = ["metric", "engine"] + [h for n in names for h in (n, "delta", "p")]
    rows = []
    for key, label in {**PLOTTED, "context_tokens": "tokens"}.items():
        ours = s.mean_context_tokens if key == "context_tokens" else s.scores.get(key)
        row = [e(label), _fmt(key, ours)]
        for n in names:
            base = s.baselines[n].get(key)
            delta = ours - base if ours is not None and base is not None else None
            row += [_fmt(key, base), _delta_html(key, delta), e(format_p(s.baseline_p.get(n, {}).get(key)))]
        rows.append(row)
    table = ("<table class=metrics><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>"
             + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</tbody></table>")
    latency = s.latency_ms.get("total")
    facts = (f"{s.n_queries} questions, {s.n_errors} errors"
             + (f", total latency p50 {latency.p50:.0f} ms / p95 {latency.p95:.0f} ms" if latency else "")
             + f", fallback rate {s.fallback_rate:.3f}, LLM calls/q {s.llm_calls_per_query:.2f}")
    return (f'<section class=set id="set-{e(name)}"><h3>{e(name)}</h3><p class=note>{e(facts)}</p>'
            f'<div class=setbody><div class=plots>{bar_chart(f"{name}: means", list(PLOTTED.values()), series)}'
            f'{hbar_chart("context tokens (mean)", tokens)}</div>{table}</div></section>')


def _questions_help() -> str:
    return ("<p class=note>Click a column header to sort (again to reverse). Gold: each gold operation with its "
            "rank in the engine's ranking (top 10; &#8211; when absent), <span class=badge>ctx</span> when its own "
            "chunk is in the context, and its rank in each baseline's ranking. Context: the chunk ids and tokens "
            "as results.json records them (primaries first, gold operations' chunks marked). Rows of failed "
            "questions (error, gold API missed, or a gold operation not in the top 10 or the context) are "
            "tinted.</p>")


def _questions_table(run: EvalRun) -> str:
    names = sorted({n for q in run.queries for n in q.baselines})
    columns = [("id", "set / id", "text"), ("query", "query", "text"), ("gold", "gold (worst rank)", "num")]
    columns += [(k, label, "num") for k, label in QUESTION_COLUMNS.items()]
    columns += [(f"{n}.{k}", f"{n} {label}", "num") for n in names for k, label in BASELINE_QUESTION_COLUMNS.items()]
    bodies = []
    for q in run.queries:
        cells = [_id_cell(q), _cell(q.query + (f"\n[error] {q.error}" if q.error else ""), sort=q.query, cls="query"),
                 _gold_cell(q, names)]
        cells += [_metric_cell(k, _value(q, k)) for k in QUESTION_COLUMNS]
        cells += [_metric_cell(k, m.baseline_value(q.baselines[n], k) if n in q.baselines else None)
                  for n in names for k in BASELINE_QUESTION_COLUMNS]
        bodies.append(_question_body(q, cells, _context_details(q, names), len(columns),
                                     "failed" if q.failed() else ""))
    return _sortable("questions-table", columns, bodies)


def _sortable(table_id: str, columns: Sequence[tuple[str, str, str]], bodies: Sequence[str]) -> str:
    """A table the page's script sorts: one ``<tbody>`` per question (its row, then its details
    row), sorted by the cells of the first row; ``columns`` are (key, header html, 'num'|'text')."""
    head = "".join(f'<th data-key="{e(k)}" data-type="{t}" tabindex=0>{label}</th>' for k, label, t in columns)
    return (f'<div class=scroll><table class="questions sortable" id="{e(table_id)}"><thead><tr>{head}</tr>'
            f'</thead>{"".join(bodies)}</table></div>')


def _question_body(q: QueryResult, cells: Sequence[str], details: str, width: int, cls: str = "") -> str:
    return (f'<tbody class="q {cls}" data-set="{e(q.set)}" data-id="{e(q.id)}"><tr class=main>{"".join(cells)}</tr>'
            f'<tr class=more><td colspan={width}>{details}</td></tr></tbody>')


def _id_cell(q: QueryResult) -> str:
    return f'<td data-v="{e(q.set)}/{e(q.id)}"><span class=setname>{e(q.set)}</span><br>{e(q.id)}</td>'


def _gold_cell(q: QueryResult, names: Sequence[str]) -> str:
    ranks = gold_ranks(q)
    base_ranks = {n: gold_ranks(q, q.baselines[n].ranking) for n in names if n in q.baselines}
    items = []
    for gi, (gold, rank, in_ctx) in enumerate(ranks):
        extra = "".join(f' <span class=base>{e(n)} {_rank(r[gi][1])}</span>' for n, r in base_ranks.items())
        items.append(f'<li><code>{e(gold)}</code> <b class=rank>{_rank(rank)}</b>'
                     f'{" <span class=badge>ctx</span>" if in_ctx else ""}{extra}</li>')
    return f'<td data-v="{_worst(ranks)}"><ul class=gold>{"".join(items)}</ul></td>'


def gold_ranks(q: QueryResult, ranking: Sequence[str] | None = None) -> list[tuple[str, int | None, bool]]:
    """(gold operation as 'api METHOD path', its 1-based rank in the ranking or None, whether its own
    chunk is in the query's context) per gold operation; the ranking is the engine's by default."""
    ids = [r.id for r in q.retrieved] if ranking is None else list(ranking)
    position = {ep: i for i, ep in enumerate(m.ranked_endpoints(ids), 1)}
    delivered = m.delivered_endpoints(q.context_ids)
    return [(f"{g.api} {g.method.upper()} {g.path}", position.get(g.key()), g.key() in delivered)
            for g in q.gold.endpoints]


def _context_details(q: QueryResult, names: Sequence[str]) -> str:
    gold = {g.key() for g in q.gold.endpoints}
    parts = [_chunk_list(q.context_ids, q.context_chunk_tokens, q.n_primary, gold)]
    facts = [("selected APIs", ", ".join(q.selected_apis) or "-"), ("expanded query", q.expanded_query or "-"),
             ("plan", " -> ".join(q.plan) or "-"),
             ("fallbacks", ", ".join(f"{f.stage}/{f.reason}" for f in q.fallbacks) or "-")]
    if q.error:
        facts.insert(0, ("error", q.error))
    parts.append("<dl>" + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in facts) + "</dl>")
    parts.append("<details><summary>ranking (top 10)</summary><ol>"
                 + "".join(f"<li><code>{e(r.id)}</code></li>" for r in q.retrieved) + "</ol></details>")
    for n in names:
        b = q.baselines.get(n)
        if b is not None and b.context_ids:
            parts.append(f"<details><summary>{e(n)}'s context: {len(b.context_ids)} chunks, "
                         f"{b.context_tokens or 0} tok</summary>"
                         f"{_chunk_list(b.context_ids, b.context_chunk_tokens, b.n_primary, gold)}</details>")
    return (f"<details class=ctx><summary>context: {len(q.context_ids)} chunks, {q.context_tokens} tok "
            f"(and ranking, plan, baselines' contexts)</summary><div class=ctxbody><div>{parts[0]}</div><div>"
            + "".join(parts[1:]) + "</div></div></details>")


def _chunk_list(ids: Sequence[str], tokens: Sequence[int], n_primary: int, gold: set,
                other: set[str] | None = None) -> str:
    """The context's chunks in order: primaries marked, gold operations' chunks marked, and (for a
    comparison) the chunks the other run's context lacks."""
    items = []
    for i, cid in enumerate(ids):
        classes = ["primary"] if i < n_primary else []
        classes += ["gold"] if m.chunk_endpoint(cid) in gold else []
        classes += ["only"] if other is not None and cid not in other else []
        tok = f" <span class=tok>{tokens[i]} tok</span>" if i < len(tokens) else ""
        items.append(f'<li class="{" ".join(classes)}"><code>{e(cid)}</code>{tok}</li>')
    return f'<ol class=chunks>{"".join(items)}</ol>' if items else "<p class=note>(empty context)</p>"


# --------------------------------------------------------------------------------------- compare page

def _compare_header(c: RunComparison) -> str:
    rows = [(label, f"{side.path} ({side.setting}/{side.mode}, {side.queries} questions, {side.timestamp}, "
                    f"schema_version {side.schema_version})") for label, side in (("A", c.a), ("B", c.b))]
    notes = [] if c.same_mode_and_setting else ["the runs differ in mode or setting; deltas mix both effects"]
    notes += c.notes
    out = "<table class=kv>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows) + "</table>"
    return out + "".join(f"<p class=warn>note: {e(n)}</p>" for n in notes)


def _compare_set_section(s) -> str:
    by_label = {d.metric: d for d in s.metrics}
    labels = [label for label in PLOTTED.values() if label in by_label]
    series = [("A", _A_COLOR, [by_label[x].a for x in labels]), ("B", _B_COLOR, [by_label[x].b for x in labels])]
    plots = bar_chart(f"{s.name}: A vs B", labels, series)
    if "tokens" in by_label:
        plots += hbar_chart("context tokens (mean)", [("A", _A_COLOR, by_label["tokens"].a),
                                                      ("B", _B_COLOR, by_label["tokens"].b)])
    rows = "".join(f"<tr><td>{e(d.metric)}</td><td>{_fmt(d.metric, d.a)}</td><td>{_fmt(d.metric, d.b)}</td>"
                   f"<td>{_delta_html(d.metric, d.delta)}</td><td>{e(format_p(d.p))}</td></tr>" for d in s.metrics)
    return (f'<section class=set id="set-{e(s.name)}"><h3>{e(s.name)} <span class=note>(n {s.n_a} &rarr; '
            f'{s.n_b})</span></h3><div class=setbody><div class=plots>{plots}</div><table class=metrics><thead><tr>'
            f'<th>metric</th><th>A</th><th>B</th><th>delta</th><th>p</th></tr></thead><tbody>{rows}</tbody></table>'
            f'</div></section>')


def _moves_table(table_id: str, pairs: Iterable[tuple[QueryResult, QueryResult]]) -> str:
    metrics = {**QUERY_METRICS, "ctx_op_precision": "prec op", "context_tokens": "tokens"}
    columns = [("id", "set / id", "text"), ("query", "query", "text"), ("gold", "gold: rank A &rarr; B", "num")]
    columns += [(k, f"{e(label)} A &rarr; B", "num") for k, label in metrics.items()]
    bodies = []
    for qa, qb in pairs:
        ra, rb = gold_ranks(qa), gold_ranks(qb)
        gold = "".join(f'<li><code>{e(g)}</code> <b class=rank>{_rank(x)}{" ctx" if cx else ""} &rarr; '
                       f'{_rank(y)}{" ctx" if cy else ""}</b></li>'
                       for (g, x, cx), (_, y, cy) in zip(ra, rb))
        cells = [_id_cell(qa), _cell(qa.query, cls="query"),
                 f'<td data-v="{_worst(rb) - _worst(ra)}"><ul class=gold>{gold}</ul></td>']
        for k in metrics:
            va, vb = _value(qa, k), _value(qb, k)
            delta = vb - va if va is not None and vb is not None else None
            cls = "" if not delta else "up" if (delta > 0) != (k == "context_tokens") else "down"
            cells.append(f'<td data-v="{"" if delta is None else f"{delta:.6f}"}" class="num {cls}">'
                         f'{_fmt(k, va)}&#8201;&rarr;&#8201;{_fmt(k, vb)}</td>')
        bodies.append(_question_body(qa, cells, _side_by_side(qa, qb), len(columns)))
    return _sortable(table_id, columns, bodies)


def _side_by_side(qa: QueryResult, qb: QueryResult) -> str:
    gold = {g.key() for g in qa.gold.endpoints}
    sides = []
    for label, q, other in (("A", qa, qb), ("B", qb, qa)):
        facts = f"selected: {', '.join(q.selected_apis) or '-'}" + (f"; error: {q.error}" if q.error else "")
        sides.append(f"<div><h4>{label}: {len(q.context_ids)} chunks, {q.context_tokens} tok</h4>"
                     f"<p class=note>{e(facts)}</p>"
                     f"{_chunk_list(q.context_ids, q.context_chunk_tokens, q.n_primary, gold, set(other.context_ids))}"
                     f"</div>")
    return (f"<details class=ctx><summary>contexts A | B: {len(qa.context_ids)} &rarr; {len(qb.context_ids)} chunks, "
            f"{qa.context_tokens} &rarr; {qb.context_tokens} tok</summary><div class=pair>{''.join(sides)}</div>"
            f"</details>")


# --------------------------------------------------------------------------------------- cells

def _value(q: QueryResult, key: str) -> float | None:
    return m.query_value(q, key)


def _cell(text: str, sort: str | None = None, cls: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    attrs += f' data-v="{e(sort)}"' if sort is not None else ""
    return f"<td{attrs}>{e(text)}</td>"


def _metric_cell(key: str, value: float | None) -> str:
    return f'<td class=num data-v="{"" if value is None else value}">{_fmt(key, value)}</td>'


def _fmt(key: str, value: float | None, digits: int = 3) -> str:
    return "&#8211;" if value is None else f"{value:.0f}" if key in _WHOLE else f"{value:.{digits}f}"


def _delta_html(key: str, value: float | None) -> str:
    if value is None:
        return "&#8211;"
    text = f"{value:+.0f}" if key in _WHOLE else f"{value:+.3f}"
    good = value < 0 if key in _LOWER_IS_BETTER else value > 0
    return f'<span class="{"up" if good else "down" if value else ""}">{text}</span>'


def _rank(rank: int | None) -> str:
    return "&#8211;" if rank is None else f"#{rank}"


def _worst(ranks: Sequence[tuple[str, int | None, bool]]) -> int:
    return max((r if r is not None else _MISSING_RANK for _, r, _ in ranks), default=_MISSING_RANK)


def _filter_box(table_id: str) -> str:
    return (f'<p><label>filter rows: <input type=search class=filter data-table="{e(table_id)}" '
            f'placeholder="text in any cell"></label></p>')


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{e(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(body) + f"<script>{_JS}</script></body></html>\n")


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5em;color:#1e293b;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #cbd5e1}h3{margin:.6em 0 .3em}
h4{margin:.2em 0}table{border-collapse:collapse;margin:.4em 0}
th,td{border:1px solid #e2e8f0;padding:3px 6px;vertical-align:top;text-align:left}
table.metrics td:not(:first-child){text-align:right;font-variant-numeric:tabular-nums}
table.kv th{background:#f8fafc;font-weight:600}
.note{color:#64748b;font-size:.92em}.warn{color:#b45309}
.setbody{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}
.plots{display:flex;flex-direction:column;gap:.8em}
svg.chart{background:#fff}svg .grid{stroke:#e2e8f0}svg text{font-size:10px;fill:#334155}
svg .axis{fill:#94a3b8}svg .val{font-size:8px;fill:#475569}svg .cat{font-size:11px}
table.questions{font-size:12.5px}
table.sortable th{background:#f1f5f9;cursor:pointer;position:sticky;top:0;user-select:none;white-space:nowrap}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
td.query{max-width:18em;white-space:pre-wrap}td.num{white-space:nowrap;text-align:right}
.scroll{overflow-x:auto}
tbody.failed td{background:#fff7ed}
tbody.q{border-top:2px solid #cbd5e1}tr.more td{border-top:0;padding:0 6px 3px}.setname{color:#64748b;font-size:11px}
.ctxbody{display:grid;grid-template-columns:minmax(24em,max-content) 1fr;gap:0 2em;align-items:start}
ul.gold{margin:0;padding-left:1em;min-width:18em;max-width:26em}ul.gold code{font-size:11px;word-break:break-all}
.rank{color:#1d4ed8}.badge{background:#dcfce7;color:#166534;border-radius:3px;padding:0 3px;font-size:10px}
.base{color:#92400e;font-size:11px}
details.ctx summary{cursor:pointer;color:#1d4ed8;white-space:nowrap}
ol.chunks{margin:.2em 0;padding-left:2em;font-size:11px}ol.chunks li.primary{font-weight:600}
ol.chunks li.gold code{background:#dcfce7}ol.chunks li.only{border-left:3px solid #f59e0b;padding-left:3px}
.tok{color:#94a3b8}dl{display:grid;grid-template-columns:max-content auto;gap:0 .8em;font-size:11px;margin:.3em 0}
dt{color:#64748b}dd{margin:0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:2em}
tbody.target{outline:2px solid #2563eb}
.up{color:#15803d}.down{color:#b91c1c}td.up{background:#f0fdf4}td.down{background:#fef2f2}
"""

# sorting (click a header; '#sort=KEY:dir' or '#sort=TABLE.KEY:dir' on load), '#q=SET/ID' (open that
# question's context and scroll to it; joined to a sort with '&') and row filtering
_JS = r"""
(function(){
function each(list,fn){Array.prototype.forEach.call(list,fn);}
function value(td,type){var v=td.getAttribute('data-v');if(v===null)v=td.textContent;
 if(type==='num'){if(v==='')return null;var f=parseFloat(v);return isNaN(f)?null:f;}return v.toLowerCase();}
function sortTable(table,key,dir){
 var ths=table.tHead.rows[0].cells,idx=-1,type='text';
 for(var i=0;i<ths.length;i++){if(ths[i].getAttribute('data-key')===key){idx=i;type=ths[i].getAttribute('data-type')||'text';}}
 if(idx<0)return false;
 each(ths,function(th){th.removeAttribute('aria-sort');});
 var bodies=Array.prototype.slice.call(table.tBodies);
 bodies.sort(function(a,b){var x=value(a.rows[0].cells[idx],type),y=value(b.rows[0].cells[idx],type);
  if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
  var r=x<y?-1:x>y?1:0;return dir==='desc'?-r:r;});
 bodies.forEach(function(b){table.appendChild(b);});
 ths[idx].setAttribute('aria-sort',dir==='desc'?'descending':'ascending');
 table.setAttribute('data-sorted',key+':'+dir);return true;}
var tables=document.querySelectorAll('table.sortable');
each(tables,function(table){each(table.tHead.rows[0].cells,function(th){
 function go(){var key=th.getAttribute('data-key'),cur=th.getAttribute('aria-sort');
  var dir=cur?(cur==='ascending'?'desc':'asc'):(th.getAttribute('data-type')==='num'?'desc':'asc');
  sortTable(table,key,dir);
  try{history.replaceState(null,'','#sort='+table.id+'.'+key+':'+dir);}catch(err){}}
 th.addEventListener('click',go);
 th.addEventListener('keydown',function(ev){if(ev.key==='Enter'||ev.key===' '){ev.preventDefault();go();}});});});
each(document.querySelectorAll('input.filter'),function(input){
 input.addEventListener('input',function(){var table=document.getElementById(input.getAttribute('data-table'));
  var term=input.value.toLowerCase();
  each(table.tBodies,function(b){b.style.display=!term||b.textContent.toLowerCase().indexOf(term)>=0?'':'none';});});});
(location.hash||'').replace(/^#/,'').split('&').forEach(function(p){
 var eq=p.indexOf('='),name=p.slice(0,eq),v=decodeURIComponent(p.slice(eq+1));
 var match=name==='sort'&&/^(?:([\w-]+-table)\.)?(.+):(asc|desc)$/.exec(v);
 if(match){each(tables,function(table){if(!match[1]||match[1]===table.id)sortTable(table,match[2],match[3]);});}
 if(name==='q'){each(document.querySelectorAll('tbody.q'),function(b){
  if(b.getAttribute('data-set')+'/'+b.getAttribute('data-id')===v){b.classList.add('target');
   each(b.querySelectorAll('details.ctx'),function(d){d.open=true;});b.scrollIntoView();}});}});
})();
"""
