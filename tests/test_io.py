"""jsbench.io.write_result: the --write / --out tail every bench script shares."""

from __future__ import annotations

import json

from jsbench.io import result_target, write_result

PAYLOAD = {"rows": [{"steps": 3, "value": 0.5}], "name": "ünïcode"}


def _call(tmp_path, **kw):
    lines: list[str] = []
    committed = tmp_path / "bench" / "results" / "x.json"
    written = write_result(PAYLOAD, committed=committed, root=tmp_path, log=lines.append, **kw)
    return written, committed, lines


def test_write_goes_to_the_committed_file(tmp_path):
    written, committed, lines = _call(tmp_path, write=True, out=None)
    assert written == committed and json.loads(committed.read_text()) == PAYLOAD
    assert committed.read_text() == json.dumps(PAYLOAD, indent=1) + "\n"
    assert lines == ["wrote bench/results/x.json"]  # relative to root
    assert [p.name for p in committed.parent.iterdir()] == ["x.json"]  # no temporary file left


def test_out_goes_elsewhere_and_leaves_the_committed_file_alone(tmp_path):
    out = tmp_path.parent / f"{tmp_path.name}-elsewhere" / "mine.json"
    written, committed, lines = _call(tmp_path, write=False, out=out, indent=2, sort_keys=True, newline=False,
                                      also=[tmp_path / "plot.png"])
    assert written == out and not committed.exists()
    assert out.read_text() == json.dumps(PAYLOAD, indent=2, sort_keys=True)  # the options pass through
    assert json.loads(out.read_text()) == PAYLOAD
    assert lines == [f"wrote {out} and plot.png"]  # outside root: as given


def test_neither_writes_nothing_and_says_how(tmp_path):
    written, committed, lines = _call(tmp_path, write=False, out=None, companions=" and its .png")
    assert written is None and not (tmp_path / "bench").exists()
    assert lines == ["(nothing written: --write replaces bench/results/x.json and its .png, --out PATH writes elsewhere)"]
    assert result_target(write=False, out=None, committed=tmp_path / "c.json", log=lines.append) is None
    assert lines[-1] == f"(nothing written: --write replaces {tmp_path / 'c.json'}, --out PATH writes elsewhere)"


def test_result_options_are_write_or_out_never_both_and_nothing_by_default(capsys):
    import argparse

    import pytest

    from jsbench.io import add_result_options

    parser = argparse.ArgumentParser()
    add_result_options(parser, "bench/results/x.json", also=" and the .png")
    assert vars(parser.parse_args([])) == {"write": False, "out": None}
    assert parser.parse_args(["--out", "y.json"]).out.name == "y.json"
    with pytest.raises(SystemExit):
        parser.parse_args(["--write", "--out", "y.json"])
    assert "not allowed with" in capsys.readouterr().err
    assert "replace the committed bench/results/x.json and the .png" in " ".join(parser.format_help().split())
