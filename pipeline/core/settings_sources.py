"""How the sectioned :class:`~specrag.core.settings.Settings` reads its flat names.

pydantic-settings reads a nested model from one variable per section (``RETRIEVAL='{...}'``) or
from ``SECTION__FIELD`` names; the settings' variables predate the sections and stay flat
(``RETRIEVAL_RRF_K``, ``SPECRAG_DATA_DIR``). So one source does what the default ones did for the
flat class: it runs pydantic-settings' own environment and ``.env`` sources over a flat view of
every section field (:func:`flat_view`: the same fields, aliases and config, so the same names,
case rules, empty-means-unset and JSON decoding), takes per field the value of code, else the
environment, else the ``.env``, and returns it nested under the field's section. Each value
keeps the key it came by (the variable name, or the field name given in code), so a validation
error still names what the user wrote.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import AliasChoices, BaseModel, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource, PydanticBaseSettingsSource
from specrag.core import caches

Settings = Any  # a sectioned settings class (sections(), flat_fields()): not imported, it imports this module


def field_keys(name: str, field: FieldInfo) -> list[str]:
    """The keys a field is set by: its variable names (aliases), then its name."""
    alias = field.validation_alias
    aliases = [str(a) for a in alias.choices] if isinstance(alias, AliasChoices) else [alias] if alias else []
    return [*aliases, name]


@caches.register
@cache
def flat_view(settings_cls: type[Settings]) -> type[BaseSettings]:
    """A BaseSettings class with every section field at top level and the settings' config: what the
    environment sources iterate. Never instantiated."""

    class FlatSettings(BaseSettings):
        model_config = settings_cls.model_config

    fields = {name: (field.annotation, field) for name, (_, field) in settings_cls.flat_fields().items()}
    return create_model("FlatSettings", __base__=FlatSettings, **fields)  # type: ignore[call-overload]


@caches.register
@cache
def _key_index(settings_cls: type[Settings]) -> tuple[dict[str, str], dict[str, str]]:
    """(exact key -> field name, lower-cased key -> field name) over every section field."""
    exact: dict[str, str] = {}
    for name, (_, field) in settings_cls.flat_fields().items():
        for key in field_keys(name, field):
            exact.setdefault(key, name)
    return exact, {key.lower(): name for key, name in reversed(list(exact.items()))}


def flat_values(settings_cls: type[Settings], values: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Field name -> (key, value) of what was given in code: flat keywords, and the fields of a
    section given whole (a model: all its fields) or in part (a dict); a flat keyword wins.

    The key is the one given when it is the field's name or one of its variable names (so an
    error names it), else, for a case-insensitive match, the field's first variable name.
    Anything else (an unknown key, a section that is neither model nor dict) is left to pydantic.
    """
    exact, folded = _key_index(settings_cls)
    fields = settings_cls.flat_fields()
    sections = settings_cls.sections()
    found: dict[str, tuple[str, Any]] = {}

    def take(key: str, value: Any) -> None:
        name = exact.get(key) or folded.get(key.lower())
        if name is not None:
            found[name] = (key if key in exact else field_keys(name, fields[name][1])[0], value)

    for section, given in values.items():
        if section not in sections:
            continue
        if isinstance(given, BaseModel):
            for key in type(given).model_fields:
                take(key, getattr(given, key))
        elif isinstance(given, dict):
            for key, value in given.items():
                take(str(key), value)
    for key, value in values.items():
        if key not in sections:
            take(key, value)
    return found


def given_fields(settings_cls: type[Settings], values: dict[str, Any]) -> set[str]:
    """Names of the fields given in code, flat or through their section."""
    return set(flat_values(settings_cls, values))


class FlatNamesSource(PydanticBaseSettingsSource):
    """Code, then the environment, then the ``.env``, read by flat names and nested by section.

    The result keeps, for a section given as something pydantic must judge (not a model, not a
    dict), that value as it is, so the error says so.
    """

    def __init__(self, settings_cls: type[BaseSettings], init_kwargs: dict[str, Any], env_file: Any,
                 env_file_encoding: str | None) -> None:
        super().__init__(settings_cls)
        self.init_kwargs = init_kwargs
        self.env_file = env_file
        self.env_file_encoding = env_file_encoding

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads everything at once

    def __call__(self) -> dict[str, Any]:
        cls: type[Settings] = self.settings_cls
        flat = flat_view(cls)
        exact, _ = _key_index(cls)
        chosen: dict[str, tuple[str, Any]] = {}
        for source in (DotEnvSettingsSource(flat, env_file=self.env_file, env_file_encoding=self.env_file_encoding),
                       EnvSettingsSource(flat)):  # lowest priority first
            for key, value in source().items():
                if key in exact:  # a .env line that names no setting is ignored, as before
                    chosen[exact[key]] = (key, value)
        chosen.update(flat_values(cls, self.init_kwargs))
        fields = cls.flat_fields()
        sections = cls.sections()
        nested: dict[str, Any] = {section: {} for section in sections}
        for name, (key, value) in chosen.items():
            nested[fields[name][0]][key] = value
        for section in sections:  # a section that pydantic must judge (neither model nor dict)
            given = self.init_kwargs.get(section)
            if given is not None and not isinstance(given, (BaseModel, dict)):
                nested[section] = given
        return nested
