"""The embedding model named in settings, as a LlamaIndex ``BaseEmbedding``, or None.

None means lexical-only search. A model that cannot be loaded is not an error: indexing and
queries keep working on BM25 alone, and one warning per process says why and what to do.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from pathlib import Path

from llama_index.core.base.embeddings.base import BaseEmbedding

from pipeline.settings import Settings

logger = logging.getLogger(__name__)

NO_EMBEDDINGS = "none"
HUB_HOST = "huggingface.co"
EMBED_BATCH_SIZE = 256
_OPENAI_PREFIX = "openai:"
# Messages already logged in this process: a query loop must not repeat the same warning.
_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning(message)


def build_embed_model(settings: Settings) -> BaseEmbedding | None:
    """Load the model named by ``settings.embed_model``; None (lexical only) if it cannot load."""
    name = settings.embed_model.strip()
    if name.lower() == NO_EMBEDDINGS:
        logger.info("embeddings disabled (SPECRAG_EMBED_MODEL=none): lexical search only")
        return None
    try:
        if name.startswith(_OPENAI_PREFIX):
            return _openai_model(name[len(_OPENAI_PREFIX):], settings)
        return _fastembed_model(name, settings)
    except Exception as exc:  # noqa: BLE001 - any load failure degrades to lexical search
        hint = ("set SPECRAG_EMBED_MODEL_PATH to a local ONNX folder of the model, "
                "or SPECRAG_EMBED_MODEL=none to silence this")
        _warn_once(f"embedding model {name!r} could not be loaded ({type(exc).__name__}: "
                   f"{str(exc)[:300]}); search runs lexical-only (BM25). To fix: {hint}")
        return None


def _fastembed_model(name: str, settings: Settings) -> BaseEmbedding:
    """fastembed on ONNX Runtime (no torch); a local folder when offline, else a download."""
    from llama_index.embeddings.fastembed import FastEmbedEmbedding

    kwargs = {}
    if settings.embed_model_path is None and not _downloadable(name):
        raise ConnectionError(f"the model hub is unreachable and {name!r} is not in fastembed's cache")
    if settings.embed_model_path is not None:
        path = settings.embed_model_path.expanduser()
        if not (path / "model.onnx").is_file():
            raise FileNotFoundError(f"no model.onnx in SPECRAG_EMBED_MODEL_PATH={path}")
        # FastEmbedEmbedding forwards extra kwargs to fastembed's TextEmbedding.
        kwargs["specific_model_path"] = str(path)
    return FastEmbedEmbedding(model_name=name, threads=settings.embed_threads,
                              embed_batch_size=EMBED_BATCH_SIZE, **kwargs)


def _downloadable(name: str) -> bool:
    """True when fastembed can get the model: cached already, or the hub answers within 2 s.

    Without this, fastembed retries an unreachable hub for ~40 s before giving up."""
    cache = Path(os.environ.get("FASTEMBED_CACHE_PATH", Path(tempfile.gettempdir()) / "fastembed_cache"))
    repo = name.split("/")[-1].lower()
    if cache.is_dir() and any(repo in p.name.lower() for p in cache.iterdir()):
        return True
    try:
        with socket.create_connection((HUB_HOST, 443), timeout=2):
            return True
    except OSError:
        return False


def _openai_model(model: str, settings: Settings) -> BaseEmbedding:
    try:
        from llama_index.embeddings.openai import OpenAIEmbedding
    except ImportError as exc:
        raise ImportError("OpenAI embeddings need an extra package: "
                          "pip install 'specrag[openai-embeddings]' (llama-index-embeddings-openai)") from exc
    if not settings.openai_api_key:
        raise ValueError("OPENAI_API_KEY is not set")
    return OpenAIEmbedding(model=model, api_key=settings.openai_api_key, api_base=settings.llm_base_url,
                           embed_batch_size=EMBED_BATCH_SIZE)


def embed_queries(model: BaseEmbedding, queries: list[str]) -> list[list[float]]:
    """Query embeddings of ``queries`` in one model call where the model takes a batch (fastembed
    does: ~5x cheaper per query for a batch of ten short queries), else one call each."""
    from llama_index.embeddings.fastembed import FastEmbedEmbedding

    if isinstance(model, FastEmbedEmbedding) and len(queries) > 1:
        return [vector.tolist() for vector in model._model.query_embed(queries)]
    return [model.get_query_embedding(q) for q in queries]


def embed_model_id(model: BaseEmbedding | None) -> str:
    """Identity recorded in the manifest: a different identity means every vector is rebuilt."""
    if model is None:
        return NO_EMBEDDINGS
    return f"{model.class_name()}:{model.model_name}"
