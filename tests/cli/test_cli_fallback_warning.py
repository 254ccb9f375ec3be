"""When the configured LLM fails, keyword methods answer (exit 0) and the user is told: one warning
line per process on stderr naming the stages, the reason and the keyword fallback. A library
host gets the same warning on the ``specrag.core.fallbacks`` logger, once per process however many
queries fall back; a server counts every fallback in ``specrag_fallbacks``."""

from __future__ import annotations

import logging
import socket

import pytest
from specrag.core.fallbacks import NOTICES

from .conftest import DEMO_SPECS, run_cli

QUESTION = "How do I create a user?"


def closed_port() -> int:
    """A local port nothing listens on: bound to learn a free number, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_llm_endpoint_is_one_warning_line_and_keyword_methods_answer(demo_data):
    cwd, env = demo_data
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    proc = run_cli("query", QUESTION, "--corpus", str(DEMO_SPECS), cwd=cwd,
                   env=env | {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "x"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("WARNING specrag.core.fallbacks: LLM call failed "), lines[0]
    for said in (f"connection refused at {base_url}", "keyword methods answered for API selection and query expansion",
                 "told once per process"):
        assert said in lines[0], (said, lines[0])
    assert "POST /users" in proc.stdout


@pytest.fixture
def dead_llm_engine(demo_index):
    """The demo engine with its LLM at a closed port; every kind of fallback untold so far."""
    from specrag.engine.factory import build_engine

    local, store = demo_index
    settings = local.model_copy(update=dict(llm_base_url=f"http://127.0.0.1:{closed_port()}/v1", openai_api_key="x",
                                            llm_model="test-model", llm_max_attempts=5, llm_deadline_s=30.0))
    NOTICES.forget()
    yield build_engine(settings, store)
    NOTICES.forget()


def test_the_library_warns_once_per_process_and_the_server_counts_every_fallback(dead_llm_engine, caplog):
    from specrag.serve.telemetry import Telemetry, current_telemetry
    from specrag.serve.tracing import install_instrumentation

    install_instrumentation()
    telemetry = Telemetry()
    token = current_telemetry.set(telemetry)
    try:
        with caplog.at_level(logging.WARNING, logger="specrag"):
            contexts = [dead_llm_engine.retrieve_context(q) for q in (QUESTION, "list the pets of the store")]
    finally:
        current_telemetry.reset(token)
    told = [r for r in caplog.records if r.name == "specrag.core.fallbacks"]
    assert len(told) == 1 and told[0].levelno == logging.WARNING
    assert "API selection and query expansion" in told[0].getMessage()
    for ctx in contexts:
        stats = ctx.retrieval_stats
        assert [(f.stage, f.reason) for f in stats.fallbacks] == [("select", "connection_error"),
                                                                   ("expand", "connection_error")]
        assert [c.attempts for c in stats.llm_calls] == [1, 1]  # a refused connection is not retried
    assert "POST /users" in "\n".join(c.text for c in contexts[0].chunks)
    registry = telemetry.metrics.registry
    for stage in ("select", "expand"):
        labels = {"stage": stage, "reason": "connection_error"}
        assert registry.get_sample_value("specrag_fallbacks_total", labels) == 2


def test_another_kind_of_failure_is_told_once_too(dead_llm_engine, caplog):
    """A new (stage, reason) is news: told once, even after the connection failures were."""
    from specrag.core.fallbacks import llm_call_failed
    from specrag.core.records import Fallback

    with caplog.at_level(logging.WARNING, logger="specrag"):
        dead_llm_engine.retrieve_context(QUESTION)
        for _ in range(2):
            llm_call_failed(Fallback(stage="select", reason="timeout", detail="no answer in time"))
    told = [r.getMessage() for r in caplog.records if r.name == "specrag.core.fallbacks"]
    assert len(told) == 2 and "connection refused" in told[0]
    assert told[1].startswith("LLM call failed (no answer in time): keyword methods answered for API selection")
