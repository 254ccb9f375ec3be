"""The re-index half of ``specrag bench``: one incremental ``update_index`` in a child process, so
its peak RSS is its own (the parent built the whole index before) and its wall time includes
starting Python and importing everything, as a ``specrag index`` run does.

Reads a :class:`ReindexRequest` as JSON on stdin, prints one :class:`ReindexResult` as JSON on the
last line of stdout.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

from pydantic import BaseModel, Field
from specrag.core.memory import peak_rss_mb
from specrag.core.settings import Settings
from specrag.index.workspace import update_index


class ReindexRequest(BaseModel):
    settings: dict = Field(description="Settings fields (by name), as given to update_index")
    paths: list[str]


class ReindexResult(BaseModel):
    update_seconds: float = Field(description="update_index alone (ingest, catalogs, build)")
    peak_rss_mb: float = Field(description="this process's peak RSS plus that of the process that held Chroma for "
                                           "it, when there was one (both ran at once: their sum bounds the run's)")
    chroma_rss_mb: float | None = Field(None, description="the Chroma process's peak RSS (included above)")
    specs_parsed: int | None = Field(None, description="specs read and chunked again (None: not reported)")
    apis_updated: list[str] = Field(default_factory=list)
    chunks_embedded: int = 0


def reindex(request: ReindexRequest) -> ReindexResult:
    started = time.perf_counter()
    _, run = update_index(Settings(**request.settings), [Path(p) for p in request.paths], progress=False)
    seconds = time.perf_counter() - started
    parsed = getattr(run, "specs_parsed", None)
    chroma = run.index.get("chroma_rss_mb")
    return ReindexResult(update_seconds=round(seconds, 2), peak_rss_mb=round(peak_rss_mb() + (chroma or 0.0), 1),
                         chroma_rss_mb=chroma,
                         specs_parsed=len(parsed) if isinstance(parsed, list) else parsed,
                         apis_updated=run.index.get("apis_updated", []) + run.index.get("apis_added", []),
                         chunks_embedded=run.index.get("chunks_embedded", 0))


def main() -> int:
    result = reindex(ReindexRequest.model_validate_json(sys.stdin.read()))
    sys.stdout.write("\n" + result.model_dump_json() + "\n")
    sys.stdout.flush()
    gc.freeze()  # and exits as `specrag index` does (specrag.cli.console): no exit collections over the index's objects
    return 0


if __name__ == "__main__":
    sys.exit(main())
