"""The signature tier of a context: the ranked operations that did not become primaries (ranked
below the primary cap, or left out because their closure did not fit) each get a signature
(``specrag.specs.signature``) inside what is left of the token budget.

A context spends most of its budget on a few full closures; the next operations of the ranking
used to be dropped whole. As signatures (a few dozen tokens each: method, path, summary,
parameters, schema names) they still reach the reader, who can ask for any of them in full
(``specrag show``, ``get_operation``). The engine and the eval's baselines build them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field
from specrag.core.ids import ERRORS_SUFFIX, operation_method, split_chunk_id
from specrag.core.records import ContextChunk, ReferenceExpansion
from specrag.core.tokens import count_tokens
from specrag.specs.models import ChunkLookup
from specrag.specs.signature import operation_signature
from specrag.stages.ref_expand import shown_metadata


class SignatureTier(BaseModel):
    """Signatures of the ranked operations beyond the primaries, first fit within the budget left."""

    model_config = {"arbitrary_types_allowed": True}

    lookup: ChunkLookup = Field(description="where the ranked operations' chunks are read from")
    depth: int = Field(10, ge=0, description="ranked operations up to this rank are considered; 0: no signatures")
    token_limit: int = Field(4000, description="the context's token budget, shared with the expansion")
    other_api_limit: int | None = Field(None, ge=0, description="at most this many signatures of APIs stage 1 "
                                                                "did not select (None: no limit)")

    @classmethod
    def from_settings(cls, lookup: ChunkLookup, settings) -> "SignatureTier":
        return cls(lookup=lookup, depth=settings.context.context_signature_depth, token_limit=settings.context.context_token_limit,
                   other_api_limit=settings.context.context_other_api_signatures)

    def signatures(self, ranked_ids: list[str], expansion: ReferenceExpansion,
                   selected_apis: Sequence[str] = (), spent: int = 0) -> list[ContextChunk]:
        """One signature per operation among the first ``depth`` of ``ranked_ids`` that is not in
        the context already, in rank order, while the context stays within ``token_limit``. When
        stage 1 selected APIs, at most ``other_api_limit`` signatures go to APIs neither selected
        nor among the primaries, the best ranked: the search fuses the whole fleet in, and its hits
        would otherwise fill the tier, but the best of them is what a fleet-wide search offers when
        stage 1 picked wrong. ``spent``: tokens the context holds beside the expansion's (the
        primaries' example requests)."""
        present = {c.id for c in (*expansion.primary, *expansion.referenced)}
        wanted = [cid for cid in dict.fromkeys(ranked_ids[: self.depth])
                  if cid not in present and operation_method(cid) is not None and not cid.endswith(ERRORS_SUFFIX)]
        if selected_apis and self.other_api_limit is not None:
            scope = {*selected_apis, *(split_chunk_id(c.id)[0] for c in expansion.primary)}
            others = [cid for cid in wanted if split_chunk_id(cid)[0] not in scope]
            dropped = set(others[self.other_api_limit:])
            wanted = [cid for cid in wanted if cid not in dropped]
        if not wanted:
            return []
        chunks = self.lookup.get_chunks(wanted)
        left, out = self.token_limit - expansion.total_tokens - spent, []
        for cid in wanted:
            chunk = chunks.get(cid)
            text = operation_signature(chunk) if chunk is not None else ""
            n_tokens = count_tokens(text)
            if not text or n_tokens > left:
                continue
            out.append(ContextChunk(id=cid, text=text, metadata=shown_metadata(self.lookup, chunk), n_tokens=n_tokens,
                                    compact=True))
            left -= n_tokens
        return out
