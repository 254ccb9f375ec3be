"""The stage-1 prompt for the whole ../shared/corpus catalog: shortlisted under its token budget,
and what the server receives is the prompt file, formatted."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.utils import get_tokenizer
from specrag.catalog.io import load_api_indexes, load_catalog, write_catalogs
from specrag.core.llm import build_llm
from specrag.specs.ingest import ingest_paths
from specrag.stages.api_select import KeywordApiSelector
from specrag.stages.api_select_llm import LLMApiSelector, catalog_line

from .openai_server import answer

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
QUERY = "Who directed the top rated movie?"


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")
def test_whole_corpus_catalog_is_shortlisted_under_the_budget(server, make_settings, prompts, tmp_path):
    write_catalogs(ingest_paths([CORPUS]).apis, tmp_path)
    catalog = load_catalog(tmp_path)
    settings = make_settings()
    count = lambda text: len(get_tokenizer()(text))  # noqa: E731
    assert len(catalog.apis) > 600
    assert count("\n".join(catalog_line(e) for e in catalog.apis)) > 5 * settings.llm.selection_prompt_token_budget

    selector = LLMApiSelector(build_llm(settings), catalog, KeywordApiSelector(catalog, load_api_indexes(tmp_path, catalog)),
                              prompts, settings)
    server.script(answer({"selected_apis": ["tmdb"], "reasoning": "movies and their credits"}))
    selection = stats = selector.select(QUERY)

    sent = server.user_texts()[0]
    assert sent == prompts.select_apis.format(**selector.prompt_vars(QUERY))  # the prompt file, formatted
    assert sent.startswith(prompts.select_apis.template.split("{", 1)[0])
    assert count(sent) <= settings.llm.selection_prompt_token_budget
    shown = [line for line in sent.splitlines() if line.startswith("- ")]
    assert 20 <= len(shown) < len(catalog.apis)
    assert any(line.startswith("- tmdb:") for line in shown)  # the shortlist kept the right API
    assert selection.selected_apis == ["tmdb"] and stats.fallbacks == []
    assert stats.prompt.startswith("select_apis@")
