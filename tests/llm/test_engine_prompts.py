"""The engine exposes every LLM stage's prompt through PromptMixin, and an update through the
engine changes what the OpenAI-compatible server receives."""

from __future__ import annotations

import pytest
from llama_index.core.prompts import PromptTemplate
from specrag.core.errors import PromptError
from specrag.core.prompts import prompt_hash

from .openai_server import answer


def test_llm_engine_lists_selection_expansion_synthesis_and_decomposition_prompts(llm_engine, prompts):
    prompts_by_key = llm_engine().get_prompts()
    assert set(prompts_by_key) == {"selector:select_apis", "expander:expand_query", "synthesizer:synthesize",
                                   "decomposer:decompose"}
    assert prompts_by_key["selector:select_apis"].get_template() == prompts.select_apis.get_template()


def test_offline_engine_has_no_prompts(demo_engine):
    assert demo_engine.get_prompts() == {}


def test_update_prompts_through_the_engine_changes_what_is_sent(llm_engine, server):
    engine = llm_engine(synthesize=True, llm_max_attempts=1)
    pick = "PICK for {query} from {catalog}, at most {max_apis}. JSON."
    engine.update_prompts({
        "selector:select_apis": PromptTemplate(pick),
        "expander:expand_query": PromptTemplate("EXPAND {query} with {api_indexes}, up to {max_terms}. JSON."),
        "synthesizer:synthesize": PromptTemplate("ANSWER {query} from {context}"),
    })
    server.script(answer({"selected_apis": ["users_api"], "reasoning": "users"}),
                  answer({"expanded_query": "x", "added_terms": []}),
                  answer("Call POST /users [Source 1]."))
    response = engine.query("How do I create a user?")
    sent = server.user_texts()
    assert sent[0].startswith("PICK for How do I create a user? from - ")
    assert sent[1].startswith("EXPAND How do I create a user? with ## users_api")
    assert sent[2].startswith("ANSWER How do I create a user? from [Source 1]")
    assert response.response == "Call POST /users [Source 1]."
    stats = response.metadata["knowledge_context"].retrieval_stats
    assert set(stats.prompts) == {"select", "expand", "synthesize"}
    assert stats.prompts["select"] == f"select_apis@{prompt_hash(pick)}"  # the new prompt is the one recorded
    assert [c.stage for c in stats.llm_calls] == ["select", "expand", "synthesize"]


def test_a_prompt_with_the_wrong_variables_is_refused(llm_engine):
    engine = llm_engine()
    with pytest.raises(PromptError, match="lacks"):
        engine.update_prompts({"selector:select_apis": PromptTemplate("only {query}")})


@pytest.mark.anyio
async def test_aquery_runs_the_llm_stages_on_the_event_loop(llm_engine, server):
    engine = llm_engine(synthesize=True, llm_max_attempts=1)
    server.script(answer({"selected_apis": ["petstore_v2"], "reasoning": "pets"}),
                  answer({"expanded_query": "x", "added_terms": ["getPetById"]}),
                  answer("Use GET /pet/findByStatus [Source 1]."))
    response = await engine.aquery("find pets by status")
    stats = response.metadata["knowledge_context"].retrieval_stats
    assert response.response == "Use GET /pet/findByStatus [Source 1]."
    assert stats.selected_apis == ["petstore_v2"] and stats.added_terms == ["getPetById"]
    assert [c.stage for c in stats.llm_calls] == ["select", "expand", "synthesize"] and stats.fallbacks == []
