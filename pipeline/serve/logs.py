"""JSON log lines, each carrying the ``request_id`` of the request it was written for.

The id lives in a context variable set by the HTTP middleware (or an MCP tool call); worker
threads started with ``asyncio.to_thread`` copy it, so lines the engine writes from a thread
carry it too. Lines written outside any request carry ``"request_id": null``.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import TextIO

from pythonjsonlogger.json import JsonFormatter

request_id_var: ContextVar[str | None] = ContextVar("specrag_request_id", default=None)
QUIET = ("bm25s", "httpx", "httpcore", "chromadb", "uvicorn.access", "mcp")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


def json_handler(stream: TextIO | None = None) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter("{asctime}{levelname}{name}{request_id}{message}", style="{",
                                       rename_fields={"asctime": "time", "levelname": "level", "name": "logger"}))
    handler.addFilter(RequestIdFilter())
    return handler


def configure_json_logging(level: int = logging.INFO, stream: TextIO | None = None) -> logging.Handler:
    """Replace the root logger's handlers with one JSON handler; returns it."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = json_handler(stream)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    return handler
