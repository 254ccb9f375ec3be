"""Wire the engine from settings: the store, the catalog, and each stage (LLM or keyword)."""

from __future__ import annotations

from specrag.catalog.io import load_api_graph, load_api_indexes, load_catalog
from specrag.core.errors import IndexNotBuiltError
from specrag.core.llm import build_llm
from specrag.core.prompts import PromptSet
from specrag.core.settings import Settings
from specrag.core.ttl_cache import TTLCache
from specrag.engine.agentic.decompose import Decomposer
from specrag.engine.graph_queries import GraphQueries
from specrag.engine.query_engine import ApiQueryEngine
from specrag.index.catalog_vectors import blend_with_centroids, catalog_vectors
from specrag.index.embeddings import embed_model_id
from specrag.index.store import ChunkStore
from specrag.stages.api_select import KeywordApiSelector
from specrag.stages.api_select_llm import LLMApiSelector
from specrag.stages.expand_llm import LLMQueryExpander
from specrag.stages.hybrid_retriever import HybridRetriever
from specrag.stages.method_prior import MethodPrior
from specrag.stages.producers import ProducerExpander
from specrag.stages.query_expand import KeywordQueryExpander
from specrag.stages.ref_expand import ReferenceExpander
from specrag.stages.signatures import SignatureTier
from specrag.stages.synthesize import Synthesizer


def build_engine(settings: Settings, store=None) -> ApiQueryEngine:
    """An engine over the index in ``settings.data_dir`` (IndexNotBuiltError if there is none)."""
    store = store or ChunkStore.open(settings)
    catalogs = store.catalog_files  # the store's generation's: never those a build is rewriting
    catalog = load_catalog(catalogs)
    if not catalog.apis:
        raise IndexNotBuiltError(f"the index in {settings.storage.data_dir} holds no API (its corpus had no readable "
                                 "spec): run `specrag index PATH...` on a folder of OpenAPI/Swagger files")
    indexes = load_api_indexes(catalogs, catalog)
    retriever = HybridRetriever.from_settings(store, settings)
    api_vectors = None
    if store.search_mode == "hybrid":
        api_vectors = catalog_vectors(catalog, store.embedder, embed_model_id(store.embedder), settings.catalogs_path)
        if settings.selection.selection_centroid_weight:
            api_vectors = blend_with_centroids(api_vectors, store.endpoint_centroids([e.file_id for e in catalog.apis]),
                                               settings.selection.selection_centroid_weight)
    selector = KeywordApiSelector(catalog, indexes, retriever, settings.selection.selection_keyword_max_apis,
                                  drop_off=settings.selection.selection_drop_off, evidence_depth=settings.selection.selection_evidence_depth, api_vectors=api_vectors,
                                  embed_query=store.embed_query, weights=settings.selection.selection_weights,
                                  rrf_k=settings.selection.selection_rrf_k)
    expander = KeywordQueryExpander(indexes.get)
    synthesizer = decomposer = None
    if settings.llm_configured:
        llm = build_llm(settings)
        prompts = PromptSet.load(settings.llm.prompts_dir)
        cache = TTLCache(settings.llm.llm_cache_size, settings.llm.llm_cache_ttl_s)
        selector = LLMApiSelector(llm, catalog, selector, prompts, settings, cache)
        expander = LLMQueryExpander(llm, indexes.get, expander, prompts, settings, cache)
        synthesizer = Synthesizer(llm, prompts, settings)
        decomposer = Decomposer(llm, prompts, settings, cache)
    steps = ([MethodPrior(weight=settings.retrieval.method_weight)] if settings.retrieval.method_weight else []) + \
        ([ProducerExpander(hydrate=store.hydrate, retriever=retriever, load_index=indexes.get)]
         if settings.retrieval.producer_steps else [])
    known = frozenset(store.complete_api_ids() & catalog.ids())
    graph = GraphQueries(store, indexes.get, lambda api: load_api_graph(catalogs, api), known)
    return ApiQueryEngine(selector=selector, expander=expander, retriever=retriever, steps=steps,
                          references=ReferenceExpander.from_settings(store, settings),
                          signatures=SignatureTier.from_settings(store, settings), synthesizer=synthesizer,
                          decomposer=decomposer, settings=settings, known_apis=known, graph=graph)
