"""Where the project's files are, and guards that keep a command from destroying them.

The project root is found the way git finds a repository: walk up from the working directory to
the first folder that holds `policies/` or `leaderboards/`; if none does, fall back to the source
checkout the package was installed from (an editable install), if it has them. So `jsbench compare`
run from any folder finds the shipped policies and the committed leaderboards; `--policies` and
`--leaderboards` override. A command that writes (compare without --check) never writes into the
installed checkout: outside a project it writes ./leaderboards.

`output_lock(folder)` is an exclusive advisory lock (flock) on `folder/.jsbench.lock`: a second
command writing the same folder refuses with one line instead of interleaving its files. The kernel
drops the lock when the holder exits, however it exits, so a killed run never leaves a stale lock.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from jsbench import JsbenchError

MARKERS = ("policies", "leaderboards")
LOCK_NAME = ".jsbench.lock"
POLICY_FILES = ("manifest.json", "policy.safetensors")


def _is_root(folder: Path) -> bool:
    return any((folder / m).is_dir() for m in MARKERS)


def find_root(start: str | Path | None = None, installed: bool = True) -> Path | None:
    """The nearest folder at or above `start` (default: cwd) holding policies/ or leaderboards/, else
    (with `installed`) the source checkout next to the installed package if it holds them, else None."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if _is_root(folder):
            return folder
    if not installed:
        return None
    checkout = Path(__file__).resolve().parents[1]  # <checkout>/jsbench/workspace.py
    if (checkout / "pyproject.toml").is_file() and _is_root(checkout):
        return checkout
    return None


def project_dir(name: str, start: str | Path | None = None, installed: bool = True) -> Path:
    """`<root>/<name>` of the project root, or `./<name>` when there is no root. `installed=False` for a
    folder a command writes: outside a project that is ./<name>, never the installed checkout's."""
    root = find_root(start, installed)
    return (root / name) if root is not None else Path(name)


def holds_policy(folder: str | Path) -> bool:
    folder = Path(folder)
    return any((folder / f).exists() for f in POLICY_FILES)


def refuse_existing_policy(folder: str | Path, overwrite: bool) -> None:
    """Refuse to train into a folder that already holds a policy, unless told to overwrite it."""
    if not overwrite and holds_policy(folder):
        raise JsbenchError(
            f"{folder} already holds a policy; choose another --out (e.g. runs/...) or pass --overwrite to replace it"
        )


def refuse_to_replace(folder: str | Path, resume: bool, overwrite: bool) -> None:
    """`train`'s rule for an --out folder that holds something: a policy or a run (its checkpoint) is kept
    unless --resume continues the run or --overwrite replaces it. Checked before the folder is locked (a
    refused folder is left exactly as it was) and again once no other run can write it."""
    if resume:
        return
    refuse_existing_policy(folder, overwrite)
    if (Path(folder) / "checkpoint.pt").exists() and not overwrite:
        raise JsbenchError(f"{folder} already holds a run; pass --resume to continue it, --overwrite to replace it, or choose another --out")


@contextlib.contextmanager
def output_lock(folder: str | Path, what: str = "run"):
    """Hold an exclusive lock on `folder` for the block; refuse at once if another process holds it."""
    import fcntl

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise JsbenchError(f"{folder} is a file, not a folder; choose another --out")
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise JsbenchError(f"{folder} is in use by another {what} (pid {holder}); wait for it or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            if created and [p.name for p in folder.iterdir()] == [LOCK_NAME]:
                path.unlink()  # a refused or failed first run leaves no empty folder behind
                folder.rmdir()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


RUN_FILES = ("checkpoint.pt", "train_log.jsonl", *POLICY_FILES)


def clear_run(folder: str | Path) -> None:
    """Remove a previous run's checkpoint, log and policy from `folder` (train --overwrite)."""
    for name in RUN_FILES:
        (Path(folder) / name).unlink(missing_ok=True)


def display_path(path: str | Path) -> str:
    """`path` as a user can pass it back: relative to the current folder when it lies below it, else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def resume_command(argv: list[str], has_checkpoint: bool) -> str:
    """The command that continues an interrupted `jsbench train` run given as `argv` (its arguments after
    `jsbench`): with a checkpoint, the same options with --resume in place of --overwrite; without one,
    the same command again (nothing was saved: the run starts over, its stale log dropped)."""
    import shlex

    args = [a for a in argv if a not in ("--overwrite", "--resume", "--no-resume")]
    if has_checkpoint:
        args.append("--resume")
    return shlex.join(["jsbench", *args])
