"""Stage 1 by LLM over HTTP: results, fallbacks with their reasons, cache, shortlisting under budget."""

from __future__ import annotations

import pytest
from llama_index.core.utils import get_tokenizer
from specrag.catalog.models import Catalog, CatalogEntry
from specrag.core.ttl_cache import TTLCache
from specrag.stages.api_select_llm import LLMApiSelector

from .fakes import FakeKeywordSelector
from .openai_server import Reply, answer

QUERY = "who directed the top rated movie"


def _selector(llm, catalog, fallback, prompts, settings, cache=None):
    return LLMApiSelector(llm, catalog, fallback, prompts, settings, cache=cache)


def test_valid_answer(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(answer({"selected_apis": ["tmdb", "thetvdb"], "reasoning": "movie credits"}))
    result = stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert result.selected_apis == ["tmdb", "thetvdb"] and result.reasoning == "movie credits"
    assert stats.mode == "llm" and stats.selected_apis == ["tmdb", "thetvdb"] and stats.fallbacks == []
    assert stats.prompt == f"select_apis@{prompts.info('select_apis').hash}"
    assert [(c.stage, c.attempts, c.ok, c.prompt_tokens) for c in stats.llm_calls] == [("select", 1, True, 40)]
    assert fallback_selector.calls == 0


def test_the_prompt_file_is_what_is_sent(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(answer({"selected_apis": ["tmdb"]}))
    selector = _selector(llm, catalog, fallback_selector, prompts, settings)
    selector.select(QUERY)
    sent = server.user_texts()[0]
    assert sent == prompts.select_apis.format(**selector.prompt_vars(QUERY))
    assert sent.startswith("You choose which APIs a developer needs")  # prompts/select_apis.txt
    assert f"Task: {QUERY}" in sent and "- tmdb: The Movie Database — Movies, TV shows and people" in sent
    assert "- stripe: Stripe" in sent  # a small catalog is sent whole


def test_hallucinated_ids_are_dropped_and_counted(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(answer({"selected_apis": ["imdb", "TMDB", "tmdb", "netflix"], "reasoning": "r"}))
    result = stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert result.selected_apis == ["tmdb"]
    assert stats.dropped_ids == ["imdb", "netflix"] and stats.fallbacks == []


def test_only_hallucinated_ids_fall_back(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(answer({"selected_apis": ["imdb"], "reasoning": "r"}))
    result = stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert result.selected_apis == ["tmdb"] and result.reasoning == "keyword"
    assert [(f.stage, f.reason) for f in stats.fallbacks] == [("select", "no_valid_ids")]
    assert stats.dropped_ids == ["imdb"] and stats.selected_apis == ["tmdb"]


def test_empty_selection_falls_back(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(answer({"selected_apis": [], "reasoning": "nothing fits"}))
    result = stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert result.selected_apis == ["tmdb"] and fallback_selector.calls == 1
    assert [(f.reason, f.detail) for f in stats.fallbacks] == [("empty_selection", "nothing fits")]


def test_malformed_json_twice_falls_back(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(default=answer("tmdb, probably"))
    stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert stats.selected_apis == ["tmdb"]
    assert [f.reason for f in stats.fallbacks] == ["invalid_output"]
    assert [(c.attempts, c.ok) for c in stats.llm_calls] == [(2, False)]


def test_429_then_success(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(Reply(status=429), answer({"selected_apis": ["sendgrid"]}))
    stats = _selector(llm, catalog, fallback_selector, prompts, settings).select("send mail")
    assert stats.selected_apis == [
        "sendgrid"]
    assert stats.fallbacks == [] and stats.llm_calls[0].attempts == 2


def test_500_forever_falls_back(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(default=Reply(status=500))
    result = stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert result.selected_apis == ["tmdb"]
    assert [f.reason for f in stats.fallbacks] == ["server_error"]
    assert [(c.attempts, c.ok) for c in stats.llm_calls] == [(3, False)] and len(server.requests) == 3


def test_slow_answer_falls_back_on_timeout(server, llm, catalog, fallback_selector, prompts, make_settings):
    settings = make_settings(llm_max_attempts=1)
    server.script(default=answer({"selected_apis": ["stripe"]}, delay_s=1.0))
    result = stats = _selector(llm, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert result.selected_apis == ["tmdb"] and [f.reason for f in stats.fallbacks] == ["timeout"]


def test_second_identical_query_hits_the_cache(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(answer({"selected_apis": ["tmdb", "imdb"], "reasoning": "r"}))
    selector = _selector(llm, catalog, fallback_selector, prompts, settings, cache=TTLCache(8, 60))
    first = selector.select(QUERY)
    result = second = selector.select("  Who directed the TOP rated   movie ")
    assert result.selected_apis == ["tmdb"] and len(server.requests) == 1
    assert (first.cache_hits, second.cache_hits) == (0, 1)
    assert [(c.cached, c.attempts) for c in second.llm_calls] == [(True, 0)]
    assert second.dropped_ids == ["imdb"]  # validation re-runs on a cached answer


def test_failures_are_not_cached(server, llm, catalog, fallback_selector, prompts, settings):
    server.script(Reply(status=401), answer({"selected_apis": ["tmdb"]}))
    selector = _selector(llm, catalog, fallback_selector, prompts, settings, cache=TTLCache(8, 60))
    selector.select(QUERY)
    stats = selector.select(QUERY)
    assert len(server.requests) == 2 and stats.cache_hits == 0 and stats.fallbacks == []


def _big_catalog(n: int) -> Catalog:
    topics = ["weather", "payments", "movies", "email", "maps", "music", "books", "crypto", "sports", "jobs"]
    return Catalog(version="big", apis=[
        CatalogEntry(file_id=f"api{i:04d}", name=f"{topics[i % 10].title()} Service {i}",
                     description=f"Manage {topics[i % 10]} records, reports and webhooks for tenant group {i}",
                     domains=[topics[i % 10], f"group{i}"]) for i in range(n)])


def test_shortlisting_keeps_the_prompt_under_budget(server, llm, prompts, make_settings):
    settings = make_settings(selection_prompt_token_budget=1500)
    catalog = _big_catalog(2000)
    server.script(answer({"selected_apis": ["api0042"]}))
    selector = _selector(llm, catalog, FakeKeywordSelector(catalog), prompts, settings)
    assert selector.select("movies reports for group42").selected_apis == ["api0042"]
    sent = server.user_texts()[0]
    assert len(get_tokenizer()(sent)) <= 1500
    listed = [line for line in sent.splitlines() if line.startswith("- api")]
    assert 10 < len(listed) < 100
    assert listed[0].startswith("- api0042:")  # best BM25 candidate first
    assert all(any(t in line.lower() for t in ("movies", "group42")) for line in listed)


def test_shortlisting_with_the_real_keyword_selector(server, llm, prompts, settings):
    from specrag.stages.api_select import KeywordApiSelector

    catalog = _big_catalog(2000)
    keyword = KeywordApiSelector(catalog, {}, max_apis=3)
    server.script(answer({"selected_apis": ["api1042"]}))
    stats = LLMApiSelector(llm, catalog, keyword, prompts, settings).select("movies group1042")
    assert stats.selected_apis \
        == ["api1042"]
    sent = server.user_texts()[0]
    assert len(get_tokenizer()(sent)) <= settings.llm.selection_prompt_token_budget
    assert "- api1042: Movies Service 1042" in sent and sent.count("\n- api") < 2000


@pytest.mark.anyio
async def test_async_selection_awaits_the_client_and_falls_back_the_same_way(server, llm, catalog,
                                                                            fallback_selector, prompts, settings):
    selector = _selector(llm, catalog, fallback_selector, prompts, settings)
    server.script(answer({"selected_apis": ["tmdb"], "reasoning": "movies"}))
    ok = await selector.aselect(QUERY)
    assert ok.selected_apis == ["tmdb"] and ok.fallbacks == [] and ok.llm_calls[0].ok
    server.script(default=Reply(status=500))
    failed = await selector.aselect("send an email")
    assert [f.reason for f in failed.fallbacks] == ["server_error"] and failed.mode == "llm"
    assert failed.llm_calls[0].attempts == 3 and fallback_selector.calls == 1


def test_a_selector_without_a_client_says_no_llm(catalog, fallback_selector, prompts, settings):
    result = LLMApiSelector(None, catalog, fallback_selector, prompts, settings).select(QUERY)
    assert [(f.stage, f.reason) for f in result.fallbacks] == [("select", "no_llm")]
    assert result.selected_apis == ["tmdb"] and result.llm_calls == []


def test_the_llm_and_the_keyword_fallback_each_keep_their_own_number_of_apis(server, llm_engine):
    engine = llm_engine(max_selected_apis=1, selection_keyword_max_apis=2, llm_max_attempts=1)
    server.script(answer({"selected_apis": ["users_api", "petstore_v2"], "reasoning": "both"}))
    by_llm = engine.selector.select("create a user who orders a pet")
    assert by_llm.fallbacks == [] and by_llm.selected_apis == ["users_api"]  # SELECTION_MAX_APIS
    server.script(default=Reply(status=500))
    fallen = engine.selector.select("create a user who orders a pet in the store")
    assert [f.reason for f in fallen.fallbacks] == ["server_error"]
    assert sorted(fallen.selected_apis) == ["petstore_v2", "users_api"]  # SELECTION_KEYWORD_MAX_APIS
    one = llm_engine(max_selected_apis=1, selection_keyword_max_apis=1, llm_max_attempts=1)
    assert len(one.selector.select("create a user who orders a pet in the store").selected_apis) == 1
    strict = llm_engine(selection_keyword_max_apis=2, selection_drop_off=1.0, llm_max_attempts=1)
    kept = strict.selector.select("create a user who orders a pet in the store").selected_apis  # SELECTION_DROP_OFF
    assert kept == fallen.selected_apis[:1]
