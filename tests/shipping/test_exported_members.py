"""The public API of ``import specrag`` (httpx's habit): ``__all__`` is sorted, every name in it
resolves, and a name that is not public is an AttributeError, not a silent None."""

import subprocess
import sys

import pytest
import specrag


def test_all_is_sorted_and_every_name_resolves():
    names = [n for n in specrag.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in specrag.__all__:
        assert getattr(specrag, name) is not None, name
    assert {"Settings", "build_engine", "update_index", "KnowledgeContext", "ApiQueryEngine",
            "HybridRetriever", "ReferenceExpander", "SpecQuery"} <= set(specrag.__all__)


def test_exported_names_are_the_defining_modules_objects():
    from specrag.core.settings import Settings
    from specrag.engine.query_engine import ApiQueryEngine

    assert specrag.ApiQueryEngine is ApiQueryEngine and specrag.Settings is Settings
    assert set(specrag.__all__) <= set(dir(specrag))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        specrag.nothing_here  # noqa: B018


def test_importing_the_package_loads_no_engine():
    """``import specrag`` stays light: the CLI's --help and argument errors depend on it."""
    code = "import sys, specrag; print(sorted(m for m in ('llama_index.core', 'chromadb', 'onnxruntime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
