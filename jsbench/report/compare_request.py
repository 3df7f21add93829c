"""One `jsbench compare` invocation as a value, with each field's command-line help beside it.

A compare is spelled here once: `jsbench compare` builds its options from these fields (jsbench/cli_options.py,
`config_options`, as `jsbench train` does from TrainConfig), `jsbench.report.compare.run_compare` takes the
request, the command each leaderboard section records is rendered from it (`compare_command`, whose
inverse is `parse_compare_command`), and each run of `leaderboards/recipe.json` (what `compare --all`
replays) reads into one and writes back from one (`read_recipe`, `recipe_text`). The field metadata is
TrainConfig's: `help` (required), `flags`, `choices`, `min`, `hidden` (jsbench/train/config.py).

This module imports nothing heavy (no torch), so `jsbench --help` stays fast; the zoo's parser is imported
only to render a command.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from jsbench import JsbenchError
from jsbench.registry import declared_names  # reads the backbones' names from source: imports no torch
from jsbench.suites import declared_suites  # the declared names only: imports no suite module
from jsbench.train.config import DECODE_HELP, DEVICE_HELP, DTYPE_HELP, GUIDANCE_HELP, MODEL_HELP, OFFLOAD_HELP, OFFLOAD_MODE_HELP, option

# help shared with `jsbench eval` (and the other commands with these options)
SUITE_HELP = f"Suite: {', '.join(declared_suites())}."
BACKBONE_HELP = f"Backbone: {', '.join(declared_names('jsbench.backbones'))}."
SEEDS_HELP = "Images per prompt (default: 16 here; a real model: the suite's protocol)."
SEED_BASE_HELP = "Noise of image k: sha256(prompt, base + k)."
OCR_PROTOCOL_HELP = "OCR reading: mario (default) or words."
LIMIT_HELP = "Only the first N prompts of each task (marked partial)."
SAVE_HELP = "Save PNGs (GenEval layout), sigmas."
IMAGES_BATCH_HELP = "Images per batch (default: the backbone's)."
PROGRESS_HELP = "Progress on stderr (lines in a log)."
FORMAT_HELP = "table (80 columns); csv, json: exact."
PLAN_HELP = "Print the cost (GPU-hours); load nothing."
GPU_HELP = "GPU class --plan costs for: h100, h200, a100, l40s, a6000, 4090."
#: the share of the committed OCR readings a check reads again (jsbench.report.readings): 1 in 8
DEFAULT_REREAD = 0.125


@dataclass(frozen=True)
class CompareRequest:
    """Every option of one `jsbench compare`, in the order of its --help. None: the default the command
    finds (seeds and zoo: the backbone's protocol; policies and leaderboards: the project's folders).
    Lists are tuples (a list given is made one); `jsbench.report.compare.resolve_folders` fills in the folders."""

    suite: str = option("geneval", SUITE_HELP)
    backbone: str = option("analytic", BACKBONE_HELP)
    model: str | None = option(None, MODEL_HELP)
    steps: tuple[int, ...] = option((3, 5), "Step budgets (repeat the option).")
    seeds: int | None = option(None, SEEDS_HELP)
    # evaluate.EVAL_SEED_BASE (that module imports torch); every recipe run names its own
    seed_base: int = option(0, SEED_BASE_HELP, min=0)
    policies: Path | None = option(None, "Policies folder (default: the project's policies/).")
    records: Path = option(Path("results/records.jsonl"), "Records file (appended).")
    leaderboards: Path | None = option(None, "Leaderboards folder (default: project's).")
    all_runs: bool = option(False, "Run every invocation of LEADERBOARDS/recipe.json.", flags=("--all",))
    schedule: tuple[str, ...] = option((), "Extra schedule rows, e.g. shift:3 (repeat).")
    zoo: str | None = option(None, "Zoo rows beside default, comma-separated, or none (default: README).")
    ocr_protocol: str | None = option(None, OCR_PROTOCOL_HELP)
    distilled: tuple[str, ...] = option((), "Distilled sampler rows: NAME or NAME=MODEL.")
    check: bool = option(False, "Rerun and check the committed rows.")
    report: tuple[Path, ...] = option((), "Report to .md, .json or .xml.")
    strict: bool = option(False, "A missing row fails too.")
    plots: bool = option(True, "Write the figures.")
    tolerance: float = option(2.0, "Allowed drop, in paired SEs.")
    reread: float | None = option(None, f"With --check: share of OCR readings reread (default {DEFAULT_REREAD:g}).")
    device: str | None = option(None, DEVICE_HELP)
    batch_size: int | None = option(None, IMAGES_BATCH_HELP, min=1)
    dtype: str | None = option(None, DTYPE_HELP)
    offload: bool = option(False, OFFLOAD_HELP, flags=("--offload",))
    decode_chunk: int | None = option(None, DECODE_HELP, min=1)
    guidance: float | None = option(None, GUIDANCE_HELP)
    offload_mode: str | None = option(None, OFFLOAD_MODE_HELP)
    progress: bool = option(True, PROGRESS_HELP)
    format: str = option("table", FORMAT_HELP, choices=("table", "csv", "json"))
    tasks: bool = option(False, "A column per task (wider than 80).", flags=("--tasks",))
    limit: int | None = option(None, LIMIT_HELP)
    processes: int = option(1, "Shard every row's prompts over N processes.", min=1)
    save_images: Path | None = option(None, SAVE_HELP)
    plan: bool = option(False, PLAN_HELP, flags=("--plan",))
    gpu: str = option("h100", GPU_HELP)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):  # the command line's repeated options
                value = tuple(value)
            if value is not None and f.type in ("Path", "Path | None"):
                value = Path(value)
            elif isinstance(value, tuple) and f.type == "tuple[Path, ...]":
                value = tuple(Path(v) for v in value)
            object.__setattr__(self, f.name, value)


DEFAULTS = CompareRequest()


def _flag(f: dataclasses.Field) -> str:
    """A field's option name, as cli_options.config_options declares it."""
    return f.metadata.get("flags", ("--" + f.name.replace("_", "-"),))[0]


