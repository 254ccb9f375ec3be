"""``/docs`` works offline: every script, style and favicon it loads is served by the service
itself (``/docs-assets/``), and no page names an outside host. FastAPI's defaults load them from
jsdelivr and fastapi.tiangolo.com, so offline the page was blank. ``/redoc`` is not served (ReDoc's
bundle fetches a logo from its CDN whatever it is told). No knowledge base is
needed for these pages, so the app here serves none (no indexing)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.anyio

HTML_PAGES = ("/docs", "/docs/oauth2-redirect")
# a scheme-qualified or protocol-relative URL: "http://", "https://", "//host"
OUTSIDE_URL = re.compile(r"(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
CONTENT_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}


class AssetLinks(HTMLParser):
    """The URLs a browser fetches when it renders the page: script src, link href, img src."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        wanted = {"script": "src", "link": "href", "img": "src"}.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


def asset_links(html: str) -> list[str]:
    parser = AssetLinks()
    parser.feed(html)
    return parser.urls


def spec_url(html: str) -> str:
    """The OpenAPI document the page loads: Swagger UI's ``url: '...'``, ReDoc's ``spec-url``."""
    found = re.search(r"""\burl:\s*'([^']+)'""", html) or re.search(r'spec-url="([^"]+)"', html)
    assert found, "the page names no OpenAPI document"
    return found.group(1)


def docs_app(served=None):
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBases

    return create_app(served if served is not None else KnowledgeBases([]))


def http_client(app, root_path: str = ""):
    import httpx

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, root_path=root_path), base_url="http://specrag")


@pytest.fixture
async def docs_client():
    async with http_client(docs_app()) as client:
        yield client


@pytest.mark.parametrize("page", ["/docs"])
async def test_docs_page_loads_every_asset_from_the_service(docs_client, page):
    r = await docs_client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    links = asset_links(r.text)
    assert any(url.endswith(".js") for url in links), links  # the UI's bundle, not an empty page
    for url in links:
        assert url.startswith("/docs-assets/") and not url.startswith("//"), url
        asset = await docs_client.get(url)
        assert asset.status_code == 200, url
        expected = next(kind for suffix, kind in CONTENT_TYPES.items() if url.endswith(suffix))
        assert expected in asset.headers["content-type"], (url, asset.headers["content-type"])
        assert len(asset.content) > 1000, url  # the real file, not a stub or an error body


async def test_swagger_ui_links_its_script_style_and_favicon(docs_client):
    links = asset_links((await docs_client.get("/docs")).text)
    assert {"/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css", "/docs-assets/favicon.png"} <= set(links)


@pytest.mark.parametrize("page", ["/docs"])
async def test_the_openapi_document_the_page_loads_resolves(docs_client, page):
    url = spec_url((await docs_client.get(page)).text)
    assert url == "/openapi.json"
    r = await docs_client.get(url)
    assert r.status_code == 200 and r.json()["info"]["title"] == "specrag"


@pytest.mark.parametrize("page", HTML_PAGES)
async def test_no_page_names_an_outside_url(docs_client, page):
    r = await docs_client.get(page)
    assert r.status_code == 200
    assert not OUTSIDE_URL.search(r.text), OUTSIDE_URL.findall(r.text)


async def test_swagger_ui_fetches_no_validator_badge(docs_client):
    """Swagger UI's default validatorUrl fetches a badge from validator.swagger.io, sending it the spec's URL."""
    assert '"validatorUrl": null' in (await docs_client.get("/docs")).text


async def test_there_is_no_redoc_page(docs_client):
    assert (await docs_client.get("/redoc")).status_code == 404


async def test_docs_routes_stay_out_of_the_openapi_document(docs_client):
    paths = (await docs_client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc"))]


async def test_links_follow_the_root_path_behind_a_proxy():
    """Behind a reverse proxy mounting the service at a prefix, the browser must ask for the prefixed URLs."""
    async with http_client(docs_app(), root_path="/specrag") as client:
        html = (await client.get("/specrag/docs")).text
        assert spec_url(html) == "/specrag/openapi.json"
        for url in asset_links(html):
            assert url.startswith("/specrag/docs-assets/"), url
            assert (await client.get(url)).status_code == 200, url


async def test_with_api_keys_docs_stay_open_like_openapi_json():
    """The pages and assets carry no tenant's data, like /openapi.json (open with keys, see test_tenants)."""
    from specrag.serve.kbs import KnowledgeBases
    from specrag.serve.keys import ApiKeys, KeyEntry, key_hash
    from specrag.serve.tenancy import Tenants

    keys = ApiKeys([KeyEntry(tenant="acme", sha256=key_hash("k-acme"))])
    async with http_client(docs_app(Tenants({"acme": KnowledgeBases([], tenant="acme", private=True)}, keys))) as client:
        assert (await client.get("/api/v1/apis")).status_code == 401  # keys are on
        for url in ["/openapi.json", *HTML_PAGES, "/docs-assets/swagger-ui-bundle.js"]:
            assert (await client.get(url)).status_code == 200, url
