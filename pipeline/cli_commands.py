"""Subcommands beyond ingest: index, query, eval (and eval compare), bench."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from pipeline.cli import command, format_ingest_report
from pipeline.errors import SpecragError
from pipeline.settings import Settings


def add_parsers(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("index", help="ingest + embed + store a corpus (incremental)")
    p.add_argument("paths", nargs="+", type=Path)
    common(p)

    p = sub.add_parser("query", help="answer a question with a KnowledgeContext")
    p.add_argument("question")
    p.add_argument("--corpus", nargs="+", type=Path, help="spec files/folders (indexed first, incrementally); "
                   "default: the last indexed corpus")
    p.add_argument("--apis", help="comma-separated API ids: skip stage 1 and search only these")
    p.add_argument("--prompts", dest="prompts_dir", type=Path, help="folder of prompt files (LLM mode)")
    common(p)

    p = sub.add_parser("eval", help="run labeled query sets (or: eval compare RUN_A RUN_B)")
    p.add_argument("sets", nargs="+", help="SET.jsonl files, or: compare RUN_A RUN_B")
    p.add_argument("--corpus", nargs="+", type=Path, help="spec files/folders to search (indexed once, reused)")
    p.add_argument("--mode", choices=["offline", "llm"], default="offline")
    p.add_argument("--setting", choices=["fleet", "oracle"], default="fleet")
    p.add_argument("--prompts", dest="prompts_dir", type=Path, help="folder of prompt files (LLM mode)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default runs/<timestamp>)")
    common(p)

    from pipeline.bench import add_bench_parser, cmd_bench

    add_bench_parser(sub, common)
    command("bench")(cmd_bench)


def _offline(settings: Settings) -> Settings:
    return settings.model_copy(update={"openai_api_key": None, "llm_base_url": None})


@command("index")
def cmd_index(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.workspace import update_index

    local, run = update_index(settings, args.paths, progress=not args.json)
    if args.json:
        print(run.model_dump_json())
        return 0
    idx = run.index
    print(format_ingest_report(run.ingest))
    print(f"index {local.data_dir}: {len(idx['apis_added'])} added, {len(idx['apis_updated'])} updated, "
          f"{len(idx['apis_unchanged'])} unchanged, {len(idx['apis_removed'])} removed, "
          f"{len(idx['apis_repaired'])} repaired; {idx['chunks_embedded']} chunks embedded "
          f"({idx['chunks_per_s']:.0f}/s), search mode {idx['search_mode']}, {run.seconds:.1f} s")
    return 0


def _engine(args: argparse.Namespace, settings: Settings, corpus: list[Path] | None):
    from pipeline.factory import build_engine
    from pipeline.workspace import corpus_settings, update_index

    if corpus:
        local, _ = update_index(settings, corpus, progress=not getattr(args, "json", False))
    else:
        local = corpus_settings(settings)
    if not local.llm_configured and not getattr(args, "json", False):
        print("offline mode: no OPENAI_API_KEY / SPECRAG_LLM_BASE_URL; stages 1-2 use keyword methods",
              file=sys.stderr)
    return local, build_engine(local)


@command("query")
def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.render import render_markdown

    _, engine = _engine(args, settings, args.corpus)
    apis = [a.strip() for a in args.apis.split(",") if a.strip()] if args.apis else None
    if apis is None and engine.llm is not None and engine.settings.synthesize and not args.json:
        print(engine.query(args.question).response)
        return 0
    ctx = engine.retrieve_context(args.question, apis=apis)
    print(ctx.to_json() if args.json else render_markdown(ctx))
    return 0


@command("eval")
def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    if args.sets[0] == "compare":
        from evals.compare import compare_runs

        if len(args.sets) != 3:
            raise SpecragError("usage: specrag eval compare RUN_A RUN_B")
        print(compare_runs(Path(args.sets[1]), Path(args.sets[2])))
        return 0
    from datetime import datetime, timezone

    from evals.querysets import load_query_sets
    from evals.runner import run_eval, write_run

    if not args.corpus:
        raise SpecragError("specrag eval needs --corpus PATH... (the specs the sets ask about)")
    if args.mode == "offline":
        settings = _offline(settings)
    elif not settings.llm_configured:
        raise SpecragError("--mode llm needs OPENAI_API_KEY or SPECRAG_LLM_BASE_URL (an OpenAI-compatible server)")
    queries = load_query_sets([Path(s) for s in args.sets])
    local, engine = _engine(args, settings, args.corpus)
    run = run_eval(queries, engine, engine.references.lookup,
                   mode=args.mode, setting=args.setting, progress=not args.json,
                   run_info={"corpus": [str(p) for p in args.corpus], "sets": args.sets, "settings": local,
                             "prompts_dir": str(local.prompts_dir)})
    out = args.out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    write_run(run, out)
    if args.json:
        print(json.dumps(run.metrics.model_dump(mode="json")))
    else:
        print((out / "report.md").read_text())
        print(f"written: {out / 'report.md'}, {out / 'results.json'}")
    return 0
