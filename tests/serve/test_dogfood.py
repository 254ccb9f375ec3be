"""Dogfood: specrag indexes its own service's OpenAPI and answers how to call it."""

from __future__ import annotations

from pipeline.serve.openapi import write_service_openapi


def test_specrag_answers_how_to_run_a_basic_retrieval_from_its_own_spec(tmp_path, demo_index):
    from pipeline.factory import build_engine
    from pipeline.workspace import update_index

    spec = write_service_openapi(tmp_path / "specs" / "specrag.json")
    settings = demo_index[0].model_copy(update={"data_dir": tmp_path / "data"})  # the demo's model settings
    local, run = update_index(settings, [spec.parent], progress=False)
    assert run.ingest.specs_read == 1 and not run.ingest.specs_skipped
    ctx = build_engine(local).retrieve_context("how do I run a basic retrieval?")
    assert ctx.primary_chunks[0].id == "specrag:paths/~1api~1v1~1retrieve~1basic/post"
    ids = {c.id for c in ctx.chunks}
    assert {"specrag:components/schemas/BasicRetrievalRequest", "specrag:components/schemas/RetrievalResponse",
            "specrag:components/schemas/RetrievalFilters"} <= ids
