"""Under the server's logging (``configure_json_logging``) every record is written once, as one
JSON line: a failed request's traceback is not logged a second time by uvicorn, a handler a server
library installed of its own (uvicorn's plain text one) is gone, and Python warnings are JSON too."""

from __future__ import annotations

import io
import json
import logging
import warnings

import httpx
import pytest
from fastapi import APIRouter

from .live import running_uvicorn


@pytest.fixture
def json_logs():
    """The server's logging into a StringIO (uvicorn's default plain handler installed first, as
    ``uvicorn.run`` with its default log config does); undone after."""
    from specrag.serve.logs import QUIET, configure_json_logging

    names = ("specrag", "uvicorn", "uvicorn.error", "uvicorn.access", "py.warnings", *QUIET)
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level, logging.getLogger(n).propagate)
             for n in names}
    root = logging.getLogger()
    saved_root = root.handlers[:], root.level
    plain = logging.StreamHandler(io.StringIO())
    logging.getLogger("uvicorn.error").addHandler(plain)
    logging.getLogger("uvicorn.error").propagate = False
    stream = io.StringIO()
    handler = configure_json_logging(logging.INFO, stream, queued=True)
    try:
        yield stream, plain.stream, handler
    finally:
        handler.close()
        logging.captureWarnings(False)
        root.handlers[:], _ = saved_root[0], root.setLevel(saved_root[1])
        for name, (handlers, level, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)


def test_each_record_is_one_json_line(json_logs, capfd):
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBases

    stream, plain, handler = json_logs
    router = APIRouter()

    @router.get("/boom")
    async def boom():
        raise RuntimeError("boom-7f3a")

    @router.get("/warn")
    async def warn():
        try:
            raise ValueError("inner-9c2e")
        except ValueError:
            logging.getLogger("specrag.test").warning("careful-5d1b", exc_info=True)
        warnings.warn("deprecated-3e8a", UserWarning, stacklevel=1)
        return {"ok": True}

    with running_uvicorn(create_app(KnowledgeBases([]), extra_routers=[router])) as url:
        assert httpx.get(url + "/boom").status_code == 500
        assert httpx.get(url + "/warn").status_code == 200
    handler.flush()
    text = stream.getvalue()
    records = [json.loads(line) for line in text.splitlines()]  # every line is JSON
    for marker in ("boom-7f3a", "careful-5d1b", "deprecated-3e8a"):
        assert sum(marker in json.dumps(r) for r in records) == 1, (marker, [r["message"] for r in records])
    assert "Traceback" in next(r["exc_info"] for r in records if "boom-7f3a" in json.dumps(r))
    assert plain.getvalue() == ""  # uvicorn's own plain handler got nothing
    out, err = capfd.readouterr()
    assert not any(m in out + err for m in ("boom-7f3a", "careful-5d1b", "deprecated-3e8a"))
