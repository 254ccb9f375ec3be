"""Direct lookups in a knowledge base, for the HTTP routes (``GET /api/v1/apis...``) and the MCP
tools and resources. They live in ``specrag.index.lookup``, below the HTTP stack, so the CLI's
``specrag apis`` and ``specrag show`` answer with the same code without it."""

from __future__ import annotations

from specrag.index.lookup import (ApiSummary, NotFound, OperationDetail, SpecElement, api_summary, get_operation,
                                  get_schema, list_apis)

__all__ = ["ApiSummary", "NotFound", "OperationDetail", "SpecElement", "api_summary", "get_operation", "get_schema",
           "list_apis"]
