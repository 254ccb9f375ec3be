"""An example request per operation: the call a developer copies, as curl and as raw HTTP.

Ingest, which holds the resolved spec (every file of a multi-file spec), stores a small recipe per
operation (:class:`RequestRecipe`): the required path, query, header and cookie parameters with
the spec's example values (else typed placeholders: ``{petId}`` in the path, ``<integer>``
elsewhere), the request body as a minimal valid skeleton of its schema
(:mod:`specrag.specs.skeleton`: OpenAPI 3 ``requestBody``, preferring JSON; Swagger 2 ``in: body``
and ``formData``), and the security the operation applies (its first accepted requirement) beside
the schemes the spec declares that it does not apply. Rendering (:func:`render_example`) turns a
recipe, the operation's base URL and method into the curl command and the raw HTTP request at
read time, so the index stores the recipe once, not two texts. Everything is bounded: parameters,
body values, string lengths and the texts rendered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, Field
from specrag.core.example_models import ExampleParam, ExampleRequest
from specrag.specs import servers
from specrag.specs.skeleton import CUT, Resolve, Skeleton, plain

MAX_PARAMS = 20  # required parameters shown
MAX_PARAMS_READ = 1000  # parameters read per operation (path item and operation each)
MAX_VALUE_CHARS = 200
MAX_REF_HOPS = 8
MAX_BODY_CHARS = 6000  # a rendered body longer than this is cut (the recipe says so)
MAX_FORM_FIELDS = 40
_SKIPPED_HEADERS = {"accept", "content-type", "authorization"}  # OpenAPI: described elsewhere, ignored as parameters
_JSON_HINTS = ("json",)
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")
BINARY = "<binary>"


class RecipeParam(BaseModel):
    name: str
    location: str = Field(description="path, query, header or cookie")
    value: str = Field(description="the spec's example, default or first enum value, else a placeholder")
    placeholder: bool = Field(False, description="value is a placeholder to replace ({name}, <integer>)")


class RecipeAuth(BaseModel):
    scheme: str = Field(description="the security scheme's name in the spec")
    type: str = Field("", description="apiKey, http, basic, oauth2, openIdConnect, mutualTLS")
    location: str = Field("", description="an API key's place: header, query or cookie")
    name: str = Field("", description="an API key's header, query or cookie name")
    http_scheme: str = Field("", description="an http scheme's kind: bearer, basic, digest ...")
    scopes: list[str] = Field(default_factory=list)


class RequestRecipe(BaseModel):
    """What ingest stores per operation to render its example request (metadata ``request``)."""

    params: list[RecipeParam] = Field(default_factory=list, description="required parameters, spec order")
    optional_params: int = Field(0, description="optional parameters left out")
    media_type: str = Field("", description="the body's media type; '' when the operation takes no body")
    body: Any = Field(None, description="the body: a minimal valid skeleton of its schema (form fields as an object)")
    auth: list[RecipeAuth] = Field(default_factory=list, description="the schemes of the first accepted requirement")
    auth_alternatives: int = Field(0, description="other accepted requirements")
    public: bool = Field(False, description="the operation opts out of security (security: [])")
    declared_only: list[str] = Field(default_factory=list, description="schemes declared but not applied here")
    notes: list[str] = Field(default_factory=list, description="what the skeleton could not satisfy or cut")


# ---- ingest: the recipe -------------------------------------------------------------------------
def source_resolver(resolve: Callable[[str, Path], Any]) -> Resolve:
    """A skeleton resolver over ``SpecSource.resolve`` (a Resolved has ``value``, ``file``, ``tokens``)."""
    def follow(ref: str, base: Any):
        target = resolve(ref, base)
        if not hasattr(target, "value"):
            return None
        return target.value, target.file, (target.file, target.tokens)
    return follow


def build_recipe(doc: dict, op: dict, shared: list, op_base: Any, item_base: Any, entry: Any,
                 resolve: Resolve) -> RequestRecipe:
    """The recipe of operation ``op`` (``shared``: its path item's parameters, written in
    ``item_base``; ``op`` in ``op_base``; document-level values in ``entry``)."""
    skeleton = Skeleton(resolve)
    recipe = RequestRecipe()
    params = _parameters(shared, item_base, op.get("parameters"), op_base, resolve)
    form: list[tuple[dict, Any]] = []
    unshown = 0
    for param, base in params:
        where = str(param.get("in", ""))
        if where == "body":
            schema = param.get("schema")
            recipe.media_type = _pick_media(_consumes(doc, op)) or "application/json"
            recipe.body = _body_value(skeleton, schema, base, recipe.media_type)
        elif where == "formData":
            form.append((param, base))
        elif where in ("path", "query", "header", "cookie"):
            if where == "header" and str(param.get("name", "")).lower() in _SKIPPED_HEADERS:
                continue
            if where != "path" and param.get("required") is not True:
                recipe.optional_params += 1
                continue
            if len(recipe.params) >= MAX_PARAMS:
                unshown += 1
                continue
            value, placeholder = _param_value(param, base, skeleton, resolve)
            recipe.params.append(RecipeParam(name=_short(str(param["name"])), location=where, value=value,
                                             placeholder=placeholder))
    if form and not recipe.media_type:
        recipe.media_type, recipe.body = _form_body(doc, op, form, skeleton)
    request_body, body_base = _deref(op.get("requestBody"), op_base, resolve)
    if isinstance(request_body, dict) and not recipe.media_type:
        content = request_body.get("content") if isinstance(request_body.get("content"), dict) else {}
        media = _pick_media([str(k) for k in content])
        if media:
            spec = content.get(media) if isinstance(content.get(media), dict) else {}
            recipe.media_type = media
            if "schema" in spec:
                recipe.body = _body_value(skeleton, spec.get("schema"), body_base, media)
            elif "example" in spec:
                recipe.body = plain(spec["example"])
    _auth(recipe, doc, op, entry, resolve)
    recipe.declared_only = servers.declared_only(doc, op)
    recipe.notes = skeleton.notes + ([f"{unshown} more required parameters not shown"] if unshown else [])
    return recipe


def _parameters(shared: Any, item_base: Any, own: Any, op_base: Any, resolve: Resolve) -> list[tuple[dict, Any]]:
    """Path-item parameters then the operation's, resolved; the operation's override by (name, in)."""
    found: dict[tuple[str, str], tuple[dict, Any]] = {}
    for group, base in ((shared, item_base), (own, op_base)):
        for param in group[:MAX_PARAMS_READ] if isinstance(group, list) else []:
            param, where = _deref(param, base, resolve)
            if isinstance(param, dict) and isinstance(param.get("name"), (str, int)) and isinstance(param.get("in"), str):
                key = (str(param["name"]), param["in"])
                found.pop(key, None)
                found[key] = (param, where)
    return list(found.values())


def _deref(value: Any, base: Any, resolve: Resolve) -> tuple[Any, Any]:
    for _ in range(MAX_REF_HOPS):
        if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
            break
        target = resolve(value["$ref"], base)
        if target is None:
            return None, base
        value, base, _ = target
    return value, base


def _param_value(param: dict, base: Any, skeleton: Skeleton, resolve: Resolve) -> tuple[str, bool]:
    candidates = [param[k] for k in ("example", "x-example") if k in param]
    examples = param.get("examples")
    if isinstance(examples, dict):
        for example in list(examples.values())[:3]:
            example, _ = _deref(example, base, resolve)
            if isinstance(example, dict) and "value" in example:
                candidates.append(example["value"])
    schema = param.get("schema") if isinstance(param.get("schema"), dict) else param
    known = skeleton.known(schema, base)
    candidates += [] if known is CUT else [known]
    for candidate in candidates:
        text = _text(plain(candidate))
        if text:
            return text, False
    if param.get("in") == "path":
        return "{" + _short(str(param["name"])) + "}", True
    facts = skeleton.facts(schema, base)
    kind = facts.format or next((t for t in facts.types or [] if t != "null"), "") or "value"
    return f"<{_short(kind)}>", True


def _text(value: Any) -> str:
    """A parameter value as it goes in a URL or header ('' when it has no text form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return _short(str(value))
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float, bool)) for v in value[:10]):
        return _short(",".join(_text(v) for v in value[:10]))
    if isinstance(value, dict) and value:
        try:
            return _short(json.dumps(value, separators=(",", ":"), default=str))
        except (TypeError, ValueError, RecursionError):
            return ""
    return ""


