#!/usr/bin/env python
"""What instance-level schedules cost, as ratios measured in one run on this machine.

1. Analytic backbone: one batched sampler call with a different schedule on every row, over the same
   call with one shared (default) schedule on every row; for context, one call per row. Interleaved
   repeats, medians, several budgets and batch sizes.
2. The policy next to the sampler: the instance policy's forward (its deterministic mean schedule, what
   evaluation runs) over the sampler call, and in training the policy's sampling + log-prob + backward
   over sampling + reward.
3. The tiny real backbones (SD-XL, SD3.5, Flux-Dev, Flux-Schnell on random-weight pipelines): the numbers
   of scripts/bench_backbones.py, read from bench/results/backbones.json (run that script to refresh).
4. Evaluation throughput, images/s, for every suite in `jsbench.suites.available_suites()`: sampling,
   scoring, and end to end through `evaluate`.
5. Scale: evaluation images/s and training updates/s with 2 processes (torchrun, gloo, one thread each)
   over 1 process (one thread), the world already built in each process. Also 1 process with as many
   threads as the 2 processes have in all.

    python scripts/bench_cost.py                  # the table (--write: bench/results/cost.json)
    python scripts/bench_cost.py --repeats 5 --no-scale     # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.io import add_result_options, write_result, write_text_atomic  # noqa: E402
from jsbench.schedule import floor_increments, increments_from_sigmas, sigmas_from_increments  # noqa: E402
from jsbench.suites import available_suites, load_suite  # noqa: E402


def machine() -> dict:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "host": platform.node(), "cpu": model or platform.processor(), "logical_cpus": os.cpu_count(), "usable_cpus": affinity,
        "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
        "python": platform.python_version(), "torch": torch.__version__, "cuda": torch.cuda.is_available(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _per_row(default: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Distinct schedules around the default (what a policy emits): Dirichlet draws centred on it."""
    inc = increments_from_sigmas(default).double()
    g = torch.Generator().manual_seed(seed)
    draws = torch._sample_dirichlet(40.0 * inc / inc.sum(-1, keepdim=True), generator=g)
    return sigmas_from_increments(floor_increments(draws, 0.1 / inc.shape[-1])).to(default.dtype)


def _batch(bb, prompts: list[str], batch: int):
    ps = [prompts[i % len(prompts)] for i in range(batch)]
    return bb.encode(ps), bb.initial_noise(list(range(batch)))


# ------------------------------------------------------------------------------------ 1-2. analytic


