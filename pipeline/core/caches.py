"""Every process-wide cache of the package, resettable at once.

A module-level cache (an ``lru_cache``'d function, a module dict kept as a memo, a "told once"
set, a module-level object that keeps one) registers itself here when its module is imported::

    @caches.register
    @lru_cache(maxsize=256)
    def _query_terms(text: str) -> tuple[str, ...]: ...

    _plain_tags: dict[str, str] = caches.register({}, name="specrag.specs.yaml_dump._plain_tags")

``reset_all()`` empties them all (the tests call it after each test, ``tests/conftest.py``), so
no test sees what an earlier one left. Caches only: clearing one never changes an answer, only
how soon it comes. Per-instance caches (an index's record LRUs, a knowledge base's operation
names) live and die with their instance and are not registered.

Not the LLM answer cache: that is ``specrag.core.ttl_cache.TTLCache``, one per engine.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Registered(NamedTuple):
    name: str  # module.qualname of the function, or the name given
    cache: Any  # the lru_cache'd function or the container
    clear: Callable[[], None]


_registered: list[Registered] = []
_lock = threading.Lock()


def register(cache: T, *, name: str | None = None, clear: Callable[[], None] | None = None) -> T:
    """Register ``cache`` and return it unchanged (so it works as a decorator, above ``lru_cache``).

    ``clear`` defaults to ``cache.cache_clear`` (functools caches) or ``cache.clear`` (dicts, sets).
    """
    if clear is None:
        clear = getattr(cache, "cache_clear", None) or getattr(cache, "clear", None)
    if not callable(clear):
        raise TypeError(f"{cache!r} has neither cache_clear() nor clear(): pass clear=")
    if name is None:
        qualname = getattr(cache, "__qualname__", None)
        module = getattr(cache, "__module__", None) if qualname else sys._getframe(1).f_globals.get("__name__")
        name = f"{module}.{qualname or type(cache).__name__}"
    with _lock:
        _registered.append(Registered(name, cache, clear))
    return cache


def registered() -> list[Registered]:
    """The caches registered so far (those of the modules imported so far)."""
    with _lock:
        return list(_registered)


def size(entry: Registered) -> int:
    """Entries the cache holds now: ``cache_info().currsize`` or ``len()``."""
    info = getattr(entry.cache, "cache_info", None)
    return info().currsize if info is not None else len(entry.cache)


def reset_all() -> None:
    """Empty every registered cache."""
    for entry in registered():
        entry.clear()