def _consumes(doc: dict, op: dict) -> list[str]:
    found = op.get("consumes") if isinstance(op.get("consumes"), list) else doc.get("consumes")
    return [str(m) for m in found] if isinstance(found, list) else []


def _pick_media(types: list[str]) -> str:
    """JSON first, then forms, then whatever the spec lists first."""
    plain_types = [(t, t.split(";")[0].strip().lower()) for t in types[:50]]
    for wanted in (lambda m: m == "application/json", lambda m: any(h in m for h in _JSON_HINTS),
                   lambda m: m == _FORMS[0], lambda m: m == _FORMS[1]):
        for given, media in plain_types:
            if wanted(media):
                return _short(given)
    return _short(plain_types[0][0]) if plain_types else ""


def _body_value(skeleton: Skeleton, schema: Any, base: Any, media: str) -> Any:
    if not isinstance(schema, dict) or _kind_of(media) == "binary":
        return None
    return skeleton.value(schema, base, top=True)


def _form_body(doc: dict, op: dict, fields: list[tuple[dict, Any]], skeleton: Skeleton) -> tuple[str, dict]:
    """Swagger 2 ``formData``: the required fields (or the first few when none is), as an object."""
    consumes = [m for m in _consumes(doc, op) if m.split(";")[0].strip().lower() in _FORMS]
    has_file = any(p.get("type") == "file" for p, _ in fields)
    media = "multipart/form-data" if has_file else (consumes[0] if consumes else _FORMS[0])
    chosen = [(p, b) for p, b in fields if p.get("required") is True] or fields[:3]
    body: dict = {}
    for param, base in chosen[:MAX_FORM_FIELDS]:
        body[_short(str(param["name"]))] = BINARY if param.get("type") == "file" else skeleton.value(param, base, top=False)
    return _short(media), body


