"""Fixtures for the LLM stages: a scripted OpenAI-compatible server, the real client pointed at it,
a four-API mini catalog with detailed indexes, and keyword fallbacks (fakes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.catalog.models import (
    ApiIndex,
    Catalog,
    CatalogEntry,
    EndpointEntry,
    SchemaEntry,
)
from specrag.core.llm import build_llm
from specrag.core.prompts import PromptSet
from specrag.core.settings import Settings

from .fakes import FakeKeywordExpander, FakeKeywordSelector
from .openai_server import ScriptedServer

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"


@pytest.fixture
def server():
    srv = ScriptedServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def make_settings(server):
    """Settings for the test server: short timeouts so retries take well under a second."""

    def make(**overrides) -> Settings:
        values = dict(llm_base_url=server.base_url, openai_api_key=None, llm_model="test-model",
                      llm_timeout_s=0.3, llm_max_attempts=3, llm_deadline_s=3.0, max_selected_apis=3)
        return Settings(_env_file=None, **{**values, **overrides})

    return make


@pytest.fixture
def settings(make_settings) -> Settings:
    return make_settings()


@pytest.fixture
def llm(settings):
    return build_llm(settings)


@pytest.fixture(scope="session")
def prompts() -> PromptSet:
    return PromptSet.load(PROMPTS_DIR)


@pytest.fixture
def catalog() -> Catalog:
    entries = [
        CatalogEntry(file_id="tmdb", name="The Movie Database", description="Movies, TV shows and people",
                     domains=["movie", "search", "person"]),
        CatalogEntry(file_id="thetvdb", name="TheTVDB", description="TV series episodes", domains=["series"]),
        CatalogEntry(file_id="sendgrid", name="SendGrid", description="Send email", domains=["mail"]),
        CatalogEntry(file_id="stripe", name="Stripe", description="Payments and customers", domains=["charges"]),
    ]
    return Catalog(version="v1", apis=entries)


@pytest.fixture
def indexes() -> dict[str, ApiIndex]:
    tmdb = ApiIndex(
        file_id="tmdb", name="The Movie Database",
        endpoints=[
            EndpointEntry(path="/movie/top_rated", methods=["get"], operation_ids=["getTopRatedMovies"],
                          summaries=["Get Top Rated"]),
            EndpointEntry(path="/movie/{movie_id}/credits", methods=["get"], operation_ids=["getMovieCredits"],
                          summaries=["Get the cast and crew for a movie"]),
            EndpointEntry(path="/search/person", methods=["get"], operation_ids=["searchPerson"],
                          summaries=["Search for people by name"]),
        ],
        schemas=[SchemaEntry(name="MovieCredits", chunk_id="tmdb:components/schemas/MovieCredits"),
                 SchemaEntry(name="PersonResult", chunk_id="tmdb:components/schemas/PersonResult")],
    )
    mail = ApiIndex(file_id="sendgrid", name="SendGrid", endpoints=[
        EndpointEntry(path="/mail/send", methods=["post"], operation_ids=["sendMail"], summaries=["Send an email"])])
    return {"tmdb": tmdb, "sendgrid": mail}


@pytest.fixture
def fallback_selector(catalog) -> FakeKeywordSelector:
    return FakeKeywordSelector(catalog)


@pytest.fixture
def fallback_expander() -> FakeKeywordExpander:
    return FakeKeywordExpander()


@pytest.fixture
def llm_engine(demo_index, server):
    """A factory: the demo corpus's engine in LLM mode, pointed at the scripted server."""
    from specrag.engine.factory import build_engine

    def make(**overrides):
        local, store = demo_index
        values = dict(llm_base_url=server.base_url, openai_api_key=None, llm_model="test-model",
                      llm_timeout_s=0.5, llm_max_attempts=2, llm_deadline_s=2.0)
        return build_engine(local.model_copy(update={**values, **overrides}), store)

    return make
