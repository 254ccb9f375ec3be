"""Synthesis: numbered sources in context.chunks order, citations, and failure without exceptions."""

from __future__ import annotations

import pytest
from specrag.context.knowledge import ContextChunk, KnowledgeContext
from specrag.core.records import StageMode
from specrag.stages.synthesize import Synthesizer, cited_sources, render_sources

from .openai_server import Reply, answer


def _context() -> KnowledgeContext:
    op = ContextChunk(id="tmdb:paths/~1movie~1top_rated/get", text="get:\n  operationId: getTopRatedMovies\n",
                      metadata={"type": "endpoint", "method": "get", "path": "/movie/top_rated"}, score=0.9)
    credits = ContextChunk(id="tmdb:paths/~1movie~1{movie_id}~1credits/get", text="get: credits\n",
                           metadata={"type": "endpoint", "method": "get", "path": "/movie/{movie_id}/credits"})
    schema = ContextChunk(id="tmdb:components/schemas/MovieCredits", text="type: object\n", depth=1,
                          metadata={"type": "component", "kind": "schemas", "name": "MovieCredits"},
                          referenced_from="tmdb:paths/~1movie~1{movie_id}~1credits/get")
    return KnowledgeContext(query="who directed the top rated movie", primary_chunks=[op, credits],
                            referenced_chunks=[schema])


def test_sources_are_numbered_primary_then_referenced():
    rendered = render_sources(_context())
    assert rendered.splitlines()[0] == "[Source 1] tmdb:paths/~1movie~1top_rated/get (GET /movie/top_rated)"
    assert "[Source 2] tmdb:paths/~1movie~1{movie_id}~1credits/get (GET /movie/{movie_id}/credits)" in rendered
    assert "[Source 3] tmdb:components/schemas/MovieCredits (schemas MovieCredits)\ntype: object" in rendered


def test_answer_with_citations(server, llm, prompts, settings):
    text = "Call GET /movie/top_rated [Source 1], then the credits [Source 2] ([source 3]); see [Source 2]."
    server.script(answer(text, prompt_tokens=500, completion_tokens=30))
    context = _context()
    result = Synthesizer(llm, prompts, settings).synthesize(context)
    assert result.answer == text and result.cited_sources == cited_sources(text) == [1, 2, 3]
    [call] = result.llm_calls
    assert (call.stage, call.prompt_tokens, call.completion_tokens, call.ok) == ("synthesize", 500, 30, True)
    assert result.warnings == [] and result.mode is StageMode.LLM and result.fallbacks == []
    assert result.prompt == f"synthesize@{prompts.info('synthesize').hash}"
    sent = server.user_texts()[0]
    assert "Question: who directed the top rated movie" in sent and render_sources(context) in sent


def test_citing_a_source_that_does_not_exist_is_warned(server, llm, prompts, settings):
    server.script(answer("Use [Source 1] and [Source 7]."))
    result = Synthesizer(llm, prompts, settings).synthesize(_context())
    assert result.warnings == ["answer cites sources that do not exist: [7]"]


def test_failure_returns_empty_answer_and_records_the_reason(server, llm, prompts, settings):
    server.script(default=Reply(status=500))
    result = Synthesizer(llm, prompts, settings).synthesize(_context())
    [call] = result.llm_calls
    assert result.answer == "" and not call.ok and call.attempts == 3
    assert [(f.stage, f.reason) for f in result.fallbacks] == [("synthesize", "server_error")]


def test_empty_context_makes_no_call(server, llm, prompts, settings):
    result = Synthesizer(llm, prompts, settings).synthesize(KnowledgeContext(query="anything"))
    assert result.answer == "" and result.llm_calls == [] and server.requests == []
    assert result.fallbacks[0].reason == "no_context"


@pytest.mark.anyio
async def test_async_answer_uses_the_async_client(server, llm, prompts, settings):
    server.script(answer("Use [Source 2]."))
    result = await Synthesizer(llm, prompts, settings).asynthesize(_context())
    assert result.answer == "Use [Source 2]." and result.cited_sources == [2] and len(server.requests) == 1
