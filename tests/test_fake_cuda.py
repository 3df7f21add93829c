"""Every pipeline weight on a `cuda` device that is not there (issue 23): CPU/CUDA mixes raise as on a GPU.

`tests/fake_cuda.py` gives tensors a `cuda:0` device and real CPU values (why not plain FakeTensorMode: see
its doc). Each tiny family (sdxl, sd35, flux-dev, flux-schnell) is loaded with `device="cuda"`, so every
parameter and buffer is a fake-CUDA tensor, and goes through encode, default sigmas, per-row sampling,
decode, a policy draw and a training loss; every schedule source compare runs is made and sampled on
Flux-Dev (ays on SD-XL, the only family diffusers has an AYS schedule for). Host syncs are counted: a
sampler call makes a fixed number (its schedule checks), none per denoising step. The last test leaves
one tensor on the CPU inside an adapter and must fail.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from fake_cuda import CudaTensor, FakeCuda
from jsbench.backbones import load_backbone
from jsbench.backbones.tiny import TINY_KINDS, save_tiny_pipeline
from jsbench.rewards import register_reward
from jsbench.suites import register_suite
from jsbench.suites.base import TASK_MEAN_RULE, EvalItem, Suite, aggregate_by_task

PROMPTS = ["a red cat", "two blue dogs next to a car", "a sign that says hello world"]


def contrast(images: torch.Tensor) -> torch.Tensor:
    return images.float().mean(1).flatten(1).std(1).cpu()


class ContrastSuite(Suite):
    name = "fakecuda"
    primary_metric = "contrast"
    protocol_seeds = 1
    overall_rule = TASK_MEAN_RULE

    def __init__(self, backbone=None, **options):
        pass

    def items(self, split: str = "test"):
        return [EvalItem(p, "fakecuda") for p in PROMPTS]

    def score(self, images, items):
        return [{"contrast": float(v)} for v in contrast(images)]

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


register_suite("fakecuda")(ContrastSuite)
register_reward("fakecuda")(lambda backbone=None: (lambda images, prompts: contrast(images)))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("fake-cuda")
    folders = {kind: save_tiny_pipeline(kind, root / kind) for kind in TINY_KINDS}
    for kind, folder in folders.items():
        # loaded once on the CPU first: the lazy imports of a first from_pretrained must not happen while
        # FakeCuda has torch's methods patched (a module that captures one at import keeps it)
        load_backbone(kind, str(folder), device="cpu")
    return folders


def _on_cuda(t) -> bool:
    return isinstance(t, CudaTensor) and t.device.type == "cuda"


def _load(kind, folders, mode):
    bb = load_backbone(kind, str(folders[kind]), device="cuda")
    params = list(bb.net_parameters())
    buffers = [b for m in bb._networks() for b in m.buffers()]
    assert params and all(_on_cuda(p) for p in params + buffers), kind
    return bb


def test_fake_cuda_refuses_a_cpu_cuda_mix():
    """The stand-in itself: a mix raises, a CPU scalar and CPU indices do not (as on CUDA), syncs are counted."""
    with FakeCuda() as mode:
        x = torch.ones(3, 4, device="cuda")
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3, 4)
        y = x * torch.tensor(2.0) + x[torch.tensor([0, 2])].sum()
        assert _on_cuda(y) and mode.total_syncs == 0
        assert float(y.sum()) == 3 * 4 * (2.0 + 8.0) and mode.total_syncs == 1
        assert y.cpu().device.type == "cpu" and mode.total_syncs == 2


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
@pytest.mark.parametrize("kind", TINY_KINDS)
def test_family_on_fake_cuda(kind, folders):
    """encode -> default sigmas -> per-row sampling -> decode, a policy draw and a training loss, on `cuda`."""
    from jsbench.train.reinforce import TrainConfig, Trainer

    with FakeCuda() as mode:
        bb = _load(kind, folders, mode)
        cond = bb.encode(PROMPTS[:2])
        assert all(_on_cuda(t) for t in cond.tensors.values()) and _on_cuda(cond.pooled)
        x = bb.initial_noise([1, 2])
        assert _on_cuda(x)
        syncs = {}
        for steps in (2, 5):
            sigmas = bb.default_sigmas(steps, x)
            assert _on_cuda(sigmas)
            sigmas[1, 1:-1] = sigmas[1, 1:-1] ** 1.5  # row 1 follows a schedule of its own
            before = mode.total_syncs
            latents = bb.sample_latents(x, cond, sigmas)
            syncs[steps] = mode.total_syncs - before
            images = bb.decode(latents)
            assert _on_cuda(images) and images.shape[0] == 2
            assert torch.isfinite(images.host).all()
        # a few per sampler call (the schedule checks, SD-XL's default-row test), none per denoising step
        assert syncs[5] == syncs[2] <= 6, (kind, syncs, dict(mode.syncs))

        config = TrainConfig(backbone=kind, model=str(folders[kind]), steps=2, suite="fakecuda", reward="fakecuda",
                             iters=1, contexts=3, samples=2, seed=0, baseline="js", batch_size=4)
        trainer = Trainer(config, folders[kind].parent / f"{kind}-run", backbone=bb)
        assert all(_on_cuda(p) for p in trainer.policy.parameters())
        ro = trainer.rollout(0)  # a policy draw, per-row sampling of B*K rows, the rewards
        assert _on_cuda(ro.simplex) and _on_cuda(ro.sigmas)
        # the loss's forward (the policy's log-probabilities, the baseline) on `cuda`; not its backward: recording
        # autograd on a tensor whose device is `cuda` aborts a CPU-only torch (its engine wants a CUDA guard)
        with torch.no_grad():
            loss, _ = trainer.policy_loss(ro)
        assert _on_cuda(loss) and math.isfinite(float(loss))


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_a_rollout_on_cuda_samples_every_row_as_it_is(folders):
    """A context's first call is shared between its rows on the CPU only, where that was checked bit for bit; on
    CUDA a kernel may round a row differently at another position in the same call, so every row is sampled."""
    from jsbench.backbones.base import sample_rollout_rows

    with FakeCuda() as mode:
        bb = _load("sd35", folders, mode)
        cond, x = bb.encode(PROMPTS[:2]), bb.initial_noise([1, 2])
        rows = torch.tensor([0, 0, 1, 1], device="cuda")  # on the CPU: one first call for both contexts, 3 in all
        sigmas = bb.default_sigmas(2, x[rows])
        calls = []
        handle = bb.pipe.transformer.register_forward_hook(lambda *args: calls.append(1))
        try:
            images = sample_rollout_rows(bb, x, cond, rows, sigmas, 2)
        finally:
            handle.remove()
        assert _on_cuda(images) and len(calls) == 2 * 2  # 2 calls of 2 rows x 2 steps


def _sources(folders, tmp_path):
    """Every schedule source compare runs, as `resolve_schedule` specs (oss and searched are computed below)."""
    schedule_file = tmp_path / "sched.json"
    schedule_file.write_text(json.dumps([1.0, 0.6, 0.25, 0.0]))
    return ["default", "ceiling:6", "karras", "exponential", "beta", f"file:{schedule_file}"]


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_every_schedule_source_on_fake_cuda(folders, tmp_path):
    from jsbench.evaluation.evaluate import policy_source, resolve_schedule, sample_source
    from jsbench.policy.schedule_policy import make_policy
    from jsbench.zoo.oss import oss_image_source, oss_mean_search, oss_paths
    from jsbench.zoo.searched import search_global_schedule

    suite = ContrastSuite()
    steps = 3
    with FakeCuda() as mode:
        bb = _load("flux-dev", folders, mode)
        cond, x = bb.encode(PROMPTS[:2]), bb.initial_noise([3, 4])
        rows = {}
        for spec in _sources(folders, tmp_path):
            source = resolve_schedule(spec, bb, steps, suite=suite)
            rows[spec] = source.make(x, cond)
            assert _on_cuda(sample_source(bb, source, x, cond)), spec
        # oss: the teacher trajectory and the DPs run beside the CUDA states (the old zoo kept its grid on the CPU)
        teacher = bb.default_sigmas(8, x)[0]
        paths, costs = oss_paths(bb, cond, x, steps, teacher)
        assert paths.shape == (2, steps + 1) and bool(torch.isfinite(costs.cpu()).all())
        mean_row, cost = oss_mean_search(bb, cond, x, steps, teacher)
        assert mean_row.shape == (steps + 1,) and math.isfinite(cost)
        _, make, _ = oss_image_source(bb, steps, teacher_steps=8)
        assert _on_cuda(make(x, cond))
        # searched: a small grid, scored by sampling every candidate on `cuda`
        best, info = search_global_schedule(bb, suite, steps, [(it, 0) for it in suite.items()[:2]], grid_points=2, shifts=2,
                                            random_count=1, sweeps=1, refine_points=1, batch=4)
        assert best.shape == (steps + 1,) and info["evaluated"] > 1
        policy = make_policy(bb, steps)
        assert _on_cuda(sample_source(bb, policy_source(policy), x, cond))
        # a distilled row: Flux-Schnell's default at its own 4 steps, on the same fake GPU
        schnell = _load("flux-schnell", folders, mode)
        sc, sx = schnell.encode(PROMPTS[:2]), schnell.initial_noise([3, 4])
        assert _on_cuda(sample_source(schnell, resolve_schedule("default", schnell, 4), sx, sc))
        # ays: SD-XL's Align Your Steps schedule (the only family with one)
        sdxl = _load("sdxl", folders, mode)
        xc, xx = sdxl.encode(PROMPTS[:2]), sdxl.initial_noise([3, 4])
        assert _on_cuda(sample_source(sdxl, resolve_schedule("ays", sdxl, 10), xx, xc))


def test_a_cpu_tensor_inside_an_adapter_fails(folders, monkeypatch):
    """The deliberate break: Flux's position ids built on the CPU, as a missed `device=` would build them."""
    from jsbench.backbones.flux import FluxBackbone

    prepare = FluxBackbone._prepare

    def prepare_on_cpu(self, x, cond):
        ctx = prepare(self, x, cond)
        ctx["img_ids"] = ctx["img_ids"].cpu()
        return ctx

    with FakeCuda() as mode:
        bb = _load("flux-dev", folders, mode)
        cond, x = bb.encode(PROMPTS[:2]), bb.initial_noise([1, 2])
        monkeypatch.setattr(FluxBackbone, "_prepare", prepare_on_cpu)
        with pytest.raises(RuntimeError, match="same device"):
            bb.sample_latents(x, cond, bb.default_sigmas(2, x))
