"""The library configures no logging: a host application that imports it, indexes and queries
keeps its root logger as it was and sees no bm25s debug lines (bm25s sets DEBUG on itself and
attaches a root handler through ``logging.info`` unless neutralised, see ``specrag.core.quiet``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_SPECS = ROOT / "examples" / "specs"


def test_library_import_leaves_the_host_logging_alone(tmp_path):
    """As a library (no CLI): no handler on the root logger after indexing and querying, nothing
    on stderr, and bm25s's logger back at NOTSET (it sets DEBUG on itself)."""
    script = f"""
import logging, sys
from pathlib import Path
from specrag.core.settings import Settings
from specrag.index.workspace import update_index
from specrag.engine.factory import build_engine
settings, _ = update_index(Settings(data_dir=Path({str(tmp_path / 'lib')!r}), embed_model="none"),
                           [Path({str(DEMO_SPECS)!r})], progress=False)
build_engine(settings).retrieve_context("How do I create a user?")
build_engine(settings).retrieve_context("list pets")
print(len(logging.getLogger().handlers), logging.getLogger("bm25s").level)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=os.environ | {"PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "0"]
    assert proc.stderr == "", proc.stderr


def test_bm25s_module_level_logging_goes_to_its_own_logger(caplog):
    import bm25s.utils.corpus as corpus
    import specrag  # noqa: F401  (installs the hook, whether bm25s was imported before or not)

    root_handlers = list(logging.getLogger().handlers)
    with caplog.at_level(logging.INFO, logger="bm25s"):
        corpus.logging.info("from bm25s")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("bm25s.utils.corpus", "from bm25s")]
    assert logging.getLogger().handlers == root_handlers
    assert logging.getLogger("bm25s").level == logging.NOTSET
