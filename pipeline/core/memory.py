"""Peak memory, as benchmarks and the builder report it: a process's own, and a process tree's."""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import threading
from pathlib import Path

# A poll reads each process's smaps_rollup, a walk of its page tables: ~8 ms of CPU for a 4x
# re-index's three processes. Every 10 ms, the poller took a third of a core from the run it
# measured (its wall time 2.8-3.9 s against 2.4-2.7 s); the peaks it finds last hundreds of ms and
# read the same every 25, 50 or 100 ms (514-530 MB).
TREE_POLL_S = 0.05


def peak_rss_mb() -> float:
    """Peak RSS of this process in MB: VmHWM where /proc has it, else ru_maxrss.

    On Linux ``ru_maxrss`` survives exec: a child started by vfork+exec (as ``subprocess``
    does) inherits its parent's high-water mark, so it would report the build's memory.
    VmHWM belongs to the process's current address space, which exec replaced.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def return_freed_memory() -> None:
    """glibc keeps freed heap pages; hand them back so peak RSS reflects what is in use."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


class TreeMemory:
    """The most physical memory a process and its descendants held at once, polled every 50 ms
    while ``with`` runs: their summed Pss (``/proc/PID/smaps_rollup``), so a page that forked
    processes share counts once, split between them, and every child counts (a re-index's Chroma
    process and spec reader). A sum of each one's peak RSS counts shared pages once per process
    and peaks that never met. ``peak_mb`` is None where Linux's /proc cannot say (another OS)."""

    def __init__(self, pid: int, poll_s: float = TREE_POLL_S):
        self.pid, self.poll_s = pid, poll_s
        self.peak_mb: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="specrag-tree-memory", daemon=True)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while True:
            total = tree_pss_kb(self.pid)
            if total is not None:
                self.peak_mb = max(self.peak_mb or 0.0, round(total / 1024, 1))
            if self._stop.wait(self.poll_s):
                return


def tree_pss_kb(pid: int) -> int | None:
    """Summed Pss (kB) of ``pid`` and its descendants now; None where /proc cannot say."""
    total, known = 0, False
    for member in _tree(pid):
        try:
            with open(f"/proc/{member}/smaps_rollup", encoding="ascii") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total, known = total + int(line.split()[1]), True
                        break
        except (OSError, ValueError):  # gone meanwhile, or no smaps_rollup (Linux < 4.14)
            continue
    return total if known else None


def _tree(pid: int) -> list[int]:
    members, todo = [], [pid]
    while todo:
        member = todo.pop()
        members.append(member)
        try:
            for task in os.listdir(f"/proc/{member}/task"):
                with open(f"/proc/{member}/task/{task}/children", encoding="ascii") as children:
                    todo.extend(int(c) for c in children.read().split())
        except (OSError, ValueError):
            continue
    return members
