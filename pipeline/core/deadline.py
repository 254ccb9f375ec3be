"""One deadline per query for every LLM call it makes (select, expand, synthesize, and any later
stage), so that ``SPECRAG_LLM_DEADLINE_S`` bounds the query, not each call.

The engine opens a :func:`deadline_scope` at the start of a query; :mod:`specrag.core.llm` caps each
call at :func:`current_deadline`. The deadline lives in a ``ContextVar``, so it follows the query
into ``asyncio`` tasks and ``asyncio.to_thread`` workers and never leaks into a concurrent query.
A scope inside another one can only shorten the deadline, never extend it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_deadline: ContextVar[float | None] = ContextVar("specrag_llm_deadline", default=None)


def current_deadline() -> float | None:
    """The ``time.monotonic()`` instant by which the current query's LLM calls must end, if any."""
    return _deadline.get()


def earliest(*deadlines: float | None) -> float | None:
    given = [d for d in deadlines if d is not None]
    return min(given) if given else None


@contextmanager
def deadline_scope(seconds: float) -> Iterator[float]:
    """LLM calls inside end within ``seconds`` from now (or the enclosing scope's deadline, if earlier)."""
    deadline = earliest(time.monotonic() + seconds, _deadline.get())
    token = _deadline.set(deadline)
    try:
        yield deadline
    finally:
        _deadline.reset(token)
