"""TTLCache: LRU order, expiry, normalised keys, copies, and thread safety."""

from __future__ import annotations

import threading

import pytest
from specrag.core.ttl_cache import TTLCache, cache_key, normalise_query
from specrag.stages.api_select_llm import SelectionAnswer as ApiSelection


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sel(*ids: str) -> ApiSelection:
    return ApiSelection(selected_apis=list(ids))


def test_key_normalises_the_query_and_keeps_the_rest():
    assert normalise_query("  Top  RATED\tmovies \n") == "top rated movies"
    base = dict(catalog_version="v1", prompt_hash="abc", model="m")
    assert cache_key("select", "Top rated", **base) == cache_key("select", " top   RATED ", **base)
    assert cache_key("select", "q", **base) != cache_key("select", "q", **{**base, "catalog_version": "v2"})
    assert cache_key("select", "q", **base) != cache_key("select", "q", **{**base, "prompt_hash": "abd"})
    assert cache_key("select", "q", **base) != cache_key("select", "q", **{**base, "model": "n"})
    assert cache_key("select", "q", **base) != cache_key("expand", "q", **base)


def test_lru_evicts_the_least_recently_used():
    cache = TTLCache(max_size=2, ttl_s=60)
    cache.put(("a",), sel("a"))
    cache.put(("b",), sel("b"))
    assert cache.get(("a",)) == sel("a")  # a is now the most recent
    cache.put(("c",), sel("c"))
    assert cache.get(("b",)) is None and cache.get(("a",)) == sel("a") and len(cache) == 2
    assert (cache.hits, cache.misses) == (2, 1)


def test_entries_expire_after_ttl():
    clock = Clock()
    cache = TTLCache(max_size=4, ttl_s=10, clock=clock)
    cache.put(("a",), sel("a"))
    clock.now += 9.9
    assert cache.get(("a",)) == sel("a")
    clock.now += 0.2
    assert cache.get(("a",)) is None and len(cache) == 0


def test_values_are_copied_in_and_out():
    cache = TTLCache()
    value = sel("a")
    cache.put(("k",), value)
    value.selected_apis.append("b")
    cache.get(("k",)).selected_apis.append("c")
    assert cache.get(("k",)) == sel("a")


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="max_size >= 1"):
        TTLCache(max_size=0)


def test_concurrent_use_keeps_the_size_bound():
    cache = TTLCache(max_size=50, ttl_s=60)

    def work(t: int) -> None:
        for i in range(300):
            cache.put((f"{t}-{i}",), sel(str(i)))
            cache.get((f"{t}-{i - 1}",))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(cache) == 50 and cache.hits + cache.misses == 8 * 300
