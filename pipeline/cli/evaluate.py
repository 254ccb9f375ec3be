"""``specrag eval`` and ``specrag eval compare``.

An ``--mode llm`` run in which every LLM call failed (each query got the keyword fallback's
answer) still writes its report, then warns on stderr and exits with ``EXIT_LLM_ALL_FAILED``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.cli.common import add_common, offline, open_engine
from specrag.cli.corpus import corpus_input
from specrag.cli.output import print_json, show_progress
from specrag.core.errors import SpecragError

if TYPE_CHECKING:
    from specrag.core.settings import Settings

EXIT_LLM_ALL_FAILED = 3


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="run labeled query sets (and: eval compare RUN_A RUN_B)",
                       epilog="To diff two runs: specrag eval compare RUN_A RUN_B [--json] (see its --help).")
    p.add_argument("sets", nargs="+", help="SET.jsonl files")
    p.add_argument("--corpus", nargs="+", type=corpus_input, help="spec files/folders to search (indexed once, reused)")
    p.add_argument("--mode", choices=["offline", "llm"], default="offline")
    p.add_argument("--setting", choices=["fleet", "oracle"], default="fleet")
    p.add_argument("--prompts", dest="prompts_dir", type=Path, help="folder of prompt files (LLM mode)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default runs/<timestamp>)")
    p.add_argument("--baseline", choices=["flat", "none"], default="flat",
                   help="rank every query with the flat per-operation baseline too (and, in the oracle setting, "
                        "plain BM25 within the gold APIs), and build each baseline's context through the engine's "
                        "reference expansion; default flat")
    add_common(p)
    p.set_defaults(handler=evaluate)

    c = p.add_nested("compare", description="Metric deltas from run A to run B, and the queries that got "
                     "better or worse.")
    c.add_argument("run_a", type=Path, help="the baseline: a run folder (or its results.json)")
    c.add_argument("run_b", type=Path, help="the run to compare with it")
    c.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    c.add_argument("--out", type=Path, default=None,
                   help="also write report.md and report.html (plots; the questions that moved, side by side) "
                        "into this folder")
    c.add_argument("-v", "--verbose", action="store_true")
    c.set_defaults(handler=compare)


def compare(args: argparse.Namespace, settings: Settings) -> int:
    # lazy: keeps the eval harness and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.evals.compare import compare as compare_runs
    from specrag.evals.compare import format_comparison
    from specrag.evals.html_report import write_comparison

    if args.out is not None:
        comparison = write_comparison(args.run_a, args.run_b, args.out)
    else:
        comparison = compare_runs(args.run_a, args.run_b)
    if args.json:
        print_json(comparison)
    else:
        print(format_comparison(comparison), end="")
        if args.out is not None:
            print(f"written: {args.out / 'report.md'}, {args.out / 'report.html'}")
    return 0


def evaluate(args: argparse.Namespace, settings: Settings) -> int:
    if not args.corpus:
        raise SpecragError("specrag eval needs --corpus PATH... (the specs the sets ask about)")
    if args.mode == "offline":
        settings = offline(settings)
    elif not settings.llm_configured:
        raise SpecragError("--mode llm needs OPENAI_API_KEY or SPECRAG_LLM_BASE_URL (an OpenAI-compatible server)")
    # lazy: keeps the eval harness, settings and LlamaIndex (~2.5 s) out of the CLI's parse
    from specrag.core.settings import DEFAULT_PROMPTS_PACKAGE
    from specrag.evals.querysets import load_query_sets
    from specrag.evals.runner import run_eval, write_run

    queries = load_query_sets([Path(s) for s in args.sets])
    local, engine = open_engine(args, settings, args.corpus)
    store = engine.lookup
    baselines, contexts = [], None
    if args.baseline == "flat":
        from specrag.evals.baselines import (
            ChunkFlatBaseline,
            ContextAssembler,
            FlatBaseline,
            OracleBm25Baseline,
        )

        baselines = [FlatBaseline.build(store, local.storage.data_dir / "baselines"), ChunkFlatBaseline(store)]
        baselines += [OracleBm25Baseline(store)] if args.setting == "oracle" else []
        contexts = ContextAssembler.from_engine(engine)  # each baseline's top hits through our reference expansion
    run = run_eval(queries, engine, store, baselines=baselines, contexts=contexts,
                   mode=args.mode, setting=args.setting, progress=show_progress(args),
                   run_info={"corpus": [str(p) for p in args.corpus], "sets": args.sets, "settings": local,
                             "prompts_dir": str(local.llm.prompts_dir or DEFAULT_PROMPTS_PACKAGE)})
    out = args.out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    write_run(run, out)
    if args.json:
        print_json(run.metrics)
    else:
        print((out / "report.md").read_text())
        print(f"written: {out / 'report.md'}, {out / 'report.html'}, {out / 'results.json'}")
    if args.mode == "llm" and every_llm_call_failed(run):
        print(f"specrag: warning: every LLM call of this --mode llm run failed; the results are the keyword "
              f"fallback's (reasons: {_reasons(run)})", file=sys.stderr)
        return EXIT_LLM_ALL_FAILED
    return 0


def every_llm_call_failed(run) -> bool:
    """At least one LLM call was made, and each one ended in a fallback (a cached answer was a success)."""
    # lazy: keeps the LLM client (openai, LlamaIndex: ~4 s) out of the CLI's parse
    from specrag.core.llm import CALL_FAILURE_REASONS

    calls = sum(q.llm.calls for q in run.queries)
    failed = sum(1 for q in run.queries for f in q.fallbacks if f.reason in CALL_FAILURE_REASONS)
    return calls > 0 and failed >= calls


def _reasons(run) -> str:
    counts = run.metrics.overall.fallback_counts
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"
