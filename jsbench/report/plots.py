"""Figures for leaderboards: schedules, their spread, training curves and image grids (matplotlib, PNG).

Every figure is written atomically next to the table that links it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from jsbench.io import replacing


# Figures are byte-stable for identical inputs, so regenerating a committed figure leaves git clean:
# - one fixed style: matplotlib's own defaults, whatever matplotlibrc, MPLRC or style the user has (a user
#   rc file changes fonts, hinting and line widths), on the Agg backend, with the bundled DejaVu Sans;
# - no metadata that varies: PNG's "Software" names matplotlib's version, so it is dropped;
# - a figure whose pixels equal the file already there is not rewritten (a newer zlib or libpng encodes
#   the same pixels into other bytes).
_VARYING_RC = ("backend", "backend_fallback", "interactive", "webagg.port", "webagg.address", "webagg.open_in_browser",
               "webagg.port_retries", "tk.window_focus", "toolbar", "timezone", "figure.raise_window")
FIGURE_RC = {"svg.hashsalt": "jsbench", "font.family": ["DejaVu Sans"], "savefig.format": "png"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fixed_style(plot):
    """Draw `plot` (a function returning a figure's path) under FIGURE_RC on matplotlib's defaults."""
    import functools

    @functools.wraps(plot)
    def drawn(*args, **kwargs):
        import matplotlib

        _pyplot()
        rc = {k: v for k, v in matplotlib.rcParamsDefault.items() if k not in _VARYING_RC}
        with matplotlib.rc_context({**rc, **FIGURE_RC}):
            return plot(*args, **kwargs)

    return drawn


def _pixels(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGBA"))


# Float sums differ a little between CPUs (MKL picks its kernels by CPU): a policy's schedule or a sampled image
# can then move a few anti-aliased pixels by one level. That is the same figure; rewriting it would leave a clean
# clone dirty on another machine (seen: 16-89 pixels of 0.6-2.9 million, by one level, on an AVX-512 Intel CPU).
SAME_FIGURE_MAX_LEVEL = 1
SAME_FIGURE_MAX_SHARE = 1e-3


def same_figure(a, b) -> bool:
    """Whether two RGBA pixel arrays show the same figure: equal shapes, and at most SAME_FIGURE_MAX_SHARE of
    the pixels differing, each by at most SAME_FIGURE_MAX_LEVEL in every channel."""
    import numpy as np

    if a.shape != b.shape:
        return False
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return int(diff.max(initial=0)) <= SAME_FIGURE_MAX_LEVEL and (diff.max(-1) > 0).mean() <= SAME_FIGURE_MAX_SHARE


def _save(fig, path: Path) -> Path:
    """Write `fig` as PNG at `path` atomically, unless the file there already holds the same figure
    (`same_figure`: the same pixels, up to a few by one level)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    png = buf.getvalue()
    path = Path(path)
    if path.is_file():
        old = path.read_bytes()
        if old == png:
            return path
        try:
            if same_figure(_pixels(old), _pixels(png)):
                return path  # the same figure: keep the committed bytes
        except OSError:  # not a PNG we can read: replace it
            pass
    with replacing(path, ".tmp.png") as tmp:
        tmp.write_bytes(png)
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


MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "<", ">"]


def _dodge(i: int, count: int, n_steps: int) -> float:
    """A small horizontal offset per source (a fifth of a step across all of them), so that schedules that
    coincide (learned ones often match default at a node) stay distinguishable."""
    return (i - (count - 1) / 2) * 0.2 / max(count, 1) / max(n_steps, 1)


