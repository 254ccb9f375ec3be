"""Tenants: whose knowledge bases a request may read, from the API key it presents.

With keys configured (:mod:`specrag.serve.keys`), each key's tenant gets its own
``KnowledgeBases``, opened from its own tenant dir (its own local index, BM25 postings, engine
and caches): a request reaches only its tenant's objects, so no vector, BM25 hit or cached answer
of another tenant is in its path. A missing or unknown key is 401; a kb_id that is not the
tenant's is 403 (whether another tenant has it or nobody does); a body ``tenant_id`` other than
the key's tenant is 403. Without keys, one local tenant owns everything and no key is asked for.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import BaseModel
from specrag.core.errors import SpecragError
from specrag.core.settings import Settings
from specrag.index.embeddings import build_embed_model
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.keys import ApiKeys

logger = logging.getLogger(__name__)


class Unauthorized(SpecragError, PermissionError):
    """No API key, or one that no tenant has (the message never repeats the key)."""


class ForbiddenTenant(SpecragError, PermissionError):
    """A request body naming a tenant other than its key's."""


class SharedCatalogDir(SpecragError, ValueError):
    """One catalog folder for several tenants would let one read another's API descriptions."""


class Tenants:
    """The served tenants, each with its knowledge bases; ``keys`` decide who is who."""

    def __init__(self, by_tenant: dict[str, KnowledgeBases], keys: ApiKeys | None = None):
        self.keys = keys or ApiKeys([])
        self._by_tenant = by_tenant
        if not self.keys.configured and len(by_tenant) != 1:
            raise ValueError("without API keys exactly one (local) tenant is served")

    @classmethod
    def local(cls, kbs: KnowledgeBases) -> "Tenants":
        """One tenant, no keys: today's single-user server."""
        return cls({kbs.tenant: kbs})

    @classmethod
    def open(cls, settings: Settings, keys: ApiKeys, corpora: list[list[Path]] = (),
             kb_keys: list[str] = ()) -> "Tenants":
        """Without keys: ``settings.tenant``'s knowledge bases (``corpora`` indexed first). With keys:
        every keyed tenant's indexed corpora (``corpora`` / ``kb_keys`` apply to ``settings.tenant``);
        a tenant with no index yet is served with none (its requests get a one-line 503)."""
        if not keys.configured:
            return cls.local(KnowledgeBases.open(settings, corpora, kb_keys))
        if settings.storage.catalog_dir is not None:
            raise SharedCatalogDir("SPECRAG_CATALOG_DIR puts every tenant's catalogs in one folder: unset it when "
                                   "API keys are configured (each corpus then keeps its catalogs in its own index folder)")
        if (corpora or kb_keys) and settings.storage.tenant not in keys.tenants:
            logger.warning("--corpus/--kb are served for tenant %r, which no API key names: no request can read "
                           "them (pass --tenant)", settings.storage.tenant)
        model = build_embed_model(settings)
        by_tenant = {}
        for tenant in sorted({*keys.tenants, *([settings.storage.tenant] if corpora or kb_keys else [])}):
            own = tenant == settings.storage.tenant
            by_tenant[tenant] = KnowledgeBases.open(settings.model_copy(update={"tenant": tenant}),
                                                    corpora if own else [], kb_keys if own else [],
                                                    embed_model=model, private=True, allow_empty=True)
        return cls(by_tenant, keys)

    @property
    def keyed(self) -> bool:
        return self.keys.configured

    def caller(self, key: str | None) -> KnowledgeBases:
        """The knowledge bases the key's tenant may read (the local tenant's when no keys are configured)."""
        if not self.keys.configured:
            return next(iter(self._by_tenant.values()))
        tenant = self.keys.tenant_of(key)
        if tenant is None:
            raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
                               if not key else "unknown API key")
        return self._by_tenant.get(tenant) or KnowledgeBases([], tenant, private=True)

    def all(self) -> list[KnowledgeBases]:
        return list(self._by_tenant.values())

    def knowledge_bases(self) -> list[KnowledgeBase]:
        return [kb for kbs in self.all() for kb in kbs.all()]

    def close(self) -> None:
        for kbs in self.all():
            kbs.close()


def check_tenant_id(kbs: KnowledgeBases, body: BaseModel) -> None:
    """A body's ``tenant_id``, when the caller sets it, must be the key's tenant: it never widens access."""
    if "tenant_id" in body.model_fields_set and getattr(body, "tenant_id") != kbs.tenant:
        raise ForbiddenTenant(f"tenant_id {getattr(body, 'tenant_id')!r} is not your API key's tenant "
                              f"({kbs.tenant!r}); leave tenant_id out or set it to your own")
