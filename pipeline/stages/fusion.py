"""Weighted reciprocal rank fusion (Cormack et al. 2009): score = sum_i w_i / (k + rank_i)."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore


def reciprocal_rank_fusion(rankings: list[tuple[list[NodeWithScore], float]], k: int = 60) -> list[NodeWithScore]:
    """Fuse ranked lists (each with a weight); ties broken by node id for stable output."""
    scores: dict[str, float] = {}
    nodes: dict[str, NodeWithScore] = {}
    for ranking, weight in rankings:
        for rank, hit in enumerate(ranking, start=1):
            node_id = hit.node.node_id
            scores[node_id] = scores.get(node_id, 0.0) + weight / (k + rank)
            nodes.setdefault(node_id, hit)
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return [NodeWithScore(node=nodes[i].node, score=scores[i]) for i in order]
