"""An ``Embedder`` as a LlamaIndex ``BaseEmbedding``: what queries (and LlamaIndex indexes such
as the bench's ``VectorStoreIndex``) embed with. Each call goes to the Embedder the builds use,
so query and build sides cannot drift apart. (The Embedder is typed loosely: importing
specrag.index.embeddings here would be an import cycle.)"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr


class EmbedderEmbedding(BaseEmbedding):
    _embedder: Any = PrivateAttr()  # an Embedder

    def __init__(self, embedder: Any, **kwargs: Any):
        super().__init__(model_name=embedder.model_id.partition(":")[2], **kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "EmbedderEmbedding"

    @property
    def embedder(self) -> Any:
        return self._embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed_queries([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed_documents([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed_documents(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
