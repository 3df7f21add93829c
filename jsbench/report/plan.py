"""Plan a run before starting it: per row, the images, the denoiser evaluations and the GPU-hours it costs.

Nothing here loads a model's weights: the rows come from the command's options, the prompt counts from the
suite's prompt list, and the cost from the full-size FLOP counts in bench/results/backbones.json
(`full_size_estimate`, written by scripts/bench_backbones.py on the meta device): `step_flops`, one sampler step
of ONE image at 1024² with classifier-free guidance's pair of rows already counted (`cfg_batch` rows), and, per
image, `text_encode_flops` (the text encoders on the prompt, and on the negative prompt under guidance) and
`vae_decode_flops` (one decode). A backbone whose class inherits its published size (sd35-medium: sd35's) is
costed by its owner's entry. A denoiser evaluation (NFE) is one network call on one row, so an image at N
steps under CFG is 2N evaluations; its FLOPs are N x step_flops + text + decode.

GPU-hours = FLOPs / sustained throughput. Assumed throughput: SUSTAINED_SHARE (40 %) of the GPU class's dense
bf16 tensor peak (NVIDIA's data sheets, GPU_PEAK_TFLOPS). The share is an assumption, not a measurement of this
project; its source is issue 27's rough figure of "4-5 s per 28-step 1024² Flux image on an H100", which is
(28 x 74.4 + 4.9 + 10.5) TFLOP / 4.5 s = 466 TFLOP/s, 47 % of 989, taken down to 40 % for the work no FLOP count
sees (memory-bound norms and attention softmax, host overhead). Where a device run measured seconds per step at
real size on a GPU of that class (scripts/gpu_day_one.py's bench/results/gpu_day_one.json, then
scripts/gpu_smoke.py's gpu_smoke.json: the JSON names the device and, per backbone, `seconds_per_step` of
`images` images), the plan uses the fastest such measurement instead and says so. A measurement counts images,
never network rows: FLOPs per image already hold the guidance pair (a legacy `rows` field is divided by
`cfg_batch`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jsbench import JsbenchError

#: dense bf16 tensor-core peak, TFLOP/s (NVIDIA data sheets; SXM parts for H100/H200; 4090 with fp32 accumulate)
GPU_PEAK_TFLOPS = {"h100": 989.0, "h200": 989.0, "a100": 312.0, "l40s": 362.0, "a6000": 155.0, "4090": 165.0}
#: the share of that peak a 1024² DiT/UNet step sustains in bf16 (see the module docstring)
SUSTAINED_SHARE = 0.40
GPU_NAMES = {"h100": "H100", "h200": "H200", "a100": "A100", "l40s": "L40S", "a6000": "RTX A6000", "4090": "RTX 4090"}

_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"  # <checkout>/jsbench/report/plan.py
BACKBONES_JSON = _RESULTS / "backbones.json"
GPU_SMOKE_JSON = _RESULTS / "gpu_smoke.json"
GPU_DAY_ONE_JSON = _RESULTS / "gpu_day_one.json"
#: the device runs whose real-size seconds per step replace the assumed throughput, the first that measured it
MEASUREMENTS = (GPU_DAY_ONE_JSON, GPU_SMOKE_JSON)

#: the paper's training recipe (issue 27): K = 2, B by backbone size, AdamW weight decay 1e-4, clipping 1,
#: the HPSv2 reward on HPDv2's training prompts, one policy per budget L
RECIPES = {
    "paper": {
        "samples": 2, "weight_decay": 1e-4, "grad_clip": 1.0, "reward": "hps", "suite": "hpdv2",
        "contexts": {"flux-dev": 16, "sd35-large": 16, "sdxl": 32, "sd35-medium": 32, "sd35": 32},
        "budgets": (5, 10, 20, 40, 80),
    },
}


class PlanError(JsbenchError):
    pass


@dataclass
class PlanRow:
    method: str
    steps: int
    images: int
    nfe: int  # denoiser evaluations, CFG's second row counted; search and teacher evaluations included
    gpu_hours: float | None = None
    note: str = ""


@dataclass
class Plan:
    command: str
    backbone: str
    gpu: str
    tflops: float | None  # sustained TFLOP/s assumed (None: no FLOP count, an embedded world)
    throughput_source: str
    rows: list[PlanRow] = field(default_factory=list)

    @property
    def gpu_hours(self) -> float | None:
        hours = [r.gpu_hours for r in self.rows]
        return None if any(h is None for h in hours) else sum(hours)

    def to_json(self) -> dict:
        return {"command": self.command, "backbone": self.backbone, "gpu": self.gpu, "tflops": self.tflops,
                "throughput": self.throughput_source, "gpu_hours": self.gpu_hours,
                "images": sum(r.images for r in self.rows), "nfe": sum(r.nfe for r in self.rows),
                "rows": [asdict(r) for r in self.rows]}


# ---- cost model ------------------------------------------------------------------------------------------


def full_size_costs(path: Path = BACKBONES_JSON) -> dict[str, dict]:
    """backbone -> its `full_size_estimate` entry (step_flops, cfg_batch, text_encode_flops, vae_decode_flops, ...)
    from bench/results/backbones.json, for every registered backbone with a published size: its own entry, or
    that of the class it inherits the size from (`full_size_owner`: sd35-medium is costed by sd35's)."""
    from jsbench.backbones import available_backbones
    from jsbench.backbones.full_size import full_size_owner

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanError(f"cannot read the FLOP counts {path} ({exc}); rerun `python scripts/bench_backbones.py --flops-only --write`") from None
    own = {e["backbone"]: e for e in data.get("full_size_estimate", [])}
    out = dict(own)
    for name in available_backbones():
        owner = full_size_owner(name)
        if name not in out and owner in own:
            out[name] = own[owner]
    return out


def gpu_class(name: str) -> str:
    key = name.strip().lower().replace("nvidia", "").replace("rtx", "").replace("geforce", "").replace(" ", "").replace("-", "")
    if key not in GPU_PEAK_TFLOPS:
        raise PlanError(f"unknown --gpu {name!r}: use one of {', '.join(GPU_PEAK_TFLOPS)}")
    return key


def same_network(backbone: str) -> list[str]:
    """`backbone` and the registered names costed by the same full-size entry (sd35 and sd35-medium): a device
    run's measurement under any of them is the backbone's."""
    from jsbench.backbones import available_backbones
    from jsbench.backbones.full_size import full_size_owner

    owner = full_size_owner(backbone)
    return [backbone] + ([n for n in available_backbones() if n != backbone and full_size_owner(n) == owner] if owner else [])


def _measured_steps(data, names: list[str], cfg_batch: int) -> list[tuple[float, float]]:
    """(seconds_per_step, images) of every real-size measurement of the backbone (any of `names`) in a device run's
    JSON: a dict anywhere in it with a `seconds_per_step` whose `backbone` field, or a key on its path, names it.
    Images per timed step: its `images` (or `batch`) field, else a legacy `rows` (network rows: images x
    `cfg_batch`), else one."""
    found, stack = [], [((), data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            named = node.get("backbone") in names if "backbone" in node else any(n in path for n in names)
            if "seconds_per_step" in node and named and isinstance(node["seconds_per_step"], (int, float)):
                if "images" in node or "batch" in node:
                    images = float(node.get("images", node.get("batch")) or 1)
                else:
                    images = float(node.get("rows", cfg_batch) or cfg_batch) / cfg_batch
                found.append((float(node["seconds_per_step"]), images))
            stack += [((*path, k), v) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(path, v) for v in node]
    return found


def throughput(gpu: str, backbone: str, step_flops: float | None, smoke: Path | tuple[Path, ...] = MEASUREMENTS,
               cfg_batch: int | None = None) -> tuple[float, str]:
    """(sustained TFLOP/s, where the number comes from) for `backbone` on GPU class `gpu`. `step_flops`: one step of
    ONE image, the guidance pair counted (`cfg_batch` rows, default the backbone's); a device run's measurement
    of `images` images per step in `seconds` is step_flops x images / seconds, its fastest if it holds several."""
    cls = gpu_class(gpu)
    if cfg_batch is None:
        entry = full_size_costs().get(backbone) if step_flops else None
        cfg_batch = int(entry.get("cfg_batch", 1)) if entry else 1
    for path in (smoke,) if isinstance(smoke, (str, Path)) else smoke:
        if not (step_flops and Path(path).is_file()):
            continue
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError):
            continue
        device = str(data.get("device", "")).lower().replace(" ", "").replace("-", "")
        found = _measured_steps(data, same_network(backbone), cfg_batch) if cls in device and not data.get("dry_run") else []
        rates = [step_flops * images / seconds / 1e12 for seconds, images in found if seconds > 0 and images > 0]
        if rates:
            return max(rates), f"measured on {data['device']} ({Path(path).name})"
    tflops = GPU_PEAK_TFLOPS[cls] * SUSTAINED_SHARE
    return tflops, (f"assumed: {SUSTAINED_SHARE:.0%} of the {GPU_NAMES[cls]}'s {GPU_PEAK_TFLOPS[cls]:g} TFLOP/s dense bf16 peak "
                    "(issue 27's 4-5 s per 28-step H100 Flux image; see jsbench/report/plan.py)")


class CostModel:
    """NFE and GPU-hours of images of one backbone on one GPU class."""

    def __init__(self, backbone_name: str, gpu: str, real: bool):
        self.cfg_batch, self.flops_per_nfe, self.flops_per_image, self.tflops = 1, None, 0.0, None
        self.source = "embedded world: runs on a CPU, no GPU-hours"
        if real:
            costs = full_size_costs()
            entry = costs.get(backbone_name)
            if entry is None:
                raise PlanError(f"no FLOP count for {backbone_name!r} in {BACKBONES_JSON.name} (has {', '.join(costs)})")
            self.cfg_batch = int(entry.get("cfg_batch", 1))
            self.flops_per_nfe = float(entry["step_flops"]) / self.cfg_batch
            # what an image costs once, whatever its steps: its prompt's text encoding and its decode
            self.flops_per_image = float(entry.get("text_encode_flops", 0)) + float(entry.get("vae_decode_flops", 0))
            self.tflops, self.source = throughput(gpu, backbone_name, float(entry["step_flops"]), cfg_batch=self.cfg_batch)
        else:
            gpu_class(gpu)

    def nfe(self, images: int, steps: int) -> int:
        return int(images) * int(steps) * self.cfg_batch

    def hours(self, nfe: int, images: int = 0) -> float | None:
        """GPU-hours of `nfe` denoiser evaluations and of encoding and decoding `images` images."""
        if self.flops_per_nfe is None:
            return None
        return (nfe * self.flops_per_nfe + images * self.flops_per_image) / (self.tflops * 1e12) / 3600.0

    def row(self, method: str, steps: int, images: int, extra_nfe: int = 0, note: str = "") -> PlanRow:
        nfe = self.nfe(images, steps) + extra_nfe
        return PlanRow(method, int(steps), int(images), nfe, self.hours(nfe, int(images)), note)


# ---- prompt counts ------------------------------------------------------------------------------------


def prompt_items(suite_name: str, backbone_name: str, split: str = "test", limit: int | None = None):
    """(items or None, count) of the prompts a run evaluates, read without weights. HPDv2's prompts may not be on
    this machine: then the count is that of its published benchmark (800 a style, a quarter held out)."""
    from jsbench.backbones import listing_backbone, load_backbone
    from jsbench.evaluation.protocol import first_per_task
    from jsbench.evaluation.protocol import check_limit
    from jsbench.suites import load_suite

    check_limit(limit)
    listing = listing_backbone(backbone_name)
    try:
        suite = load_suite(suite_name, listing if listing is not None else load_backbone(backbone_name, None, "cpu"))
        items = first_per_task(suite.items(split), limit)
        return items, len(items)
    except JsbenchError:
        if suite_name != "hpdv2":
            raise
    from jsbench.splits import held_out_positions
    from jsbench.suites.hpdv2 import STYLES

    per_style = 800  # the HPDv2 benchmark: 800 prompts in each of its four styles
    n = {"all": per_style, "test": len(held_out_positions(per_style))}.get(split, per_style - len(held_out_positions(per_style)))
    return None, len(STYLES) * (min(n, limit) if limit else n)


# ---- the plans ----------------------------------------------------------------------------------------


def _teacher_rows(spec: str, steps: int, cls, cost: CostModel, images: int = 0) -> tuple[int, str]:
    """(extra NFE, note) of a row whose source declares a teacher (`ScheduleKind.teacher`, its own estimate: oss,
    oss-mean and searched once on the training prompts, oss-image on every evaluated image, `images`)."""
    from jsbench.zoo.registry import schedule_kind, teacher_cost

    try:
        kind = schedule_kind(spec.partition(":")[0])
    except JsbenchError:
        kind = None  # a plugin that does not load: the run names it
    estimate = teacher_cost(kind) if kind is not None else None
    return estimate(spec, steps, cls, cost, images) if estimate is not None else (0, "")


def _never_exists(spec: str, cls) -> bool:
    """Whether the row of `spec` never exists for a backbone of class `cls`, as its source declares (`ScheduleKind.applies`)."""
    from jsbench.zoo.registry import applies_to, schedule_kind

    try:
        kind = schedule_kind(spec.partition(":")[0])
    except JsbenchError:
        return False  # a plugin that does not load: the run names it
    return kind is not None and applies_to(kind, cls) is not None


def plan_compare(suite: str, backbone: str, steps_list: list[int], *, gpu: str = "h100", seeds: int | None = None,
                 zoo: list[str] | None = None, schedules: list[str] = (), distilled: list[str] = (), limit: int | None = None,
                 policies_dir: Path | None = None, command: str = "jsbench compare") -> Plan:
    """The rows `jsbench compare` would evaluate with these options, and their cost."""
    from jsbench.backbones import backbone_class
    from jsbench.evaluation.protocol import ceiling_spec, default_seeds, default_zoo, is_real

    cls = _class(backbone)
    real = is_real(cls)
    cost = CostModel(backbone, gpu, real)
    seeds = _seeds(suite, real, seeds)
    _, n_prompts = prompt_items(suite, backbone, "test", limit)
    images = n_prompts * seeds
    zoo = default_zoo(real) if zoo is None else list(zoo)
    plan = Plan(command, backbone, gpu_class(gpu), cost.tflops, cost.source)
    ceiling = ceiling_spec(cls)
    for i, steps in enumerate(steps_list):
        plan.rows.append(cost.row("default", steps, images))
        for spec in [*zoo, *schedules]:
            if _never_exists(spec, cls):
                continue  # compare skips it too (ays where the family has none, oss without a flow velocity: SD-XL)
            extra, note = _teacher_rows(spec, steps, cls, cost, images)
            plan.rows.append(cost.row(spec, steps, images, extra, note))
        if policies_dir is not None:
            from jsbench.report.compare import shipped_policies

            for folders in shipped_policies(policies_dir, cls.name or backbone, steps, suite):
                # a learned row is the mean of its training seeds: each seed's policy samples every image
                name = folders[0].parent.name if folders[0].name.startswith("seed") else folders[0].name
                plan.rows.append(cost.row(f"policy:{name} ({len(folders)} training seeds)" if len(folders) > 1 else f"policy:{name}",
                                          steps, images * len(folders)))
        if i == 0:
            n = int(ceiling.partition(":")[2] or cls.ceiling_steps)
            plan.rows.append(cost.row(f"ceiling ({n} steps{', pipeline default' if ceiling != 'ceiling' else ''})", n, images))
        for other in distilled:
            name = other.partition("=")[0]
            ocls = backbone_class(name)
            ocost = CostModel(name, gpu, is_real(ocls)) if ocls is not None else cost
            own = int(getattr(ocls, "default_steps", None) or steps)
            plan.rows.append(ocost.row(f"{name} (distilled)", own, images))
    return plan


def plan_eval(suite: str, backbone: str, steps: int, schedule: str, *, gpu: str = "h100", seeds: int | None = None,
              split: str = "test", limit: int | None = None, command: str = "jsbench eval") -> Plan:
    from jsbench.evaluation.protocol import default_seeds, is_real

    cls = _class(backbone)
    real = is_real(cls)
    cost = CostModel(backbone, gpu, real)
    seeds = _seeds(suite, real, seeds)
    _, n_prompts = prompt_items(suite, backbone, split, limit)
    kind, _, arg = schedule.partition(":")
    run_steps = (int(arg) if arg else int(cls.ceiling_steps)) if kind == "ceiling" else steps
    extra, note = _teacher_rows(schedule, steps, cls, cost, n_prompts * seeds)
    plan = Plan(command, backbone, gpu_class(gpu), cost.tflops, cost.source)
    plan.rows.append(cost.row(schedule, run_steps, n_prompts * seeds, extra, note))
    return plan


def plan_train(backbone: str, steps: int, iters: int, contexts: int, samples: int, *, gpu: str = "h100",
               recipe: str | None = None, command: str = "jsbench train") -> Plan:
    """One row per policy trained: iters x B x K sampled images at the budget (no backward pass through the
    frozen backbone: REINFORCE needs only the samples). A recipe plans one policy per budget it lists."""
    cls = _class(backbone)
    from jsbench.evaluation.protocol import is_real

    cost = CostModel(backbone, gpu, is_real(cls))
    plan = Plan(command, backbone, gpu_class(gpu), cost.tflops, cost.source)
    budgets = RECIPES[recipe]["budgets"] if recipe else (steps,)
    for n in budgets:
        plan.rows.append(cost.row(f"train {recipe or 'policy'}", n, iters * contexts * samples, note=f"B={contexts}, K={samples}, {iters} updates"))
    return plan


def apply_recipe(fields: dict, recipe: str | None, defaults: dict) -> dict:
    """`fields` (TrainConfig's values) with the recipe's settings; a field the user set to another value than both
    its default and the recipe's is refused in one line."""
    if recipe is None:
        return fields
    if recipe not in RECIPES:
        raise PlanError(f"unknown --recipe {recipe!r}: use {', '.join(RECIPES)}")
    spec = RECIPES[recipe]
    backbone = fields["backbone"]
    if backbone not in spec["contexts"]:
        raise PlanError(f"--recipe {recipe} is for {', '.join(spec['contexts'])}, not {backbone!r}")
    wanted = {k: spec[k] for k in ("samples", "weight_decay", "grad_clip", "reward", "suite")}
    wanted["contexts"] = spec["contexts"][backbone]
    out = dict(fields)
    for key, value in wanted.items():
        if fields[key] != defaults[key] and fields[key] != value:
            raise PlanError(f"--{key.replace('_', '-')} {fields[key]} conflicts with --recipe {recipe} ({key} = {value}); drop one")
        out[key] = value
    if fields["steps"] not in spec["budgets"]:
        raise PlanError(f"--recipe {recipe} trains the budgets {', '.join(map(str, spec['budgets']))}; --steps {fields['steps']} is not one")
    return out


def _seeds(suite: str, real: bool, seeds: int | None) -> int:
    from jsbench.evaluation.protocol import default_seeds

    if seeds is not None and seeds < 1:
        raise PlanError(f"--seeds must be at least 1, got {seeds}")
    return default_seeds(suite, real) if seeds is None else seeds


def _class(backbone: str):
    from jsbench.backbones import backbone_class

    cls = backbone_class(backbone)
    if cls is None:
        from jsbench.backbones import available_backbones

        raise PlanError(f"unknown backbone {backbone!r}: use one of {', '.join(available_backbones())}")
    return cls


# ---- output -------------------------------------------------------------------------------------------


def plan_text(plan: Plan, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(plan.to_json(), indent=1) + "\n"
    hours = lambda h: "-" if h is None else f"{h:.2f}"  # noqa: E731
    import textwrap

    speed = (f"{plan.tflops:.0f} TFLOP/s sustained ({plan.throughput_source})" if plan.tflops else plan.throughput_source)
    head = [f"plan: {plan.command}", f"{plan.backbone} on {GPU_NAMES[plan.gpu]}: {speed}"]
    lines = [w for h in head for w in textwrap.wrap(h, 80, subsequent_indent="  ", break_on_hyphens=False)]
    lines.append(f"{'method':<38} {'steps':>5} {'images':>8} {'NFE':>11} {'GPU-h':>7}")
    for r in plan.rows:
        lines.append(f"{r.method[:38]:<38} {r.steps:>5} {r.images:>8,} {r.nfe:>11,} {hours(r.gpu_hours):>7}")
        if r.note:
            lines.append(f"  {r.note}")
    total_images, total_nfe = sum(r.images for r in plan.rows), sum(r.nfe for r in plan.rows)
    lines.append(f"{'total':<38} {'':>5} {total_images:>8,} {total_nfe:>11,} {hours(plan.gpu_hours):>7}")
    lines.append("NFE: network calls, CFG's second row counted.")
    lines.append("GPU-h: denoiser steps, text encoders and VAE decode.")
    return "\n".join(lines) + "\n"
