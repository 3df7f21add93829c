"""run_eval: the one evaluate -> records -> append -> discard-side-file loop behind `jsbench eval` and compare's rows."""

import json
from types import SimpleNamespace

import pytest

from jsbench.backbones import load_backbone
from jsbench.evaluation.evaluate import evaluate, resolve_schedule
from jsbench.evaluation.results import make_records, read_records
from jsbench.evaluation.runs import run_eval
from jsbench.suites import load_suite

VOLATILE = ("created", "git_commit")


def _values(records):
    return [{k: v for k, v in json.loads(json.dumps(r.__dict__)).items() if k not in VOLATILE} for r in records]


@pytest.fixture(scope="module")
def world():
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    return bb, suite, suite.items("test")[:6]


def test_run_eval_files_what_evaluate_and_make_records_give(world, tmp_path):
    bb, suite, items = world
    out = tmp_path / "rec.jsonl"
    default = resolve_schedule("default", bb, 3)
    ref, ref_records = run_eval(bb, suite, default, out, seeds_per_prompt=2, items=items, progress=False)
    run, records = run_eval(bb, suite, resolve_schedule("uniform", bb, 3), out, seeds_per_prompt=2, items=items, progress=False, reference=ref)
    plain = evaluate(bb, suite, resolve_schedule("uniform", bb, 3), 2, items=items, progress=False)
    assert run.scores == plain.scores and [(it.prompt, s) for it, s in run.rows()] == [(it.prompt, s) for it, s in plain.rows()]
    assert _values(records) == _values(make_records(bb, suite, resolve_schedule("uniform", bb, 3), plain, reference=ref))
    assert all(r.delta_vs_default is not None for r in records) and all(r.delta_vs_default is None for r in ref_records)
    assert _values(read_records(out)) == _values(ref_records + records)  # appended, in order
    assert list(tmp_path.glob(".rec.jsonl.*.partial.jsonl")) == []  # the side file went once the records were written


def test_a_distilled_row_is_filed_under_the_compared_backbone(world, tmp_path):
    bb, suite, items = world
    host = SimpleNamespace(name="host", model_id="host/model")
    _, records = run_eval(bb, suite, resolve_schedule("default", bb, 3), tmp_path / "r.jsonl", seeds_per_prompt=1, items=items,
                          progress=False, filed_under=host)
    assert {(r.backbone, r.model_id) for r in records} == {("host", "host/model")}


def test_only_the_main_process_writes(world, tmp_path):
    bb, suite, items = world
    out = tmp_path / "r.jsonl"
    other_rank = SimpleNamespace(distributed=False, is_main=False)
    run, records = run_eval(bb, suite, resolve_schedule("default", bb, 3), out, seeds_per_prompt=1, items=items, progress=False, ctx=other_rank)
    assert records == [] and len(run.scores) == len(items) and not out.exists()
