"""``SpecragToolSpec``: specrag's lookups as LlamaIndex tools, for an agent (``FunctionAgent``,
``ReActAgent``, or any that takes ``to_tool_list()``).

The tools are the MCP server's, in process and without its HTTP or MCP stack: each calls the same
function of :mod:`specrag.serve.answers` over the same knowledge bases, and returns its markdown,
held to a token budget where the answer is context-sized. An error (an unknown API, a schema the
API does not have, a budget out of range) is raised as a one-line ``SpecragError``; an agent hands
its text to the model as the tool's output, so the model can correct the call.
"""

from __future__ import annotations

from pathlib import Path

from llama_index.core.tools.tool_spec.base import BaseToolSpec
from specrag.core.errors import SpecragError
from specrag.core.settings import Settings
from specrag.serve import answers
from specrag.serve.budget import check_budget
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases

MAX_QUESTION_CHARS = 20_000
MAX_TOP_K = 100


class ToolInputError(SpecragError, ValueError):
    """An argument a model passed that the tool cannot use."""


class SpecragToolSpec(BaseToolSpec):
    """Tools over one served knowledge base: ``list_apis``, ``search``, ``get_operation``,
    ``get_schema``, ``plan`` and ``get_context``.

    ``SpecragToolSpec(kbs)`` takes knowledge bases already open (``KnowledgeBases`` or one
    ``KnowledgeBase``); ``kb_id`` picks one when several are served. ``token_budget`` is the budget of
    a call that names none (default: the knowledge base's ``context_token_limit``).
    :meth:`from_corpus` indexes a folder of specs and opens it.
    """

    spec_functions = ["list_apis", "search", "get_operation", "get_schema", "plan", "get_context"]

    def __init__(self, kbs: KnowledgeBases | KnowledgeBase, kb_id: str | None = None,
                 token_budget: int | None = None):
        self.kbs = kbs if isinstance(kbs, KnowledgeBases) else KnowledgeBases([kbs])
        self.kb_id = kb_id
        self.token_budget = None if token_budget is None else check_budget(token_budget)

    @classmethod
    def from_corpus(cls, paths: list[str | Path], settings: Settings | None = None, **kwargs) -> "SpecragToolSpec":
        """Index the spec files or folders ``paths`` (incrementally, into ``settings.data_dir``) and
        serve them; ``close()`` lets the index go."""
        settings = settings or Settings()
        return cls(KnowledgeBases.open(settings, [[Path(p) for p in paths]]), **kwargs)

    def close(self) -> None:
        self.kbs.close()

    # ---- the tools: each docstring is what the model reads --------------------------------
    def list_apis(self, question: str | None = None, token_budget: int | None = None) -> str:
        """List the APIs this tool answers about: each API's id, name and what it is for (markdown).
        Pass the API id as `api` to get_operation / get_schema, or in `apis` to search / get_context.

        Args:
            question (str): optional; only the APIs most likely to answer it, best first.
            token_budget (int): optional; the most tokens the answer may hold (100-100000).
        """
        kb = self._kb()
        if question is None:
            return answers.list_apis(kb, self._budget(token_budget)).markdown
        return answers.search_apis(kb, _question(question)).markdown

    def search(self, question: str, apis: list[str] | None = None, top_k: int = 10) -> str:
        """Find the API operations that answer a question, best first: method, path, operationId,
        summary (markdown, without their definitions; get_operation reads one).

        Args:
            question (str): what the caller wants to do, e.g. 'create a user'.
            apis (list[str]): optional; search only these API ids (from list_apis).
            top_k (int): how many operations to list (1-100, default 10).
        """
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ToolInputError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, not {top_k!r}")
        return answers.search_operations(self.kbs, _question(question), self.kb_id, _apis(apis), top_k).markdown

    def get_operation(self, api: str, operation: str, token_budget: int | None = None) -> str:
        """Read one operation in full: parameters, request body, responses, base URL, auth, its error
        responses, and the names of the schemas it references (markdown, the definition as YAML).

        Args:
            api (str): the API id, e.g. 'users_api'.
            operation (str): the operationId (e.g. 'createUser') or 'METHOD /path' (e.g. 'POST /users').
            token_budget (int): optional; the most tokens the answer may hold (100-100000).
        """
        api = _text("api", api)
        return answers.get_operation(self.kbs.with_api(api, self.kb_id), api, _text("operation", operation),
                                     self._budget(token_budget)).markdown

    def get_schema(self, api: str, name: str, token_budget: int | None = None) -> str:
        """Read one schema (a component such as a request or response body) by name, with the names of
        the schemas it references (markdown, the definition as YAML).

        Args:
            api (str): the API id, e.g. 'users_api'.
            name (str): the schema's name, e.g. 'User' (get_operation lists the ones an operation uses).
            token_budget (int): optional; the most tokens the answer may hold (100-100000).
        """
        api = _text("api", api)
        return answers.get_schema(self.kbs.with_api(api, self.kb_id), api, _text("name", name),
                                  self._budget(token_budget)).markdown

    def plan(self, task: str, token_budget: int | None = None) -> str:
        """Plan the API calls a task needs, in call order: for each call why it is there and where each
        of its parameters comes from (an earlier call's response field, or the task), then each
        call's definition and schemas (markdown).

        Args:
            task (str): what the caller wants done, e.g. 'change the email address of a user'.
            token_budget (int): optional; the most tokens the answer may hold (100-100000).
        """
        return answers.plan(self._kb(), _question(task), self._budget(token_budget)).markdown

    def get_context(self, question: str, apis: list[str] | None = None, token_budget: int | None = None) -> str:
        """Everything needed to make the call that answers a question, in one answer: the best operation
        in full with every schema, parameter, error response and security scheme it references, and
        the signatures of the next best operations (markdown). What the budget left out is named.

        Args:
            question (str): what the caller wants to do, e.g. 'How do I create a user?'.
            apis (list[str]): optional; search only these API ids (from list_apis).
            token_budget (int): optional; the most tokens the answer may hold (100-100000).
        """
        return answers.get_context(self._kb(), _question(question), _apis(apis), self._budget(token_budget)).markdown

    # ---- helpers ------------------------------------------------------------------------------
    def _kb(self) -> KnowledgeBase:
        return self.kbs.default(self.kb_id)

    def _budget(self, token_budget: int | None) -> int | None:
        return self.token_budget if token_budget is None else check_budget(token_budget)


def _text(name: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{name} must be a non-empty string, not {value!r}"[:200])
    return value.strip()


def _question(value) -> str:
    value = _text("the question", value)
    if len(value) > MAX_QUESTION_CHARS:
        raise ToolInputError(f"the question is {len(value)} characters long: at most {MAX_QUESTION_CHARS}")
    return value


def _apis(apis) -> list[str] | None:
    if apis is None or apis == []:
        return None
    if not isinstance(apis, list) or not all(isinstance(a, str) and a for a in apis):
        raise ToolInputError(f"apis must be a list of API ids, not {apis!r}"[:200])
    return apis