@fixed_style
def plot_schedules(backbone, sources: list, prompts: list[str], seeds: list[int], path: Path, title: str | None = None) -> Path:
    """Left: each source's schedule (sigma vs step fraction) for a few prompts, seed 0; colour and marker =
    source, line style = prompt, with a key for both. Right: each schedule's mean sigma at each step over
    prompts x seeds, its bars ±1 standard deviation (how much the schedule adapts to the instance; none
    for a fixed schedule). Sources are nudged apart horizontally so coinciding lines stay visible.
    `title` (default: the backbone's name and the budget) heads the figure."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows = [(p, s) for p in prompts for s in seeds]
    from jsbench.evaluation.evaluate import noise_seed

    cond = backbone.encode([p for p, _ in rows])
    x_T = backbone.initial_noise([noise_seed(p, s) for p, s in rows])  # the noises evaluation draws
    shown = prompts[: len(LINE_STYLES)]
    steps = None
    for i, (source, label) in enumerate(zip(sources, unique_labels(sources))):
        sig = source.make(x_T, cond).float().cpu()
        steps = n = sig.shape[1] - 1
        frac = torch.linspace(0, 1, n + 1) + _dodge(i, len(sources), n)
        color, marker = colors[i % len(colors)], MARKERS[i % len(MARKERS)]
        for j, _ in enumerate(shown):
            ax.plot(frac, sig[j * len(seeds)], marker=marker, ms=4, mfc="none", color=color, alpha=0.85, ls=LINE_STYLES[j],
                    label=label if j == 0 else None)
        mean, sd = sig.mean(0), sig.std(0)
        ax2.errorbar(frac, mean, yerr=sd, color=color, marker=marker, ms=4, mfc="none", capsize=3, label=label)
    for a, sub in [(ax, f"schedules for {len(shown)} prompts, seed {seeds[0]}"),
                   (ax2, f"mean over {len(prompts)} prompts × {len(seeds)} seeds; bars: ±1 sd across them")]:
        a.set_xlabel("step / N (sources nudged apart so that equal ones stay visible)" if a is ax2 else "step / N")
        a.set_ylabel("sigma (flow time)")
        a.set_title(sub, fontsize=10)
        a.grid(alpha=0.3)
    methods = ax.legend(fontsize=8, title="colour, marker = schedule", title_fontsize=8, loc="upper right")
    ax.add_artist(methods)
    keys = [Line2D([0], [0], color="0.3", ls=LINE_STYLES[j]) for j in range(len(shown))]
    ax.legend(keys, [_short(p) for p in shown], fontsize=7, title="line style = prompt", title_fontsize=8, loc="lower left")
    ax2.legend(fontsize=8)
    fig.suptitle(title or f"{backbone.name} · {steps} steps · schedules", fontsize=11)
    return _save(fig, path)


@fixed_style
def plot_training_curves(logs: dict[str, list[dict]], path: Path, window: int = 20, title: str | None = None) -> Path:
    """Reward and the James–Stein shrinkage ĉ per update, smoothed, one line per run (colour and line
    style per run, so overlapping runs stay distinguishable); `title` (e.g. backbone and budget) heads it."""
    from jsbench.train.reinforce import smoothed

    plt = _pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.3))
    for i, (label, log) in enumerate(logs.items()):
        style = dict(label=label, ls=LINE_STYLES[i % len(LINE_STYLES)], lw=1.4)
        its = [r["iteration"] for r in log]
        ax.plot(its, smoothed([r["reward"] for r in log], window), **style)
        lam = [r.get("shrinkage") for r in log]
        if any(v is not None for v in lam):
            ax2.plot(its, smoothed([float("nan") if v is None else v for v in lam], window), **style)
    ax.set_title(f"training reward (moving mean over {window} updates)", fontsize=10)
    ax2.set_title("James–Stein shrinkage ĉ (0 = RLOO, 1 = the batch's mean level)", fontsize=10)
    for a in (ax, ax2):
        a.set_xlabel("update")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    return _save(fig, path)


@fixed_style
def plot_image_grid(backbone, sources: list, prompts: list[str], seed: int, path: Path, passed=None, title: str | None = None) -> Path:
    """Rows = methods, columns = prompts, the same seed everywhere. With `passed(images, prompts) ->
    [bool]` (the suite's verdict per image), each image is framed and marked: green ✓ pass, red ✗ fail.
    `title` (e.g. backbone and budget) heads the grid."""
    import textwrap

    from jsbench.evaluation.evaluate import noise_seed, sample_source

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
    head = f"{title}; " if title else ""
    if passed is not None:
        fig.suptitle(f"{head}seed {seed}; frame and mark: the suite's verdict (green ✓ pass, red ✗ fail)", fontsize=8)
    elif title:
        fig.suptitle(f"{head}seed {seed}", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
