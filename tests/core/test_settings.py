"""Settings: every field has an allowed range, a bad value is a one-line SettingsError naming the
env var and what it accepts; `.env` comes only from an explicit path or the project folder, and a
base URL from a `.env` never receives the environment's API key; the sections keep every flat
variable and keyword of the flat class."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pydantic import AliasChoices, Field, SecretStr
from specrag.core import envfile
from specrag.core.errors import SettingsError, SpecragError
from specrag.core.settings import RetrievalSettings, Section, Settings, StorageSettings
from specrag.core.settings_errors import allowed
from specrag.core.settings_reference import env_names

SETTING_PREFIXES = ("SPECRAG_", "OPENAI_", "RETRIEVAL_", "CONTEXT_", "ENABLE_QUERY", "LOG_RETRIEVAL", "SELECTION_")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No setting from the machine, and a project folder (for the default .env) of the test's own."""
    import os

    for name in list(os.environ):
        if name.upper().startswith(SETTING_PREFIXES):
            monkeypatch.delenv(name)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'specrag'\n")
    monkeypatch.setattr(envfile, "PROJECT_DIR", project)
    return project


@pytest.mark.parametrize("name, value, expected", [
    ("SPECRAG_LLM_TIMEOUT_S", "abc", "SPECRAG_LLM_TIMEOUT_S='abc': expected a number > 0 and <= 600"),
    ("RETRIEVAL_MAX_DEPTH", "-1", "RETRIEVAL_MAX_DEPTH='-1': expected an integer >= 0 and <= 20"),
    ("ENABLE_QUERY_ANALYSIS", "maybe", "ENABLE_QUERY_ANALYSIS='maybe': expected true or false"),
    ("RETRIEVAL_MAX_PRIMARY_RESULTS", "0", "RETRIEVAL_MAX_PRIMARY_RESULTS='0': expected an integer >= 1"),
    ("RETRIEVAL_MAX_TOTAL_CHUNKS", "-3", "RETRIEVAL_MAX_TOTAL_CHUNKS='-3': expected an integer >= 1"),
    ("RETRIEVAL_TIMEOUT_MS", "0", "RETRIEVAL_TIMEOUT_MS='0': expected an integer >= 1"),
    ("RETRIEVAL_RRF_K", "-60", "RETRIEVAL_RRF_K='-60': expected an integer >= 1"),
    ("RETRIEVAL_BM25_WEIGHT", "-0.4", "RETRIEVAL_BM25_WEIGHT='-0.4': expected a number >= 0"),
    ("RETRIEVAL_METHOD_WEIGHT", "nan", "RETRIEVAL_METHOD_WEIGHT='nan': expected a number >= 0 and <= 100"),
    ("SELECTION_MAX_APIS", "0", "SELECTION_MAX_APIS='0': expected an integer >= 1 and <= 20"),
    ("SPECRAG_LLM_MAX_ATTEMPTS", "0", "SPECRAG_LLM_MAX_ATTEMPTS='0': expected an integer >= 1 and <= 10"),
    ("SPECRAG_LLM_DEADLINE_S", "inf", "SPECRAG_LLM_DEADLINE_S='inf': expected a number > 0 and <= 3600"),
    ("SPECRAG_LLM_CACHE_SIZE", "0", "SPECRAG_LLM_CACHE_SIZE='0': expected an integer >= 1"),
    ("SPECRAG_LLM_CACHE_TTL_S", "-1", "SPECRAG_LLM_CACHE_TTL_S='-1': expected a number > 0"),
    ("SPECRAG_CHUNK_MAX_TOKENS", "5", "SPECRAG_CHUNK_MAX_TOKENS='5': expected an integer >= 100"),
    ("SPECRAG_EMBED_THREADS", "0", "SPECRAG_EMBED_THREADS='0': expected an integer >= 1 and <= 256"),
    ("SPECRAG_SELECTION_PROMPT_TOKENS", "10", "SPECRAG_SELECTION_PROMPT_TOKENS='10': expected an integer >= 500"),
    ("SPECRAG_CHROMA_PORT", "99999", "SPECRAG_CHROMA_PORT='99999': expected an integer >= 1 and <= 65535"),
    ("SPECRAG_COLLECTION", "a b", "SPECRAG_COLLECTION='a b': expected 3-512 characters"),
    ("SPECRAG_LLM_BASE_URL", "localhost:8000",
     "SPECRAG_LLM_BASE_URL/OPENAI_BASE_URL='localhost:8000': expected an http:// or https:// URL"),
    ("OPENAI_BASE_URL", "file:///etc/passwd",
     "SPECRAG_LLM_BASE_URL/OPENAI_BASE_URL='file:///etc/passwd': expected an http:// or https:// URL"),
    ("SPECRAG_SPEC_MAX_DEPTH", "1", "SPECRAG_SPEC_MAX_DEPTH='1': expected an integer > 1 and <= 400"),
])
def test_bad_value_is_one_line_naming_the_variable_and_range(monkeypatch, name, value, expected):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        Settings()
    message = str(caught.value)
    assert "\n" not in message and expected in message
    assert isinstance(caught.value, SpecragError) and isinstance(caught.value, ValueError)


