"""Training and evaluation throughput of the embedded worlds, as ratios against an older commit.

Each workload runs as a `python -m jsbench` subprocess at the shipped settings with one thread
(`--threads 1`, OMP_NUM_THREADS=1), once from this checkout and once from a snapshot of the older commit
(`git archive`), alternately, `repeats` times: whatever else the machine is doing lands on both sides alike.

- Training: the median seconds of one update, read from the run's own train_log.jsonl (its `seconds`
  field times rollout + reward + update, not start-up or checkpoints), over every update of every repeat.
- Evaluation: images/s at the margin. `jsbench eval` runs at two sizes (`--limit` small and large, same
  seeds); images/s = (images_large - images_small) / (seconds_large - seconds_small), so start-up (imports,
  building the world) cancels. Start-up is reported beside it: the small run's seconds less its images at
  that rate.

The ratio is old seconds over new seconds (> 1: this checkout is faster), per repeat, then its median and
range across repeats.

- The README's main command (`measure_main`): `jsbench compare` as a new user runs it, each side with its own
  policies and at its own defaults (processes and threads included: not pinned to one), writing its
  leaderboards, records and figures into a scratch folder, never a checkout's; wall seconds and CPU seconds
  (the command and every process it waited for), and the images it sampled (its records, each learned row's
  times its training seeds), since an older commit may ship fewer rows.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path


@dataclass(frozen=True)
class World:
    """One embedded world as `train` and `eval` run it."""

    name: str
    train_args: tuple[str, ...]  # backbone, reward and suite
    eval_args: tuple[str, ...]  # suite and backbone
    iters: int  # updates per timed training run
    limits: tuple[int, int]  # --limit of the small and the large eval run
    seeds: int = 16  # images per prompt in eval (the embedded worlds' default)


# the shipped training settings (scripts/train_policies.sh): 3 steps, B = 16 contexts, K = 4 samples, js instance
SHIPPED_TRAIN = ("--steps", "3", "--baseline", "js", "--policy", "instance", "--contexts", "16", "--samples", "4",
                 "--seed", "0", "--threads", "1", "--no-progress")

WORLDS: dict[str, World] = {w.name: w for w in (
    World("analytic", ("--backbone", "analytic", "--reward", "geneval", "--suite", "geneval"),
          ("--suite", "geneval", "--backbone", "analytic"), iters=40, limits=(1, 12), seeds=256),
    World("detail", ("--backbone", "detail", "--reward", "geneval", "--suite", "geneval"),
          ("--suite", "geneval", "--backbone", "detail"), iters=40, limits=(1, 12), seeds=64),
    World("scenes-dit", ("--backbone", "scenes-dit", "--reward", "geneval", "--suite", "geneval"),
          ("--suite", "geneval", "--backbone", "scenes-dit"), iters=10, limits=(1, 4)),
    World("ocr", ("--backbone", "analytic", "--reward", "ocr", "--suite", "ocr"),
          ("--suite", "ocr", "--backbone", "analytic"), iters=8, limits=(1, 4)),
)}


@dataclass
class Side:
    """One tree being timed: this checkout or the older commit's snapshot."""

    label: str
    root: Path
    train_seconds: list[float] = field(default_factory=list)  # per update, every repeat
    eval_points: list[tuple[int, float, int, float]] = field(default_factory=list)  # per repeat: small, large

    def env(self, one_thread: bool = True) -> dict:
        """The environment a run of this tree gets: its own jsbench first on the path, one thread unless
        `one_thread` is False (then the threads of this process's environment, as a user's run gets)."""
        env = dict(os.environ, PYTHONPATH=str(self.root))
        if one_thread:
            env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env.pop("JSBENCH_PROCESSES", None)
        return env


def snapshot(commit: str, repo: Path, into: Path) -> Path:
    """The files of `commit` (git archive) in `into`/<commit>: an older jsbench to import from."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=repo, capture_output=True,
                         text=True)
    if sha.returncode != 0:
        raise ValueError(f"no commit {commit!r} in {repo}")
    tree = into / sha.stdout.strip()[:12]
    data = subprocess.run(["git", "archive", "--format=tar", sha.stdout.strip()], cwd=repo, capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def checkout_label(repo: Path, paths: tuple[str, ...] = ("jsbench",)) -> str:
    """This checkout's short commit, with "+changes" when `paths` hold uncommitted changes."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=repo, capture_output=True, text=True)
    return (head.stdout.strip() or "checkout") + ("+changes" if dirty.stdout.strip() else "")


