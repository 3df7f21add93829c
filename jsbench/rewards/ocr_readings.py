"""Committed OCR readings: what the OCR engine read in each image of a leaderboard section, by the image's
digest, so `compare --check` need not read every image again.

rapidocr reads the same pixels the same every time (`jsbench.rewards.ocr_engines.read_distinct` relies on it
within a run); reading is ~90 % of an OCR check's time. So `compare` writes, beside `<suite>.csv`, the
readings of every image its sections scored (`<suite>.readings.jsonl.gz`, one section's entries replaced
when that section is rewritten), and `compare --check` answers an image whose pixels have a committed
reading from it. Every image is still sampled and its pixels digested, so a changed world, schedule or
policy shows as an image with no committed reading, read afresh; the engine itself is checked by reading a
`--reread` share of the committed images again (chosen by digest), each of which must read the same
(`ReadingsDisagree`, exit 2), and the file is used only by an engine of the same identity: options and the
installed versions of rapidocr, onnxruntime, OpenCV and NumPy (`RapidOcrEngine.identity`). `--reread 1`
reads every image, as a check without the file does.

The file: gzip (no name, no time: the same readings give the same bytes) of JSON lines, the first
{"format", "identity", "about"}, then one {"section", "digest", "reading"} per image and section, sorted; a digest is the first 128 bits of
the image's BLAKE2b-256 (`COMMITTED_DIGEST_BYTES`).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from jsbench import JsbenchError
from jsbench.io import replacing
from jsbench.rewards.ocr_engines import COMMITTED_DIGEST_BYTES

__all__ = ["READINGS_FORMAT", "CommittedReadings", "readings_path", "section_key", "load_readings", "write_readings", "merged"]

READINGS_FORMAT = 1
ABOUT = ("each image's OCR reading (its detections' texts) by the BLAKE2b-256 digest of its 8-bit pixels, per "
         "leaderboard section: what `jsbench compare --check` answers from (jsbench/rewards/ocr_readings.py)")


@dataclass
class CommittedReadings:
    """A readings file: the engine identity that read it and, per section, {digest: reading} (digests as
    read: their first COMMITTED_DIGEST_BYTES; as collected: whole, cut when written)."""

    identity: dict
    sections: dict[str, dict[bytes, tuple]] = field(default_factory=dict)

    def all(self) -> dict[bytes, tuple]:
        """Every section's readings in one mapping by digest prefix (an image reads the same in every section)."""
        return {d[:COMMITTED_DIGEST_BYTES]: r for readings in self.sections.values() for d, r in readings.items()}


def readings_path(leaderboard_dir: str | Path, suite_name: str) -> Path:
    return Path(leaderboard_dir) / f"{suite_name}.readings.jsonl.gz"


def section_key(backbone: str, model_id: str, steps: int) -> str:
    """A leaderboard section's name in the file: backbone, model and step budget."""
    return f"{backbone} {model_id} {int(steps)}"


def _reading(value) -> tuple:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"a reading is a list of texts, got {value!r}")
    return tuple(value)


def load_readings(path: str | Path) -> CommittedReadings | None:
    """The file at `path`, or None when there is none; a damaged file is one line (JsbenchError)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            header = json.loads(f.readline())
            if header.get("format") != READINGS_FORMAT:
                raise ValueError(f"format {header.get('format')!r}, this jsbench reads {READINGS_FORMAT}")
            out = CommittedReadings(identity=header["identity"])
            for line in f:
                entry = json.loads(line)
                out.sections.setdefault(entry["section"], {})[bytes.fromhex(entry["digest"])] = _reading(entry["reading"])
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise JsbenchError(f"{path}: not a readings file jsbench can read ({err}); delete it and run compare again") from None
    return out


def write_readings(path: str | Path, readings: CommittedReadings) -> Path:
    """Write `readings` to `path` atomically, byte for byte the same for the same readings."""
    lines = [json.dumps({"format": READINGS_FORMAT, "identity": readings.identity, "about": ABOUT}, sort_keys=True)]
    for section in sorted(readings.sections):
        for digest, reading in sorted({d[:COMMITTED_DIGEST_BYTES]: r for d, r in readings.sections[section].items()}.items()):
            lines.append(json.dumps({"section": section, "digest": digest[:COMMITTED_DIGEST_BYTES].hex(), "reading": list(reading)},
                                    ensure_ascii=False))
    with replacing(path) as tmp:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(("\n".join(lines) + "\n").encode("utf-8"))
    return Path(path)


def merged(old: CommittedReadings | None, identity: dict, fresh: Mapping[str, Mapping[bytes, tuple]]) -> CommittedReadings:
    """`fresh` sections over `old`'s other sections; an old file of another identity keeps none of them."""
    kept = dict(old.sections) if old is not None and old.identity == identity else {}
    kept.update({s: dict(r) for s, r in fresh.items()})
    return CommittedReadings(identity=identity, sections=kept)
