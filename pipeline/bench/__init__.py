"""Benchmarks and dev tooling, apart from the library: ``specrag bench`` (``query``: build,
re-index, warm queries, memory and disk; ``report``, ``fleet``, and the ``reindex`` / ``serve``
child processes), ``specrag bench --scaling`` (``scaling``), ``specrag bench-serve`` (``loadtest``
and its ``hot_reindex``), and the dev snapshot of a corpus's dependency graph
(``python -m specrag.bench.graph_snapshot``). The commands are registered by ``specrag.cli``;
nothing here is imported until one runs.
"""
