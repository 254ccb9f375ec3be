"""The ingest worker pool: forked workers never finalize what they inherit from the parent, and
none is forked while the parent works beside them."""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from pathlib import Path

from specrag.specs.pool import run_jobs


class _Finalized:
    """Part of a reference cycle; records the pid of the process that finalizes it."""

    def __init__(self, record: Path):
        self.record, self.cycle = record, self

    def __del__(self):
        with self.record.open("a") as out:
            out.write(f"{os.getpid()}\n")


def _collect_in_worker(_: int) -> int:
    gc.collect()
    return os.getpid()


def test_workers_leave_the_parents_garbage_alone(tmp_path):
    record = tmp_path / "finalized"
    gc.disable()  # keep the cycle uncollected in the parent until after the fork
    try:
        _Finalized(record)
        outcomes = list(run_jobs(_collect_in_worker, [1, 2], workers=2, timeout_s=60))
    finally:
        gc.enable()
    workers = {pid for _, pid in outcomes}
    assert len(workers) >= 1 and os.getpid() not in workers
    assert not record.exists() or not set(map(int, record.read_text().split())) & workers
    gc.collect()
    assert int(record.read_text().split()[-1]) == os.getpid()  # the parent still finalizes it


def _collector_enabled(_: int) -> bool:
    return gc.isenabled()


def test_jobs_run_with_the_collector_paused_and_the_parent_gets_it_back():
    assert gc.isenabled()
    outcomes = []
    for job, enabled in run_jobs(_collector_enabled, [1, 2, 3], workers=2, timeout_s=60):
        outcomes.append(enabled)
        assert not gc.isenabled()  # while results come in
    assert outcomes == [False, False, False]
    assert gc.isenabled()


def test_a_caller_that_stops_early_gets_the_collector_back():
    results = run_jobs(_collector_enabled, [1, 2, 3], workers=2, timeout_s=60)
    next(results)
    results.close()
    assert gc.isenabled()


def _payload(n: int) -> list[list]:
    return [[n, i] for i in range(50)]


def test_results_join_the_oldest_generation_unwalked():
    results = [payload for _, payload in run_jobs(_payload, [1, 2], workers=2, timeout_s=60)]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for payload in results for item in payload)
    assert gc.get_freeze_count() == 0


def test_objects_the_process_froze_stay_frozen():
    """Checked on one object of ours: the frozen count itself drifts as frozen temporaries die."""
    sentinel = [["frozen by the caller"]]
    gc.collect()
    gc.freeze()
    try:
        list(run_jobs(_payload, [1], workers=1, timeout_s=60))
        assert gc.get_freeze_count() > 0
        assert not any(o is sentinel for o in gc.get_objects())  # still in the permanent generation
    finally:
        gc.unfreeze()
    assert any(o is sentinel for o in gc.get_objects())  # and back with the collector once unfrozen


def test_the_parents_own_work_runs_once_beside_started_workers():
    seen = []
    results = run_jobs(_payload, [1, 2], workers=2, timeout_s=60,
                       meanwhile=lambda: seen.append(len(multiprocessing.active_children())))
    assert [payload for _, payload in results] == [_payload(1), _payload(2)]
    assert seen == [2]  # called once, with both workers already forked


def _fork_and_reap(order: list[str]) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    order.append("forked")


def test_no_process_forks_while_the_parent_works_beside_its_workers():
    """A worker replaced meanwhile (after a timeout or a crash) would start with the locks the
    parent's work held, an import's among them: any fork waits until that work is done."""
    order, forkers = [], []

    def meanwhile():
        forker = threading.Thread(target=_fork_and_reap, args=(order,))
        forker.start()
        forkers.append(forker)
        time.sleep(0.3)
        order.append("meanwhile done")

    assert [p for _, p in run_jobs(_payload, [1], workers=1, timeout_s=60, meanwhile=meanwhile)] == [_payload(1)]
    forkers[0].join(timeout=30)
    assert order == ["meanwhile done", "forked"]
    _fork_and_reap(order)  # and forks go on as before afterwards
    assert order[-1] == "forked"
