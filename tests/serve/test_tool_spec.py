"""SpecragToolSpec: the MCP server's tools as LlamaIndex tools, driven by a real ``FunctionAgent``
whose LLM follows a script of tool calls, over the demo knowledge base."""

from __future__ import annotations

import json
import re

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from specrag.core.errors import SpecragError
from specrag.core.tokens import count_tokens

QUESTION = "How do I add a new pet to the store?"
WEB_IMPORT = re.compile(r"^\s*(?:from|import)\s+(fastapi|starlette|uvicorn|mcp|mcp_types)\b", re.MULTILINE)
# what the scripted model asks for, one reply per turn; the last reply quotes the last tool answer
SCRIPT = [("list_apis", {}), ("search", {"question": "add a new pet", "top_k": 3}),
          ("get_operation", {"api": "petstore_v2", "operation": "addPet"})]


@pytest.fixture(scope="module")
def spec(demo_kbs):
    from specrag import SpecragToolSpec

    return SpecragToolSpec(demo_kbs)


class ScriptedModel:
    """The replies of a function-calling model that follows ``SCRIPT``: the tool call of the turn,
    then an answer made of the first line of the last tool answer it was given (so the answer
    exists only if the tool's output reached the model)."""

    def __init__(self):
        self.offered: list[list[str]] = []  # the tool names offered on each turn

    def __call__(self, messages: list[ChatMessage], **kwargs) -> ChatMessage:
        self.offered.append([t.metadata.name for t in kwargs.get("tools") or []])
        turn = sum(m.role == MessageRole.TOOL for m in messages)
        if turn < len(SCRIPT):
            name, args = SCRIPT[turn]
            return ChatMessage(role=MessageRole.ASSISTANT,
                               blocks=[ToolCallBlock(tool_call_id=f"call-{turn}", tool_name=name, tool_kwargs=args)])
        heading = messages[-1].content.splitlines()[0].lstrip("# ")
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Call {heading}.")


@pytest.mark.anyio
async def test_a_function_agent_finds_the_operation_through_the_tools(spec, tmp_path):
    model = ScriptedModel()
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=MockFunctionCallingLLM(response_generator=model),
                          system_prompt="Answer with the API call to make.")
    handler = agent.run(user_msg=QUESTION)
    calls = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    final = str((await handler).response.content)

    transcript = [f"user: {QUESTION}"]
    for ev in calls:
        transcript += [f"\n--- tool call: {ev.tool_name}({json.dumps(ev.tool_kwargs)})",
                       f"--- answer ({count_tokens(str(ev.tool_output))} tokens):", str(ev.tool_output)]
    transcript.append(f"\nassistant: {final}")
    (tmp_path / "agent_transcript.md").write_text("\n".join(transcript) + "\n", encoding="utf-8")

    assert [(ev.tool_name, ev.tool_kwargs) for ev in calls] == SCRIPT
    assert not any(ev.tool_output.is_error for ev in calls)
    assert model.offered[0] == spec.spec_functions  # every tool, on every turn
    apis, search, operation = (str(ev.tool_output) for ev in calls)
    assert "- `petstore_v2` — Pet Store" in apis and "- `users_api` — Users API" in apis
    assert search.splitlines()[4].startswith("1. `POST /pets` in `petstore_v2` · operationId `addPet`")
    assert operation.startswith("# POST /pets (operationId `addPet`) · API `petstore_v2`")
    assert "Schemas it references (`get_schema` reads them): `Pet`" in operation and "```yaml" in operation
    assert final == "Call POST /pets (operationId `addPet`) · API `petstore_v2`."


def test_the_tools_an_agent_is_given(spec):
    tools = {t.metadata.name: t for t in spec.to_tool_list()}
    assert list(tools) == ["list_apis", "search", "get_operation", "get_schema", "plan", "get_context"]
    for name, tool in tools.items():
        params = tool.metadata.get_parameters_dict()["properties"]
        assert all(p.get("description") for p in params.values()), (name, params)  # from the docstrings
        assert ("token_budget" in params) is (name != "search"), name
    assert tools["get_operation"].metadata.get_parameters_dict()["required"] == ["api", "operation"]


