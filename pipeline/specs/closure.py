"""Closure fit: does an operation's own reference closure fit the context budget?

Measured without labels over every operation ingested, the way the reference expander admits the
best hit: breadth-first over ``ref_ids`` to ``max_depth``, each component counted once, in its
compact form when it has one (a compact component's parts are not followed). The chunk-slot
limit does not bind the best hit's closure, so the figure that matters is tokens; the slot-bound
figure and the full-text figure are reported beside it, to show what each policy costs.
"""

from __future__ import annotations

import numpy as np
from specrag.core.ids import base_chunk_id
from specrag.core.latency import percentile
from specrag.specs.models import ApiChunks, Chunk, ChunkType, ClosureFit


def operation_closures(api: ApiChunks, max_depth: int = 3) -> list[tuple[int, int, int]]:
    """(compact tokens, chunks, full-text tokens) of each whole operation's closure: measured per
    API, so ingest can do it as each API comes in, while workers read the next specs."""
    by_id = {c.id: c for c in api.chunks}
    return [(*_closure(op, by_id, max_depth, compact=True), _closure(op, by_id, max_depth, compact=False)[0])
            for op in api.chunks if op.type is ChunkType.ENDPOINT and base_chunk_id(op.id) == op.id]


def closure_fit(closures: list[tuple[int, int, int]], token_limit: int = 4000, max_chunks: int = 15) -> ClosureFit:
    if not closures:
        return ClosureFit(token_limit=token_limit, max_chunks=max_chunks)
    tokens, chunks, full_tokens = (np.array(column) for column in zip(*closures))
    fits = tokens <= token_limit
    return ClosureFit(operations=len(tokens), token_limit=token_limit, max_chunks=max_chunks,
                      fit=round(float(fits.mean()), 4),
                      fit_with_slots=round(float((fits & (chunks <= max_chunks)).mean()), 4),
                      fit_full_text=round(float((full_tokens <= token_limit).mean()), 4),
                      tokens_p50=float(percentile(tokens.tolist(), 50)),
                      tokens_p90=float(percentile(tokens.tolist(), 90)), tokens_p99=float(percentile(tokens.tolist(), 99)))


def _closure(op: Chunk, by_id: dict[str, Chunk], max_depth: int, compact: bool) -> tuple[int, int]:
    """(tokens, chunks) of the operation and everything it reaches within ``max_depth`` hops."""
    seen, level, tokens = {op.id}, [op], op.n_tokens
    for _ in range(max_depth):
        following = []
        for parent in level:
            short = compact and bool(parent.compact_text)
            for ref in parent.ref_ids:
                if ref in seen or (short and base_chunk_id(ref) != ref) or ref not in by_id:
                    continue
                seen.add(ref)
                child = by_id[ref]
                tokens += child.compact_tokens if compact and child.compact_text else child.n_tokens
                following.append(child)
        level = following
    return tokens, len(seen)