def sides_against(base: str, repo: Path, into: Path, paths: tuple[str, ...] = ("jsbench",)) -> list[Side]:
    """[this checkout (labelled by `checkout_label`), a snapshot of `base` in `into`]; ValueError or
    CalledProcessError when `base` is no commit of `repo`."""
    return [Side(checkout_label(repo, paths), repo), Side(base, snapshot(base, repo, into))]


def _run(side: Side, args: list[str], what: str, env: dict | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jsbench", *args], cwd=side.root, env=env or side.env(),
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"{what} failed in {side.label} ({side.root}), exit {proc.returncode}: {tail[0]}")
    return seconds, proc.stdout


def time_training(side: Side, world: World, scratch: Path) -> list[float]:
    """Seconds of each update of one training run (its own log), in order."""
    out = scratch / f"train-{side.label}-{world.name}"
    shutil.rmtree(out, ignore_errors=True)
    args = ["train", *world.train_args, *SHIPPED_TRAIN, "--iters", str(world.iters), "--out", str(out)]
    _run(side, args, f"train on {world.name}")
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
    shutil.rmtree(out, ignore_errors=True)
    return [float(r["seconds"]) for r in rows]


def time_eval(side: Side, world: World, limit: int, scratch: Path) -> tuple[int, float]:
    """(images, wall seconds) of one `jsbench eval` of the default schedule, start-up included."""
    out = scratch / f"eval-{side.label}-{world.name}-{limit}.jsonl"
    out.unlink(missing_ok=True)
    args = ["eval", *world.eval_args, "--steps", "3", "--schedule", "default", "--seeds", str(world.seeds),
            "--limit", str(limit), "--no-progress", "--format", "json", "--out", str(out)]
    seconds, stdout = _run(side, args, f"eval on {world.name}")
    out.unlink(missing_ok=True)
    images = {r["task"]: r["n_images"] for r in json.loads(stdout)}  # one record per task and metric
    return images.pop("overall", None) or sum(images.values()), seconds  # "overall" counts every task's images


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def measure(worlds: list[World], sides: list[Side], repeats: int, *, train: bool = True, evaluate: bool = True,
            log=print) -> dict:
    """Time every world's training and evaluation on every side, alternating sides within each repeat
    (the order flips from one repeat to the next), and return the figures and their ratios."""
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="jsbench-throughput-") as tmp:
        scratch = Path(tmp)
        for world in worlds:
            per_side_train = {s.label: [] for s in sides}  # per repeat: median s/update
            per_side_eval = {s.label: [] for s in sides}  # per repeat: (images/s, start-up s)
            for r in range(repeats):
                for side in (sides if r % 2 == 0 else sides[::-1]):
                    if train:
                        seconds = time_training(side, world, scratch)
                        per_side_train[side.label].append(statistics.median(seconds))
                        log(f"  {world.name:10s} train  {side.label:8s} repeat {r + 1}: "
                            f"{statistics.median(seconds):.4f} s/update (median of {len(seconds)})")
                    if evaluate:
                        (n0, t0), (n1, t1) = (time_eval(side, world, lim, scratch) for lim in world.limits)
                        if t1 <= t0:
                            raise RuntimeError(f"eval on {world.name} in {side.label}: the larger run was not slower "
                                               f"({t0:.1f} s vs {t1:.1f} s), its margin is lost in start-up noise")
                        rate = (n1 - n0) / (t1 - t0)
                        per_side_eval[side.label].append((rate, t0 - n0 / rate))
                        log(f"  {world.name:10s} eval   {side.label:8s} repeat {r + 1}: {rate:.1f} images/s "
                            f"({n1 - n0} images at the margin), start-up {t0 - n0 / rate:.1f} s")
            entry: dict = {}
            new, old = sides[0].label, sides[1].label
            if train:
                entry["train"] = {
                    "settings": " ".join([*world.train_args, *SHIPPED_TRAIN, "--iters", str(world.iters)]),
                    **{label: {"seconds_per_update": _spread(v), "updates_per_second": 1 / statistics.median(v)}
                       for label, v in per_side_train.items()},
                    "speedup": _spread([o / n for o, n in zip(per_side_train[old], per_side_train[new])]),
                }
            if evaluate:
                entry["eval"] = {
                    "settings": " ".join([*world.eval_args, "--steps", "3", "--schedule", "default", "--seeds",
                                          str(world.seeds), "--limit", f"{world.limits[0]} vs {world.limits[1]}"]),
                    **{label: {"images_per_second": _spread([a for a, _ in v]),
                               "startup_seconds": _spread([b for _, b in v])}
                       for label, v in per_side_eval.items()},
                    "speedup": _spread([n[0] / o[0] for o, n in zip(per_side_eval[old], per_side_eval[new])]),
                }
            result[world.name] = entry
    return result


