"""Where an operation is called and how it authenticates: what makes an endpoint chunk callable.

OpenAPI 3 takes the nearest ``servers`` list (operation, then path item, then the document) and
fills each URL's ``{variables}`` with their defaults. Swagger 2 builds ``scheme://host + basePath``
from the operation's or the document's ``schemes``. Security is the operation's requirement list,
or the document's when the operation has none (an empty list means "no auth"). Every value comes
from a hostile file, so lists are capped and strings shortened.
"""

from __future__ import annotations

import re
from typing import Any

MAX_URLS = 4
MAX_TEXT = 200
_VARIABLE = re.compile(r"\{([^{}]{1,64})\}")
_SCHEMES = ("https", "http", "wss", "ws")


def base_urls(doc: dict, path_item: dict, op: dict) -> list[str]:
    """The operation's base URLs, most preferred first; [] when the spec does not say."""
    urls = _swagger_urls(doc, op) if "swagger" in doc else _openapi_urls(doc, path_item, op)
    return list(dict.fromkeys(u for u in urls if u))[:MAX_URLS]


def _openapi_urls(doc: dict, path_item: dict, op: dict) -> list[str]:
    for holder in (op, path_item, doc):
        servers = holder.get("servers") if isinstance(holder, dict) else None
        if isinstance(servers, list) and servers:
            return [_server_url(s) for s in servers[: MAX_URLS * 2] if isinstance(s, dict)]
    return []


def _server_url(server: dict) -> str:
    url = server.get("url")
    if not isinstance(url, str):
        return ""
    variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}

    def fill(match: re.Match) -> str:
        spec = variables.get(match.group(1))
        default = spec.get("default") if isinstance(spec, dict) else None
        return str(default) if isinstance(default, (str, int, float)) else match.group(0)

    return _short(_VARIABLE.sub(fill, url[: MAX_TEXT * 2]).rstrip("/") or "/")


def _swagger_urls(doc: dict, op: dict) -> list[str]:
    host = doc.get("host") if isinstance(doc.get("host"), str) else ""
    base = doc.get("basePath") if isinstance(doc.get("basePath"), str) else ""
    base = "" if base.strip() == "/" else base.rstrip("/")
    if not host:
        return [_short(base)] if base else []  # relative to wherever the spec is served
    declared = op.get("schemes") if isinstance(op.get("schemes"), list) else doc.get("schemes")
    schemes = [s for s in declared if s in _SCHEMES] if isinstance(declared, list) else []
    return [_short(f"{scheme}://{host}{base}") for scheme in (schemes or ["https"])]


def auth_requirements(doc: dict, op: dict) -> list[str]:
    """One line per accepted way to authenticate ("A + B" when both are required together);
    ["none"] when the operation opts out, [] when the spec declares nothing."""
    security = op.get("security") if "security" in op else doc.get("security")
    if not isinstance(security, list):
        return []
    if not security or all(isinstance(r, dict) and not r for r in security):
        return ["none"]
    schemes = _security_schemes(doc)
    lines = []
    for requirement in security[:MAX_URLS]:
        if isinstance(requirement, dict) and requirement:
            lines.append(" + ".join(_describe(str(name), schemes.get(str(name)), scopes)
                                    for name, scopes in list(requirement.items())[:MAX_URLS]))
    return [_short(line) for line in dict.fromkeys(lines)]


def declared_only(doc: dict, op: dict) -> list[str]:
    """The security schemes the spec declares that no requirement of the operation names (an
    OAuth2 scheme declared beside the API key every operation asks for): a reader sees that the
    spec offers them, and that this call does not ask for them."""
    security = op.get("security") if "security" in op else doc.get("security")
    applied = {str(name) for req in security if isinstance(req, dict) for name in req} \
        if isinstance(security, list) else set()
    rest = [(str(name), scheme) for name, scheme in _security_schemes(doc).items() if str(name) not in applied]
    lines = [_short(_describe(name, scheme, None)) for name, scheme in rest[:MAX_URLS]]
    return lines + ([f"+{len(rest) - MAX_URLS} more"] if len(rest) > MAX_URLS else [])


def security_schemes(doc: dict) -> dict[str, Any]:
    """The spec's declared security schemes by name (Swagger 2 or OpenAPI 3)."""
    return _security_schemes(doc)


def _security_schemes(doc: dict) -> dict[str, Any]:
    if "swagger" in doc:
        found = doc.get("securityDefinitions")
    else:
        components = doc.get("components") if isinstance(doc.get("components"), dict) else {}
        found = components.get("securitySchemes")
    return found if isinstance(found, dict) else {}


def _describe(name: str, scheme: Any, scopes: Any) -> str:
    if not isinstance(scheme, dict):
        return name
    kind = str(scheme.get("type", ""))
    if kind == "apiKey":
        detail = f"API key in {scheme.get('in', '?')} '{scheme.get('name', '?')}'"
    elif kind == "http":
        detail = f"HTTP {scheme.get('scheme', '?')}"
    elif kind == "basic":
        detail = "HTTP basic"
    elif kind == "oauth2":
        wanted = [str(s) for s in scopes[:5]] if isinstance(scopes, list) else []
        detail = "OAuth2" + (f" scopes {', '.join(wanted)}" if wanted else "")
    elif kind == "openIdConnect":
        detail = "OpenID Connect"
    elif kind == "mutualTLS":
        detail = "mutual TLS"
    else:
        detail = kind or "?"
    return f"{name} ({detail})"


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
