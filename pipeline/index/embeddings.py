"""The embedding model named in settings, as an ``Embedder``, or None.

None means lexical-only search. A model that cannot be loaded is not an error: indexing and
queries keep working on BM25 alone, and one warning per process says why and what to do.

An ``Embedder`` is the one implementation of "text -> vector" for a model. Builds call it
directly and never import LlamaIndex (``llama_index.core`` costs ~1.8 s, a third of a re-index);
queries see the same model as a LlamaIndex ``BaseEmbedding`` (``Embedder.llama``) whose every
call goes to that Embedder, so a text gets the same vector on both sides.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Callable
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.core import caches
from specrag.core.errors import EmbedModelUnavailableError
from specrag.core.settings import Settings

if TYPE_CHECKING:
    from fastembed import TextEmbedding
    from llama_index.core.base.embeddings.base import BaseEmbedding

logger = logging.getLogger(__name__)

NO_EMBEDDINGS = "none"
HUB_HOST = "huggingface.co"
EMBED_BATCH_SIZE = 256
_OPENAI_PREFIX = "openai:"
# The identity indexes were built under when fastembed was reached through LlamaIndex's
# FastEmbedEmbedding (same model, same calls, same vectors): kept, so they are not re-embedded.
FASTEMBED_ID = "FastEmbedEmbedding"
# Messages already logged in this process: a query loop must not repeat the same warning.
_warned: set[str] = caches.register(set(), name=f"{__name__}._warned")


class Embedder:
    """One loaded model: documents and queries to vectors, and its identity in the manifest."""

    model_id: str

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed_queries(self, queries: list[str]) -> list[list[float]]:
        raise NotImplementedError

    @cached_property
    def llama(self) -> BaseEmbedding:
        """This model as a LlamaIndex ``BaseEmbedding`` (imports LlamaIndex: query side only)."""
        # lazy: keeps llama_index.core (~2 s) out of `specrag index` (tests/index/test_build_imports.py)
        from specrag.index.llama_embedding import EmbedderEmbedding

        return EmbedderEmbedding(self, embed_batch_size=EMBED_BATCH_SIZE)


class FastEmbedder(Embedder):
    """fastembed on ONNX Runtime (no torch). A batch of documents is one ``embed`` call (one
    ONNX batch up to ``EMBED_BATCH_SIZE``); queries go through ``query_embed``, as the model wants.

    ``load`` makes the ONNX session (~130 MB, ~0.25 s): at once, or on the first embedding when
    ``deferred`` (a re-index: most edits bring few new texts, some none, and until then the run's
    spec reader and catalogs do not share the machine with the model's weights)."""

    def __init__(self, load: Callable[[], TextEmbedding], name: str, *, deferred: bool = False):
        self._load, self.name, self.model_id = load, name, f"{FASTEMBED_ID}:{name}"
        if not deferred:  # a failure here is build_embedder's to report (search goes lexical)
            self.__dict__["model"] = load()

    @cached_property
    def model(self) -> TextEmbedding:
        """The session, made now if it was deferred (then a failure fails the run: the index holds
        this model's vectors, and a text that has none cannot be searched like the others)."""
        try:
            return self._load()
        except Exception as exc:  # noqa: BLE001 - any load failure, on one line
            raise EmbedModelUnavailableError(
                f"the embedding model {self.model_id} could not be loaded to embed a new text "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); the served index was left as it was. "
                "Check SPECRAG_EMBED_MODEL_PATH, or set SPECRAG_EMBED_MODEL=none to rebuild the index without "
                "vectors") from exc

    @property
    def loaded(self) -> bool:
        return "model" in self.__dict__

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [vector.tolist() for vector in self.model.embed(texts, batch_size=EMBED_BATCH_SIZE)]

    def embed_queries(self, queries: list[str]) -> list[list[float]]:
        return [vector.tolist() for vector in self.model.query_embed(queries)]


class LlamaEmbedder(Embedder):
    """A model that exists as a LlamaIndex embedding only (OpenAI's): its calls on both sides."""

    def __init__(self, model: BaseEmbedding):
        self.llama, self.model_id = model, f"{model.class_name()}:{model.model_name}"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.llama.get_text_embedding_batch(texts)

    def embed_queries(self, queries: list[str]) -> list[list[float]]:
        return [self.llama.get_query_embedding(q) for q in queries]


