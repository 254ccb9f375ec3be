"""What the CLI writes, and where: its own log handler, progress only on a terminal, JSON that
any bytes survive, and a quiet end when the reader of stdout goes away (``| head``).

The library configures no logging; the CLI adds one handler to its own logger (``specrag``)
for the length of a command and takes it away after, so calling ``main()`` in a host
process leaves the host's logging as it was.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from pydantic import BaseModel

OWN_LOGGERS = ("specrag",)
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


@contextmanager
def cli_logging(verbose: bool) -> Iterator[None]:
    """Warnings (with ``-v``: info) of our own loggers on stderr; other libraries keep Python's
    default (warnings and errors only, via ``logging.lastResort``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    level = logging.INFO if verbose else logging.WARNING
    saved = []
    for name in OWN_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.setLevel(level)
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger, old_level in saved:
            logger.removeHandler(handler)
            logger.setLevel(old_level)


def show_progress(args: Any) -> bool:
    """Progress bars only for a person watching: never with --json, never into a file or a pipe."""
    return not getattr(args, "json", False) and sys.stderr.isatty()


def json_text(data: BaseModel | dict | list, indent: int | None = None) -> str:
    """One JSON document. A lone surrogate (a file name or argument byte that is not UTF-8, as
    Python decodes it) is written as its ``\\udcXX`` escape, so the output is always valid UTF-8."""
    plain = data.model_dump(mode="json") if hasattr(data, "model_dump") else data  # a pydantic model
    return json.dumps(plain, ensure_ascii=False, indent=indent).encode("utf-8", "backslashreplace").decode("utf-8")


def print_json(data: BaseModel | dict | list, indent: int | None = None) -> None:
    print(json_text(data, indent))


def text_argument(value: str) -> str:
    """A command-line argument as text: bytes that were not UTF-8 become U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def safe_streams() -> None:
    """Text that cannot be encoded is escaped, never a UnicodeEncodeError halfway through output."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def reader_gone() -> None:
    """stdout's reader closed the pipe: send the rest to /dev/null so the exit flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
