"""Stage 3's method prior: the operations whose HTTP method the question's verb asks for move up.

"Create a new playlist called 'Road Trip'" retrieves the playlist calls of every method; the
verb says which one is meant (:func:`~specrag.stages.intent.expected_methods`). The ranking is
fused, by weighted reciprocal rank, with its own matching operations at their ranks: a soft
prior. At weight 0.5 and k 10, a matching call at rank r passes a call of another method at
rank r' when 10 + r < 1.5 (10 + r'): rank 6 passes rank 1, rank 12 passes ranks 5 to 11 but
never the first four. Components and calls of other methods keep their order among themselves.
Only a verb that changes something counts (:func:`~specrag.stages.intent.expected_methods`).
The weight is a setting (``RETRIEVAL_METHOD_WEIGHT``), chosen leave-one-set-out (README,
"Measured"); the fusion constant is stage 1's (10), not tuned apart.
"""

from __future__ import annotations

from typing import Optional

from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from specrag.core.fusion import weighted_rrf
from specrag.core.ids import operation_method
from specrag.stages.intent import expected_methods
from specrag.stages.query import question_of

RRF_K = 10  # stage 1's fusion constant (SELECTION_RRF_K's default)


class MethodPrior(BaseNodePostprocessor):
    """Reorders a ranking by the question's verb; hits keep their retrieval scores."""

    weight: float = Field(0.5, ge=0, description="weight of the matching operations' ranking (the ranking's is 1)")
    rrf_k: int = Field(RRF_K, ge=0, description="reciprocal rank fusion constant")

    @classmethod
    def class_name(cls) -> str:
        return "MethodPrior"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> list[NodeWithScore]:
        if query_bundle is None or not nodes or not self.weight:
            return nodes
        wanted = expected_methods(question_of(query_bundle))
        if not wanted:
            return nodes
        ids = [n.node.node_id for n in nodes]
        matching = [cid if operation_method(cid) in wanted else None for cid in ids]  # None keeps a rank
        if not any(matching):
            return nodes
        by_id = {n.node.node_id: n for n in nodes}
        return [by_id[cid] for cid, _ in weighted_rrf([(ids, 1.0), (matching, self.weight)], self.rrf_k)]
