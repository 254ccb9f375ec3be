"""The public names of the evals package (what the CLI and other tools import)."""

from specrag import evals


def test_exported_members():
    assert sorted(evals.__all__) == evals.__all__
    for name in evals.__all__:
        assert getattr(evals, name) is not None, name
    assert {"load_query_sets", "run_eval", "write_run", "compare_runs", "GoldEndpoint", "EvalQuery"} <= set(evals.__all__)
