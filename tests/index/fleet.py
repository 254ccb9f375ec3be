"""A three-API mini fleet (users, pets, weather) built by hand, with known answers."""

from __future__ import annotations

import hashlib
from pathlib import Path

from specrag.core.ids import errors_chunk_id, make_chunk_id, operation_chunk_id
from specrag.index.vector_reuse import embed_text, hash_hex, text_hash
from specrag.specs.models import ApiChunks, ApiInfo, Chunk, ChunkType, RefStats

MODEL_DIR = Path(__file__).resolve().parents[3] / "shared" / "models" / "all-MiniLM-L6-v2-onnx"  # ../shared beside the repo


def endpoint(file_id: str, method: str, path: str, summary: str, op_id: str, refs: list[str] = ()) -> Chunk:
    cid = operation_chunk_id(file_id, path, method)
    return Chunk(id=cid, file_id=file_id, type=ChunkType.ENDPOINT, kind="operation", method=method.upper(),
                 path=path, operation_id=op_id, summary=summary, name=op_id,
                 text=f"{method.upper()} {path}\nsummary: {summary}\noperationId: {op_id}",
                 embed_text=f"{method.upper()} {path}: {summary}", search_text=f"{op_id} {path} {summary}",
                 ref_ids={r: ["#/responses/200"] for r in refs})


def component(file_id: str, name: str, description: str, refs: list[str] = ()) -> Chunk:
    cid = make_chunk_id(file_id, ["components", "schemas", name])
    return Chunk(id=cid, file_id=file_id, type=ChunkType.COMPONENT, kind="schemas", name=name,
                 text=f"{name}:\n  type: object\n  description: {description}",
                 embed_text=f"schema {name}: {description}", search_text=f"{name} {description}",
                 ref_ids={r: ["#/properties/x"] for r in refs})


def errors(op: Chunk, text: str) -> Chunk:
    return Chunk(id=errors_chunk_id(op.id), file_id=op.file_id, type=ChunkType.ERRORS, kind="errors",
                 method=op.method, path=op.path, operation_id=op.operation_id, name=op.operation_id,
                 text=f"{op.method} {op.path} errors:\n{text}", embed_text=f"errors of {op.method} {op.path}: {text}",
                 search_text=f"{op.operation_id} errors {text}")


def row_ids(chunks: list[Chunk]) -> list[str]:
    """The Chroma row ids of the chunks' embed texts (one row per distinct text)."""
    return list(dict.fromkeys(hash_hex(text_hash(embed_text(c))) for c in chunks))


def api(file_id: str, chunks: list[Chunk], version: str = "1") -> ApiChunks:
    digest = hashlib.sha256("\n".join([version, *(c.text for c in chunks)]).encode()).hexdigest()
    info = ApiInfo(file_id=file_id, source=f"{file_id}.yaml", title=file_id.title(), spec_format="openapi-3.0",
                   content_hash=digest)
    return ApiChunks(api=info, chunks=chunks, refs=RefStats())


def users_api(version: str = "1") -> ApiChunks:
    user = make_chunk_id("users", ["components", "schemas", "User"])
    address = make_chunk_id("users", ["components", "schemas", "Address"])
    country = make_chunk_id("users", ["components", "schemas", "Country"])
    get_user = endpoint("users", "get", "/users/{id}", "Get a user profile by id", "getUserById", [user])
    return api("users", [
        get_user,
        endpoint("users", "post", "/users", "Create a new user account", "createUser", [user]),
        errors(get_user, "404 user not found, 401 unauthorized"),
        component("users", "User", "a registered user with name, email and postal address", [address]),
        component("users", "Address", "postal address: street, city, zip code", [country]),
        component("users", "Country", "ISO country code and country name"),
    ], version)


def pets_api(version: str = "1") -> ApiChunks:
    pet = make_chunk_id("pets", ["components", "schemas", "Pet"])
    return api("pets", [
        endpoint("pets", "get", "/pets", "List all pets in the store", "listPets", [pet]),
        endpoint("pets", "post", "/pets", "Add a pet to the store", "createPet", [pet]),
        component("pets", "Pet", "a pet: dog or cat, with name, species and owner user id"),
    ], version)


def weather_api(version: str = "1") -> ApiChunks:
    forecast = make_chunk_id("weather", ["components", "schemas", "Forecast"])
    return api("weather", [
        endpoint("weather", "get", "/forecast", "Daily weather forecast for a city", "getForecast", [forecast]),
        component("weather", "Forecast", "temperature, rain probability and wind speed per day"),
    ], version)


def mini_fleet() -> list[ApiChunks]:
    return [users_api(), pets_api(), weather_api()]


def renamed(api_chunks: ApiChunks, file_id: str) -> ApiChunks:
    """The API under another file_id: the same texts (a copy, or a version that repeats them)."""
    old = api_chunks.api.file_id
    chunks = [Chunk.model_validate_json(c.model_dump_json().replace(f'"{old}:', f'"{file_id}:')
                                        .replace(f'"file_id":"{old}"', f'"file_id":"{file_id}"'))
              for c in api_chunks.chunks]
    info = api_chunks.api.model_copy(update={"file_id": file_id, "source": f"{file_id}.yaml"})
    return ApiChunks(api=info, chunks=chunks, refs=RefStats())
