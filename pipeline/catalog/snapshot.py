"""One generation's catalogs in one file: what a served index reads, never what the next build rewrites.

``catalogs/`` is the builder's working copy: an index run rewrites its files in place (only those
that change) before it commits the new generation. A served knowledge base reads the catalog at
open and the per-API indexes and graphs later, on demand; read from ``catalogs/``, they would be
the next generation's while its chunks are still the old one's. So every commit packs the files
the serving side reads (``catalog.json``, ``indexes/``, ``graphs/``) into
``data_dir/local/catalogs-<sha256>.zip`` (content-named, written once, never changed), and the
manifest names it in the same atomic write that switches ``local_dir``. A store opens it with
its generation and keeps the file open: it reads its own generation's catalogs after the build
removed the file (as it does the local index's), and holds no more of it in memory than the
zip's directory. The catalog vectors stay in ``catalogs/``: a cache keyed by each entry's text.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zipfile
import zlib
from pathlib import Path

from specrag.core.errors import IndexDamagedError

SNAPSHOT_PREFIX, SNAPSHOT_SUFFIX = "catalogs-", ".zip"


def write_snapshot(files: list[tuple[str, Path]], root: Path) -> str | None:
    """The snapshot of ``files`` ((name in the snapshot, path): ``io.served_files``) in ``root``,
    written when not there yet: its file name, or None when there are no files."""
    if not files:
        return None
    digest, expected = hashlib.sha256(), {}
    for name, path in files:
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
        expected[name] = (len(data), zlib.crc32(data))
    target = Path(root) / f"{SNAPSHOT_PREFIX}{digest.hexdigest()[:20]}{SNAPSHOT_SUFFIX}"
    if target.is_file() and _holds(target, expected):
        return target.name
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as out:
            for name, path in files:
                out.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), path.read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target.name


def _holds(path: Path, expected: dict[str, tuple[int, int]]) -> bool:
    """Whether the snapshot at ``path`` lists exactly these files with these sizes and CRCs (its
    directory only: a damaged or cut file is written again, not trusted by its name)."""
    try:
        with zipfile.ZipFile(path) as existing:
            return {i.filename: (i.file_size, i.CRC) for i in existing.infolist()} == expected
    except (OSError, zipfile.BadZipFile):
        return False


def remove_stale_snapshots(root: Path, keep: str | None) -> None:
    """Every snapshot in ``root`` but ``keep`` (call after the manifest naming ``keep`` is written)."""
    for path in Path(root).glob(f"{SNAPSHOT_PREFIX}*{SNAPSHOT_SUFFIX}"):
        if path.name != keep:
            path.unlink(missing_ok=True)


class CatalogSnapshot:
    """A snapshot opened read-only; ``read`` is safe from several threads (zipfile locks its file)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
        except FileNotFoundError as exc:
            raise IndexDamagedError(f"{self.path} is missing") from exc
        except (OSError, zipfile.BadZipFile) as exc:
            raise IndexDamagedError(f"{self.path} is unreadable ({type(exc).__name__}: {str(exc)[:120]})") from exc
        self._names = frozenset(self._zip.namelist())

    def read(self, name: str) -> bytes | None:
        """The file's bytes; None when the snapshot has no such file."""
        if name not in self._names:
            return None
        try:
            return self._zip.read(name)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:  # a CRC mismatch is a BadZipFile
            raise IndexDamagedError(f"{self.path}: {name} is unreadable ({type(exc).__name__}); run `specrag "
                                    "index` on the same specs to repair it") from exc

    def close(self) -> None:
        self._zip.close()

    def __str__(self) -> str:
        return str(self.path)
