"""specrag evals: query sets, metrics, the runner, reports and run comparison."""

from specrag.evals.compare import compare_runs
from specrag.evals.querysets import EvalQuery, GoldEndpoint, QuerySetError, load_query_sets
from specrag.evals.report import EvalRun, QueryResult, load_run
from specrag.evals.runner import ChunkLookup, ContextSource, EvalMode, EvalSetting, run_eval, write_run

__all__ = [
    "ChunkLookup",
    "ContextSource",
    "EvalMode",
    "EvalQuery",
    "EvalRun",
    "EvalSetting",
    "GoldEndpoint",
    "QueryResult",
    "QuerySetError",
    "compare_runs",
    "load_query_sets",
    "load_run",
    "run_eval",
    "write_run",
]
