"""Worker processes with a time limit per job.

A spec can hang its reader in C code (libyaml, a regex, a blocking read) where no signal
handler runs, so the limit is enforced from outside: pebble's pool terminates (then kills) a
worker whose job outlived it and starts a new one, and only that job fails. A worker that dies
(out of memory, a crash in a parser) fails only its own job too, unlike a
``ProcessPoolExecutor``, whose whole pool breaks.

Workers are forked (a job sees the parent's modules as they are) and freeze the garbage
collector's view of what they inherit first: a collection in the child would otherwise walk, and
finalize, the parent's objects, some of which (gRPC channels, open clients) crash when finalized
in a forked process.

The cyclic garbage collector is paused while a job runs and while the parent takes results in: a
job builds millions of small acyclic objects (a parsed spec, its chunks) that refcounting frees,
and every collection pass would walk all of them again (a fifth of a worker's time, and most of
the parent's time spent unpickling results). Cycles made meanwhile are collected once it resumes.
The results the parent took in stay alive for the rest of its run, so they join the oldest
generation at once (``gc.freeze`` then ``gc.unfreeze``: two list moves) instead of being walked
by a young, a middle and then a full collection on the way there (~2 s, serial, on the corpus).

The parent may do work of its own while the workers read (``meanwhile``: a re-index opens Chroma
while its one worker reads the changed spec). No worker is forked while that work runs: the first
workers are forked before it starts, and a replacement (after a timeout or a crash) waits for it
to end, so no child starts with a lock that the parent's work held, an import's among them.
"""

from __future__ import annotations

import gc
import os
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from functools import partial
from typing import Callable, Iterator, TypeVar

from pebble import ProcessExpired, ProcessPool
from specrag.core.errors import SpecragError

J = TypeVar("J")
R = TypeVar("R")


# Held while the parent works beside its workers; every fork in the process waits for it.
_no_fork = threading.RLock()
os.register_at_fork(before=_no_fork.acquire, after_in_parent=_no_fork.release, after_in_child=_no_fork.release)


class JobFailed(SpecragError):
    """A job that gave no result; the message is the one-line reason (returned in its place, not raised)."""


def run_jobs(fn: Callable[[J], R], jobs: list[J], workers: int, timeout_s: float,
             meanwhile: Callable[[], None] | None = None) -> Iterator[tuple[J, R | JobFailed]]:
    """Yield (job, result or JobFailed) in job order; ``fn`` must catch its own errors.
    ``meanwhile`` runs in the parent once the jobs are handed out, before the first result is taken."""
    if not jobs:
        return
    pool = ProcessPool(max_workers=max(1, min(workers, len(jobs))), initializer=gc.freeze)
    finished = False
    try:
        with gc_paused(promote=True):
            futures = [pool.schedule(partial(_run_without_gc, fn), args=(job,), timeout=timeout_s) for job in jobs]
            if meanwhile is not None:
                with _no_fork:  # pebble forked the first workers in the first schedule(), in this thread
                    meanwhile()
            for job, future in zip(jobs, futures):
                yield job, _outcome(future, timeout_s)
        finished = True
    finally:
        if finished:
            pool.close()
        else:  # the caller stopped early (or was interrupted): drop what is still queued
            pool.stop()
        pool.join()


@contextmanager
def gc_paused(promote: bool = False) -> Iterator[None]:
    """No cyclic collection inside (it stays off where the caller had turned it off). ``promote``:
    what is alive at the end goes to the oldest generation unwalked, unless the process froze
    objects of its own (unfreezing would hand those back to the collector)."""
    promote = promote and gc.get_freeze_count() == 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if promote:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _run_without_gc(fn: Callable[[J], R], job: J) -> R:
    with gc_paused():
        return fn(job)


def _outcome(future, timeout_s: float):
    try:
        return future.result()
    except FutureTimeout:
        return JobFailed(f"timed out after {timeout_s:g} s (SPECRAG_SPEC_TIMEOUT_S)")
    except ProcessExpired as exc:
        return JobFailed(f"worker process died (exit code {exc.exitcode}): out of memory or a crash while reading")
    except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled
        return JobFailed(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
