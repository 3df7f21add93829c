"""The estimator lab (jsbench/analysis/estimators.py): pairing, the rloo reference, bootstrap determinism, and known
answers on simulated Gaussian rewards whose gradient variance and baseline error are known in closed form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from jsbench.analysis import estimator_rendering as rendering
from jsbench.analysis import estimators as lab
from jsbench.baselines import advantages
from jsbench.distributed import DistContext


class SimulatedTrainer:
    """A stand-in for the lab's Trainer on random-effects Gaussian rewards: context i of rollout r has mean
    mu_i ~ N(mu0, tau^2), rewards r_ik ~ N(mu_i, sigma^2), and log pi(a_ik) = theta . s_ik with scores s_ik ~
    N(0, I_P) independent of the rewards. Then g = -mean_ik (r_ik - b_ik) s_ik, and tr Cov(g) = P E[(r - b)^2] / (BK):
    none's E[(r - b)^2] = mu0^2 + tau^2 + sigma^2, rloo's sigma^2 K / (K - 1). Records what each baseline saw."""

    def __init__(self, contexts=8, samples=2, params=4, mu0=2.0, tau=1.0, sigma=1.0, seed=0):
        self.config = SimpleNamespace(contexts=contexts, samples=samples)
        self.policy = torch.nn.Linear(params, 1, bias=False)
        self.dist = DistContext()
        self.stream = 0
        self.mu0, self.tau, self.sigma, self.seed = mu0, tau, sigma, seed
        self.seen = []  # (rollout, baseline, rewards) of every policy_loss call

    def _gen(self, r, stream):
        return torch.Generator().manual_seed(self.seed * 1_000_003 + r * 7 + stream)

    def rollout(self, r):
        b, k = self.config.contexts, self.config.samples
        mu = self.mu0 + self.tau * torch.randn(b, 1, generator=self._gen(r, 0), dtype=torch.float64)  # the contexts
        g = self._gen(r, 1 + self.stream)  # the draws: a fresh stream for the extra samples
        rewards = mu + self.sigma * torch.randn(b, k, generator=g, dtype=torch.float64)
        scores = torch.randn(b, k, self.policy.in_features, generator=g)
        return SimpleNamespace(iteration=r, rewards=rewards, scores=scores, mu=mu)

    def policy_loss(self, ro, baseline):
        self.seen.append((ro.iteration, baseline, ro.rewards.clone()))
        adv, lam = advantages(baseline, ro.rewards)
        log_prob = self.policy(ro.scores).squeeze(-1)
        return -(adv.to(log_prob.dtype) * log_prob).mean(), lam


def _measure(trainer, rollouts, mean_rollouts=0, names=("none", "rloo", "xctx", "js", "js-plugin")):
    return lab.measure_rollouts(trainer, list(names), rollouts, mean_rollouts, mean_samples=4)


def test_every_baseline_sees_the_same_rollouts():
    trainer = SimulatedTrainer()
    grads, _, shrink, _ = _measure(trainer, rollouts=5)
    by_rollout = {}
    for r, name, rewards in trainer.seen:
        by_rollout.setdefault(r, {})[name] = rewards
    assert sorted(by_rollout) == list(range(5))
    for seen in by_rollout.values():
        assert set(seen) == {"none", "rloo", "xctx", "js", "js-plugin"}
        first = next(iter(seen.values()))
        assert all(torch.equal(first, x) for x in seen.values())
    # the gradients differ only through the baseline: g_none - g_rloo = -mean(b_rloo * s) on the same scores
    ro = trainer.rollout(0)
    b = ro.rewards - advantages("rloo", ro.rewards)[0]
    expected = -(b.unsqueeze(-1).float() * ro.scores).mean(dim=(0, 1))
    assert torch.allclose(grads["none"][0] - grads["rloo"][0], expected, atol=1e-6)
    assert set(shrink) == {"js", "js-plugin"} and len(shrink["js"]) == 5


def test_rloo_ratios_are_exactly_one_and_the_bootstrap_is_seeded():
    gen = torch.Generator().manual_seed(1)
    grads = {n: torch.randn(40, 6, generator=gen) * s for n, s in (("none", 2.0), ("rloo", 1.0), ("js", 0.9))}
    errors = {n: torch.rand(10, generator=gen, dtype=torch.float64) + 0.1 for n in grads}
    rows = lab.lab_statistics(grads, errors, {"js": [0.3, 0.5]}, bootstrap=300, seed=7)
    rloo = next(r for r in rows if r["baseline"] == "rloo")
    for key in ("grad_var", "grad_mse", "baseline_mse"):
        assert rloo[f"{key}_ratio"] == 1.0 and rloo[f"{key}_ci"] == [1.0, 1.0]
    again = lab.lab_statistics(grads, errors, {"js": [0.3, 0.5]}, bootstrap=300, seed=7)
    assert json.dumps(rows) == json.dumps(again)
    other = lab.lab_statistics(grads, errors, {"js": [0.3, 0.5]}, bootstrap=300, seed=8)
    none, none_other = rows[0], other[0]
    assert none["grad_var_ratio"] == none_other["grad_var_ratio"]  # the point estimate does not resample
    assert none["grad_var_ci"] != none_other["grad_var_ci"]
    assert next(r for r in rows if r["baseline"] == "js")["shrinkage"] == pytest.approx(0.4)


def test_total_variance_from_the_gram_matrix_is_the_sample_covariance_trace():
    g = torch.randn(30, 5, dtype=torch.float64)
    ones = torch.ones(1, 30, dtype=torch.float64)
    assert float(lab._total_variance(g @ g.T, ones)[0]) == pytest.approx(float(g.var(dim=0, unbiased=True).sum()), rel=1e-12)


def test_known_answer_on_simulated_gaussian_rewards():
    """mu0 = 2, tau = sigma = 1, K = 2: none's gradient variance is (4 + 1 + 1) / (1 * 2) = 3x rloo's and its
    baseline error E[mu_i^2] = 5 is 5x rloo's sigma^2 / (K - 1) = 1."""
    trainer = SimulatedTrainer(contexts=8, samples=2, params=4, mu0=2.0, tau=1.0, sigma=1.0)
    grads, errors, shrink, _ = _measure(trainer, rollouts=1500, mean_rollouts=400, names=("none", "rloo"))
    rows = {r["baseline"]: r for r in lab.lab_statistics(grads, errors, shrink, bootstrap=500, seed=0)}
    none = rows["none"]
    assert none["grad_var_ci"][0] < 3.0 < none["grad_var_ci"][1]
    assert none["grad_var_ratio"] == pytest.approx(3.0, rel=0.12)
    assert none["grad_mse_ratio"] == pytest.approx(none["grad_var_ratio"], rel=0.02)  # unbiased: MSE = variance
    assert none["baseline_mse_ratio"] == pytest.approx(5.0, rel=0.08)
    assert none["baseline_mse_ci"][0] < none["baseline_mse_ratio"] < none["baseline_mse_ci"][1]
    # absolute scale: tr Cov(g_rloo) = P sigma^2 K/(K-1) / (B K) = 4 * 2 / 16; rloo's baseline error sigma^2/(K-1) = 1
    assert rows["rloo"]["grad_var"] == pytest.approx(0.5, rel=0.1)
    assert rows["rloo"]["baseline_mse"] == pytest.approx(1.0, rel=0.15)


