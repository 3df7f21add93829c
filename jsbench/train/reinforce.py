"""REINFORCE for schedule policies, with a leave-one-out reward baseline.

One update: B contexts (prompt, seed) drawn from the suite's training prompts; K schedules sampled per
context from the policy's Dirichlet; one batched sampler call for all B*K rows; rewards [B, K];
advantages r - b with b from `baselines`; loss = -mean(adv * log pi); AdamW; gradient clipping.
In code, `Trainer.step(it)` is `update(rollout(it))`: a `Rollout` (prepare -> draw -> generate -> score: the
contexts, the schedules drawn, the images, the rewards; the policy untouched) and an update on it
(`policy_loss`, backward, clipping, optimizer step), so a benchmark times or reuses either part.

Reproducible by construction: the contexts and the Dirichlet draws of update `it` depend only on
(seed, it), so a run resumed from a checkpoint draws exactly what the uninterrupted run drew, and ends
with the same parameters and the same log.

Under a launcher (torchrun, accelerate launch) the B contexts are split over the processes, rewards
are all-gathered before the baseline and gradients summed; see `jsbench.distributed`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.backbones import load_backbone, recorded_guidance
from jsbench.backbones.base import sample_rollout_rows, train_batch_size
from jsbench.baselines import advantages, validate_baseline
from jsbench.policy.convergence import run_convergence
from jsbench.devices import pick_device
from jsbench.distributed import DistContext, get_context
from jsbench.io import append_lines, replacing, write_json_atomic, write_text_atomic
from jsbench.policy.schedule_policy import SchedulePolicy, default_arch, make_policy
from jsbench.rewards import check_reward_prompts, load_reward
from jsbench.suites import load_suite, suite_options
from jsbench.train.config import TrainConfig, train_command  # the run's fields with their CLI help (torch-free, for `jsbench train --help`)

TRAIN_SEED_BASE = 1_000_000  # training noise seeds live far below evaluation's (jsbench.evaluation.evaluate.NOISE_SEED_RANGE)
# each training seed draws its own noise stream, TRAIN_SEED_BASE + seed * STRIDE + it * B + b: seeds are
# independent in their noise as in their initialisation and contexts (seed 0's stream is the one every seed
# shared before); the stride leaves room for 2**30 noises a seed, and MAX_SEED keeps the streams below 2**40
TRAIN_SEED_STRIDE = 2**30
MAX_SEED = 999
# the held-out score: the run's training prompts, each on noise no update draws (image HELDOUT_IMAGE of
# `jsbench.evaluation.evaluate.noise_seed`, far from the leaderboards' images 0..), scored at the policy's mean schedule
HELDOUT_IMAGE = 1_000
HELDOUT_POINTS = 20  # held-out scores in a run by default (every iters/20 updates), besides the untrained one
# what a resumed run must share with its checkpoint's: what decides its updates or its held-out curve. Not --iters
# (checked apart), nor where and how fast it runs, nor paths (--model, --prompts-file: the same file may be named
# another way). A field whose None means "the default" (_RESUME_EXPLICIT) is compared only where both runs named a
# value: None is resolved by the backbone and device, which the checkpoint does not record.
_RESUME_MUST_MATCH = ("backbone", "steps", "baseline", "reward", "suite", "policy", "contexts", "samples", "lr",
                      "network_lr", "weight_decay", "grad_clip", "concentration", "policy_arch", "seed",
                      "heldout_prompts", "noise_stream")
_RESUME_EXPLICIT = ("width", "ocr_protocol", "guidance", "dtype")
# a checkpoint from before a field existed ran as this value of it (before per-seed noise every seed drew seed 0's)
_RESUME_BEFORE_THE_FIELD = {"noise_stream": "shared"}


class TrainError(JsbenchError):
    pass


def heldout_cadence(heldout_every: int | None, iters: int) -> int:
    """Updates between held-out scores: `heldout_every` where a run names it, else every iters/20."""
    return heldout_every or max(1, iters // HELDOUT_POINTS)


def _update_rng(seed: int, it: int) -> tuple[np.random.Generator, int]:
    """Everything random in update `it` comes from here (contexts, noise seeds, Dirichlet draws)."""
    ss = np.random.SeedSequence([seed, it])
    rng = np.random.default_rng(ss)
    return rng, int(ss.generate_state(1, dtype=np.uint32)[0])


@dataclass
class Rollout:
    """What one update samples with the current policy, before any baseline. Under a launcher the tensors
    are this process's share of the contexts (`shard` = [lo, hi)), except `rewards`, the global batch's;
    `prompts` and `seeds` are always the global batch's. Filled in order by `Trainer.prepare`, `draw`,
    `generate` and `score`."""

    iteration: int
    prompts: list[str]  # [B] the update's contexts
    seeds: list[int]  # [B] their noise seeds
    torch_seed: int  # seeds the Dirichlet draws
    shard: tuple[int, int]
    cond: object  # the shard's encoded prompts (a backbone Condition)
    x_T: torch.Tensor  # [b, ...] the shard's initial noise
    simplex: torch.Tensor | None = None  # [b, K, N] the floored Dirichlet draws log_prob scores
    sigmas: torch.Tensor | None = None  # [b*K, N+1] float32, row r = context r // K
    rows: torch.Tensor | None = None  # [b*K] the context of each sampled row
    images: torch.Tensor | None = None  # [b*K, ...]
    local: torch.Tensor | None = None  # [b, K] float64: this process's rewards
    rewards: torch.Tensor | None = None  # [B, K] float64: every process's
    trajectory: tuple | None = None  # --policy tpdm: (the latents each draw read, the ratios drawn [b*K, N-1])


class Trainer:
    def __init__(self, config: TrainConfig, out: str | Path, backbone=None, dist: DistContext | None = None):
        self.config = config
        self.out = Path(out)
        self.dist = dist or get_context()
        if config.threads is not None:
            torch.set_num_threads(config.threads)  # before anything is computed: sums depend on it
        from jsbench.policy.schedule_policy import POLICY_KINDS

        if config.policy not in POLICY_KINDS:
            raise TrainError(f"--policy must be {', '.join(POLICY_KINDS[:-1])} or {POLICY_KINDS[-1]}, got {config.policy!r}")
        if config.policy != "indis":  # indis has no reward, so no baseline (jsbench/train/peers.py)
            validate_baseline(config.baseline, config.contexts, config.samples)  # B is the global batch
        suite_opts = suite_options(config.suite, config.ocr_protocol, config.prompts_file)  # refused before any weights load
        if config.iters < 1:
            raise TrainError(f"--iters must be at least 1, got {config.iters}")
        if not 0 <= config.seed <= MAX_SEED:
            raise TrainError(f"--seed must be in 0..{MAX_SEED}, got {config.seed}")
        if config.iters * config.contexts > TRAIN_SEED_STRIDE:
            raise TrainError(f"--iters x --contexts is {config.iters * config.contexts}: a seed's noise stream holds {TRAIN_SEED_STRIDE}")
        if config.contexts < self.dist.world_size:
            raise TrainError(f"--contexts {config.contexts} is fewer than the {self.dist.world_size} processes: each needs at least one")
        device = pick_device(config.device, dist=self.dist)  # one accelerator per process; None: the backbone's default
        self.backbone = backbone or load_backbone(
            config.backbone, config.model, device, dtype=config.dtype, offload=config.offload_mode or config.offload, decode_chunk=config.decode_chunk,
            guidance=config.guidance,
        )
        if config.batch_size is not None and config.batch_size < 1:
            raise TrainError(f"--batch-size must be at least 1, got {config.batch_size}")
        if not 1 <= config.steps <= self.backbone.max_steps:
            raise TrainError(f"--steps must be in 1..{self.backbone.max_steps} for backbone {self.backbone.name}, got {config.steps}")
        from jsbench.train.peers import check_peer_run, freeze_backbone

        check_peer_run(config, self.backbone, self.dist)  # tpdm, indis: refused where they cannot run
        if config.policy == "indis":
            freeze_backbone(self.backbone)
        self.reward = load_reward(config.reward, self.backbone)
        self.suite = load_suite(config.suite, self.backbone, **suite_opts)
        train_items = self.suite.items("train")
        self.prompts = [it.prompt for it in train_items]
        check_reward_prompts(self.reward, self.prompts)  # a prompt the reward cannot score: refused before the run's folder is made
        # the held-out set: `heldout_prompts` training prompts spread evenly over the split (so over its tasks)
        p = min(config.heldout_prompts, len(train_items))
        self.heldout_items = [train_items[(i * len(train_items)) // p] for i in range(p)] if p else []
        self.heldout_every = heldout_cadence(config.heldout_every, config.iters)
        torch.manual_seed(config.seed)  # parameter init
        arch = config.policy_arch
        if arch == "auto":
            arch = default_arch(self.backbone) if config.policy in ("instance", "indis") else "small"
        sizes = {"width": config.width} if config.width is not None else {} if arch == "xattn" else {"width": 128}
        self.policy: SchedulePolicy = make_policy(self.backbone, config.steps, config.policy, concentration=config.concentration, arch=arch, **sizes)
        self.dist.broadcast_parameters(self.policy)
        # The schedule-level parameters (a global policy's alpha, an instance policy's output bias) move the
        # shared schedule and can take large steps; the conditioning network learns the per-instance
        # deviations and needs small ones, or its noise features make the policy oscillate.
        shared_names = ("delta", "head.bias", "step_bias")  # step_bias: a tpdm policy's per-step offsets
        shared = [p for n, p in self.policy.named_parameters() if n in shared_names]
        network = [p for n, p in self.policy.named_parameters() if n not in shared_names]
        groups = [{"params": shared, "lr": config.lr}] + ([{"params": network, "lr": config.network_lr}] if network else [])
        self.optimizer = torch.optim.AdamW(groups, lr=config.lr, weight_decay=config.weight_decay)
        self.iteration = 0

    # ------------------------------------------------------------------------------------ checkpoints

    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint.pt"

    @property
    def log_path(self) -> Path:
        return self.out / "train_log.jsonl"

    @property
    def heldout_path(self) -> Path:
        return self.out / "heldout.jsonl"

    def save_checkpoint(self) -> None:
        if not self.dist.is_main:
            return  # written once, by rank 0
        self.out.mkdir(parents=True, exist_ok=True)
        state = {
            "iteration": self.iteration,
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "config": asdict(self.config),
            "torch_rng": torch.get_rng_state(),
        }
        with replacing(self.checkpoint_path) as tmp:
            torch.save(state, tmp)

    def resume(self) -> None:
        if not self.checkpoint_path.is_file():
            raise TrainError(f"nothing to resume: {self.checkpoint_path} does not exist")
        try:
            # onto the policy's device (the backbone's): a checkpoint written on a GPU resumes on it, and one
            # written on a CPU resumes on a GPU; the RNG state alone must be a CPU tensor
            state = torch.load(self.checkpoint_path, map_location=self.policy_device, weights_only=True)
            saved = state["config"]
            defaults = {f.name: f.default for f in fields(TrainConfig)}
            for key in _RESUME_MUST_MATCH + _RESUME_EXPLICIT:
                had, asks = saved.get(key, _RESUME_BEFORE_THE_FIELD.get(key, defaults[key])), getattr(self.config, key)
                if had != asks and not (key in _RESUME_EXPLICIT and (had is None or asks is None)):
                    raise TrainError(f"cannot resume: checkpoint has {key}={had!r}, this run asks {asks!r}")
            if int(state["iteration"]) > self.config.iters:  # going on would not make the run this command names
                raise TrainError(f"cannot resume: the checkpoint is at update {int(state['iteration'])}, past this run's "
                                 f"--iters {self.config.iters}; start again with --overwrite")
            # the held-out points follow from the cadence, by default from --iters: a run extended to more updates
            # keeps its points only where it names its checkpoint's cadence (and its command then records it)
            had_every = heldout_cadence(saved.get("heldout_every"), int(saved["iters"]))
            if saved.get("heldout_prompts", defaults["heldout_prompts"]) and had_every != self.heldout_every:
                raise TrainError(f"cannot resume: the checkpoint's run scores the held-out set every {had_every} updates, "
                                 f"this one every {self.heldout_every}; pass --heldout-every {had_every}")
            self.policy.load_state_dict(state["policy"])
            self.optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"].cpu())
            self.iteration = int(state["iteration"])
        except TrainError:
            raise
        except Exception as exc:  # a truncated or corrupted file: one line, not a traceback
            raise TrainError(f"checkpoint {self.checkpoint_path} is corrupt ({exc.__class__.__name__}); delete it or start without --resume") from None
        # a finished run's last point may be off the cadence (every run scores its last update); extended, the run
        # has no point there
        off_cadence = self.iteration % self.heldout_every != 0 and self.iteration < self.config.iters
        self._truncate_log(self.iteration, heldout_through=self.iteration - 1 if off_cadence else self.iteration)

    def _truncate_log(self, keep: int, heldout_through: int | None = None) -> None:
        """Drop log lines of updates after the checkpoint (they will be redone identically), and held-out
        scores after it (a held-out score at the checkpoint's own iteration was written before it), or after
        `heldout_through`."""
        if not self.dist.is_main:
            return
        last = keep if heldout_through is None else heldout_through
        for path, limit in ((self.log_path, keep), (self.heldout_path, last + 1)):
            if not path.exists():
                continue
            kept = []
            for ln in (ln for ln in path.read_text().splitlines() if ln.strip()):
                try:
                    if json.loads(ln)["iteration"] < limit:
                        kept.append(ln)
                except (json.JSONDecodeError, KeyError):
                    break  # a line cut by the kill
            write_text_atomic(path, "".join(k + "\n" for k in kept))

    # ------------------------------------------------------------------------------------------ update

    def contexts_for(self, it: int) -> tuple[list[str], list[int], int]:
        rng, torch_seed = _update_rng(self.config.seed, it)
        idx = rng.integers(len(self.prompts), size=self.config.contexts)
        stream = 0 if self.config.noise_stream == "shared" else self.config.seed  # shared: an older run's (every seed seed 0's)
        first = TRAIN_SEED_BASE + stream * TRAIN_SEED_STRIDE + it * self.config.contexts
        seeds = [first + b for b in range(self.config.contexts)]
        return [self.prompts[i] for i in idx], seeds, torch_seed

    @property
    def policy_device(self) -> torch.device:
        return next(self.policy.parameters()).device

    # One update is a rollout (what the current policy samples, and its rewards) and then an update (baseline,
    # log-prob, backward, clipping, optimizer step). The rollout's parts are seams of their own, so a benchmark
    # can time or reuse them: prepare (contexts, encoded prompts, noise) -> draw (the K schedules per context)
    # -> generate (the sampler) -> score (rewards, gathered over processes).

    def prepare(self, it: int) -> Rollout:
        """Update `it`'s contexts (the global batch) and this process's share of them, encoded, with their noise."""
        prompts, seeds, torch_seed = self.contexts_for(it)
        lo, hi = self.dist.shard_range(self.config.contexts)  # this process's contexts (all of them for one process)
        cond = self.backbone.encode(prompts[lo:hi])
        x_T = self.backbone.initial_noise(seeds[lo:hi])
        return Rollout(iteration=it, prompts=prompts, seeds=seeds, torch_seed=torch_seed, shard=(lo, hi), cond=cond, x_T=x_T)

    def draw(self, ro: Rollout) -> Rollout:
        """The policy's K schedules per context: the Dirichlet draws and their sigmas."""
        cfg = self.config
        lo, hi = ro.shard
        torch.manual_seed(ro.torch_seed)
        c = ro.cond
        if cfg.policy == "tpdm":  # its schedules are drawn step by step while sampling (`generate`)
            ro.rows = torch.arange(hi - lo, device=ro.x_T.device).repeat_interleave(cfg.samples)
            return ro
        if self.dist.distributed:  # the global batch's draws on every process, so they equal one process's
            gather = self.dist.gather_rows
            tokens = None if c.tokens is None else (gather(c.tokens), gather(c.token_mask))
            ro.simplex = self.policy.sample_simplex(gather(ro.x_T), gather(c.pooled), cfg.samples, *(tokens or ()))[lo:hi]
        else:
            ro.simplex = self.policy.sample_simplex(ro.x_T, c.pooled, cfg.samples, c.tokens, c.token_mask)  # [B, K, N]
        # float32 sigmas, exactly the floored simplex that log_prob scores: never rounded to the latents'
        # dtype (in bf16 neighbouring sigmas near 1 merge); the adapter alone makes timesteps of them
        ro.sigmas = self.policy.sigmas(ro.simplex).reshape(-1, cfg.steps + 1)
        ro.rows = torch.arange(hi - lo, device=ro.x_T.device).repeat_interleave(cfg.samples)
        return ro

    def generate(self, ro: Rollout) -> Rollout:
        """The images of every (context, schedule) row, `batch_size` rows per sampler call."""
        if self.config.policy == "tpdm":
            from jsbench.train.peers import tpdm_generate

            return tpdm_generate(self, ro)
        batch = self.config.batch_size or train_batch_size(self.backbone)
        ro.images = sample_rollout_rows(self.backbone, ro.x_T, ro.cond, ro.rows, ro.sigmas.to(ro.x_T.device), batch)
        return ro

    def score(self, ro: Rollout) -> Rollout:
        """This process's rewards [b, K] and the global batch's [B, K] (gathered before any baseline: js and
        xctx pool contexts)."""
        lo, hi = ro.shard
        ro.local = self.reward(ro.images, [ro.prompts[lo + i] for i in ro.rows.tolist()]).view(hi - lo, self.config.samples).double()
        ro.rewards = self.dist.gather_rows(ro.local)
        return ro

    def rollout(self, it: int) -> Rollout:
        """Everything update `it` samples with the current policy, up to the rewards; nothing is updated."""
        return self.score(self.generate(self.draw(self.prepare(it))))

    def policy_loss(self, ro: Rollout, baseline: str | None = None) -> tuple[torch.Tensor, float | None]:
        """REINFORCE's loss on a rollout, -mean(adv * log pi), and the baseline's shrinkage (None if it has
        none). `baseline` defaults to the run's; under a launcher the loss is this process's share of the
        global mean, so the summed gradients are the global one."""
        lo, hi = ro.shard
        adv, lam = advantages(self.config.baseline if baseline is None else baseline, ro.rewards)
        if self.config.policy == "tpdm":
            from jsbench.train.peers import tpdm_log_prob

            log_prob = tpdm_log_prob(self, ro)
        else:
            log_prob = self.policy.log_prob(ro.x_T, ro.cond.pooled, ro.simplex, ro.cond.tokens, ro.cond.token_mask)
        if self.dist.distributed:
            loss = -(adv[lo:hi].to(log_prob.device, log_prob.dtype) * log_prob).sum() / ro.rewards.numel()
        else:
            loss = -(adv.to(log_prob.device, log_prob.dtype) * log_prob).mean()
        return loss, lam

    def update(self, ro: Rollout) -> dict:
        """One optimizer step on a rollout (skipped on a non-finite reward or gradient); the log record."""
        rewards = ro.rewards
        record = {"iteration": ro.iteration, "reward": float(rewards.mean()), "reward_std": float(rewards.std())}
        bad = ~torch.isfinite(rewards)
        if bad.any():
            i = int(bad.any(1).nonzero()[0])
            record.update(skipped=f"non-finite reward for prompt {ro.prompts[i]!r} (seed {ro.seeds[i]}): update skipped")
            record["reward"] = float(rewards[~bad].mean()) if (~bad).any() else float("nan")
            return record
        loss, lam = self.policy_loss(ro)
        grad_norm = self.optimize(loss, record)
        if grad_norm is not None:
            record.update(loss=self.dist.sum_scalar(float(loss.detach())), grad_norm=grad_norm, shrinkage=lam)
        return record

    def optimize(self, loss: torch.Tensor, record: dict) -> float | None:
        """Back-propagate `loss` (gradients summed over processes) and take one clipped optimizer step; the
        gradient norm, or None on a non-finite gradient, when no step is taken and `record` says so."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.dist.sum_gradients(self.policy.parameters())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.grad_clip)
        if not torch.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            record.update(skipped="non-finite gradient: update skipped")
            return None
        self.optimizer.step()
        return float(grad_norm)

    def heldout_score(self) -> dict:
        """The policy's score on the held-out set now: each held-out prompt's image on its own fixed noise
        (the same at every point of the run and for every seed, so points and seeds are paired), at the
        policy's mean schedule, scored by the suite; `score` is the suite's headline (its 'overall'),
        `scores` the per-image primary metric in the held-out order. Touches no random state of training."""
        from jsbench.evaluation.evaluate import evaluate, policy_source
        from jsbench.evaluation.results import overall_of

        start = time.perf_counter()
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            run = evaluate(self.backbone, self.suite, policy_source(self.policy, backbone=self.backbone), seeds_per_prompt=1, items=self.heldout_items,
                           seed_base=HELDOUT_IMAGE, progress=False)
        overall = overall_of(self.suite, run.scores, [it for it, _ in run.rows()])
        scores = [float(s[self.suite.primary_metric]) for s in run.scores]
        score = overall.value if overall is not None else math.fsum(scores) / len(scores)
        return {"iteration": self.iteration, "score": score, "scores": scores, "seconds": round(time.perf_counter() - start, 4)}

    def _record_heldout(self) -> None:
        if not self.heldout_items or not (self.iteration % self.heldout_every == 0 or self.iteration == self.config.iters):
            return
        record = self.heldout_score()
        if self.dist.is_main:
            append_lines(self.heldout_path, [json.dumps(record) + "\n"])

    def step(self, it: int) -> dict:
        """Update `it`: its rollout, then the update; the record `train` logs (`--policy indis`: its own step,
        jsbench/train/peers.py)."""
        if self.config.policy == "indis":
            from jsbench.train.peers import indis_step

            return indis_step(self, it)
        return self.update(self.rollout(it))

    def train(self, progress: bool = True, on_update: Callable[[dict], None] | None = None) -> SchedulePolicy:
        from jsbench.progress import make_progress

        self.out.mkdir(parents=True, exist_ok=True)
        self._truncate_log(self.iteration)  # a fresh start (or a restart before any checkpoint) keeps no stale lines
        progress = progress and self.dist.is_main
        with make_progress("[bold]train", "updates", enabled=progress, transient=False, status=True) as bar:  # on stderr
            task = bar.add_task("train", total=self.config.iters, completed=self.iteration, status="")
            if self.iteration == 0:
                self._record_heldout()  # the untrained policy (the default schedule): the curve's start
            while self.iteration < self.config.iters:
                it = self.iteration
                start = time.perf_counter()
                record = self.step(it)
                record["seconds"] = round(time.perf_counter() - start, 4)
                if self.dist.is_main:
                    append_lines(self.log_path, [json.dumps(record, sort_keys=True) + "\n"])  # one whole-line write
                self.iteration = it + 1
                self._record_heldout()  # before the checkpoint: a resumed run has its checkpoint's point
                if self.iteration % self.config.checkpoint_every == 0 or self.iteration == self.config.iters:
                    self.save_checkpoint()
                lam = record.get("shrinkage")
                status = f"reward {record['reward']:.3f}" + (f"  ĉ {lam:.2f}" if lam is not None else "")
                if "skipped" in record:
                    status += "  [red]" + record["skipped"]
                bar.update(task, completed=self.iteration, status=status)
                if on_update:
                    on_update(record)
        return self.policy

    def save_policy(self, directory: str | Path | None = None) -> Path:
        """Write the policy (rank 0 only under a launcher; every process returns the path)."""
        cfg = self.config
        path = Path(directory or self.out)
        manifest = {
            "backbone": self.backbone.name,
            "model_id": self.backbone.model_id,
            "guidance": recorded_guidance(self.backbone),  # the scale the policy was trained under
            "baseline": cfg.baseline,
            "reward": cfg.reward,
            # what the reward is and what read for it (an OCR reward: its engine), where the reward says
            **({"reward_provenance": self.reward.provenance()} if callable(getattr(self.reward, "provenance", None)) else {}),
            "suite": cfg.suite,
            "train": asdict(cfg),
            "command": train_command(cfg, str(path)),
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
        }
        if self.dist.is_main:  # the held-out curve's verdict (jsbench.policy.convergence); not judged without a curve
            manifest["convergence"] = run_convergence(self.out)
        if self.dist.is_main:
            self.policy.save(path, manifest)
        self.dist.barrier()  # no process reports the policy before it exists
        return path


def read_log(path: str | Path) -> list[dict]:
    return [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]


def smoothed(values: list[float], window: int = 20) -> list[float]:
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc) if not any(map(math.isnan, acc)) else float("nan"))
    return out
