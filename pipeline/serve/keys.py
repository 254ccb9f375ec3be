"""API keys: each names the tenant whose knowledge bases its holder may read.

Two sources, both optional and merged: ``SPECRAG_API_KEYS_FILE``, a JSON file
``{"keys": [{"tenant": "acme", "sha256": "<64 hex>"}, ...]}`` (``specrag api-key TENANT`` makes an
entry), and ``SPECRAG_API_KEYS``, comma-separated ``TENANT:KEY`` or ``TENANT:sha256:<64 hex>``.
Only SHA-256 hashes are kept in memory; a presented key is hashed and compared with every entry
in constant time (``hmac.compare_digest``), so neither the lookup's timing nor a log line nor an
error message carries a key.

The keys file is re-read while the server runs: a lookup stats it (at most once every
``RELOAD_CHECK_S`` seconds) and re-reads it when its mtime, size or inode changed, so a key removed
from the file stops working within that time, without a restart. A file that no longer parses
keeps the keys read before (a warning says so); a file that is gone grants nothing. A server
started with keys stays keyed whatever the file holds later (never open to everyone).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError
from specrag.core.errors import SpecragError
from specrag.core.settings import TENANT_PATTERN, Settings

logger = logging.getLogger(__name__)
HASH_PREFIX = "sha256:"
RELOAD_CHECK_S = 2.0  # how often a lookup may stat the keys file
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
    """The configured keys; ``configured`` is False when there are none (one local default tenant).
    With ``file``, its entries are re-read when it changes (see the module docstring)."""

    def __init__(self, entries: list[KeyEntry], file: Path | None = None, file_entries: list[KeyEntry] = ()):
        self._fixed = [(bytes.fromhex(e.sha256), e.tenant) for e in entries]
        self._file = Path(file) if file is not None else None
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._stamp = _stamp(self._file) if self._file is not None else None
        self._entries = self._fixed + [(bytes.fromhex(e.sha256), e.tenant) for e in file_entries]
        self._keyed = bool(self._entries)

    @classmethod
    def from_settings(cls, settings: Settings) -> "ApiKeys":
        env = _parse_env(settings.serving.api_keys.get_secret_value()) if settings.serving.api_keys is not None else []
        if not settings.serving.api_keys_file:
            return cls(env)
        return cls(env, settings.serving.api_keys_file, read_keys_file(settings.serving.api_keys_file))

    @property
    def configured(self) -> bool:
        return self._keyed

    @property
    def tenants(self) -> list[str]:
        return sorted({tenant for _, tenant in self._entries})

    def tenant_of(self, key: str | None) -> str | None:
        """The key's tenant, or None for a missing or unknown key (every entry is compared)."""
        if not key:
            return None
        self.refresh()
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
        found = None
        for known, tenant in self._entries:
            if hmac.compare_digest(known, digest):
                found = tenant
        return found

    def refresh(self, force: bool = False) -> None:
        """Re-read the keys file if it changed (stat at most every ``RELOAD_CHECK_S`` unless ``force``)."""
        if self._file is None:
            return
        now = time.monotonic()
        if not force and now - self._checked < RELOAD_CHECK_S:
            return
        with self._lock:
            if not force and now - self._checked < RELOAD_CHECK_S:
                return
            self._checked = now
            stamp = _stamp(self._file)
            if stamp == self._stamp:
                return
            if stamp is None:
                file_entries = []
                logger.warning("SPECRAG_API_KEYS_FILE %s is gone: its keys no longer work", self._file)
            else:
                try:
                    file_entries = read_keys_file(self._file)
                except ApiKeysError as exc:
                    logger.warning("%s: keeping the keys read before", exc)
                    return
            self._stamp = stamp
            self._entries = self._fixed + [(bytes.fromhex(e.sha256), e.tenant) for e in file_entries]
            logger.info("API keys re-read from %s: %d entries", self._file, len(file_entries))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


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
