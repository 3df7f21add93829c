"""Figures for leaderboards: schedules, their spread, training curves and image grids (matplotlib, PNG).

Every figure is written atomically next to the table that links it.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    os.replace(tmp, path)
    return path


def plot_schedules(backbone, sources: list, prompts: list[str], seeds: list[int], path: Path) -> Path:
    """Left: each source's schedule (sigma vs step fraction) for a few prompts, seed 0.
    Right: the spread of each learned schedule's sigmas across prompts x seeds (mean ± 1 sd)."""
    plt = _pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows = [(p, s) for p in prompts for s in seeds]
    cond = backbone.encode([p for p, _ in rows])
    x_T = backbone.initial_noise([s for _, s in rows])
    for i, source in enumerate(sources):
        sig = source.make(x_T, cond).float().cpu()
        n = sig.shape[1] - 1
        frac = torch.linspace(0, 1, n + 1)
        color = colors[i % len(colors)]
        for j, p in enumerate(prompts[:4]):
            ax.plot(frac, sig[j * len(seeds)], marker="o", ms=3, color=color, alpha=0.8, ls=["-", "--", ":", "-."][j % 4], label=source.label if j == 0 else None)
        mean, sd = sig.mean(0), sig.std(0)
        ax2.errorbar(frac, mean, yerr=sd, color=color, marker="o", ms=3, capsize=3, label=source.label)
    for a, title in [(ax, "schedules for 4 prompts (line style = prompt)"), (ax2, f"spread over {len(prompts)} prompts × {len(seeds)} seeds")]:
        a.set_xlabel("step / N")
        a.set_ylabel("sigma (flow time)")
        a.set_title(title, fontsize=10)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return _save(fig, path)


def plot_training_curves(logs: dict[str, list[dict]], path: Path, window: int = 20) -> Path:
    """Reward and the JS shrinkage lambda-hat per update, smoothed, one line per run."""
    from jsbench.train import smoothed

    plt = _pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for label, log in logs.items():
        its = [r["iteration"] for r in log]
        ax.plot(its, smoothed([r["reward"] for r in log], window), label=label)
        lam = [r.get("shrinkage") for r in log]
        if any(v is not None for v in lam):
            ax2.plot(its, smoothed([float("nan") if v is None else v for v in lam], window), label=label)
    ax.set_title(f"training reward (moving mean over {window} updates)", fontsize=10)
    ax2.set_title("James–Stein shrinkage λ̂ (0 = RLOO, 1 = XCTX)", fontsize=10)
    for a in (ax, ax2):
        a.set_xlabel("update")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return _save(fig, path)


def plot_image_grid(backbone, sources: list, prompts: list[str], seed: int, path: Path) -> Path:
    """Rows = methods, columns = prompts, the same seed everywhere."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(sources), len(prompts), figsize=(1.6 * len(prompts), 1.7 * len(sources)), squeeze=False)
    cond = backbone.encode(prompts)
    x_T = backbone.initial_noise([seed] * len(prompts))
    for i, source in enumerate(sources):
        images = backbone.sample(x_T, cond, source.make(x_T, cond)).float().clamp(0, 1).cpu()
        for j in range(len(prompts)):
            ax = axes[i][j]
            ax.imshow(images[j].permute(1, 2, 0).numpy(), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(source.label, fontsize=7)
            if i == 0:
                ax.set_title(prompts[j].replace("a photo of ", ""), fontsize=6)
    return _save(fig, path)
