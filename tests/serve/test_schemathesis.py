"""Schemathesis over the service's own OpenAPI document (bounded examples per operation): no
server errors, and every response conforms to its schema, status codes and content types.

The app is the one `specrag serve` runs (the plan and agentic routes mounted); the schema is its
``/openapi.json`` (``service_openapi(routers)``, the same document), loaded at collection; the
calls go to the app over the demo corpus through the ASGI transport."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from specrag.serve.graph_wiring import routers
from specrag.serve.openapi import service_openapi

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]
DOCUMENT = service_openapi(routers())
schema = schemathesis.openapi.from_dict(DOCUMENT)


@pytest.fixture(scope="module")
def served_app(demo_kbs):
    from specrag.serve.app import create_app

    app = create_app(demo_kbs, extra_routers=routers())
    assert app.openapi() == DOCUMENT  # the document under test is the one the app serves
    assert {"/api/v1/plan", "/api/v1/retrieve/agentic"} <= set(DOCUMENT["paths"])
    return app


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_service_keeps_its_own_contract(case, served_app):
    case.call_and_validate(app=served_app, checks=CHECKS)
