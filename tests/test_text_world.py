"""The embedded world's text scenes: prompts, loader, mixture, embedding, renderer, and real OCR on them."""

from __future__ import annotations

import shutil

import pytest
import torch

from jsbench import JsbenchError
from jsbench.schedule import uniform_sigmas
from jsbench.world.mixture import MixtureTable, euler_flow
from jsbench.world.scenes import LATENT_DIM
from jsbench.world.text import (
    CARRIERS,
    TEXT_FEATURES_AT,
    WORDS,
    embed_text_prompt,
    is_text_prompt,
    load_text_prompts,
    make_text_prompts,
    parse_text_prompt,
    split_text_prompts,
    text_latent,
    text_mixture,
    text_modes,
)
from jsbench.world.text_canvas import MAX_TEXT_CHARS, TEXT_HEIGHT, TEXT_WIDTH, render_text
from jsbench.rewards.ocr_engines import load_engine
from jsbench.scoring.text import image_metrics


# ------------------------------------------------------------------------------------------- prompts


def test_generator_is_seeded_distinct_and_drawable():
    prompts = make_text_prompts(seed=3, n=200)
    assert prompts == make_text_prompts(seed=3, n=200)
    assert prompts != make_text_prompts(seed=4, n=200)
    assert len(set(prompts)) == 200
    carriers = set()
    for p in prompts:
        assert is_text_prompt(p)
        spec = parse_text_prompt(p)
        assert 1 <= len(spec.words) <= 2 and set(spec.words) <= set(WORDS)
        carriers.add(spec.carrier)
    assert carriers == set(CARRIERS)


def test_text_prompts_are_told_apart_from_scene_prompts():
    assert is_text_prompt('a neon sign that says "open"')
    assert is_text_prompt("a poster with 'Jazz Night'")
    assert not is_text_prompt("a photo of two red circles")
    assert not is_text_prompt('a sign that says ""')


def test_parse_finds_carrier_and_words():
    spec = parse_text_prompt('"Open  Late" written on a Neon Sign')
    assert spec.words == ("open", "late") and spec.text == "open late" and spec.carrier == "neon sign"
    assert parse_text_prompt('street signs reading "stop"').carrier == "street sign"
    assert parse_text_prompt('a napkin that says "hi"').carrier is None  # unknown carriers draw generically
    with pytest.raises(JsbenchError, match="cannot draw"):
        parse_text_prompt('a sign that says "caf\u00e9"')
    with pytest.raises(JsbenchError, match="at most"):
        parse_text_prompt('a sign that says "' + "x" * (MAX_TEXT_CHARS + 1) + '"')


