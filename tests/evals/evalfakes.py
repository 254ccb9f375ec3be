"""Boundary fakes for the eval runner (a helper module, not a conftest, so its name is unique): a dict-backed chunk lookup and an engine that answers
each query with a hand-built KnowledgeContext (or raises)."""

from __future__ import annotations

from specrag.context.knowledge import (
    ContextChunk,
    Fallback,
    KnowledgeContext,
    LLMCall,
    RetrievalStats,
)
from specrag.core.ids import (
    errors_chunk_id,
    make_chunk_id,
    operation_chunk_id,
    parse_operation_id,
    split_chunk_id,
)
from specrag.evals.querysets import EvalQuery, GoldEndpoint
from specrag.specs.models import Chunk, ChunkType


def op(api: str, method: str, path: str) -> str:
    return operation_chunk_id(api, path, method)


def schema(api: str, name: str) -> str:
    return make_chunk_id(api, ["components", "schemas", name])


def make_chunk(chunk_id: str, refs: list[str] = ()) -> Chunk:
    """A real Chunk whose type/method/path follow from its id."""
    api = split_chunk_id(chunk_id)[0]
    parsed = parse_operation_id(chunk_id)
    kind = ChunkType.ERRORS if chunk_id.endswith(":errors") else ChunkType.ENDPOINT if parsed else ChunkType.COMPONENT
    return Chunk(id=chunk_id, file_id=api, type=kind, text=chunk_id, embed_text=chunk_id, search_text=chunk_id,
                 kind="operation" if parsed else "schemas", method=parsed[2] if parsed else "",
                 path=parsed[1] if parsed else "", ref_ids={r: ["#/x"] for r in refs})


def ctx_chunk(chunk_id: str, depth: int = 0) -> ContextChunk:
    chunk = make_chunk(chunk_id)
    return ContextChunk(id=chunk_id, text=chunk.text, metadata=chunk.metadata(), n_tokens=10, depth=depth)


def make_context(query: str, primary: list[str], referenced: list[str] = (), **stats) -> KnowledgeContext:
    chunks = [ctx_chunk(c) for c in primary]
    refs = [ctx_chunk(c, depth=1) for c in referenced]
    return KnowledgeContext(query=query, primary_chunks=chunks, referenced_chunks=refs,
                            total_tokens=10 * (len(chunks) + len(refs)), retrieval_stats=RetrievalStats(**stats))


class DictLookup:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = {c.id: c for c in chunks}

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        return {i: self.chunks[i] for i in ids if i in self.chunks}


class FakeEngine:
    """Answers by query text; an Exception as the answer is raised. Records the apis it got."""

    def __init__(self, answers: dict[str, KnowledgeContext | Exception]):
        self.answers = answers
        self.calls: list[tuple[str, list[str] | None]] = []

    def retrieve_context(self, query: str, apis: list[str] | None = None) -> KnowledgeContext:
        self.calls.append((query, apis))
        answer = self.answers[query]
        if isinstance(answer, Exception):
            raise answer
        return answer


# A tiny users API: POST /users -> UserCreate -> Address -> Country; GET /users/{userId} -> User -> Address.
POST_USERS = op("users_api", "post", "/users")
GET_USER = op("users_api", "get", "/users/{userId}")
LIST_USERS = op("users_api", "get", "/users")
USER, USER_CREATE, ADDRESS, COUNTRY, ERROR = (schema("users_api", n) for n in ("User", "UserCreate", "Address", "Country", "Error"))


def users_lookup() -> DictLookup:
    return DictLookup([
        make_chunk(POST_USERS, [USER_CREATE, USER]),
        make_chunk(errors_chunk_id(POST_USERS), [ERROR]),
        make_chunk(GET_USER, [USER]),
        make_chunk(LIST_USERS, [USER]),
        make_chunk(USER, [ADDRESS]),
        make_chunk(USER_CREATE, [ADDRESS]),
        make_chunk(ADDRESS, [COUNTRY]),
        make_chunk(COUNTRY),
        make_chunk(ERROR),
    ])


def demo_queries() -> list[EvalQuery]:
    """Two sets: 'demo' (create user; a query whose engine call fails) and 'more' (get a user)."""
    post = [GoldEndpoint(api="users_api", method="post", path="/users")]
    get = [GoldEndpoint(api="users_api", method="GET", path="/users/{id}")]
    return [
        EvalQuery(id="q1", query="create user", apis=["users_api"], endpoints=post, set_name="demo"),
        EvalQuery(id="q2", query="broken", apis=["users_api"], endpoints=post, set_name="demo"),
        EvalQuery(id="q3", query="get user", apis=["users_api"], endpoints=get, set_name="more"),
    ]


def engine_a() -> FakeEngine:
    calls = [LLMCall(stage="select", model="m", prompt_name="select", prompt_hash="abc",
                     prompt_tokens=100, completion_tokens=20),
             LLMCall(stage="expand", model="m", prompt_name="expand", prompt_hash="def",
                     prompt_tokens=100, completion_tokens=20, cached=True)]
    return FakeEngine({
        "create user": make_context(
            "create user", [LIST_USERS, USER_CREATE, POST_USERS, errors_chunk_id(POST_USERS)], [USER, ADDRESS],
            selected_apis=["users_api", "petstore_v2"],
            timings_ms={"select": 2, "expand": 1, "search": 10, "refs": 3, "assemble": 1, "total": 17},
            fallbacks=[Fallback(stage="select", reason="no_llm"), Fallback(stage="expand", reason="no_llm")]),
        "broken": RuntimeError("index gone"),
        "get user": make_context(
            "get user", [GET_USER], [USER, ADDRESS, COUNTRY], selected_apis=["users_api"],
            timings_ms={"search": 20, "total": 30}, fallbacks=[Fallback(stage="expand", reason="timeout")],
            llm_calls=calls, prompts={"select": "select@abc"}),
    })


def engine_b() -> FakeEngine:
    """q1 gets better (right endpoint first, full closure); q3 gets worse (wrong endpoint only)."""
    return FakeEngine({
        "create user": make_context("create user", [POST_USERS, LIST_USERS], [USER_CREATE, USER, ADDRESS, COUNTRY],
                                    selected_apis=["users_api"], timings_ms={"total": 12}),
        "broken": RuntimeError("index gone"),
        "get user": make_context("get user", [LIST_USERS], [USER], selected_apis=["users_api"],
                                 timings_ms={"total": 9}),
    })
