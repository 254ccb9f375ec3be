"""Prompts as files: the shipped set matches what the stages pass, swaps change the recorded hash."""

from __future__ import annotations

import shutil

import pytest
from llama_index.core.prompts import PromptTemplate
from specrag.context.knowledge import KnowledgeContext
from specrag.core.errors import PromptError, SpecragError
from specrag.core.prompts import PROMPT_VARS, PromptSet, prompt_hash
from specrag.stages import synthesize
from specrag.stages.api_select_llm import LLMApiSelector
from specrag.stages.expand_llm import LLMQueryExpander

from .conftest import PROMPTS_DIR
from .openai_server import answer


def test_each_file_uses_exactly_what_its_stage_passes(llm, catalog, indexes, fallback_selector,
                                                      fallback_expander, prompts, settings):
    selector = LLMApiSelector(llm, catalog, fallback_selector, prompts, settings)
    expander = LLMQueryExpander(llm, indexes.get, fallback_expander, prompts, settings)
    passed = {
        "select_apis": selector.prompt_vars("q"),
        "expand_query": expander.prompt_vars("q", [indexes["tmdb"]]),
        "synthesize": synthesize.prompt_vars(KnowledgeContext(query="q")),
    }
    for name, template_vars in passed.items():
        assert set(prompts.template(name).template_vars) == set(template_vars) == PROMPT_VARS[name]
        assert prompts.info(name).hash == prompt_hash((PROMPTS_DIR / f"{name}.txt").read_text())


def test_missing_file_is_a_clear_error(tmp_path):
    shutil.copytree(PROMPTS_DIR, tmp_path / "p")
    (tmp_path / "p" / "expand_query.txt").unlink()
    with pytest.raises(PromptError, match="lacks expand_query.txt"):
        PromptSet.load(tmp_path / "p")
    with pytest.raises(PromptError, match="does not exist"):
        PromptSet.load(tmp_path / "nowhere")


def test_unknown_or_missing_variables_fail_at_load(tmp_path):
    shutil.copytree(PROMPTS_DIR, tmp_path / "p")
    (tmp_path / "p" / "select_apis.txt").write_text("Pick from {catalog} for {question}")
    with pytest.raises(PromptError) as err:
        PromptSet.load(tmp_path / "p")
    message = str(err.value)
    assert "select_apis.txt uses {question}" in message and "lacks {max_apis}, {query}" in message
    assert isinstance(err.value, SpecragError) and isinstance(err.value, ValueError)


def test_prompts_dir_swap_changes_what_is_sent_and_recorded(tmp_path, server, llm, catalog,
                                                            fallback_selector, prompts, settings):
    shutil.copytree(PROMPTS_DIR, tmp_path / "p")
    variant = "Short variant.\nTask: {query}\n{catalog}\nAt most {max_apis}. Reply as JSON."
    (tmp_path / "p" / "select_apis.txt").write_text(variant)
    swapped = PromptSet.load(tmp_path / "p")
    assert swapped.info("select_apis").hash != prompts.info("select_apis").hash
    assert swapped.info("expand_query") == prompts.info("expand_query").model_copy(
        update={"path": str(tmp_path / "p" / "expand_query.txt")})
    server.script(answer({"selected_apis": ["tmdb"]}))
    stats = LLMApiSelector(llm, catalog, fallback_selector, swapped, settings).select("movies")
    assert server.user_texts()[0].startswith("Short variant.\nTask: movies\n- tmdb:")
    assert stats.prompt == f"select_apis@{prompt_hash(variant)}"
    assert stats.llm_calls[0].prompt_hash == prompt_hash(variant)


def test_prompt_mixin_get_and_update(llm, catalog, fallback_selector, prompts, settings):
    selector = LLMApiSelector(llm, catalog, fallback_selector, prompts, settings)
    assert list(selector.get_prompts()) == ["select_apis"]
    assert selector.get_prompts()["select_apis"].get_template() == prompts.select_apis.get_template()
    new = PromptTemplate("Choose for {query} from {catalog}, up to {max_apis}, as JSON.")
    selector.update_prompts({"select_apis": new})
    assert selector.prompt_info.hash == prompt_hash(new.get_template()) and selector.prompt_info.path == ""
    with pytest.raises(PromptError, match="lacks {max_apis}"):
        selector.update_prompts({"select_apis": PromptTemplate("Choose for {query} from {catalog}")})
