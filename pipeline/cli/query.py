"""``specrag query``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.cli.common import add_common, number_of, open_engine
from specrag.cli.corpus import corpus_input
from specrag.cli.output import print_json, text_argument
from specrag.core.errors import SpecragError

if TYPE_CHECKING:
    from specrag.core.settings import Settings

# one range per flag: --token-budget is the token_budget of plan, POST /api/v1/context and the MCP tools
TOKEN_BUDGET = number_of("specrag.core.api_models:AgenticRetrievalRequest", "token_budget")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="answer a question with a KnowledgeContext")
    p.add_argument("question")
    p.add_argument("--corpus", nargs="+", type=corpus_input, help="spec files/folders (indexed first, incrementally); "
                   "default: the last indexed corpus")
    p.add_argument("--apis", help="comma-separated API ids: skip stage 1 and search only these")
    p.add_argument("--token-budget", dest="token_budget", type=TOKEN_BUDGET,
                   help="cl100k tokens the context may hold (default: CONTEXT_TOKEN_LIMIT, 4000)")
    p.add_argument("--top-k", dest="top_k", type=number_of("specrag.core.settings:RetrievalSettings", "max_primary_results"),
                   help="ranked operations the context covers: the first in full with what it references, the "
                        "others as signatures (sets RETRIEVAL_MAX_PRIMARY_RESULTS and CONTEXT_SIGNATURE_DEPTH; "
                        "default: those, 5 and 10)")
    p.add_argument("--prompts", dest="prompts_dir", type=Path, help="folder of prompt files (LLM mode)")
    add_common(p)
    p.set_defaults(handler=query)


def engine_overrides(token_budget: int | None, top_k: int | None) -> dict:
    """The settings the flags stand for: the context's budget (as the HTTP and MCP context
    endpoints' token_budget), and how deep into the ranking the context reads."""
    update: dict = {}
    if token_budget is not None:
        update["context_token_limit"] = token_budget
    if top_k is not None:
        update["max_primary_results"] = update["context_signature_depth"] = top_k
    return update


def question_argument(value: str) -> str:
    """The question as text, refused before any work when it is empty."""
    question = text_argument(value)
    if not question.strip():
        raise SpecragError("empty query: ask a question, e.g. 'How do I create a user?'")
    return question


def api_list(value: str | None) -> list[str] | None:
    return [a.strip() for a in text_argument(value).split(",") if a.strip()] if value else None


def query(args: argparse.Namespace, settings: Settings) -> int:
    question = question_argument(args.question)
    apis = api_list(args.apis)
    # lazy: keeps the engine's renderer and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.engine.markdown import render_markdown

    _, engine = open_engine(args, settings, args.corpus, **engine_overrides(args.token_budget, args.top_k))
    if apis is None and engine.synthesizer is not None and engine.settings.llm.synthesize and not args.json:
        print(engine.query(question).response)
        return 0
    ctx = engine.retrieve_context(question, apis=apis)
    if args.json:
        print_json(ctx, indent=2)
    else:
        print(render_markdown(ctx))
    return 0
