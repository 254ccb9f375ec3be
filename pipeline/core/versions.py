"""Installed package versions, stamped into manifests and eval reports."""

from __future__ import annotations

from functools import cache
from importlib import metadata

from specrag.core import caches


@caches.register
@cache
def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    """name -> installed version, for the names that are installed."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
