"""Stage 2 by LLM over HTTP: user words first, grounded terms only, fallbacks, budget, cache."""

from __future__ import annotations

from llama_index.core.utils import get_tokenizer
from specrag.catalog.models import ApiIndex, EndpointEntry
from specrag.core.analysis import identifier_words as words
from specrag.core.ttl_cache import TTLCache
from specrag.stages.expand_llm import LLMQueryExpander, vocabulary

from .openai_server import Reply, answer

QUERY = "Who directed the top rated movie"


def _expander(llm, indexes, fallback, prompts, settings, cache=None):
    return LLMQueryExpander(llm, indexes.get, fallback, prompts, settings, cache=cache)


def test_user_words_first_and_invented_terms_dropped(server, llm, indexes, fallback_expander, prompts, settings):
    server.script(answer({
        "expanded_query": "top rated movie director getTopRatedMovies",  # the LLM dropped "Who directed"
        "original_terms": ["directed", "top rated", "film"],
        "added_terms": ["getTopRatedMovies", "getMovieCredits", "cast and crew", "directorName", "movie", "Movie"],
    }))
    result = stats = _expander(llm, indexes, fallback_expander, prompts, settings).expand_query(QUERY, ["tmdb"])
    assert result.expanded_query == "Who directed the top rated movie getTopRatedMovies getMovieCredits cast and crew"
    assert result.added_terms == ["getTopRatedMovies", "getMovieCredits", "cast and crew"]
    assert result.original_terms == ["directed", "top rated"]
    assert stats.dropped_terms == ["directorName"] and stats.fallbacks == []
    assert stats.expanded_query == result.expanded_query and stats.added_terms == result.added_terms
    assert stats.prompt == f"expand_query@{prompts.info('expand_query').hash}"
    assert stats.mode == "llm" and [c.stage for c in stats.llm_calls] == ["expand"]


def test_only_the_selected_indexes_are_sent(server, llm, indexes, fallback_expander, prompts, settings):
    server.script(answer({"expanded_query": "x", "added_terms": ["searchPerson"]}))
    expander = _expander(llm, indexes, fallback_expander, prompts, settings)
    expander.expand_query("movies by Sofia Coppola", ["tmdb", "unknown"])
    sent = server.user_texts()[0]
    assert sent == prompts.expand_query.format(**expander.prompt_vars("movies by Sofia Coppola", [indexes["tmdb"]]))
    assert "GET /search/person searchPerson — Search for people by name" in sent
    assert "schemas: MovieCredits, PersonResult" in sent and "sendMail" not in sent


def test_terms_from_another_selected_index_are_kept(server, llm, indexes, fallback_expander, prompts, settings):
    server.script(answer({"expanded_query": "x", "added_terms": ["sendMail", "searchPerson"]}))
    result = stats = _expander(llm, indexes, fallback_expander, prompts, settings).expand_query("mail", ["sendgrid"])
    assert result.added_terms == ["sendMail"] and stats.dropped_terms == ["searchPerson"]


def test_only_invented_terms_fall_back(server, llm, indexes, fallback_expander, prompts, settings):
    server.script(answer({"expanded_query": "x", "added_terms": ["imdbRating"]}))
    result = stats = _expander(llm, indexes, fallback_expander, prompts, settings).expand_query(QUERY, ["tmdb"])
    assert result.expanded_query == QUERY and fallback_expander.calls == 1
    assert [(f.stage, f.reason) for f in stats.fallbacks] == [("expand", "no_valid_terms")]


def test_no_index_skips_the_llm(server, llm, indexes, fallback_expander, prompts, settings):
    stats = _expander(llm, indexes, fallback_expander, prompts, settings).expand_query(QUERY, ["stripe"])
    assert server.requests == [] and [f.reason for f in stats.fallbacks] == ["no_index"]


def test_server_errors_fall_back(server, llm, indexes, fallback_expander, prompts, settings):
    server.script(default=Reply(status=502))
    result = stats = _expander(llm, indexes, fallback_expander, prompts, settings).expand_query(QUERY, ["tmdb"])
    assert result.expanded_query == QUERY and [f.reason for f in stats.fallbacks] == ["server_error"]
    assert stats.llm_calls[0].attempts == 3 and not stats.llm_calls[0].ok


def test_cache_hit_for_the_same_query_and_apis(server, llm, indexes, fallback_expander, prompts, settings):
    server.script(answer({"expanded_query": "x", "added_terms": ["getMovieCredits"]}))
    expander = _expander(llm, indexes, fallback_expander, prompts, settings, cache=TTLCache(8, 60))
    expander.expand_query(QUERY, ["tmdb"])
    stats = expander.expand_query(QUERY.lower(), ["tmdb"])
    assert stats.added_terms == ["getMovieCredits"]
    assert len(server.requests) == 1 and stats.cache_hits == 1 and stats.llm_calls[0].cached
    server.script(answer({"expanded_query": "x", "added_terms": ["sendMail"]}))
    expander.expand_query(QUERY, ["tmdb", "sendgrid"])  # other APIs: another key
    assert len(server.requests) == 2


def test_indexes_are_trimmed_to_budget_keeping_relevant_lines(server, llm, fallback_expander, prompts, make_settings):
    big = ApiIndex(file_id="big", name="Big", endpoints=[
        EndpointEntry(path=f"/things/t{i}", methods=["get"], operation_ids=[f"getThing{i}"],
                      summaries=[f"Read thing number {i} with its many attributes"]) for i in range(400)]
        + [EndpointEntry(path="/invoices", methods=["post"], operation_ids=["createInvoice"],
                         summaries=["Create an invoice"])])
    settings = make_settings(expansion_prompt_token_budget=800)
    server.script(answer({"expanded_query": "x", "added_terms": ["createInvoice"]}))
    _expander(llm, {"big": big}, fallback_expander, prompts, settings).expand_query("create invoices", ["big"])
    sent = server.user_texts()[0]
    assert len(get_tokenizer()(sent)) <= 800
    assert "POST /invoices createInvoice" in sent and "getThing399" not in sent


def test_vocabulary_splits_identifiers(indexes):
    assert words("getMovieCredits /movie/{movie_id}") == ["get", "movie", "credits", "movie", "movie", "id"]
    vocab = vocabulary(indexes["tmdb"])
    assert {"getmoviecredits", "moviecredits", "credits", "crew", "person"} <= vocab and "director" not in vocab