def test_values_given_in_code_name_the_field_and_its_variable():
    with pytest.raises(SettingsError, match=r"max_depth \(RETRIEVAL_MAX_DEPTH\)=-1: expected an integer >= 0"):
        Settings(max_depth=-1)


def test_both_fusion_weights_zero_is_refused(monkeypatch):
    monkeypatch.setenv("RETRIEVAL_VECTOR_WEIGHT", "0")
    with pytest.raises(SettingsError, match="RETRIEVAL_VECTOR_WEIGHT and RETRIEVAL_BM25_WEIGHT are both 0"):
        Settings(bm25_weight=0.0)


def test_api_key_is_never_echoed(monkeypatch):
    with pytest.raises(SettingsError) as caught:
        Settings(openai_api_key="")
    assert "OPENAI_API_KEY" in str(caught.value) and "'***'" in str(caught.value)


def test_empty_variable_means_unset(monkeypatch):
    monkeypatch.setenv("SPECRAG_CHROMA_HOST", "")
    monkeypatch.setenv("SPECRAG_CHROMA_PORT", "")
    settings = Settings()
    assert settings.storage.chroma_host is None and settings.storage.chroma_port == 8000


def test_every_field_states_what_it_accepts():
    fields = {name: field for name, (_, field) in Settings.flat_fields().items()}
    for name, field in fields.items():
        assert not allowed(field).startswith("a value"), name
    bounded = [name for name, f in fields.items() if f.annotation in (int, float, int | None)]
    for name in bounded:  # every number has a lower bound at least
        assert any(op in allowed(fields[name]) for op in (">", ">=")), name


# ---- which .env is read -----------------------------------------------------------------------

def test_dotenv_in_the_working_folder_is_ignored(monkeypatch, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / ".env").write_text("SPECRAG_LLM_BASE_URL=http://127.0.0.1:9/v1\nSPECRAG_LLM_MODEL=evil\n")
    monkeypatch.chdir(work)
    settings = Settings()
    assert settings.llm.llm_base_url is None and settings.llm.llm_model == "gpt-4o-mini"


def test_project_folder_dotenv_is_read(clean_environment):
    (clean_environment / ".env").write_text("SPECRAG_LLM_MODEL=from-project\n")
    assert Settings().llm.llm_model == "from-project"


def test_installed_copy_reads_no_dotenv(clean_environment):
    (clean_environment / ".env").write_text("SPECRAG_LLM_MODEL=from-project\n")
    (clean_environment / "pyproject.toml").unlink()  # site-packages: not a project folder
    assert Settings().llm.llm_model == "gpt-4o-mini"


