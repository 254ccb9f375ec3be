"""Leave-one-set-out choice of settings: run the offline eval under every configuration of a grid
(one process, one index), pick the best configuration on one labeled set and report it on the
others. A constant chosen this way is reported on data it was not chosen on, which is the only
honest figure for sets we do not see.

    python -m specrag.evals.loso GRID.json SET.jsonl... --corpus PATH... [--data-dir D] [--metric recall_at_10]

GRID.json is a list of ``{"name": ..., "settings": {field: value, ...}}``; every field is the flat
name of a :class:`specrag.core.settings.Settings` field (``api_decay``, ``fleet_weight``,
``selection_weights``...), which ``Settings.model_copy`` puts in its section.
Prints one JSON line per configuration, then the markdown LOSO table.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pydantic import BaseModel, Field
from specrag.core.settings import Settings
from specrag.engine.factory import build_engine
from specrag.evals.querysets import load_query_sets
from specrag.evals.runner import run_eval
from specrag.index.store import ChunkStore
from specrag.index.workspace import corpus_settings

METRICS = ("selection_accuracy", "recall_at_10", "all_found_at_10", "mrr", "completeness")


class GridPoint(BaseModel):
    name: str
    settings: dict = Field(default_factory=dict, description="Settings fields overridden for this point")


class PointResult(BaseModel):
    name: str
    settings: dict
    scores: dict[str, dict[str, float]] = Field(description="set -> metric -> value")


def run_grid(grid: list[GridPoint], query_paths: list[Path], base_settings, store) -> list[PointResult]:
    queries = load_query_sets(query_paths)
    results = []
    for point in grid:
        engine = build_engine(base_settings.model_copy(update=point.settings), store)
        run = run_eval(queries, engine, store, mode="offline", setting="fleet", run_info={"loso": point.name},
                       progress=False)
        scores = {name: {k: round(float(summary.scores.get(k, 0.0)), 4) for k in METRICS} for name, summary in run.rows()}
        results.append(PointResult(name=point.name, settings=point.settings, scores=scores))
        print(json.dumps(results[-1].model_dump()), flush=True)
    return results


def loso_table(results: list[PointResult], metric: str = "recall_at_10") -> str:
    """For each set: the point that is best on it, and that point's score on every other set."""
    sets = [s for s in results[0].scores if s != "overall"]
    lines = [f"| chosen on | point | {' | '.join(f'{s} {metric}' for s in sets)} |",
             "|---|---|" + "---|" * len(sets)]
    for pick in sets:
        best = max(results, key=lambda r: (r.scores[pick][metric], -results.index(r)))
        cells = [f"{best.scores[s][metric]:.3f}" + (" (chosen here)" if s == pick else " (held out)") for s in sets]
        lines.append(f"| {pick} | {best.name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specrag.evals.loso", description=__doc__.split("\n\n")[0])
    parser.add_argument("grid", type=Path)
    parser.add_argument("sets", type=Path, nargs="+")
    parser.add_argument("--corpus", type=Path, nargs="+", required=True)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--metric", default="recall_at_10", choices=METRICS)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    base = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    settings = corpus_settings(base, args.corpus)
    grid = [GridPoint.model_validate(p) for p in json.loads(args.grid.read_text())]
    store = ChunkStore.open(settings)
    try:
        results = run_grid(grid, args.sets, settings, store)
    finally:
        store.close()
    print(loso_table(results, args.metric))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