@pytest.mark.needs_embeddings  # the plan's first step is the vector ranking's
@pytest.mark.parametrize("budget", [100, 400, 1500])
def test_each_context_sized_answer_holds_to_its_budget(spec, budget):
    answers = {"get_context": spec.get_context("How do I create a user?", token_budget=budget),
               "plan": spec.plan("Change the email address of a user", token_budget=budget),
               "get_operation": spec.get_operation("users_api", "updateUser", token_budget=budget),
               "get_schema": spec.get_schema("users_api", "User", token_budget=budget),
               "list_apis": spec.list_apis(token_budget=budget)}
    for name, text in answers.items():
        assert 0 < count_tokens(text) <= budget, (name, budget)
    assert answers["get_context"].startswith("# Context for: How do I create a user?")
    assert "`users_api:paths/~1users/post`" in answers["get_context"]  # the first operation is kept whole
    assert answers["plan"].startswith("# Plan for: Change the email address of a user\n\n1. GET /users")


@pytest.mark.needs_embeddings  # the plan binds userId to the list the vector ranking puts first
def test_the_answers_name_what_the_next_call_takes(spec):
    ranked = spec.list_apis(question="add a pet to the store")
    assert ranked.startswith("# APIs for: add a pet to the store") and "`petstore_v2`" in ranked
    narrowed = spec.search("update a user", apis=["users_api"], top_k=2)
    assert "1. `PUT /users/{userId}` in `users_api` · operationId `updateUser`" in narrowed
    assert "petstore_v2" not in narrowed
    schema = spec.get_schema("users_api", "User")
    assert schema.startswith("# schema `User` · API `users_api`") and "`Address`" in schema
    whole = spec.plan("Change the email address of a user")
    assert "userId (path) <- step 1: GET /users -> users[].id -> {userId}" in whole
    assert "## Step 2: PUT /users/{userId}" in whole and "```yaml" in whole


@pytest.mark.parametrize("call, message", [
    (lambda s: s.get_schema("users_api", "Nope"), "API 'users_api' has no schema 'Nope'; it has e.g. Address"),
    (lambda s: s.get_operation("users_ap", "createUser"), "unknown API id 'users_ap' (did you mean users_api?)"),
    (lambda s: s.get_context("create a user", token_budget=5), "token_budget must be a whole number of tokens from 100"),
    (lambda s: s.get_context("create a user", apis=["nope"]), "unknown API id(s): 'nope'"),
    (lambda s: s.search("   "), "the question must be a non-empty string"),
    (lambda s: s.search("pets", top_k=0), "top_k must be a whole number from 1 to 100"),
    (lambda s: s.plan(["not", "text"]), "the question must be a non-empty string"),
])
def test_a_bad_call_is_a_one_line_error_the_model_can_act_on(spec, call, message):
    with pytest.raises(SpecragError) as caught:
        call(spec)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_tool_spec_does_not_import_the_http_or_mcp_stack():
    """No module the tool spec reaches (lazy imports too) imports a web or MCP package."""
    from source_tree import module_files
    from test_imports import imports_of

    modules, seen, todo, found = module_files(), set(), ["specrag.serve.tool_spec"], {}
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += imports_of(name, modules[name], modules)
            found[name] = WEB_IMPORT.findall(modules[name].read_text(encoding="utf-8"))
    assert "specrag.serve.answers" in seen and "specrag.engine.query_engine" in seen
    assert WEB_IMPORT.findall(modules["specrag.serve.mcp_server"].read_text(encoding="utf-8"))  # it sees one
    assert {name: web for name, web in found.items() if web} == {}
