"""HPDv2: the Human Preference Dataset v2 benchmark prompts, scored with HPSv2.

Prompts: four styles (anime, concept-art, paintings, photo), 800 each, from `benchmark/<style>.json`
(a JSON list of prompt strings) in a local folder (`prompts_dir=`, else $JSBENCH_HPDV2_DIR; the folder
may hold the files directly or under `benchmark/`) or in the Hugging Face cache of the dataset
`zhwang/HPDv2`. Nothing is downloaded; when absent, one line says how to fetch them.

Splits: `all` is the full benchmark (3,200 prompts, what HPSv2 papers report); `test` holds out every
4th prompt of each style in a fixed hashed order (200 a style) and `train` is the rest, so a policy
trained on `train` is evaluated on prompts it never saw.

Per image: `hps` (100 * cosine under HPSv2 v2.0 or v2.1, with hpsv2's own preprocessing,
`jsbench.rewards.clip.HpsReward`). Aggregate: per style and `overall`, the mean of the four style means.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import torch

from jsbench import JsbenchError
from jsbench.splits import check_split, hashed_order, held_out_positions
from jsbench.suites import register_suite
from jsbench.suites.base import EvalItem, TaskMetric, aggregate_by_task

STYLES = ("anime", "concept-art", "paintings", "photo")
HPDV2_REPO = "zhwang/HPDv2"
DIR_ENV = "JSBENCH_HPDV2_DIR"

__all__ = ["STYLES", "load_hpdv2_prompts", "split_hpdv2", "Hpdv2Suite"]


def _read_style(path: Path, style: str) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise JsbenchError(f"HPDv2 prompts {str(path)!r} are not readable JSON ({exc})") from None
    if not isinstance(data, list):
        raise JsbenchError(f"HPDv2 prompts {str(path)!r}: expected a JSON list of prompts")
    prompts = []
    for i, entry in enumerate(data):
        text = entry.get("prompt", entry.get("caption")) if isinstance(entry, dict) else entry
        if not isinstance(text, str) or not text.strip():
            raise JsbenchError(f"HPDv2 prompts {str(path)!r}: entry {i} is not a prompt string")
        prompts.append(text.strip())
    return prompts


def _style_file(style: str, prompts_dir: str | None) -> Path:
    folder = prompts_dir or os.environ.get(DIR_ENV)
    if folder:
        for candidate in (Path(folder) / f"{style}.json", Path(folder) / "benchmark" / f"{style}.json"):
            if candidate.is_file():
                return candidate
        raise JsbenchError(f"HPDv2 prompts: no {style}.json in {folder!r} (nor in its benchmark/)")
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(HPDV2_REPO, f"benchmark/{style}.json", repo_type="dataset", local_files_only=True))
    except Exception:
        raise JsbenchError(
            f"HPDv2 prompts are not available locally; fetch them with "
            f"`hf download {HPDV2_REPO} --repo-type dataset --include 'benchmark/*.json'` or set ${DIR_ENV} to a folder of <style>.json"
        ) from None


def load_hpdv2_prompts(prompts_dir: str | None = None, styles: Sequence[str] = STYLES) -> dict[str, list[str]]:
    """{style: prompts} for the four HPDv2 benchmark styles."""
    return {style: _read_style(_style_file(style, prompts_dir), style) for style in styles}


def split_hpdv2(prompts: dict[str, list[str]], split: str) -> list[tuple[str, str]]:
    """(style, prompt) pairs of a split: `all`, or the hashed `test` quarter / `train` rest per style."""
    check_split(split)
    out = []
    for style, group in prompts.items():
        unique = list(dict.fromkeys(group))
        if split == "all":
            out += [(style, p) for p in unique]
            continue
        order = hashed_order(unique)
        held = set(held_out_positions(len(order)))
        out += [(style, p) for i, p in enumerate(order) if (i in held) == (split == "test")]
    return out


class Hpdv2Suite:
    name = "hpdv2"
    primary_metric = "hps"

    def __init__(self, backbone=None, prompts_dir: str | None = None, reward=None, checkpoint: str | None = None, version: str | None = None):
        from jsbench.rewards.clip import hps_version

        self._prompts = load_hpdv2_prompts(prompts_dir)
        self._reward = reward
        # v2.0 or v2.1 (default $JSBENCH_HPS_VERSION, else v2.1), resolved now: a bad version fails when the
        # suite is built, not at first scoring, and $JSBENCH_HPS_VERSION is read once, here
        self._reward_options = {"checkpoint": checkpoint, "version": hps_version(version)}

    def provenance(self) -> dict:
        """The reward model that scored the images (recorded with every result): its `id`, which HpsReward
        builds from its version and checkpoint (constructing it loads no weights)."""
        return {"reward_model": str(getattr(self.reward, "id", None) or "custom")}

    @property
    def reward(self):
        """The HPSv2 reward, built on first scoring (listing items never loads the model)."""
        if self._reward is None:
            from jsbench.rewards.clip import HpsReward

            self._reward = HpsReward(**self._reward_options)
        return self._reward

    def items(self, split: str = "test") -> list[EvalItem]:
        return [EvalItem(p, style, {"style": style}) for style, p in split_hpdv2(self._prompts, split)]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        if images.shape[0] != len(items):
            raise ValueError(f"{images.shape[0]} images for {len(items)} items")
        values = self.reward(images, [it.prompt for it in items])
        return [{"hps": float(v)} for v in values]

    def aggregate(self, scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
        order = {t: i for i, t in enumerate(STYLES)}
        return sorted(aggregate_by_task(scores, items), key=lambda m: (m.metric, order.get(m.task, len(order))))


@register_suite("hpdv2")
def _suite(backbone=None, **options) -> Hpdv2Suite:
    return Hpdv2Suite(backbone, **options)
