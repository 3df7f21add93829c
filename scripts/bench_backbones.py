#!/usr/bin/env python
"""Cost of per-instance schedules on the real backbones' code paths, and of the policy next to the sampler.

Two questions (issue 3), answered per backbone:

1. Does a different schedule per row cost anything? One batched call of `backbone.sample` with a
   distinct schedule on every row, over the same call with one shared schedule on every row (goal
   <= 1.05x). Both run on the tiny random-weight pipelines on CPU, interleaved, median of repeats, in one
   process. For context it also times the diffusers pipeline over the same batch (one shared schedule,
   embeddings precomputed), and the naive way to get per-row schedules from it: one call per row.
2. What does the policy cost? (a) measured on the tiny pipelines: the policy's forward over the
   sampler call; (b) at full size, where neither can run here: FLOPs of the policy train builds
   (`jsbench policies size`) at the real shapes over FLOPs of one full-size backbone step (real configs instantiated on the
   meta device, counted with torch's FlopCounterMode: no weights, no memory), per step and per sampler
   call at the backbone's default step count (goal <= 1% per step).

    python scripts/bench_backbones.py                     # all four, the table (--write: bench/results/backbones.json)
    python scripts/bench_backbones.py --kinds flux-dev --repeats 11 --batch 8 --steps 8
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.backbones.full_size import FULL_SIZE, full_size, full_size_network, step_inputs  # noqa: E402
from jsbench.backbones.tiny import TINY_KINDS, save_tiny_pipeline  # noqa: E402
from jsbench.io import add_result_options, write_result  # noqa: E402
from jsbench.policy_size import policy_size  # noqa: E402
from jsbench.schedule import floor_increments, increments_from_sigmas, sigmas_from_increments  # noqa: E402

# Published configs of the full-size networks (the models' transformer/unet config.json), used only on
# the full-size networks (each adapter class's `full_size`, on meta for FLOP counts): jsbench.backbones.full_size


def _flop_count(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def backbone_step_flops(kind: str) -> tuple[int, int]:
    """(FLOPs of one denoising step at 1024 px, parameter count) of the full-size network, on meta."""
    net = full_size_network(kind, "meta")
    params = sum(p.numel() for p in net.parameters())
    args, kw = step_inputs(kind, "meta")
    with torch.device("meta"):
        flops = _flop_count(lambda: net(*args, **kw, return_dict=False))
    return flops, params


def _policy(latent_shape, pooled_dim: int, steps: int, width: int, feature_depth: int | None = None):
    """The project's DirichletSchedulePolicy when available; else LatentFeatures + the same kind of head."""
    from jsbench.policy_features import LatentFeatures

    default = [1.0 / steps] * steps
    try:
        from jsbench.policy import DirichletSchedulePolicy, PolicyConfig

        cfg = PolicyConfig(kind="instance", steps=steps, pooled_dim=pooled_dim, latent_shape=tuple(latent_shape),
                           default_increments=default, width=width)
        pol = DirichletSchedulePolicy(cfg)
        if feature_depth is not None and isinstance(pol.noise, LatentFeatures):
            pol.noise = LatentFeatures(latent_shape, width, depth=feature_depth)
        return pol, (lambda x, c: pol.log_alpha(x, c))
    except Exception:  # policy.py absent or changed: a stand-in of the same shape
        from torch import nn

        feats = LatentFeatures(latent_shape, width, depth=feature_depth)
        text = nn.Linear(pooled_dim, width)
        head = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, steps))
        mod = nn.ModuleList([feats, text, head])
        return mod, (lambda x, c: head(feats(x) + text(c)))


