"""Committed OCR readings: the memo answers from them and reads a share again, the file round-trips byte for
byte, and `compare --check --suite ocr` answers from what `compare` wrote, reading again what it is told to
and stopping when an image reads differently."""

import gzip
import json

import numpy as np
import pytest

from jsbench import JsbenchError
from jsbench.rewards.ocr_engines import ReadingMemo, ReadingsDisagree, image_digest, read_distinct
from jsbench.rewards.ocr_readings import CommittedReadings, load_readings, merged, readings_path, section_key, write_readings


def _pixels(values):
    return np.stack([np.full((2, 3, 3), v, dtype=np.uint8) for v in values])


def _reader(log):
    def read_each(distinct):
        log.extend(int(d[0, 0, 0]) for d in distinct)
        return [(f"text {int(d[0, 0, 0])}",) for d in distinct]

    return read_each


def test_committed_readings_answer_without_reading_and_the_ledger_keeps_every_image():
    pixels = _pixels(range(40))
    committed = {image_digest(p)[:16]: (f"text {int(p[0, 0, 0])}",) for p in pixels[:30]}
    memo, read = ReadingMemo(), []
    memo.use_committed(committed, reread=0.0)
    memo.ledger = {}
    out = read_distinct(pixels, _reader(read), memo)
    assert out == [(f"text {v}",) for v in range(40)]
    assert read == list(range(30, 40))  # only the images with no committed reading
    assert memo.counts == {"committed": 30, "reread": 0, "fresh": 10}
    assert set(memo.ledger) == {image_digest(p) for p in pixels}  # answered and read alike


def test_a_reread_share_is_read_again_chosen_by_digest():
    pixels = _pixels(range(200))
    committed = {image_digest(p)[:16]: (f"text {int(p[0, 0, 0])}",) for p in pixels}
    memo, read = ReadingMemo(), []
    memo.use_committed(committed, reread=0.25)
    read_distinct(pixels, _reader(read), memo)
    again = {v for v in range(200) if int.from_bytes(image_digest(pixels[v])[:8], "big") < 0.25 * 2**64}
    assert set(read) == again and 25 < len(again) < 75  # a quarter, give or take, and the same ones every time
    assert memo.counts == {"committed": 200 - len(again), "reread": len(again), "fresh": 0}
    memo, read = ReadingMemo(), []
    memo.use_committed(committed, reread=1.0)
    read_distinct(pixels, _reader(read), memo)
    assert sorted(read) == list(range(200))
    with pytest.raises(ValueError, match="share"):
        memo.use_committed(committed, reread=1.5)


def test_an_image_that_reads_differently_stops_the_run():
    pixels = _pixels([7])
    memo = ReadingMemo()
    memo.use_committed({image_digest(pixels[0])[:16]: ("text 8",)}, reread=1.0)
    with pytest.raises(ReadingsDisagree, match="reads .*'text 7'.* now, .*'text 8'.* in the committed readings"):
        read_distinct(pixels, _reader([]), memo)


def test_the_file_round_trips_byte_for_byte_and_merges_by_section(tmp_path):
    identity = {"engine": "e", "options": {"a": 1}, "versions": {"x": "1.0"}}
    one = {image_digest(p): (f"t{int(p[0, 0, 0])}", "") for p in _pixels(range(5))}
    path = readings_path(tmp_path, "ocr")
    readings = CommittedReadings(identity, {section_key("analytic", "m", 3): one, section_key("analytic", "m", 5): {}})
    write_readings(path, readings)
    first = path.read_bytes()
    back = load_readings(path)
    assert back.identity == identity and back.sections[section_key("analytic", "m", 3)] == {d[:16]: r for d, r in one.items()}
    write_readings(path, back)
    assert path.read_bytes() == first  # no name, no time in the gzip header; sorted lines
    new = {image_digest(_pixels([9])[0]): ("nine",)}
    kept = merged(back, identity, {section_key("analytic", "m", 5): new})
    assert kept.sections == {section_key("analytic", "m", 3): back.sections[section_key("analytic", "m", 3)], section_key("analytic", "m", 5): new}
    other = merged(back, {**identity, "versions": {"x": "2.0"}}, {section_key("analytic", "m", 5): new})
    assert list(other.sections) == [section_key("analytic", "m", 5)]  # another engine's readings are not kept
    assert load_readings(tmp_path / "none.jsonl.gz") is None
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"format": 99}) + "\n")
    with pytest.raises(JsbenchError, match="not a readings file"):
        load_readings(path)
    path.write_bytes(b"not gzip")
    with pytest.raises(JsbenchError, match="not a readings file"):
        load_readings(path)


class _Suite:
    name = "ocr"

    def __init__(self):
        self.memo = ReadingMemo()

    def reading_memo(self):
        return {"engine": "e"}, self.memo


