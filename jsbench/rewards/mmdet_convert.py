"""GenEval's mmdet Mask2Former checkpoint -> a transformers `Mask2FormerForUniversalSegmentation` folder.

GenEval scores images with mmdetection's Mask2Former Swin-S (`mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco`).
Its weights map one to one onto transformers' Mask2Former; `convert_mmdet_checkpoint` does that without
mmdet, so the official weights run on any torch. What needs care:

- Swin's fused `qkv` and the decoder self-attention's `in_proj` split in three along dim 0 (cross-attention
  keeps its fused `in_proj`); patch merging's `reduction` / `norm` undo mmdet's unfold channel order.
- mmdet-2 decoder layers: `attentions.0` is cross-, `attentions.1` self-attention; `norms.0/1/2` the cross /
  self / FFN norms. mmdet-3 names them `cross_attn`, `self_attn`, `ffn` (read as the same).
- transformers counts the decoder's query-only "layer 0" in `decoder_layers`: mmdet's 9 layers are its 10.

Every size (Swin widths, depths, heads per stage, window; hidden sizes, queries, layer counts, FFN widths,
classes) is read from the parameter shapes; the decoder's head count, which no shape holds, from the
checkpoint's embedded config, else GenEval's (8). A key the mapping does not consume, or one it needs and
does not find, is refused in one line: mmdet's own loader only warns. The `.pth` is read with
`torch.load(weights_only=True)`; the folder holds config.json, model.safetensors and `geneval_official.json`
(the source file's sha256, whether it is one GenEval downloads, the key style and the sizes read).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import torch

from jsbench import JsbenchError

__all__ = [
    "PROVENANCE_FILE",
    "GENEVAL_CHECKPOINT",
    "load_mmdet_checkpoint",
    "mmdet2_names",
    "read_architecture",
    "mask2former_config",
    "convert_state_dict",
    "convert_mmdet_checkpoint",
    "unfold_to_patch_merging",
    "is_official_sha256",
    "OFFICIAL_SHA256_PREFIXES",
]

PROVENANCE_FILE = "geneval_official.json"
GENEVAL_CHECKPOINT = "mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco"
GENEVAL_DECODER_HEADS = 8
GENEVAL_NO_OBJECT_WEIGHT = 0.1  # mmdet's class_weight for the "no object" class
DEFORMABLE_LEVELS, DEFORMABLE_POINTS = 3, 4  # what transformers' Mask2Former supports
# mmdet publishes a checkpoint as NAME-<first 8 hex of its sha256>.pth: GenEval's two downloads
OFFICIAL_SHA256_PREFIXES = {
    "743b7d99": "mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco_20220504_001756-743b7d99.pth (mmdet 2)",
    "c9d0c4f2": "mask2former_swin-s-p4-w7-224_8xb2-lsj-50e_coco_20220504_001756-c9d0c4f2.pth (mmdet 3)",
}
PIXEL = "model.pixel_level_module"
TRANSFORMER = "model.transformer_module"


# ----------------------------------------------------------------------------------------------- loading


def _safe_globals() -> list:
    """The non-container types an mmdet checkpoint's `meta` may hold (numpy scalars such as a best score)."""
    import numpy as np

    out = [np.dtype]
    for name in ("numpy.core.multiarray", "numpy._core.multiarray"):
        try:
            module = __import__(name, fromlist=["scalar"])
            out.append(module.scalar)
        except (ImportError, AttributeError):
            pass
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        out += [getattr(dtypes, n) for n in ("Float64DType", "Float32DType", "Int64DType", "Int32DType") if hasattr(dtypes, n)]
    return out