def _auth(recipe: RequestRecipe, doc: dict, op: dict, entry: Any, resolve: Resolve) -> None:
    security = op.get("security") if "security" in op else doc.get("security")
    if not isinstance(security, list):
        return
    requirements = [r for r in security if isinstance(r, dict)]
    if not [r for r in requirements if r]:
        recipe.public = True
        return
    first = next(r for r in requirements if r)
    recipe.auth_alternatives = len([r for r in requirements if r]) - 1
    schemes = servers.security_schemes(doc)
    for name, scopes in list(first.items())[:4]:
        scheme, _ = _deref(schemes.get(str(name)), entry, resolve)
        scheme = scheme if isinstance(scheme, dict) else {}
        recipe.auth.append(RecipeAuth(
            scheme=_short(str(name)), type=_short(str(scheme.get("type", ""))), location=_short(str(scheme.get("in", ""))),
            name=_short(str(scheme.get("name", ""))), http_scheme=_short(str(scheme.get("scheme", ""))),
            scopes=[_short(str(s)) for s in scopes[:5]] if isinstance(scopes, list) else []))


def _short(text: str) -> str:
    text = " ".join(text.split()) if "\n" in text or "\r" in text else text
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


# ---- read time: curl and raw HTTP ---------------------------------------------------------------
def render_example(method: str, path: str, base_urls: list[str], auth_lines: list[str], recipe: RequestRecipe,
                   count_tokens: Callable[[str], int] | None = None) -> ExampleRequest:
    """The example request of an operation from its stored recipe."""
    method = method.upper()
    base = _base_url(base_urls[0] if base_urls else "")
    filled = path
    query: list[tuple[str, str, bool]] = []
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for p in recipe.params:
        if p.location == "path":
            filled = filled.replace("{" + p.name + "}", p.value if p.placeholder else quote(p.value, safe=""))
        elif p.location == "query":
            query.append((p.name, p.value, p.placeholder))
        elif p.location == "header":
            headers[p.name] = p.value
        elif p.location == "cookie":
            cookies.append(f"{p.name}={p.value}")
    credentials, curl_auth = _credentials(recipe.auth, headers, query, cookies)
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    kind = _kind_of(recipe.media_type) if recipe.media_type else ""
    if kind:
        headers["Content-Type"] = _content_type(recipe.media_type, kind)
    url = base + filled + ("?" + "&".join(_pair(n, v, ph) for n, v, ph in query) if query else "")
    curl = _curl(method, url, headers, curl_auth, kind, recipe.body)
    http = _http(method, url, headers, credentials, kind, recipe.body)
    notes = list(recipe.notes)
    if kind in ("json", "text") and recipe.body is not None and len(_pretty(recipe.body, 0)) > MAX_BODY_CHARS:
        notes.append(f"the body is cut at {MAX_BODY_CHARS} characters in curl and http (body holds it whole)")
    if recipe.auth_alternatives:
        notes.append(f"{recipe.auth_alternatives} other way(s) to authenticate: see auth")
    if not base_urls:
        notes.append("the spec names no server: replace <host>")
    example = ExampleRequest(method=method, url=url, base_url=base, path=filled, headers=headers,
                             params=[ExampleParam(**p.model_dump()) for p in recipe.params],
                             optional_params=recipe.optional_params, media_type=recipe.media_type,
                             body=recipe.body, curl=curl, http=http, auth=list(auth_lines),
                             auth_declared_only=list(recipe.declared_only), notes=notes)
    if count_tokens is not None:
        example.tokens = count_tokens(example_text(example))
    return example


