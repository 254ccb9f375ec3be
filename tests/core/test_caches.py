"""Every process-wide cache is registered in ``specrag.core.caches`` and ``reset_all()`` empties it."""

from __future__ import annotations

import ast
import importlib

import pytest
from source_tree import module_files
from specrag.core import caches
from specrag.core.settings import Settings

CACHE_DECORATORS = {"lru_cache", "cache"}  # functools' (bare, called or as functools.x)



def _name(node: ast.expr) -> str:
    """``lru_cache``, ``lru_cache(maxsize=1)``, ``functools.cache`` -> the called name's last part."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def cached_definitions(tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(qualname, decorator names) of each function whose decorators include a functools cache, at
    module level or in a class (a function's inner functions are per call: not process-wide), and
    ``name = lru_cache(...)(f)`` at module level (as (name, ["<call>"]))."""
    found = []

    def visit(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [_name(d) for d in node.decorator_list]
                if CACHE_DECORATORS & set(names):
                    found.append((prefix + node.name, names))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call) \
                    and _name(node.value.func) in CACHE_DECORATORS and not prefix:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.extend((t.id, ["<call>"]) for t in targets if isinstance(t, ast.Name))

    visit(tree.body, "")
    return found


def all_cached_definitions() -> dict[str, list[str]]:
    """module.qualname -> decorator names, over the package's source."""
    return {f"{module}.{qualname}": names for module, path in module_files().items()
            for qualname, names in cached_definitions(ast.parse(path.read_text(encoding="utf-8")))}


@pytest.fixture(scope="module")
def registered():
    """The registry once every module that defines a functools cache (and the known holders of
    other caches) is imported."""
    for name in {d.rsplit(".", 1)[0] for d in all_cached_definitions()} | {
            "specrag.specs.yaml_dump", "specrag.index.embeddings", "specrag.specs.ingest", "specrag.core.fallbacks"}:
        while name:
            try:
                importlib.import_module(name)
                break
            except ModuleNotFoundError:  # a method's qualname: module.Class.method
                name = name.rpartition(".")[0]
    return {entry.name: entry for entry in caches.registered()}


def test_the_scan_finds_decorated_caches():
    tree = ast.parse("import functools\nfrom functools import cache, lru_cache\n"
                     "@lru_cache(maxsize=2)\ndef a(x): ...\n"
                     "@functools.cache\ndef b(x): ...\n"
                     "class C:\n    @lru_cache\n    def m(self): ...\n"
                     "def outer():\n    @cache\n    def per_call(): ...\n"
                     "d = lru_cache(maxsize=4)(len)\n"
                     "def plain(): ...\n")
    assert [q for q, _ in cached_definitions(tree)] == ["a", "b", "C.m", "d"]


def test_every_functools_cache_in_the_package_is_registered(registered):
    found = all_cached_definitions()
    assert len(found) >= 16, "the scan must see the package's caches"
    not_decorated = [name for name, decorators in found.items() if "register" not in decorators]
    assert not not_decorated, f"put @caches.register above these functools caches: {not_decorated}"
    unregistered = sorted(set(found) - set(registered))
    assert not unregistered, f"caches that are not in specrag.core.caches.registered(): {unregistered}"


# How to put an entry in a cache whose arguments the generic tries below do not fit.
FILL = {
    "specrag.core.versions.package_versions": lambda f: f(("specrag",)),
    "specrag.core.fallbacks.NOTICES": lambda notices: notices._told.add(("select", "test")),
    # keyed by the settings class: what its sections' flat names are
    "specrag.core.settings_sources.flat_view": lambda f: f(Settings),
    "specrag.core.settings_sources._key_index": lambda f: f(Settings),
    "specrag.core.settings.Settings.flat_fields": lambda f: f(Settings),
}
TRIES = [(), ("getMovieCredits",), ("movie_id", "[]")]


def _fill(entry: caches.Registered) -> None:
    cache = entry.cache
    if entry.name in FILL:
        FILL[entry.name](cache)
    elif isinstance(cache, dict):
        cache["key"] = "value"
    elif isinstance(cache, set):
        cache.add("value")
    else:  # a cached function, or a callable that keeps what it computed
        for args in TRIES:
            try:
                cache(*args)
            except Exception:  # noqa: BLE001 - not the arguments it takes: try the next
                continue
            if caches.size(entry):
                return


def test_reset_all_empties_every_registered_cache(registered):
    assert len(registered) >= 20
    for entry in registered.values():
        _fill(entry)
    empty = [name for name, entry in registered.items() if caches.size(entry) == 0]
    assert not empty, f"the test could not fill these (add them to FILL): {empty}"
    caches.reset_all()
    left = {name: caches.size(entry) for name, entry in registered.items() if caches.size(entry)}
    assert not left, f"reset_all() left entries in {left}"


def test_register_takes_what_has_a_clear():
    class Counter:
        def __init__(self):
            self.n = 0

        def reset(self):
            self.n = 0

    memo: dict[str, int] = {}
    counter = Counter()
    before = len(caches.registered())
    try:
        assert caches.register(memo, name="test.memo") is memo
        assert caches.register(counter, name="test.counter", clear=counter.reset) is counter
        with pytest.raises(TypeError):
            caches.register(object())
        memo["a"], counter.n = 1, 5
        caches.reset_all()
        assert memo == {} and counter.n == 0
    finally:
        del caches._registered[before:]