def load_mmdet_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """(state_dict, meta) of an mmdet checkpoint, unpickled with `weights_only=True` (no code runs)."""
    path = Path(path)
    if not path.is_file():
        raise JsbenchError(f"mmdet checkpoint {str(path)!r} not found")
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        why = next((line[line.index("Unsupported"):] for line in lines if "Unsupported" in line), lines[0] if lines else "")
        why = why.split(" was not an allowed global")[0]  # e.g. "Unsupported global: GLOBAL os.system"
        raise JsbenchError(f"cannot read {str(path)!r} as a weights-only mmdet checkpoint ({type(exc).__name__}: {why[:200]})") from None
    state = ckpt.get("state_dict") if isinstance(ckpt, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise JsbenchError(f"{str(path)!r} is not an mmdet checkpoint: it has no 'state_dict' of tensors")
    meta = ckpt.get("meta") if isinstance(ckpt.get("meta"), dict) else {}
    return dict(state), meta


_MMDET3 = [  # mmdet-3 names -> mmdet-2 names (the decoder and pixel-decoder layers only differ)
    (re.compile(r"^(panoptic_head\.transformer_decoder\.layers\.\d+)\.cross_attn\."), r"\1.attentions.0."),
    (re.compile(r"^(panoptic_head\.transformer_decoder\.layers\.\d+)\.self_attn\."), r"\1.attentions.1."),
    (re.compile(r"^(panoptic_head\.pixel_decoder\.encoder\.layers\.\d+)\.self_attn\."), r"\1.attentions.0."),
    (re.compile(r"^(panoptic_head\.(?:transformer_decoder|pixel_decoder\.encoder)\.layers\.\d+)\.ffn\."), r"\1.ffns.0."),
]


def mmdet2_names(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], str]:
    """The state dict with mmdet-3 layer names rewritten to mmdet-2's, and which style it was."""
    out, renamed = {}, False
    for key, value in state.items():
        new = key
        for pattern, repl in _MMDET3:
            new = pattern.sub(repl, new)
        renamed |= new != key
        if new in out:
            raise JsbenchError(f"checkpoint holds both {key!r} and its mmdet-2 name {new!r}")
        out[new] = value
    return out, ("mmdet-3" if renamed else "mmdet-2")


# ------------------------------------------------------------------------------------------ architecture


def _need(state: dict, key: str) -> torch.Tensor:
    if key not in state:
        raise JsbenchError(f"checkpoint has no {key!r}: not mmdet's Mask2Former with a Swin backbone")
    return state[key]


def _count(state: dict, prefix: str) -> int:
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
    found = {int(m.group(1)) for k in state for m in [pattern.match(k)] if m}
    return max(found) + 1 if found else 0


def _decoder_heads(meta: dict) -> int:
    """The decoder attention's head count from the checkpoint's embedded config text, else GenEval's 8."""
    text = meta.get("config") if isinstance(meta.get("config"), str) else ""
    start = text.find("transformer_decoder=dict(")
    found = re.search(r"num_heads\s*=\s*(\d+)", text[start:]) if start >= 0 else None
    return int(found.group(1)) if found else GENEVAL_DECODER_HEADS


