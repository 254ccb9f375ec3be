"""An operation's example request as a record: light (pydantic only), so the chunk model and the
ingest workers that build it never import LlamaIndex."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ExampleParam(BaseModel):
    name: str
    location: str
    value: str
    placeholder: bool = False


class ExampleRequest(BaseModel):
    """A ready request for one operation: placeholders in ``<...>`` and path ``{...}`` are the
    caller's to fill (credentials, ids the spec gives no example for)."""

    method: str
    url: str = Field(description="base URL + path (path parameters filled or left as {name}) + query")
    base_url: str = Field(description="the operation's preferred base URL; https://<host> when the spec has none")
    path: str = Field(description="the path with its parameters filled")
    headers: dict[str, str] = Field(default_factory=dict)
    params: list[ExampleParam] = Field(default_factory=list, description="the required parameters and their values")
    optional_params: int = Field(0, description="optional parameters left out of the example")
    media_type: str = ""
    body: Any = Field(None, description="the body sent (JSON; form fields as an object); null without one")
    curl: str
    http: str = Field(description="the raw HTTP/1.1 request")
    auth: list[str] = Field(default_factory=list, description="the accepted ways to authenticate (the first is shown)")
    auth_declared_only: list[str] = Field(default_factory=list,
                                          description="security schemes the spec declares but this operation does not apply")
    notes: list[str] = Field(default_factory=list)
    tokens: int = Field(0, description="cl100k tokens of the example as a context shows it (curl and notes)")