MAIN_COMMAND = ("compare",)  # the README's main job, as its set-up line runs it


def time_main_command(side: Side, scratch: Path, args: tuple[str, ...] = MAIN_COMMAND) -> dict:
    """Wall and CPU seconds of one `jsbench <args>` run in `side`, and the images its records count; its
    leaderboards, records and figures go to `scratch`."""
    out = scratch / f"main-{side.label}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    import resource  # POSIX: the CPU seconds of the processes this one waited for

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, _ = _run(side, [*args, "--leaderboards", str(out / "leaderboards"), "--records", str(out / "records.jsonl"),
                          "--no-progress"], "the main command", env=side.env(one_thread=False))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
    # images sampled: a learned row's record counts one seed's images, and each of its training seeds sampled them
    overall = {(r["backbone"], r["steps"], r["method"]): r for r in records if r.get("task") == "overall"}  # one per metric
    images = sum(r["n_images"] * max(1, r.get("train_seeds") or 1) for r in overall.values())
    shutil.rmtree(out, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_seconds": wall, "cpu_seconds": cpu, "images": images}


def measure_main(sides: list[Side], repeats: int, args: tuple[str, ...] = MAIN_COMMAND, log=print) -> dict:
    """The main command on every side, alternating (the order flips each repeat): per side its wall and CPU
    seconds and images, and the old/new ratios of both."""
    runs: dict[str, list[dict]] = {s.label: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="jsbench-main-") as tmp:
        for r in range(repeats):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                run = time_main_command(side, Path(tmp), args)
                runs[side.label].append(run)
                log(f"  main command {side.label:8s} repeat {r + 1}: {run['wall_seconds']:.1f} s wall, "
                    f"{run['cpu_seconds']:.1f} s CPU, {run['images']} images")
    new, old = sides[0].label, sides[-1].label
    entry: dict = {"command": "jsbench " + " ".join(args)}
    for label, rs in runs.items():
        entry[label] = {"wall_seconds": _spread([x["wall_seconds"] for x in rs]), "cpu_seconds": _spread([x["cpu_seconds"] for x in rs]),
                        "images": sorted({x["images"] for x in rs})}
    if new != old:
        entry["speedup"] = {k: _spread([o[f"{k}_seconds"] / n[f"{k}_seconds"] for o, n in zip(runs[old], runs[new])]) for k in ("wall", "cpu")}
    return entry


def table(result: dict, new: str, old: str) -> list[str]:
    """The figures, one line per world and kind, for the terminal and the README."""
    lines = [f"{'world':11s} {'kind':6s} {old:>14s} {new:>14s}  speed-up (median, range)"]
    for name, entry in result.items():
        if "train" in entry:
            t = entry["train"]
            lines.append(f"{name:11s} train  {t[old]['seconds_per_update']['median']:11.3f} s/u "
                         f"{t[new]['seconds_per_update']['median']:10.3f} s/u  "
                         f"{t['speedup']['median']:.2f}x ({t['speedup']['min']:.2f}-{t['speedup']['max']:.2f})")
        if "eval" in entry:
            e = entry["eval"]
            lines.append(f"{name:11s} eval   {e[old]['images_per_second']['median']:11.1f} im/s"
                         f"{e[new]['images_per_second']['median']:10.1f} im/s  "
                         f"{e['speedup']['median']:.2f}x ({e['speedup']['min']:.2f}-{e['speedup']['max']:.2f})")
    return lines
