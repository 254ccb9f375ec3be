"""Knowledge bases: the indexed corpora one server answers from, each opened once and reused.

A ``kb_id`` is a corpus's index folder name under ``<tenant dir>/corpora/`` (``corpus_key`` of its
paths, e.g. ``corpus-5a5406f483``; the tenant dir is ``data_dir`` for the default tenant). Its alias
is the part before the hash (``corpus``), usable whenever no other served corpus has the same alias.
All knowledge bases share one embedding model. One ``KnowledgeBases`` holds one tenant's; two
tenants may hold the same kb_id (the same paths), each over its own index.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import threading
import time
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field
from specrag.catalog.io import load_catalog
from specrag.catalog.models import ApiIndex, Catalog
from specrag.core.errors import ChromaUnavailableError, IndexNotBuiltError, SpecragError
from specrag.core.settings import DEFAULT_TENANT, Settings
from specrag.engine.factory import build_engine
from specrag.engine.query_engine import ApiQueryEngine
from specrag.index.embeddings import build_embed_model
from specrag.index.lookup import operation_names
from specrag.index.manifest import load_manifest
from specrag.index.replica import ReplicaSync, server_corpora, sync_corpus
from specrag.index.store import ChunkStore
from specrag.index.workspace import corpus_settings, update_index
from specrag.serve.logs import request_id_var
from specrag.specs.ingest import require_spec_files

logger = logging.getLogger(__name__)
OPERATION_NAMES_CACHE = 64


class UnknownKnowledgeBase(SpecragError, LookupError):
    """A kb_id (or API id) that no served knowledge base has."""


class ForbiddenKnowledgeBase(SpecragError, PermissionError):
    """A kb_id that is not the caller's tenant's: the same answer whether another tenant has it or
    nobody does, so the status tells nothing about other tenants."""


class AmbiguousKnowledgeBase(SpecragError, ValueError):
    """No kb_id given where several knowledge bases could answer."""


class KnowledgeBaseInfo(BaseModel):
    kb_id: str
    alias: str
    apis: int = Field(description="APIs complete in the index")
    search_mode: str = Field(description="hybrid, or lexical when the index has no usable vectors")


class ChromaStatus(BaseModel):
    reachable: bool | None = Field(description="whether the last check of the Chroma server got its answers; "
                                               "null before the first check")
    checked_s_ago: float | None = Field(None, description="seconds since that check ended")
    server: str | None = Field(None, description="host:port (left out when API keys are configured)")
    error: str | None = Field(None, description="why the last check failed, one line (left out when API keys "
                                                "are configured)")


class ServerChecks:
    """What the replica's checks of its Chroma server found; read without waiting on the server."""

    def __init__(self, server: str):
        self.server = server
        self.reachable: bool | None = None
        self.error: str | None = None
        self.checked_at: float | None = None

    def record(self, error: str | None) -> None:
        self.reachable, self.error, self.checked_at = error is None, error, time.monotonic()

    def status(self) -> ChromaStatus:
        at = self.checked_at
        return ChromaStatus(reachable=self.reachable, server=self.server, error=self.error,
                            checked_s_ago=None if at is None else round(time.monotonic() - at, 3))