def _word(value) -> str:
    return shlex.quote(str(value))


# --- the command each leaderboard section records ---------------------------------------------------------


def compare_command(request: CompareRequest) -> str:
    """The `jsbench compare` command line of the rows `request` evaluates (shown beside each section and in
    a check's report): suite, backbone and step budgets always, then what the request sets away from its
    default among model, guidance, seeds, seed base, extra schedules, distilled rows, OCR protocol and zoo
    (a named zoo in its parsed form: a named default list also runs its opt-in rows), the check's options
    when checking, and --limit. `parse_compare_command` reads it back."""
    r = request
    parts = ["jsbench compare", f"--suite {_word(r.suite)}", f"--backbone {_word(r.backbone)}"]
    if r.model:
        parts.append(f"--model {_word(r.model)}")
    parts += [f"--steps {n}" for n in r.steps]
    if r.guidance is not None:
        parts.append(f"--guidance {r.guidance:g}")
    if r.seeds is not None:
        parts.append(f"--seeds {r.seeds}")
    if r.seed_base != DEFAULTS.seed_base:
        parts.append(f"--seed-base {r.seed_base}")
    parts += [f"--schedule {_word(s)}" for s in r.schedule] + [f"--distilled {_word(d)}" for d in r.distilled]
    if r.ocr_protocol is not None:
        parts.append(f"--ocr-protocol {_word(r.ocr_protocol)}")
    if r.zoo is not None:
        from jsbench.zoo import parse_zoo

        parts.append(f"--zoo {_word(','.join(parse_zoo(r.zoo)) or 'none')}")
    if r.check:
        parts.append("--check" + (f" --tolerance {r.tolerance:g}" if r.tolerance != DEFAULTS.tolerance else "") + (" --strict" if r.strict else "")
                     + (f" --reread {r.reread:g}" if r.reread is not None else ""))
    if r.limit is not None:
        parts.append(f"--limit {r.limit}")
    return " ".join(parts)


def recorded_request(request: CompareRequest, real: bool) -> CompareRequest:
    """The request whose command a section records, for a run on a real model (`real`) or an embedded world:
    `request` with the protocol's seeds and zoo named where they are not the embedded worlds' defaults (a real
    model's images per prompt and zoo rows), so the command reads on its own; what it left at a default that
    is the embedded one stays unnamed (the committed sections' commands)."""
    from jsbench.evaluation.protocol import EMBEDDED_SEEDS, default_seeds, default_zoo
    from jsbench.zoo import DEFAULT_ZOO

    seeds, zoo = request.seeds, request.zoo
    if seeds is None and default_seeds(request.suite, real) != EMBEDDED_SEEDS:
        seeds = default_seeds(request.suite, real)
    if zoo is None and default_zoo(real) != list(DEFAULT_ZOO):
        zoo = ",".join(default_zoo(real)) or "none"
    return replace(request, seeds=seeds, zoo=zoo)


def parse_compare_command(text: str) -> CompareRequest:
    """The request of a `jsbench compare ...` command line (`compare_command`'s, or one typed with any of
    compare's options): an option repeated adds to a list option, `--no-X` turns a flag off."""
    words = shlex.split(text)
    if words[:2] != ["jsbench", "compare"]:
        raise JsbenchError(f"not a jsbench compare command: {text!r}")
    by_flag = {}
    for f in dataclasses.fields(CompareRequest):
        by_flag[_flag(f)] = (f, True)
        if f.type == "bool" and "flags" not in f.metadata:
            by_flag["--no-" + f.name.replace("_", "-")] = (f, False)
    values: dict = {}
    rest = iter(words[2:])
    for word in rest:
        flag, eq, inline = word.partition("=")
        if flag not in by_flag:
            raise JsbenchError(f"{text!r}: unknown option {flag!r}")
        f, on = by_flag[flag]
        if f.type == "bool":
            values[f.name] = on
            continue
        raw = inline if eq else next(rest, None)
        if raw is None:
            raise JsbenchError(f"{text!r}: {flag} needs a value")
        kind = f.type.partition(" | ")[0]
        if kind.startswith("tuple["):
            item = kind[len("tuple[") : -len(", ...]")]
            values[f.name] = (*values.get(f.name, ()), _convert(item, raw, flag))
        else:
            values[f.name] = _convert(kind, raw, flag)
    return CompareRequest(**values)


