"""One writer per index folder: a second ``specrag index`` on the same corpus waits for the first,
then refuses in one line when it waited ``SPECRAG_INDEX_LOCK_TIMEOUT_S`` (0: refuse at once).

An OS file lock (``filelock``), so a killed run never leaves a stale lock behind; the holder
writes its pid beside it, so the waiting one can say who it waits for.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from filelock import FileLock, Timeout
from specrag.core.errors import IndexBusyError

logger = logging.getLogger(__name__)

LOCK_NAME = ".index.lock"
OWNER_NAME = ".index.lock.owner"


class IndexLock:
    def __init__(self, data_dir: Path, timeout_s: float):
        self.data_dir = Path(data_dir)
        self.timeout_s = timeout_s
        self._lock = FileLock(self.data_dir / LOCK_NAME, timeout=-1, thread_local=False)

    def __enter__(self) -> "IndexLock":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            holder = self._holder()
            if self.timeout_s <= 0:
                raise IndexBusyError(f"another `specrag index` ({holder}) is updating {self.data_dir}; "
                                     "try again when it has finished") from None
            logger.warning("waiting up to %.0f s for another `specrag index` (%s) updating %s",
                           self.timeout_s, holder, self.data_dir)
            try:
                self._lock.acquire(timeout=self.timeout_s)
            except Timeout:
                raise IndexBusyError(f"another `specrag index` ({self._holder()}) is still updating {self.data_dir} "
                                     f"after {self.timeout_s:.0f} s; try again when it has finished, or raise "
                                     "SPECRAG_INDEX_LOCK_TIMEOUT_S") from None
        (self.data_dir / OWNER_NAME).write_text(str(os.getpid()), encoding="utf-8")
        return self

    def __exit__(self, *exc) -> None:
        (self.data_dir / OWNER_NAME).unlink(missing_ok=True)
        self._lock.release()

    def _holder(self) -> str:
        try:
            return f"pid {(self.data_dir / OWNER_NAME).read_text(encoding='utf-8').strip()}"
        except OSError:
            return "pid unknown"