class KnowledgeBase:
    """One corpus: its settings, store and engine; operation names are read on demand (LRU)."""

    def __init__(self, kb_id: str, settings: Settings, engine: ApiQueryEngine, store):
        self.kb_id = kb_id
        self.alias = kb_id.rsplit("-", 1)[0]
        self.settings = settings
        self.engine = engine
        self.store = store
        self.catalog: Catalog = load_catalog(store.catalog_files)  # the store's generation's, as the engine's
        self.operations = lru_cache(maxsize=OPERATION_NAMES_CACHE)(self._load_operations)

    @classmethod
    def open(cls, store) -> "KnowledgeBase":
        """The knowledge base of an opened ``ChunkStore`` (its engine built here)."""
        local = store.settings
        kb = cls(local.storage.data_dir.name, local, build_engine(local, store=store), store)
        logger.info("knowledge base %s open: %d APIs, %s search", kb.kb_id, len(kb.api_ids), store.search_mode)
        return kb

    @property
    def api_ids(self) -> frozenset[str]:
        return self.engine.known_apis

    def info(self) -> KnowledgeBaseInfo:
        return KnowledgeBaseInfo(kb_id=self.kb_id, alias=self.alias, apis=len(self.api_ids),
                                 search_mode=self.store.search_mode)

    def api_index(self, file_id: str) -> ApiIndex | None:
        """Read through the engine's own reader (``specrag.catalog.io.ApiIndexes``), so the stages
        and the lookups share one cache of parsed indexes."""
        return self.engine.graph.load_index(file_id) if file_id in self.api_ids else None

    def _load_operations(self, file_id: str) -> dict[str, str]:
        """operationId -> chunk id of the API's operations (one batched read)."""
        return operation_names(self.store, file_id)

    def refreshed(self) -> "KnowledgeBase | None":
        """This corpus reopened on its newer generation (pulled from the Chroma server first, when
        there is one), or None when it is current."""
        if self.settings.storage.chroma_host is not None:
            sync_corpus(self.settings)
        return self.reopened_if_newer()

    def reopened_if_newer(self) -> "KnowledgeBase | None":
        """This corpus reopened on the generation its manifest names now (written by any process:
        a build in this data dir, a replica's pull), or None when that is the one served (the same
        local index and catalogs snapshot)."""
        on_disk, serving = load_manifest(self.settings.storage.data_dir), self.store.manifest
        if on_disk is None or (serving is not None and on_disk.live_files() == serving.live_files()):
            return None
        return KnowledgeBase.open(ChunkStore.open(self.settings, embed_model=self.store.embed_model))

    def close(self) -> None:
        self.store.close()


