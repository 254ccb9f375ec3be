"""The ``SPECRAG_SPEC_*`` limits are typed settings, read from the environment and validated."""

from __future__ import annotations

import pytest
from specrag.core.errors import SettingsError
from specrag.core.settings import Settings
from specrag.specs.limits import SpecLimits


def test_defaults_let_real_specs_through():
    limits = SpecLimits.from_settings(Settings())
    assert limits.max_bytes >= 10 * 2**20 and limits.max_nodes >= 1_000_000 and limits.max_depth >= 50
    assert limits.timeout_s >= 30


def test_limits_come_from_the_environment(monkeypatch):
    for name, value in {"SPECRAG_SPEC_MAX_BYTES": "1000", "SPECRAG_SPEC_TIMEOUT_S": "2.5",
                        "SPECRAG_SPEC_MAX_NODES": "50", "SPECRAG_SPEC_MAX_DEPTH": "10",
                        "SPECRAG_SPEC_MAX_ALIASES": "0"}.items():
        monkeypatch.setenv(name, value)
    assert SpecLimits.from_settings() == SpecLimits(max_bytes=1000, timeout_s=2.5, max_nodes=50, max_depth=10,
                                                     max_aliases=0)


@pytest.mark.parametrize("name, value", [("SPECRAG_SPEC_MAX_BYTES", "0"), ("SPECRAG_SPEC_TIMEOUT_S", "-1"),
                                         ("SPECRAG_SPEC_MAX_DEPTH", "100000"), ("SPECRAG_SPEC_MAX_NODES", "many")])
def test_bad_limits_are_refused(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        Settings()
