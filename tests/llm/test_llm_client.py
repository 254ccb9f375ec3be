"""build_llm and structured_call over HTTP: the real llama-index OpenAI client against the test server."""

from __future__ import annotations

import socket
import time

import pytest
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike
from specrag.core.errors import LLMStageError
from specrag.core.llm import (
    RetryPolicy,
    build_llm,
    parse_output,
    structured_call,
    text_call,
)
from specrag.core.settings import Settings
from specrag.stages.api_select_llm import SelectionAnswer as ApiSelection

from .openai_server import Reply, answer

GOOD = {"selected_apis": ["tmdb"], "reasoning": "movies"}


def _call(llm, prompts, settings):
    return structured_call(llm, ApiSelection, prompts.select_apis, stage="select",
                           prompt_info=prompts.info("select_apis"), settings=settings,
                           query="top rated movies", catalog="- tmdb: The Movie Database", max_apis=3)


def test_offline_without_key_or_base_url():
    settings = Settings(_env_file=None, openai_api_key=None, llm_base_url=None)
    assert not settings.llm_configured
    assert build_llm(settings) is None


def test_client_class_follows_the_model_name(make_settings):
    local = build_llm(make_settings(llm_model="llama3.1:8b"))
    assert isinstance(local, OpenAILike) and local.max_retries == 0 and local.timeout == 0.3
    hosted = build_llm(make_settings(llm_model="gpt-4o-mini"))
    assert type(hosted) is OpenAI and hosted.api_base.startswith("http://127.0.0.1")


def test_valid_answer_records_usage_and_model(server, llm, prompts, settings):
    server.script(answer(GOOD, prompt_tokens=321, completion_tokens=17))
    result, call = _call(llm, prompts, settings)
    assert result == ApiSelection(**GOOD)
    assert (call.prompt_tokens, call.completion_tokens, call.attempts, call.ok) == (321, 17, 1, True)
    assert call.model == "test-model" and call.prompt_name == "select_apis"
    assert call.prompt_hash == prompts.info("select_apis").hash
    assert server.requests[0]["model"] == "test-model" and server.requests[0]["temperature"] == 0.0


def test_malformed_json_is_reasked_once_with_the_error(server, llm, prompts, settings):
    server.script(answer('{"selected_apis": ["tmdb"'), answer("```json\n" + '{"selected_apis": ["tmdb"]}' + "\n```"))
    result, call = _call(llm, prompts, settings)
    assert result.selected_apis == ["tmdb"] and call.attempts == 2
    reask = server.requests[1]["messages"]
    assert [m["role"] for m in reask] == ["user", "assistant", "user"]
    assert reask[1]["content"] == '{"selected_apis": ["tmdb"' and "malformed JSON" in reask[2]["content"]


def test_schema_mismatch_twice_is_invalid_output(server, llm, prompts, settings):
    server.script(answer({"apis": ["tmdb"]}), answer({"selected_apis": "tmdb, stripe"}))
    with pytest.raises(LLMStageError) as err:
        _call(llm, prompts, settings)
    assert err.value.reason == "invalid_output" and "selected_apis" in str(err.value)
    assert err.value.call.attempts == 2 and err.value.call.ok is False
    assert err.value.call.prompt_tokens == 80  # both answers cost tokens
    assert "selected_apis: Field required" in server.requests[1]["messages"][2]["content"]


def test_429_then_success_is_retried(server, llm, prompts, settings):
    server.script(Reply(status=429, content="slow down"), answer(GOOD))
    _, call = _call(llm, prompts, settings)
    assert call.attempts == 2 and len(server.requests) == 2


def test_retry_after_header_is_honoured(server, llm, prompts, settings):
    server.script(Reply(status=429, headers={"Retry-After": "0.4"}), answer(GOOD))
    started = time.monotonic()
    _call(llm, prompts, settings)
    assert time.monotonic() - started >= 0.4


def test_500_forever_stops_after_max_attempts(server, llm, prompts, settings):
    server.script(default=Reply(status=500))
    with pytest.raises(LLMStageError) as err:
        _call(llm, prompts, settings)
    assert err.value.reason == "server_error"
    assert err.value.attempts == 3 == len(server.requests) == err.value.call.attempts


def test_deadline_bounds_the_retries(server, prompts, make_settings):
    # each 503 takes 0.1 s, so the 10 attempts allowed cannot fit and the deadline alone ends the
    # retries; the client is built (its SDK imported) before the clock starts, as the call's is
    settings = make_settings(llm_max_attempts=10, llm_deadline_s=0.8)
    llm = build_llm(settings)
    server.script(default=Reply(status=503, delay_s=0.1))
    started = time.monotonic()
    with pytest.raises(LLMStageError) as err:
        _call(llm, prompts, settings)
    elapsed = time.monotonic() - started
    assert err.value.reason in {"server_error", "timeout"}  # the last request may be cut by the deadline
    assert elapsed < 0.8 + 0.2  # no request starts once under a quarter of its timeout is left
    assert 2 <= len(server.requests) < 8


def test_slow_answer_times_out(server, llm, prompts, settings):
    server.script(default=answer(GOOD, delay_s=1.0))
    with pytest.raises(LLMStageError) as err:
        _call(llm, prompts, settings)
    assert err.value.reason == "timeout" and err.value.attempts == 3


def test_client_error_is_not_retried(server, llm, prompts, settings):
    server.script(default=Reply(status=401, content="bad key"))
    with pytest.raises(LLMStageError) as err:
        _call(llm, prompts, settings)
    assert err.value.reason == "client_error" and len(server.requests) == 1


def test_unreachable_server_is_a_connection_error(prompts, make_settings):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = make_settings(llm_base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(LLMStageError) as err:
        _call(build_llm(settings), prompts, settings)
    assert err.value.reason == "connection_error" and err.value.attempts == 1


def test_text_call_returns_the_answer(server, llm, prompts, settings):
    server.script(answer("Call GET /movie/top_rated [Source 1]."))
    text, call = text_call(llm, prompts.synthesize, stage="synthesize", prompt_info=prompts.info("synthesize"),
                           settings=settings, query="q", context="[Source 1] x")
    assert text == "Call GET /movie/top_rated [Source 1]." and call.ok and call.stage == "synthesize"


def test_parse_output_finds_the_object_in_chatter():
    assert parse_output(ApiSelection, 'Sure! {"selected_apis": []} Hope that helps').selected_apis == []
    with pytest.raises(ValueError, match="no JSON object"):
        parse_output(ApiSelection, "tmdb")


def test_retry_policy_scales_backoff_with_timeout():
    policy = RetryPolicy.from_settings(Settings(_env_file=None, llm_timeout_s=0.2, llm_deadline_s=2.0))
    assert policy.backoff_initial_s == pytest.approx(0.05) and policy.backoff_max_s == pytest.approx(0.5)
    assert RetryPolicy.from_settings(Settings(_env_file=None)).backoff_initial_s == 1.0