def test_a_compare_leaves_the_cached_engine_s_memo_as_built(tmp_path):
    from jsbench.report.readings import SectionReadings

    suite = _Suite()
    pixels = _pixels([3])
    write_readings(readings_path(tmp_path, "ocr"), CommittedReadings({"engine": "e"}, {"s": {image_digest(pixels[0]): ("three",)}}))
    readings = SectionReadings(suite, tmp_path, log=lambda msg: None, reread=0.0)
    assert read_distinct(pixels, _reader([]), suite.memo) == [("three",)]  # answered from the file
    readings.close()
    suite.memo.clear()
    assert read_distinct(pixels, _reader([]), suite.memo) == [("text 3",)]  # read: the file is no longer used
    # a writing run collects readings; a check run does not
    writing = SectionReadings(suite, tmp_path / "other", log=lambda msg: None)
    writing.start()
    read_distinct(_pixels([4]), _reader([]), suite.memo)
    writing.finish("analytic", "m", 3)
    assert list(writing.sections[section_key("analytic", "m", 3)].values()) == [("text 4",)]
    checking = SectionReadings(suite, tmp_path / "other", log=lambda msg: None, reread=0.125)
    checking.start()
    assert suite.memo.ledger is None


def test_reread_goes_with_check():
    from jsbench.report.compare import validate_compare_options
    from jsbench.report.compare_request import DEFAULT_REREAD, CompareRequest, compare_command

    for share in (1.0, DEFAULT_REREAD):  # the default share given explicitly is refused too: a writing run reads all
        with pytest.raises(JsbenchError, match="--reread goes with --check"):
            validate_compare_options(CompareRequest(suite="ocr", reread=share))
    validate_compare_options(CompareRequest(suite="ocr", reread=1.0, check=True))
    assert "--reread" not in compare_command(CompareRequest(suite="ocr", check=True))
    assert compare_command(CompareRequest(suite="ocr", check=True, reread=DEFAULT_REREAD)).endswith("--check --reread 0.125")


def _forget_images():
    """Empty the memo of every engine this process has loaded (they are cached across runs)."""
    from jsbench.rewards.ocr_engines import _LOADED

    for engine in _LOADED.values():
        engine.memo.clear()


@pytest.mark.slow
def test_compare_check_answers_from_the_readings_compare_wrote(cli, tmp_path, monkeypatch):
    pytest.importorskip("rapidocr_onnxruntime")
    from jsbench.rewards.ocr_engines import RapidOcrEngine

    (tmp_path / "policies").mkdir()
    args = ["compare", "--suite", "ocr", "--steps", "3", "--seeds", "1", "--zoo", "none",
            "--policies", tmp_path / "policies", "--records", tmp_path / "rec.jsonl", "--leaderboards", tmp_path / "lb",
            "--no-progress", "--no-plots"]
    code, out, err = cli(*args)
    assert code == 0, err
    path = readings_path(tmp_path / "lb", "ocr")
    written = load_readings(path)
    assert written.identity["engine"] == "rapidocr" and "onnxruntime" in written.identity["versions"]
    (section, readings), = written.sections.items()
    assert section == section_key("analytic", "jsbench/analytic-scenes", 3) and len(readings) >= 3

    reads = []
    detections = RapidOcrEngine.detections
    monkeypatch.setattr(RapidOcrEngine, "detections", lambda self, image: reads.append(1) or detections(self, image))
    _forget_images()  # this process's engine remembers the first run's images
    code, out, err = cli(*args, "--check", "--reread", "0")
    assert code == 0, err
    assert "passed" in out and not reads and "readings: 80 answered from ocr.readings.jsonl.gz, 0 of its images read again, every one the same; 0 images" in err  # 40 prompts x 2 rows

    code, out, err = cli(*args, "--check", "--reread", "1")
    assert code == 0, err
    assert len(reads) == len(readings) and f"readings: 0 answered from ocr.readings.jsonl.gz, {len(readings):,} of its" in err

    assert "answered" not in cli(*args, "--check", "--reread", "0", "--leaderboards", tmp_path / "lb2")[2]  # no file: read
    # a reading that no longer matches what the engine reads: the check stops in one line, exit 2
    digest = next(iter(readings))
    written.sections[section][digest] = ("something else",)
    write_readings(path, written)
    _forget_images()
    code, out, err = cli(*args, "--check", "--reread", "1")
    assert code == 2 and "in the committed readings" in err and "Traceback" not in err

    code, out, err = cli(*args, "--check", "--reread", "2")
    assert code == 2 and "--reread is a share between 0 and 1" in err

    # a damaged file is refused before anything is sampled, and the leaderboard beside it is left as it was
    path.write_bytes(b"not gzip")
    page = (tmp_path / "lb" / "ocr.csv").read_bytes()
    code, out, err = cli(*args)
    assert code == 2 and "not a readings file" in err and "done" not in err
    assert (tmp_path / "lb" / "ocr.csv").read_bytes() == page
