"""Reading spec files as hostile input: regular files only, a size cap, text encodings detected.

A FIFO would block ``open`` forever and ``/dev/zero`` would be read until memory runs out, so a
file is stat'ed before it is opened, opened non-blocking, and checked again on the open handle
(the path may have changed in between). Text is UTF-8 (a BOM is allowed) or UTF-16/32 (with a
BOM, or recognised by its NUL bytes as JSON's RFC 4627 does); anything else is refused with the
offending byte's offset.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from pathlib import Path

from specrag.core.errors import SpecError

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; SpecError otherwise (never blocks)."""
    try:
        before = os.stat(path)
    except OSError as exc:
        raise SpecError(f"unreadable: {exc.strerror or exc}") from None
    _check(before, max_bytes)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise SpecError(f"unreadable: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        _check(opened, max_bytes)
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise SpecError("file replaced while being opened")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SpecError(f"larger than {max_bytes} bytes (SPECRAG_SPEC_MAX_BYTES)")
    return data


def _check(st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(f"not a regular file: {file_kind(st.st_mode)}")
    if st.st_size > max_bytes:
        raise SpecError(f"{st.st_size} bytes, larger than {max_bytes} (SPECRAG_SPEC_MAX_BYTES)")


def detect_encoding(raw: bytes) -> str:
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name
    return json.detect_encoding(raw)  # NUL-byte patterns of BOM-less UTF-16/32, else utf-8


def decode_text(raw: bytes) -> str:
    """Text of a spec file; SpecError naming the encoding and the first bad byte."""
    encoding = detect_encoding(raw)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        shown = encoding.replace("-sig", "")
        raise SpecError(f"not {shown} text: cannot decode byte 0x{raw[exc.start]:02x} at offset {exc.start}") from None
    return text[1:] if text.startswith("\ufeff") else text


def safe_text(value: str) -> str:
    """``value`` with undecodable file-name bytes (surrogate escapes) and lone surrogates shown as
    ``\\xNN`` / ``\\udNNN``, so reports always serialise as UTF-8."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def is_text(value: str) -> bool:
    return safe_text(value) is value
