"""Chunk <-> LlamaIndex node conversion: the one place that knows how a chunk becomes a node.

Metadata rides along but stays out of the embedding and LLM views of a node: the text is what a
reader gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode
from specrag.core.records import ContextChunk
from specrag.specs.models import Chunk


class Hit(NamedTuple):
    """A ranked chunk inside a search, read like LlamaIndex's ``NodeWithScore`` (``.node``,
    ``.score``) but without its pydantic validation: building each of a query's ranked chunks as a
    ``NodeWithScore`` cost 1.2 ms of its 12 ms (py-spy). Retrievers return ``NodeWithScore``
    (:func:`as_node_with_score`); a hit's stub node is shared and read-only."""

    node: TextNode
    score: float | None


class RowSource(Protocol):
    """What :class:`RankedRows` reads of the index generation its rows belong to."""

    def stub(self, row: int) -> TextNode: ...
    def id_order(self, rows: np.ndarray) -> np.ndarray: ...
    def in_apis(self, rows: np.ndarray, file_ids: set[str]) -> np.ndarray: ...


class RankedRows(Sequence):
    """A search's ranking as row numbers of one index generation, best first, read as a sequence
    of :class:`Hit`. Fusion works on the arrays (``fuse_hits``), and a hit's stub is looked up
    only when it is read: a query fuses ~1,400 ranked rows and reads ~100 (fused as hit objects
    and dictionaries, they were 26 % of a query's py-spy samples; as arrays, 10 %). ``ranks``: each
    row's 1-based rank in the ranking it came from (rows taken out leave their ranks empty; None:
    1..n)."""

    __slots__ = ("source", "rows", "scores", "scale", "ranks")

    def __init__(self, source: RowSource, rows: np.ndarray, scores: np.ndarray,
                 scale: Callable[[float], float] = float, ranks: np.ndarray | None = None):
        self.source, self.rows, self.scores, self.scale, self.ranks = source, rows, scores, scale, ranks

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return RankedRows(self.source, self.rows[i], self.scores[i], self.scale,
                              None if self.ranks is None else self.ranks[i])
        return Hit(self.source.stub(int(self.rows[i])), self.scale(float(self.scores[i])))

    def __iter__(self) -> Iterator[Hit]:
        stub, scale = self.source.stub, self.scale
        return (Hit(stub(row), scale(score)) for row, score in zip(self.rows.tolist(), self.scores.tolist()))

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, RankedRows)) else NotImplemented

    def rank_array(self) -> np.ndarray:
        return np.arange(1, len(self.rows) + 1) if self.ranks is None else self.ranks

    def without_apis(self, file_ids: set[str]) -> "RankedRows":
        """The rows of other APIs, each keeping its rank."""
        keep = ~self.source.in_apis(self.rows, file_ids)
        return RankedRows(self.source, self.rows[keep], self.scores[keep], self.scale, self.rank_array()[keep])

    def with_gaps(self) -> list[Hit | None]:
        """The hits at their ranks, ``None`` where a rank is empty."""
        if self.ranks is None:
            return list(self)
        out: list[Hit | None] = [None] * (int(self.ranks[-1]) if len(self.ranks) else 0)
        for rank, hit in zip(self.ranks.tolist(), self):
            out[rank - 1] = hit
        return out


def as_node_with_score(hit: Hit | NodeWithScore) -> NodeWithScore:
    return hit if isinstance(hit, NodeWithScore) else NodeWithScore(node=hit.node, score=hit.score)


def text_node(node_id: str, text: str, metadata: dict[str, Any]) -> TextNode:
    return TextNode(id_=node_id, text=text, metadata=metadata,
                    excluded_embed_metadata_keys=list(metadata), excluded_llm_metadata_keys=list(metadata))


def node_parts(chunk: Chunk) -> tuple[str, str, dict[str, Any]]:
    """What a chunk's node is made of: id, text, stored metadata (kept per row by the index)."""
    return chunk.id, chunk.text, chunk.metadata()


def chunk_to_node(chunk: Chunk) -> TextNode:
    return text_node(*node_parts(chunk))


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