def test_baseline_error_subtracts_the_extra_samples_variance():
    gen = torch.Generator().manual_seed(3)
    mu = torch.randn(2000, 1, generator=gen, dtype=torch.float64)
    extra = mu + torch.randn(2000, 3, generator=gen, dtype=torch.float64)  # M = 3, sigma = 1
    b = torch.zeros(2000, 2, dtype=torch.float64)
    assert lab.baseline_error(b, extra) == pytest.approx(float(mu.square().mean()), abs=0.06)


def test_policy_folder_flat_or_seed_subfolders(tmp_path):
    flat = tmp_path / "rloo-n3"
    flat.mkdir()
    (flat / "manifest.json").write_text("{}")
    assert lab.resolve_policy_folder(flat) == flat
    row = tmp_path / "js-n3"
    for s in ("seed2", "seed0", "seed10"):
        (row / s).mkdir(parents=True)
        (row / s / "manifest.json").write_text("{}")
    assert lab.resolve_policy_folder(row) == row / "seed0"
    with pytest.raises(lab.EstimatorError):
        lab.resolve_policy_folder(tmp_path / "nothing")


def test_the_lab_runs_on_the_analytic_world_and_is_exact_per_seed():
    config = lab.LabConfig(backbone="analytic", steps=3, contexts=4, samples=2, rollouts=3, mean_rollouts=1, mean_samples=2, bootstrap=100)
    first = lab.run_lab(config, progress=False)
    second = lab.run_lab(config, progress=False)
    assert [r["baseline"] for r in first["rows"]] == ["none", "rloo", "xctx", "js", "js-plugin", "jspo"]
    strip = lambda rec: json.dumps({k: v for k, v in rec.items() if k != "seconds"}, sort_keys=True)  # noqa: E731
    assert strip(first) == strip(second)
    assert "grad var" in rendering.lab_table(first) and all(len(line) <= 80 for line in rendering.lab_table(first).splitlines())


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize("args", [["--rollouts", "2"], ["--samples", "1"], ["--policy", "no/such/folder"], ["--check"]])
def test_bad_input_is_one_line_and_exit_2(args):
    proc = subprocess.run([sys.executable, "-m", "jsbench", "estimators", "--no-progress", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_the_vmap_registry_matches_the_baseline_registry():
    from jsbench.baselines import BASELINE_VALUES, BASELINES, compute_baseline

    assert list(BASELINE_VALUES) == list(BASELINES)
    r = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for name, fn in BASELINE_VALUES.items():
        assert torch.equal(fn(r), compute_baseline(name, r).baseline)


@pytest.mark.slow  # trains a 2-update run, then replays it
def test_along_training_replays_the_run_and_plots_byte_stable(tmp_path):
    from jsbench.train.reinforce import TrainConfig, Trainer

    run = tmp_path / "run"
    trainer = Trainer(TrainConfig(backbone="analytic", steps=3, baseline="rloo", contexts=4, samples=2, iters=2, seed=1), run)
    trainer.train(progress=False)
    trainer.save_policy()
    config = lab.LabConfig(backbone="analytic", steps=3, contexts=4, samples=2, rollouts=3, mean_rollouts=0, bootstrap=100)
    record = lab.run_lab_along(config, run, every=1, backbone=trainer.backbone, progress=False)
    assert [s["update"] for s in record["states"]] == [0, 1, 2]
    assert record["replay_matches_policy"] is True  # the replay ends exactly at the saved policy
    first = rendering.write_lab_record(record, tmp_path / "a" / "along.json")
    second = rendering.write_lab_record(record, tmp_path / "b" / "along.json")
    assert first[1].read_bytes() == second[1].read_bytes() and first[1].suffix == ".png"
    assert "update,baseline" in rendering.lab_csv(record).splitlines()[0]
    with pytest.raises(lab.EstimatorError):
        lab.run_lab_along(lab.LabConfig(backbone="analytic", steps=5, rollouts=3), run, every=1, backbone=trainer.backbone, progress=False)


@pytest.mark.slow  # torchrun with two processes, and one
def test_two_processes_measure_what_one_does():
    args = ["estimators", "--backbone", "analytic", "--contexts", "4", "--rollouts", "4", "--mean-rollouts", "2",
            "--mean-samples", "2", "--bootstrap", "100", "--no-progress", "--format", "json"]
    root = Path(__file__).resolve().parents[1]
    runs = [subprocess.run([sys.executable, "-m", "jsbench", *args, *extra], capture_output=True, text=True, cwd=root, check=True)
            for extra in ([], ["--processes", "2"])]
    one, two = (json.loads(r.stdout)["rows"] for r in runs)
    for a, b in zip(one, two):
        assert a["baseline"] == b["baseline"]
        for key in ("grad_var", "grad_mse", "baseline_mse", "shrinkage"):
            # a baseline without the quantity (no shrinkage for rloo, say) reports None: it must do so in both runs
            if a[key] is None or b[key] is None:
                assert a[key] is None and b[key] is None, \
                    f"{a['baseline']}.{key}: one process gave {a[key]!r}, two gave {b[key]!r}"
                continue
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-9), (a["baseline"], key)
