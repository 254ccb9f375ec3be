"""Chunk <-> LlamaIndex node conversion: the one place that knows how a chunk is stored."""

from __future__ import annotations

from llama_index.core.schema import TextNode

from pipeline.specs.models import Chunk


def chunk_to_node(chunk: Chunk) -> TextNode:
    """The node's text is what readers get; metadata stays out of embeddings and LLM text."""
    metadata = chunk.metadata()
    return TextNode(
        id_=chunk.id,
        text=chunk.text,
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=list(metadata),
    )


def node_to_chunk(node: TextNode) -> Chunk:
    return Chunk.from_metadata(node.node_id, node.get_content(), dict(node.metadata))
