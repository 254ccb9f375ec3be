"""Request ids: uuid4().hex's shape, unique in a process and across forked workers."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

from specrag.serve.request_ids import new_request_id


def test_ids_are_32_hex_digits_and_never_repeat_across_threads():
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda _: new_request_id(), range(20_000)))
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_worker_draws_its_own_prefix():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then exit without running the parent's cleanup
        os.write(write, new_request_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child_id = os.read(read, 64).decode()
    os.close(read)
    mine = new_request_id()
    assert re.fullmatch(r"[0-9a-f]{32}", child_id)
    assert child_id[:16] != mine[:16]
