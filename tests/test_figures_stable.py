"""Figures are byte-stable for identical inputs: one fixed style whatever the user's matplotlib settings,
no version in the PNG, and a figure with the same pixels as the file already there leaves it untouched."""

import matplotlib
from PIL import Image

from jsbench.report.plots import plot_training_curves

LOGS = {"js": [{"iteration": i, "reward": 0.5 + 0.01 * i, "shrinkage": 0.3} for i in range(30)],
        "rloo": [{"iteration": i, "reward": 0.5 + 0.01 * i, "shrinkage": None} for i in range(30)]}  # overlapping


def test_the_same_inputs_give_the_same_bytes_whatever_the_user_style(tmp_path, monkeypatch):
    a = plot_training_curves(LOGS, tmp_path / "a.png", title="analytic · 3 steps · training").read_bytes()
    monkeypatch.setitem(matplotlib.rcParams, "lines.linewidth", 5.0)  # what a user matplotlibrc or style sets
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["serif"])
    monkeypatch.setitem(matplotlib.rcParams, "text.hinting", "none")
    b = plot_training_curves(LOGS, tmp_path / "b.png", title="analytic · 3 steps · training").read_bytes()
    assert a == b
    assert "Software" not in Image.open(tmp_path / "a.png").info  # no matplotlib version in the file


def test_a_figure_with_the_same_pixels_is_not_rewritten(tmp_path):
    path = plot_training_curves(LOGS, tmp_path / "t.png")
    Image.open(path).save(path, optimize=True, compress_level=1)  # other bytes (another encoder), same pixels
    before = path.read_bytes()
    plot_training_curves(LOGS, path)
    assert path.read_bytes() == before
    plot_training_curves({"js": LOGS["js"]}, path)  # another figure: rewritten
    assert path.read_bytes() != before


def test_a_few_pixels_one_level_off_are_the_same_figure_more_are_not():
    import numpy as np

    from jsbench.report.plots import same_figure

    a = np.full((100, 100, 4), 200, dtype=np.uint8)
    b = a.copy()
    b[0, :10, 0] += 1  # 10 of 10,000 pixels by one level: float noise from another CPU
    assert same_figure(a, b) and same_figure(b, a)
    c = a.copy()
    c[0, :11, 1] -= 1  # 11 pixels: more than 0.1 %
    assert not same_figure(a, c)
    d = a.copy()
    d[5, 5, 2] += 2  # one pixel, two levels: a visible change
    assert not same_figure(a, d)
    assert not same_figure(a, a[:, :99])  # another size


def test_every_budgets_image_grid_keeps_the_ceiling_row():
    from types import SimpleNamespace as Source

    from jsbench.report.compare import with_ceiling

    default3, ceiling, default5 = Source(spec="default"), Source(spec="ceiling"), Source(spec="default")
    got = with_ceiling({3: [default3, ceiling], 5: [default5]})
    assert got == {3: [default3, ceiling], 5: [default5, ceiling]}
