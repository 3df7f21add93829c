"""`jsbench train`'s options are built from TrainConfig's fields: a new field is a new option, with its default
and help, without touching cli.py."""

import dataclasses

import pytest
import typer.main

import jsbench.cli as cli_module
import jsbench.train
from jsbench import JsbenchError
from jsbench.train import TrainConfig


def _train_command():
    return typer.main.get_command(cli_module.app).commands["train"]


def test_every_train_config_field_is_a_train_option_with_its_default_and_help():
    params = {p.name: p for p in _train_command().params}
    for f in dataclasses.fields(TrainConfig):
        assert f.name in params, f"TrainConfig.{f.name} is not an option of `jsbench train`"
        p = params[f.name]
        default = p.default.value if hasattr(p.default, "value") else p.default
        assert default == f.default and p.help == f.metadata["help"]
    # the few options of train alone, and the short flags
    assert {"out", "resume", "overwrite", "progress", "processes"} <= set(params)
    assert "-B" in params["contexts"].opts and "-K" in params["samples"].opts
    assert params["offload"].secondary_opts == [] and params["resume"].secondary_opts == ["--no-resume"]


@dataclasses.dataclass
class _Extended(TrainConfig):
    extra_knob: int = dataclasses.field(default=7, metadata={"help": "A knob added to the config.", "min": 1})


def test_a_new_field_is_a_new_option_that_reaches_the_config(cli, monkeypatch):
    monkeypatch.setattr(cli_module, "TrainConfig", _Extended)
    monkeypatch.setattr(cli_module.train, "__signature__", cli_module._train_signature())
    code, out, err = cli("train", "--help")
    assert code == 0, err
    assert "--extra-knob" in out and "A knob added to the config." in out and "[default: 7]" in out

    seen = []

    class Stop:
        def __init__(self, config, out):
            seen.append(config)
            raise JsbenchError("stopped before training")

    monkeypatch.setattr(jsbench.train, "Trainer", Stop)
    code, _, err = cli("train", "--out", "run", "--extra-knob", "3", "--policy", "global", "-B", "5")
    assert code == 2 and "stopped before training" in err
    assert seen[0].extra_knob == 3 and seen[0].policy == "global" and seen[0].contexts == 5  # plain values, not enums
    code, _, err = cli("train", "--out", "run", "--extra-knob", "0")
    assert code != 0 and "extra-knob" in err  # its `min` holds
    code, _, err = cli("train", "--out", "run", "--policy", "local")
    assert code != 0 and "'instance', 'prompt', 'global'" in err and not seen[1:]  # its choices hold


def test_a_field_without_help_is_refused():
    @dataclasses.dataclass
    class Bare(TrainConfig):
        undocumented: int = 1

    with pytest.raises(TypeError, match="undocumented has no help"):
        cli_module.config_options(Bare)


def test_compare_option_rules_live_in_the_library_and_refuse_before_weights_load(cli, monkeypatch, tmp_path):
    from jsbench.compare import compare_command, validate_compare_options
    from jsbench.zoo import DEFAULT_ZOO

    with pytest.raises(JsbenchError, match="go with --check"):
        validate_compare_options(check=False, strict=True)
    with pytest.raises(JsbenchError, match="go with --check"):
        validate_compare_options(check=False, reports=["r.md"])
    validate_compare_options(check=True, strict=True, reports=["r.md", "r.json", "r.xml"])
    import jsbench.backbones

    def no_weights(*a, **k):
        raise AssertionError("weights loaded before the options were refused")

    monkeypatch.setattr(jsbench.backbones, "load_backbone", no_weights)
    for args, fragment in ((["--strict"], "go with --check"), (["--check", "--report", "r.txt"], "r.txt"), (["--zoo", "magic"], "magic"),
                           (["--check", "--leaderboards", str(tmp_path)], "needs a committed leaderboard"),
                           (["--check", "--tolerance", "-1"], "--tolerance must be a number ≥ 0")):
        code, _, err = cli("compare", "--steps", "3", *args)
        assert code == 2 and fragment in err and "Traceback" not in err, err

    # a check that would compare nothing is refused before any weights load: another backbone's, another budget's
    board = tmp_path / "board"
    board.mkdir()
    line = "jsbench/analytic-scenes,{steps},{method},overall,0.5,,,,9,{budget}"
    (board / "geneval.csv").write_text("backbone,model_id,steps,method,task,value,stderr,delta,delta_stderr,n_images,budget\n"
                                       + "".join(f"analytic,{line.format(steps=s, method=m, budget=3)}\n" for s, m in ((3, "default"), (200, "ceiling (200 steps)"))))
    for args in (["--steps", "5"], ["--backbone", "detail", "--steps", "3"]):
        code, _, err = cli("compare", "--check", "--leaderboards", str(board), *args)
        assert code == 2 and "--check would compare nothing" in err and "analytic at 3 steps" in err, err
    with pytest.raises(JsbenchError, match="would compare nothing"):
        validate_compare_options(check=True, leaderboard_dir=board, suite_name="geneval", backbone_name="analytic", steps_list=[5])
    validate_compare_options(check=True, leaderboard_dir=board, suite_name="geneval", backbone_name="analytic", steps_list=[3, 5])
    with pytest.raises(JsbenchError, match="--tolerance must be"):
        validate_compare_options(check=True, tolerance=float("nan"))
    validate_compare_options(check=False, tolerance=-1)  # the tolerance is the check's: unused without --check

    base = "jsbench compare --suite geneval --backbone analytic --steps 3 --seeds 2"
    assert compare_command("geneval", "analytic", [3], seeds=2, zoo=list(DEFAULT_ZOO)) == base
    # a named zoo is shown even when it spells the default list: re-running the command runs its opt-in rows
    assert compare_command("geneval", "analytic", [3], seeds=2, zoo=list(DEFAULT_ZOO), zoo_explicit=True) == base + " --zoo " + ",".join(DEFAULT_ZOO)
    assert compare_command("geneval", "analytic", [3], seeds=2, zoo=[], check=True, strict=True) == base + " --zoo none --check --strict"
    assert compare_command("geneval", "analytic", [3], seeds=2, zoo=["karras"], check=True, tolerance=3) == base + " --zoo karras --check --tolerance 3"


def test_recipe_run_command_names_its_zoo():
    from jsbench.compare import DEFAULT_SEEDS, EVAL_SEED_BASE, recipe_run_command

    run = {"suite": "geneval", "backbone": "scenes-dit", "steps": [3], "model": None, "seeds": DEFAULT_SEEDS, "schedule": [],
           "distilled": [], "seed_base": EVAL_SEED_BASE}
    assert "--zoo" not in recipe_run_command({**run, "zoo": None})
    assert recipe_run_command({**run, "zoo": "karras,oss,oss-image"}).endswith("--steps 3 --zoo karras,oss,oss-image")
