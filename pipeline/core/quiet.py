"""Keep bm25s from changing the host application's logging; installed once by ``pipeline/__init__``.

bm25s sets DEBUG on its own logger when imported (so its debug lines reach any handler the host
has), and some of its modules log through the ``logging`` module's functions, which attach a
handler to the root logger when it has none. A post-import hook (so it works whoever imports
bm25s first; a module already imported is fixed at once) puts its logger back to NOTSET,
inheriting the host's levels, and routes those module-level calls to each module's own logger.
The root logger is never touched. The hook is a small meta path finder of the standard library's
import system: ``wrapt``'s would import asyncio into every ``specrag --help``.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import Callable

Hook = Callable[[ModuleType], None]

# bm25s modules that call logging.info()/logging.warning() at module level (checked for bm25s 0.3)
ROOT_CALLERS = ("bm25s", "bm25s.utils.corpus", "bm25s.utils.beir", "bm25s.utils.benchmark",
                "bm25s.numba.retrieve_utils", "bm25s.hf")
_ROUTED = ("debug", "info", "warning", "warn", "error", "exception", "critical", "log")


class ModuleLogging:
    """Stands in for the ``logging`` module inside one module: the level functions log to that
    module's own logger, everything else is the real ``logging``."""

    def __init__(self, name: str) -> None:
        logger = logging.getLogger(name)
        for attr in _ROUTED:
            setattr(self, attr, getattr(logger, "warning" if attr == "warn" else attr))

    def __getattr__(self, attr: str):
        return getattr(logging, attr)


def _route(module: ModuleType) -> None:
    if getattr(module, "logging", None) is logging:
        module.logging = ModuleLogging(module.__name__)


def _reset_level(module: ModuleType) -> None:
    logging.getLogger("bm25s").setLevel(logging.NOTSET)


class _HookedLoader:
    """The module's own loader, then the hooks on the executed module."""

    def __init__(self, loader, hooks: list[Hook]):
        self.loader, self.hooks = loader, hooks

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        for hook in self.hooks:
            hook(module)

    def __getattr__(self, name: str):  # get_source, get_resource_reader, ...: the real loader's
        return getattr(self.loader, name)


class _PostImportFinder:
    """A meta path finder that finds nothing itself: a hooked module's spec comes from the other
    finders, its loader wrapped (no ``importlib.abc`` base: importing it costs more than the rest)."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}

    def find_spec(self, name, path=None, target=None):
        if name not in self.hooks:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HookedLoader(spec.loader, self.hooks[name])
                return spec
        return None


def register_post_import_hook(hook: Hook, name: str) -> None:
    """Run ``hook`` on module ``name`` once it is imported (now, when it already is)."""
    _FINDER.hooks.setdefault(name, []).append(hook)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    if (module := sys.modules.get(name)) is not None:
        hook(module)


_FINDER = _PostImportFinder()
register_post_import_hook(_reset_level, "bm25s")
for _name in ROOT_CALLERS:
    register_post_import_hook(_route, _name)
