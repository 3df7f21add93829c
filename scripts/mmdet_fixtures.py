"""Write the GenEval-detector fixtures with real mmdet (run inside the side venv that
scripts/make_mmdet_fixtures.sh builds: mmdet 2.27.0, mmcv-full 1.7.2, torch 2.1.2).

A reduced-size model of GenEval's exact architecture (its config, mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco,
with Swin width 8, depths 2-2-2-2, hidden size 32, 8 queries, 2 encoder and 3 decoder layers), random
weights, written in mmdet's own key names; its raw outputs in float64 on one image; and
`inference_detector`'s final detections (every one of the 100 per image, no threshold) on a few images;
and the full-size model's key names and shapes (no weights), to check the converter on GenEval's sizes.
This file imports mmdet, so it never runs in the ordinary test suite: tests/test_mmdet_convert.py reads
what it writes.

    python scripts/mmdet_fixtures.py --out tests/fixtures/mmdet
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

CONFIG = "mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco"
DETECTION_SIZES = [(48, 64), (56, 56), (40, 72)]  # (H, W): resized to fit 1333 x 800, then padded to 32
RAW_SIZE = (256, 256)  # every Swin stage stays wider than its 7 x 7 window


def reduced_config(mmdet_root: Path):
    """GenEval's config with every width and count shrunk; the structure is unchanged."""
    from mmcv import Config

    cfg = Config.fromfile(str(mmdet_root / ".mim" / "configs" / "mask2former" / f"{CONFIG}.py"))
    m = cfg.model
    m.backbone.update(embed_dims=8, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8], init_cfg=None)
    head = m.panoptic_head
    head.update(in_channels=[8, 16, 32, 64], feat_channels=32, out_channels=32, num_queries=8)
    pixel = head.pixel_decoder
    pixel.encoder.num_layers = 2
    pixel.encoder.transformerlayers.attn_cfgs.update(embed_dims=32, num_heads=4)
    pixel.encoder.transformerlayers.ffn_cfgs.update(embed_dims=32, feedforward_channels=64)
    pixel.positional_encoding.num_feats = 16
    head.positional_encoding.num_feats = 16
    dec = head.transformer_decoder
    dec.num_layers = 3
    dec.transformerlayers.attn_cfgs.update(embed_dims=32, num_heads=4)
    dec.transformerlayers.ffn_cfgs.update(embed_dims=32, feedforward_channels=128)
    dec.transformerlayers.feedforward_channels = 128
    m.init_cfg = None
    return cfg


def randomise(model: torch.nn.Module, seed: int = 0) -> None:
    """Random weights everywhere, norms included (a swapped norm must show); class logits sharpened so
    that some detections score above GenEval's 0.3."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or ".gn." in name or "ln" in name):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / max(1, p[0].numel()) ** 0.5))
        model.panoptic_head.cls_embed.weight.mul_(12.0)


def test_image(size: tuple[int, int], seed: int) -> np.ndarray:
    """An RGB uint8 picture with a few flat rectangles on a gradient (something for masks to find)."""
    rng = np.random.default_rng(seed)
    h, w = size
    img = np.zeros((h, w, 3), np.float64)
    img += np.linspace(0, 120, w)[None, :, None] + np.linspace(0, 60, h)[:, None, None]
    for _ in range(3):
        y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
        y1, x1 = y0 + rng.integers(h // 4, h // 2), x0 + rng.integers(w // 4, w // 2)
        img[y0:y1, x0:x1] = rng.integers(0, 256, 3)
    return np.clip(img + rng.normal(0, 4, img.shape), 0, 255).round().astype(np.uint8)


def raw_outputs(model, rgb: np.ndarray) -> dict[str, torch.Tensor]:
    """The head's last-layer class and mask logits in float64 on the image normalised as mmdet does
    (RGB, (x - mean) / std); the query-only layer 0's class logits too."""
    mean = torch.tensor([123.675, 116.28, 103.53], dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375], dtype=torch.float64).view(1, 3, 1, 1)
    x = (torch.from_numpy(rgb).permute(2, 0, 1)[None].double() - mean) / std
    h, w = rgb.shape[:2]
    metas = [dict(batch_input_shape=(h, w), img_shape=(h, w, 3), pad_shape=(h, w, 3), ori_shape=(h, w, 3))]
    model64 = model.double()
    with torch.no_grad():
        cls, masks = model64.panoptic_head(model64.extract_feat(x), metas)
    model.float()
    return {"class_logits": cls[-1][0].contiguous(), "mask_logits": masks[-1][0].contiguous(),
            "class_logits_layer0": cls[0][0].contiguous()}