def full_size_policy(kind: str, steps: int) -> tuple[int, int]:
    """(forward FLOPs for one sample, parameters) of the policy `jsbench train` builds at the real shapes
    (`jsbench policies size`: the xattn architecture, reading the prompt's tokens)."""
    row = policy_size(kind, steps, sampler=False)
    return round(row["gflops_per_row"] * 1e9), row["params"]


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _per_row_schedules(default: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Distinct schedules around the default (what a policy emits): Dirichlet draws centred on it."""
    inc = increments_from_sigmas(default).double()
    g = torch.Generator().manual_seed(seed)
    alpha = 40.0 * inc / inc.sum(-1, keepdim=True)
    draws = torch._sample_dirichlet(alpha, generator=g)
    return sigmas_from_increments(floor_increments(draws, 0.1 / inc.shape[-1])).to(torch.float32)


def bench_one(kind: str, folder: Path, batch: int, steps: int, repeats: int, naive: bool) -> dict:
    bb = load_backbone(kind, model=str(folder), device="cpu")
    n = min(steps, bb.default_steps) if bb.timestep_distilled else steps  # a few-step sampler: at most its own steps
    prompts = [f"prompt number {i}: a red cat next to a blue car" for i in range(batch)]
    x = bb.initial_noise(list(range(batch)))
    cond = bb.encode(prompts)
    shared = bb.default_sigmas(n, x)
    per_row = _per_row_schedules(shared)
    assert not torch.allclose(per_row[0], per_row[1])

    kw = dict(height=bb.height, width=bb.width, output_type="pt", guidance_scale=bb.guidance_scale)
    if bb.max_sequence_length:  # a T5 (SD3.5, Flux; not SD-XL)
        kw["max_sequence_length"] = bb.max_sequence_length
    emb = {k: v for k, v in cond.tensors.items()}

    def pipe_shared():
        bb.pipe(prompt_embeds=emb["prompt_embeds"], pooled_prompt_embeds=emb["pooled_prompt_embeds"],
                **({k: emb[k] for k in emb if k.startswith("negative")}), latents=x.clone(), num_inference_steps=n, **kw)

    def pipe_naive():
        for b in range(batch):
            one = {k: v[b : b + 1] for k, v in emb.items()}
            bb.pipe(**one, latents=x[b : b + 1].clone(), sigmas=bb.pipeline_sigmas(per_row[b]), **kw)

    pol, fwd = _policy(bb.latent_shape, bb.pooled_dim, n, width=32)
    pol.eval()

    def policy_forward():
        with torch.no_grad():
            fwd(x.float(), cond.pooled)

    calls = {
        "per_row": lambda: bb.sample(x, cond, per_row),
        "shared": lambda: bb.sample(x, cond, shared),
        "pipeline_shared": pipe_shared,
        "policy": policy_forward,
    }
    if naive:
        calls["pipeline_per_row_calls"] = pipe_naive
    for fn in calls.values():  # warm-up: first calls pay one-off kernel setup
        fn()
    times: dict[str, list[float]] = {k: [] for k in calls}
    ratios = []
    for r in range(repeats):
        order = ["per_row", "shared"] if r % 2 == 0 else ["shared", "per_row"]
        got = {k: _timed(calls[k]) for k in order}
        ratios.append(got["per_row"] / got["shared"])
        for k in order:
            times[k].append(got[k])
        for k in calls:
            if k not in order:
                times[k].append(_timed(calls[k]))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "backbone": kind,
        "batch": batch,
        "steps": n,
        "latent_shape": list(bb.latent_shape),
        "resolution": [bb.height, bb.width],
        "seconds_median": med,
        "per_row_over_shared_median": statistics.median(ratios),
        "per_row_over_shared_all": ratios,
        "per_row_over_pipeline": med["per_row"] / med["pipeline_shared"],
        "naive_over_per_row": (med["pipeline_per_row_calls"] / med["per_row"]) if naive else None,
        "tiny_policy_params": sum(p.numel() for p in pol.parameters()),
        "tiny_policy_over_sampler": med["policy"] / med["per_row"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=list(TINY_KINDS), choices=list(TINY_KINDS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8, help="steps per call (a timestep-distilled sampler, flux-schnell: at most its default 4)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: least noise on a shared CPU)")
    ap.add_argument("--no-naive", action="store_true", help="skip the one-pipeline-call-per-row comparison")
    ap.add_argument("--no-flops", action="store_true", help="skip the full-size FLOP estimate")
    add_result_options(ap, "bench/results/backbones.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    rows = []
    with tempfile.TemporaryDirectory(prefix="jsbench-bench-") as tmp:
        for kind in args.kinds:
            folder = save_tiny_pipeline(kind, Path(tmp) / kind)
            rows.append(bench_one(kind, folder, args.batch, args.steps, args.repeats, naive=not args.no_naive))

    full = []
    if not args.no_flops:
        for kind in FULL_SIZE:
            step_flops, net_params = backbone_step_flops(kind)
            steps = full_size(kind)["default_steps"]
            pol_flops, pol_params = full_size_policy(kind, steps)
            full.append({
                "backbone": kind, "network_params": net_params, "step_flops": step_flops,
                "cfg_batch": FULL_SIZE[kind]["cfg_batch"], "default_steps": steps,
                "policy_params": pol_params, "policy_flops": pol_flops,
                "policy_over_step": pol_flops / step_flops, "policy_over_sampler": pol_flops / (steps * step_flops),
            })

    print(f"\nper-instance schedules on tiny pipelines (CPU, {args.threads} thread(s), batch {args.batch}, median of {args.repeats})")
    head = f"{'backbone':<13}{'steps':>6}{'shared ms':>11}{'per-row ms':>12}{'per/shared':>12}{'pipeline ms':>13}{'naive/per':>11}{'policy/sampler':>16}"
    print(head)
    print("-" * len(head))
    for r in rows:
        s = r["seconds_median"]
        naive = f"{r['naive_over_per_row']:.2f}x" if r["naive_over_per_row"] else "-"
        print(f"{r['backbone']:<13}{r['steps']:>6}{1e3 * s['shared']:>11.1f}{1e3 * s['per_row']:>12.1f}"
              f"{r['per_row_over_shared_median']:>11.3f}x{1e3 * s['pipeline_shared']:>13.1f}{naive:>11}"
              f"{100 * r['tiny_policy_over_sampler']:>15.2f}%")
    if full:
        print("\nfull size at 1024 px (FLOPs counted on the meta device; the policy train builds, one forward per sample)")
        head = f"{'backbone':<14}{'net params':>11}{'step TFLOPs':>13}{'policy params':>15}{'policy GFLOPs':>15}{'policy/step':>13}{'policy/call':>13}"
        print(head)
        print("-" * len(head))
        for f in full:
            print(f"{f['backbone']:<14}{f['network_params'] / 1e9:>10.2f}B{f['step_flops'] / 1e12:>13.2f}{f['policy_params'] / 1e6:>14.1f}M"
                  f"{f['policy_flops'] / 1e9:>15.2f}{100 * f['policy_over_step']:>12.3f}%{100 * f['policy_over_sampler']:>12.4f}%")

    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
        "threads": args.threads, "repeats": args.repeats,
        "tiny": rows, "full_size_estimate": full,
        "goals": {"per_row_over_shared": 1.05, "policy_over_step": 0.01},
    }
    print()
    write_result(record, write=args.write, out=args.out, committed=ROOT / "bench" / "results" / "backbones.json", root=ROOT, newline=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
