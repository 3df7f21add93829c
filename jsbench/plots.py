"""Figures for leaderboards: schedules, their spread, training curves and image grids (matplotlib, PNG).

Every figure is written atomically next to the table that links it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from jsbench.io import replacing


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    with replacing(path, ".tmp.png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    return path


LINE_STYLES = ["-", "--", ":", "-."]


def unique_labels(sources: list) -> list[str]:
    """Each source's label, with its policy folder's name added where two sources share a label
    (two policies trained with the same baseline are both 'js')."""
    labels = [s.label for s in sources]
    named = [f"{label} ({Path(s.spec.partition(':')[2]).name})" if labels.count(label) > 1 and ":" in s.spec else label
             for s, label in zip(sources, labels)]
    # the same folder name twice (runs/a/js-n5, runs/b/js-n5): the whole path
    return [f"{label} ({s.spec.partition(':')[2]})" if named.count(n) > 1 and ":" in s.spec else n for s, label, n in zip(sources, labels, named)]


def _short(prompt: str) -> str:
    return prompt.replace("a photo of ", "")


def plot_schedules(backbone, sources: list, prompts: list[str], seeds: list[int], path: Path) -> Path:
    """Left: each source's schedule (sigma vs step fraction) for a few prompts, seed 0; colour = source,
    line style = prompt, with a key for both. Right: the spread of each schedule's sigmas across
    prompts x seeds (mean ± 1 sd)."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows = [(p, s) for p in prompts for s in seeds]
    from jsbench.evaluate import noise_seed

    cond = backbone.encode([p for p, _ in rows])
    x_T = backbone.initial_noise([noise_seed(p, s) for p, s in rows])  # the noises evaluation draws
    shown = prompts[: len(LINE_STYLES)]
    for i, (source, label) in enumerate(zip(sources, unique_labels(sources))):
        sig = source.make(x_T, cond).float().cpu()
        n = sig.shape[1] - 1
        frac = torch.linspace(0, 1, n + 1)
        color = colors[i % len(colors)]
        for j, _ in enumerate(shown):
            ax.plot(frac, sig[j * len(seeds)], marker="o", ms=3, color=color, alpha=0.8, ls=LINE_STYLES[j], label=label if j == 0 else None)
        mean, sd = sig.mean(0), sig.std(0)
        ax2.errorbar(frac, mean, yerr=sd, color=color, marker="o", ms=3, capsize=3, label=label)
    for a, title in [(ax, f"schedules for {len(shown)} prompts, seed {seeds[0]}"), (ax2, f"spread over {len(prompts)} prompts × {len(seeds)} seeds")]:
        a.set_xlabel("step / N")
        a.set_ylabel("sigma (flow time)")
        a.set_title(title, fontsize=10)
        a.grid(alpha=0.3)
    methods = ax.legend(fontsize=8, title="colour = schedule", title_fontsize=8, loc="upper right")
    ax.add_artist(methods)
    keys = [Line2D([0], [0], color="0.3", ls=LINE_STYLES[j]) for j in range(len(shown))]
    ax.legend(keys, [_short(p) for p in shown], fontsize=7, title="line style = prompt", title_fontsize=8, loc="lower left")
    ax2.legend(fontsize=8)
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
    ax2.set_title("James–Stein shrinkage ĉ (0 = RLOO, 1 = the batch's mean level)", fontsize=10)
    for a in (ax, ax2):
        a.set_xlabel("update")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return _save(fig, path)


def plot_image_grid(backbone, sources: list, prompts: list[str], seed: int, path: Path, passed=None) -> Path:
    """Rows = methods, columns = prompts, the same seed everywhere. With `passed(images, prompts) ->
    [bool]` (the suite's verdict per image), each image is framed and marked: green ✓ pass, red ✗ fail."""
    import textwrap

    from jsbench.evaluate import noise_seed, sample_source

    plt = _pyplot()
    fig, axes = plt.subplots(len(sources), len(prompts), figsize=(1.9 * len(prompts), 1.9 * len(sources) + 0.5), squeeze=False)
    cond = backbone.encode(prompts)
    x_T = backbone.initial_noise([noise_seed(p, seed) for p in prompts])  # image `seed` of each prompt, as evaluated
    for i, (source, label) in enumerate(zip(sources, unique_labels(sources))):
        images = sample_source(backbone, source, x_T, cond).float().clamp(0, 1).cpu()  # evaluation's own sampling call
        verdicts = passed(images, prompts) if passed is not None else [None] * len(prompts)
        for j in range(len(prompts)):
            ax = axes[i][j]
            ax.imshow(images[j].permute(1, 2, 0).numpy(), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if verdicts[j] is not None:
                color = "#1a9850" if verdicts[j] else "#d73027"
                for spine in ax.spines.values():
                    spine.set_edgecolor(color)
                    spine.set_linewidth(2.5)
                ax.text(0.96, 0.04, "✓" if verdicts[j] else "✗", transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
                        color="white", fontweight="bold", bbox=dict(boxstyle="round,pad=0.15", fc=color, ec="none"))
            if j == 0:
                ax.set_ylabel("\n".join(textwrap.wrap(label, 16)), fontsize=7)
            if i == 0:
                ax.set_title("\n".join(textwrap.wrap(_short(prompts[j]), 18)), fontsize=6.5)
    if passed is not None:
        fig.suptitle(f"seed {seed}; frame and mark: the suite's verdict (green ✓ pass, red ✗ fail)", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
