"""specrag: answer "how do I do X with these APIs?" over a fleet of OpenAPI specs.

The public names below are imported on first use (PEP 562), so ``import specrag`` and the CLI's
start stay light: the engine pulls in LlamaIndex, Chroma and ONNX Runtime only when it is built.
Importing the package never configures logging (see ``specrag.core.quiet``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from specrag.core import quiet as _quiet  # noqa: F401  (before anything imports bm25s)

# public name -> the module that defines it
_EXPORTS = {
    "AgenticRetrievalRequest": "specrag.core.api_models",
    "AgenticRetriever": "specrag.engine.agentic.retriever",
    "ApiQueryEngine": "specrag.engine.query_engine",
    "HybridRetriever": "specrag.stages.hybrid_retriever",
    "KnowledgeContext": "specrag.context.knowledge",
    "Plan": "specrag.engine.plan",
    "PromptSet": "specrag.core.prompts",
    "ReferenceExpander": "specrag.stages.ref_expand",
    "RetrievalStats": "specrag.context.knowledge",
    "SearchMode": "specrag.core.api_models",
    "Settings": "specrag.core.settings",
    "SpecQuery": "specrag.stages.query",
    "SpecragError": "specrag.core.errors",
    "build_engine": "specrag.engine.factory",
    "corpus_settings": "specrag.index.workspace",
    "update_index": "specrag.index.workspace",
    "SpecragError": "specrag.core.errors",
    "SpecragToolSpec": "specrag.serve.tool_spec",
    "build_engine": "specrag.engine.factory",
    "corpus_settings": "specrag.index.workspace",
    "update_index": "specrag.index.workspace",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def _version() -> str:
    """The installed version, read on first use (importlib.metadata takes ~60 ms to import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specrag")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module 'specrag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from specrag.context.knowledge import KnowledgeContext, RetrievalStats
    from specrag.core.api_models import AgenticRetrievalRequest, SearchMode
    from specrag.core.errors import SpecragError
    from specrag.core.prompts import PromptSet
    from specrag.core.settings import Settings
    from specrag.engine.agentic.retriever import AgenticRetriever
    from specrag.engine.factory import build_engine
    from specrag.engine.plan import Plan
    from specrag.engine.query_engine import ApiQueryEngine
    from specrag.index.workspace import corpus_settings, update_index
    from specrag.serve.tool_spec import SpecragToolSpec
    from specrag.stages.hybrid_retriever import HybridRetriever
    from specrag.stages.query import SpecQuery
    from specrag.stages.ref_expand import ReferenceExpander
