"""The process's peak memory, as benchmarks and the builder report it."""

from __future__ import annotations

import resource
import sys
from pathlib import Path


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
