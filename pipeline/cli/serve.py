"""``specrag serve`` (HTTP), ``specrag mcp`` (MCP server) and ``specrag openapi`` (the service's spec)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.cli.common import add_common, build_settings, number_in, number_of
from specrag.cli.corpus import corpus_input
from specrag.core.atomic import write_atomic
from specrag.core.errors import SpecragError

if TYPE_CHECKING:
    from specrag.core.settings import Settings

WORKER_ARGS = "SPECRAG_SERVE_WORKER_ARGS"  # the command line, for `serve --workers` processes (set by the parent)
_WORKER_FIELDS = ("kb", "host", "port", "data_dir", "catalog_dir", "tenant", "env_file", "verbose")
_PATH_FIELDS = ("data_dir", "catalog_dir", "env_file")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the HTTP retrieval service (FastAPI + uvicorn)")
    _add_server_options(p)
    p.add_argument("--workers", type=number_of("specrag.core.settings:ServingSettings", "serve_workers"),
                   help="processes serving the port, each with its own copy of the index "
                   "(env SPECRAG_SERVE_WORKERS, default 1)")
    p.set_defaults(handler=serve)
    p = sub.add_parser("mcp", help="the MCP server (stdio, or streamable HTTP)")
    _add_server_options(p)
    p.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    p.set_defaults(handler=mcp)
    p = sub.add_parser("bench-serve", help="load test: concurrent basic retrievals over loopback, p50/p95/errors")
    p.add_argument("--url", help="a running service (default: start `specrag serve` on 127.0.0.1 for the run)")
    p.add_argument("--kb", metavar="KB_ID", help="knowledge base to query (id or alias); not with --hot-reindex")
    p.add_argument("--queries", nargs="+", type=Path, required=True, help="labeled query sets (.jsonl with 'query')")
    p.add_argument("--clients", type=number_in(1, 1000, int), default=20)
    p.add_argument("--duration", type=number_in(0.1, 86400, float), default=60.0, help="timed seconds (after --warmup)")
    p.add_argument("--warmup", type=number_in(0, 3600, float), default=5.0)
    p.add_argument("--mode", choices=["keyword", "vector", "hybrid"], default="vector")
    p.add_argument("--top-k", dest="top_k", type=number_of("specrag.core.api_models:BasicRetrievalRequest", "top_k"),
                   default=10)
    p.add_argument("--workers", type=number_of("specrag.core.settings:ServingSettings", "serve_workers"),
                   help="worker processes of the service started for the run (default: "
                   "SPECRAG_SERVE_WORKERS); not with --url")
    p.add_argument("--hot-reindex", dest="hot_reindex", type=Path, metavar="CORPUS",
                   help="serve a copy of CORPUS and, mid-run, change one spec in it and re-index it (`specrag "
                        "index` in another process); reports errors and when answers first showed the change")
    p.add_argument("--hot-spec", dest="hot_spec", metavar="NAME", help="the spec file to change (default: the smallest)")
    p.add_argument("--hot-at", dest="hot_at", type=number_in(0, 86400, float), help="seconds into the timed run (default: a quarter of it)")
    add_common(p)
    p.set_defaults(handler=bench_serve)
    p = sub.add_parser("api-key", help="make an API key for a tenant; its hash goes into the keys file")
    p.add_argument("key_tenant", metavar="TENANT", help="the tenant the key reads (1-63 of A-Za-z0-9_-)")
    p.add_argument("--file", type=Path, help="keys file to add the entry to (created if missing; default: "
                   "print the entry)")
    p.set_defaults(handler=api_key)
    p = sub.add_parser("openapi", help="write the HTTP service's OpenAPI document (a spec specrag can index)")
    p.add_argument("--out", type=Path, help="file to write (default: stdout)")
    add_common(p)
    p.set_defaults(handler=openapi)


def _add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", nargs="+", action="append", type=corpus_input, metavar="PATH",
                   help="spec files/folders of one knowledge base, indexed first (incrementally); repeat "
                        "--corpus for several knowledge bases. Default: every corpus indexed in --data-dir")
    p.add_argument("--kb", action="append", metavar="KB_ID", help="serve an indexed corpus by its folder name "
                   "under <data-dir>/corpora (repeatable)")
    p.add_argument("--host", help="bind address (env SPECRAG_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=number_of("specrag.core.settings:ServingSettings", "serve_port"),
                   help="port (env SPECRAG_PORT, default 8080)")
    add_common(p)


class ServeRefused(SpecragError):
    """A server that would answer beyond this machine without API keys."""


def _open(args: argparse.Namespace, settings: Settings, network: bool = True):
    """(settings, tenants): with ``network`` False (stdio MCP) the local tenant, keys or not. A
    server that would refuse to start refuses first, before the service is imported or any corpus indexed."""
    settings, keys = _checked(args, settings, network)
    # lazy: keeps the tenants, tracing and LlamaIndex (~4 s) out of the CLI's parse
    from specrag.serve.logs import configure_json_logging
    from specrag.serve.tenancy import Tenants
    from specrag.serve.tracing import install_instrumentation, otel_tracer

    configure_json_logging(logging.DEBUG if args.verbose else logging.INFO, queued=True)
    install_instrumentation(otel_tracer(settings.serving.otel_exporter))
    return settings, Tenants.open(settings, keys, args.corpus or [], args.kb or [])


def _checked(args: argparse.Namespace, settings: Settings, network: bool):
    """(settings with --host/--port, API keys), or ServeRefused: a non-loopback bind needs keys."""
    # lazy: keeps pydantic-settings (~0.3 s) out of the CLI's parse
    from specrag.serve.keys import ApiKeys

    settings = settings.model_copy(update={k: v for k, v in (("serve_host", args.host), ("serve_port", args.port))
                                           if v is not None})
    keys = ApiKeys.from_settings(settings) if network else ApiKeys([])
    if network and not keys.configured and not is_loopback(settings.serving.serve_host):
        raise ServeRefused(f"SPECRAG_HOST={settings.serving.serve_host} is not a loopback address and no API key is "
                           "configured: set SPECRAG_API_KEYS_FILE (or SPECRAG_API_KEYS) first, or bind 127.0.0.1")
    return settings, keys


def is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _uvicorn(app, settings: Settings) -> None:
    """No access log and no log config of uvicorn's own: our JSON lines carry no header, so no key.
    On SIGTERM uvicorn stops accepting and lets requests in flight finish (up to the timeout)."""
    import uvicorn

    uvicorn.run(app, host=settings.serving.serve_host, port=settings.serving.serve_port, **_UVICORN_OPTIONS,
                timeout_graceful_shutdown=settings.serving.shutdown_timeout_s)


MAX_HEADER_BYTES = 64 * 1024  # h11's default lets a request's line and headers grow to 16 MiB before a 431
_UVICORN_OPTIONS = {"log_config": None, "access_log": False, "h11_max_incomplete_event_size": MAX_HEADER_BYTES}


def serve(args: argparse.Namespace, settings: Settings) -> int:
    settings, tenants = _open(args, settings)
    workers = args.workers or settings.serving.serve_workers
    if workers > 1:
        tenants.close()  # opened here once to index --corpus and to fail fast; each worker opens its own
        return _serve_workers(args, settings, workers)
    # lazy: keeps the HTTP stack (fastapi, LlamaIndex: ~5 s) out of the CLI's parse
    from specrag.serve.app import create_app
    from specrag.serve.graph_wiring import routers

    try:
        _uvicorn(create_app(tenants, extra_routers=routers(), reload_interval_s=settings.serving.reload_interval_s,
                            threads=settings.serving.serve_threads, bind_host=settings.serving.serve_host), settings)
    finally:
        tenants.close()
    return 0


def _serve_workers(args: argparse.Namespace, settings: Settings, workers: int) -> int:
    """uvicorn's worker processes on one socket: each has its own interpreter lock, so the HTTP and
    Python work of requests runs on every core. Workers rebuild the service from this command line
    (``--corpus`` becomes the ``--kb`` it was indexed as); their metrics meet in a fresh
    Prometheus multiprocess directory, removed when the service stops."""
    import json
    import shutil
    import tempfile

    # lazy: keeps the index (~2 s) and prometheus_client (~80 ms) out of the CLI's parse
    import uvicorn
    from specrag.index.workspace import corpus_key
    from specrag.serve.metrics import MULTIPROCESS_DIR

    served = {name: getattr(args, name, None) for name in _WORKER_FIELDS}
    served["kb"] = [*(args.kb or []), *(corpus_key(paths) for paths in args.corpus or [])]
    metrics_dir = tempfile.mkdtemp(prefix="specrag-metrics-")
    os.environ[MULTIPROCESS_DIR], os.environ[WORKER_ARGS] = metrics_dir, json.dumps(served, default=str)
    try:
        uvicorn.run("specrag.cli.serve:worker_app", factory=True, workers=workers, host=settings.serving.serve_host,
                    port=settings.serving.serve_port, **_UVICORN_OPTIONS, timeout_graceful_shutdown=settings.serving.shutdown_timeout_s)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def worker_app():
    """One process of ``serve --workers``: the service of the parent's command line (``WORKER_ARGS``)."""
    import atexit
    import json

    # lazy: keeps the HTTP stack (fastapi, LlamaIndex: ~5 s) out of the CLI's parse
    from specrag.serve.app import create_app
    from specrag.serve.graph_wiring import routers

    served = json.loads(os.environ[WORKER_ARGS])
    args = argparse.Namespace(corpus=None, **{k: Path(v) if k in _PATH_FIELDS and v else v for k, v in served.items()})
    settings, tenants = _open(args, build_settings(args))
    atexit.register(tenants.close)
    return create_app(tenants, extra_routers=routers(), reload_interval_s=settings.serving.reload_interval_s,
                      threads=settings.serving.serve_threads, bind_host=settings.serving.serve_host)


