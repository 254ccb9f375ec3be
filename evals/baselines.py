"""The baselines every eval run reports beside the pipeline, on the same corpus in the same run.

- ``flat``: what a user builds in an afternoon instead of specrag. One document per operation
  over the whole fleet (method, path, summary, description, operationId, parameter names), BM25
  (bm25s, English stopwords, Snowball stems) and the same embedding model over the same
  documents, fused by RRF (k = 60, equal weights). The raw question goes to both sides; there is
  no API selection and no expansion. Built once from the index's operation chunks and cached
  beside the index.
- ``flat-chunks``: the same flat search, but over specrag's own operation chunks (BM25 over their
  search text, vectors over their embed texts). It shows what the chunk texts alone give,
  without stages 1 and 2.
- ``oracle-bm25`` (oracle setting): plain BM25 over the operations of the gold APIs only. It is
  the within-API ranking to beat once the right API is known.

Each baseline's ranking also becomes a context (:class:`ContextAssembler`): its first
``context_primaries`` chunks, fetched from the store as nodes, through the engine's own
``ReferenceExpander.postprocess_nodes`` (same token budget, chunk limit, depth and closure-first
rule), and the rest of its ranking through the engine's signature tier. That is the context a user of a flat top-k and the same expander would get, so the
context metrics compare the engine's context with it like for like.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Protocol

import bm25s
import numpy as np
import yaml
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import Field
from specrag.context.knowledge import KnowledgeContext
from specrag.context.nodes import chunk_to_node
from specrag.core.fusion import weighted_rrf
from specrag.core.ids import base_chunk_id
from specrag.evals.metrics import ContextScores, RankingScores
from specrag.index.embeddings import embed_model_id
from specrag.index.vector_reuse import embed_sorted
from specrag.specs.models import Chunk, ChunkType
from specrag.specs.render import parameter_names, strip_markdown
from specrag.stages.hybrid_retriever import HybridRetriever, SearchIndex
from specrag.stages.query import SpecQuery
from specrag.stages.ref_expand import ExpandedNodes

logger = logging.getLogger(__name__)
DEPTH = 10
CANDIDATES = 30
DESCRIPTION_CHARS = 1000
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Baseline(Protocol):
    name: str

    def rank(self, query: str, gold_apis: list[str], depth: int = DEPTH) -> list[str]:
        """Chunk ids, best first (at most ``depth``: the ranking metrics read the first ``DEPTH``,
        the context's signatures as deep as the engine's)."""


class BaselineScores(ContextScores, RankingScores):
    """A baseline's ranking metrics on one query and, when it was given a context, that context's
    metrics (same definitions as the pipeline's; None: no context was built)."""

    ranking: list[str] = []
    context_ids: list[str] = Field(default_factory=list, description="the context's chunk ids, primaries first")
    context_chunk_tokens: list[int] = Field(default_factory=list, description="tokens of each of context_ids")
    n_primary: int = Field(0, description="how many of context_ids are primary chunks")
    context_tokens: int | None = Field(None, description="the context's total_tokens; None without a context")


class ContextAssembler:
    """A ranking -> the context the engine's reference expansion and signature tier make of it.

    The first ``max_primary`` ids (the engine's ``context_primaries``), fetched through
    ``lookup`` and made nodes the way the store makes them, go through ``expander.postprocess_nodes``
    as the engine's search nodes do; ids the lookup lacks are skipped. The rest of the ranking
    gets signatures from ``signatures`` (the engine's tier), as the engine's ranking does."""

    def __init__(self, expander, max_primary: int, lookup=None, signatures=None):
        self.expander, self.max_primary, self.signatures = expander, max_primary, signatures
        self.lookup = lookup if lookup is not None else expander.lookup

    @classmethod
    def from_engine(cls, engine) -> "ContextAssembler":
        """The engine's own expander (``engine.references``), primary cap and signature tier."""
        return cls(engine.references, engine.settings.context_primaries, signatures=engine.signatures)

    @property
    def depth(self) -> int:
        """How deep a ranking this assembler reads: the signature tier's depth, at least ``DEPTH``."""
        return max(DEPTH, self.signatures.depth if self.signatures is not None else 0)

    def assemble(self, query: str, ranked_ids: list[str]) -> KnowledgeContext:
        top = list(dict.fromkeys(ranked_ids))[: self.max_primary]
        chunks = self.lookup.get_chunks(top)
        nodes = [NodeWithScore(node=chunk_to_node(chunks[cid]), score=None) for cid in top if cid in chunks]
        out = self.expander.postprocess_nodes(nodes, query_bundle=QueryBundle(query))
        if not isinstance(out, ExpandedNodes):
            raise TypeError(f"{type(self.expander).__name__}.postprocess_nodes must return ExpandedNodes")
        expansion = out.expansion
        signatures = self.signatures.signatures(ranked_ids, expansion) if self.signatures is not None else []
        return KnowledgeContext.assemble(query, expansion, signatures)


def operation_document(chunk: Chunk) -> str:
    """method, path, summary, description, operationId, parameter names: one line of text."""
    op: Any = {}
    try:
        op = yaml.load(chunk.text, Loader=_SafeLoader)
    except yaml.YAMLError:
        pass  # a split chunk's first part may not parse: its metadata still gives the rest
    op = op if isinstance(op, dict) else {}
    description = strip_markdown(op.get("description", "")) if isinstance(op.get("description"), str) else ""
    parts = [chunk.method, chunk.path, chunk.summary, description[:DESCRIPTION_CHARS], chunk.operation_id,
             " ".join(parameter_names(op.get("parameters")))]
    return " ".join(p for p in parts if p)


class FlatBaseline:
    name = "flat"

    def __init__(self, ids: list[str], bm25: bm25s.BM25, vectors: np.ndarray | None, embed_query):
        self.ids, self.bm25, self.vectors, self.embed_query = ids, bm25, vectors, embed_query

    @classmethod
    def build(cls, store, cache_dir: Path) -> "FlatBaseline":
        """From every complete API's operation chunks; vectors cached under ``cache_dir``."""
        chunks = _operation_chunks(store)
        ids, docs = [c.id for c in chunks], [operation_document(c) for c in chunks]
        bm25 = bm25s.BM25()
        bm25.index(_tokens(docs), show_progress=False)
        vectors = None
        if store.embedder is not None and store.search_mode == "hybrid":
            vectors = _cached_vectors(store.embedder, docs, Path(cache_dir))
        return cls(ids, bm25, vectors, store.embed_query)

    def rank(self, query: str, gold_apis: list[str], depth: int = DEPTH) -> list[str]:
        rankings = [(self._lexical(query), 1.0)]
        if self.vectors is not None:
            embedding = np.asarray(self.embed_query(query), dtype=np.float32)
            sims = self.vectors @ (embedding / max(float(np.linalg.norm(embedding)), 1e-9))
            rankings.append(([self.ids[i] for i in np.argsort(-sims, kind="stable")[:CANDIDATES]], 1.0))
        return [i for i, _ in weighted_rrf(rankings, 60)[:depth]]

    def _lexical(self, query: str) -> list[str]:
        tokens = _tokens([query])
        words = {i: term for term, i in tokens.vocab.items()}
        known = [words[i] for i in tokens.ids[0] if words[i] in self.bm25.vocab_dict] if tokens.ids else []
        if not known:
            return []
        scores = self.bm25.get_scores(known)
        best = np.argsort(-scores, kind="stable")[:CANDIDATES]
        return [self.ids[i] for i in best if scores[i] > 0]


class ChunkFlatBaseline:
    name = "flat-chunks"

    def __init__(self, index: SearchIndex, rrf_k: int = 60):
        self.retriever = HybridRetriever(index, top_k=DEPTH, rrf_k=rrf_k, vector_weight=1.0, bm25_weight=1.0)

    def rank(self, query: str, gold_apis: list[str], depth: int = DEPTH) -> list[str]:
        hits = self.retriever.retrieve(SpecQuery(query_str=query, types=["endpoint"], top_k=DEPTH,
                                                 further=max(0, depth - DEPTH), hydrate=False))
        return [h.node.node_id for h in hits]


class OracleBm25Baseline:
    name = "oracle-bm25"

    def __init__(self, index: SearchIndex):
        self.index = index

    def rank(self, query: str, gold_apis: list[str], depth: int = DEPTH) -> list[str]:
        hits = self.index.lexical_search(query, list(gold_apis), ["endpoint"], depth, hydrate=False)
        return [h.node.node_id for h in hits]


def _operation_chunks(store) -> list[Chunk]:
    ids = [i for api in sorted(store.complete_api_ids()) for i in store.api_chunk_ids(api)
           if base_chunk_id(i) == i and ":paths/" in i and not i.endswith(":errors")]
    found = store.get_chunks(ids)
    return [found[i] for i in ids if i in found and found[i].type is ChunkType.ENDPOINT]


def _tokens(texts: list[str]):
    import Stemmer

    return bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)


def _cached_vectors(model, docs: list[str], cache_dir: Path) -> np.ndarray:
    key = hashlib.sha256(json.dumps([embed_model_id(model), docs]).encode()).hexdigest()[:16]
    path = cache_dir / f"flat-{key}.npy"
    if path.is_file():
        return np.load(path)
    logger.info("embedding %d operation documents for the flat baseline (once; cached in %s)", len(docs), path)
    vectors = np.asarray(embed_sorted(model, docs), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors
