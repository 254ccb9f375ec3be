"""The service's thread settings hold while it runs and are undone after."""

import asyncio
import gc

from specrag.serve.concurrency import serving_threads
from threadpoolctl import threadpool_info


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_serving_threads_sizes_the_executor_and_single_threads_blas():
    before = _blas_threads()

    async def inside():
        async with serving_threads(24):
            loop = asyncio.get_running_loop()
            assert loop._default_executor._max_workers == 24
            assert all(n == 1 for n in _blas_threads())
            assert gc.get_freeze_count() > 0
            return await asyncio.to_thread(lambda: "ran in a worker")

    assert asyncio.run(inside()) == "ran in a worker"
    assert _blas_threads() == before
    gc.unfreeze()
