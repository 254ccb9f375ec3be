"""A query's matrix products run on one BLAS thread.

A query's products are small (one or a few vectors times a type block), and OpenBLAS's threads
then fight the embedding model's ONNX Runtime threads, which spin-wait on the same two cores
after each query embedding: measured over the fleet with every query embedded (150 queries, the
same process alternating settings), p50 61 -> 35 ms and p95 119 -> 50 ms with one BLAS thread.
``specrag serve`` already runs its whole process so (``pipeline/serve/concurrency.py``); a library
user's engine gets it per search, and the user's own numpy work keeps its threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from specrag.core import caches
from threadpoolctl import ThreadpoolController


@caches.register
@lru_cache(maxsize=1)
def _blas():
    return ThreadpoolController().select(user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS libraries limited to one thread inside, the caller's setting restored after; nothing
    to do where it is one already (``specrag serve``). Each library's own setter, not
    ``ThreadpoolController.limit``, which reads every library's full info first (~8 against ~2 us
    per search)."""
    changed = [(lib, n) for lib in _blas().lib_controllers if isinstance(n := lib.get_num_threads(), int) and n > 1]
    for lib, _ in changed:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, threads in changed:
            lib.set_num_threads(threads)