def example_text(example: ExampleRequest) -> str:
    """What a context shows of an example: the curl command, then its notes."""
    lines = [example.curl]
    if example.optional_params:
        lines.append(f"# +{example.optional_params} optional parameter(s) not shown")
    lines += [f"# note: {note}" for note in example.notes]
    return "\n".join(lines)


def example_from_fields(method: str, path: str, base_urls: Any, auth: Any, request: Any,
                        count_tokens: Callable[[str], int] | None = None) -> ExampleRequest | None:
    """The example of an operation from its stored fields (decoded metadata or a chunk's);
    None for a chunk with no recipe (an index built before recipes, a webhook, an errors chunk)."""
    if not method or not path or not isinstance(request, dict):
        return None
    try:
        recipe = RequestRecipe.model_validate(request)
    except ValueError:
        return None
    urls = [str(u) for u in base_urls if isinstance(u, str)] if isinstance(base_urls, list) else []
    lines = [str(a) for a in auth if isinstance(a, str)] if isinstance(auth, list) else []
    return render_example(method, path, urls, lines, recipe, count_tokens)


def example_from_metadata(metadata: dict[str, Any],
                          count_tokens: Callable[[str], int] | None = None) -> ExampleRequest | None:
    """:func:`example_from_fields` of a chunk's metadata, stored (JSON text) or decoded."""
    def field(key: str) -> Any:
        value = metadata.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            try:
                return json.loads(value)
            except ValueError:
                return None
        return value
    return example_from_fields(str(metadata.get("method", "") or ""), str(metadata.get("path", "") or ""),
                               field("base_urls"), field("auth"), field("request"), count_tokens)


def _base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url or url.startswith("/"):
        return "https://<host>" + url
    return url if "://" in url else "https://" + url.lstrip("/")


def _credentials(auth: list[RecipeAuth], headers: dict[str, str], query: list, cookies: list[str]) -> tuple[dict, list[str]]:
    """Adds each scheme's credential placeholder where it goes; -> (HTTP-only headers, curl options)."""
    http_only: dict[str, str] = {}
    curl: list[str] = []
    for a in auth:
        kind, scheme = a.type.lower(), a.http_scheme.lower()
        if kind == "apikey":
            where, name = a.location.lower(), a.name or a.scheme
            if where == "query":
                query.append((name, "<api-key>", True))
            elif where == "cookie":
                cookies.append(f"{name}=<api-key>")
            else:
                headers[name] = "<api-key>"
        elif kind == "basic" or (kind == "http" and scheme == "basic"):
            http_only["Authorization"] = "Basic <base64 of username:password>"
            curl.append("-u " + _q("<username>:<password>"))
        elif kind == "http" and scheme == "bearer":
            headers["Authorization"] = "Bearer <token>"
        elif kind == "http" and scheme == "digest":
            http_only["Authorization"] = "Digest <credentials>"
            curl.append("--digest -u " + _q("<username>:<password>"))
        elif kind == "http":
            headers["Authorization"] = f"{a.http_scheme or 'Bearer'} <credentials>"
        elif kind in ("oauth2", "openidconnect"):
            headers["Authorization"] = "Bearer <access-token>"
        elif kind == "mutualtls":
            curl.append("--cert <client-cert.pem> --key <client-key.pem>")
    return http_only, curl


def _kind_of(media: str) -> str:
    m = media.split(";")[0].strip().lower()
    if m in ("*/*", "application/*") or any(h in m for h in _JSON_HINTS):
        return "json"
    if m == _FORMS[0]:
        return "form"
    if m.startswith("multipart/"):
        return "multipart"
    if m.startswith("text/") or m.endswith("xml") or m in ("application/x-yaml", "application/yaml"):
        return "text"
    return "binary"


