"""Fixtures: the real ONNX model (loaded once per session) and settings in a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.core.settings import Settings
from specrag.index.embeddings import build_embed_model

from .fleet import MODEL_DIR


@pytest.fixture(scope="session")
def embed_model():
    """The real all-MiniLM-L6-v2 on ONNX Runtime, loaded once for the whole session."""
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    model = build_embed_model(Settings(embed_model_path=MODEL_DIR))
    assert model is not None, "the local ONNX model failed to load"
    return model


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embed_model_path=MODEL_DIR, chroma_host=None)
