"""HPDv2: the Human Preference Dataset v2 benchmark prompts, scored with HPSv2, under the papers' protocol.

Benchmark prompts: four styles (anime, concept-art, paintings, photo), 800 each, from `benchmark/<style>.json`
(a JSON list of prompt strings) in a local folder (`prompts_dir=`, else $JSBENCH_HPDV2_DIR; the folder
may hold the files directly or under `benchmark/`), in the folder where the hpsv2 package keeps its
downloaded benchmark ($HPS_ROOT, else ~/.cache/hpsv2, under datasets/benchmark/), or in the Hugging Face
cache of the dataset `zhwang/HPDv2`. Training prompts: the HPDv2 *training* set's (`train.json`, a JSON
list of entries with a "prompt", about 100K distinct prompts) from the same folder, its parent, or the HF
cache. Nothing is downloaded; a missing file is one line naming it and how to fetch it.

Protocol (`protocol`, recorded with every result as provenance):
- `hpdv2-train` (when the training set is there): `test` is all 3,200 benchmark prompts, style as the task,
  as HPSv2 papers report; `train` is the training set's prompts. A reported HPSv2 is comparable with
  published ones (given the same HPS version).
- `benchmark-split` (the fallback without it): `test` holds out every 4th benchmark prompt of each style in
  a fixed hashed order (200 a style) and `train` is the rest, so a policy trained on `train` is evaluated on
  prompts it never saw; its numbers are not the papers'.
`all` is the full benchmark either way.

Per image: `hps` (100 * cosine under HPSv2 v2.0 or v2.1, with hpsv2's own preprocessing,
`jsbench.rewards.clip.HpsReward`). Aggregate: per style and `overall`, the mean of the four style means.
Without the HPSv2 weights, the suite is refused before any sampling (`preflight`, and `provenance()`,
which evaluation reads first).
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
from jsbench.suites.base import TASK_MEAN_RULE, EvalItem, Suite, TaskMetric, aggregate_by_task

STYLES = ("anime", "concept-art", "paintings", "photo")
HPDV2_REPO = "zhwang/HPDv2"
DIR_ENV = "JSBENCH_HPDV2_DIR"
HPS_ROOT_ENV = "HPS_ROOT"  # the hpsv2 package's own cache root (default ~/.cache/hpsv2)
TRAIN_FILE = "train.json"
TRAIN_TASK = "train"  # the training set's prompts have no style
PAPER_PROTOCOL = "hpdv2-train"
FALLBACK_PROTOCOL = "benchmark-split"

__all__ = ["STYLES", "load_hpdv2_prompts", "load_hpdv2_train_prompts", "split_hpdv2", "Hpdv2Suite", "PAPER_PROTOCOL",
           "FALLBACK_PROTOCOL"]


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


def _hpsv2_benchmark_dir() -> Path:
    """Where the hpsv2 package keeps the benchmark prompts it downloads: $HPS_ROOT/datasets/benchmark."""
    return Path(os.environ.get(HPS_ROOT_ENV) or Path.home() / ".cache" / "hpsv2").expanduser() / "datasets" / "benchmark"


def _cached_dataset_file(name: str) -> Path | None:
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(HPDV2_REPO, name, repo_type="dataset", local_files_only=True))
    except Exception:
        return None


def _style_file(style: str, prompts_dir: str | None) -> Path:
    folder = prompts_dir or os.environ.get(DIR_ENV)
    if folder:
        for candidate in (Path(folder) / f"{style}.json", Path(folder) / "benchmark" / f"{style}.json"):
            if candidate.is_file():
                return candidate
        raise JsbenchError(f"HPDv2 prompts: no {style}.json in {folder!r} (nor in its benchmark/)")
    hpsv2_copy = _hpsv2_benchmark_dir() / f"{style}.json"
    if hpsv2_copy.is_file():
        return hpsv2_copy
    cached = _cached_dataset_file(f"benchmark/{style}.json")
    if cached is None:
        raise JsbenchError(
            f"HPDv2 prompts are not available locally; fetch them with "
            f"`hf download {HPDV2_REPO} --repo-type dataset --include 'benchmark/*.json'` or set ${DIR_ENV} to a folder of <style>.json"
        )
    return cached


def load_hpdv2_prompts(prompts_dir: str | None = None, styles: Sequence[str] = STYLES) -> dict[str, list[str]]:
    """{style: prompts} for the four HPDv2 benchmark styles."""
    return {style: _read_style(_style_file(style, prompts_dir), style) for style in styles}


def train_file(prompts_dir: str | None = None) -> Path | None:
    """The HPDv2 training set's annotation file (train.json): in the prompts folder or its parent, else
    in the HF cache of zhwang/HPDv2; None when absent."""
    folder = prompts_dir or os.environ.get(DIR_ENV)
    if folder:
        for candidate in (Path(folder) / TRAIN_FILE, Path(folder).parent / TRAIN_FILE):
            if candidate.is_file():
                return candidate
    return _cached_dataset_file(TRAIN_FILE)


def load_hpdv2_train_prompts(path: str | Path) -> list[str]:
    """The distinct prompts of the HPDv2 training set's train.json (entries with a "prompt", or strings)."""
    return list(dict.fromkeys(_read_style(Path(path), TRAIN_TASK)))


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