def _content_type(media: str, kind: str) -> str:
    if kind == "json" and media.split(";")[0].strip() in ("*/*", "application/*"):
        return "application/json"
    return media


def _pair(name: str, value: str, placeholder: bool) -> str:
    return quote(name, safe="") + "=" + (value if placeholder else quote(value, safe=""))


def _q(text: str) -> str:
    """One shell word, single-quoted."""
    return "'" + text.replace("'", "'\\''") + "'"


def _json(body: Any) -> str:
    text = _pretty(body, 0)
    return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "…"


def _pretty(value: Any, indent: int, width: int = 72) -> str:
    """JSON with each value on one line when it fits ``width``, else one member per line."""
    compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(compact) + indent <= width or not isinstance(value, (dict, list)) or not value or indent > 40:
        return compact
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        members = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {_pretty(v, indent + 2, width)}"
                   for k, v in value.items()]
        return "{\n" + ",\n".join(members) + f"\n{pad}}}"
    return "[\n" + ",\n".join(f"{inner}{_pretty(v, indent + 2, width)}" for v in value) + f"\n{pad}]"


def _fields(body: Any) -> list[tuple[str, Any]]:
    if not isinstance(body, dict):
        return []
    out = []
    for name, value in list(body.items())[:MAX_FORM_FIELDS]:
        for item in (value if isinstance(value, list) else [value])[:5]:
            out.append((str(name), item))
    return out


def _field_text(value: Any) -> str:
    return value if isinstance(value, str) else _json(value) if isinstance(value, (dict, list)) else \
        "true" if value is True else "false" if value is False else "" if value is None else str(value)


def _text_body(body: Any) -> str:
    return body if isinstance(body, str) else _json(body)


def _curl(method: str, url: str, headers: dict[str, str], auth: list[str], kind: str, body: Any) -> str:
    parts = [f"curl -X {method} {_q(url)}" if method != "GET" else f"curl {_q(url)}"]
    parts += auth
    parts += [f"-H {_q(f'{name}: {value}')}" for name, value in headers.items()
              if not (kind == "multipart" and name == "Content-Type")]  # curl -F writes it, with the boundary
    if kind == "json":
        parts.append(f"-d {_q(_json(body))}")
    elif kind == "form":
        parts += [f"--data-urlencode {_q(f'{n}={_field_text(v)}')}" for n, v in _fields(body)]
    elif kind == "multipart":
        parts += [f"-F {_q(f'{n}=@<file>' if v == BINARY else f'{n}={_field_text(v)}')}" for n, v in _fields(body)]
    elif kind == "text":
        parts.append(f"--data-binary {_q(_text_body(body))}" if body is not None else "--data-binary @<file>")
    elif kind == "binary":
        parts.append("--data-binary @<file>")
    return " \\\n  ".join(parts)


def _http(method: str, url: str, headers: dict[str, str], http_only: dict[str, str], kind: str, body: Any) -> str:
    split = urlsplit(url.replace("<", "%3C").replace(">", "%3E"))
    target = url[len(f"{split.scheme}://{_unescape(split.netloc)}"):] or "/"
    lines = [f"{method} {target} HTTP/1.1", f"Host: {_unescape(split.netloc) or '<host>'}"]
    all_headers = {**http_only, **headers}
    boundary = "specrag-boundary"
    if kind == "multipart":
        all_headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    lines += [f"{name}: {value}" for name, value in all_headers.items()]
    text = ""
    if kind == "json":
        text = _json(body)
    elif kind == "form":
        text = "&".join(_pair(n, _field_text(v), False) for n, v in _fields(body))
    elif kind == "multipart":
        pieces = []
        for name, value in _fields(body):
            disposition = f'form-data; name="{name}"' + ('; filename="<file>"' if value == BINARY else "")
            pieces.append(f"--{boundary}\nContent-Disposition: {disposition}\n\n"
                          f"{'<file contents>' if value == BINARY else _field_text(value)}")
        text = "\n".join(pieces) + f"\n--{boundary}--" if pieces else ""
    elif kind == "text":
        text = _text_body(body) if body is not None else "<body>"
    elif kind == "binary":
        text = "<binary data>"
    head = "\n".join(lines) + "\n"  # shown with LF line ends; on the wire each is CRLF
    return head + "\n" + text if kind else head


def _unescape(netloc: str) -> str:
    return netloc.replace("%3C", "<").replace("%3E", ">")
