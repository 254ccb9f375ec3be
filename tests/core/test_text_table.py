"""One table formatter for the reports a person reads: columns as wide as their widest cell."""

from __future__ import annotations

from specrag.core.text_table import clip, format_table


def test_columns_align_whatever_the_cell_widths():
    text = format_table([("a", "a very long value indeed", "1"), ("bb", "v", "12345")], ("name", "value", "n"),
                        right=(2,), indent=2)
    lines = text.splitlines()
    assert lines == ["  name  value                         n",
                     "  a     a very long value indeed      1",
                     "  bb    v                         12345"]
    assert len({line.index(part) for line, part in zip(lines, ("value", "a very", "v "))}) == 1


def test_cells_are_clipped_and_lines_carry_no_trailing_blanks():
    text = format_table([("x" * 10, ""), ("y", "z\nw")], max_width={0: 4})
    assert text.splitlines() == ["xxx…", "y     z w"]
    assert clip("abc", 3) == "abc" and clip("abcd", 3) == "ab…" and clip("abcd", None) == "abcd"
    assert format_table([]) == ""
