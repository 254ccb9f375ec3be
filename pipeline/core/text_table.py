"""Plain-text tables for the reports a person reads (``specrag bench``, ``bench --scaling``,
``specrag apis``): every column as wide as its widest cell, so no value pushes the next out of
line. Standard library only: the CLI imports it before any command runs."""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def clip(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters, the last one an ellipsis when anything was cut."""
    if width is None or len(text) <= width:
        return text
    return text[: max(0, width - 1)] + ELLIPSIS


def format_table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None, *, right: Sequence[int] = (),
                 indent: int = 0, gap: int = 2, max_width: dict[int, int] | None = None) -> str:
    """The rows (and the header above them) in aligned columns. ``right``: the indexes of columns
    aligned right (numbers); ``max_width``: column index -> the most characters a cell keeps.
    Cells are ``str()``-ed, a cell's line breaks become spaces; lines carry no trailing blanks."""
    limits = max_width or {}
    table = [list(header)] if header is not None else []
    table += [list(row) for row in rows]
    cells = [[clip(" ".join(str(c).split("\n")), limits.get(i)) for i, c in enumerate(row)] for row in table]
    columns = max((len(row) for row in cells), default=0)
    widths = [max((len(row[i]) for row in cells if i < len(row)), default=0) for i in range(columns)]
    lines = []
    for row in cells:
        parts = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append((" " * indent + (" " * gap).join(parts)).rstrip())
    return "\n".join(lines)
