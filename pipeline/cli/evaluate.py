"""``specrag eval`` (and ``eval compare``)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path

from pipeline.cli.common import add_common, offline, open_engine
from pipeline.errors import SpecragError
from pipeline.settings import Settings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="run labeled query sets (or: eval compare RUN_A RUN_B)")
    p.add_argument("sets", nargs="+", help="SET.jsonl files, or: compare RUN_A RUN_B")
    p.add_argument("--corpus", nargs="+", type=Path, help="spec files/folders to search (indexed once, reused)")
    p.add_argument("--mode", choices=["offline", "llm"], default="offline")
    p.add_argument("--setting", choices=["fleet", "oracle"], default="fleet")
    p.add_argument("--prompts", dest="prompts_dir", type=Path, help="folder of prompt files (LLM mode)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default runs/<timestamp>)")
    p.add_argument("--baseline", choices=["flat", "none"], default="flat",
                   help="rank every query with the flat per-operation baseline too (and, in the oracle setting, "
                        "plain BM25 within the gold APIs); default flat")
    add_common(p)
    p.set_defaults(handler=evaluate)


def evaluate(args: argparse.Namespace, settings: Settings) -> int:
    if args.sets[0] == "compare":
        from evals.compare import compare_runs

        if len(args.sets) != 3:
            raise SpecragError("usage: specrag eval compare RUN_A RUN_B")
        print(compare_runs(Path(args.sets[1]), Path(args.sets[2])))
        return 0
    from evals.querysets import load_query_sets
    from evals.runner import run_eval, write_run

    if not args.corpus:
        raise SpecragError("specrag eval needs --corpus PATH... (the specs the sets ask about)")
    if args.mode == "offline":
        settings = offline(settings)
    elif not settings.llm_configured:
        raise SpecragError("--mode llm needs OPENAI_API_KEY or SPECRAG_LLM_BASE_URL (an OpenAI-compatible server)")
    queries = load_query_sets([Path(s) for s in args.sets])
    local, engine = open_engine(args, settings, args.corpus)
    store = engine.references.lookup
    baselines = []
    if args.baseline == "flat":
        from evals.baselines import ChunkFlatBaseline, FlatBaseline, OracleBm25Baseline

        baselines = [FlatBaseline.build(store, local.data_dir / "baselines"), ChunkFlatBaseline(store)]
        baselines += [OracleBm25Baseline(store)] if args.setting == "oracle" else []
    run = run_eval(queries, engine, store, baselines=baselines,
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
