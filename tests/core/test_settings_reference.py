"""docs/configuration.md's settings tables are the ones the sections of Settings make, and list every field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import AliasChoices, Field
from specrag.core import settings_reference as ref
from specrag.core.settings import RetrievalSettings, Settings, StorageSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def doc_part() -> str:
    return ref.generated_part(DOC.read_text(encoding="utf-8"))


def rows(text: str) -> dict[str, list[str]]:
    """Field name -> the cells of its row, from the generated tables."""
    found = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            found[cells[1].strip("`")] = cells
    return found


def test_the_doc_is_current():
    if doc_part() != ref.render():
        pytest.fail(f"docs/configuration.md's settings tables are stale: run `{ref.COMMAND}`", pytrace=False)


def test_every_field_is_listed_with_all_its_env_names_and_a_description():
    listed = rows(doc_part())
    assert sorted(listed) == sorted(Settings.flat_fields())
    for name, (_, field) in Settings.flat_fields().items():
        names = ref.env_names(name, field)
        assert names and listed[name][0] == ", ".join(f"`{n}`" for n in names), name
        assert field.description and listed[name][5], f"{name} has no description"
    assert listed["llm_base_url"][0] == "`SPECRAG_LLM_BASE_URL`, `OPENAI_BASE_URL`"


def test_each_section_is_a_table_of_its_fields_in_the_doc():
    text = doc_part()
    titles = ref.sections()
    assert len(titles) >= 8 and list(titles)[:2] == ["Storage", "Ingest limits"]
    for title, (attribute, model) in titles.items():
        assert model.model_fields, title
        body = text.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]
        assert f"`settings.{attribute}` (`{model.__name__}`)" in body
        assert list(rows(body)) == list(model.model_fields), title  # in the section's own order


def test_a_row_shows_default_bounds_and_type():
    listed = rows(ref.render())
    assert listed["chroma_port"][2:5] == ["integer", "8000", "1-65535"]
    assert listed["llm_timeout_s"][2:5] == ["number", "20", "> 0, <= 600"]
    assert listed["embed_threads"][2:5] == ["integer or unset", "unset", "1-256"]
    assert listed["embed_model"][4] == "not empty"
    assert listed["selection_weights"][3] == "`[0.0, 0.25, 1.0]`"
    assert listed["api_keys"][2] == "text (secret) or unset"
    assert listed["otel_exporter"][4] == r"matches `^(none\|console\|otlp)$`"  # a pipe would split the cell


def test_a_field_added_to_a_section_is_in_its_table_with_nothing_else_to_edit():
    class MoreRetrieval(RetrievalSettings):
        brand_new_knob: int = Field(1, ge=0, validation_alias=AliasChoices("RETRIEVAL_BRAND_NEW"), description="new")

    class More(Settings):
        retrieval: MoreRetrieval = Field(default_factory=MoreRetrieval)

    body = ref.render(More).split("### Retrieval\n", 1)[1].split("\n### ", 1)[0]
    assert rows(body)["brand_new_knob"] == ["`RETRIEVAL_BRAND_NEW`", "`brand_new_knob`", "integer", "1", ">= 0", "new"]


def test_two_sections_of_one_title_are_refused():
    class Twice(Settings):
        more: StorageSettings = Field(default_factory=StorageSettings)

    with pytest.raises(ValueError, match="two settings sections are titled 'Storage'"):
        ref.sections(Twice)


def test_write_replaces_only_the_part_between_the_markers(tmp_path, capsys):
    doc = tmp_path / "configuration.md"
    doc.write_text(f"# Prose\n\nabove\n\n{ref.BEGIN}\nold table\n{ref.END}\n\nbelow\n", encoding="utf-8")
    assert ref.main(["--write", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Prose\n\nabove\n\n" + ref.BEGIN + "\n### Storage\n")
    assert text.endswith(ref.END + "\n\nbelow\n") and "old table" not in text
    assert ref.generated_part(text) == ref.render()
    assert ref.main([]) == 0
    assert capsys.readouterr().out == ref.render()
