"""``specrag serve`` (HTTP), ``specrag mcp`` (MCP server) and ``specrag openapi`` (the service's spec)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pipeline.cli.common import add_common
from pipeline.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the HTTP retrieval service (FastAPI + uvicorn)")
    _add_server_options(p)
    p.set_defaults(handler=serve)
    p = sub.add_parser("mcp", help="the MCP server (stdio, or streamable HTTP)")
    _add_server_options(p)
    p.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    p.set_defaults(handler=mcp)
    p = sub.add_parser("bench-serve", help="load test: concurrent basic retrievals over loopback, p50/p95/errors")
    p.add_argument("--url", help="a running service (default: start `specrag serve` on 127.0.0.1 for the run)")
    p.add_argument("--kb", required=True, metavar="KB_ID", help="knowledge base to query (id or alias)")
    p.add_argument("--queries", nargs="+", type=Path, required=True, help="labeled query sets (.jsonl with 'query')")
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--duration", type=float, default=60.0, help="timed seconds (after --warmup)")
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--mode", choices=["keyword", "vector", "hybrid"], default="vector")
    p.add_argument("--top-k", dest="top_k", type=int, default=10)
    add_common(p)
    p.set_defaults(handler=bench_serve)
    p = sub.add_parser("openapi", help="write the HTTP service's OpenAPI document (a spec specrag can index)")
    p.add_argument("--out", type=Path, help="file to write (default: stdout)")
    add_common(p)
    p.set_defaults(handler=openapi)


def _add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", nargs="+", action="append", type=Path, metavar="PATH",
                   help="spec files/folders of one knowledge base, indexed first (incrementally); repeat "
                        "--corpus for several knowledge bases. Default: every corpus indexed in --data-dir")
    p.add_argument("--kb", action="append", metavar="KB_ID", help="serve an indexed corpus by its folder name "
                   "under <data-dir>/corpora (repeatable)")
    p.add_argument("--host", help="bind address (env SPECRAG_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (env SPECRAG_PORT, default 8080)")
    add_common(p)


def _open(args: argparse.Namespace, settings: Settings):
    from pipeline.serve.kbs import KnowledgeBases
    from pipeline.serve.logs import configure_json_logging
    from pipeline.serve.tracing import install_instrumentation, otel_tracer

    configure_json_logging(logging.DEBUG if args.verbose else logging.INFO)
    install_instrumentation(otel_tracer(settings.otel_exporter))
    settings = settings.model_copy(update={k: v for k, v in (("serve_host", args.host), ("serve_port", args.port))
                                           if v is not None})
    return settings, KnowledgeBases.open(settings, args.corpus or [], args.kb or [], progress=False)


def serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from pipeline.serve.app import create_app
    from pipeline.serve.graph_wiring import routers

    settings, kbs = _open(args, settings)
    try:
        app = create_app(kbs, extra_routers=routers(kbs), threads=settings.serve_threads)
        uvicorn.run(app, host=settings.serve_host, port=settings.serve_port, log_config=None, access_log=False)
    finally:
        kbs.close()
    return 0


def mcp(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.serve.graph_wiring import mcp_tools
    from pipeline.serve.mcp_server import create_mcp_server

    settings, kbs = _open(args, settings)
    server = create_mcp_server(kbs, **mcp_tools())
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=settings.serve_host, port=settings.serve_port)
    finally:
        kbs.close()
    return 0


def openapi(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from pipeline.serve.graph_wiring import routers
    from pipeline.serve.kbs import KnowledgeBases
    from pipeline.serve.openapi import service_openapi, write_service_openapi

    extra = routers(KnowledgeBases([]))
    if args.out:
        print(write_service_openapi(args.out, extra), file=sys.stderr)
    else:
        print(json.dumps(service_openapi(extra), indent=1))
    return 0


def bench_serve(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio
    from contextlib import nullcontext

    from pipeline.serve.loadtest import LoadSpec, free_port, format_report, load_queries, run_load, served

    queries = load_queries(args.queries)
    server = nullcontext(args.url) if args.url else served(
        ["--kb", args.kb, "--data-dir", str(settings.data_dir)], free_port())
    with server as url:
        report = asyncio.run(run_load(LoadSpec(url=url, kb_id=args.kb, queries=queries, clients=args.clients,
                                               duration_s=args.duration, warmup_s=args.warmup, mode=args.mode,
                                               top_k=args.top_k)))
    print(report.model_dump_json(indent=1) if args.json else format_report(report))
    return 0 if report.errors == 0 else 1