class ReleasedEmbedder(Embedder):
    """The identity of a model whose weights were let go (a re-index past its last embedding:
    ~120 MB of ONNX session): what the manifest and the search mode need, and no calls."""

    def __init__(self, model_id: str):
        self.model_id = model_id

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError(f"the embedding model {self.model_id} was released after the build's last embedding")

    embed_queries = embed_documents


def as_embedder(model: Embedder | BaseEmbedding | None) -> Embedder | None:
    """The Embedder behind ``model``: itself, the one an ``Embedder.llama`` wraps, or a wrapper."""
    if model is None or isinstance(model, Embedder):
        return model
    inner = getattr(model, "embedder", None)
    return inner if isinstance(inner, Embedder) else LlamaEmbedder(model)


def build_embedder(settings: Settings, deferred: bool = False) -> Embedder | None:
    """Load the model named by ``settings.embed_model``; None (lexical only) if it cannot load.
    ``deferred``: a local model's session is made on its first embedding (``FastEmbedder``); its
    library and files are checked now."""
    name = settings.embeddings.embed_model.strip()
    if name.lower() == NO_EMBEDDINGS:
        logger.info("embeddings disabled (SPECRAG_EMBED_MODEL=none): lexical search only")
        return None
    try:
        if name.startswith(_OPENAI_PREFIX):
            return LlamaEmbedder(_openai_model(name[len(_OPENAI_PREFIX):], settings))
        return FastEmbedder(_fastembed_loader(name, settings), name, deferred=deferred)
    except Exception as exc:  # noqa: BLE001 - any load failure degrades to lexical search
        _warn_lexical(name, exc)
        return None


def load_now(embedder: Embedder | None) -> Embedder | None:
    """``embedder`` with its session made (one ``build_embedder`` deferred), or None with the same
    warning as ``build_embedder`` when it cannot load."""
    if not isinstance(embedder, FastEmbedder) or embedder.loaded:
        return embedder
    try:
        embedder.model  # noqa: B018 - makes the session
    except EmbedModelUnavailableError as exc:
        _warn_lexical(embedder.name, exc.__cause__ or exc)
        return None
    return embedder


def _warn_lexical(name: str, exc: BaseException) -> None:
    hint = ("set SPECRAG_EMBED_MODEL_PATH to a local ONNX folder of the model, "
            "or SPECRAG_EMBED_MODEL=none to silence this")
    _warn_once(f"embedding model {name!r} could not be loaded ({type(exc).__name__}: "
               f"{str(exc)[:300]}); search runs lexical-only (BM25). To fix: {hint}")


def build_embed_model(settings: Settings) -> BaseEmbedding | None:
    """The model of ``build_embedder`` as a LlamaIndex ``BaseEmbedding``, or None."""
    embedder = build_embedder(settings)
    return embedder.llama if embedder is not None else None


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning(message)


def _fastembed_loader(name: str, settings: Settings) -> Callable[[], TextEmbedding]:
    """What makes the session: from a local folder when offline, else a download."""
    from fastembed import TextEmbedding

    kwargs = {}
    if settings.embeddings.embed_model_path is None and not _downloadable(name):
        raise ConnectionError(f"the model hub is unreachable and {name!r} is not in fastembed's cache")
    if settings.embeddings.embed_model_path is not None:
        path = settings.embeddings.embed_model_path.expanduser()
        if not (path / "model.onnx").is_file():
            raise FileNotFoundError(f"no model.onnx in SPECRAG_EMBED_MODEL_PATH={path}")
        kwargs["specific_model_path"] = str(path)
    return partial(TextEmbedding, model_name=name, threads=settings.embeddings.embed_threads, **kwargs)


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
    if not settings.llm.openai_api_key:
        raise ValueError("OPENAI_API_KEY is not set")
    return OpenAIEmbedding(model=model, api_key=settings.llm.openai_api_key, api_base=settings.llm.llm_base_url,
                           embed_batch_size=EMBED_BATCH_SIZE)


def embed_queries(model: Embedder, queries: list[str]) -> list[list[float]]:
    """Query embeddings: one query through the model's LlamaIndex face (``get_query_embedding``),
    several in one model call (fastembed: ~5x cheaper per query for a batch of ten short ones)."""
    if len(queries) > 1:
        return model.embed_queries(queries)
    return [model.llama.get_query_embedding(q) for q in queries]


def embed_model_id(model: Embedder | BaseEmbedding | None) -> str:
    """Identity recorded in the manifest: a different identity means every vector is rebuilt."""
    embedder = as_embedder(model)
    return NO_EMBEDDINGS if embedder is None else embedder.model_id