class KnowledgeBases:
    """The served knowledge bases by id and alias. With a Chroma server, a request starts a check (at
    most every ``SPECRAG_CHROMA_SYNC_S``) of whether a newer index was published, and the reopened
    knowledge base is swapped in; requests already running finish on the one they started with. A
    served request never waits for the check (it runs in a background thread): a server that does
    not answer delays no request, the local index serves on, and ``chroma_status`` says so."""

    def __init__(self, kbs: list[KnowledgeBase], tenant: str = DEFAULT_TENANT, private: bool = False,
                 sync_s: float | None = None):
        """``private``: a kb_id not served here is another tenant's business: 403, not 404.
        ``sync_s``: with a Chroma server, how often a request checks for a newer published index."""
        self.tenant, self.private = tenant, private
        self._set(kbs)
        self._sync = ReplicaSync(sync_s) if sync_s is not None else None
        servers = sorted({f"{kb.settings.storage.chroma_host}:{kb.settings.storage.chroma_port}" for kb in kbs
                          if kb.settings.storage.chroma_host})
        self.checks = ServerChecks(servers[0]) if servers and self._sync is not None else None
        self._closed = False

    def _set(self, kbs: list[KnowledgeBase]) -> None:
        aliases = [kb.alias for kb in kbs]
        by_alias = {kb.alias: kb for kb in kbs if aliases.count(kb.alias) == 1}
        # each dict is whole before it is assigned: a reader sees the old kb or the new one, never none
        self._by_id, self._by_alias = {kb.kb_id: kb for kb in kbs}, by_alias

    def replace(self, kb: KnowledgeBase) -> KnowledgeBase | None:
        """Serve ``kb`` in place of the one with its kb_id (requests already holding the old one finish
        with it); returns the old one."""
        old = self._by_id.get(kb.kb_id)
        self._set([kb if k.kb_id == kb.kb_id else k for k in self.all_now()] + ([] if old else [kb]))
        return old

    def refresh(self) -> None:
        """Swap in the knowledge bases whose index changed, when a check is due (see ReplicaSync).
        In a served request (on the event loop, or in a worker thread a request started) the check
        runs in a background thread and the request goes on with what is served now; elsewhere (the
        CLI, a script) it runs here, each call to the server bounded by SPECRAG_CHROMA_TIMEOUT_S."""
        if self._sync is None or not self._sync.claim():
            return
        if not _in_request():
            self._check()
            return
        try:
            threading.Thread(target=self._check, name=f"specrag-replica-sync-{self.tenant}", daemon=True).start()
        except RuntimeError:  # no new thread (the interpreter is exiting): check again later
            self._sync.done()

    def _check(self) -> None:
        """One check of every knowledge base (the caller holds the claim)."""
        unreachable = None
        try:
            for kb in self.all_now():
                fresh, unreachable = self._refreshed(kb)
                if fresh is not kb:
                    if self._closed:
                        fresh.close()
                    else:
                        self.replace(fresh)
                if unreachable is not None:
                    break  # one server for all: the others would wait as long for the same answer
        finally:
            if self.checks is not None:
                self.checks.record(unreachable)
            self._sync.done()

    @staticmethod
    def _refreshed(kb: KnowledgeBase) -> tuple[KnowledgeBase, str | None]:
        """(the knowledge base to serve, why the Chroma server was unreachable or None)."""
        try:
            return kb.refreshed() or kb, None
        except SpecragError as exc:  # server down, a pull that failed: keep serving what we have
            logger.warning("knowledge base %s: index update not applied: %s", kb.kb_id, exc)
            return kb, str(exc) if isinstance(exc, ChromaUnavailableError) else None

    def chroma_status(self, detail: bool = True) -> ChromaStatus | None:
        """The last check of the Chroma server (None without one); never waits for it. ``detail``:
        with the server's address and the error."""
        if self.checks is None:
            return None
        status = self.checks.status()
        return status if detail else status.model_copy(update={"server": None, "error": None})

    @classmethod
    def open(cls, settings: Settings, corpora: list[list[Path]] = (), keys: list[str] = (),
             progress: bool = False, embed_model="auto", private: bool = False,
             allow_empty: bool = False) -> "KnowledgeBases":
        """Index each corpus in ``corpora`` (incrementally) and open it, plus the indexed corpora
        named in ``keys``; with neither, every corpus indexed for ``settings.tenant``. Chroma is let
        go once built: serving reads only the local index."""
        for paths in corpora:  # a wrong --corpus fails before the model loads or a folder is made
            require_spec_files(paths)
        if not corpora and not keys:
            keys = sorted(p.parent.name for p in (settings.tenant_dir / "corpora").glob("*/manifest.json"))
        if settings.storage.chroma_host:
            keys = _pull_served(settings, list(keys), everything=not corpora and not keys)
        embed_model = build_embed_model(settings) if embed_model == "auto" else embed_model
        stores = []
        for paths in corpora:
            store = ChunkStore.open(corpus_settings(settings, paths), embed_model=embed_model)
            update_index(settings, paths, progress=progress, store=store)
            store.close_chroma()
            stores.append(store)
        stores += [ChunkStore.open(_existing(settings, key), embed_model=embed_model) for key in keys]
        if not stores and not allow_empty:
            raise IndexNotBuiltError(f"no index in {settings.tenant_dir / 'corpora'} to serve: pass --corpus PATH")
        kbs = cls([KnowledgeBase.open(store) for store in stores], settings.storage.tenant, private,
                  settings.storage.chroma_sync_s if settings.storage.chroma_host else None)
        if kbs.checks is not None:
            kbs.checks.record(None)  # the corpora were just brought up to date from the server
        return kbs

    def get(self, kb_id: str) -> KnowledgeBase:
        self.refresh()
        kb = self._by_id.get(kb_id) or self._by_alias.get(kb_id)
        if kb is None and self.private:
            raise ForbiddenKnowledgeBase(f"kb_id {kb_id!r} is not one of your knowledge bases"
                                         + (f"; yours: {', '.join(sorted(self._by_id))}" if self._by_id else ""))
        if kb is None:
            known = sorted([*self._by_id, *self._by_alias])
            hint = difflib.get_close_matches(kb_id, known, n=3)
            raise UnknownKnowledgeBase(f"unknown kb_id {kb_id!r}" + (f" (did you mean {', '.join(hint)}?)" if hint
                                       else f"; served: {', '.join(sorted(self._by_id))}"))
        return kb

    def default(self, kb_id: str | None) -> KnowledgeBase:
        """``kb_id``'s knowledge base; without one, the only one served."""
        self.refresh()
        if kb_id:
            return self.get(kb_id)
        if len(self._by_id) == 1:
            return next(iter(self._by_id.values()))
        if not self._by_id:
            raise IndexNotBuiltError(f"tenant {self.tenant!r} has no index yet: run `specrag index PATH... "
                                     f"--tenant {self.tenant}`")
        raise AmbiguousKnowledgeBase(f"several knowledge bases are served ({', '.join(sorted(self._by_id))}): "
                                     "pass kb_id")

    def all(self) -> list[KnowledgeBase]:
        self.refresh()
        return self.all_now()

    def all_now(self) -> list[KnowledgeBase]:
        return list(self._by_id.values())

    def with_api(self, api: str, kb_id: str | None = None) -> KnowledgeBase:
        """The knowledge base holding API ``api`` (``kb_id`` narrows the search to one)."""
        candidates = [self.get(kb_id)] if kb_id else self.all()
        holding = [kb for kb in candidates if api in kb.api_ids]
        if len(holding) == 1:
            return holding[0]
        if holding:
            raise AmbiguousKnowledgeBase(f"API {api!r} is in several knowledge bases "
                                       f"({', '.join(kb.kb_id for kb in holding)}): pass kb_id")
        known = sorted({a for kb in candidates for a in kb.api_ids})
        hint = difflib.get_close_matches(api, known, n=3)
        raise UnknownKnowledgeBase(f"unknown API id {api!r}" + (f" (did you mean {', '.join(hint)}?)" if hint else ""))

    def close(self) -> None:
        self._closed = True
        for kb in self.all_now():
            kb.close()


