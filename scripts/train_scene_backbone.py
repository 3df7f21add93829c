"""Train `scenes-dit`: a tiny SD3-style text-to-image pipeline with learned weights, on the scene world.

The closed-form `analytic` backbone is exact, so its few-step failures are only the ones the mixture
allows. Real samplers also fail because their velocity field is learned and imperfect. This script
trains the real diffusers classes, at a size a 2-core CPU trains in under an hour, on renders of the
scene world's prompts, and saves a `StableDiffusion3Pipeline` folder that `jsbench` serves as backbone
`scenes-dit` through the same adapter as SD3.5.

Stages (each resumable from its own checkpoint in --work; rerun the same command after a kill):
  1. vae   an AutoencoderKL (48x48 RGB -> 12x12x8 latents, x4) trained on renders (L1 + a small KL);
  2. data  a fixed set of (prompt, latent) pairs, encoded once with the trained VAE (posterior mode);
  3. dit   an SD3Transformer2DModel trained by flow matching (logit-normal times as SD3), 10% of
           captions dropped to "" so classifier-free guidance works, with an EMA copy of the weights;
  4. decoder  the VAE decoder fine-tuned alone, encoder frozen (the DiT's latents do not change, so
           `--only decoder` can run it in a second process beside the DiT stage);
  5. save  the pipeline (EMA transformer) with `save_pretrained` in safetensors, plus `jsbench.json`
           (resolution, guidance, T5 length) that the adapter reads.

Text side: two CLIP text encoders with projections, random and frozen (a fixed feature map of the
prompt, as the real encoders are frozen during SD3 training), a word-level CLIP BPE tokenizer built
in memory over the world's words, and no T5 (SD3's pipeline then feeds zeros in its place).

    python scripts/train_scene_backbone.py                 # full run, writes jsbench/backbones/weights/scenes-dit
    python scripts/train_scene_backbone.py --vae-steps 2 --dit-steps 2 --data 64 --out /tmp/x --work /tmp/w   # smoke
"""


from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "jsbench" / "backbones" / "weights" / "scenes-dit"

from jsbench import JsbenchError  # noqa: E402
from jsbench.train.scene_backbone import (  # noqa: E402
    CANVAS, DEFAULT_STEPS, GUIDANCE, T5_TOKENS, TOKENS, SceneData, Stop, assemble, build_text_encoder, build_tokenizer, encode_dataset,
    encode_prompts, save_pipeline, train_decoder, train_dit, train_vae,
)


def _spawn_decoder_stage(argv):
    import subprocess

    args = list(argv if argv is not None else sys.argv[1:])
    cmd = [sys.executable, str(Path(__file__).resolve()), *args, "--only", "decoder", "--threads", "1", "--no-progress"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="pipeline folder to write")
    ap.add_argument("--work", type=Path, default=ROOT / ".cache" / "scene-backbone", help="checkpoints (resume)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vae-steps", type=int, default=1000)
    ap.add_argument("--vae-batch", type=int, default=32)
    ap.add_argument("--vae-lr", type=float, default=2e-3)
    ap.add_argument("--kl-weight", type=float, default=1e-4)
    ap.add_argument("--foreground-weight", type=float, default=20.0)
    ap.add_argument("--decoder-steps", type=int, default=1500, help="decoder-only fine-tuning after the VAE stage")
    ap.add_argument("--decoder-lr", type=float, default=1e-3)
    ap.add_argument("--only", choices=["decoder"], default=None,
                    help="run only the decoder stage (it needs the VAE stage, not the DiT: run it beside a DiT run)")
    ap.add_argument("--data", type=int, default=32768, help="size of the encoded (prompt, latent) set")
    ap.add_argument("--dit-steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dit-lr", type=float, default=1e-3)
    ap.add_argument("--caption-dropout", type=float, default=0.1)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stop-after", type=int, default=None, metavar="N",
                    help="checkpoint and stop after N updates in this invocation (rerun to continue)")
    ap.add_argument("--no-progress", dest="progress", action="store_false")
    args = ap.parse_args(argv)
    args.updates_done = 0
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    begin = time.time()

    data = SceneData(args.seed)
    tokenizer = build_tokenizer()
    for p in data.prompts:  # every world prompt fits the CLIP context untruncated
        n = len(tokenizer(p).input_ids)
        if n > TOKENS:
            sys.exit(f"error: prompt {p!r} needs {n} tokens > {TOKENS}")
    encoders = [build_text_encoder(len(tokenizer), args.seed + 1), build_text_encoder(len(tokenizer), args.seed + 2)]
    try:
        vae = train_vae(args, data, args.work)  # a refusal (a corrupt checkpoint) ends the script in one line
        if args.only == "decoder":
            train_decoder(args, data, vae, args.work)
            print(f"decoder stage done ({args.work / 'decoder.pt'})")
            return 0
        dataset = encode_dataset(args, data, vae, args.work)
        vae.register_to_config(shift_factor=dataset["shift_factor"], scaling_factor=dataset["scaling_factor"])
        text = encode_prompts(assemble(args, vae, tokenizer, encoders), data.prompts)
        # with 2+ threads the decoder stage runs in a child process on one of them, beside the DiT
        child = _spawn_decoder_stage(argv) if args.threads >= 2 and args.stop_after is None else None
        if child is not None:
            torch.set_num_threads(args.threads - 1)
        transformer = train_dit(args, data, dataset, text, args.work)
        if child is not None and child.wait() != 0:
            sys.exit(f"error: the decoder stage failed (exit {child.returncode}); rerun the same command to resume it")
        vae = train_decoder(args, data, vae, args.work)  # resumes the child's finished checkpoint: no work left
    except JsbenchError as exc:
        sys.exit(f"error: {exc}")
    except Stop:
        print(f"stopped after {args.updates_done} updates (checkpoints in {args.work}); rerun the same command to continue")
        return 0
    pipe = assemble(args, vae, tokenizer, encoders, transformer)
    meta = {
        "height": CANVAS, "width": CANVAS, "max_sequence_length": T5_TOKENS, "guidance_scale": GUIDANCE,
        "default_steps": DEFAULT_STEPS,
        "trained_by": "python scripts/train_scene_backbone.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "vae_steps": args.vae_steps, "decoder_steps": args.decoder_steps, "dit_steps": args.dit_steps, "data": args.data, "seed": args.seed,
        "train_minutes": round((time.time() - begin) / 60, 1),
    }
    save_pipeline(pipe, args.out, meta)
    print(f"wrote {args.out} ({sum(f.stat().st_size for f in args.out.rglob('*') if f.is_file()) / 1e6:.1f} MB) in {meta['train_minutes']} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
