#!/usr/bin/env python
"""OCR engines side by side: words read exactly and seconds per image, on rendered 512 px images.

Each image is one word (or two) from a fixed list, drawn in DejaVu Sans (matplotlib's copy) at a
seeded position and size on a light background, the size a real backbone's output is scored at. Every
engine that loads here (`rapidocr`, `tesseract`, `easyocr`; others are reported as unavailable with the
reason) reads every image once after one warm-up read; the time is the mean wall-clock per image on
this machine's CPU. Prints one JSON line; `--out` also writes it (atomically).

    python scripts/bench_ocr_engines.py                        # 10 images, every engine available
    python scripts/bench_ocr_engines.py --engines rapidocr easyocr --images 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench import JsbenchError  # noqa: E402
from jsbench.io import write_text_atomic  # noqa: E402
from jsbench.rewards.ocr_engines import available_engines, load_engine  # noqa: E402

WORDS = ["river", "OPEN", "Coffee", "jazz night", "Route 66", "garden", "SALE", "hello world", "Bakery", "exit"]


def render(texts: list[str], size: int, seed: int) -> torch.Tensor:
    """[N, 3, size, size] in [0, 1]: each text dark on light, DejaVu Sans, seeded size and position."""
    import matplotlib
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    font_path = str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")
    out = []
    for text in texts:
        font = ImageFont.truetype(font_path, rng.randint(size // 12, size // 8))
        img = Image.new("RGB", (size, size), (240, 236, 224))
        draw = ImageDraw.Draw(img)
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
        x = rng.randint(8, max(8, size - (right - left) - 8))
        y = rng.randint(8, max(8, size - (bottom - top) - 8))
        draw.text((x - left, y - top), text, font=font, fill=(20, 20, 28))
        out.append(torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1))
    return torch.stack(out)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=None, help=f"default: all ({', '.join(available_engines())})")
    parser.add_argument("--images", type=int, default=10)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.images < 1 or args.size < 64:
        parser.error("--images must be >= 1 and --size >= 64")
    texts = [WORDS[i % len(WORDS)] for i in range(args.images)]
    images = render(texts, args.size, args.seed)
    result: dict = {"images": args.images, "size": args.size, "seed": args.seed, "threads": torch.get_num_threads(),
                    "cpu_count": os.cpu_count(), "python": platform.python_version(), "engines": {}}
    for name in args.engines or available_engines():
        try:
            engine = load_engine(name, gpu=False) if name == "easyocr" else load_engine(name)
        except JsbenchError as err:
            result["engines"][name] = {"unavailable": str(err)}
            continue
        engine.read(images[:1])  # warm-up: first-call allocations and lazy initialisation
        if getattr(engine, "memo", None) is not None:
            engine.memo.clear()  # the timed read reads every image, the warm-up's too
        start = time.perf_counter()
        reads = engine.read(images)
        seconds = (time.perf_counter() - start) / args.images
        exact = sum(r.lower().split() == t.lower().split() for r, t in zip(reads, texts))
        result["engines"][name] = {"exact": exact, "of": args.images, "s_per_image": round(seconds, 4), "reads": reads}
    line = json.dumps(result)
    print(line)
    if args.out is not None:
        write_text_atomic(args.out, line + "\n")
    return result


if __name__ == "__main__":
    main()
