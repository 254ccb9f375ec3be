"""The serving half of ``specrag bench``, run as a child process so that its peak RSS counts only
opening the index and answering queries, never the build that came before.

Reads a :class:`ServeRequest` as JSON on stdin, prints one :class:`ServeResult` as JSON on the
last line of stdout. Our pipeline and the plain LlamaIndex baseline run side by side in this one
process, interleaved per query, so both see the same warm caches and the same machine load.
"""

from __future__ import annotations

import sys
import time

from pydantic import BaseModel, Field
from specrag.core.memory import peak_rss_mb
from specrag.core.settings import Settings
from specrag.index.store import HYBRID, ChunkStore
from specrag.serve.concurrency import freeze_loaded

BASELINE_TOP_K = 5
STAGES = ("select", "expand", "search", "refs", "assemble", "total")


class ServeRequest(BaseModel):
    settings: dict = Field(description="Settings fields (by name) of the corpus index to open")
    queries: list[str]
    repeats: int = Field(1, ge=1, description="timed passes over the queries")
    warmup: bool = Field(True, description="run every query once, untimed, before timing")
    baseline: bool = Field(True, description="also time a plain VectorStoreIndex, interleaved per query")
    baseline_top_k: int = BASELINE_TOP_K


class ServeResult(BaseModel):
    search_mode: str
    wall_ms: list[float] = Field(description="perf_counter around retrieve_context, one per timed call")
    stage_ms: dict[str, list[float]] = Field(description="timings_ms of each timed call, by stage")
    baseline_ms: list[float] = Field(default_factory=list, description="VectorStoreIndex retriever, one per call")
    baseline_unavailable: str = Field("", description="why the baseline could not run ('' when it ran)")
    rss_open_mb: float = Field(description="peak RSS once the engine was open, before any query")
    peak_rss_mb: float = Field(description="peak RSS of this process after serving every query")


def _baseline(store, top_k: int):
    """A plain ``VectorStoreIndex`` top-k retriever over our Chroma collection, or (None, why).

    Its rows are the distinct embed texts (id: the text's hash; no text, no metadata), not the
    chunks: what it times is Chroma's own top-k over the store of record (61k rows for the fleet),
    not an answer anyone reads (nodes without text)."""
    from llama_index.core import VectorStoreIndex
    if store.embed_model is None:
        return None, ("lexical mode: no embedding model is loaded (SPECRAG_EMBED_MODEL=none, or the model "
                      "failed to load), so there are no vectors for a VectorStoreIndex top-k to search")
    if store.search_mode != HYBRID:
        return None, ("lexical mode: the index was built with another embedding model, so its vectors "
                      "do not match the query embeddings; rebuild with `specrag index`")
    index = VectorStoreIndex.from_vector_store(store.vectors, embed_model=store.embed_model)
    return index.as_retriever(similarity_top_k=top_k), ""


def serve(request: ServeRequest) -> ServeResult:
    """Open the engine over the built index and time every query (ours, then the baseline)."""
    # lazy: the parent bench process imports this module for its models; the engine (openai, bm25s:
    # ~1.5 s, and their RSS) loads only in this serving child
    from specrag.engine.factory import build_engine

    settings = Settings(**request.settings)
    store = ChunkStore.open(settings)
    engine = build_engine(settings, store=store)
    baseline, why = _baseline(store, request.baseline_top_k) if request.baseline else (None, "not requested")
    freeze_loaded()  # as `specrag serve` does at its start: the timed queries meet the collections it meets
    rss_open = peak_rss_mb()
    result = ServeResult(search_mode=store.search_mode, wall_ms=[], stage_ms={s: [] for s in STAGES},
                         baseline_unavailable=why, rss_open_mb=rss_open, peak_rss_mb=rss_open)
    passes = [False] * request.warmup + [True] * request.repeats
    for timed in passes:
        for query in request.queries:
            _one(store, engine, baseline, query, result if timed else None)
    result.peak_rss_mb = peak_rss_mb()
    store.close()
    return result


def _one(store, engine, baseline, query: str, result: ServeResult | None) -> None:
    """Each side embeds the query in its timed call: the warm-up pass would otherwise leave every
    query's embedding in our cache while the baseline embeds again (reports before 2026-11-23
    timed ours from the cache: ~3-5 ms per query flattered)."""
    store.forget_query_embeddings()
    t = time.perf_counter()
    ctx = engine.retrieve_context(query)
    wall = (time.perf_counter() - t) * 1000
    if baseline is not None:
        t = time.perf_counter()
        baseline.retrieve(query)
        base = (time.perf_counter() - t) * 1000
    if result is None:
        return
    result.wall_ms.append(round(wall, 3))
    for stage in STAGES:
        result.stage_ms[stage].append(ctx.retrieval_stats.timings_ms.get(stage, 0.0))
    if baseline is not None:
        result.baseline_ms.append(round(base, 3))


def main() -> int:
    request = ServeRequest.model_validate_json(sys.stdin.read())
    result = serve(request)
    sys.stdout.write("\n" + result.model_dump_json() + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
