"""`--save-images DIR`: every evaluated image as a PNG in GenEval's folder layout, with its schedule beside it.

    DIR/<index>/metadata.jsonl          the prompt's entry (GenEval's evaluation_metadata.jsonl line), one line
    DIR/<index>/samples/<k>.png         image k of the prompt (k = 00000, 00001, ...: the k-th evaluation seed)
    DIR/<index>/schedules/<k>.json      {"prompt", "seed", "steps", "schedule", "sigmas"}: the flow-time sigmas
                                        (1 -> 0) this image was sampled along

<index> (00000, ...) is the prompt's position in the evaluated prompt list, so a folder of GenEval's 553 prompts
is what GenEval's own `evaluation/evaluate_images.py` scores. Writes are atomic per file, and an interrupted run
that resumes only adds the images it had not finished.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from jsbench.io import replacing, write_text_atomic


class ImageSaver:
    """Writes the images of one evaluation (its items and seeds fix every image's folder and number)."""

    def __init__(self, root: str | Path, items: list, seeds: list[int], schedule: str = ""):
        self.root = Path(root)
        self.schedule = schedule
        self.index = {}
        for i, it in enumerate(items):
            self.index.setdefault(it.prompt, i)
        self.sample = {s: k for k, s in enumerate(seeds)}
        self._written: set[int] = set()

    def folder(self, item) -> Path:
        return self.root / f"{self.index[item.prompt]:05d}"

    def save(self, rows: list, images: torch.Tensor, sigmas: torch.Tensor) -> None:
        """rows: the (item, seed) of each image; images [B, 3, H, W] in [0, 1]; sigmas [B, N+1]."""
        from PIL import Image

        pixels = (images.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
        sig = sigmas.detach().to(torch.float64).cpu().tolist()
        for (item, seed), px, row in zip(rows, pixels, sig):
            folder = self.folder(item)
            k = self.sample.get(seed, seed)  # a seed outside the evaluation's list keeps its own number
            if self.index[item.prompt] not in self._written:
                write_text_atomic(folder / "metadata.jsonl", json.dumps(item.entry()) + "\n")
                self._written.add(self.index[item.prompt])
            with replacing(folder / "samples" / f"{k:05d}.png") as tmp:
                Image.fromarray(px).save(tmp, format="PNG")
            write_text_atomic(folder / "schedules" / f"{k:05d}.json", json.dumps(
                {"prompt": item.prompt, "seed": seed, "steps": len(row) - 1, "schedule": self.schedule, "sigmas": row}) + "\n")