def test_explicit_env_file_wins_and_must_exist(monkeypatch, tmp_path, clean_environment):
    (clean_environment / ".env").write_text("SPECRAG_LLM_MODEL=from-project\n")
    chosen = tmp_path / "chosen.env"
    chosen.write_text("SPECRAG_LLM_MODEL=from-chosen\n")
    monkeypatch.setenv("SPECRAG_ENV_FILE", str(chosen))
    assert Settings().llm.llm_model == "from-chosen"
    assert Settings(_env_file=None).llm.llm_model == "gpt-4o-mini"
    monkeypatch.setenv("SPECRAG_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(SettingsError, match="SPECRAG_ENV_FILE=.*missing.env: no such file"):
        Settings()


def test_bad_value_in_a_dotenv_is_named_too(monkeypatch, tmp_path):
    chosen = tmp_path / "chosen.env"
    chosen.write_text("RETRIEVAL_MAX_DEPTH=deep\n")
    with pytest.raises(SettingsError, match="RETRIEVAL_MAX_DEPTH='deep': expected an integer"):
        Settings(_env_file=chosen)


# ---- a .env cannot redirect the environment's key ---------------------------------------------

def _dotenv(tmp_path, text: str):
    path = tmp_path / "x.env"
    path.write_text(text)
    return path


def test_dotenv_url_withholds_the_environment_key(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    path = _dotenv(tmp_path, "SPECRAG_LLM_BASE_URL=http://attacker.example/v1\n")
    with caplog.at_level(logging.WARNING, logger="specrag.core.envfile"):
        settings = Settings(_env_file=path)
    assert settings.llm.llm_base_url == "http://attacker.example/v1" and settings.llm.openai_api_key is None
    assert settings.llm_configured  # still the .env's server, only without the key
    assert any("is not sent to it" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)


def test_dotenv_url_with_its_own_key_uses_that_key(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    path = _dotenv(tmp_path, "OPENAI_BASE_URL=http://127.0.0.1:8000/v1\nOPENAI_API_KEY=sk-local\n")
    assert Settings(_env_file=path).llm.openai_api_key == "sk-local"


@pytest.mark.parametrize("environment, given, key", [
    ({"OPENAI_API_KEY": "sk-env", "SPECRAG_LLM_BASE_URL": "http://env.example/v1"}, {}, "sk-env"),  # URL from env
    ({"OPENAI_API_KEY": "sk-env"}, {"llm_base_url": "http://code.example/v1"}, "sk-env"),  # URL given in code
    ({}, {}, None),  # no key in the environment: nothing to withhold
])
def test_key_is_kept_when_the_url_is_not_the_dotenv_s(monkeypatch, tmp_path, environment, given, key):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = _dotenv(tmp_path, "SPECRAG_LLM_BASE_URL=http://dotenv.example/v1\n")
    assert Settings(_env_file=path, **given).llm.openai_api_key == key


# ---- sections: the flat names of before still set the same fields -------------------------------

OLD_NAMES = json.loads((Path(__file__).parent / "fixtures" / "settings_env_names.json").read_text())
"""The flat class's fields, each with its variables, a sample value and what the flat class read
from it (recorded before the sections; see the fixture)."""


def _plain(value):
    """A field's value as the fixture holds it (JSON)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value


def test_the_fields_and_their_variables_are_those_of_the_flat_class():
    fields = Settings.flat_fields()
    assert sorted(fields) == sorted(OLD_NAMES)
    for name, (_, field) in fields.items():
        assert env_names(name, field) == OLD_NAMES[name]["env"], name


@pytest.mark.parametrize("name, variable", [(n, v) for n, old in OLD_NAMES.items() for v in old["env"]])
def test_every_variable_of_the_flat_class_sets_the_same_value(monkeypatch, name, variable):
    monkeypatch.setenv(variable, OLD_NAMES[name]["sample"])
    settings = Settings(_env_file=None)
    section = Settings.flat_fields()[name][0]
    assert _plain(getattr(getattr(settings, section), name)) == OLD_NAMES[name]["value"]


def test_a_dotenv_sets_the_flat_variables_too(tmp_path):
    path = tmp_path / "x.env"
    path.write_text("RETRIEVAL_RRF_K=11\nSELECTION_WEIGHTS=[1, 1, 2]\nSPECRAG_TENANT=dot\nUNRELATED=1\n")
    settings = Settings(_env_file=path)
    assert (settings.retrieval.rrf_k, settings.selection.selection_weights, settings.storage.tenant) == (
        11, (1.0, 1.0, 2.0), "dot")


def test_flat_keywords_land_in_their_sections_and_beat_the_environment(monkeypatch):
    monkeypatch.setenv("RETRIEVAL_RRF_K", "9")
    monkeypatch.setenv("RETRIEVAL_MAX_DEPTH", "5")
    settings = Settings(rrf_k=3, data_dir=Path("/idx"), SPECRAG_LLM_MODEL="by-variable", api_keys="acme:k")
    assert settings.retrieval.rrf_k == 3 and settings.retrieval.max_depth == 5  # the environment fills the rest
    assert settings.storage.data_dir == Path("/idx") and settings.llm.llm_model == "by-variable"
    assert settings.serving.api_keys.get_secret_value() == "acme:k"


def test_a_section_given_whole_or_in_part(monkeypatch):
    monkeypatch.setenv("RETRIEVAL_RRF_K", "9")
    assert Settings(retrieval={"max_depth": 1}).retrieval.model_dump(include={"rrf_k", "max_depth"}) == {
        "rrf_k": 9, "max_depth": 1}  # in part: the environment fills the others
    assert Settings(retrieval=RetrievalSettings(max_depth=1)).retrieval.rrf_k == 60  # whole: the model's own
    assert Settings(retrieval={"rrf_k": 1}, rrf_k=2).retrieval.rrf_k == 2  # a flat keyword beats its section


def test_a_bad_value_given_through_a_section_names_the_field_and_its_variable():
    with pytest.raises(SettingsError, match=r"^invalid setting: max_depth \(RETRIEVAL_MAX_DEPTH\)=-1: expected"):
        Settings(retrieval={"max_depth": -1})
    with pytest.raises(SettingsError, match=r"^invalid setting: RETRIEVAL_MAX_DEPTH=-1: expected"):
        Settings(RETRIEVAL_MAX_DEPTH=-1)


def test_model_copy_takes_flat_names_and_gives_the_copy_sections_of_its_own():
    settings = Settings(_env_file=None)
    copy = settings.model_copy(update={"data_dir": Path("/elsewhere"), "rrf_k": 7, "openai_api_key": None})
    assert (copy.storage.data_dir, copy.retrieval.rrf_k) == (Path("/elsewhere"), 7)
    assert (settings.storage.data_dir, settings.retrieval.rrf_k) == (Path(".specrag"), 60)
    copy.serving.serve_port = 1  # a section changed on the copy only
    assert settings.serving.serve_port == 8080
    assert settings.model_copy(update={"retrieval": RetrievalSettings(rrf_k=4)}).retrieval.rrf_k == 4


def test_a_flat_read_says_where_the_field_went():
    old_reader = "rrf_k"  # by a variable: the rewrite script would nest a literal
    with pytest.raises(AttributeError, match=r"it is settings\.retrieval\.rrf_k"):
        getattr(Settings(_env_file=None), old_reader)


def test_a_dump_builds_the_same_settings_and_the_flat_dump_has_every_field():
    settings = Settings(_env_file=None, rrf_k=5, tenant="acme", selection_weights=(1, 2, 3))
    assert Settings(_env_file=None, **settings.model_dump()) == settings
    assert sorted(settings.flat_dump()) == sorted(OLD_NAMES) and settings.flat_dump()["rrf_k"] == 5


def test_a_flat_name_of_two_sections_is_refused():
    class Doubled(Settings):
        spare: StorageSettings = Field(default_factory=StorageSettings)

    class Spare(Section):
        other_dir: Path = Field(Path("x"), validation_alias=AliasChoices("SPECRAG_DATA_DIR"))

    class Aliased(Settings):
        spare: Spare = Field(default_factory=Spare)

    with pytest.raises(TypeError, match="'data_dir' is in settings.storage and settings.spare"):
        Doubled.flat_fields()
    with pytest.raises(TypeError, match="'data_dir' and 'other_dir' .* are both set by 'SPECRAG_DATA_DIR'"):
        Aliased.flat_fields()
