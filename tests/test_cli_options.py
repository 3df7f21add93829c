"""`jsbench train`'s options are built from TrainConfig's fields: a new field is a new option, with its default
and help, without touching cli.py."""

import dataclasses
from pathlib import Path

import pytest
import typer.main

import jsbench.cli as cli_module
import jsbench.commands.train
import jsbench.train.reinforce
from jsbench import JsbenchError
from jsbench.cli_options import config_options
from jsbench.train.reinforce import TrainConfig


def _train_command():
    return typer.main.get_command(cli_module.app).commands["train"]


def assert_fields_are_options(command, config_cls) -> dict:
    """Every field of `config_cls` is an option of the CLI `command` with the field's default and help; the
    command's options by name."""
    params = {p.name: p for p in command.params}
    for f in dataclasses.fields(config_cls):
        assert f.name in params, f"{config_cls.__name__}.{f.name} is not an option of `jsbench {command.name}`"
        p = params[f.name]
        default = p.default.value if hasattr(p.default, "value") else p.default
        assert default == (list(f.default) if isinstance(f.default, tuple) else f.default) and p.help == f.metadata["help"]
    return params


def test_every_train_config_field_is_a_train_option_with_its_default_and_help():
    params = assert_fields_are_options(_train_command(), TrainConfig)
    # the few options of train alone, and the short flags
    assert {"out", "resume", "overwrite", "progress", "processes"} <= set(params)
    assert "-B" in params["contexts"].opts and "-K" in params["samples"].opts
    assert params["offload"].secondary_opts == [] and params["resume"].secondary_opts == ["--no-resume"]


@dataclasses.dataclass
class _Extended(TrainConfig):
    extra_knob: int = dataclasses.field(default=7, metadata={"help": "A knob added to the config.", "min": 1})


def test_a_new_field_is_a_new_option_that_reaches_the_config(cli, monkeypatch):
    monkeypatch.setattr(cli_module, "TrainConfig", _Extended)  # the options typer reads
    monkeypatch.setattr(jsbench.commands.train, "TrainConfig", _Extended)  # the config the command builds
    monkeypatch.setattr(cli_module.train, "__signature__", cli_module._train_signature())
    code, out, err = cli("train", "--help")
    assert code == 0, err
    assert "--extra-knob" in out and "A knob added to the config." in out and "[default: 7]" in out

    seen = []

    class Stop:
        def __init__(self, config, out):
            seen.append(config)
            raise JsbenchError("stopped before training")

    monkeypatch.setattr(jsbench.train.reinforce, "Trainer", Stop)
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
        config_options(Bare)


def test_compare_option_rules_live_in_the_library_and_refuse_before_weights_load(cli, monkeypatch, tmp_path):
    from jsbench.report.compare import validate_compare_options
    from jsbench.report.compare_request import CompareRequest as R, compare_command
    from jsbench.zoo import DEFAULT_ZOO

    with pytest.raises(JsbenchError, match="go with --check"):
        validate_compare_options(R(strict=True))
    with pytest.raises(JsbenchError, match="go with --check"):
        validate_compare_options(R(report=["r.md"]))
    validate_compare_options(R(check=True, strict=True, report=["r.md", "r.json", "r.xml"]))
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
        validate_compare_options(R(check=True, leaderboards=board, steps=[5]), backbone_name="analytic")
    validate_compare_options(R(check=True, leaderboards=board, steps=[3, 5]), backbone_name="analytic")
    with pytest.raises(JsbenchError, match="--tolerance must be"):
        validate_compare_options(R(check=True, tolerance=float("nan")))
    validate_compare_options(R(tolerance=-1))  # the tolerance is the check's: unused without --check

    base = "jsbench compare --suite geneval --backbone analytic --steps 3 --seeds 2"
    assert compare_command(R(steps=[3], seeds=2)) == base  # no --zoo: the backbone's default rows
    # a named zoo is shown even when it spells the default list: re-running the command runs its opt-in rows
    assert compare_command(R(steps=[3], seeds=2, zoo=",".join(DEFAULT_ZOO))) == base + " --zoo " + ",".join(DEFAULT_ZOO)
    assert compare_command(R(steps=[3], seeds=2, zoo="none", check=True, strict=True)) == base + " --zoo none --check --strict"
    assert compare_command(R(steps=[3], seeds=2, zoo="karras", check=True, tolerance=3)) == base + " --zoo karras --check --tolerance 3"
    assert compare_command(R(steps=[3], seeds=2, limit=2, zoo=" karras, oss ")) == base + " --zoo karras,oss --limit 2"  # the parsed zoo


def test_recipe_run_command_names_its_zoo():
    from jsbench.report.compare_request import compare_command, recipe_request

    run = {"suite": "geneval", "backbone": "scenes-dit", "steps": [3], "seed_base": 0}
    assert "--zoo" not in compare_command(recipe_request(run))
    assert compare_command(recipe_request({**run, "zoo": "karras,oss,oss-image"})).endswith("--steps 3 --zoo karras,oss,oss-image")


def _compare_command():
    return typer.main.get_command(cli_module.app).commands["compare"]


def test_every_compare_request_field_is_a_compare_option_with_its_default_and_help():
    from jsbench.report.compare_request import CompareRequest

    params = assert_fields_are_options(_compare_command(), CompareRequest)
    for f in dataclasses.fields(CompareRequest):
        assert params[f.name].rich_help_panel, f"--{f.name} is in no --help panel (cli._COMPARE_PANELS)"
    assert set(params) == {f.name for f in dataclasses.fields(CompareRequest)}  # the request is the whole command
    assert params["all_runs"].opts == ["--all"] and params["all_runs"].secondary_opts == []
    assert params["check"].secondary_opts == ["--no-check"] and params["steps"].multiple


