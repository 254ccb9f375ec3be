"""Dogfood: specrag indexes its own service's OpenAPI (as `specrag openapi` writes it: the plan
and agentic routes mounted) and answers how to call it."""

from __future__ import annotations

import pytest
from specrag.serve.graph_wiring import routers
from specrag.serve.openapi import write_service_openapi

QUESTIONS = {
    "how do I run an agentic retrieval?": ("/api/v1/retrieve/agentic", "AgenticRetrievalRequest"),
    "how do I run a basic retrieval?": ("/api/v1/retrieve/basic", "BasicRetrievalRequest"),
}


@pytest.fixture(scope="module")
def own_engine(tmp_path_factory, demo_index, demo_kbs):
    from specrag.engine.factory import build_engine
    from specrag.index.workspace import update_index

    tmp = tmp_path_factory.mktemp("dogfood")
    spec = write_service_openapi(tmp / "specs" / "specrag.json", routers())
    settings = demo_index[0].model_copy(update={"data_dir": tmp / "data"})  # the demo's model settings
    local, run = update_index(settings, [spec.parent], progress=False)
    assert run.ingest.specs_read == 1 and not run.ingest.specs_skipped
    return build_engine(local)


@pytest.mark.parametrize("question", QUESTIONS)
def test_specrag_answers_how_to_call_itself_from_its_own_spec(own_engine, question):
    path, request_schema = QUESTIONS[question]
    ctx = own_engine.retrieve_context(question)
    assert ctx.primary_chunks[0].id == "specrag:paths/" + path.replace("/", "~1") + "/post"
    ids = {c.id for c in ctx.chunks}
    assert {f"specrag:components/schemas/{request_schema}", "specrag:components/schemas/RetrievalResponse",
            "specrag:components/schemas/RetrievalFilters"} <= ids
