"""The service's own OpenAPI document, as a spec file specrag can index (dogfooding)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.serve.routes.agentic import AgenticRetriever


def service_openapi(agentic_retriever: AgenticRetriever | None = None) -> dict:
    """The OpenAPI 3.1 document of the HTTP service (no knowledge base needs to be open)."""
    from pipeline.serve.app import create_app
    from pipeline.serve.kbs import KnowledgeBases

    return create_app(KnowledgeBases([]), agentic_retriever=agentic_retriever).openapi()


def write_service_openapi(path: Path, agentic_retriever: AgenticRetriever | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(service_openapi(agentic_retriever), indent=1) + "\n", encoding="utf-8")
    return path