def final_detections(model, rgb: np.ndarray) -> list[dict]:
    """inference_detector on the BGR image (what it reads from a PNG): every detection, per class in order."""
    from mmdet.apis import inference_detector

    bbox, segm = inference_detector(model, np.ascontiguousarray(rgb[..., ::-1]))
    out = []
    for c, rows in enumerate(bbox):
        for j, row in enumerate(rows):
            mask = np.asarray(segm[c][j], dtype=bool)
            out.append({"label": c, "box": [float(v) for v in row[:4]], "score": float(row[4]),
                        "mask": np.packbits(mask.flatten()).tobytes().hex()})
    return out


def full_size_keys(mmdet_root: Path) -> dict:
    """GenEval's unmodified config built by mmdet: every state-dict key with its shape (no weights), and
    one Swin relative position index (the same in every block)."""
    from mmcv import Config
    from mmdet.models import build_detector

    cfg = Config.fromfile(str(mmdet_root / ".mim" / "configs" / "mask2former" / f"{CONFIG}.py"))
    cfg.model.backbone.init_cfg = None
    state = build_detector(cfg.model).state_dict()
    index = state["backbone.stages.0.blocks.0.attn.w_msa.relative_position_index"]
    return {"config": CONFIG, "shapes": {k: list(v.shape) for k, v in state.items()}, "relative_position_index": index.tolist(),
            "config_text": cfg.pretty_text}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="fixture folder (tests/fixtures/mmdet)")
    args = ap.parse_args()
    import mmcv
    import mmdet
    from mmdet.apis import init_detector
    from PIL import Image
    from safetensors.torch import save_file

    torch.manual_seed(0)
    cfg = reduced_config(Path(mmdet.__file__).parent)
    model = init_detector(cfg, None, device="cpu")
    randomise(model)
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"config": cfg.pretty_text, "CLASSES": list(mmdet.core.get_classes("coco")),
            "mmdet_version": mmdet.__version__, "mmcv_version": mmcv.__version__}
    state = {k: v.detach().clone().float() for k, v in model.state_dict().items()}
    torch.save({"meta": meta, "state_dict": state}, args.out / "mask2former_reduced_mmdet2.pth")

    rgb = test_image(RAW_SIZE, seed=100)
    Image.fromarray(rgb).save(args.out / "raw_input.png")
    save_file(raw_outputs(model, rgb), str(args.out / "raw_outputs_float64.safetensors"))

    images = []
    for i, size in enumerate(DETECTION_SIZES):
        rgb = test_image(size, seed=i)
        name = f"image{i}.png"
        Image.fromarray(rgb).save(args.out / name)
        images.append({"image": name, "size": list(size), "detections": final_detections(model, rgb)})
    from mmcv import _ext

    ops = "python-only (MMCV_OPS=0)" if str(getattr(_ext, "__file__", "")).endswith(".py") else "compiled"
    record = {"made_with": {"mmdet": mmdet.__version__, "mmcv": mmcv.__version__, "mmcv_ops": ops, "torch": torch.__version__},
              "config": f"{CONFIG}, reduced (scripts/mmdet_fixtures.py)", "images": images}
    (args.out / "detections.json").write_text(json.dumps(record) + "\n")
    (args.out / "geneval_full_size_keys.json").write_text(json.dumps(full_size_keys(Path(mmdet.__file__).parent)) + "\n")
    print(f"wrote {args.out}: {len(state)} tensors, " + ", ".join(f"{len(r['detections'])} detections" for r in images))


if __name__ == "__main__":
    main()
