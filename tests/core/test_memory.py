"""A process tree's peak memory (``TreeMemory``): every descendant counts, and pages that forked
processes share count once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from specrag.core.memory import TreeMemory, tree_pss_kb

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="summed Pss needs Linux's /proc")

# A parent that holds 120 MB, forks a child that writes 60 MB of its own beside the shared 120,
# and both wait until the child is done: together ~180 MB, not the 300 their RSS sum says.
TREE = textwrap.dedent("""
    import os, time
    held = bytearray(120 * 2**20)
    for i in range(0, len(held), 4096): held[i] = 1
    pid = os.fork()
    if pid == 0:
        own = bytearray(60 * 2**20)
        for i in range(0, len(own), 4096): own[i] = 1
        time.sleep(0.6)
        os._exit(0)
    os.waitpid(pid, 0)
""")


@linux
def test_a_forked_child_counts_with_its_own_pages_and_shares_its_parents_once():
    proc = subprocess.Popen([sys.executable, "-c", TREE])
    with TreeMemory(proc.pid) as memory:
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert 175 <= memory.peak_mb <= 240  # 120 shared + 60 of the child's + two interpreters, never 120 * 2 + 60


@linux
def test_a_process_with_no_children_is_its_own_pss():
    assert tree_pss_kb(os.getpid()) > 10 * 1024


def test_a_process_that_is_gone_reports_nothing():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    assert tree_pss_kb(proc.pid) is None
    with TreeMemory(proc.pid) as memory:
        pass
    assert memory.peak_mb is None
