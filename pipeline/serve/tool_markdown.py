"""The tools' answers as markdown, the text a model reads (MCP text content, ``SpecragToolSpec``).

Each answer leads with what was asked and what was found, names every id a next call takes
(API ids, ``METHOD /path`` or operationIds, schema names) in code spans, and keeps spec text
verbatim in fenced YAML. A context is :func:`specrag.engine.markdown.render_markdown` (the CLI's view) and
a plan's summary is :func:`specrag.engine.plan.render_plan`: one rendering each, on every surface.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from specrag.context.knowledge import KnowledgeContext
from specrag.engine.graph_queries import ImpactReport
from specrag.engine.markdown import chunk_block, fenced, render_markdown
from specrag.engine.plan import Plan, render_plan
from specrag.index.lookup import ApiSummary, OperationDetail, SpecElement
from specrag.specs.example_request import example_text

NAMES_SHOWN = 30  # ids listed in one line (references, cut references) before "and N more"
HOW_TO_READ_OPERATIONS = ("Best first. `get_operation(api, operation)` reads one in full (the operation as "
                          "`METHOD /path` or its operationId); `get_context` reads the best with every schema it needs.")


def apis_markdown(title: str, apis: list[ApiSummary], reasoning: str = "") -> str:
    lines = [f"# {title}", ""]
    if not apis:
        return "\n".join([*lines, "_No API found._", ""])
    lines += [f"{len(apis)} APIs; pass an id as `api` (or in `apis`) to the other tools.", ""]
    for api in apis:
        about = f": {api.description}" if api.description else ""
        domains = f" (domains: {', '.join(api.domains)})" if api.domains else ""
        lines.append(f"- `{api.api}` — {api.name}{about}{domains}")
    if reasoning:
        lines += ["", f"Why: {reasoning}"]
    return "\n".join(lines) + "\n"


def operations_markdown(query: str, hits: list, detail: str = "") -> str:
    """``hits``: ``mcp_models.OperationHit``s, best first."""
    lines = [f"# Operations for: {query}", ""]
    if not hits:
        return "\n".join([*lines, "_No matching operation._", ""])
    lines += [HOW_TO_READ_OPERATIONS, ""]
    for rank, hit in enumerate(hits, 1):
        name = f" · operationId `{hit.operation_id}`" if hit.operation_id else ""
        summary = f" — {hit.summary}" if hit.summary else ""
        score = f" · score {hit.score:.3g}" if hit.score is not None else ""
        lines.append(f"{rank}. `{hit.method} {hit.path}` in `{hit.api}`{name}{summary}{score}")
    if detail:
        lines += ["", f"_{detail}_"]
    return "\n".join(lines) + "\n"


def element_markdown(element: SpecElement | OperationDetail, schema_names: dict[str, str]) -> str:
    """An operation (with its error responses) or a schema; ``schema_names`` maps a chunk id to the
    name ``get_schema`` takes."""
    if element.method and element.path:
        title = f"{element.method} {element.path}" + (f" (operationId `{element.operation_id}`)"
                                                       if element.operation_id else "")
    else:
        title = f"schema `{element.name}`" if element.name else f"`{element.chunk_id}`"
    lines = [f"# {title} · API `{element.api}`", ""]
    if element.summary and element.type != "component":
        lines += [element.summary, ""]
    lines += _element_body(element, schema_names)
    example = getattr(element, "example_request", None)
    if example is not None:
        lines += [f"## Example request ({example.tokens} tokens; fill the <...> and {{...}} placeholders)", "",
                  *fenced(example_text(example), "bash"), ""]
    errors = getattr(element, "errors", None)
    if errors is not None:
        lines += ["## Error responses", ""] + _element_body(errors, schema_names)
    return "\n".join(lines)


def _element_body(element: SpecElement, schema_names: dict[str, str]) -> list[str]:
    facts = f"chunk `{element.chunk_id}` · {element.tokens} tokens"
    if element.truncated:
        facts += " · cut to the token budget"
    lines = [facts]
    own = element.chunk_id + ":"  # its errors chunk and parts are shown here, not references
    refs = [r for r in element.ref_ids if not r.startswith(own)]
    schemas = [schema_names[r] for r in refs if r in schema_names]
    other = [r for r in refs if r not in schema_names]
    if schemas:
        lines.append(f"Schemas it references (`get_schema` reads them): {_names(schemas)}")
    if other:
        lines.append(f"Other references: {_names(other)}")
    if not element.text and element.truncated:
        return [*lines, "", "_Its text did not fit the token budget._", ""]
    return [*lines, "", *fenced(element.text), ""]


def context_markdown(ctx: KnowledgeContext) -> str:
    """The CLI's markdown, and the references the budget left out, by id."""
    text = render_markdown(ctx)
    cut = [c.id for c in ctx.retrieval_stats.refs_cut]
    if cut:
        text += f"Left out (`get_schema` / `get_operation` read them): {_names(cut)}\n"
    if ctx.retrieval_stats.primaries_cut:
        text += f"Ranked but left out: {_names(ctx.retrieval_stats.primaries_cut)}\n"
    return text


def plan_markdown(plan) -> str:
    """``specrag.engine.plan.Plan``: the calls in order (the CLI's view), then each step's context."""
    lines = ["# " + render_plan(plan), ""]
    for step in plan.steps:
        if step.context:
            lines += [f"## Step {step.step}: {step.method} {step.path}", ""]
            lines += [line for chunk in step.context for line in chunk_block(chunk)]
    return "\n".join(lines)


def impact_markdown(report) -> str:
    """``specrag.engine.graph_queries.ImpactReport``: the operations that use a schema, shallowest first."""
    lines = [f"# What uses `{report.schema_name}` in `{report.api}`", "",
             f"{len(report.operations)} operations use `{report.schema_id}`:", ""]
    for op in report.operations:
        name = f" (operationId `{op.operation_id}`)" if op.operation_id else ""
        via = " via " + " <- ".join(f"`{v.split(':', 1)[-1]}`" for v in op.via) if op.via else " directly"
        lines.append(f"- `{op.method} {op.path}`{name}{via}")
    if report.components:
        lines += ["", f"Components that use it: {_names([c.split(':', 1)[-1] for c in report.components])}"]
    return "\n".join(lines) + "\n"


def markdown_of(found: Any) -> str:
    """The markdown of a plan or impact report; any other model (a planner of one's own) as JSON."""
    if isinstance(found, Plan):
        return plan_markdown(found)
    if isinstance(found, ImpactReport):
        return impact_markdown(found)
    data = found.model_dump(mode="json") if isinstance(found, BaseModel) else found
    return "\n".join(fenced(json.dumps(data, indent=2, default=str), "json")) + "\n"


def _names(ids: list[str]) -> str:
    shown = ", ".join(f"`{i}`" for i in ids[:NAMES_SHOWN])
    return shown + (f" and {len(ids) - NAMES_SHOWN} more" if len(ids) > NAMES_SHOWN else "")