def bench_analytic(bb, steps_list, batches, repeats, naive_batch) -> list[dict]:
    from jsbench.policy import make_policy

    prompts = [it.prompt for it in load_suite("geneval", bb).items("test")]
    rows = []
    for batch in batches:
        cond, x = _batch(bb, prompts, batch)
        for n in steps_list:
            shared = bb.default_sigmas(n, x)
            per_row = _per_row(shared)
            policy = make_policy(bb, n, "instance")
            policy.eval()
            calls = {
                "shared": lambda: bb.sample(x, cond, shared),
                "per_row": lambda: bb.sample(x, cond, per_row),
                "latents_per_row": lambda: bb.sample_latents(x, cond, per_row),
                "policy_mean_schedule": lambda: policy.mean_sigmas(x, cond.pooled),
            }
            if batch == naive_batch:
                calls["one_call_per_row"] = lambda: [bb.sample(x[i : i + 1], cond.take([i]), per_row[i : i + 1]) for i in range(batch)]
            for fn in calls.values():
                fn()  # warm-up
            times = {k: [] for k in calls}
            ratios = []
            # the pair alone, alternating which goes first (the first of a pair runs measurably slower
            # on a busy machine), an even number of times: the geometric mean cancels the order effect
            for r in range(2 * ((repeats + 1) // 2)):
                order = ["per_row", "shared"] if r % 2 == 0 else ["shared", "per_row"]
                got = {k: _timed(calls[k]) for k in order}
                ratios.append(got["per_row"] / got["shared"])
                for k in order:
                    times[k].append(got[k])
            for k in calls:
                if k not in ("per_row", "shared"):
                    times[k] = [_timed(calls[k]) for _ in range(repeats)]
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append({
                "batch": batch, "steps": n, "seconds_median": med,
                "per_row_over_shared": statistics.geometric_mean(ratios),
                "per_row_over_shared_median": statistics.median(ratios), "per_row_over_shared_all": ratios,
                "policy_over_sampler": med["policy_mean_schedule"] / med["per_row"],
                "policy_over_sampler_latents": med["policy_mean_schedule"] / med["latents_per_row"],
                "one_call_per_row_over_batched": (med["one_call_per_row"] / med["per_row"]) if "one_call_per_row" in med else None,
                "policy_params": sum(p.numel() for p in policy.parameters()),
            })
    return rows


def bench_training_split(steps: int, contexts: int, samples: int, updates: int) -> dict:
    """Per update: policy work (sample the Dirichlet, log-prob, backward, clipping, optimizer) vs sampler + reward,
    timed on the training step's own parts (Trainer.prepare, draw, generate, score, update; js baseline)."""
    from jsbench.distributed import DistContext
    from jsbench.train import TrainConfig, Trainer

    tr = Trainer(TrainConfig(steps=steps, contexts=contexts, samples=samples, iters=1, seed=0, baseline="js"), ROOT / "runs" / "bench-cost", dist=DistContext())
    parts = {"policy": [], "sampler": [], "reward": []}
    for it in range(updates + 1):
        ro = tr.prepare(it)  # contexts, encoded prompts, noise: not timed
        t0 = time.perf_counter()
        tr.draw(ro)
        t1 = time.perf_counter()
        tr.generate(ro)
        t2 = time.perf_counter()
        tr.score(ro)
        t3 = time.perf_counter()
        tr.update(ro)
        t4 = time.perf_counter()
        if it > 0:  # the first update pays one-off costs
            parts["policy"].append((t1 - t0) + (t4 - t3))
            parts["sampler"].append(t2 - t1)
            parts["reward"].append(t3 - t2)
    med = {k: statistics.median(v) for k, v in parts.items()}
    return {"steps": steps, "contexts": contexts, "samples": samples, "updates": updates, "seconds_median": med,
            "policy_over_sampler": med["policy"] / med["sampler"], "policy_over_sampler_and_reward": med["policy"] / (med["sampler"] + med["reward"])}


# ------------------------------------------------------------------------------------ 4. suites


def bench_suites(bb, steps: int, seeds: int, batch: int) -> list[dict]:
    from jsbench.evaluate import encode_rows, evaluate, resolve_schedule, sample_source

    out = []
    for name in available_suites():
        try:
            suite = load_suite(name, bb)
        except Exception as exc:  # a suite whose dependencies are missing is reported, not fatal
            out.append({"suite": name, "error": f"{exc.__class__.__name__}: {exc}"})
            continue
        items = suite.items("test")
        source = resolve_schedule("default", bb, steps)
        cold = _timed(lambda: evaluate(bb, suite, source, 1, items=items[:2], progress=False))  # builds world / loads engines
        rows = [(it, s) for it in items for s in range(seeds)]
        n = len(rows)
        t_sample = t_score = 0.0
        for start in range(0, n, batch):
            chunk = rows[start : start + batch]
            cond, x = encode_rows(bb, chunk)  # evaluate's own batch, its parts timed apart (encoding not timed)
            t = time.perf_counter()
            images = sample_source(bb, source, x, cond)
            t_sample += time.perf_counter() - t
            t = time.perf_counter()
            suite.score(images, [it for it, _ in chunk])
            t_score += time.perf_counter() - t
        t_eval = _timed(lambda: evaluate(bb, suite, source, seeds, items=items, progress=False, batch_size=batch))
        out.append({"suite": name, "steps": steps, "images": n, "prompts": len(items), "seeds": seeds, "first_call_seconds": cold,
                    "sampling_images_per_s": n / t_sample, "scoring_images_per_s": n / t_score, "evaluate_images_per_s": n / t_eval,
                    "scoring_share": t_score / (t_sample + t_score)})
    return out


# ------------------------------------------------------------------------------------ 5. scale


def scale_worker(args) -> int:
    """Run inside torchrun (or alone): time sharded evaluation and distributed training updates."""
    from jsbench.distributed import evaluate_sharded, get_context
    from jsbench.evaluate import evaluate, resolve_schedule
    from jsbench.train import TrainConfig, Trainer

    torch.set_num_threads(args.threads)
    ctx = get_context()
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    items = suite.items("test")
    source = resolve_schedule("default", bb, args.scale_eval_steps)
    evaluate(bb, suite, source, 1, items=items[:1], progress=False)  # builds the world in this process
    ctx.barrier()
    t = time.perf_counter()
    run = evaluate_sharded(bb, suite, source, ctx, seeds_per_prompt=args.scale_seeds, progress=False)
    ctx.barrier()
    eval_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(TrainConfig(steps=args.scale_train_steps, contexts=args.scale_contexts, samples=4, iters=1, seed=0), tmp, backbone=bb, dist=ctx)
        tr.step(0)
        ctx.barrier()
        t = time.perf_counter()
        for it in range(1, args.scale_updates + 1):
            tr.step(it)
        ctx.barrier()
        train_s = time.perf_counter() - t
    if ctx.is_main:
        write_text_atomic(Path(args.scale_worker), json.dumps({  # the parent reads it once the worker exits
            "processes": ctx.world_size, "threads_per_process": torch.get_num_threads(), "backend": ctx.backend,
            "eval_images": len(run.scores), "eval_seconds": eval_s, "eval_images_per_s": len(run.scores) / eval_s,
            "train_updates": args.scale_updates, "train_seconds": train_s, "train_updates_per_s": args.scale_updates / train_s,
            "train_samples_per_update": args.scale_contexts * 4,
        }))
    ctx.close()  # every process leaves the group together, once rank 0 has written
    return 0


def bench_scale(args) -> dict:
    from jsbench.distributed import free_port

    script = str(Path(__file__).resolve())
    runs = {}
    # two threads in one process oversubscribe a busy 2-core machine badly (tens of times slower): a
    # fifth of the work is enough to measure that rate
    for label, procs, threads, share in [("1 process x 1 thread", 1, 1, 1), ("2 processes x 1 thread", 2, 1, 1), ("1 process x 2 threads", 1, 2, 5)]:
        common = ["--scale-seeds", str(max(1, args.scale_seeds // share)), "--scale-updates", str(max(1, args.scale_updates // share)),
                  "--scale-contexts", str(args.scale_contexts), "--scale-eval-steps", str(args.scale_eval_steps), "--scale-train-steps", str(args.scale_train_steps)]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "r.json"
            env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
            env["OMP_NUM_THREADS"] = str(threads)
            worker = [script, "--scale-worker", str(out), "--threads", str(threads), *common]
            if procs > 1:
                cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(procs),
                       "--master-addr", "127.0.0.1", "--master-port", str(free_port()), *worker]
            else:
                cmd = [sys.executable, *worker]
            t = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"scale run '{label}' failed:\n{proc.stderr[-3000:]}")
            runs[label] = {**json.loads(out.read_text()), "wall_seconds_incl_start": time.perf_counter() - t, "load_average_after": os.getloadavg()}
            print(f"    {label}: eval {runs[label]['eval_images_per_s']:.0f} images/s, train {runs[label]['train_updates_per_s']:.2f} updates/s", flush=True)
    one, two = runs["1 process x 1 thread"], runs["2 processes x 1 thread"]
    return {"runs": runs,
            "eval_2proc_over_1proc": two["eval_images_per_s"] / one["eval_images_per_s"],
            "train_2proc_over_1proc": two["train_updates_per_s"] / one["train_updates_per_s"],
            "eval_2proc_over_1proc_2threads": two["eval_images_per_s"] / runs["1 process x 2 threads"]["eval_images_per_s"],
            "train_2proc_over_1proc_2threads": two["train_updates_per_s"] / runs["1 process x 2 threads"]["train_updates_per_s"]}


# ------------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[3, 5, 10, 20])
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--naive-batch", type=int, default=64, help="batch at which one-call-per-row is also timed")
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: least noise on a shared CPU)")
    ap.add_argument("--suite-seeds", type=int, default=4)
    ap.add_argument("--suite-steps", type=int, default=5)
    ap.add_argument("--no-scale", dest="scale", action="store_false", help="skip the 1 vs 2 process measurement")
    ap.add_argument("--scale-seeds", type=int, default=64)
    ap.add_argument("--scale-updates", type=int, default=100)
    ap.add_argument("--scale-contexts", type=int, default=16)
    ap.add_argument("--scale-eval-steps", type=int, default=5)
    ap.add_argument("--scale-train-steps", type=int, default=5)
    ap.add_argument("--scale-worker", default=None, help=argparse.SUPPRESS)
    add_result_options(ap, "bench/results/cost.json")
    args = ap.parse_args(argv)
    if args.scale_worker:
        return scale_worker(args)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    mach = machine()

    bb = load_backbone("analytic")
    print("  analytic sampling ...", flush=True)
    analytic = bench_analytic(bb, args.steps, args.batches, args.repeats, args.naive_batch)
    print("  training split ...", flush=True)
    training = [bench_training_split(n, 16, 4, 20) for n in (3, 20)]
    print("  suites ...", flush=True)
    suites = bench_suites(bb, args.suite_steps, args.suite_seeds, 512)
    tiny_path = ROOT / "bench" / "results" / "backbones.json"
    tiny = json.loads(tiny_path.read_text()) if tiny_path.is_file() else None
    scale = None
    if args.scale:
        print("  scale (1 vs 2 processes) ...", flush=True)
        scale = bench_scale(args)

    print(f"\nmachine: {mach['cpu']}, {mach['usable_cpus']} usable of {mach['logical_cpus']} logical CPUs, torch {mach['torch']}, "
          f"{args.threads} intra-op thread(s), load average {', '.join(f'{v:.1f}' for v in mach['load_average'])} at start")
    print(f"\n1-2. analytic backbone: one batched call; per/shared = geometric mean of {2 * ((args.repeats + 1) // 2)} alternating pairs, times = medians")
    head = f"{'batch':>6}{'steps':>6}{'shared ms':>11}{'per-row ms':>12}{'per/shared':>12}{'1 call/row':>12}{'policy ms':>11}{'policy/sampler':>16}{'/latents only':>15}"
    print(head)
    print("-" * len(head))
    for r in analytic:
        s = r["seconds_median"]
        naive = f"{r['one_call_per_row_over_batched']:.1f}x" if r["one_call_per_row_over_batched"] else "-"
        print(f"{r['batch']:>6}{r['steps']:>6}{1e3 * s['shared']:>11.2f}{1e3 * s['per_row']:>12.2f}{r['per_row_over_shared']:>11.3f}x"
              f"{naive:>12}{1e3 * s['policy_mean_schedule']:>11.3f}{100 * r['policy_over_sampler']:>15.2f}%{100 * r['policy_over_sampler_latents']:>14.2f}%")
    print("\n    training update (B=16, K=4), medians:")
    for t in training:
        s = t["seconds_median"]
        print(f"    {t['steps']:>3} steps: policy (draw + log-prob + backward + AdamW) {1e3 * s['policy']:.1f} ms, sampler {1e3 * s['sampler']:.1f} ms, "
              f"reward {1e3 * s['reward']:.1f} ms: policy/sampler {100 * t['policy_over_sampler']:.1f}%, "
              f"policy/(sampler+reward) {100 * t['policy_over_sampler_and_reward']:.1f}%")
    if tiny:
        print(f"\n3. tiny real backbones (from {tiny_path.relative_to(ROOT)}, {tiny.get('when')}, {tiny.get('threads')} thread(s), batch {tiny['tiny'][0]['batch'] if tiny.get('tiny') else '?'})")
        for r in tiny.get("tiny", []):
            print(f"    {r['backbone']:<13} per-row/shared {r['per_row_over_shared_median']:.3f}x   tiny policy/sampler {100 * r['tiny_policy_over_sampler']:.2f}%")
        for f in tiny.get("full_size_estimate", []):
            print(f"    {f['backbone']:<13} full size (FLOPs): policy/step {100 * f['policy_over_step']:.3f}%   policy/sampler call {100 * f['policy_over_sampler']:.4f}%")
    else:
        print("\n3. tiny real backbones: bench/results/backbones.json missing; run python scripts/bench_backbones.py")
    print(f"\n4. evaluation throughput, analytic backbone, default schedule, {args.suite_steps} steps, test prompts x {args.suite_seeds} seeds, batch 512")
    head = f"{'suite':<9}{'images':>8}{'sampling img/s':>16}{'scoring img/s':>15}{'evaluate img/s':>16}{'scoring share':>15}{'first call s':>14}"
    print(head)
    print("-" * len(head))
    for s in suites:
        if "error" in s:
            print(f"{s['suite']:<9}  unavailable: {s['error']}")
            continue
        print(f"{s['suite']:<9}{s['images']:>8}{s['sampling_images_per_s']:>16.0f}{s['scoring_images_per_s']:>15.0f}{s['evaluate_images_per_s']:>16.0f}"
              f"{100 * s['scoring_share']:>14.0f}%{s['first_call_seconds']:>14.1f}")
    if scale:
        print(f"\n5. scale: geneval evaluation ({args.scale_eval_steps} steps, {args.scale_seeds} seeds) and training updates "
              f"(B={args.scale_contexts}, K=4, {args.scale_train_steps} steps), world built before timing")
        for label, r in scale["runs"].items():
            print(f"    {label:<24} eval {r['eval_images_per_s']:>7.0f} images/s   train {r['train_updates_per_s']:>6.2f} updates/s")
        print(f"    2 processes over 1 (1 thread each): eval {scale['eval_2proc_over_1proc']:.2f}x, train {scale['train_2proc_over_1proc']:.2f}x; "
              f"over 1 process with 2 threads: eval {scale['eval_2proc_over_1proc_2threads']:.2f}x, train {scale['train_2proc_over_1proc_2threads']:.2f}x")

    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": "python scripts/bench_cost.py " + " ".join(argv or sys.argv[1:]),
        "machine": mach, "load_average_end": os.getloadavg(), "threads": args.threads, "repeats": args.repeats,
        "analytic": analytic, "training": training, "suites": suites,
        "tiny_backbones": {"source": str(tiny_path.relative_to(ROOT)), "when": tiny.get("when"),
                           "rows": [{k: r[k] for k in ("backbone", "batch", "steps", "per_row_over_shared_median", "tiny_policy_over_sampler")} for r in tiny.get("tiny", [])],
                           "full_size_estimate": tiny.get("full_size_estimate", [])} if tiny else None,
        "scale": scale, "seconds": time.perf_counter() - start,
    }
    print()
    write_result(record, write=args.write, out=args.out, committed=ROOT / "bench" / "results" / "cost.json", root=ROOT, newline=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
