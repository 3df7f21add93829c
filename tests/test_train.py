import json

import pytest
import torch

from jsbench.policy.schedule_policy import load_policy
from jsbench.train.reinforce import TrainConfig, Trainer, read_log


def _config(**kw):
    base = dict(steps=3, iters=6, contexts=4, samples=2, baseline="js", checkpoint_every=2, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def _strip(log):
    return [{k: v for k, v in rec.items() if k != "seconds"} for rec in log]


def test_training_writes_policy_log_and_checkpoint(tmp_path):
    trainer = Trainer(_config(), tmp_path / "run")
    trainer.train(progress=False)
    path = trainer.save_policy()
    log = read_log(path / "train_log.jsonl")
    assert [r["iteration"] for r in log] == list(range(6))
    assert all(0.0 <= r["reward"] <= 1.0 and r["shrinkage"] is not None for r in log)
    policy, manifest = load_policy(path)
    assert manifest["baseline"] == "js" and manifest["reward"] == "geneval" and manifest["train"]["seed"] == 3
    assert (path / "checkpoint.pt").exists()


class Crash(Exception):
    pass


def test_resume_after_a_crash_ends_exactly_like_an_uninterrupted_run(tmp_path):
    full = Trainer(_config(), tmp_path / "full")
    full.train(progress=False)

    def crash_after_3(record):  # three updates done, the last checkpoint holds two
        if record["iteration"] == 2:
            raise Crash

    crashed = Trainer(_config(), tmp_path / "crashed")
    with pytest.raises(Crash):
        crashed.train(progress=False, on_update=crash_after_3)
    resumed = Trainer(_config(), tmp_path / "crashed")
    resumed.resume()
    assert resumed.iteration == 2  # the last checkpoint
    resumed.train(progress=False)
    for a, b in zip(full.policy.state_dict().values(), resumed.policy.state_dict().values()):
        assert torch.equal(a, b)
    assert _strip(read_log(tmp_path / "full" / "train_log.jsonl")) == _strip(read_log(tmp_path / "crashed" / "train_log.jsonl"))


def test_a_checkpoint_past_the_asked_updates_is_not_resumed(tmp_path):
    """A run of 6 updates resumed as a run of 4 would be a 6-update policy under a 4-update command: refused."""
    from jsbench.train.reinforce import TrainError

    Trainer(_config(), tmp_path / "run").train(progress=False)
    shorter = Trainer(_config(iters=4), tmp_path / "run")
    with pytest.raises(TrainError, match="checkpoint is at update 6, past this run's --iters 4"):
        shorter.resume()
    longer = Trainer(_config(iters=8), tmp_path / "run")
    longer.resume()  # going on to more updates is what resuming is for
    assert longer.iteration == 6


def test_a_run_is_extended_only_as_the_run_its_command_names(tmp_path):
    """Going on to more updates keeps the checkpoint's held-out points only at its cadence (by default it follows
    --iters), so another cadence is refused with the flag that keeps it, and so is any setting that decides the
    updates; extended at its cadence, the run ends as an uninterrupted run of the longer command."""
    from jsbench.train.reinforce import TrainError

    kw = dict(heldout_prompts=8, heldout_every=2)
    Trainer(_config(iters=4, **kw), tmp_path / "run").train(progress=False)
    with pytest.raises(TrainError, match="every 2 updates, this one every 1; pass --heldout-every 2"):
        Trainer(_config(iters=6, heldout_prompts=8), tmp_path / "run").resume()
    with pytest.raises(TrainError, match="checkpoint has lr=0.01, this run asks 0.02"):
        Trainer(_config(iters=6, lr=0.02, **kw), tmp_path / "run").resume()
    longer = Trainer(_config(iters=6, **kw), tmp_path / "run")
    longer.resume()
    longer.train(progress=False)
    whole = Trainer(_config(iters=6, **kw), tmp_path / "whole")
    whole.train(progress=False)
    for name in ("train_log.jsonl", "heldout.jsonl"):
        assert _strip(read_log(tmp_path / "run" / name)) == _strip(read_log(tmp_path / "whole" / name))
    assert [r["iteration"] for r in read_log(tmp_path / "run" / "heldout.jsonl")] == [0, 2, 4, 6]


def test_a_finished_runs_last_point_off_its_cadence_is_not_kept_when_extended(tmp_path):
    """Every run scores its last update; a 5-update run at cadence 2 has a point at 5 that a 6-update run has not."""
    kw = dict(heldout_prompts=8, heldout_every=2)
    Trainer(_config(iters=5, **kw), tmp_path / "run").train(progress=False)
    assert [r["iteration"] for r in read_log(tmp_path / "run" / "heldout.jsonl")] == [0, 2, 4, 5]
    longer = Trainer(_config(iters=6, **kw), tmp_path / "run")
    longer.resume()
    longer.train(progress=False)
    whole = Trainer(_config(iters=6, **kw), tmp_path / "whole")
    whole.train(progress=False)
    assert _strip(read_log(tmp_path / "run" / "heldout.jsonl")) == _strip(read_log(tmp_path / "whole" / "heldout.jsonl"))


def test_an_older_checkpoint_resumes_as_the_run_it_was(tmp_path):
    """A checkpoint from before per-seed noise drew seed 0's stream: it resumes as --noise-stream shared, not as
    the per-seed default; a field whose None means the default (width) is compared only where both name it."""
    from jsbench.train.reinforce import TrainError

    Trainer(_config(seed=1, noise_stream="shared"), tmp_path / "run").train(progress=False)
    path = tmp_path / "run" / "checkpoint.pt"
    state = torch.load(path, weights_only=True)
    del state["config"]["noise_stream"]
    state["config"]["width"] = 128  # older checkpoints saved the width they resolved
    state["iteration"] = 4
    torch.save(state, path)
    with pytest.raises(TrainError, match="checkpoint has noise_stream='shared', this run asks 'per-seed'"):
        Trainer(_config(seed=1), tmp_path / "run").resume()
    Trainer(_config(seed=1, noise_stream="shared"), tmp_path / "run").resume()
    with pytest.raises(TrainError, match="checkpoint has width=128, this run asks 64"):
        Trainer(_config(seed=1, noise_stream="shared", width=64), tmp_path / "run").resume()


def test_same_seed_same_numbers_other_seed_other_numbers(tmp_path):
    runs = []
    for name, seed in [("a", 1), ("b", 1), ("c", 2)]:
        t = Trainer(_config(iters=3, seed=seed), tmp_path / name)
        t.train(progress=False)
        runs.append(_strip(read_log(tmp_path / name / "train_log.jsonl")))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_each_training_seed_draws_its_own_noise_stream(tmp_path):
    """Seeds are independent in their noise, not only in their init and contexts: no two seeds (and no two
    updates) share a noise seed, seed 0 keeps the stream every seed shared before, and every training noise
    stays below evaluation's range."""
    from jsbench.evaluation.evaluate import NOISE_SEED_RANGE
    from jsbench.train.reinforce import MAX_SEED, TRAIN_SEED_BASE

    drawn = {}
    for seed in (0, 1, 2, MAX_SEED):
        t = Trainer(_config(seed=seed), tmp_path / str(seed))
        drawn[seed] = [s for it in (0, 1, 5) for s in t.contexts_for(it)[1]]
    assert drawn[0] == [TRAIN_SEED_BASE + it * 4 + b for it in (0, 1, 5) for b in range(4)]
    every = [s for seeds in drawn.values() for s in seeds]
    assert len(set(every)) == len(every)
    assert max(every) < NOISE_SEED_RANGE[0]


@pytest.mark.parametrize("seed", [-1, 1000])
def test_a_seed_outside_its_range_is_refused(tmp_path, seed):
    from jsbench.train.reinforce import TrainError

    with pytest.raises(TrainError, match="--seed must be in 0..999"):
        Trainer(_config(seed=seed), tmp_path / "run")


def test_held_out_scores_leave_training_untouched_and_resume_exactly(tmp_path):
    """The held-out curve: the untrained policy and every `heldout_every` updates (and the last), on the same
    images each time; scoring it changes nothing training draws, and a resumed run writes the same curve."""
    off = Trainer(_config(heldout_prompts=0), tmp_path / "off")
    off.train(progress=False)
    assert not (tmp_path / "off" / "heldout.jsonl").exists()
    on = Trainer(_config(heldout_prompts=8, heldout_every=4), tmp_path / "on")
    on.train(progress=False)
    assert _strip(read_log(tmp_path / "on" / "train_log.jsonl")) == _strip(read_log(tmp_path / "off" / "train_log.jsonl"))
    curve = read_log(tmp_path / "on" / "heldout.jsonl")
    assert [r["iteration"] for r in curve] == [0, 4, 6]
    assert all(len(r["scores"]) == 8 and 0.0 <= r["score"] <= 1.0 for r in curve)
    # the manifest's verdict is the held-out curve's (too short here: not judged); without a curve, not judged
    from jsbench.policy.convergence import run_convergence

    on.save_policy()
    off.save_policy()
    verdict = json.loads((tmp_path / "on" / "manifest.json").read_text())["convergence"]
    assert verdict == run_convergence(tmp_path / "on") and verdict["converged"] is None and verdict["iterations"] == [4, 6]
    assert "no heldout.jsonl" in json.loads((tmp_path / "off" / "manifest.json").read_text())["convergence"]["reason"]

    crashed = Trainer(_config(heldout_prompts=8, heldout_every=4), tmp_path / "crashed")
    with pytest.raises(Crash):
        crashed.train(progress=False, on_update=lambda r: (_ for _ in ()).throw(Crash) if r["iteration"] == 4 else None)
    resumed = Trainer(_config(heldout_prompts=8, heldout_every=4), tmp_path / "crashed")
    resumed.resume()  # the checkpoint at 4 updates, written after the held-out score at 4
    resumed.train(progress=False)
    assert _strip(read_log(tmp_path / "crashed" / "heldout.jsonl")) == _strip(curve)


def test_the_untrained_policys_held_out_score_is_the_default_schedules(tmp_path):
    from jsbench.evaluation.evaluate import evaluate, resolve_schedule
    from jsbench.train.reinforce import HELDOUT_IMAGE

    t = Trainer(_config(heldout_prompts=12), tmp_path / "run")
    first = t.heldout_score()
    default = evaluate(t.backbone, t.suite, resolve_schedule("default", t.backbone, 3), seeds_per_prompt=1, items=t.heldout_items,
                       seed_base=HELDOUT_IMAGE, progress=False)
    assert first["scores"] == [s[t.suite.primary_metric] for s in default.scores]
    assert len({it.prompt for it in t.heldout_items}) == 12


def test_non_finite_reward_skips_the_update_and_names_the_prompt(tmp_path):
    trainer = Trainer(_config(iters=1), tmp_path / "nan")
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    real = trainer.reward

    def poisoned(images, prompts):
        r = real(images, prompts)
        r[0] = float("nan")
        return r

    trainer.reward = poisoned
    record = trainer.step(0)
    assert "skipped" in record and "non-finite reward for prompt" in record["skipped"]
    assert trainer.contexts_for(0)[0][0] in record["skipped"]
    for k, v in trainer.policy.state_dict().items():
        assert torch.equal(v, before[k])


@pytest.mark.slow
def test_training_improves_on_the_default_schedule(tmp_path):
    """A global policy at 3 steps, trained briefly, beats the default schedule on held-out prompts."""
    from jsbench.evaluation.evaluate import evaluate, resolve_schedule
    from jsbench.suites import load_suite

    trainer = Trainer(_config(policy="global", iters=40, contexts=16, samples=4, lr=0.05), tmp_path / "g")
    trainer.train(progress=False)
    path = trainer.save_policy()
    suite = load_suite("geneval", trainer.backbone)
    items = suite.items("test")[::2]
    default = evaluate(trainer.backbone, suite, resolve_schedule("default", trainer.backbone, 3), 4, items=items, progress=False)
    learned = evaluate(trainer.backbone, suite, resolve_schedule(f"policy:{path}", trainer.backbone, 3), 4, items=items, progress=False)
    mean = lambda run: sum(s["correct"] for s in run.scores) / len(run.scores)
    assert mean(learned) > mean(default) + 0.05, (mean(learned), mean(default))


def test_a_step_is_its_rollout_then_its_update(tmp_path):
    """The seams: a rollout samples and scores without touching the policy; update(rollout) then does what
    step does, to the bit; policy_loss takes another baseline on the same rollout."""
    whole = Trainer(_config(iters=2), tmp_path / "whole")
    records = [whole.step(0), whole.step(1)]
    parts = Trainer(_config(iters=2), tmp_path / "parts")
    before = {k: v.clone() for k, v in parts.policy.state_dict().items()}
    ro = parts.rollout(0)
    assert all(torch.equal(v, before[k]) for k, v in parts.policy.state_dict().items())
    B, K, N = 4, 2, 3
    assert ro.prompts == parts.contexts_for(0)[0] and ro.shard == (0, B)
    assert ro.simplex.shape == (B, K, N) and ro.sigmas.shape == (B * K, N + 1) and ro.images.shape[0] == B * K
    assert ro.rewards.shape == (B, K) and ro.rewards.dtype == torch.float64 and torch.equal(ro.rewards, ro.local)
    loss_js, lam = parts.policy_loss(ro)
    loss_none, no_lam = parts.policy_loss(ro, baseline="none")
    assert lam is not None and no_lam is None
    assert not torch.equal(loss_js, loss_none) or bool((ro.rewards == 0).all())
    assert parts.update(ro) == records[0]
    assert parts.update(parts.rollout(1)) == records[1]
    for a, b in zip(whole.policy.state_dict().values(), parts.policy.state_dict().values()):
        assert torch.equal(a, b)


def test_policy_source_evaluates_a_policy_in_memory_like_its_saved_folder(tmp_path):
    from jsbench.evaluation.evaluate import evaluate, policy_source, resolve_schedule
    from jsbench.suites import load_suite

    trainer = Trainer(_config(iters=2), tmp_path / "run")
    trainer.train(progress=False)
    path = trainer.save_policy()
    suite = load_suite("geneval", trainer.backbone)
    items = suite.items("test")[:6]
    saved = resolve_schedule(f"policy:{path}", trainer.backbone, 3)
    memory = policy_source(trainer.policy, label="js")
    assert (memory.label, memory.steps, memory.checksum, memory.spec) == ("js", 3, None, "policy:<in memory>")
    assert saved.checksum and saved.manifest["baseline"] == "js" and saved.label == "js"
    x = trainer.backbone.initial_noise([0, 1])
    cond = trainer.backbone.encode([it.prompt for it in items[:2]])
    assert torch.equal(memory.make(x, cond), saved.make(x, cond))
    a = evaluate(trainer.backbone, suite, memory, 2, items=items, progress=False)
    b = evaluate(trainer.backbone, suite, saved, 2, items=items, progress=False)
    assert a.scores == b.scores
