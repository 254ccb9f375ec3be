"""Each tenant's corpora live in a folder of their own; the default tenant keeps the old layout."""

from pathlib import Path

import pytest
from specrag.core.errors import IndexNotBuiltError
from specrag.core.settings import Settings
from specrag.core.settings_errors import SettingsError
from specrag.index.workspace import CURRENT, corpus_key, corpus_settings


def test_default_tenant_keeps_corpora_under_the_data_dir(tmp_path):
    settings = Settings(data_dir=tmp_path)
    local = corpus_settings(settings, [Path("examples/specs")])
    assert local.storage.data_dir == tmp_path / "corpora" / corpus_key([Path("examples/specs")])


def test_other_tenant_gets_its_own_folder_and_current(tmp_path):
    acme = Settings(data_dir=tmp_path, tenant="acme")
    local = corpus_settings(acme, [Path("examples/specs")])
    assert local.storage.data_dir == tmp_path / "tenants" / "acme" / "corpora" / corpus_key([Path("examples/specs")])
    (tmp_path / CURRENT).write_text("someone-elses")  # the default tenant's last corpus
    with pytest.raises(IndexNotBuiltError, match="tenants/acme"):
        corpus_settings(acme)


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x" * 64, "-lead"])
def test_tenant_names_cannot_leave_the_data_dir(tmp_path, bad):
    with pytest.raises(SettingsError, match="SPECRAG_TENANT"):
        Settings(data_dir=tmp_path, tenant=bad)