def read_architecture(state: dict[str, torch.Tensor], meta: dict | None = None) -> dict:
    """Every size of the model, from the parameter shapes of an mmdet-2-named state dict."""
    bb, pd, head = "backbone.", "panoptic_head.pixel_decoder.", "panoptic_head."
    patch = _need(state, bb + "patch_embed.projection.weight")
    stages = _count(state, bb + "stages.")
    if stages == 0:
        raise JsbenchError("checkpoint has no backbone.stages.*: not a Swin backbone")
    depths = [_count(state, f"{bb}stages.{i}.blocks.") for i in range(stages)]
    heads, window = [], None
    for i in range(stages):
        table = _need(state, f"{bb}stages.{i}.blocks.0.attn.w_msa.relative_position_bias_table")
        heads.append(int(table.shape[1]))
        side = math.isqrt(int(table.shape[0]))
        if side * side != table.shape[0] or side % 2 == 0:
            raise JsbenchError(f"relative position table of stage {i} has {table.shape[0]} rows, not (2w - 1)^2")
        window = window or (side + 1) // 2
    embed = int(patch.shape[0])
    mlp = _need(state, f"{bb}stages.0.blocks.0.ffn.layers.0.0.weight")
    sampling = _need(state, f"{pd}encoder.layers.0.attentions.0.attention_weights.weight")
    encoder_heads, rest = divmod(int(sampling.shape[0]), DEFORMABLE_LEVELS * DEFORMABLE_POINTS)
    levels = int(_need(state, pd + "level_encoding.weight").shape[0])
    if rest or levels != DEFORMABLE_LEVELS:
        raise JsbenchError(f"the pixel decoder's deformable attention is not {DEFORMABLE_LEVELS} levels x {DEFORMABLE_POINTS} points, which transformers needs")
    decoder_heads = _decoder_heads(meta or {})
    if decoder_heads != encoder_heads:
        raise JsbenchError(f"decoder heads ({decoder_heads}) differ from the pixel decoder's ({encoder_heads}); transformers' Mask2Former shares one count")
    cls = _need(state, head + "cls_embed.weight")
    return {
        "patch_size": int(patch.shape[-1]),
        "embed_dim": embed,
        "depths": depths,
        "num_heads": heads,
        "window_size": window,
        "mlp_ratio": float(mlp.shape[0]) / embed,
        "feature_size": int(_need(state, pd + "input_convs.0.conv.weight").shape[0]),
        "mask_feature_size": int(_need(state, pd + "mask_feature.weight").shape[0]),
        "hidden_dim": int(_need(state, head + "query_feat.weight").shape[1]),
        "num_queries": int(_need(state, head + "query_feat.weight").shape[0]),
        "encoder_layers": _count(state, pd + "encoder.layers."),
        "encoder_feedforward_dim": int(_need(state, pd + "encoder.layers.0.ffns.0.layers.0.0.weight").shape[0]),
        "decoder_layers": _count(state, head + "transformer_decoder.layers."),
        "dim_feedforward": int(_need(state, head + "transformer_decoder.layers.0.ffns.0.layers.0.0.weight").shape[0]),
        "num_attention_heads": decoder_heads,
        "num_labels": int(cls.shape[0]) - 1,
        "fpn_levels": _count(state, pd + "lateral_convs."),
    }


def mask2former_config(arch: dict, labels: list[str] | None = None):
    """The transformers `Mask2FormerConfig` of an architecture read by `read_architecture`."""
    from transformers import Mask2FormerConfig, SwinConfig

    stages = len(arch["depths"])
    swin = SwinConfig(
        patch_size=arch["patch_size"], embed_dim=arch["embed_dim"], depths=arch["depths"], num_heads=arch["num_heads"],
        window_size=arch["window_size"], mlp_ratio=arch["mlp_ratio"], qkv_bias=True, drop_path_rate=0.0,
        out_features=[f"stage{i + 1}" for i in range(stages)],
    )  # fmt: skip
    labels = labels if labels and len(labels) == arch["num_labels"] else [f"class_{i}" for i in range(arch["num_labels"])]
    return Mask2FormerConfig(
        backbone_config=swin, feature_size=arch["feature_size"], mask_feature_size=arch["mask_feature_size"],
        hidden_dim=arch["hidden_dim"], encoder_feedforward_dim=arch["encoder_feedforward_dim"],
        dim_feedforward=arch["dim_feedforward"], encoder_layers=arch["encoder_layers"],
        decoder_layers=arch["decoder_layers"] + 1, num_attention_heads=arch["num_attention_heads"],
        num_queries=arch["num_queries"], no_object_weight=GENEVAL_NO_OBJECT_WEIGHT, dropout=0.0,
        id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)},
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ mapping


