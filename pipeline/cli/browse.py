"""``specrag apis`` and ``specrag show``: what an index holds, read from its catalogs and chunks
(``specrag.index.lookup``, the code behind ``GET /api/v1/apis...``), without an engine."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.cli.common import add_common, open_index
from specrag.cli.output import print_json, text_argument
from specrag.core.text_table import format_table

if TYPE_CHECKING:
    from specrag.core.settings import Settings

TITLE_WIDTH, VERSION_WIDTH, URL_WIDTH = 40, 20, 60  # cells cut with …; --json has them whole


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("apis", help="the APIs of the index: id, title, version, operations, base URL")
    p.add_argument("match", nargs="?", help="only APIs whose id or title contains this (any case)")
    _corpus(p)
    add_common(p)
    p.set_defaults(handler=apis)

    p = sub.add_parser("show", help="one operation in full: its YAML, error responses and references")
    p.add_argument("api", help="API id (file_id), as `specrag apis` lists it")
    p.add_argument("operation", help="an operationId, or 'METHOD /path' (e.g. 'GET /users/{userId}')")
    _corpus(p)
    add_common(p)
    p.set_defaults(handler=show)


def _corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", nargs="+", type=Path, help="spec files/folders (indexed first, incrementally); "
                   "default: the last indexed corpus")


def apis(args: argparse.Namespace, settings: Settings) -> int:
    # lazy: keeps the index lookup and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.index.lookup import api_listing
    from specrag.specs.sources import load_sources

    local, index = open_index(args, settings, args.corpus)
    try:
        state = load_sources(local.storage.data_dir)
        versions = {r.api.info.file_id: r.api.info.version for r in state.records.values() if r.api} if state else {}
        rows = api_listing(index, versions)
    finally:
        index.close()
    if args.match:
        needle = text_argument(args.match).casefold()
        rows = [r for r in rows if needle in r.api.casefold() or needle in r.title.casefold()]
    if args.json:
        print_json([r.model_dump(mode="json") for r in rows], indent=2)
        return 0
    table = [(r.api, r.title, r.version or "-", r.operations, _urls(r.base_urls)) for r in rows]
    if table:
        print(format_table(table, ("API", "title", "version", "operations", "base URL"), right=(3,),
                           max_width={1: TITLE_WIDTH, 2: VERSION_WIDTH, 4: URL_WIDTH}))
    print(f"{len(rows)} API{'s' * (len(rows) != 1)}" + (f" matching {args.match!r}" if args.match else "")
          + f" in {index.kb_id}" + ("; `specrag show API OPERATION` shows one operation" if rows else ""))
    return 0


def _urls(urls: list[str]) -> str:
    return "-" if not urls else urls[0] + (f" (+{len(urls) - 1})" if len(urls) > 1 else "")


def show(args: argparse.Namespace, settings: Settings) -> int:
    # lazy: keeps the index lookup and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.index.lookup import NotFound, get_operation

    _, index = open_index(args, settings, args.corpus)
    operation = text_argument(args.operation)
    try:
        index.require_api(args.api)
        detail = get_operation(index, args.api, operation)
    except NotFound as exc:
        raise NotFound(f"{exc}{index.operation_hint(args.api, operation)}") from None
    finally:
        index.close()
    if args.json:
        print_json(detail, indent=2)
    else:
        print(render_operation(detail))
    return 0


def render_operation(detail) -> str:
    """The operation's YAML, then its error responses, then what it references and what references it."""
    lines = [f"{detail.chunk_id} · {detail.tokens} tokens", "", detail.text.rstrip()]
    refs = list(detail.ref_ids)
    if detail.errors is not None:
        refs = [r for r in refs if r != detail.errors.chunk_id]
        lines += ["", f"{detail.errors.chunk_id} · {detail.errors.tokens} tokens", "", detail.errors.text.rstrip()]
    if refs:
        lines += ["", "references: " + ", ".join(r.split(":", 1)[1] for r in refs)]
    return "\n".join(lines)
