"""``specrag plan``, ``specrag impact``, ``specrag deps``: the dependency graph from the command line."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pydantic import BaseModel
from specrag.cli.common import add_common, field_range, number_in, open_engine
from specrag.cli.corpus import corpus_input
from specrag.core.api_models import AgenticRetrievalRequest
from specrag.core.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="the operations a question needs, in call order, with parameter bindings")
    p.add_argument("question")
    _corpus(p)
    p.add_argument("--apis", help="comma-separated API ids: skip stage 1 and plan within these")
    p.add_argument("--token-budget", dest="token_budget",
                   type=number_in(*field_range(AgenticRetrievalRequest, "token_budget")),
                   help="context tokens for the whole plan")
    add_common(p)
    p.set_defaults(handler=plan)

    _api_command(sub, "impact", "the operations that use a schema, directly or transitively",
                 "schema", "schema name (e.g. User) or chunk id", impact)
    _api_command(sub, "deps", "an operation's parameters and the operations that produce them",
                 "operation", "'GET /users/{id}', an operationId, or a chunk id", deps)


def _api_command(sub: argparse._SubParsersAction, name: str, help: str, target: str, target_help: str,
                 handler: Callable[[argparse.Namespace, Settings], int]) -> None:
    p = sub.add_parser(name, help=help)
    p.add_argument("api", help="API id (file_id)")
    p.add_argument(target, help=target_help)
    _corpus(p)
    add_common(p)
    p.set_defaults(handler=handler)


def _corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", nargs="+", type=corpus_input, help="spec files/folders (indexed first, incrementally); "
                   "default: the last indexed corpus")


def plan(args: argparse.Namespace, settings: Settings) -> int:
    from specrag.engine.plan import render_plan

    _, engine = open_engine(args, settings, args.corpus)
    apis = [a.strip() for a in args.apis.split(",") if a.strip()] if args.apis else None
    return _show(args, engine.plan(args.question, apis=apis, token_budget=args.token_budget), render_plan)


def impact(args: argparse.Namespace, settings: Settings) -> int:
    _, engine = open_engine(args, settings, args.corpus)
    return _show(args, engine.impact(args.api, args.schema), render_impact)


def deps(args: argparse.Namespace, settings: Settings) -> int:
    _, engine = open_engine(args, settings, args.corpus)
    return _show(args, engine.deps(args.api, args.operation), render_deps)


def _show(args: argparse.Namespace, result: BaseModel, render: Callable[[Any], str]) -> int:
    print(result.model_dump_json(indent=2) if args.json else render(result))
    return 0


def render_impact(report) -> str:
    lines = [f"{len(report.operations)} operations of {report.api} use {report.schema_name} ({report.schema_id}):"]
    for op in report.operations:
        via = " via " + " <- ".join(v.split(":", 1)[1] for v in op.via) if op.via else " directly"
        lines.append(f"  {op.method} {op.path}" + (f" ({op.operation_id})" if op.operation_id else "") + via)
    return "\n".join(lines)


def render_deps(report) -> str:
    lines = [f"{report.method} {report.path}"]
    for need in report.params:
        producers = [e for e in report.producers if e.param == need.name]
        lines.append(f"  {need.name} ({need.location}{', id' if need.id_like else ''}): " +
                     ("from the caller" if not producers else f"{len(producers)} producers"))
        lines += [f"    {edge.label()}  [{edge.source.value} {edge.score:.2f}]" for edge in producers[:5]]
    if report.consumers:
        lines.append(f"  its response feeds {len({e.consumer for e in report.consumers})} operations")
    return "\n".join(lines)
