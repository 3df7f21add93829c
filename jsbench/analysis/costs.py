"""What instance-level schedules cost, measured on this machine: the library behind scripts/bench_cost.py.

`bench_analytic`: one batched sampler call with a different schedule on every row over the same call
with one shared schedule (and one call per row), with the policy's forward beside it;
`bench_training_split`: a training update's policy part over its sampler and reward parts;
`bench_suites`: evaluation throughput per suite; `bench_scale` / `scale_worker`: 1 vs 2 processes.
`per_row_schedules` and `time_per_row_against_shared` (its timing loop) are shared with
jsbench/analysis/backbone_costs.py; `machine` with scripts/bench_throughput.py.
"""

from __future__ import annotations

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

from jsbench import JsbenchError
from jsbench.backbones import load_backbone
from jsbench.io import write_text_atomic
from jsbench.schedule import floor_increments, increments_from_sigmas, sigmas_from_increments
from jsbench.suites import available_suites, load_suite


def machine() -> dict:
    """The machine a measurement ran on: CPU, threads, versions, load."""
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


def timed(fn) -> float:
    """Seconds `fn()` takes."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def time_per_row_against_shared(calls: dict, repeats: int) -> tuple[dict[str, float], list[float]]:
    """(median seconds of each call, per_row / shared ratios): every call warmed up once, then the pair
    `per_row`, `shared` alone, alternating which goes first (the first of a pair runs measurably slower on a
    busy machine) an even number of times, so the geometric mean of the ratios cancels the order effect;
    every other call is timed `repeats` times after the pairs."""
    for fn in calls.values():
        fn()  # warm-up: first calls pay one-off kernel setup
    times: dict[str, list[float]] = {k: [] for k in calls}
    ratios = []
    for r in range(2 * ((repeats + 1) // 2)):
        order = ["per_row", "shared"] if r % 2 == 0 else ["shared", "per_row"]
        got = {k: timed(calls[k]) for k in order}
        ratios.append(got["per_row"] / got["shared"])
        for k in order:
            times[k].append(got[k])
    for k in calls:
        if k not in ("per_row", "shared"):
            times[k] = [timed(calls[k]) for _ in range(repeats)]
    return {k: statistics.median(v) for k, v in times.items()}, ratios


def per_row_schedules(default: torch.Tensor, seed: int = 0, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Distinct schedules around the default (what a policy emits): Dirichlet draws centred on it, in
    `dtype` (default: the default schedule's)."""
    inc = increments_from_sigmas(default).double()
    g = torch.Generator().manual_seed(seed)
    draws = torch._sample_dirichlet(40.0 * inc / inc.sum(-1, keepdim=True), generator=g)
    return sigmas_from_increments(floor_increments(draws, 0.1 / inc.shape[-1])).to(dtype or default.dtype)


def _batch(bb, prompts: list[str], batch: int):
    ps = [prompts[i % len(prompts)] for i in range(batch)]
    return bb.encode(ps), bb.initial_noise(list(range(batch)))


# ------------------------------------------------------------------------------------ 1-2. analytic


def bench_analytic(bb, steps_list, batches, repeats, naive_batch) -> list[dict]:
    from jsbench.policy.schedule_policy import make_policy

    prompts = [it.prompt for it in load_suite("geneval", bb).items("test")]
    rows = []
    for batch in batches:
        cond, x = _batch(bb, prompts, batch)
        for n in steps_list:
            shared = bb.default_sigmas(n, x)
            per_row = per_row_schedules(shared)
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
            med, ratios = time_per_row_against_shared(calls, repeats)
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


def bench_training_split(steps: int, contexts: int, samples: int, updates: int, out: Path) -> dict:
    """Per update: policy work (sample the Dirichlet, log-prob, backward, clipping, optimizer) vs sampler + reward,
    timed on the training step's own parts (Trainer.prepare, draw, generate, score, update; js baseline)."""
    from jsbench.distributed import DistContext
    from jsbench.train.reinforce import TrainConfig, Trainer

    tr = Trainer(TrainConfig(steps=steps, contexts=contexts, samples=samples, iters=1, seed=0, baseline="js"), out, dist=DistContext())
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
    from jsbench.evaluation.evaluate import encode_rows, evaluate, resolve_schedule, sample_source

    out = []
    for name in available_suites():
        try:
            suite = load_suite(name, bb)
        except Exception as exc:  # a suite whose dependencies are missing is reported, not fatal
            out.append({"suite": name, "error": f"{exc.__class__.__name__}: {exc}"})
            continue
        items = suite.items("test")
        source = resolve_schedule("default", bb, steps)
        try:  # a suite whose prompts this backbone cannot draw (HPDv2's, where its files exist, on a world) is reported
            cold = timed(lambda: evaluate(bb, suite, source, 1, items=items[:2], progress=False))  # builds world / loads engines
        except JsbenchError as exc:
            out.append({"suite": name, "error": f"{exc.__class__.__name__}: {exc}"})
            continue
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
        t_eval = timed(lambda: evaluate(bb, suite, source, seeds, items=items, progress=False, batch_size=batch))
        out.append({"suite": name, "steps": steps, "images": n, "prompts": len(items), "seeds": seeds, "first_call_seconds": cold,
                    "sampling_images_per_s": n / t_sample, "scoring_images_per_s": n / t_score, "evaluate_images_per_s": n / t_eval,
                    "scoring_share": t_score / (t_sample + t_score)})
    return out


# ------------------------------------------------------------------------------------ 5. scale


def scale_worker(args) -> int:
    """Run inside torchrun (or alone): time sharded evaluation and distributed training updates."""
    from jsbench.distributed import get_context
    from jsbench.evaluation.evaluate import evaluate, evaluate_sharded, resolve_schedule
    from jsbench.train.reinforce import TrainConfig, Trainer

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


def bench_scale(args, script: str) -> dict:
    """1 vs 2 processes (and 1 process with 2 threads): runs `script` (the entry point that calls
    `scale_worker` on --scale-worker) under torchrun or alone, with `args`' --scale-* options."""
    from jsbench.distributed import free_port

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