def _in_request() -> bool:
    """On a running event loop, or in a worker thread a served request started (the request id
    the middleware sets travels with ``asyncio.to_thread`` and Starlette's thread pool)."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return request_id_var.get() is not None


def _pull_served(settings: Settings, keys: list[str], everything: bool) -> list[str]:
    """``keys`` (all the corpora published for this tenant when ``everything``), each local
    index brought to the generation published on the Chroma server, pulled when missing."""
    served = server_corpora(settings)
    keys = sorted({*keys, *served}) if everything else keys
    for key in keys:
        named = [key] if key in served else [k for k in served if k.rsplit("-", 1)[0] == key]
        if len(named) == 1:
            sync_corpus(settings.model_copy(update={"data_dir": settings.tenant_dir / "corpora" / named[0]}))
    return keys


def _existing(settings: Settings, key: str) -> Settings:
    """The indexed corpus named ``key``: its folder name, or its alias when only one folder has it."""
    corpora = settings.tenant_dir / "corpora"
    indexed = sorted(p.parent.name for p in corpora.glob("*/manifest.json"))
    named = [key] if key in indexed else [k for k in indexed if k.rsplit("-", 1)[0] == key]
    if len(named) != 1:
        why = f"alias {key!r} names several indexes ({', '.join(named)})" if named else f"no index {key!r}"
        raise IndexNotBuiltError(f"{why} in {corpora}: " + (f"indexed: {', '.join(indexed)}" if indexed
                                                             else "run `specrag index PATH...`"))
    return settings.model_copy(update={"data_dir": corpora / named[0]})


