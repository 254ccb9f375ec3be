"""The service's own OpenAPI document, as a spec file specrag can index (dogfooding)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from fastapi import APIRouter
from specrag.serve.app import create_app
from specrag.serve.kbs import KnowledgeBases


def service_openapi(extra_routers: Sequence[APIRouter] = ()) -> dict:
    """The OpenAPI 3.1 document of the HTTP service (no knowledge base needs to be open)."""
    return create_app(KnowledgeBases([]), extra_routers=extra_routers).openapi()


def write_service_openapi(path: Path, extra_routers: Sequence[APIRouter] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(service_openapi(extra_routers), indent=1) + "\n", encoding="utf-8")
    return path