def _convert(kind: str, raw: str, flag: str):
    try:
        return {"int": int, "float": float, "Path": Path}.get(kind, str)(raw)
    except ValueError:
        raise JsbenchError(f"{flag} takes {'an integer' if kind == 'int' else 'a number'}, got {raw!r}") from None


# --- the recipe behind `jsbench compare --all` ------------------------------------------------------------

RECIPE_NAME = "recipe.json"
# a recipe run's keys: the request's fields of the same names, in the order a run is written; the other
# fields (check, output, device, ...) come from the `--all` command line
RECIPE_KEYS = {"suite": str, "backbone": str, "steps": list, "model": str, "seeds": int, "seed_base": int, "schedule": list,
               "distilled": list, "zoo": str, "ocr_protocol": str}
# written even at its default: a committed section's images are those of its seed base, whatever the default
_ALWAYS_WRITTEN = ("suite", "backbone", "steps", "seed_base")
RECIPE_ABOUT = (
    "Every section of the committed leaderboards and its figures: `jsbench compare --all` runs each of these compare "
    "invocations in turn (keys: suite, backbone, steps, and optionally model, seeds, seed_base, schedule, distilled, zoo, "
    "as the compare options of the same names; an unset zoo is compare's default)."
)


def recipe_request(run: dict, where: str = "a recipe run") -> CompareRequest:
    """The request of one recipe run (a dict of RECIPE_KEYS), validated: every other field at its default."""
    if not isinstance(run, dict):
        raise JsbenchError(f"{where} is not an object of compare options")
    for key, value in run.items():
        if key not in RECIPE_KEYS:
            raise JsbenchError(f"{where}: unknown key {key!r}; use {', '.join(RECIPE_KEYS)}")
        if not isinstance(value, RECIPE_KEYS[key]):
            raise JsbenchError(f"{where}: {key} must be a {RECIPE_KEYS[key].__name__}, got {value!r}")
    for key in ("suite", "backbone", "steps"):
        if key not in run:
            raise JsbenchError(f"{where}: {key!r} is missing")
    if not run["steps"] or not all(isinstance(n, int) and n >= 1 for n in run["steps"]):
        raise JsbenchError(f"{where}: steps must be a list of step budgets, e.g. [3, 5]")
    return CompareRequest(**run)


def recipe_run(request: CompareRequest) -> dict:
    """`request`'s recipe run: suite, backbone, steps and seed base, and each other recipe key away from its default."""
    out = {}
    for key in RECIPE_KEYS:
        value = getattr(request, key)
        if key in _ALWAYS_WRITTEN or value != getattr(DEFAULTS, key):
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def recipe_fields(request: CompareRequest) -> dict:
    """The recipe keys' values of `request`: what a recipe run sets over the `--all` command line's request."""
    return {key: getattr(request, key) for key in RECIPE_KEYS}


def read_recipe(path: str | Path) -> list[CompareRequest]:
    """The compare invocations of a recipe file, validated, each a request (its other fields at their defaults)."""
    path = Path(path)
    if not path.is_file():
        raise JsbenchError(f"no recipe at {path}: --all runs the compare invocations listed there (see leaderboards/recipe.json)")
    try:
        runs = json.loads(path.read_text())["runs"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise JsbenchError(f"{path}: not a recipe ({exc.__class__.__name__}); it needs {{\"runs\": [{{\"suite\": ..., \"backbone\": ..., \"steps\": [...]}}]}}") from None
    if not isinstance(runs, list) or not runs:
        raise JsbenchError(f"{path}: \"runs\" must be a non-empty list of compare invocations")
    return [recipe_request(run, f"{path}: runs[{i}]") for i, run in enumerate(runs)]


def recipe_text(requests: list[CompareRequest], about: str = RECIPE_ABOUT) -> str:
    """A recipe file of these requests, one run a line (the committed leaderboards/recipe.json's layout)."""
    runs = ",\n".join(f"    {json.dumps(recipe_run(r))}" for r in requests)
    return f'{{\n  "about": {json.dumps(about)},\n  "runs": [\n{runs}\n  ]\n}}\n'


def write_recipe(path: str | Path, requests: list[CompareRequest], about: str = RECIPE_ABOUT) -> Path:
    from jsbench.io import write_text_atomic

    write_text_atomic(Path(path), recipe_text(requests, about))
    return Path(path)
