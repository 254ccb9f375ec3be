"""BatchCoalescer: each caller gets its own result; concurrent callers share batches; errors
reach every caller of the failed batch; max_batch holds."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from specrag.index.batching import BatchCoalescer


def test_alone_a_caller_runs_its_own_batch_of_one():
    seen = []
    square = BatchCoalescer(lambda xs: seen.append(list(xs)) or [x * x for x in xs])
    assert [square(3), square(4)] == [9, 16] and seen == [[3], [4]]


def test_concurrent_callers_share_batches_and_get_their_own_results():
    sizes = []

    def slow_square(xs):
        sizes.append(len(xs))
        time.sleep(0.02)  # while one batch runs, the others queue up
        return [x * x for x in xs]

    square = BatchCoalescer(slow_square, max_batch=8)
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(square, range(64)))
    assert results == [x * x for x in range(64)]
    assert sum(sizes) == 64 and max(sizes) <= 8 and len(sizes) < 64
    assert square.items == 64 and square.batches == len(sizes)


def test_an_error_reaches_every_caller_of_its_batch_and_the_next_batch_runs():
    release = threading.Event()
    calls = []

    def fail_first(xs):
        calls.append(list(xs))
        if len(calls) == 1:
            release.wait(2)
            raise ValueError("model crashed")
        return list(xs)

    coalescer = BatchCoalescer(fail_first)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(coalescer, "a")
        time.sleep(0.05)
        second = pool.submit(coalescer, "b")  # queued behind the failing batch
        release.set()
        with pytest.raises(ValueError, match="model crashed"):
            first.result()
        assert second.result() == "b"


def test_a_wrong_number_of_results_is_an_error_and_max_batch_must_be_positive():
    with pytest.raises(RuntimeError, match="gave 0 results"):
        BatchCoalescer(lambda xs: [])("x")
    with pytest.raises(ValueError):
        BatchCoalescer(lambda xs: xs, max_batch=0)


@pytest.mark.parametrize("max_batch", [1, 3])
def test_the_lead_passes_from_batch_to_batch_until_the_queue_is_empty(max_batch):
    """Callers sleep until their own batch is done or they lead the next one: none is lost or left waiting."""
    def echo(xs):
        time.sleep(0.001)
        return list(xs)

    coalescer = BatchCoalescer(echo, max_batch=max_batch)
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(coalescer, i) for i in range(300)]
        assert [f.result(timeout=30) for f in futures] == list(range(300))
    assert coalescer.items == 300 and coalescer._queue == [] and not coalescer._running
    assert coalescer("alone") == "alone"  # idle again: the next caller leads at once
