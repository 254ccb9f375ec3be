"""Hot re-index: a running server serves a newer index generation without a restart or a lost request.

``specrag index`` (any process) writes the next local generation (``local/gen-N``) and the
snapshot of its catalogs (``local/catalogs-*.json``, naming blobs) under the index lock, switches
``manifest.json`` to both in one atomic write, then deletes the old ones (a process that has
their files open keeps reading them, and the replaced catalogs listing and its blobs stay one
more generation: a knowledge base reads its own generation's chunks, catalog, per-API indexes
and graphs, never the catalogs a build is rewriting). The watcher
``stat()``s each served knowledge base's manifest at most every ``SPECRAG_RELOAD_INTERVAL_S``
(one system call per knowledge base: cheap and bounded). When the stat changed and no build
holds the index lock, it reads the manifest; if it names another generation (local index or
catalogs) than the one served, a worker thread opens a new store and engine and
``KnowledgeBases.replace`` swaps it in. Requests that already hold the old knowledge base
finish with it; later ones get the new one; no request waits for the reload.

One hook for other ways of updating the local index (a replica pulling from a Chroma server):
anything that commits a new generation with a new manifest is picked up the same way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from specrag.core.errors import IndexBusyError, SpecragError
from specrag.index.lock import IndexLock
from specrag.index.manifest import manifest_path
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.tenancy import Tenants

logger = logging.getLogger(__name__)
Stamp = tuple[int, int, int] | None


def manifest_stamp(data_dir: Path) -> Stamp:
    """(inode, size, mtime) of the manifest: an atomic rewrite changes the inode."""
    try:
        st = os.stat(manifest_path(data_dir))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def served_generation(kb: KnowledgeBase) -> str | None:
    manifest = kb.store.manifest
    return manifest.local_dir if manifest is not None else None


class IndexWatcher:
    """``check()`` swaps in every knowledge base whose index moved on; ``run()`` calls it forever."""

    def __init__(self, tenants: Tenants, interval_s: float):
        self.tenants = tenants
        self.interval_s = interval_s
        self._seen: weakref.WeakKeyDictionary[KnowledgeBase, Stamp] = weakref.WeakKeyDictionary()
        self.swaps = 0

    def check(self) -> list[str]:
        """The kb_ids swapped in this pass."""
        swapped = []
        for kbs in self.tenants.all():
            for kb in kbs.all():
                if self._refresh(kbs, kb):
                    swapped.append(kb.kb_id)
        return swapped

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await asyncio.to_thread(self.check)
            except Exception:  # noqa: BLE001 - the watcher outlives any one failed check; the old index serves on
                logger.exception("index reload check failed")

    def _refresh(self, kbs: KnowledgeBases, kb: KnowledgeBase) -> bool:
        data_dir = kb.settings.storage.data_dir
        stamp = manifest_stamp(data_dir)  # taken first: a write after it is seen next time
        if kb in self._seen and self._seen[kb] == stamp:
            return False
        try:
            with _unless_building(data_dir):
                fresh = kb.reopened_if_newer()
            if fresh is None:
                self._seen[kb] = stamp
                return False
        except IndexBusyError:
            return False  # a build is running: look again once it is done
        except SpecragError as exc:  # a damaged or empty new index: keep serving the old one, say so once
            logger.warning("knowledge base %s keeps serving %s: the new index cannot be opened (%s)",
                           kb.kb_id, served_generation(kb), exc)
            self._seen[kb] = stamp
            return False
        self._seen[fresh] = stamp
        kbs.replace(fresh)
        kb.store.close_chroma()  # nothing else: requests in flight finish on the old generation
        self.swaps += 1
        logger.info("knowledge base %s now serves %s (was %s)", kb.kb_id, served_generation(fresh),
                    served_generation(kb), extra={"event": "index.swap", "kb_id": kb.kb_id})
        return True


@contextmanager
def _unless_building(data_dir: Path) -> Iterator[None]:
    """Holds the index lock, taken without waiting (IndexBusyError while a build holds it); no lock
    where the folder is read-only (a replica's may be)."""
    lock = IndexLock(data_dir, 0)
    try:
        lock.__enter__()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.__exit__(None, None, None)