def test_the_cli_builds_the_request_run_command_takes(cli, monkeypatch):
    """cli.py builds the request from the options (plain values: lists as tuples, paths, the format's
    value) and hands it to jsbench.commands.compare.run_command, whose return is the exit code."""
    import jsbench.commands.compare
    from jsbench.report.compare_request import CompareRequest

    seen = []
    monkeypatch.setattr(jsbench.commands.compare, "run_command", lambda request, **kw: seen.append((request, kw)) or 1)
    code, _, _ = cli("compare", "--steps", "2", "--steps", "4", "--schedule", "shift:3", "--format", "json", "--records", "r.jsonl",
                     "--check", "--report", "a.md", "--tolerance", "3", "--seeds", "8")
    assert code == 1
    [(request, kw)] = seen
    assert request == CompareRequest(steps=(2, 4), schedule=("shift:3",), format="json", records=Path("r.jsonl"), check=True,
                                     report=(Path("a.md"),), tolerance=3.0, seeds=8)
    assert set(kw["given"]) == {"steps", "schedule", "format", "records", "check", "report", "tolerance", "seeds"}


def test_a_request_round_trips_through_its_command_text():
    from jsbench.report.compare_request import CompareRequest as R, compare_command, parse_compare_command

    for request in (R(), R(steps=(3,), seeds=2, zoo="none", check=True, strict=True, tolerance=3.0),
                    R(suite="ocr", backbone="flux-dev", model="/models/flux dev", steps=(5, 8), guidance=3.5, seeds=4, seed_base=7,
                      schedule=("shift:3", "policy:/runs/a b"), distilled=("flux-schnell=/m/s",), ocr_protocol="mario",
                      zoo="karras,beta:0.5,0.7,oss", limit=2),
                    R(check=True, tolerance=0.5)):
        text = compare_command(request)
        assert parse_compare_command(text) == request, text
        assert compare_command(parse_compare_command(text)) == text
    # any compare command line reads, the options it does not render too
    assert parse_compare_command("jsbench compare --no-plots --report a.md --report b.json --batch-size=4 --all") == R(
        plots=False, report=(Path("a.md"), Path("b.json")), batch_size=4, all_runs=True)
    for text, fragment in (("jsbench eval --steps 3", "not a jsbench compare command"), ("jsbench compare --speed 2", "unknown option"),
                           ("jsbench compare --steps", "needs a value"), ("jsbench compare --seeds many", "takes an integer")):
        with pytest.raises(JsbenchError, match=fragment):
            parse_compare_command(text)


def test_a_real_models_section_names_its_protocols_seeds_and_zoo():
    from jsbench.report.compare_request import CompareRequest as R, compare_command, recorded_request
    from jsbench.evaluation.protocol import default_zoo

    embedded = R(steps=(3, 5))
    assert recorded_request(embedded, real=False) == embedded  # the committed sections' commands name neither
    real = recorded_request(R(suite="ocr", backbone="flux-dev", steps=(3,)), real=True)
    assert real.seeds == 4 and real.zoo == ",".join(default_zoo(True))
    assert compare_command(real).endswith(f"--seeds 4 --zoo {real.zoo}")
    assert recorded_request(R(backbone="flux-dev", seeds=2, zoo="karras"), real=True) == R(backbone="flux-dev", seeds=2, zoo="karras")


def test_every_committed_section_command_round_trips():
    """The command each committed leaderboard section records reads back into a request that renders it again."""
    import csv

    from jsbench.report.compare_request import compare_command, parse_compare_command

    root = Path(__file__).resolve().parents[1] / "leaderboards"
    commands = {r["command"] for name in ("geneval.csv", "ocr.csv") for r in csv.DictReader(open(root / name)) if r.get("command")}
    assert len(commands) >= 4
    for text in commands:
        assert compare_command(parse_compare_command(text)) == text


def test_the_committed_recipe_reads_into_requests_and_writes_back_byte_for_byte(tmp_path):
    from jsbench.report.compare_request import CompareRequest, compare_command, read_recipe, recipe_text, write_recipe
    from jsbench.evaluation.evaluate import EVAL_SEED_BASE

    committed = Path(__file__).resolve().parents[1] / "leaderboards" / "recipe.json"
    requests = read_recipe(committed)
    assert all(isinstance(r, CompareRequest) for r in requests) and len(requests) == 4
    assert requests[1] == CompareRequest(backbone="scenes-dit", steps=(3,), zoo="karras,oss,oss-image,searched")
    assert recipe_text(requests) == committed.read_text()
    assert write_recipe(tmp_path / "recipe.json", requests).read_bytes() == committed.read_bytes()
    # each run's command is the one its committed section records
    assert compare_command(requests[0]) == "jsbench compare --suite geneval --backbone analytic --steps 3 --steps 5"
    # a request written and read back is the same request, its recipe keys set away from their defaults
    more = [CompareRequest(suite="ocr", backbone="sdxl", model="stabilityai/sdxl", steps=(5,), seeds=4, seed_base=9,
                           schedule=("shift:3",), distilled=("flux-schnell",), zoo="none", ocr_protocol="mario")]
    assert read_recipe(write_recipe(tmp_path / "more.json", more)) == more
    assert CompareRequest().seed_base == EVAL_SEED_BASE  # the request's default is evaluate's (declared without importing torch)
