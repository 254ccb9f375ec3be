"""A re-index makes the embedding model's ONNX session only when a text has no vector yet
(``build_embedder(deferred=True)``): a run that finds every vector never makes it, one that does
embeds as before, and a session that fails then fails the run on one line with the index as it
was. A first build still loads the model at once and, if it cannot, goes lexical."""

from __future__ import annotations

import logging

import pytest
from specrag.core.errors import EmbedModelUnavailableError
from specrag.index import ChunkStore, embeddings
from specrag.index.workspace import corpus_settings, update_index

from .test_reindex import corpus, small  # noqa: F401 - the corpus fixture


@pytest.fixture
def sessions(monkeypatch) -> list[str]:
    """The model names whose session was made, in order (the real session each time)."""
    made: list[str] = []
    real = embeddings._fastembed_loader

    def counting(name, settings):
        load = real(name, settings)

        def counted():
            made.append(name)
            return load()
        return counted

    monkeypatch.setattr(embeddings, "_fastembed_loader", counting)
    return made


def _search(settings, corpus, text: str) -> list[str]:
    store = ChunkStore.open(corpus_settings(settings, [corpus]))
    try:
        return [hit.node.node_id for hit in store.vector_search(text, None, None, 3)]
    finally:
        store.close()


def test_a_reindex_that_finds_every_vector_never_makes_the_session(settings, embed_model, corpus, sessions):
    update_index(settings, [corpus], progress=False)
    assert len(sessions) == 1  # a first build: at once
    (corpus / "orders.yaml").unlink()
    _, run = update_index(settings, [corpus], progress=False)
    assert run.index["apis_removed"] == ["orders"] and run.index["chunks_embedded"] == 0
    assert len(sessions) == 1


def test_a_reindex_with_a_new_text_makes_it_once_and_embeds_as_a_loaded_model(settings, embed_model, corpus,
                                                                             sessions):
    update_index(settings, [corpus], progress=False)
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace(
        "List all forecasts", "Predict tomorrow's rain and sunshine"))
    _, run = update_index(settings, [corpus], progress=False)
    assert run.index["apis_updated"] == ["weather"] and run.index["chunks_embedded"] >= 1
    assert len(sessions) == 2
    assert _search(settings, corpus, "predict tomorrow's rain")[0] == "weather:paths/~1forecasts/get"


def test_a_session_that_fails_when_needed_fails_the_run_on_one_line_and_leaves_the_index(settings, embed_model,
                                                                                         corpus, monkeypatch):
    update_index(settings, [corpus], progress=False)
    before = _search(settings, corpus, "list all forecasts")

    def damaged(name, settings):
        def load():
            raise RuntimeError("[ONNXRuntimeError] INVALID_PROTOBUF : Load model\nfailed")
        return load

    monkeypatch.setattr(embeddings, "_fastembed_loader", damaged)
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace("List all", "Show every"))
    with pytest.raises(EmbedModelUnavailableError) as failure:
        update_index(settings, [corpus], progress=False)
    message = str(failure.value)
    assert "\n" not in message and "could not be loaded to embed a new text" in message
    assert "INVALID_PROTOBUF" in message and "left as it was" in message
    monkeypatch.undo()
    assert _search(settings, corpus, "list all forecasts") == before


def test_a_first_build_whose_session_fails_is_lexical_with_a_warning(settings, corpus, monkeypatch, caplog):
    def damaged(name, settings):
        def load():
            raise RuntimeError("no usable weights")
        return load

    monkeypatch.setattr(embeddings, "_fastembed_loader", damaged)
    monkeypatch.setattr(embeddings, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="specrag.index.embeddings"):
        _, run = update_index(settings, [corpus], progress=False)
    assert run.index["search_mode"] == "lexical"
    assert "no usable weights" in caplog.text and "lexical-only" in caplog.text