def test_loader_reads_one_prompt_per_line(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_bytes('\ufeffa sign that says "river"\r\na mug with \u201cgood  day\u201d\n'.encode("utf-8"))
    assert load_text_prompts(path) == ['a sign that says "river"', "a mug with \u201cgood day\u201d"]


@pytest.mark.parametrize(
    "content, line, what",
    [
        (b'a sign that says "a"\n\na sign that says "b"\n', 2, "empty line"),
        (b'a sign that says "a"\na sign that says "b"\na sign \xff "c"\n', 3, "UTF-8"),
        (b'a sign that says "a"\na photo of a circle\n', 2, "no quoted text"),
        (b'a sign that says "' + b"x" * 40 + b'"\n', 1, "at most"),
    ],
)
def test_loader_errors_name_the_line(tmp_path, content, line, what):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(JsbenchError) as err:
        load_text_prompts(path)
    message = str(err.value)
    assert f"{path}:{line}:" in message and what in message and "\n" not in message


def test_loader_missing_file(tmp_path):
    with pytest.raises(JsbenchError, match="cannot read"):
        load_text_prompts(tmp_path / "absent.txt")


def test_split_is_fixed_and_disjoint():
    prompts = make_text_prompts(0, 160)
    train, test = split_text_prompts(prompts, "train"), split_text_prompts(prompts, "test")
    assert len(test) == 40 and len(train) == 120 and not set(train) & set(test)
    assert split_text_prompts(prompts, "all") == prompts


# ------------------------------------------------------------------------------------------ mixture


def test_mixture_over_the_scene_latent():
    mix = text_mixture('a neon sign that says "open"')
    k = mix.means.shape[0]
    assert mix.means.shape == (k, LATENT_DIM) and mix.log_weights.shape == (k,)
    assert mix.spread_tensor().shape == (k, LATENT_DIM)
    # neon sign: lower case only, 3 baselines x 3 sizes
    assert k == 9
    assert text_mixture('  a NEON sign that says "OPEN" ') is not None
    # a label has one layout and one case; regular and bold are its two (harmless) modes
    assert text_mixture('a label with the text "book"').means.shape[0] == 2


def test_modes_fit_the_canvas_and_long_text_has_fewer_positions():
    short = text_modes(parse_text_prompt('a billboard that says "sun"'))
    long = text_modes(parse_text_prompt('a billboard that says "coffee honey"'))
    assert len({m[1] for m in short}) == 5 and len({m[1] for m in long}) < 5
    assert all(m[0] == "COFFEE  HONEY" for m in long)  # upper case, two cells between words


def test_mixture_table_samples_text_prompts_exactly():
    prompts = ['a sign that says "river"', 'a t-shirt with the text "jazz"']
    table = MixtureTable([text_mixture(p) for p in prompts], dtype=torch.float64)
    rows = torch.tensor([0, 1, 0, 1])
    x0 = table.sample_data(rows, torch.Generator().manual_seed(0))
    assert x0.shape == (4, LATENT_DIM)
    x = euler_flow(table, torch.randn(4, LATENT_DIM, dtype=torch.float64), rows, uniform_sigmas(200, 4, torch.float64))
    assert torch.isfinite(x).all()


# ---------------------------------------------------------------------------------------- embedding


def test_embedding_is_48_dims_after_the_scene_vocabulary():
    from jsbench.world import VOCAB

    assert TEXT_FEATURES_AT >= len(VOCAB)
    a = embed_text_prompt('a neon sign that says "open late"')
    b = embed_text_prompt('a mug with the text "sun"')
    assert a.shape == (48,) and a.dtype == torch.float32
    assert (a[:TEXT_FEATURES_AT] == 0).all() and a[TEXT_FEATURES_AT] == 1.0
    assert not torch.equal(a, b)
    assert torch.equal(a, embed_text_prompt('a neon sign that says "open late"'))
    # the carrier word is one-hot, the word count is a feature
    assert a[TEXT_FEATURES_AT + 1 : TEXT_FEATURES_AT + 13].sum() == 1.0
    assert a[TEXT_FEATURES_AT + 13] == 2.0 and b[TEXT_FEATURES_AT + 13] == 1.0


# ----------------------------------------------------------------------------------------- renderer


def _ink(images: torch.Tensor) -> torch.Tensor:
    return (images.mean(1) < 0.5).flatten(1).sum(1)


def test_render_shape_range_and_modes():
    lat = torch.stack([text_latent("river"), text_latent("RIVER", 3, 1, 2, 1), text_latent("")])
    images = render_text(lat, ["a", "b", "c"])
    assert images.shape == (3, 3, TEXT_HEIGHT, TEXT_WIDTH)
    assert images.min() >= 0 and images.max() <= 1
    ink = _ink(images)
    assert ink[0] > 100 and ink[1] > ink[0] and ink[2] == 0  # bold and bigger has more ink; blank has none
    with pytest.raises(ValueError):
        render_text(lat, ["a"])


def test_jitter_moves_text_but_between_modes_ghosts_it():
    a, b = text_latent("river", x_index=3), text_latent("river", x_index=4)
    jittered = a.clone()
    jittered[0] += 0.05  # within the plateau: one clean copy, shifted
    images = render_text(torch.stack([a, jittered, (a + b) / 2]))
    ink = _ink(images)
    assert abs(int(ink[1]) - int(ink[0])) <= 0.05 * int(ink[0])
    assert not torch.equal(images[0], images[1])
    # halfway between two positions: two overlapping copies, more of the canvas inked (ghosting)
    footprint = (images.mean(1) < 0.8).flatten(1).sum(1)
    assert footprint[2] > 1.3 * footprint[0]


# --------------------------------------------------------------------------- real OCR on the world


def _sample(prompts, seeds, steps):
    distinct = list(dict.fromkeys(prompts))
    table = MixtureTable([text_mixture(p) for p in distinct], dtype=torch.float64)
    rows = torch.tensor([distinct.index(p) for p in prompts])
    x_T = torch.stack([torch.randn(LATENT_DIM, generator=torch.Generator().manual_seed(s)) for s in seeds]).double()
    return euler_flow(table, x_T, rows, uniform_sigmas(steps, len(prompts), torch.float64))


def _accuracy(engine, prompts, latents) -> float:
    texts = engine.read(render_text(latents))
    return sum(image_metrics(t, p)["word_accuracy"] for t, p in zip(texts, prompts)) / len(prompts)


@pytest.fixture(scope="module")
def world_batch():
    # the carriers with the most modes, where few steps hurt most, plus two easy ones
    carriers = ["chalkboard", "neon sign", "street sign", "storefront", "sign", "billboard"]
    words = ["river", "jazz", "coffee", "hello", "tiger", "candy"]
    prompts = [f'a {c} that says "{w}"' for c, w in zip(carriers, words) for _ in range(4)]
    seeds = list(range(100, 100 + len(prompts)))
    return prompts, seeds


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_rapidocr_reads_the_many_step_ceiling_and_fails_at_three_steps(world_batch):
    prompts, seeds = world_batch
    engine = load_engine("rapidocr")
    ceiling = _accuracy(engine, prompts, _sample(prompts, seeds, 200))
    three = _accuracy(engine, prompts, _sample(prompts, seeds, 3))
    assert ceiling >= 0.95
    assert three <= ceiling - 0.25


def test_exact_data_samples_read_correctly():
    prompts = make_text_prompts(seed=11, n=12)
    table = MixtureTable([text_mixture(p) for p in prompts], dtype=torch.float64)
    x0 = table.sample_data(torch.arange(len(prompts)), torch.Generator().manual_seed(1))
    assert _accuracy(load_engine("rapidocr"), prompts, x0) >= 11 / 12


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract binary not installed (apt-get install -y tesseract-ocr)")
def test_tesseract_reads_the_many_step_ceiling(world_batch):
    prompts, seeds = world_batch
    prompts, seeds = prompts[::2], seeds[::2]
    assert _accuracy(load_engine("tesseract"), prompts, _sample(prompts, seeds, 200)) >= 0.9
