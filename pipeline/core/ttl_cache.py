"""An LRU cache with a time-to-live for LLM stage answers (selections, expansions).

Keys hold everything that changes the answer: the normalised query, the catalog version, the
prompt hash and the model, so a new catalog, prompt or model never serves a stale answer.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from typing import Callable, Generic, TypeVar

from pydantic import BaseModel

V = TypeVar("V", bound=BaseModel)


def normalise_query(query: str) -> str:
    return re.sub(r"\s+", " ", query).strip().lower()


def cache_key(stage: str, query: str, *, catalog_version: str, prompt_hash: str, model: str,
              extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``extra`` carries stage inputs beyond the query (stage 2: the selected APIs)."""
    return (stage, normalise_query(query), catalog_version, prompt_hash, model, *extra)


class TTLCache(Generic[V]):
    """Thread-safe LRU of pydantic values; entries expire ``ttl_s`` seconds after they were put.

    Values are copied in and out, so a caller that edits its result cannot change the cache.
    """

    def __init__(self, max_size: int = 1024, ttl_s: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        if max_size < 1 or ttl_s <= 0:
            raise ValueError(f"TTLCache needs max_size >= 1 and ttl_s > 0, got {max_size}, {ttl_s}")
        self.max_size, self.ttl_s, self._clock = max_size, ttl_s, clock
        self._entries: OrderedDict[tuple[str, ...], tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple[str, ...]) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] <= self._clock():
                if entry is not None:
                    del self._entries[key]
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1].model_copy(deep=True)

    def put(self, key: tuple[str, ...], value: V) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl_s, value.model_copy(deep=True))
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
