"""Telling that the configured LLM failed and keyword methods answered instead.

Each query records its fallbacks in ``retrieval_stats.fallbacks`` (and a server counts them in its
``specrag_fallbacks`` metric), but nobody reads stats to learn that the LLM is down. So a failed
LLM call is also told as one warning on the ``specrag.core.fallbacks`` logger: the CLI prints it on
stderr, a host application's logging receives it. Once per process for each (stage, reason): a
server whose LLM is down answers every query with keyword methods, and a line per query would bury
its log. The stages one query failed in are told together, in one line, when the query ends
(:func:`fallback_notice_scope`, opened by the engine's entry points).
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterable, Iterator

from specrag.core import caches
from specrag.core.records import Fallback

logger = logging.getLogger(__name__)

STAGE_NAMES = {"select": "API selection", "expand": "query expansion", "decompose": "question decomposition",
               "synthesize": "answer synthesis"}
NO_KEYWORD_METHOD = "synthesize"  # no keyword stand-in: the retrieved context is returned without an answer
MAX_DETAIL_CHARS = 200

_pending: ContextVar[list[Fallback] | None] = ContextVar("specrag_pending_fallbacks", default=None)


class FallbackNotices:
    """The (stage, reason) pairs this process has told already."""

    def __init__(self) -> None:
        self._told: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def tell(self, fallbacks: Iterable[Fallback]) -> None:
        """One warning naming every fallback whose (stage, reason) was not told before; else nothing."""
        with self._lock:
            new = {(f.stage, f.reason): f for f in fallbacks if (f.stage, f.reason) not in self._told}
            self._told.update(new)
        if new:
            logger.warning("%s", notice_text(list(new.values())))

    def forget(self) -> None:
        """Tell every kind again (tests; a host that wants to hear after it fixed the LLM)."""
        with self._lock:
            self._told.clear()

    def __len__(self) -> int:
        return len(self._told)


NOTICES = FallbackNotices()
caches.register(NOTICES, name=f"{__name__}.NOTICES", clear=NOTICES.forget)


def llm_call_failed(fallback: Fallback) -> None:
    """An LLM stage fell back after its call failed: told when the current query ends (with the
    query's other failed stages), or now when no query is open."""
    pending = _pending.get()
    if pending is None:
        NOTICES.tell([fallback])
    else:
        pending.append(fallback)


@contextmanager
def fallback_notice_scope() -> Iterator[None]:
    """The LLM failures inside are told in one line when the outermost scope ends. A ``ContextVar``
    holds them: a query's asyncio tasks and worker threads add to its list, concurrent queries
    never mix theirs."""
    if _pending.get() is not None:
        yield
        return
    pending: list[Fallback] = []
    token = _pending.set(pending)
    try:
        yield
    finally:
        _pending.reset(token)
        NOTICES.tell(pending)


def notice_text(fallbacks: list[Fallback]) -> str:
    """One line per notice: for each reason, the stages it hit, what failed, and what answered."""
    by_reason: dict[str, list[Fallback]] = {}
    for fallback in fallbacks:
        by_reason.setdefault(fallback.reason, []).append(fallback)
    parts = []
    for reason, group in by_reason.items():
        stages = list(dict.fromkeys(f.stage for f in group))
        keyword = [STAGE_NAMES.get(s, s) for s in stages if s != NO_KEYWORD_METHOD]
        outcomes = [f"keyword methods answered for {_and(keyword)}"] if keyword else []
        if NO_KEYWORD_METHOD in stages:
            outcomes.append("no answer was synthesized (the retrieved context is returned)")
        detail = " ".join((group[0].detail or reason).split())[:MAX_DETAIL_CHARS]
        parts.append(f"LLM call failed ({detail}): {', and '.join(outcomes)}")
    return "; ".join(parts) + "; told once per process, each query's retrieval_stats.fallbacks lists its own"


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
