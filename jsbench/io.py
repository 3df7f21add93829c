"""File I/O shared by the library and the scripts: atomic writes, the scripts' --write/--out result
writer (`write_result`) and the prompt-file reader.

Every file jsbench writes goes through `replacing` (directly or via `write_text_atomic` /
`write_json_atomic`): the content is written to a sibling temporary file, flushed to disk, then renamed
over the target, so a reader (or a run killed part-way) sees the old file or the new one, never half.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from jsbench import JsbenchError

__all__ = ["replacing", "write_text_atomic", "write_json_atomic", "append_lines", "read_prompt_lines", "shown_path",
           "result_target", "write_result", "check_writable_file", "check_writable_folder", "write_failure"]


def write_failure(path: str | os.PathLike, exc: OSError) -> JsbenchError:
    """The one-line refusal for a write to `path` that failed with `exc` (disk full, read-only, ...)."""
    return JsbenchError(f"cannot write {path}: {exc.strerror or exc}; nothing was written there")


def _nearest_existing(path: Path) -> Path:
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return Path(".")


def _probe_folder(target: Path, option: str, given: Path) -> None:
    """Refuse `given` (the value of `option`) unless a file can be created where the folder `target`
    (existing or to be created) would hold it: its nearest existing ancestor must be a folder we can
    create a file in, checked by creating one and removing it."""
    import tempfile

    existing = _nearest_existing(target)
    if not existing.is_dir():
        raise JsbenchError(f"{option} {given}: {existing} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".jsbench-probe-", dir=existing)
    except OSError as exc:
        raise JsbenchError(f"{option} {given}: cannot create a file in {existing} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


def check_writable_file(path: str | os.PathLike, option: str) -> Path:
    """Refuse, before any work, an output file `path` (given as `option`, e.g. "--out") that cannot be
    written: a folder, a device or other non-regular file (a write there would fail or replace it), or one
    whose folder cannot be created or written. A missing folder is fine (writers create it)."""
    path = Path(path)
    if path.is_dir():
        raise JsbenchError(f"{option} {path} is a folder; give a file path, e.g. {path / 'records.jsonl'}")
    if path.exists() and not path.is_file():
        raise JsbenchError(f"{option} {path} is not a regular file (a device or pipe); give a file path")
    if path.is_file() and not os.access(path, os.W_OK):
        raise JsbenchError(f"{option} {path}: the file is read-only")
    _probe_folder(path.parent, option, path)
    return path


def check_writable_folder(path: str | os.PathLike, option: str) -> Path:
    """Refuse, before any work, an output folder `path` (given as `option`) that is a file or that cannot be
    created or written in."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise JsbenchError(f"{option} {path} is a file, not a folder")
    _probe_folder(path, option, path)
    return path


def _fsync(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


@contextmanager
def replacing(path: str | os.PathLike, tmp_suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path next to `path` (its name + `tmp_suffix`) to write to; on success it is
    fsynced and renamed over `path`, on an exception it is removed and `path` is left as it was. The
    folder is created. A suffix such as ".tmp.png" keeps the format a writer infers from the name."""
    path = Path(path)
    tmp = path.with_name(path.name + tmp_suffix)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_failure(path, exc) from None  # disk full, read-only: one line, the old file intact
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


def shown_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """`path` as a script prints it: relative to `root` when it lies inside it, else as given."""
    path = Path(path)
    if root is not None and path.is_relative_to(root):
        return str(path.relative_to(root))
    return str(path)


def add_result_options(parser, committed: str, also: str = "") -> None:
    """A script's --write / --out pair, the options `write_result` and `result_target` take: mutually
    exclusive, and nothing is written unless one is given. `committed` names the committed file, `also`
    what is written beside it (e.g. " and the .png")."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--write", action="store_true", help=f"replace the committed {committed}{also}")
    where.add_argument("--out", type=Path, default=None, help=f"write the JSON{also} here instead")


def result_target(*, write: bool, out: str | os.PathLike | None, committed: str | os.PathLike,
                  root: str | os.PathLike | None = None, log: Callable[[str], object] = print,
                  companions: str = "") -> Path | None:
    """Where a script's result goes: `committed` with --write, `out` with --out. With neither, log one line
    naming both options (`companions`, e.g. " and its .png", names what --write also replaces) and return
    None. For a script that writes files beside the JSON (plots) before the JSON itself."""
    if write:
        return Path(committed)
    if out is not None:
        return Path(out)
    log(f"(nothing written: --write replaces {shown_path(committed, root)}{companions}, --out PATH writes elsewhere)")
    return None


def write_result(payload, *, write: bool, out: str | os.PathLike | None, committed: str | os.PathLike,
                 root: str | os.PathLike | None = None, log: Callable[[str], object] = print, indent: int | None = 1,
                 sort_keys: bool = False, newline: bool = True, also: Iterable[str | os.PathLike] = (),
                 companions: str = "") -> Path | None:
    """A script's --write / --out tail: write `payload` as JSON (`indent`, `sort_keys`, a final newline
    unless `newline` is False) atomically to `committed` with --write or to `out` with --out, and log
    "wrote PATH" (and the files in `also`, written beside it by the caller), paths relative to `root` when
    inside it. With neither option nothing is written and one line says so (see `result_target`).
    Returns the path written, or None."""
    path = result_target(write=write, out=out, committed=committed, root=root, log=log, companions=companions)
    if path is None:
        return None
    write_text_atomic(path, json.dumps(payload, indent=indent, sort_keys=sort_keys) + ("\n" if newline else ""))
    others = [shown_path(p, root) for p in also]
    log(f"wrote {shown_path(path, root)}" + (f" and {', '.join(others)}" if others else ""))
    return path


def append_lines(path: str | os.PathLike, lines: list[str]) -> None:
    """Append whole lines with one O_APPEND write + fsync: concurrent writers never interleave them. A
    write that fails part-way (disk full) is cut back to the file's old end and refused in one line."""
    data = "".join(lines).encode()
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise write_failure(path, exc) from None
    end = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        if os.path.isfile(path):
            os.ftruncate(fd, end)  # no half-written line behind the complete ones
        raise write_failure(path, exc) from None
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


def training_runs(row: str | os.PathLike) -> list[Path]:
    """The training runs of a learned row: its `seed<S>/` folders holding a manifest.json, in the order of S,
    or the folder itself when it holds one (a row trained once); none when it holds neither."""
    row = Path(row)
    if (row / "manifest.json").is_file():
        return [row]
    found = [m.parent for m in row.glob("seed*/manifest.json") if m.parent.name[4:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[4:]))
