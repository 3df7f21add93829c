"""Test helper: run scripts/train_policies.sh with a stand-in `jsbench` that records each command it is given
instead of training, and writes the run's manifest as a finished run of that update count would have it
(`train.iters`, a "not judged" verdict), so RESUME=1 can keep it.

`run_script` runs the script itself, with the real `jsbench` unless a stand-in comes first on PATH. Import from a
test module (`from train_policies_stand_in import script_calls`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = ('#!/usr/bin/env bash\necho "$*" >> "$JSBENCH_CALLS"\nargs=("$@")\nout="${@: -1}"\n'
            'for i in "${!args[@]}"; do [ "${args[$i]}" = --iters ] && iters="${args[$((i + 1))]}"; done\n'
            'mkdir -p "$out"\necho "{\\"train\\": {\\"iters\\": $iters}, \\"convergence\\": '
            '{\\"converged\\": null, \\"reason\\": \\"stand-in\\"}}" > "$out/manifest.json"\n')


def script_calls(tmp_path: Path, name: str, backbone: str = "analytic", **env: str) -> list[list[str]]:
    """The `jsbench` commands `bash scripts/train_policies.sh BACKBONE` runs with these environment variables
    (RESUME and ITERS only where given), each split into its words; the calls of this `name` only."""
    bin_dir = tmp_path / "stand-in-bin"
    if not (bin_dir / "jsbench").is_file():
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "jsbench").write_text(STAND_IN)
        (bin_dir / "jsbench").chmod(0o755)
    calls = tmp_path / f"calls-{name}.txt"
    done = run_script(backbone, {**env, "JSBENCH_CALLS": str(calls)}, first_on_path=bin_dir, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split() for line in calls.read_text().splitlines()] if calls.exists() else []


def run_script(backbone: str, env: dict[str, str], first_on_path: Path | None = None,
               timeout: int = 600) -> subprocess.CompletedProcess:
    """`bash scripts/train_policies.sh BACKBONE` run to its end (text output captured), with these environment
    variables over this process's (RESUME and ITERS only where given) and this interpreter's `jsbench` on PATH
    (after `first_on_path`, if given)."""
    path = [str(first_on_path)] if first_on_path else []
    full = {**os.environ, **env, "PATH": os.pathsep.join([*path, str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    for var in ("RESUME", "ITERS"):
        if var not in env:
            full.pop(var, None)
    return subprocess.run(["bash", str(ROOT / "scripts" / "train_policies.sh"), backbone], env=full,
                          capture_output=True, text=True, timeout=timeout)
