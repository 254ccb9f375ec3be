"""Group commit for per-query work that is far cheaper in batches (query embeddings, a product
with the whole vector matrix): concurrent callers, each in its own thread, are served by one
batched call.

No timer and no extra thread: a caller that finds no batch running runs one for everything
queued (its own item included); callers that arrive meanwhile wait and are served by the next
batch. Alone, a caller pays nothing extra; under load, batches grow with the queue. An error
in a batch is raised in every caller of that batch.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

I = TypeVar("I")
O = TypeVar("O")


class _Slot(Generic[I, O]):
    __slots__ = ("item", "result", "error", "done")

    def __init__(self, item: I):
        self.item = item
        self.result: O | None = None
        self.error: BaseException | None = None
        self.done = False


class BatchCoalescer(Generic[I, O]):
    """``coalescer(item)`` returns ``run_batch([... item ...])[its position]``."""

    def __init__(self, run_batch: Callable[[list[I]], list[O]], max_batch: int = 64):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self._queue: list[_Slot[I, O]] = []
        self._running = False
        self._changed = threading.Condition()
        self.batches = 0  # batches run, and items served: their ratio is the mean batch size
        self.items = 0

    def __call__(self, item: I) -> O:
        slot: _Slot[I, O] = _Slot(item)
        with self._changed:
            self._queue.append(slot)
        while True:
            with self._changed:
                while not slot.done and self._running:
                    self._changed.wait()
                if slot.done:
                    return self._result(slot)
                self._running = True  # lead the next batch (ours may be a later one when many wait)
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch:]
            try:
                self._run(batch)
            finally:
                with self._changed:
                    self._running = False
                    self._changed.notify_all()

    def _run(self, batch: list[_Slot[I, O]]) -> None:
        try:
            results = self.run_batch([s.item for s in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"batch of {len(batch)} gave {len(results)} results")
            for s, r in zip(batch, results):
                s.result = r
        except BaseException as exc:  # noqa: BLE001 - delivered to every caller of the batch
            for s in batch:
                s.error = exc
        for s in batch:
            s.done = True
        self.batches += 1
        self.items += len(batch)

    @staticmethod
    def _result(slot: _Slot[I, O]) -> O:
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]