def unfold_to_patch_merging(weight: torch.Tensor) -> torch.Tensor:
    """Patch merging's input channels from mmdet's nn.Unfold order (channel-major, then the 2x2 offsets
    (0,0), (0,1), (1,0), (1,1)) to Swin's concatenation order (offset-major: (0,0), (1,0), (0,1), (1,1))."""
    lead, channels = weight.shape[:-1], weight.shape[-1] // 4
    per_offset = weight.reshape(*lead, channels, 4).transpose(-1, -2)  # [..., unfold offset, channel]
    return per_offset[..., [0, 2, 1, 3], :].reshape(*lead, 4 * channels)


def _swin_relative_index(window: int) -> torch.Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
    return rel[..., 0] * (2 * window - 1) + rel[..., 1]


def _split3(t: torch.Tensor) -> list[torch.Tensor]:
    if t.shape[0] % 3:
        raise JsbenchError(f"a fused q/k/v projection of {t.shape[0]} rows does not split in three")
    return list(t.chunk(3, 0))


def _swin_names(target_keys: set[str]) -> dict[str, str]:
    """transformers' Swin attention names, which changed across versions (q_proj vs self.query)."""
    probe = f"{PIXEL}.encoder.swin.encoder.layers.0.blocks.0.attention."
    if probe + "q_proj.weight" in target_keys:
        return {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "table": "relative_position_bias.relative_position_bias_table"}
    return {"q": "self.query", "k": "self.key", "v": "self.value", "o": "output.dense", "table": "self.relative_position_bias_table"}


