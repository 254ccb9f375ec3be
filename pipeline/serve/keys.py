"""API keys: each names the tenant whose knowledge bases its holder may read.

Two sources, both optional and merged: ``SPECRAG_API_KEYS_FILE``, a JSON file
``{"keys": [{"tenant": "acme", "sha256": "<64 hex>"}, ...]}`` (``specrag api-key TENANT`` makes an
entry), and ``SPECRAG_API_KEYS``, comma-separated ``TENANT:KEY`` or ``TENANT:sha256:<64 hex>``.
Only SHA-256 hashes are kept in memory; a presented key is hashed and compared with every entry
in constant time (``hmac.compare_digest``), so neither the lookup's timing nor a log line nor an
error message carries a key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from specrag.errors import SpecragError
from specrag.settings import TENANT_PATTERN, Settings

HASH_PREFIX = "sha256:"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ApiKeysError(SpecragError, ValueError):
    """An unreadable keys file or a malformed key entry (the message never holds a key)."""


class KeyEntry(BaseModel):
    tenant: str = Field(pattern=TENANT_PATTERN)
    sha256: str = Field(pattern=_HEX64.pattern, description="hex SHA-256 of the key")


class KeysFile(BaseModel):
    keys: list[KeyEntry] = Field(default_factory=list)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key_entry(tenant: str) -> tuple[str, KeyEntry]:
    """A fresh random key and the file entry that grants it ``tenant`` (the key itself is not stored)."""
    if not re.match(TENANT_PATTERN, tenant):
        raise ApiKeysError(f"tenant {tenant!r}: use 1-63 of A-Za-z0-9_-, starting with a letter or digit")
    key = "sk-specrag-" + secrets.token_urlsafe(32)
    return key, KeyEntry(tenant=tenant, sha256=key_hash(key))


class ApiKeys:
    """The configured keys; ``configured`` is False when there are none (one local default tenant)."""

    def __init__(self, entries: list[KeyEntry]):
        self._entries = [(bytes.fromhex(e.sha256), e.tenant) for e in entries]

    @classmethod
    def from_settings(cls, settings: Settings) -> "ApiKeys":
        entries = read_keys_file(settings.api_keys_file) if settings.api_keys_file else []
        if settings.api_keys is not None:
            entries += _parse_env(settings.api_keys.get_secret_value())
        return cls(entries)

    @property
    def configured(self) -> bool:
        return bool(self._entries)

    @property
    def tenants(self) -> list[str]:
        return sorted({tenant for _, tenant in self._entries})

    def tenant_of(self, key: str | None) -> str | None:
        """The key's tenant, or None for a missing or unknown key (every entry is compared)."""
        if not key:
            return None
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
        found = None
        for known, tenant in self._entries:
            if hmac.compare_digest(known, digest):
                found = tenant
        return found


def read_keys_file(path: Path) -> list[KeyEntry]:
    try:
        return KeysFile.model_validate_json(Path(path).read_bytes()).keys
    except OSError as exc:
        raise ApiKeysError(f"SPECRAG_API_KEYS_FILE {path} cannot be read ({type(exc).__name__})") from None
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ApiKeysError(f"SPECRAG_API_KEYS_FILE {path} is not a keys file ({where}); expected "
                           '{"keys": [{"tenant": "NAME", "sha256": "<64 hex>"}]}') from None


def _parse_env(value: str) -> list[KeyEntry]:
    entries = []
    for number, item in enumerate((i.strip() for i in value.split(",")), start=1):
        tenant, sep, key = item.partition(":")
        if not item:
            continue
        if not sep or not key or not re.match(TENANT_PATTERN, tenant):
            raise ApiKeysError(f"SPECRAG_API_KEYS entry {number} is not TENANT:KEY (tenant: 1-63 of A-Za-z0-9_-)")
        hashed = key[len(HASH_PREFIX):] if key.startswith(HASH_PREFIX) else None
        if hashed is not None and not _HEX64.match(hashed):
            raise ApiKeysError(f"SPECRAG_API_KEYS entry {number}: sha256: must be followed by 64 lowercase hex digits")
        entries.append(KeyEntry(tenant=tenant, sha256=hashed or key_hash(key)))
    return entries
