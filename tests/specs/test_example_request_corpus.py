"""Every operation of real specs gets an example request whose JSON (or form) body is valid
against its schema: a Swagger 2 spec with JSON bodies and one with form fields (apis-guru),
Twilio (OpenAPI 3.0, form-encoded bodies), OpenAI (OpenAPI 3.1) and DigitalOcean (multi-file).
Bodies the validator cannot judge are counted apart, each with its reason, never as valid."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.specs.limits import SpecLimits

from .example_validation import check_spec

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
# spec -> (operations, bodies checked at least, what may be counted apart: reason -> operations)
SPECS = {
    "apis-guru/sendgrid.com.json": (245, 120, {}),
    "apis-guru/gitlab.com.json": (358, 117, {}),
    "twilio/twilio_api_v2010.json": (197, 62, {}),
    "openai/openai.yaml": (288, 110, {}),
    # the snapshot branch is allOf [droplet_action, ...]: any body of one fits both; OpenAPI's
    # discriminator (type) tells them apart, JSON Schema has no such keyword
    "digitalocean/specification/DigitalOcean-public.v2.yaml": (659, 215, {"discriminator_decides": ["POST /v2/droplets/actions"]}),
}


@pytest.mark.parametrize("name", list(SPECS), ids=lambda n: Path(n).stem)
def test_every_operations_example_body_is_valid_against_its_schema(name, record_property):
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"{path} is not in ../shared")
    operations, bodies, apart = SPECS[name]
    tally = check_spec(path, SpecLimits.from_settings())
    print(tally.line(name))
    record_property("example_bodies", tally.line(name))
    assert tally.invalid == []
    assert tally.operations == operations and tally.bodies >= bodies
    assert tally.valid == tally.bodies - sum(len(v) for v in apart.values())
    for reason in ("unsatisfiable", "validator_failed", "discriminator_decides"):
        assert [line.split(":")[0] for line in getattr(tally, reason)] == apart.get(reason, []), reason
