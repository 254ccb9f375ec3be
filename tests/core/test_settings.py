"""Settings: every field has an allowed range, a bad value is a one-line SettingsError naming the
env var and what it accepts; `.env` comes only from an explicit path or the project folder, and a
base URL from a `.env` never receives the environment's API key."""

from __future__ import annotations

import logging

import pytest
from specrag.core import envfile
from specrag.core.errors import SettingsError, SpecragError
from specrag.core.settings import Settings
from specrag.core.settings_errors import allowed

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
    assert settings.chroma_host is None and settings.chroma_port == 8000


def test_every_field_states_what_it_accepts():
    for name, field in Settings.model_fields.items():
        assert not allowed(field).startswith("a value"), name
    bounded = [name for name, f in Settings.model_fields.items() if f.annotation in (int, float, int | None)]
    for name in bounded:  # every number has a lower bound at least
        assert any(op in allowed(Settings.model_fields[name]) for op in (">", ">=")), name


# ---- which .env is read -----------------------------------------------------------------------

def test_dotenv_in_the_working_folder_is_ignored(monkeypatch, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / ".env").write_text("SPECRAG_LLM_BASE_URL=http://127.0.0.1:9/v1\nSPECRAG_LLM_MODEL=evil\n")
    monkeypatch.chdir(work)
    settings = Settings()
    assert settings.llm_base_url is None and settings.llm_model == "gpt-4o-mini"


def test_project_folder_dotenv_is_read(clean_environment):
    (clean_environment / ".env").write_text("SPECRAG_LLM_MODEL=from-project\n")
    assert Settings().llm_model == "from-project"


def test_installed_copy_reads_no_dotenv(clean_environment):
    (clean_environment / ".env").write_text("SPECRAG_LLM_MODEL=from-project\n")
    (clean_environment / "pyproject.toml").unlink()  # site-packages: not a project folder
    assert Settings().llm_model == "gpt-4o-mini"


def test_explicit_env_file_wins_and_must_exist(monkeypatch, tmp_path, clean_environment):
    (clean_environment / ".env").write_text("SPECRAG_LLM_MODEL=from-project\n")
    chosen = tmp_path / "chosen.env"
    chosen.write_text("SPECRAG_LLM_MODEL=from-chosen\n")
    monkeypatch.setenv("SPECRAG_ENV_FILE", str(chosen))
    assert Settings().llm_model == "from-chosen"
    assert Settings(_env_file=None).llm_model == "gpt-4o-mini"
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
    assert settings.llm_base_url == "http://attacker.example/v1" and settings.openai_api_key is None
    assert settings.llm_configured  # still the .env's server, only without the key
    assert any("is not sent to it" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)


def test_dotenv_url_with_its_own_key_uses_that_key(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    path = _dotenv(tmp_path, "OPENAI_BASE_URL=http://127.0.0.1:8000/v1\nOPENAI_API_KEY=sk-local\n")
    assert Settings(_env_file=path).openai_api_key == "sk-local"


@pytest.mark.parametrize("environment, given, key", [
    ({"OPENAI_API_KEY": "sk-env", "SPECRAG_LLM_BASE_URL": "http://env.example/v1"}, {}, "sk-env"),  # URL from env
    ({"OPENAI_API_KEY": "sk-env"}, {"llm_base_url": "http://code.example/v1"}, "sk-env"),  # URL given in code
    ({}, {}, None),  # no key in the environment: nothing to withhold
])
def test_key_is_kept_when_the_url_is_not_the_dotenv_s(monkeypatch, tmp_path, environment, given, key):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = _dotenv(tmp_path, "SPECRAG_LLM_BASE_URL=http://dotenv.example/v1\n")
    assert Settings(_env_file=path, **given).openai_api_key == key
