"""The import structure: no cycles among the modules of pipeline/ and evals/ (lazy, function-level imports
count too), and folders that are layers, each importing only from the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

from source_tree import ROOT, module_files

ROOT_FOLDER = ROOT / "pipeline"


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules ``name`` imports, anywhere in its body (``from a import b`` is a.b when b is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return {m for m in found if m in modules and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_walker_finds_a_cycle_when_there_is_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_in_the_package():
    modules = module_files()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 40 and graph["specrag.engine.query_engine"], "the walker must see the project's modules"
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


# The package's layers, lowest first (docs/architecture.md draws them). A folder imports only from
# the layers below its own; folders that share a layer do not import each other.
LAYERS = [
    {"core"},             # records and kernels: errors, settings, ids, stage records, tokens, analysis, fusion, BM25, LLM
    {"graph"},            # the call-dependency graph inferred from operations
    {"specs"},            # loading, parsing and chunking specs
    {"context"},          # the output contract: KnowledgeContext, chunk <-> node
    {"catalog"},          # the catalog and per-API indexes
    {"index"},            # the store: local index, Chroma, builds, the workspace
    {"stages"},           # the query stages as LlamaIndex components
    {"engine"},           # the engine, plans, agentic retrieval, graph queries, rendering
    {"serve", "evals"},   # HTTP and MCP; the eval harness
    {"bench"},            # benchmarks
    {"cli"},              # the command line
]


def folder_of(module: str) -> str:
    """The top-level folder (layer unit) of a module: specrag.index.store -> index; specrag.evals.x -> evals."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__main__" else "(package)"


def layer_violations(graph: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    rank = {folder: i for i, members in enumerate(layers) for folder in members}
    found = []
    for module, targets in graph.items():
        source = folder_of(module)
        if source == "(package)":
            continue  # specrag/__init__.py exports the public names of every layer
        for target in targets:
            folder = folder_of(target)
            if folder != source and rank.get(folder, len(layers)) >= rank.get(source, -1):
                found.append(f"{module} ({source}) imports {target} ({folder})")
    return sorted(found)


def test_the_layer_check_finds_an_upward_and_a_sideways_import():
    graph = {"specrag.core.a": {"specrag.index.b"}, "specrag.serve.c": {"specrag.evals.d"},
             "specrag.index.b": {"specrag.core.a"}}
    assert layer_violations(graph, LAYERS) == ["specrag.core.a (core) imports specrag.index.b (index)",
                                               "specrag.serve.c (serve) imports specrag.evals.d (evals)"]


def test_every_folder_of_the_package_has_a_layer():
    folders = {folder_of(m) for m in module_files()} - {"(package)"}
    assert folders == set().union(*LAYERS), "place a new folder in LAYERS (and in docs/architecture.md)"


def test_folders_import_only_from_the_layers_below():
    modules = module_files()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert layer_violations(graph, LAYERS) == []


def test_the_package_root_holds_only_the_public_exports_and_python_dash_m():
    root = ROOT_FOLDER
    assert sorted(p.name for p in root.glob("*.py")) == ["__init__.py", "__main__.py"]
