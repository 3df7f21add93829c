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

Memory: the R x P gradients of every baseline are kept (float32) to form their Gram matrices, so
R * P * 4 bytes per baseline (P = the policy's parameters: 45k on detail, 154k on scenes-dit).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.baselines import compute_baseline, registered_baselines, validate_baseline
from jsbench.io import training_runs
from jsbench.stats import mean_stderr

__all__ = [
    "EstimatorError",
    "LabConfig",
    "lab_baselines",
    "resolve_policy_folder",
    "baseline_error",
    "lab_statistics",
    "run_lab",
    "lab_table",
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
    from jsbench.train import TrainConfig, Trainer

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
        from jsbench.policy import load_policy

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


# -------------------------------------------------------------------------------------------- output


def _ci(ci) -> str:
    return "" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}"


def _num(x, fmt=".2f") -> str:
    return "" if x is None else format(x, fmt)


def lab_table(record: dict) -> str:
    """The 80-column table of one lab record: ratios to rloo with their CIs, and the chosen shrinkage."""
    c = record["config"]
    state = "untrained" if not c["policy"] else c["policy"]
    level = round(100 * c["level"])
    lines = [f"{c['backbone']}, {c['steps']} steps, B={c['contexts']}, K={c['samples']}, {state}: "
             f"{c['rollouts']} rollouts, seed {c['seed']}",
             f"ratios to rloo, {level}% paired-bootstrap CI; b-MSE on {c['mean_rollouts']} rollouts, M={c['mean_samples']}",
             f"{'baseline':<10}{'grad var':>9}{'CI':>12}{'grad MSE':>9}{'CI':>12}{'b-MSE':>7}{'CI':>12}{'shrink':>8}",
             "-" * 79]
    for row in record["rows"]:
        lines.append(f"{row['baseline']:<10}{_num(row['grad_var_ratio']):>9}{_ci(row['grad_var_ci']):>12}"
                     f"{_num(row['grad_mse_ratio']):>9}{_ci(row['grad_mse_ci']):>12}"
                     f"{_num(row['baseline_mse_ratio']):>7}{_ci(row['baseline_mse_ci']):>12}{_num(row['shrinkage']):>8}")
    lines.append(f"mean reward {record['reward_mean']:.3f}; {record['seconds']:.0f} s")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["baseline", "grad_var_ratio", "grad_var_ci_lo", "grad_var_ci_hi", "grad_mse_ratio", "grad_mse_ci_lo",
              "grad_mse_ci_hi", "baseline_mse_ratio", "baseline_mse_ci_lo", "baseline_mse_ci_hi", "shrinkage",
              "shrinkage_sd", "grad_var", "grad_mse", "baseline_mse"]


def _csv_values(row: dict) -> list:
    out = []
    for f in CSV_FIELDS:
        key, _, end = f.rpartition("_ci_")
        if end in ("lo", "hi") and key:
            ci = row.get(f"{key}_ci")
            out.append(None if ci is None else ci[0 if end == "lo" else 1])
        else:
            out.append(row.get(f))
    return out


def _csv_text(header: list[str], lines: list[list]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for line in lines:
        w.writerow(["" if v is None else (format(v, ".6g") if isinstance(v, float) else v) for v in line])
    return buf.getvalue()


def lab_csv(record: dict) -> str:
    """Every row of a lab record (one block per measured update when measured along a run), values exact to 6 digits."""
    states = record.get("states") or [record]
    lead = ["update"] if "states" in record else []
    lines = [([s["update"]] if lead else []) + _csv_values(row) for s in states for row in s["rows"]]
    return _csv_text(lead + CSV_FIELDS, lines)


def lab_text(record: dict) -> str:
    """The terminal form: one table per measured state."""
    if "states" not in record:
        return lab_table(record)
    parts = [f"along {record['run']} (replayed; matches its saved policy: {record['replay_matches_policy']})\n"]
    for state in record["states"]:
        parts.append(f"\nafter {state['update']} updates\n" + lab_table(state))
    return "".join(parts)


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
    from jsbench.policy import load_policy

    saved, _ = load_policy(folder, device=torch.device("cpu"))
    mine = {k: v.detach().cpu() for k, v in policy.state_dict().items()}
    return all(torch.equal(mine[k], v) for k, v in saved.state_dict().items())


def run_lab_along(config: LabConfig, run: str | Path, every: int, backbone=None, progress: bool = True, dist=None) -> dict:
    """The lab at updates 0, every, 2 every, ..., iters of a training run, replayed exactly from its config
    (training draws depend only on (seed, update)); the replay's end is compared with the saved policy."""
    from jsbench.train import TrainConfig, Trainer

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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.family": "DejaVu Sans", "svg.hashsalt": "jsbench", "path.simplify": False})
    return plt


def plot_along(record: dict, path: Path) -> Path:
    """Each ratio to rloo with its CI against updates, one panel per measure; PNG without dates or versions."""
    from jsbench.io import replacing

    plt = _pyplot()
    states = record["states"]
    names = [row["baseline"] for row in states[0]["rows"]]
    x = [s["update"] for s in states]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharex=True)
    for ax, (key, title) in zip(axes, (("grad_var", "tr Cov(g) / rloo"), ("grad_mse", "gradient MSE / rloo"),
                                      ("baseline_mse", "baseline MSE / rloo"))):
        for name in names:
            rows = [next(r for r in s["rows"] if r["baseline"] == name) for s in states]
            if any(r[f"{key}_ratio"] is None for r in rows):
                continue
            y = [r[f"{key}_ratio"] for r in rows]
            line, = ax.plot(x, y, marker="o", ms=3, lw=1.2, label=name)
            ax.fill_between(x, [r[f"{key}_ci"][0] for r in rows], [r[f"{key}_ci"][1] for r in rows], color=line.get_color(), alpha=0.15, lw=0)
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("updates")
        ax.grid(alpha=0.3, lw=0.4)
    axes[0].legend(fontsize=7)
    c = record["config"]
    fig.suptitle(f"{c['backbone']}, {c['steps']} steps, B={c['contexts']}, K={c['samples']}, {c['rollouts']} rollouts per point "
                 f"({round(100 * c['level'])}% CI)", fontsize=9)
    fig.tight_layout()
    with replacing(path, ".tmp.png") as tmp:
        fig.savefig(tmp, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def write_lab_record(record: dict, out: str | Path) -> list[Path]:
    """The record as JSON at `out`, and for a run measured along training its figure beside it (.png)."""
    import json

    from jsbench.io import write_text_atomic

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(record, indent=1, sort_keys=True) + "\n")
    written = [out]
    if "states" in record:
        written.append(plot_along(record, out.with_suffix(".png")))
    return written


# ---------------------------------------------------------------------------------- committed section

SECTION_NAME = "estimators"
SECTION_COMMAND = "jsbench estimators --all"
SECTION = {
    "backbones": ("analytic", "detail", "scenes-dit"),
    "steps": 3,
    "samples": (2, 4),
    "contexts": (8, 16, 32),
    "trained": "rloo",  # the trained state: the shipped policies/<backbone>/rloo-n<steps> (flat or seed<S>/)
    # rollouts per block, by backbone: what a 2-core CPU measures in minutes (scenes-dit's images cost 5x detail's)
    "rollouts": {"analytic": 40, "detail": 40, "scenes-dit": 20},
    "mean_rollouts": 10,
    "mean_samples": 4,
    "seed": 0,
}
SECTION_KEYS = ["backbone", "steps", "state", "contexts", "samples", "rollouts"]


def section_configs(policies: Path, backbones=None) -> list[tuple[str, LabConfig]]:
    """(state, config) of every row block of the committed section, in table order."""
    s = SECTION
    unknown = [bb for bb in backbones or () if bb not in s["backbones"]]
    if unknown:
        raise EstimatorError(f"the estimators section has no backbone {unknown[0]!r}; it covers {', '.join(s['backbones'])}")
    out = []
    for bb in backbones or s["backbones"]:
        trained = Path(policies) / bb / f"{s['trained']}-n{s['steps']}"
        for state, policy in (("untrained", None), (f"trained ({s['trained']}-n{s['steps']})", trained)):
            for k in s["samples"]:
                for b in s["contexts"]:
                    out.append((state, LabConfig(backbone=bb, steps=s["steps"], contexts=b, samples=k, rollouts=s["rollouts"][bb],
                                                 seed=s["seed"], policy=None if policy is None else str(resolve_policy_folder(policy)),
                                                 mean_rollouts=s["mean_rollouts"], mean_samples=s["mean_samples"])))
    return out


def section_rows(state: str, record: dict) -> list[list]:
    c = record["config"]
    return [[c["backbone"], c["steps"], state, c["contexts"], c["samples"], c["rollouts"]] + _csv_values(row) for row in record["rows"]]


def _read_csv(path: Path) -> list[dict]:
    import csv

    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def section_markdown(rows: list[dict]) -> str:
    """leaderboards/estimators.md from the csv rows: per backbone, tr Cov(g) / rloo of every baseline per
    (state, K, B), js's CI, js's baseline-MSE ratio and its shrinkage."""
    s = SECTION
    level = "90 %"
    out = [f"# Estimator lab: REINFORCE gradient variance per baseline\n",
           f"Generated by `{SECTION_COMMAND}` (checked by `{SECTION_COMMAND} --check`). Each row: "
           f"R independent rollouts (R in each heading) of B contexts × K schedules at one policy state, every baseline applied "
           f"to the same rewards and log-probabilities; tr Cov(g) relative to rloo (rloo = 1), js's {level} paired-bootstrap "
           f"CI; b-MSE: js's baseline error E[(b − μ_i)²] relative to rloo's (μ_i from {s['mean_samples']} further samples "
           f"of the context on {s['mean_rollouts']} rollouts, bias-corrected); ĉ: js's mean shrinkage. "
           f"Trained = policies/<backbone>/{s['trained']}-n{s['steps']}. Every value, with every CI: estimators.csv.\n"]
    backbones = list(dict.fromkeys(r["backbone"] for r in rows))
    for bb in backbones:
        mine = [r for r in rows if r["backbone"] == bb]
        names = list(dict.fromkeys(r["baseline"] for r in mine))
        others = [n for n in names if n != REFERENCE]
        out.append(f"\n## {bb}, {mine[0]['steps']} steps, R = {mine[0]['rollouts']} rollouts\n")
        out.append("| state | K | B | " + " | ".join(others) + " | js/rloo CI | js b-MSE | ĉ |")
        out.append("|---|---|---|" + "---|" * len(others) + "---|---|---|")
        blocks = list(dict.fromkeys((r["state"], r["samples"], r["contexts"]) for r in mine))
        for state, k, b in blocks:
            block = {r["baseline"]: r for r in mine if (r["state"], r["samples"], r["contexts"]) == (state, k, b)}
            js = block.get("js", {})
            ci = f"{float(js['grad_var_ci_lo']):.2f}–{float(js['grad_var_ci_hi']):.2f}" if js else ""
            bm = f"{float(js['baseline_mse_ratio']):.2f}" if js and js.get("baseline_mse_ratio") else ""
            sh = f"{float(js['shrinkage']):.2f}" if js and js.get("shrinkage") else ""
            cells = [f"{float(block[n]['grad_var_ratio']):.2f}" if n in block else "" for n in others]
            out.append(f"| {state} | {k} | {b} | " + " | ".join(cells) + f" | {ci} | {bm} | {sh} |")
    return "\n".join(out) + "\n"


def estimators_section(leaderboards: Path, policies: Path, check: bool = False, progress: bool = True,
                       log: Callable[[str], None] = print, backbones=None) -> int:
    """Measure every block of the committed section; write leaderboards/estimators.md|csv (the blocks of
    other backbones are kept), or with `check` compare with the committed csv: 0 equal, 1 a value differs."""
    from jsbench.backbones import load_backbone
    from jsbench.io import write_text_atomic

    leaderboards, policies = Path(leaderboards), Path(policies)
    csv_path, md_path = leaderboards / f"{SECTION_NAME}.csv", leaderboards / f"{SECTION_NAME}.md"
    committed = _read_csv(csv_path)
    if check and not committed:
        raise EstimatorError(f"nothing to check: {csv_path} does not exist (run `{SECTION_COMMAND}` first)")
    configs = section_configs(policies, backbones)  # refuses a missing trained policy before any sampling
    header = SECTION_KEYS + CSV_FIELDS
    fresh, loaded = [], {}
    for state, config in configs:
        if config.backbone not in loaded:
            loaded = {config.backbone: load_backbone(config.backbone)}
        log(f"{config.backbone} {state} B={config.contexts} K={config.samples}")
        record = run_lab(config, backbone=loaded[config.backbone], progress=progress)
        fresh += section_rows(state, record)
    import csv
    import io

    fresh_rows = list(csv.DictReader(io.StringIO(_csv_text(header, fresh))))  # as the csv will hold them
    if check:
        def key(r):
            return tuple(r[k] for k in SECTION_KEYS) + (r["baseline"],)

        old = {key(r): r for r in committed}
        differ = [key(r) for r in fresh_rows if old.get(key(r)) != r]
        for k in differ:
            log(f"differs from the committed {csv_path.name}: {', '.join(k)}")
        log(f"{len(fresh_rows) - len(differ)} of {len(fresh_rows)} rows as committed")
        return 1 if differ else 0
    measured = {r["backbone"] for r in fresh_rows}
    kept = [r for r in _read_csv(csv_path) if r["backbone"] not in measured]  # read again: another backbone's run may have written
    order = list(SECTION["backbones"])
    rows = sorted(kept + fresh_rows, key=lambda r: order.index(r["backbone"]) if r["backbone"] in order else len(order))
    leaderboards.mkdir(parents=True, exist_ok=True)
    write_text_atomic(csv_path, _csv_text(header, [[r[h] for h in header] for r in rows]))
    write_text_atomic(md_path, section_markdown(rows))
    log(f"wrote {md_path} and {csv_path}")
    return 0


# ------------------------------------------------------- simulated checks (scripts/bench_baselines.py)

ORACLE = "plug-in, true λ"  # the plug-in form with the TRUE shrinkage, a reference no real run can have
BINARY_MEAN = 0.3
Z_SLACK = 3.0  # paired standard errors allowed above RLOO


def simulate_rewards(kind: str, ratio: float, sigma2: float | None, B: int, K: int, reps: int, gen: torch.Generator):
    """(mu [reps, B, 1], rewards [reps, B, K], sigma^2) of random-effects rewards with tau^2/sigma^2 = ratio:
    Gaussian (mu_i ~ N(0, tau^2), r_ik ~ N(mu_i, sigma^2)) or 0/1 (p_i ~ Beta with mean BINARY_MEAN and
    alpha + beta = 1/ratio, r_ik ~ Bernoulli(p_i); sigma^2 is then E[p(1-p)])."""
    if kind == "gaussian":
        mu = math.sqrt(ratio * sigma2) * torch.randn(reps, B, 1, generator=gen, dtype=torch.float64)
        return mu, mu + math.sqrt(sigma2) * torch.randn(reps, B, K, generator=gen, dtype=torch.float64), sigma2
    if ratio == 0:
        p = torch.full((reps, B, 1), BINARY_MEAN, dtype=torch.float64)
    else:
        seed = int(torch.randint(2**62, (1,), generator=gen))  # Beta via torch's global RNG, seeded from `gen`
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            beta = torch.distributions.Beta(torch.tensor(BINARY_MEAN / ratio), torch.tensor((1 - BINARY_MEAN) / ratio))
            p = beta.sample((reps, B, 1)).double()
    r = (torch.rand(reps, B, K, generator=gen, dtype=torch.float64) < p).double()
    return p, r, BINARY_MEAN * (1 - BINARY_MEAN) / (1 + ratio)


def simulated_mse_point(kind: str, ratio: float, sigma2: float | None, B: int, K: int, reps: int, gen: torch.Generator) -> dict:
    """E[(b_ik - mu_i)^2] of every registered baseline (and the true-lambda plug-in) on the same simulated
    batches, with paired differences of js and js-plugin against rloo and xctx."""
    from jsbench.baselines import BASELINE_VALUES, js_shrink

    mu, r, s2 = simulate_rewards(kind, ratio, sigma2, B, K, reps, gen)
    per_batch = {name: (torch.vmap(fn)(r) - mu).square().mean(dim=(1, 2)) for name, fn in BASELINE_VALUES.items()}
    tau2 = ratio * s2
    lam = (s2 / (K - 1)) / (s2 / (K - 1) + tau2) if s2 > 0 else 1.0
    per_batch[ORACLE] = (torch.vmap(lambda x: js_shrink(x, lam))(r) - mu).square().mean(dim=(1, 2))
    stats = {n: mean_stderr(v) for n, v in per_batch.items()}
    out = {"rewards": kind, "tau2": tau2, "sigma2": s2, "ratio": ratio, "B": B, "K": K, "reps": reps, "true_lambda": lam,
           "mse": {n: m for n, (m, _) in stats.items()}, "stderr": {n: se for n, (_, se) in stats.items()}}
    for name in ("js", "js-plugin"):
        for ref in ("rloo", "xctx"):
            out[f"{name}_minus_{ref}"], out[f"{name}_minus_{ref}_stderr"] = mean_stderr(per_batch[name] - per_batch[ref])
    return out


def simulated_mse_grid(kinds, ratios, sigma2s, Bs, Ks, reps, seed) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    return [simulated_mse_point(kind, ratio, sigma2, B, K, reps, gen)
            for kind in kinds for sigma2 in (sigma2s if kind == "gaussian" else [None]) for B in Bs for K in Ks for ratio in ratios]


def z_over_rloo(row: dict, name: str) -> float:
    d, se = row[f"{name}_minus_rloo"], row[f"{name}_minus_rloo_stderr"]
    return d / se if se > 0 else (0.0 if d == 0 else math.copysign(math.inf, d))


def mse_claim(rows: list[dict], name: str) -> dict:
    """Where is MSE(name) above MSE(rloo) by more than Z_SLACK paired standard errors (B >= 4)?"""
    pts = [r for r in rows if r["B"] >= 4]
    above = [r for r in pts if z_over_rloo(r, name) > Z_SLACK]
    worst = max(pts, key=lambda r: r["mse"][name] / r["mse"]["rloo"]) if pts else None
    keys = ("rewards", "B", "K", "ratio")
    return {
        "statement": f"MSE({name}) <= MSE(rloo) within {Z_SLACK:g} paired standard errors for B >= 4",
        "points": len(pts), "holds_at": len(pts) - len(above),
        "above": [{k: r[k] for k in keys} | {"over_rloo": r["mse"][name] / r["mse"]["rloo"], "z": z_over_rloo(r, name)} for r in above],
        "worst": None if worst is None else {k: worst[k] for k in keys} | {"over_rloo": worst["mse"][name] / worst["mse"]["rloo"]},
    }


def bandit_gradient_error(B: int, K: int, reps: int, level_sd: float, seed: int) -> dict:
    """E||g - dJ/dtheta||^2 of every registered baseline on a 3-armed softmax bandit with a known gradient
    (context levels N(0, level_sd^2), drawn afresh per batch), relative to rloo's, paired."""
    from jsbench.baselines import BASELINE_VALUES

    g = torch.Generator().manual_seed(seed)
    arms = 3
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    offset = torch.randn(reps, B, arms, generator=g, dtype=torch.float64)
    q = level_sd * torch.randn(reps, B, 1, generator=g, dtype=torch.float64) + torch.randn(reps, B, arms, generator=g, dtype=torch.float64)
    pi = torch.softmax(theta + offset, dim=-1)
    true = (pi * (q - (pi * q).sum(-1, keepdim=True))).mean(1)  # [reps, A]: dJ/dtheta per batch
    a = torch.multinomial(pi.reshape(-1, arms), K, replacement=True, generator=g).reshape(reps, B, K)
    r = torch.gather(q, 2, a) + torch.randn(reps, B, K, generator=g, dtype=torch.float64)
    score = torch.nn.functional.one_hot(a, arms).to(r.dtype) - pi.unsqueeze(2)
    err = {}
    for name, fn in BASELINE_VALUES.items():
        grads = ((r - torch.vmap(fn)(r)).unsqueeze(-1) * score).mean(dim=(1, 2))
        err[name] = (grads - true).square().sum(-1)
    out = {"B": B, "K": K, "reps": reps, "level_sd": level_sd, "error": {n: float(v.mean()) for n, v in err.items()},
           "over_rloo": {n: float(v.mean() / err["rloo"].mean()) for n, v in err.items()}}
    for name in ("js", "js-plugin"):
        out[f"{name}_minus_rloo"], out[f"{name}_minus_rloo_stderr"] = mean_stderr(err[name] - err["rloo"])
    return out
