"""JSON log lines, each carrying the ``request_id`` of the request it was written for.

The id lives in a context variable set by the HTTP middleware (or an MCP tool call); worker
threads started with ``asyncio.to_thread`` copy it, so lines the engine writes from a thread
carry it too. Lines written outside any request carry ``"request_id": null``.

Lines are encoded with orjson. A server logs through a queue (``queued=True``): the request's
thread only stamps the record with its id and enqueues it; one listener thread formats and writes
it, so the event loop never waits on the JSON encoder or on a write to a slow stream.
"""

from __future__ import annotations

import atexit
import logging
import queue
import signal
import sys
import threading
from contextvars import ContextVar
from logging.handlers import QueueHandler, QueueListener
from typing import TextIO

from pythonjsonlogger.orjson import OrjsonFormatter

request_id_var: ContextVar[str | None] = ContextVar("specrag_request_id", default=None)
QUIET = ("bm25s", "httpx", "httpcore", "chromadb", "uvicorn.access", "mcp")


LOGGED_MARK = "_specrag_logged"  # set on an exception the service has logged (app._error)


class RequestIdFilter(logging.Filter):
    """Stamps the request id; drops a record of an exception already logged, with its traceback,
    by the service (uvicorn's 'Exception in ASGI application' for the error Starlette re-raises
    after our 500 answer): one record per failure."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and getattr(exc, LOGGED_MARK, None) not in (None, record.name):
            return False
        record.request_id = request_id_var.get()
        return True


def _json_writer(stream: TextIO | None) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(OrjsonFormatter("{asctime}{levelname}{name}{request_id}{message}", style="{",
                                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger"}))
    return handler


def json_handler(stream: TextIO | None = None) -> logging.Handler:
    handler = _json_writer(stream)
    handler.addFilter(RequestIdFilter())
    return handler


class _Enqueue(QueueHandler):
    """Stamps the request id in the caller's context; the message is rendered now (its arguments may
    change later), the record's extras and exception go to the listener as they are (same process:
    nothing is pickled)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record.msg, record.args = record.getMessage(), None
        return record


class QueuedJsonHandler(_Enqueue):
    """A QueueHandler with its listener, which writes JSON lines to ``stream``; ``flush``
    waits until every line enqueued so far is written, ``close`` stops the listener."""

    def __init__(self, stream: TextIO | None = None):
        super().__init__(queue.SimpleQueue())
        self.addFilter(RequestIdFilter())
        self.target = _json_writer(stream)  # the id was stamped before the queue
        self.listener = QueueListener(self.queue, self.target)
        self.listener.start()

    def flush(self) -> None:
        if self.listener._thread is not None:  # stop() drains the queue; start again to go on
            self.listener.stop()
            self.listener.start()
        self.target.flush()

    def close(self) -> None:
        if self.listener._thread is not None:
            self.listener.stop()
        self.target.close()
        super().close()


SERVICE_EVENT_LOGGERS = ("specrag.requests", "specrag.http")  # telemetry.py, middleware.py
SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "mcp", "py.warnings")


def configure_json_logging(level: int = logging.INFO, stream: TextIO | None = None,
                           queued: bool = False) -> logging.Handler:
    """Replace the root logger's handlers with one JSON handler (``queued``: through a queue and a
    listener thread, closed at exit so no line is lost); returns it."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = QueuedJsonHandler(stream) if queued else json_handler(stream)
    if queued:
        atexit.register(handler.close)
        _close_before_sigterm_kills(handler)
        _lean_records()
    root.addHandler(handler)
    root.setLevel(level)
    # specrag's module loggers keep the CLI's level (warnings; info with -v) but lose its plain
    # stderr handler, which would print each warning a second time beside its JSON line; the
    # request and HTTP events are the service's log, at the service's level
    # So do the loggers a server library may have given a handler of its own (uvicorn's plain text
    # one, with tracebacks): every record reaches the one JSON handler, once. Python warnings
    # (``warnings.warn``) become records too, not plain text on stderr.
    for name in ("specrag", *SERVER_LOGGERS):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.propagate = True
    logging.captureWarnings(True)
    for name in SERVICE_EVENT_LOGGERS:
        logging.getLogger(name).setLevel(level)
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    return handler


def _lean_records() -> None:
    """A server's records skip what no JSON line shows: the caller's frame (found by walking the stack
    on every call), thread and process names. The logging HOWTO's "Optimization" switches; a line
    costs the request's thread 6.7 instead of 9.5 us."""
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False


def _close_before_sigterm_kills(handler: logging.Handler) -> None:
    """uvicorn ends a SIGTERM shutdown by raising SIGTERM again under the handler it found, and the
    default one kills the process without running ``atexit``: the queue's last lines ("Finished
    server process") were lost about one run in two. Found that default, it becomes: close the
    handler (the listener writes what is queued), then die of SIGTERM as before."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def close_then_die(signum, _frame) -> None:
        handler.close()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, close_then_die)