def mcp(args: argparse.Namespace, settings: Settings) -> int:
    settings, tenants = _open(args, settings, network=args.transport != "stdio")
    # lazy: keeps the MCP and HTTP stacks (~5 s) out of the CLI's parse
    import anyio
    from specrag.serve.graph_wiring import mcp_tools
    from specrag.serve.mcp_http import streamable_http_app
    from specrag.serve.mcp_server import create_mcp_server, run_stdio

    server = create_mcp_server(tenants, **mcp_tools())
    try:
        if args.transport == "stdio":
            anyio.run(run_stdio, server)  # answers every request, unreadable ones with an error
        else:
            _uvicorn(streamable_http_app(server, tenants, settings.serving.serve_host), settings)
    finally:
        tenants.close()
    return 0


def openapi(args: argparse.Namespace, settings: Settings) -> int:
    import json

    # lazy: keeps the HTTP stack (fastapi, LlamaIndex: ~5 s) out of the CLI's parse
    from specrag.serve.graph_wiring import routers
    from specrag.serve.openapi import service_openapi, write_service_openapi

    extra = routers()
    if args.out:
        print(write_service_openapi(args.out, extra), file=sys.stderr)
    else:
        print(json.dumps(service_openapi(extra), indent=1))
    return 0


def bench_serve(args: argparse.Namespace, settings: Settings) -> int:
    import importlib.util

    if args.workers and args.url:  # the flags are checked before anything is imported or started
        raise SpecragError("--workers sets the service bench-serve starts: leave out --url")
    if args.hot_reindex and (args.url or args.kb):
        raise SpecragError("--hot-reindex serves its own copy of the corpus: leave out --url and --kb")
    if not args.hot_reindex and not args.kb:
        raise SpecragError("bench-serve needs --kb KB_ID (or --hot-reindex CORPUS)")
    if importlib.util.find_spec("aiohttp") is None:
        raise SpecragError("bench-serve needs the load generator's client: pip install 'specrag[load]'")
    import asyncio
    import tempfile
    from contextlib import ExitStack

    # lazy: keeps the load test (pydantic, yaml ~0.2 s) and the index (~2 s) out of the CLI's parse
    from specrag.bench.hot_reindex import HotReindex, prepare
    from specrag.bench.loadtest import (
        LoadSpec,
        format_report,
        free_port,
        load_queries,
        run_load,
        served,
    )
    from specrag.index.workspace import corpus_key

    queries = load_queries(args.queries)
    with ExitStack() as stack:
        kb, hot, server_args = args.kb, None, ["--kb", args.kb or "", "--data-dir", str(settings.storage.data_dir)]
        workers = ["--workers", str(args.workers)] if args.workers else []
        if args.hot_reindex:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="specrag-hot-")))
            copy, spec = prepare(args.hot_reindex, work, args.hot_spec)
            kb = corpus_key([copy])
            hot = HotReindex(corpus=copy, spec=spec, data_dir=work / "data",
                             at_s=args.duration / 4 if args.hot_at is None else args.hot_at)
            server_args = ["--corpus", str(copy), "--data-dir", str(hot.data_dir)]
        url = args.url or stack.enter_context(served(server_args + workers, free_port()))
        report = asyncio.run(run_load(LoadSpec(url=url, kb_id=kb, queries=queries, clients=args.clients,
                                               duration_s=args.duration, warmup_s=args.warmup, mode=args.mode,
                                               top_k=args.top_k, hot=hot)))
    print(report.model_dump_json(indent=1) if args.json else format_report(report))
    failed = report.errors or (report.reindex and (report.reindex.first_seen_s is None
                                                   or report.reindex.stale_after_seen or report.reindex.index_exit))
    return 1 if failed else 0


def api_key(args: argparse.Namespace, settings: Settings) -> int:
    """The key is printed once, on stdout; only its SHA-256 is written."""
    # lazy: keeps pydantic-settings (~0.3 s) out of the CLI's parse
    from specrag.serve.keys import KeysFile, new_key_entry, read_keys_file

    key, entry = new_key_entry(args.key_tenant)
    if args.file:
        keys = KeysFile(keys=[*(read_keys_file(args.file) if args.file.exists() else []), entry])
        write_atomic(args.file, keys.model_dump_json(indent=1).encode())
        print(f"added a key for tenant {entry.tenant} to {args.file}", file=sys.stderr)
    else:
        print(entry.model_dump_json(), file=sys.stderr)
    print(key)
    return 0
