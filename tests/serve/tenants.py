"""Two tenants with the same API ids: the demo specs indexed under 'acme', then the same folder
with one operation's summary changed indexed under 'beta' (same kb_id, same API ids, different
chunks), plus a corpus only 'beta' has. Keys come from SPECRAG_API_KEYS, as a user gives them."""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import SecretStr

MARKER = "zanzibarquux"  # a word only beta's createUser summary has
KEYS = {"acme": "key-acme-7f3e2b9c41d8a6", "beta": "key-beta-c5e19a0f2d7b33"}
SPECS = Path(__file__).resolve().parents[2] / "examples" / "specs"


def mark_create_user(specs: Path, marker: str = MARKER) -> None:
    """Change createUser's summary in the copy (a real spec edit, re-read by the next index run)."""
    path = specs / "users_api.yaml"
    text = path.read_text()
    assert "summary: Create a user\n" in text
    path.write_text(text.replace("summary: Create a user\n", f"summary: Create a user {marker}\n"))


def build_two_tenants(root: Path, demo_settings) -> tuple:
    """(settings with keys, specs copy, the kb_id both tenants hold, the kb_id only beta holds)."""
    from specrag.index.workspace import update_index

    specs, only_beta = root / "specs", root / "petonly"
    shutil.copytree(SPECS, specs)
    only_beta.mkdir()
    shutil.copy(SPECS / "petstore_v2.json", only_beta)
    settings = demo_settings(root / "data").model_copy(update={
        "api_keys": SecretStr(",".join(f"{tenant}:{key}" for tenant, key in KEYS.items()))})
    acme, _ = update_index(settings.model_copy(update={"tenant": "acme"}), [specs], progress=False)
    mark_create_user(specs)
    beta, _ = update_index(settings.model_copy(update={"tenant": "beta"}), [specs], progress=False)
    beta_only, _ = update_index(settings.model_copy(update={"tenant": "beta"}), [only_beta], progress=False)
    assert acme.storage.data_dir.name == beta.storage.data_dir.name and acme.storage.data_dir != beta.storage.data_dir
    return settings, specs, acme.storage.data_dir.name, beta_only.storage.data_dir.name


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}