class Hpdv2Suite(Suite):
    name = "hpdv2"
    primary_metric = "hps"
    protocol_seeds = 1  # hpsv2's benchmark scores one image per prompt of each style
    overall_rule = TASK_MEAN_RULE  # the mean of the four style means

    def __init__(self, backbone=None, prompts_dir: str | None = None, reward=None, checkpoint: str | None = None, version: str | None = None):
        from jsbench.rewards.clip import hps_version

        self._prompts = load_hpdv2_prompts(prompts_dir)
        self._train_file = train_file(prompts_dir)
        self._train_prompts: list[str] | None = None  # read on first use (100K prompts)
        self.protocol = PAPER_PROTOCOL if self._train_file is not None else FALLBACK_PROTOCOL
        self._reward = reward
        # v2.0 or v2.1 (default $JSBENCH_HPS_VERSION, else v2.1), resolved now: a bad version fails when the
        # suite is built, not at first scoring, and $JSBENCH_HPS_VERSION is read once, here
        self._reward_options = {"checkpoint": checkpoint, "version": hps_version(version)}

    @classmethod
    def preflight(cls, backbone=None, prompts_dir: str | None = None, checkpoint: str | None = None, version: str | None = None) -> None:
        """What `jsbench.suites.preflight` runs before any weights load: the benchmark prompts and the HPSv2
        checkpoint must be there (one line naming the missing file otherwise)."""
        from jsbench.rewards.clip import resolve_hps_checkpoint

        load_hpdv2_prompts(prompts_dir)
        resolve_hps_checkpoint(checkpoint, version)

    def provenance(self) -> dict:
        """The reward model that scored the images and the protocol (recorded with every result): its `id`,
        which HpsReward builds from its version and checkpoint. Read before any sampling, so a missing HPSv2
        checkpoint is refused here, in one line (locating it loads no weights)."""
        if self._reward is None:
            from jsbench.rewards.clip import resolve_hps_checkpoint

            resolve_hps_checkpoint(**self._reward_options)
        return {"reward_model": str(getattr(self.reward, "id", None) or "custom"), "protocol": self.protocol}

    @property
    def reward(self):
        """The HPSv2 reward, built on first scoring (listing items never loads the model)."""
        if self._reward is None:
            from jsbench.rewards.clip import HpsReward

            self._reward = HpsReward(**self._reward_options)
        return self._reward

    def items(self, split: str = "test") -> list[EvalItem]:
        check_split(split)
        if self.protocol == PAPER_PROTOCOL and split != "all":
            if split == "test":  # the papers' evaluation: every benchmark prompt
                return self.items("all")
            if self._train_prompts is None:
                self._train_prompts = load_hpdv2_train_prompts(self._train_file)
            return [EvalItem(p, TRAIN_TASK, {"style": TRAIN_TASK}) for p in self._train_prompts]
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
