"""The estimator lab: how noisy is the REINFORCE gradient under each reward baseline, measured directly.

At one policy state, draw R independent rollouts of B contexts x K schedules (the training loop's own
rollout: `Trainer.prepare/draw/generate/score`), and on each compute the REINFORCE gradient under every
registered baseline from the *identical* rewards and log-probabilities (`Trainer.policy_loss`, so the
gradient is exactly the one training would take). Per baseline, relative to rloo:

- grad_var: tr Cov(g), the total variance of the gradient over rollouts (unbiased sample covariance).
- grad_mse: E||g - dJ||^2 against a large-batch reference: for rollout r the reference is rloo's mean
  gradient over the other R - 1 rollouts (independent of rollout r, unbiased for dJ); that reference's
  own variance, tr Cov(g_rloo) / (R - 1), is subtracted, so grad_mse estimates the error against the
  true gradient. For an unbiased baseline it equals grad_var; a biased one shows up here.
- baseline_mse: E[(b_ik - mu_i)^2] against each context's mean reward mu_i, estimated from M further
  samples of the same context (same prompt and noise, fresh schedules); the estimate's own variance
  s_i^2 / M is subtracted (bias-corrected). Measured on the first `mean_rollouts` rollouts.

Each ratio gets a seeded paired-bootstrap CI: rollouts are resampled with replacement, the same resample
for every baseline, and the ratio recomputed on it (percentile interval). rloo's ratios are 1 exactly.
The shrinkage each estimator chose (js: c, js-plugin: lambda, batch means) is reported as its mean and
standard deviation over rollouts.

The records' text, CSV, figure and file are jsbench/analysis/estimator_rendering.py; the committed section
(leaderboards/estimators.md|csv) is jsbench/analysis/estimator_section.py; the simulated checks of
scripts/bench_baselines.py are jsbench/analysis/estimator_simulation.py.

Memory: the R x P gradients of every baseline are kept (float32) to form their Gram matrices, so
R * P * 4 bytes per baseline (P = the policy's parameters: 45k on detail, 154k on scenes-dit).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.baselines import compute_baseline, registered_baselines, validate_baseline
from jsbench.io import training_runs

__all__ = [
    "EstimatorError",
    "LabConfig",
    "lab_baselines",
    "resolve_policy_folder",
    "baseline_error",
    "lab_statistics",
    "run_lab",
    "run_lab_along",
    "LAB_SCHEMA",
]

LAB_SCHEMA = "jsbench.estimators/1"
LAB_TAG = 0xE57  # separates the lab's random streams from training's (seed, update) streams
NOISE_SEEDS = (1 << 30, 1 << 31)  # the lab's noise seeds: far from eval's (0..) and training's (1e6..)
REFERENCE = "rloo"


class EstimatorError(JsbenchError):
    """A lab configuration that cannot be measured."""


@dataclass(frozen=True)
class LabConfig:
    backbone: str = "analytic"
    steps: int = 3
    contexts: int = 16
    samples: int = 2
    rollouts: int = 200
    seed: int = 0
    reward: str = "geneval"
    suite: str = "geneval"
    policy: str | None = None  # a policy folder (or a row folder with seed<S>/ subfolders); None: untrained
    mean_rollouts: int = 50  # rollouts that also get the extra samples for baseline_mse (0: none)
    mean_samples: int = 8  # M extra samples per context for its mean
    bootstrap: int = 2000
    level: float = 0.9
    model: str | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None

    def validate(self) -> None:
        if self.rollouts < 3:
            raise EstimatorError(f"--rollouts must be at least 3 (a variance and a leave-one-out reference), got {self.rollouts}")
        if self.samples < 2:
            raise EstimatorError(f"--samples must be at least 2 (rloo, the reference, needs two per context), got {self.samples}")
        if self.contexts < 1:
            raise EstimatorError(f"--contexts must be at least 1, got {self.contexts}")
        if self.mean_rollouts < 0 or self.mean_rollouts > self.rollouts:
            raise EstimatorError(f"--mean-rollouts must be in 0..{self.rollouts} (the rollouts), got {self.mean_rollouts}")
        if self.mean_rollouts and self.mean_samples < 2:
            raise EstimatorError(f"--mean-samples must be at least 2 (its variance is subtracted), got {self.mean_samples}")
        if self.bootstrap < 100:
            raise EstimatorError(f"--bootstrap must be at least 100 resamples, got {self.bootstrap}")
        if not 0.5 <= self.level < 1:
            raise EstimatorError(f"the CI level must be in [0.5, 1), got {self.level}")
        if self.policy:
            resolve_policy_folder(self.policy)


def lab_baselines(contexts: int, samples: int) -> list[str]:
    """Every registered baseline (plugins' included) that can run on B x K rewards (js needs B >= 3), in their
    declared lab order."""
    names = []
    for name in [b.name for b in registered_baselines()]:
        try:
            validate_baseline(name, contexts, samples)
        except JsbenchError:
            continue
        names.append(name)
    return names


def resolve_policy_folder(path: str | Path) -> Path:
    """A policy folder as given, or a row folder `<name>-n<steps>/` whose trained seeds live in `seed<S>/`
    subfolders: then seed0 (the lowest seed if there is no seed0)."""
    folder = Path(path)
    seeds = training_runs(folder)
    if seeds:
        return seeds[0]
    raise EstimatorError(f"no policy in {folder}: neither a manifest.json nor seed<S>/ subfolders holding one")


# ----------------------------------------------------------------------------------------- statistics


def baseline_error(baseline: torch.Tensor, extra: torch.Tensor) -> float:
    """mean_ik (b_ik - mu_hat_i)^2 - mean_i s_i^2 / M: an unbiased estimate of E[(b_ik - mu_i)^2] over the
    batch, from M >= 2 extra rewards `extra` [B, M] of each context (independent of b: fresh samples)."""
    extra = extra.double()
    m = extra.shape[1]
    mu_hat = extra.mean(dim=1, keepdim=True)
    return float((baseline.double() - mu_hat).square().mean() - extra.var(dim=1, unbiased=True).mean() / m)


def _total_variance(gram: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """tr Cov of the rows whose Gram matrix is `gram` [R, R], for resample counts `weights` [S, R] (each
    row sums to R): (sum_r w_r |g_r|^2 - |sum_r w_r g_r|^2 / R) / (R - 1), one value per resample."""
    r = gram.shape[0]
    sq = weights @ torch.diagonal(gram)
    quad = ((weights @ gram) * weights).sum(dim=1)
    return (sq - quad / r) / (r - 1)


def _ratio_ci(values: torch.Tensor, ref: torch.Tensor, alpha: float) -> list[float] | None:
    ratio = (values / ref).numpy()
    ratio = ratio[np.isfinite(ratio)]  # a degenerate resample (one rollout drawn R times) has no variance
    if ratio.size == 0:
        return None
    lo, hi = np.quantile(ratio, [alpha / 2, 1 - alpha / 2])
    return [float(lo), float(hi)]


def lab_statistics(grads: dict[str, torch.Tensor], baseline_errors: dict[str, torch.Tensor] | None = None,
                   shrinkage: dict[str, list[float]] | None = None, *, bootstrap: int = 2000, seed: int = 0,
                   level: float = 0.9, reference: str = REFERENCE) -> list[dict]:
    """One row per baseline from per-rollout gradients `grads[name]` [R, P] (row r of every baseline from
    the same rollout) and per-rollout baseline errors `baseline_errors[name]` [R'] (see `baseline_error`).

    Ratios are against `reference`; their CIs come from one seeded set of bootstrap resamples of the
    rollouts shared by every baseline (paired), so `seed` makes them exact."""
    if reference not in grads:
        raise EstimatorError(f"the reference baseline {reference!r} was not measured")
    names = list(grads)
    r = grads[reference].shape[0]
    gen = torch.Generator().manual_seed(int(seed))
    alpha = 1 - level
    # resample counts, shared by every baseline: [S, R], each row a multinomial draw of R rollouts
    picks = torch.randint(r, (bootstrap, r), generator=gen)
    weights = torch.zeros(bootstrap, r, dtype=torch.float64).scatter_add_(1, picks, torch.ones(bootstrap, r, dtype=torch.float64))
    ones = torch.ones(1, r, dtype=torch.float64)

    ref_g = grads[reference].double()
    ref_sum = ref_g.sum(dim=0)
    grams, variance, mse = {}, {}, {}
    for name in names:
        g = grads[name].double()
        grams[name] = g @ g.T
    ref_var = float(_total_variance(grams[reference], ones)[0])
    for name in names:
        g = grads[name].double()
        variance[name] = (float(_total_variance(grams[name], ones)[0]), _total_variance(grams[name], weights))
        # |g_r - ref_{-r}|^2 - Var(ref_{-r}), ref_{-r} = (sum - g_ref_r) / (R - 1)
        err = ((g - (ref_sum - ref_g) / (r - 1)).square().sum(dim=1) - ref_var / (r - 1))  # [R]
        mse[name] = (float(err.mean()), weights @ err / r)
    b_err = {}
    if baseline_errors:
        rb = next(iter(baseline_errors.values())).shape[0]
        picks_b = torch.randint(rb, (bootstrap, rb), generator=gen)
        w_b = torch.zeros(bootstrap, rb, dtype=torch.float64).scatter_add_(1, picks_b, torch.ones(bootstrap, rb, dtype=torch.float64))
        for name, e in baseline_errors.items():
            e = e.double()
            b_err[name] = (float(e.mean()), w_b @ e / rb)

    rows = []
    for name in names:
        row = {"baseline": name, "rollouts": r}
        for key, table in (("grad_var", variance), ("grad_mse", mse), ("baseline_mse", b_err)):
            if name not in table:
                row.update({f"{key}": None, f"{key}_ratio": None, f"{key}_ci": None})
                continue
            point, boot = table[name]
            ref_point, ref_boot = table[reference]
            row[key] = point
            if ref_point == 0:  # e.g. every reward of every rollout equal: no ratio
                row.update({f"{key}_ratio": None, f"{key}_ci": None})
                continue
            row[f"{key}_ratio"] = point / ref_point  # x / x is 1 exactly for the reference
            row[f"{key}_ci"] = _ratio_ci(boot, ref_boot, alpha) if name != reference else [1.0, 1.0]
        values = (shrinkage or {}).get(name)
        row["shrinkage"] = float(np.mean(values)) if values else None
        row["shrinkage_sd"] = float(np.std(values, ddof=1)) if values and len(values) > 1 else None
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------ rollouts


def _lab_trainer(config: LabConfig, backbone, policy_folder: Path | None, dist=None):
    """A Trainer whose rollouts `rollout(r)` are the lab's: contexts, noise seeds and Dirichlet draws from
    (seed, LAB_TAG, r, stream); stream 1 draws the extra samples of the same contexts."""
    from jsbench.train.reinforce import TrainConfig, Trainer

    class LabTrainer(Trainer):
        stream = 0

        def contexts_for(self, it: int) -> tuple[list[str], list[int], int]:
            rng = np.random.default_rng(np.random.SeedSequence([self.config.seed, LAB_TAG, it]))
            idx = rng.integers(len(self.prompts), size=self.config.contexts)
            seeds = rng.integers(*NOISE_SEEDS, size=self.config.contexts)
            torch_seed = int(np.random.SeedSequence([self.config.seed, LAB_TAG, it, self.stream]).generate_state(1, dtype=np.uint32)[0])
            return [self.prompts[i] for i in idx], [int(s) for s in seeds], torch_seed

    train_config = TrainConfig(backbone=config.backbone, model=config.model, steps=config.steps, contexts=config.contexts,
                               samples=config.samples, baseline=REFERENCE, reward=config.reward, suite=config.suite,
                               seed=config.seed, iters=1, device=config.device, dtype=config.dtype, batch_size=config.batch_size)
    trainer = LabTrainer(train_config, Path("runs") / "estimators", backbone=backbone, dist=dist)
    if policy_folder is not None:
        from jsbench.policy.schedule_policy import load_policy

        trainer.policy, _ = load_policy(policy_folder, backbone=trainer.backbone, steps=config.steps, device=trainer.policy_device)
    trainer.policy.train()  # rolled out and differentiated; never stepped
    return trainer


def _extra_rewards(trainer, r: int, samples: int) -> torch.Tensor:
    """[B, M] rewards of M fresh schedules for rollout r's contexts (same prompts and noise)."""
    main_samples = trainer.config.samples
    trainer.stream, trainer.config.samples = 1, samples
    try:
        return trainer.rollout(r).rewards
    finally:
        trainer.stream, trainer.config.samples = 0, main_samples


def measure_rollouts(trainer, names: list[str], rollouts: int, mean_rollouts: int, mean_samples: int,
                     on_rollout: Callable[[int], None] | None = None) -> tuple[dict, dict, dict, list[float]]:
    """(grads[name] [R, P] float32, baseline_errors[name] [R'], shrinkage[name] list, rewards' means)."""
    params = [p for p in trainer.policy.parameters() if p.requires_grad]
    grads = {n: [] for n in names}
    errors = {n: [] for n in names}
    shrink = {n: [] for n in names}
    reward_means = []
    for r in range(rollouts):
        ro = trainer.rollout(r)
        reward_means.append(float(ro.rewards.mean()))
        results = {n: compute_baseline(n, ro.rewards) for n in names}
        for n in names:
            loss, _ = trainer.policy_loss(ro, baseline=n)
            g = torch.autograd.grad(loss, params, allow_unused=True)
            flat = torch.cat([(x if x is not None else torch.zeros_like(p)).reshape(-1) for x, p in zip(g, params)])
            trainer.dist.sum_([flat])  # under a launcher: this process's share of the global gradient
            grads[n].append(flat.detach().float().cpu())
            if results[n].shrinkage is not None:
                shrink[n].append(results[n].shrinkage)
        if r < mean_rollouts:
            extra = _extra_rewards(trainer, r, mean_samples)
            for n in names:
                errors[n].append(baseline_error(results[n].baseline, extra))
        if on_rollout:
            on_rollout(r)
    return ({n: torch.stack(v) for n, v in grads.items()},
            {n: torch.tensor(v, dtype=torch.float64) for n, v in errors.items() if v},
            {n: v for n, v in shrink.items() if v}, reward_means)


def run_lab(config: LabConfig, backbone=None, progress: bool = True, dist=None, policy=None) -> dict:
    """Measure every applicable baseline at one policy state; the `{"config", "rows", ...}` record.

    `policy` (a SchedulePolicy) overrides `config.policy`, for measuring along a training run."""
    config.validate()
    names = lab_baselines(config.contexts, config.samples)
    folder = resolve_policy_folder(config.policy) if config.policy and policy is None else None
    trainer = _lab_trainer(config, backbone, folder, dist=dist)
    if policy is not None:
        trainer.policy = policy
    from jsbench.progress import image_bar

    start = time.perf_counter()
    with image_bar("[bold]estimators", config.rollouts, enabled=progress and trainer.dist.is_main, unit="rollouts") as bar:
        grads, errors, shrink, reward_means = measure_rollouts(
            trainer, names, config.rollouts, config.mean_rollouts, config.mean_samples, on_rollout=lambda r: bar.advance(1))
    seconds = time.perf_counter() - start
    rows = lab_statistics(grads, errors, shrink, bootstrap=config.bootstrap, seed=config.seed, level=config.level)
    shown = asdict(config) | {"policy": str(folder) if folder else config.policy, "baselines": names,
                              "parameters": int(next(iter(grads.values())).shape[1])}
    return {"schema": LAB_SCHEMA, "config": shown, "rows": rows,
            "reward_mean": float(np.mean(reward_means)), "seconds": round(seconds, 1)}


# ------------------------------------------------------------------------------------ along training


def _run_train_config(run: Path) -> dict:
    """The training configuration of a run folder: its policy manifest's, else its checkpoint's."""
    import json

    manifest = run / "manifest.json"
    if manifest.is_file():
        train = json.loads(manifest.read_text()).get("train")
        if train:
            return train
    checkpoint = run / "checkpoint.pt"
    if checkpoint.is_file():
        return torch.load(checkpoint, map_location="cpu", weights_only=True)["config"]
    raise EstimatorError(f"{run} is not a training run: no manifest.json with its training config and no checkpoint.pt")


def _same_parameters(policy, folder: Path) -> bool | None:
    """Whether `policy` has exactly the parameters saved in `folder` (None when nothing is saved there)."""
    if not (folder / "policy.safetensors").is_file():
        return None
    from jsbench.policy.schedule_policy import load_policy

    saved, _ = load_policy(folder, device=torch.device("cpu"))
    mine = {k: v.detach().cpu() for k, v in policy.state_dict().items()}
    return all(torch.equal(mine[k], v) for k, v in saved.state_dict().items())


def run_lab_along(config: LabConfig, run: str | Path, every: int, backbone=None, progress: bool = True, dist=None) -> dict:
    """The lab at updates 0, every, 2 every, ..., iters of a training run, replayed exactly from its config
    (training draws depend only on (seed, update)); the replay's end is compared with the saved policy."""
    from jsbench.train.reinforce import TrainConfig, Trainer

    run = Path(run)
    train = _run_train_config(run)
    if train["backbone"] != config.backbone or train["steps"] != config.steps:
        raise EstimatorError(f"run {run} trained backbone {train['backbone']!r} at {train['steps']} steps; "
                             f"pass --backbone {train['backbone']} --steps {train['steps']}")
    if every < 1:
        raise EstimatorError(f"--every must be at least 1, got {every}")
    known = {f for f in TrainConfig.__dataclass_fields__}
    trainer = Trainer(TrainConfig(**{k: v for k, v in train.items() if k in known}), run, backbone=backbone, dist=dist)
    iters = trainer.config.iters
    updates = sorted(set(range(0, iters + 1, every)) | {iters})
    states = []
    start = time.perf_counter()
    for u in updates:
        while trainer.iteration < u:  # the run's own updates, nothing written
            trainer.step(trainer.iteration)
            trainer.iteration += 1
        state = run_lab(config, backbone=trainer.backbone, progress=progress, dist=dist, policy=trainer.policy)
        trainer.policy.train()
        states.append({"update": u, "rows": state["rows"], "reward_mean": state["reward_mean"],
                       "seconds": state["seconds"], "config": state["config"] | {"policy": f"{run} @ {u}"}})
    return {"schema": LAB_SCHEMA, "config": states[0]["config"] | {"policy": str(run), "every": every}, "run": str(run),
            "replay_matches_policy": _same_parameters(trainer.policy, run), "states": states,
            "seconds": round(time.perf_counter() - start, 1)}
