"""Replace a file atomically: readers (and a run that starts later) see the old bytes or the new
ones, never a mix, and an interrupted write leaves only a temporary file that is removed.

Files are created 0644 like the rest of the index (``mkstemp`` alone would make them 0600 and
another user serving the same index could not read them); the temporary name is unique, so two
writers never share it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE = 0o644


def write_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """``durable``: fsync before the rename (the manifest: what decides whether an index is whole)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
