"""Which ``.env`` file settings read, and the rule that keeps it from redirecting an API key.

A ``.env`` is read from an explicit path (``SPECRAG_ENV_FILE``, or ``--env-file``) or else from
the specrag project folder (the source checkout holding ``pyproject.toml``), never from the
working folder: a spec folder someone else wrote cannot configure the tool by dropping a
``.env`` where it is run. Even then, a base URL that comes from a ``.env`` never receives an
``OPENAI_API_KEY`` taken from the process environment: that key was meant for whatever the
environment points at, so it is withheld (with a warning) unless the same ``.env`` names the
URL's own key.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dotenv import dotenv_values
from specrag.core.errors import SettingsError

logger = logging.getLogger(__name__)

PROJECT_DIR = Path(__file__).resolve().parent.parent
ENV_FILE_VAR = "SPECRAG_ENV_FILE"
KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VARS = ("SPECRAG_LLM_BASE_URL", "OPENAI_BASE_URL")  # the order Settings reads them in


def default_env_file() -> Path | None:
    """``$SPECRAG_ENV_FILE`` (which must exist), else the project folder's ``.env`` when there is one."""
    explicit = os.environ.get(ENV_FILE_VAR, "").strip()
    if explicit:
        return explicit_env_file(Path(explicit), ENV_FILE_VAR)
    if (PROJECT_DIR / "pyproject.toml").is_file():  # a source checkout, not an installed copy
        candidate = PROJECT_DIR / ".env"
        return candidate if candidate.is_file() else None
    return None


def explicit_env_file(path: Path, named_by: str) -> Path:
    path = path.expanduser()
    if not path.is_file():
        raise SettingsError(f"{named_by}={path}: no such file (allowed: the path of a readable .env file)")
    return path


def _set(values: dict, name: str) -> bool:
    """Present and non-empty (an empty variable counts as unset, as in Settings)."""
    return any(k.upper() == name and v not in (None, "") for k, v in values.items())


def _get(values: dict, name: str) -> str | None:
    return next((v for k, v in values.items() if k.upper() == name and v not in (None, "")), None)


def key_for_dotenv_url(env_file: Path | None, given: set[str]) -> tuple[bool, str | None]:
    """(withhold?, the key to use instead) for settings read with ``env_file``.

    ``given`` holds the field names passed in code; a value passed in code is never second-guessed.
    """
    if env_file is None or given & {"llm_base_url", "openai_api_key"}:
        return False, None
    environ = dict(os.environ)
    if any(_set(environ, name) for name in BASE_URL_VARS) or not _set(environ, KEY_VAR):
        return False, None  # the URL is the environment's own, or the environment holds no key
    try:
        dotenv = dotenv_values(env_file)
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{env_file}: unreadable .env file ({exc})") from None
    url_name = next((name for name in BASE_URL_VARS if _set(dotenv, name)), None)
    if url_name is None:
        return False, None
    own_key = _get(dotenv, KEY_VAR)
    instead = f"the {KEY_VAR} in {env_file} is used" if own_key else (
        f"put the key for that server in {env_file}, or set {url_name} in the environment, to send one")
    logger.warning("%s=%s comes from %s: the %s from the environment is not sent to it; %s",
                   url_name, _get(dotenv, url_name), env_file, KEY_VAR, instead)
    return True, own_key
