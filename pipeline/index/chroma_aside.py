"""The embedded Chroma collection of a re-index, opened in a process of its own.

Opening it costs a re-index ~1.3 s at 4x, nearly all of it holding the interpreter lock:
``import chromadb`` (~0.9 s) and the first call, which loads the collection's vector index
(~0.3 s). In a thread that time is not saved (measured: the model load beside it took as long
again); in a forked child it runs on the other core while the parent loads the model, reads
the index and the changed specs, and the builder finds the collection warm.

The child is the only process that touches the store while it runs: the parent's
``ChunkStore.chroma`` is an :class:`AsideCollection` whose calls go to the child over a pipe
(arguments and results pickled: ids, vectors, ``get`` results), one at a time, in order. Only
an index that exists already (its manifest and its Chroma database) gets one: a first build
or a repair of a deleted store opens Chroma in process, as before. The child's peak memory is
reported beside the parent's (``peak_rss_mb``): the re-index uses both.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import multiprocessing
import os
import signal
import sys

from specrag.core.errors import ChromaUnavailableError, SpecragError
from specrag.core.memory import peak_rss_mb

logger = logging.getLogger(__name__)

WARM_ID = "0" * 16  # any id: the first call loads the collection's segments, whatever it asks
CLOSE_TIMEOUT_S = 60.0  # the child flushes and closes its client; then it is killed
PR_SET_PDEATHSIG = 1  # prctl(2)
CALL_TIMEOUT_S = 600.0  # one call (a batch of rows added): a child that hangs must not hang the run


class ChromaAside:
    """A child process holding the corpus's embedded Chroma collection: ``store.chroma`` of a bare
    ``ChunkStore`` (settings, no model, nothing read), opened in the child."""

    def __init__(self, store):
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(store, child, self._conn, os.getpid()),
                                        name="specrag-chroma", daemon=True)
        self._process.start()
        child.close()
        self.used = False
        self.peak_rss_mb: float | None = None

    @staticmethod
    def available() -> bool:
        """Forking is safe here: Linux (macOS frameworks and Windows have no such fork), and a
        process that has not loaded Chroma. A child forked after a client started (its Rust runtime's
        threads and locks) hangs in its first call: seen in a test process. Where Chroma is loaded
        already, its import is paid, and opening it in process costs ~0.4 s."""
        return (sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
                and "chromadb" not in sys.modules)

    def call(self, method: str, args: tuple, kwargs: dict):
        self.used = True
        try:
            self._conn.send((method, args, kwargs))
            if not self._conn.poll(CALL_TIMEOUT_S):
                self._process.kill()
                raise ChromaUnavailableError(f"the Chroma process did not answer {method}() within {CALL_TIMEOUT_S:g} s: "
                                             "stopped; run `specrag index` again")
            status, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            self._process.join(1)
            raise ChromaUnavailableError(f"the Chroma process ended during {method}() (exit code "
                                         f"{self._process.exitcode}): out of memory or a crash in Chroma") from exc
        if status == "ok":
            return value
        unavailable, text = value
        raise (ChromaUnavailableError if unavailable else ChromaCallError)(text)

    def close(self) -> None:
        """Let the child close its client and exit (after a call: its writes are flushed); one
        never called is stopped at once: it has only read, and may still be importing."""
        if self._process.pid is None or not self._process.is_alive():
            self._conn.close()
            return
        if not self.used:
            self._process.terminate()
            self._process.join(CLOSE_TIMEOUT_S)
            self._conn.close()
            return
        try:
            self._conn.send(None)
            if self._conn.poll(CLOSE_TIMEOUT_S):
                self.peak_rss_mb = self._conn.recv()
        except (EOFError, OSError):
            pass
        self._process.join(CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            logger.warning("the Chroma process did not exit within %g s: killed", CLOSE_TIMEOUT_S)
            self._process.kill()
            self._process.join()
        self._conn.close()


class ChromaCallError(SpecragError, RuntimeError):
    """A Chroma call failed in the child: its type and message, on one line."""


class AsideCollection:
    """The collection as the parent sees it: each method call runs in the child."""

    def __init__(self, aside: ChromaAside):
        self._aside = aside

    def __getattr__(self, method: str):
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self._aside.call(method, args, kwargs)


def _serve(store, conn, parents_end, parent: int) -> None:
    """The child: open the collection, warm it, answer calls until told to close. It must not
    outlive its parent: it holds the index lock's file, inherited, like every forked process."""
    parents_end.close()  # so the parent's end of the pipe closes when the parent dies: EOF here
    _die_with(parent)
    gc.freeze()  # as the spec workers: what the parent made is never collected (finalized) here
    collection, failure = None, None
    try:
        collection = store.chroma
        collection.get(ids=[WARM_ID], include=[])
    except Exception as exc:  # noqa: BLE001 - answered to every call: the parent raises it where it asks
        failure = _failure(exc)
    try:
        while (message := conn.recv()) is not None:
            method, args, kwargs = message
            if failure is not None:
                conn.send(("error", failure))
                continue
            try:
                conn.send(("ok", store.chroma_call(lambda: getattr(collection, method)(*args, **kwargs))))
            except Exception as exc:  # noqa: BLE001 - Chroma raises ValueError, Rust errors alike
                conn.send(("error", _failure(exc)))
        store.close_chroma()
        conn.send(peak_rss_mb())
    except (EOFError, OSError, KeyboardInterrupt):  # the parent is gone or interrupted: close what is open
        store.close_chroma()
    finally:
        conn.close()
        os._exit(0)  # no exit handlers of the parent's (they would run its atexit work twice)


def _die_with(parent: int) -> None:
    """Linux: killed when the parent dies (a ``kill -9`` of the run), as Chroma in the parent would be."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the call
        os._exit(1)


def _failure(exc: BaseException) -> tuple[bool, str]:
    """(unavailable, one line): ours as they read, Chroma's with their type."""
    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, ChromaUnavailableError):
        return True, text
    return False, f"{type(exc).__name__}: {text}"
