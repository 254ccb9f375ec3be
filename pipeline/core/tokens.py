"""Token counts, always cl100k (tiktoken), read from the BPE file llama-index-core ships.

Not ``llama_index.core.utils.get_tokenizer()``: that is a process-wide global a user may set to
another tokenizer, which would silently change every budget here. The encoding is loaded once,
from the bundled file, so nothing is downloaded (and without importing ``llama_index.core``,
which only holds the file here: importing it costs ~2 s).

Texts are encoded as ordinary text (``encode_ordinary``): a special-token string such as
``<|endoftext|>`` counts as the characters it is made of, as ``encode(disallowed_special=())``
counts it, without that method's search for special tokens.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from functools import lru_cache
from pathlib import Path

from specrag.core import caches

ENCODING = "cl100k_base"
_load_lock = threading.Lock()


@caches.register
@lru_cache(maxsize=1)
def _encoding():
    import tiktoken

    package = importlib.util.find_spec("llama_index.core")
    if package is None or not package.submodule_search_locations:
        raise ImportError("llama-index-core, which bundles the cl100k tokenizer file, is not installed")
    bundled = Path(next(iter(package.submodule_search_locations))).resolve() / "_static" / "tiktoken_cache"
    with _load_lock:  # tiktoken reads its cache folder from the environment: point it there briefly
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled) if previous is None else previous
        try:
            return tiktoken.get_encoding(ENCODING)
        finally:
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]


def count_tokens(text: str) -> int:
    """cl100k tokens of ``text`` (special-token strings count as text, never raise)."""
    return len(_encoding().encode_ordinary(text or ""))


def truncate_tokens(text: str, limit: int | None) -> tuple[str, int, bool]:
    """(text cut to at most ``limit`` cl100k tokens, its token count, whether it was cut)."""
    tokens = _encoding().encode_ordinary(text or "")
    if limit is None or len(tokens) <= limit:
        return text, len(tokens), False
    return _encoding().decode(tokens[:limit]), limit, True


# Where cl100k's pre-tokenizer always cuts: after a newline whose next line holds a character that
# is not whitespace. Its pattern ends every piece holding a newline at the last newline of that
# run (``\s*[\r\n]+`` and `` ?[^\s\p{L}\p{N}]+[\r\n]*``; the other alternatives hold none),
# no alternative looks behind, and a lookahead never reaches past a newline into such a line. So
# the text's count is the sum of its segments' counts. Python's ``\s`` takes a few characters
# more than the Rust pattern's (never fewer): that only cuts less often, never wrongly.
_SEGMENT_END = re.compile(r"\n(?=[^\S\r\n]*\S)")


class SegmentTokenCounter:
    """``count_tokens`` for many texts that share lines (rendered specs: ``type: string``,
    ``in: query``, the same description in many operations): each distinct segment is encoded
    once. The same counts, exactly (``tests/test_tokens.py`` checks mutated real texts); ingest
    keeps one per worker process. Bounded: past ``max_segments`` the memory starts again, and a
    segment longer than ``max_chars`` (rarely repeated) is counted without being kept."""

    def __init__(self, max_segments: int = 200_000, max_chars: int = 1_000):
        self.max_segments, self.max_chars = max_segments, max_chars
        self._counts: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        counts, encode = self._counts, _encoding().encode_ordinary
        if len(counts) > self.max_segments:
            counts.clear()
        total, start, longest = 0, 0, self.max_chars
        for end in [cut.end() for cut in _SEGMENT_END.finditer(text)] + [len(text)]:
            segment = text[start:end]
            start = end
            n = counts.get(segment)
            if n is None:
                n = len(encode(segment))
                if len(segment) <= longest:
                    counts[segment] = n
            total += n
        return total

    def __len__(self) -> int:
        return len(self._counts)

    def clear(self) -> None:
        self._counts.clear()
