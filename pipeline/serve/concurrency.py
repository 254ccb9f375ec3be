"""How the service spends its cores under concurrent requests.

Requests run their CPU work in worker threads (``asyncio.to_thread``), and concurrent vector
searches in those threads are batched into one matrix product (``specrag.index.batching``). Two
defaults work against that, and are changed for the life of the service:

- asyncio's default executor has ``cpus + 4`` threads (6 here), so at most 6 searches can meet in
  a batch; ``SPECRAG_SERVE_THREADS`` threads let every waiting request join one.
- OpenBLAS starts a thread per core for each product, and products of different batches (and the
  spin-waits of its idle threads) then compete for the same cores; one BLAS thread per product
  leaves the parallelism to the request threads.
- Python's cyclic collector walks every tracked object, the opened index's included, on each full
  collection, which stalls every request thread: the objects alive at startup are frozen out of it
  (p99 400 -> 250 ms in the same load run).

Measured with ``specrag bench-serve`` (20 concurrent clients of unfiltered basic retrieval over the
whole fleet, client and service on the same 2 cores): 41 requests/s with these defaults, 74 with
one BLAS thread, 142 with all three changes (and the index's batched, transposed block products).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import AsyncIterator

from specrag.index.blas import one_blas_thread

logger = logging.getLogger(__name__)


def freeze_loaded() -> None:
    """What is loaded by now lives as long as the service: no collection pass walks it again (an
    open fleet engine holds ~270,000 objects the collector tracks, ~370,000 with its caches warm;
    a full collection walking them took 180-220 ms, about once per 200 queries)."""
    gc.collect()
    gc.freeze()


@asynccontextmanager
async def serving_threads(threads: int) -> AsyncIterator[None]:
    """Inside: the running loop's default executor has ``threads`` workers and BLAS runs
    single-threaded for the whole service (each search also limits itself, ``pipeline/index/blas.py``;
    held here, concurrent searches never restore another thread's setting in between)."""
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="specrag-request")
    loop.set_default_executor(executor)
    freeze_loaded()
    logger.info("request worker threads: %d; BLAS threads per product: 1", threads)
    with one_blas_thread():
        yield
