"""Decomposition through the real client and a scripted OpenAI-compatible server: valid answers,
garbage and empty answers (the offline splitter takes over, with the reason), the prompt's
stable-prefix order, and agentic retrieval end to end in LLM mode."""

from __future__ import annotations

import re

from specrag.core.api_models import AgenticRetrievalRequest
from specrag.core.prompts import PROMPT_VARS
from specrag.core.records import StageMode
from specrag.engine.agentic.decompose import Decomposer
from specrag.engine.agentic.retriever import AgenticRetriever

from .conftest import PROMPTS_DIR
from .openai_server import answer

QUESTION = "Read the current user and then pause playback on their player"


def test_llm_parts_are_used_in_call_order(server, llm, prompts, settings):
    server.script(answer({"sub_queries": ["get the current user", " pause playback of a player ", ""],
                          "reasoning": "the player belongs to the user"}))
    result = Decomposer(llm, prompts, settings).decompose(QUESTION, 3)
    assert result.sub_queries == ["get the current user", "pause playback of a player"]
    assert result.mode is StageMode.LLM and result.fallbacks == []
    assert result.prompt == prompts.info("decompose").label and len(result.llm_calls) == 1
    sent = server.user_texts()[0]
    assert sent.rstrip().endswith(f"Question: {QUESTION}") and "at most 3 parts" in sent


def test_garbage_and_empty_answers_fall_back_to_the_splitter(server, llm, prompts, make_settings):
    decomposer = Decomposer(llm, prompts, make_settings(llm_max_attempts=1))
    server.script(answer("Sure! Here are the steps: 1. user 2. player"), answer("still not JSON"))
    result = decomposer.decompose(QUESTION, 3)
    assert [f.reason for f in result.fallbacks] == ["invalid_output"]
    assert result.sub_queries == ["Read the current user", "pause playback on their player"]
    server.script(answer({"sub_queries": [], "reasoning": "nothing to split"}))
    result = decomposer.decompose("Who directed the top rated movie?", 3)
    assert [(f.reason, f.detail) for f in result.fallbacks] == [("empty_decomposition", "nothing to split")]
    assert result.sub_queries == ["Who directed the top rated movie?"]


def test_at_most_max_parts_and_a_cached_answer_is_not_asked_again(server, llm, prompts, settings):
    from specrag.core.ttl_cache import TTLCache

    decomposer = Decomposer(llm, prompts, settings, TTLCache(8, 60))
    server.script(answer({"sub_queries": ["a b", "c d", "e f", "g h"]}))
    assert decomposer.decompose(QUESTION, 2).sub_queries == ["a b", "c d"]
    again = decomposer.decompose(QUESTION, 2)
    assert again.sub_queries == ["a b", "c d"] and again.cache_hits == 1 and len(server.requests) == 1


def test_every_prompt_keeps_its_stable_text_first_and_the_question_last():
    for name in PROMPT_VARS:
        text = (PROMPTS_DIR / f"{name}.txt").read_text()
        placeholders = re.findall(r"(?<!{){(\w+)}(?!})", text)
        assert set(placeholders) == PROMPT_VARS[name], name
        assert placeholders[-1] == "query", f"{name}: the question must come last (prefix caching)"


def test_agentic_retrieval_with_an_llm_decomposes_and_answers_with_sources(llm_engine, server):
    engine = llm_engine(llm_max_attempts=1)
    assert "decomposer:decompose" in engine.get_prompts()
    server.script(answer({"sub_queries": ["create a user", "list all pets"], "reasoning": "two tasks"}),
                  default=answer({"selected_apis": ["users_api", "petstore_v2"], "reasoning": "r",
                                  "expanded_query": "q", "original_terms": [], "added_terms": []}))
    response = AgenticRetriever(engine).run(AgenticRetrievalRequest(
        query="Create a user, then list all pets", reasoning_effort="medium", top_k_per_step=2))
    steps = [(s.action, s.sub_query) for s in response.steps]
    assert steps[:3] == [("decompose", "Create a user, then list all pets"), ("retrieve", "create a user"),
                         ("retrieve", "list all pets")]
    assert response.steps[0].detail == "llm: 2 parts" and response.steps[0].tokens == 52  # 40 prompt + 12 completion
    assert steps[-1][0] == "synthesize" and response.answer  # the scripted default text is the 'answer'
    assert response.total_tokens_used == sum(s.tokens for s in response.steps)
