"""File I/O shared by the library and the scripts: atomic writes and the prompt-file reader.

Every file jsbench writes goes through `replacing` (directly or via `write_text_atomic` /
`write_json_atomic`): the content is written to a sibling temporary file, flushed to disk, then renamed
over the target, so a reader (or a run killed part-way) sees the old file or the new one, never half.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from jsbench import JsbenchError

__all__ = ["replacing", "write_text_atomic", "write_json_atomic", "append_lines", "read_prompt_lines"]


def _fsync(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


@contextmanager
def replacing(path: str | os.PathLike, tmp_suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path next to `path` (its name + `tmp_suffix`) to write to; on success it is
    fsynced and renamed over `path`, on an exception it is removed and `path` is left as it was. The
    folder is created. A suffix such as ".tmp.png" keeps the format a writer infers from the name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + tmp_suffix)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` atomically (the folder is created)."""
    with replacing(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def write_json_atomic(path: str | os.PathLike, data) -> None:
    """Write `data` as indented, key-sorted JSON with a final newline, atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def append_lines(path: str | os.PathLike, lines: list[str]) -> None:
    """Append whole lines with one O_APPEND write + fsync: concurrent writers never interleave them."""
    data = "".join(lines).encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def utf8_lines(raw: bytes, path: str | os.PathLike, error: type[JsbenchError] = JsbenchError) -> Iterator[tuple[int, str]]:
    """(line number, text) of a text file's bytes: UTF-8 (a BOM allowed on line 1), CRLF line ends fine.
    A line that is not UTF-8 raises `error` with one line naming the file, the line and the byte."""
    for lineno, line in enumerate(raw.splitlines(), 1):
        try:
            yield lineno, line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{path}:{lineno}: not UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1}); save the file as UTF-8") from None


def read_prompt_lines(path: str | os.PathLike, error: type[JsbenchError] = JsbenchError) -> list[tuple[int, str]]:
    """(line number, text) of a prompt file: UTF-8, one prompt a line, a BOM and CRLF line ends allowed,
    a final newline fine. A missing file, bad encoding, an empty (or blank) line or an empty file raises
    `error` with one line naming the file and the line; what a prompt must be is the caller's rule."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise error(f"cannot read prompts file {str(path)!r}: not found") from None
    except OSError as err:
        raise error(f"cannot read prompts file {str(path)!r}: {err.strerror or err}") from None
    lines: list[tuple[int, str]] = []
    for lineno, text in utf8_lines(raw, path, error):
        if not text.strip():
            raise error(f"{path}:{lineno}: empty line; give one prompt per line, with no blank lines")
        lines.append((lineno, text))
    if not lines:
        raise error(f"prompts file {str(path)!r} is empty; give one prompt per line")
    return lines
