"""Split a chunk whose text exceeds the token limit into parts that reference each other.

Part 1 keeps the chunk's id (so every ref still lands on it) and all its ``ref_ids``, plus links
to parts 2..N (``{id}:partN``). Cuts fall on line boundaries; a single over-long line is cut by
tokens.
"""

from __future__ import annotations

from typing import Callable

from specrag.core.ids import part_chunk_id
from specrag.specs.models import Chunk


def split_chunk(chunk: Chunk, max_tokens: int, count: Callable[[str], int]) -> list[Chunk]:
    if chunk.n_tokens <= max_tokens:
        return [chunk]
    header = chunk.text.split("\n", 1)[0]
    pieces = _pack_lines(chunk.text.split("\n"), max_tokens - count(header) - 16, count)
    total = len(pieces)
    parts = []
    for i, body in enumerate(pieces, start=1):
        text = body if i == 1 else f"{header} [part {i}/{total}]\n{body}"
        parts.append(chunk.model_copy(update={
            "id": part_chunk_id(chunk.id, i), "text": text, "n_tokens": count(text),
            "ref_ids": dict(chunk.ref_ids) if i == 1 else {},
            # model_copy is shallow: give each part its own lists, or links leak between parts
            "referenced_by": list(chunk.referenced_by), "tags": list(chunk.tags),
        } | ({} if i == 1 else {"compact_text": "", "compact_tokens": 0, "request": None})))  # part 1 speaks for the whole
    for i in range(2, total + 1):
        parts[0].ref_ids[part_chunk_id(chunk.id, i)] = [f"part{i}"]
    return parts


def _pack_lines(lines: list[str], budget: int, count: Callable[[str], int]) -> list[str]:
    budget = max(budget, 64)
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for line in lines:  # repeated lines ("type: string") cost a lookup: ingest counts with a SegmentTokenCounter
        n = count(line) + 1
        if n > budget:  # one huge line (a long description or example): cut it by characters
            step = max(budget // 4, 50)  # <= 4 tokens per character, even for emoji
            for start in range(0, len(line), step):
                pieces, current, used = _push(pieces, current, used, line[start:start + step], count(line[start:start + step]) + 1, budget)
            continue
        pieces, current, used = _push(pieces, current, used, line, n, budget)
    if current:
        pieces.append("\n".join(current))
    return pieces


def _push(pieces: list[str], current: list[str], used: int, line: str, n: int, budget: int):
    if current and used + n > budget:
        pieces.append("\n".join(current))
        current, used = [], 0
    current.append(line)
    return pieces, current, used + n
