"""`plotting.save` lays a figure out once: the bounding box it crops to is measured with the
renderer the caption was placed with, and is the box `bbox_inches="tight"` finds by laying
the figure out a second time (two paths, one picture size)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from PIL import Image

from diagym.analysis.plotting import PAD_INCHES, add_caption, legend_outside, new_figure, save


def _figure() -> Figure:
    figure, (left, right) = new_figure(2, 4.0)
    for axis in (left, right):
        axis.plot([0, 1, 2], [3, 1, 2], label="cache-2")
        axis.plot([0, 1, 2], [1, 2, 3], label="scan-4")
        axis.set_xticks([0, 1, 2], ["a long rotated label", "b", "c"], rotation=45)
        axis.set_xlabel("condition")
    legend_outside(figure, right, title="policy")
    add_caption(figure, "A caption long enough to wrap under the rotated tick labels " * 3)
    return figure


def test_save_lays_the_figure_out_once(tmp_path: Path, monkeypatch) -> None:
    draws = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: (draws.append(1),
                                                                 real(self, renderer))[1])
    save(_figure(), tmp_path / "one.png")
    assert len(draws) == 1


def test_the_measured_box_is_the_tight_box(tmp_path: Path) -> None:
    ours = Image.open(save(_figure(), tmp_path / "ours.png")).size
    tight = _figure()
    from diagym.analysis.plotting import place_caption

    place_caption(tight)
    tight.savefig(tmp_path / "tight.png", bbox_inches="tight", pad_inches=PAD_INCHES)
    theirs = Image.open(tmp_path / "tight.png").size
    assert abs(ours[0] - theirs[0]) <= 1 and abs(ours[1] - theirs[1]) <= 1, (ours, theirs)


def test_the_box_measured_once_is_matplotlibs_tight_box() -> None:
    from diagym.analysis.plotting import _tight_box, place_caption

    ours = _tight_box(_figure()).bounds
    theirs = _figure()
    place_caption(theirs)
    assert ours == theirs.get_tightbbox(theirs.canvas.get_renderer()).bounds
