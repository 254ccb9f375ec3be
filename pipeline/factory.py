"""Wire the engine from settings: the store, the catalog, and each stage (LLM or keyword)."""

from __future__ import annotations

import logging

from llama_index.core.schema import QueryBundle

from pipeline.catalog.io import load_api_indexes, load_catalog
from pipeline.catalog.vectors import catalog_vectors
from pipeline.index.embeddings import embed_model_id
from pipeline.engine import ApiQueryEngine
from pipeline.settings import Settings
from pipeline.stages.api_select import KeywordApiSelector
from pipeline.stages.hybrid_retriever import HybridRetriever
from pipeline.stages.lookup import LookupStepAdder
from pipeline.stages.query_expand import KeywordQueryExpander
from pipeline.stages.ref_expand import ReferenceExpander

logger = logging.getLogger(__name__)


def build_engine(settings: Settings, store=None) -> ApiQueryEngine:
    """An engine over the index in ``settings.data_dir`` (IndexNotBuiltError if there is none)."""
    from pipeline.index.store import ChunkStore

    store = store or ChunkStore.open(settings)
    catalog_dir = settings.catalogs_path
    catalog = load_catalog(catalog_dir)
    retriever = HybridRetriever.from_settings(store, settings)

    def fleet_search(query: str, k: int):
        return retriever.search(QueryBundle(query_str=query), None, ["endpoint"], k, hydrate=False)

    indexes = load_api_indexes(catalog_dir, catalog)
    api_vectors = None
    if store.search_mode == "hybrid":
        api_vectors = catalog_vectors(catalog, store.embed_model, embed_model_id(store.embed_model), catalog_dir)
    selector = KeywordApiSelector(catalog, indexes, fleet_search, settings.max_selected_apis,
                                  api_vectors=api_vectors, embed_query=store.embed_query)
    expander = KeywordQueryExpander(indexes.get)
    llm = prompts = None
    if settings.llm_configured:
        from pipeline.cache import TTLCache
        from pipeline.llm import build_llm
        from pipeline.prompts import PromptSet
        from pipeline.stages.api_select_llm import LLMApiSelector
        from pipeline.stages.expand_llm import LLMQueryExpander

        llm = build_llm(settings)
        prompts = PromptSet.load(settings.prompts_dir)
        cache = TTLCache(settings.llm_cache_size, settings.llm_cache_ttl_s)
        selector = LLMApiSelector(llm, catalog, selector, prompts, settings, cache)
        expander = LLMQueryExpander(llm, indexes.get, expander, prompts, settings, cache)
    return ApiQueryEngine(selector=selector, expander=expander, retriever=retriever,
                          references=ReferenceExpander.from_settings(store, settings), settings=settings,
                          known_apis=store.complete_api_ids() & catalog.ids(), lookups=LookupStepAdder(indexes.get),
                          llm=llm, prompts=prompts)
