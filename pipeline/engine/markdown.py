"""The markdown view of a KnowledgeContext.

The markdown serves both an LLM prompt and the CLI's human view: every chunk keeps its id (so
answers can cite it) and its YAML text verbatim in a fenced block.
"""

from __future__ import annotations

import re
from collections import Counter

from specrag.context.knowledge import ContextChunk, KnowledgeContext
from specrag.specs.example_request import example_text


def render_markdown(ctx: KnowledgeContext) -> str:
    """Header (query, APIs), ``## Primary``, ``## Also ranked`` (signatures),
    ``## Referenced (depth N, from X)`` groups, stats."""
    stats = ctx.retrieval_stats
    apis = ", ".join(f"`{a}`" for a in stats.selected_apis) or "none selected"
    lines = [f"# Context for: {ctx.query}", "", f"APIs: {apis}"]
    if stats.expanded_query and stats.expanded_query != ctx.query:
        lines.append(f"Expanded query: {stats.expanded_query}")
    lines += ["", "## Primary", ""]
    if not ctx.primary_chunks:
        lines += ["_No matching chunks._", ""]
    for rank, chunk in enumerate(ctx.primary_chunks, 1):
        lines += chunk_block(chunk, f"{rank}. ")
    if ctx.signature_chunks:
        lines += ["## Also ranked (signatures: their schemas and errors are not in this context)", ""]
    for chunk in ctx.signature_chunks:
        lines += [f"- `{chunk.id}` · {chunk.n_tokens} tokens", *(f"  {line}" for line in chunk.text.splitlines())]
    lines += [""] if ctx.signature_chunks else []
    group: tuple[int, str | None] | None = None
    for chunk in ctx.referenced_chunks:  # BFS order keeps each (depth, referrer) group together
        if (chunk.depth, chunk.referenced_from) != group:
            group = (chunk.depth, chunk.referenced_from)
            lines += [f"## Referenced (depth {chunk.depth}, from `{chunk.referenced_from}`)", ""]
        lines += chunk_block(chunk)
    lines += ["---", _footer(ctx)]
    return "\n".join(lines) + "\n"


def describe(chunk: ContextChunk) -> str:
    """``endpoint · POST /users``, ``errors · POST /users``, ``component · schemas User``."""
    meta = chunk.metadata
    kind = str(meta.get("type", "") or "chunk")
    method, path = str(meta.get("method", "")), str(meta.get("path", ""))
    if method and path:
        return f"{kind} · {method.upper()} {path}"
    name = " ".join(str(meta.get(k, "")) for k in ("kind", "name") if meta.get(k))
    return f"{kind} · {name}" if name else kind


def chunk_block(chunk: ContextChunk, prefix: str = "") -> list[str]:
    """One chunk: its id and what it is, its score and tokens, its text fenced."""
    facts = [f"{chunk.n_tokens} tokens"]
    if chunk.score is not None:
        facts.insert(0, f"score {chunk.score:.4g}")
    lines = [f"### {prefix}`{chunk.id}` — {describe(chunk)}", " · ".join(facts), "", *fenced(chunk.text), ""]
    if chunk.example_request is not None:
        lines += [f"Example request ({chunk.example_request.tokens} tokens; fill the <...> and {{...}} placeholders):",
                  "", *fenced(example_text(chunk.example_request), "bash"), ""]
    return lines


def fenced(text: str, lang: str = "yaml") -> list[str]:
    """``text`` as a code block whose fence is longer than any backtick run inside it."""
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return [f"{fence}{lang}", text.rstrip("\n"), fence]


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def _footer(ctx: KnowledgeContext) -> str:
    stats = ctx.retrieval_stats
    cut = Counter(c.reason for c in stats.refs_cut)
    cut_text = f"{len(stats.refs_cut)}" + (f" ({', '.join(f'{r}: {n}' for r, n in cut.items())})" if cut else "")
    fallbacks = ", ".join(f"{f.stage}/{f.reason}" for f in stats.fallbacks) or "none"
    return (f"Stats: {ctx.total_tokens} tokens · {len(ctx.primary_chunks)} primary, "
            f"{len(ctx.signature_chunks)} signatures, {len(ctx.referenced_chunks)} referenced · refs followed {stats.refs_followed}, "
            f"missing {len(stats.refs_missing)}, cut {cut_text} · fallbacks: {fallbacks} · "
            f"truncated: {f'yes ({stats.truncated_reason})' if stats.truncated else 'no'}")
