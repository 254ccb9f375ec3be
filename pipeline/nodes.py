"""Chunk <-> LlamaIndex node conversion: the one place that knows how a chunk becomes a node.

Metadata rides along but stays out of the embedding and LLM views of a node: the text is what a
reader gets.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from llama_index.core.schema import BaseNode, NodeWithScore, TextNode

from pipeline.specs.models import Chunk
from pipeline.stages.results import ContextChunk


class Hit(NamedTuple):
    """A ranked chunk inside a search, read like LlamaIndex's ``NodeWithScore`` (``.node``,
    ``.score``) but without its pydantic validation: a query ranks ~1,300 hits in its scopes and
    keeps ~100, and building each as a ``NodeWithScore`` cost 1.2 ms of the query's 12 ms
    (py-spy). Retrievers return ``NodeWithScore`` (:func:`as_node_with_score`); a hit's stub node
    is shared and read-only."""

    node: TextNode
    score: float | None


def as_node_with_score(hit: Hit | NodeWithScore) -> NodeWithScore:
    return hit if isinstance(hit, NodeWithScore) else NodeWithScore(node=hit.node, score=hit.score)


def text_node(node_id: str, text: str, metadata: dict[str, Any]) -> TextNode:
    return TextNode(id_=node_id, text=text, metadata=metadata,
                    excluded_embed_metadata_keys=list(metadata), excluded_llm_metadata_keys=list(metadata))


def chunk_to_node(chunk: Chunk) -> TextNode:
    return text_node(chunk.id, chunk.text, chunk.metadata())


def node_to_chunk(node: BaseNode) -> Chunk:
    return Chunk.from_metadata(node.node_id, node.get_content(), dict(node.metadata))


def context_node(chunk: ContextChunk) -> NodeWithScore:
    """A context chunk as a source node; its depth and referrer ride along in the metadata."""
    extra = {"depth": chunk.depth} | ({"referenced_from": chunk.referenced_from} if chunk.referenced_from else {})
    return NodeWithScore(node=text_node(chunk.id, chunk.text, dict(chunk.metadata) | extra), score=chunk.score)


def context_chunk(hit: NodeWithScore, n_tokens: int) -> ContextChunk:
    """A retrieved node as a primary context chunk."""
    return ContextChunk(id=hit.node.node_id, text=hit.node.get_content(), metadata=dict(hit.node.metadata),
                        score=hit.score, n_tokens=n_tokens)
