"""Keep bm25s from changing the host application's logging; installed once by ``pipeline/__init__``.

bm25s sets DEBUG on its own logger when imported (so its debug lines reach any handler the host
has), and some of its modules log through the ``logging`` module's functions, which attach a
handler to the root logger when it has none. A post-import hook (wrapt's, so it works whoever
imports bm25s first) puts its logger back to NOTSET, inheriting the host's levels, and routes
those module-level calls to each module's own logger. The root logger is never touched.
"""

from __future__ import annotations

import logging
from types import ModuleType

import wrapt

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


wrapt.register_post_import_hook(_reset_level, "bm25s")
for _name in ROOT_CALLERS:
    wrapt.register_post_import_hook(_route, _name)
