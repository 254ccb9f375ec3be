"""``specrag plan``, ``specrag impact``, ``specrag deps``: the dependency graph from the command line."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from specrag.cli.common import add_common, open_engine, open_index
from specrag.cli.corpus import corpus_input
from specrag.cli.query import TOKEN_BUDGET, api_list, question_argument
from specrag.core.ids import parse_operation_id

if TYPE_CHECKING:
    from pydantic import BaseModel
    from specrag.core.settings import Settings

DEPS_SHOWN = 5  # producers per parameter, and consumers, that deps lists without --all


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="the operations a question needs, in call order, with parameter bindings")
    p.add_argument("question")
    _corpus(p)
    p.add_argument("--apis", help="comma-separated API ids: skip stage 1 and plan within these")
    p.add_argument("--token-budget", dest="token_budget", type=TOKEN_BUDGET, help="context tokens for the whole plan")
    add_common(p)
    p.set_defaults(handler=plan)

    _api_command(sub, "impact", "the operations that use a schema, directly or transitively",
                 "schema", "schema name (e.g. User) or chunk id", impact)
    p = _api_command(sub, "deps", "an operation's parameters, the operations that produce them, and those that "
                     "consume its output", "operation", "'GET /users/{id}', an operationId, or a chunk id", deps)
    p.add_argument("--all", dest="show_all", action="store_true",
                   help=f"list every producer and consumer (default: the best {DEPS_SHOWN} of each)")


def _api_command(sub: argparse._SubParsersAction, name: str, help: str, target: str, target_help: str,
                 handler: Callable[[argparse.Namespace, Settings], int]) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help)
    p.add_argument("api", help="API id (file_id)")
    p.add_argument(target, help=target_help)
    _corpus(p)
    add_common(p)
    p.set_defaults(handler=handler)
    return p


def _corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", nargs="+", type=corpus_input, help="spec files/folders (indexed first, incrementally); "
                   "default: the last indexed corpus")


def plan(args: argparse.Namespace, settings: Settings) -> int:
    question, apis = question_argument(args.question), api_list(args.apis)
    # lazy: keeps the engine and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.engine.plan import render_plan

    _, engine = open_engine(args, settings, args.corpus)
    return _show(args, engine.plan(question, apis=apis, token_budget=args.token_budget), render_plan)


def impact(args: argparse.Namespace, settings: Settings) -> int:
    """The dependency graph needs no engine: no embedding model, no LLM, no offline notice."""
    # lazy: keeps the engine and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.engine.graph_queries import graph_queries

    _, index = open_index(args, settings, args.corpus)
    try:
        report = graph_queries(index).impact(args.api, args.schema)
    finally:
        index.close()
    return _show(args, report, render_impact)


def deps(args: argparse.Namespace, settings: Settings) -> int:
    # lazy: keeps the engine and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.engine.graph_queries import graph_queries

    _, index = open_index(args, settings, args.corpus)
    try:
        report = graph_queries(index).deps(args.api, args.operation)
    finally:
        index.close()
    return _show(args, report, lambda r: render_deps(r, None if args.show_all else DEPS_SHOWN))


def _show(args: argparse.Namespace, result: BaseModel, render: Callable[[Any], str]) -> int:
    print(result.model_dump_json(indent=2) if args.json else render(result))
    return 0


def render_impact(report) -> str:
    lines = [f"{len(report.operations)} operations of {report.api} use {report.schema_name} ({report.schema_id}):"]
    for op in report.operations:
        via = " via " + " <- ".join(v.split(":", 1)[1] for v in op.via) if op.via else " directly"
        lines.append(f"  {op.method} {op.path}" + (f" ({op.operation_id})" if op.operation_id else "") + via)
    return "\n".join(lines)


def render_deps(report, limit: int | None = DEPS_SHOWN) -> str:
    """Each parameter with its producers, then the operations its response feeds; ``limit`` of
    each list are shown (None: all), and every list says how many it has in all."""
    lines, cut = [f"{report.method} {report.path}"], False
    for need in report.params:
        producers = [e for e in report.producers if e.param == need.name]
        shown = producers[:limit]
        cut |= len(shown) < len(producers)
        lines.append(f"  {need.name} ({need.location}{', id' if need.id_like else ''}): " +
                     (_counted(len(shown), len(producers), "producer") if producers else "from the caller"))
        lines += [f"    {edge.label()}  [{edge.source.value} {edge.score:.2f}]" for edge in shown]
    if report.consumers:
        shown = report.consumers[:limit]
        cut |= len(shown) < len(report.consumers)
        operations = len({e.consumer for e in report.consumers})
        lines.append(f"  its response fills {_counted(len(shown), len(report.consumers), 'parameter', operations)}")
        lines += [f"    {_consumer_label(edge)}  [{edge.source.value} {edge.score:.2f}]" for edge in shown]
    else:
        lines.append("  its response feeds no other operation")
    if cut:
        lines.append("  (--all lists every producer and consumer)")
    return "\n".join(lines)


def _counted(shown: int, total: int, noun: str, operations: int | None = None) -> str:
    """``16 producers, the best 5 shown``; with ``operations``: ``22 parameters of 20 operations``."""
    text = f"{total} {noun}{'s' * (total != 1)}"
    if operations is not None:
        text += f" of {operations} operation{'s' * (operations != 1)}"
    return text if shown == total else f"{text}, the best {shown} shown"


def _consumer_label(edge) -> str:
    """``id -> {petId} of GET /pets/{petId}``: the response's field, and the parameter it fills."""
    consumer = parse_operation_id(edge.consumer)
    what = f"{consumer[2]} {consumer[1]}" if consumer else edge.consumer
    return f"{edge.field} -> {{{edge.param}}} of {what}"