def _mapping(arch: dict, target_keys: set[str]) -> list[tuple[str, str, list[str]]]:
    """(mmdet-2 key, how, transformers keys) for every key of the checkpoint: 'copy', 'qkv' (split in three),
    'unfold' (patch merging order) or 'index' (a buffer checked, not copied)."""
    rows: list[tuple[str, str, list[str]]] = []

    def pair(src: str, dst: str, how: str = "copy", suffixes=("weight", "bias")):
        for s in suffixes:
            rows.append((f"{src}.{s}", how, [f"{dst}.{s}"]))

    sw = _swin_names(target_keys)
    swin = f"{PIXEL}.encoder.swin"
    pair("backbone.patch_embed.projection", f"{swin}.embeddings.patch_embeddings.projection")
    pair("backbone.patch_embed.norm", f"{swin}.embeddings.norm")
    for i, depth in enumerate(arch["depths"]):
        for j in range(depth):
            src, dst = f"backbone.stages.{i}.blocks.{j}", f"{swin}.encoder.layers.{i}.blocks.{j}"
            att = f"{dst}.attention"
            pair(f"{src}.norm1", f"{dst}.layernorm_before")
            pair(f"{src}.norm2", f"{dst}.layernorm_after")
            for s in ("weight", "bias"):
                rows.append((f"{src}.attn.w_msa.qkv.{s}", "qkv", [f"{att}.{sw[c]}.{s}" for c in "qkv"]))
            pair(f"{src}.attn.w_msa.proj", f"{att}.{sw['o']}")
            rows.append((f"{src}.attn.w_msa.relative_position_bias_table", "copy", [f"{att}.{sw['table']}"]))
            rows.append((f"{src}.attn.w_msa.relative_position_index", "index", []))
            pair(f"{src}.ffn.layers.0.0", f"{dst}.mlp.fc1")
            pair(f"{src}.ffn.layers.1", f"{dst}.mlp.fc2")
        if i < len(arch["depths"]) - 1:
            down = f"{swin}.encoder.layers.{i}.downsample"
            rows.append((f"backbone.stages.{i}.downsample.reduction.weight", "unfold", [f"{down}.reduction.weight"]))
            pair(f"backbone.stages.{i}.downsample.norm", f"{down}.norm", "unfold")
        pair(f"backbone.norm{i}", f"{PIXEL}.encoder.hidden_states_norms.stage{i + 1}")

    pd, dec = "panoptic_head.pixel_decoder", f"{PIXEL}.decoder"
    for i in range(DEFORMABLE_LEVELS):
        pair(f"{pd}.input_convs.{i}.conv", f"{dec}.input_projections.{i}.0")
        pair(f"{pd}.input_convs.{i}.gn", f"{dec}.input_projections.{i}.1")
    for i in range(arch["encoder_layers"]):
        src, dst = f"{pd}.encoder.layers.{i}", f"{dec}.encoder.layers.{i}"
        for part in ("sampling_offsets", "attention_weights", "value_proj", "output_proj"):
            pair(f"{src}.attentions.0.{part}", f"{dst}.self_attn.{part}")
        pair(f"{src}.norms.0", f"{dst}.self_attn_layer_norm")
        pair(f"{src}.norms.1", f"{dst}.final_layer_norm")
        pair(f"{src}.ffns.0.layers.0.0", f"{dst}.fc1")
        pair(f"{src}.ffns.0.layers.1", f"{dst}.fc2")
    rows.append((f"{pd}.level_encoding.weight", "copy", [f"{dec}.level_embed"]))
    for k in range(arch["fpn_levels"]):  # transformers numbers them from the highest resolution: adapter_1 ...
        n = arch["fpn_levels"] - k
        rows.append((f"{pd}.lateral_convs.{k}.conv.weight", "copy", [f"{dec}.adapter_{n}.0.weight"]))
        pair(f"{pd}.lateral_convs.{k}.gn", f"{dec}.adapter_{n}.1")
        rows.append((f"{pd}.output_convs.{k}.conv.weight", "copy", [f"{dec}.layer_{n}.0.weight"]))
        pair(f"{pd}.output_convs.{k}.gn", f"{dec}.layer_{n}.1")
    pair(f"{pd}.mask_feature", f"{dec}.mask_projection")

    td, tdec = "panoptic_head.transformer_decoder", f"{TRANSFORMER}.decoder"
    for i in range(arch["decoder_layers"]):
        src, dst = f"{td}.layers.{i}", f"{tdec}.layers.{i}"
        for s in ("weight", "bias"):
            rows.append((f"{src}.attentions.0.attn.in_proj_{s}", "copy", [f"{dst}.cross_attn.in_proj_{s}"]))
            rows.append((f"{src}.attentions.1.attn.in_proj_{s}", "qkv", [f"{dst}.self_attn.{c}_proj.{s}" for c in "qkv"]))
        pair(f"{src}.attentions.0.attn.out_proj", f"{dst}.cross_attn.out_proj")
        pair(f"{src}.attentions.1.attn.out_proj", f"{dst}.self_attn.out_proj")
        pair(f"{src}.norms.0", f"{dst}.cross_attn_layer_norm")
        pair(f"{src}.norms.1", f"{dst}.self_attn_layer_norm")
        pair(f"{src}.norms.2", f"{dst}.final_layer_norm")
        pair(f"{src}.ffns.0.layers.0.0", f"{dst}.fc1")
        pair(f"{src}.ffns.0.layers.1", f"{dst}.fc2")
    pair(f"{td}.post_norm", f"{tdec}.layernorm")
    rows.append(("panoptic_head.query_embed.weight", "copy", [f"{TRANSFORMER}.queries_embedder.weight"]))
    rows.append(("panoptic_head.query_feat.weight", "copy", [f"{TRANSFORMER}.queries_features.weight"]))
    rows.append(("panoptic_head.level_embed.weight", "copy", [f"{TRANSFORMER}.level_embed.weight"]))
    pair("panoptic_head.cls_embed", "class_predictor")
    for k, layer in enumerate((0, 2, 4)):
        pair(f"panoptic_head.mask_embed.{layer}", f"{tdec}.mask_predictor.mask_embedder.{k}.0")
    return rows


def _refuse_mismatch(kind: str, keys: list[str]) -> None:
    more = f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""
    raise JsbenchError(f"checkpoint {kind} {keys[0]!r}{more}: not the Mask2Former Swin architecture the converter maps")


