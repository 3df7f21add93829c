"""`ColorClassifier`: GenEval's colour rule. The image as the 8-bit picture GenEval reads; the object's mask
composited over grey #999 (153) with PIL (the whole image when there is no mask); cropped to its box with
PIL's rounding; open_clip's evaluation transform (shortest side to the model's size, bicubic, centre crop);
CLIP ViT-L-14 (openai) with fp32 weights, run under CUDA autocast as GenEval's pinned clip-benchmark 1.4.0
runs it (`amp=False` for pure fp32; on the CPU it is fp32 either way); zero-shot over the ten colours with
GenEval's three templates per colour, template embeddings normalised, averaged and renormalised.
"""

from __future__ import annotations

import contextlib
import os
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from jsbench.rewards.detectors import to_uint8
from jsbench.scoring.geneval import COLORS

__all__ = ["ColorClassifier", "GENEVAL_COLORS", "OFFICIAL_COLOR_MODEL"]

COLOR_ENV = "JSBENCH_GENEVAL_COLOR_MODEL"
GENEVAL_COLORS = COLORS
COLOR_TEMPLATES = ("a photo of a {c} {cls}", "a photo of a {c}-colored {cls}", "a photo of a {c} object")
OFFICIAL_COLOR_MODEL = "ViT-L-14:openai"
GREY = (153, 153, 153)  # GenEval's "#999" crop background


class ColorClassifier:
    """GenEval's zero-shot colour rule on a `ClipModel` (open_clip ViT-L-14 / openai, fp32, by default)."""

    def __init__(self, clip=None, colors: Sequence[str] = GENEVAL_COLORS, spec: str | None = None, amp: bool = True):
        self._clip = clip
        self.spec = spec or os.environ.get(COLOR_ENV) or OFFICIAL_COLOR_MODEL
        self.colors = tuple(colors)
        self.amp = amp
        self._classifiers: dict[str, torch.Tensor] = {}

    @property
    def id(self) -> str:
        """Provenance: the model and how it runs (fp32 weights; autocast on CUDA as GenEval's pins run it);
        a model passed in is "custom" unless it carries an `id`."""
        if self._clip is not None:
            return str(getattr(self._clip, "id", "custom"))
        return f"{self.spec}/fp32" + ("+cuda-amp" if self.amp else "")

    @property
    def clip(self):
        if self._clip is None:
            from jsbench.rewards.clip import clip_from_spec

            self._clip = clip_from_spec(self.spec, dtype=torch.float32)
        return self._clip

    def _autocast(self):
        device = getattr(self.clip, "device", torch.device("cpu"))
        if self.amp and torch.device(device).type == "cuda":
            return torch.autocast("cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    @torch.no_grad()
    def classifier(self, cls: str) -> torch.Tensor:
        """[n_colours, D]: per colour the mean of its normalised template embeddings, renormalised."""
        if cls not in self._classifiers:
            rows = []
            with self._autocast():
                for c in self.colors:
                    tokens = self.clip.tokenizer([t.format(c=c, cls=cls) for t in COLOR_TEMPLATES]).to(self.clip.device)
                    emb = F.normalize(self.clip.model.encode_text(tokens), dim=-1).mean(0)
                    rows.append(emb / emb.norm())
            self._classifiers[cls] = torch.stack(rows)
        return self._classifiers[cls]

    @staticmethod
    def crops(image: torch.Tensor, boxes: Sequence[Sequence[float]], masks: Sequence | None = None) -> list:
        """PIL crops as GenEval makes them: the 8-bit image, each object's mask composited over grey
        #999 (the whole image when it has no mask), cropped to its box by PIL (coordinates rounded)."""
        from PIL import Image

        picture = Image.fromarray(to_uint8(image[None])[0].permute(1, 2, 0).cpu().numpy(), "RGB")
        blank = Image.new("RGB", picture.size, GREY)
        out = []
        for i, box in enumerate(boxes):
            mask = None if masks is None else masks[i]
            shown = picture
            if mask is not None:
                mask = np.asarray(mask.cpu() if hasattr(mask, "cpu") else mask).astype(bool)
                if mask.shape != picture.size[::-1]:
                    raise ValueError(f"mask {mask.shape} does not match the image {picture.size[::-1]}")
                shown = Image.composite(picture, blank, Image.fromarray(mask))
            out.append(shown.crop(tuple(float(v) for v in box[:4])))
        return out

    def pixels(self, crops: Sequence) -> torch.Tensor:
        """open_clip's evaluation transform on PIL crops: shortest side to the model's size (bicubic),
        centre crop, [0, 1], normalised -> [N, 3, S, S]."""
        from PIL import Image

        size = int(self.clip.image_size)
        mean = torch.as_tensor(self.clip.mean, dtype=torch.float32).flatten().view(3, 1, 1).cpu()
        std = torch.as_tensor(self.clip.std, dtype=torch.float32).flatten().view(3, 1, 1).cpu()
        out = []
        for crop in crops:
            w, h = crop.size
            if w == 0 or h == 0:
                raise ValueError(f"an empty crop ({w}x{h}) has no colour")
            short, long = (w, h) if w <= h else (h, w)
            new_long = int(size * long / short)
            new_w, new_h = (size, new_long) if w <= h else (new_long, size)
            crop = crop.resize((new_w, new_h), Image.BICUBIC)
            top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
            crop = crop.crop((left, top, left + size, top + size)).convert("RGB")
            x = torch.from_numpy(np.asarray(crop, dtype=np.uint8).copy()).permute(2, 0, 1).float() / 255
            out.append((x - mean) / std)
        return torch.stack(out)

    @torch.no_grad()
    def classify(self, image: torch.Tensor, boxes, cls: str, masks=None) -> list[str]:
        """The colour name of each box of one image [3, H, W] (an object of class `cls`)."""
        if len(boxes) == 0:
            return []
        x = self.pixels(self.crops(image, boxes, masks)).to(self.clip.device)
        clf = self.classifier(cls)
        with self._autocast():
            feats = F.normalize(self.clip.model.encode_image(x.to(_model_dtype(self.clip.model))), dim=-1)
            logits = 100.0 * feats @ clf.T.to(feats.dtype)
        return [self.colors[i] for i in logits.float().argmax(-1).tolist()]


def _model_dtype(model) -> torch.dtype:
    p = next(iter(model.parameters()), None) if isinstance(model, torch.nn.Module) else None
    return p.dtype if p is not None else torch.float32
