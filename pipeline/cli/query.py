"""``specrag query``."""

from __future__ import annotations

import argparse
from pathlib import Path

from specrag.cli.common import add_common, open_engine
from specrag.cli.output import print_json, text_argument
from specrag.core.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="answer a question with a KnowledgeContext")
    p.add_argument("question")
    p.add_argument("--corpus", nargs="+", type=Path, help="spec files/folders (indexed first, incrementally); "
                   "default: the last indexed corpus")
    p.add_argument("--apis", help="comma-separated API ids: skip stage 1 and search only these")
    p.add_argument("--prompts", dest="prompts_dir", type=Path, help="folder of prompt files (LLM mode)")
    add_common(p)
    p.set_defaults(handler=query)


def query(args: argparse.Namespace, settings: Settings) -> int:
    from specrag.engine.markdown import render_markdown

    question = text_argument(args.question)
    _, engine = open_engine(args, settings, args.corpus)
    apis = [a.strip() for a in text_argument(args.apis).split(",") if a.strip()] if args.apis else None
    if apis is None and engine.synthesizer is not None and engine.settings.llm.synthesize and not args.json:
        print(engine.query(question).response)
        return 0
    ctx = engine.retrieve_context(question, apis=apis)
    if args.json:
        print_json(ctx, indent=2)
    else:
        print(render_markdown(ctx))
    return 0