def convert_state_dict(state: dict[str, torch.Tensor], arch: dict, target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """mmdet-2-named `state` -> transformers' keys, every key of `state` consumed and every one needed found;
    `target` is the transformers model's own state dict (names and shapes checked against it)."""
    rows = _mapping(arch, set(target))
    wanted = {src for src, _, _ in rows}
    extra = sorted(set(state) - wanted)
    if extra:
        _refuse_mismatch("has a key the converter does not consume:", extra)
    missing = sorted(wanted - set(state))
    if missing:
        _refuse_mismatch("lacks the key", missing)
    out: dict[str, torch.Tensor] = {}
    for src, how, dsts in rows:
        value = state[src]
        if how == "index":
            if not torch.equal(value.long(), _swin_relative_index(arch["window_size"])):
                raise JsbenchError(f"{src!r} is not Swin's relative position index for window {arch['window_size']}")
            continue
        parts = _split3(value) if how == "qkv" else [unfold_to_patch_merging(value) if how == "unfold" else value]
        for dst, part in zip(dsts, parts):
            if dst not in target:
                raise JsbenchError(f"{src!r} maps to {dst!r}, which this transformers' Mask2Former does not have")
            if tuple(part.shape) != tuple(target[dst].shape):
                raise JsbenchError(f"{src!r} has shape {tuple(part.shape)}; transformers' {dst!r} wants {tuple(target[dst].shape)}")
            out[dst] = part.clone()
    # not in mmdet: the loss's class weights (from the config) and Swin's final norm, which Mask2Former never uses
    for key, value in target.items():
        if key not in out and (key.endswith("criterion.empty_weight") or key.startswith(f"{PIXEL}.encoder.swin.layernorm.")):
            out[key] = value.clone()
    unfilled = sorted(k for k in target if k not in out and not k.endswith("relative_position_index"))
    if unfilled:
        raise JsbenchError(f"no checkpoint key fills transformers' {unfilled[0]!r} ({len(unfilled)} in all)")
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert_mmdet_checkpoint(checkpoint: str | Path, out: str | Path, overwrite: bool = False) -> Path:
    """Convert GenEval's mmdet Mask2Former checkpoint into a transformers folder `out` (safetensors only),
    with `geneval_official.json` recording the source's name and sha256, whether that is a file GenEval
    downloads, the key style and the sizes read."""
    from transformers import Mask2FormerForUniversalSegmentation

    from jsbench.scoring.geneval import CLASSES

    checkpoint, out = Path(checkpoint), Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise JsbenchError(f"{str(out)!r} is not empty; choose a new folder or pass --overwrite")
    state, meta = load_mmdet_checkpoint(checkpoint)
    state, style = mmdet2_names(state)
    arch = read_architecture(state, meta)
    labels = list(meta["CLASSES"]) if isinstance(meta.get("CLASSES"), (list, tuple)) else None
    if labels is None and arch["num_labels"] == len(CLASSES):
        labels = list(CLASSES)
    model = Mask2FormerForUniversalSegmentation(mask2former_config(arch, labels)).eval()
    target = model.state_dict()
    converted = convert_state_dict(state, arch, target)
    model.load_state_dict({k: v.to(target[k].dtype) for k, v in converted.items()}, strict=False)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    sha256 = _sha256(checkpoint)
    official = is_official_sha256(sha256)
    provenance = {
        "weights": f"GenEval's official detector, {OFFICIAL_SHA256_PREFIXES[sha256[:8]]}" if official else
                   "an mmdet Mask2Former checkpoint that is not one GenEval publishes (sha256 differs)",
        "official": official,
        "source": checkpoint.name,
        "source_sha256": sha256,
        "key_style": style,
        "architecture": arch,
        "num_things": 80 if arch["num_labels"] >= 80 else arch["num_labels"],
    }  # fmt: skip
    (out / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=1) + "\n")
    return out


def is_official_sha256(sha256: str) -> bool:
    """Whether a checkpoint's sha256 is that of a file GenEval downloads (by mmdet's published prefix)."""
    return str(sha256)[:8] in OFFICIAL_SHA256_PREFIXES
