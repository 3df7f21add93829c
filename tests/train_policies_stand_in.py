"""Test helper: run scripts/train_policies.sh with a stand-in `jsbench` that records each command it is given
instead of training, and writes the run's manifest as a finished run of that update count would have it
(`train.iters`, a "not judged" verdict), so RESUME=1 can keep it.

Import from a test module (`from train_policies_stand_in import script_calls`)."""

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
    full = {**os.environ, **env, "JSBENCH_CALLS": str(calls),
            "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for var in ("RESUME", "ITERS"):
        if var not in env:
            full.pop(var, None)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "train_policies.sh"), backbone], env=full,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split() for line in calls.read_text().splitlines()] if calls.exists() else []
