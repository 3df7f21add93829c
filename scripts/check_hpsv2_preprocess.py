#!/usr/bin/env python
"""Check jsbench's HPSv2 preprocessing against hpsv2's own transform, taken from the hpsv2 wheel.

hpsv2 cannot be installed beside jsbench (it pins pytest==7.2.0 and protobuf<4), so this script loads
only its `src/open_clip/transform.py` (and the `constants.py` it imports) from a downloaded wheel,
builds hpsv2's validation transform as hpsv2 builds it for scoring (`image_transform(224,
is_train=False, resize_longest_max=True)`), runs it on 8-bit PIL images of several shapes, and compares
with `as_hps(...).preprocess` on the same images as float tensors. Needs torchvision (the `rewards`
extra, e.g. with torch==2.14.1 torchvision==0.29.1). Prints one line per shape; exits 1 above `--atol`.

    pip download --no-deps hpsv2==1.2.0 -d /tmp/hpsv2
    python scripts/check_hpsv2_preprocess.py /tmp/hpsv2/hpsv2-1.2.0-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.rewards.clip import OPENAI_MEAN, OPENAI_STD, ClipModel, as_hps  # noqa: E402

SHAPES = [(512, 768), (1024, 576), (768, 1360), (301, 101), (48, 32), (448, 301), (512, 512)]
FILES = ("hpsv2/src/open_clip/transform.py", "hpsv2/src/open_clip/constants.py")


class _Identity(torch.nn.Module):
    def encode_image(self, x):
        return x


def hpsv2_transform(wheel: Path, workdir: Path):
    """hpsv2's scoring transform, imported from its two files copied out of the wheel into a package."""
    package = workdir / "hpsv2_transform"
    package.mkdir()
    (package / "__init__.py").write_text("")
    with zipfile.ZipFile(wheel) as zf:
        for name in FILES:
            (package / Path(name).name).write_bytes(zf.read(name))
    sys.path.insert(0, str(workdir))
    module = importlib.import_module("hpsv2_transform.transform")
    return module.image_transform(224, is_train=False, mean=OPENAI_MEAN, std=OPENAI_STD, resize_longest_max=True)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="hpsv2-*.whl (pip download --no-deps hpsv2==1.2.0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args(argv)
    if not args.wheel.is_file():
        parser.error(f"no such wheel: {args.wheel}")
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        reference = hpsv2_transform(args.wheel, Path(tmp))
        ours = as_hps(ClipModel(_Identity(), None, 224, device="cpu"))
        gen = torch.Generator().manual_seed(args.seed)
        worst = 0.0
        for shape in SHAPES:
            x = torch.rand(1, 3, *shape, generator=gen)
            pil = Image.fromarray((x[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))
            diff = (ours.preprocess(x)[0] - reference(pil)).abs().max().item()
            worst = max(worst, diff)
            print(f"{shape[0]}x{shape[1]}: max |jsbench - hpsv2| = {diff:.2e}")
    if worst > args.atol:
        print(f"error: preprocessing differs from hpsv2's by {worst:.2e} > {args.atol}", file=sys.stderr)
        raise SystemExit(1)
    return worst


if __name__ == "__main__":
    main()
