"""A fingerprint of the dependency graph of a whole corpus, to prove a change to the graph's
code kept its output: per API, a digest of its stored graph (operations, edges, resources),
of what its operation chunks carry (params, producers, produces) and of a plan per operation.

``python -m specrag.bench.graph_snapshot CORPUS OUT.json`` writes one; ``--compare OLD.json`` also
says which APIs differ (exit 1 when any does).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from pydantic import BaseModel, Field
from specrag.engine.plan import plan_operations
from specrag.specs.ingest import ingest_paths
from specrag.specs.models import ApiChunks, ChunkType

PLANS_PER_API = 200  # operations whose plan is fingerprinted (the first ones by id)


class ApiFingerprint(BaseModel):
    edges: int
    operations: int
    graph_sha256: str
    chunks_sha256: str
    plans_sha256: str


class GraphSnapshot(BaseModel):
    apis: dict[str, ApiFingerprint] = Field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        return {"apis": len(self.apis), "edges": sum(a.edges for a in self.apis.values()),
                "operations": sum(a.operations for a in self.apis.values())}

    def differences(self, other: "GraphSnapshot") -> list[str]:
        names = sorted(set(self.apis) | set(other.apis))
        return [n for n in names if self.apis.get(n) != other.apis.get(n)]


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def fingerprint(api: ApiChunks) -> ApiFingerprint:
    graph = api.graph.model_dump(mode="json") if api.graph is not None else None
    ops = {c.id: c for c in api.chunks if c.type is ChunkType.ENDPOINT}
    carried = {cid: [[p.model_dump(mode="json") for p in c.params],
                     [e.model_dump(mode="json") for e in c.producers], c.produces] for cid, c in ops.items()}
    ranking = sorted(ops)
    plans = {cid: plan_operations([cid, *ranking[:i], *ranking[i + 1:]], ops, {})
             for i, cid in enumerate(ranking[:PLANS_PER_API])}
    return ApiFingerprint(edges=len(graph["edges"]) if graph else 0, operations=len(ops),
                          graph_sha256=_digest(graph), chunks_sha256=_digest(carried), plans_sha256=_digest(plans))


def snapshot(apis: list[ApiChunks]) -> GraphSnapshot:
    return GraphSnapshot(apis={a.api.file_id: fingerprint(a) for a in apis})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specrag.bench.graph_snapshot", description=__doc__)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, help="an earlier snapshot to compare with")
    args = parser.parse_args(argv)
    result = ingest_paths([args.corpus])
    snap = snapshot(result.apis)
    args.out.write_text(snap.model_dump_json(indent=1))
    print(f"snapshot: {snap.totals()} (specs skipped: {len(result.report.specs_skipped)})")
    if args.compare is None:
        return 0
    old = GraphSnapshot.model_validate_json(args.compare.read_bytes())
    differ = old.differences(snap)
    print(f"before: {old.totals()}; identical: {'yes' if not differ else 'no'}"
          + (f"; {len(differ)} APIs differ: {', '.join(differ[:20])}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
