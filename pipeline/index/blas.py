"""A query's matrix products run on one BLAS thread.

A query's products are small (one or a few vectors times a type block), and OpenBLAS's threads
then fight the embedding model's ONNX Runtime threads, which spin-wait on the same two cores
after each query embedding: measured over the fleet with every query embedded (150 queries, the
same process alternating settings), p50 61 -> 35 ms and p95 119 -> 50 ms with one BLAS thread.
``specrag serve`` already runs its whole process so (``pipeline/serve/concurrency.py``); a library
user's engine gets it per search, and the user's own numpy work keeps its threads.
"""

from __future__ import annotations

from functools import lru_cache

from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _blas():
    return ThreadpoolController().select(user_api="blas")


def one_blas_thread():
    """Context manager: BLAS libraries limited to one thread inside (~10 us to enter and leave)."""
    return _blas().limit(limits=1)
