"""What every study figure shares: one colour, marker and line style per policy, bands and
grouped bars that keep equal series visible, the legend outside the data, and a caption.

Why one module: a reader compares figures side by side, so a controller must look the same in
every one of them (reproduce, rl-study, dacs-study, training curves, diagnose), and a caption
must say what each point averages and over which seeds, computed from what was plotted. The
palette is a table keyed by name (the reference controllers, the DACS readers, chat-model
and SB3 agents), so adding a figure never reshuffles colours; a name outside it gets a colour
from a digest of the name, stable across runs and processes.
Figures use the Agg canvas directly (no pyplot state), so they are safe in headless and
threaded runs.
"""

from __future__ import annotations

import textwrap
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagym.controllers.dacs.readers import DACS_CONTROLLERS
from diagym.controllers.workflow.parameters import CONTROLLER_NAMES

# Chat-model and SB3 agents, after the programmed controllers in the palette's order.
AGENT_NAMES = ("llm", "maskable-ppo", "recurrent-ppo", "ppo", "a2c", "dqn")
PALETTE_ORDER = (*CONTROLLER_NAMES, *DACS_CONTROLLERS, *AGENT_NAMES)
# The PNG text key a figure's title is saved under (the PNG standard's own keyword).
TITLE_KEY = "Title"

# One colour per name, chosen so that the controllers that share a figure (a grid's 4-8, a
# DACS phase's arms, rl-study's agents and references) are far apart; tab10 for seed 003's
# primary controllers.
COLOURS = {
    "exact": "#1f77b4", "cache-2": "#ff7f0e", "cache-4": "#2ca02c", "scan-1": "#d62728",
    "scan-2": "#9467bd", "scan-4": "#8c564b", "cache-2+scan-4": "#e377c2",
    "random-schedule": "#7f7f7f", "uniform-candidate": "#bcbd22", "next-use-2": "#17becf",
    "residue-8": "#875692", "precomputed-plan": "#f3c300", "stale-8": "#000000",
    "indexed": "#008856", "sham-check-4": "#f38400", "fixed-check-4": "#dcd300",
    "eliminate": "#604e97", "cache-2+eliminate": "#0067a5", "scan-1+eliminate": "#882d17",
    "dacs-reader": "#e25822", "flat-reader": "#5a9bd4", "flat-recency": "#8db600",
    "registry-only": "#b3446c", "first-agent": "#4b0082", "own-fact": "#20b2aa",
    "uniform": "#c2b280", "llm": "#2b3d26",
    "maskable-ppo": "#e68fac", "recurrent-ppo": "#654522", "ppo": "#7ac36a",
    "a2c": "#a1caf1", "dqn": "#f99379",
}
# For a name outside the table (a user's policy): picked by a digest of the name.
_SPARE_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
                  "#a6761d", "#666666")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")
_LINESTYLES = ("-", "--", "-.", ":")
# The seed papers in short, for captions and report Markdown (a clone has no copy of them;
# the README's References give them in full).
CITATIONS = {
    "000": "Lelis and Cabral-Carvalho, arXiv:2607.12216",
    "002": "Patel, arXiv:2604.07911",
    "003": "Anand, Wang and Du, arXiv:2611.03227",
}
CAPTION_GID = "caption"  # the gid of a figure's caption Text, for readers of the Figure


def _slot(name: str) -> int:
    if name in PALETTE_ORDER:
        return PALETTE_ORDER.index(name)
    return len(PALETTE_ORDER) + zlib.crc32(name.encode()) % 997


def colour(name: str) -> str:
    """The colour of a controller, agent or policy name, the same in every figure."""
    if name in COLOURS:
        return COLOURS[name]
    return _SPARE_COLOURS[zlib.crc32(name.encode()) % len(_SPARE_COLOURS)]


def style(name: str) -> dict[str, Any]:
    """Colour, marker and line style of a name, for Axes.plot."""
    slot = _slot(name)
    return {"color": colour(name), "marker": _MARKERS[slot % len(_MARKERS)],
            "linestyle": _LINESTYLES[slot % len(_LINESTYLES)]}


def new_figure(n_axes: int, width: float, height: float = 3.6) -> tuple[Any, list[Any]]:
    """A Figure on the Agg canvas with n_axes side by side."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width * n_axes, height), dpi=100)
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(1, n_axes, k + 1) for k in range(n_axes)]
    return figure, axes


def seed_text(seeds: Sequence[int] | np.ndarray) -> str:
    """"seeds 10000..10255 (256)": the seeds as runs of consecutive ids."""
    values = sorted({int(s) for s in np.asarray(seeds).ravel()})
    if not values:
        return "no seeds"
    runs, start = [], values[0]
    for previous, current in zip(values, [*values[1:], None], strict=True):
        if current != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}..{previous}")
            start = current
    word = "seed" if len(values) == 1 else "seeds"
    return f"{word} {', '.join(runs)} ({len(values)})"


def coinciding(series: Mapping[str, Sequence[float]]) -> list[list[str]]:
    """Groups of two or more names whose values are equal at every point (NaN equal NaN)."""
    groups: list[list[str]] = []
    for name, values in series.items():
        row = np.asarray(values, dtype=np.float64)
        for group in groups:
            if np.allclose(np.asarray(series[group[0]], dtype=np.float64), row, equal_nan=True,
                           atol=1e-9):
                group.append(name)
                break
        else:
            groups.append([name])
    return [g for g in groups if len(g) > 1]


def coincide_note(groups: Sequence[Sequence[str]], where: str = "") -> str:
    """"Exact and Cache-4 coincide (in chains)." for each group, or ""."""
    if not groups:
        return ""
    parts = [" and ".join(group) if len(group) < 3
             else ", ".join(group[:-1]) + " and " + group[-1] for group in groups]
    suffix = f" ({where})" if where else ""
    return "; ".join(parts) + f" coincide{suffix}, drawn side by side."


def band_lines(axis: Any, x_labels: Sequence[str],
               series: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
               labels: Mapping[str, str] | None = None) -> list[list[str]]:
    """One line per name over ordered x levels with a shaded band (low, high); lines are
    dodged sideways by a small step each, so equal lines stay visible. Returns the groups of
    names whose lines coincide (their display labels)."""
    labels = labels or {}
    positions = np.arange(len(x_labels), dtype=np.float64)
    step = 0.12 / max(len(series) - 1, 1)
    for k, (name, (values, low, high)) in enumerate(series.items()):
        shift = (k - (len(series) - 1) / 2) * step
        look = style(name)
        axis.fill_between(positions + shift, low, high, color=look["color"], alpha=0.12,
                          linewidth=0)
        axis.plot(positions + shift, values, markersize=4, linewidth=1.3,
                  label=labels.get(name, name), **look)
    axis.set_xticks(positions)
    axis.set_xticklabels(list(x_labels), fontsize=8)
    return coinciding({labels.get(n, n): v[0] for n, v in series.items()})


def grouped_bars(axis: Any, x_labels: Sequence[str],
                 series: Mapping[str, tuple[Sequence[float], Sequence[float] | None,
                                            Sequence[float] | None]],
                 labels: Mapping[str, str] | None = None, rotate: bool = False,
                 looks: Mapping[str, dict[str, Any]] | None = None) -> None:
    """Bars per x level, one per name side by side, with (low, high) error bars (None: no
    interval): for categorical or crossed levels, where a line between levels would mean
    nothing. `looks` overrides a series' bar keywords (colour, hatch); by default its
    colour is the palette's for its name."""
    labels, looks = labels or {}, looks or {}
    positions = np.arange(len(x_labels), dtype=np.float64)
    width = 0.8 / max(len(series), 1)
    for k, (name, (values, low, high)) in enumerate(series.items()):
        values = np.asarray(values, dtype=np.float64)
        errors = None
        if low is not None and high is not None:
            errors = np.clip(np.vstack([values - np.asarray(low), np.asarray(high) - values]),
                             0.0, None)  # rounding can put an edge a hair past the estimate
        look = {"color": colour(name), **looks.get(name, {})}
        where = positions + (k - (len(series) - 1) / 2) * width
        axis.bar(where, values, width=width * 0.92, label=labels.get(name, name), yerr=errors,
                 edgecolor="white", linewidth=0.3,
                 error_kw={"elinewidth": 0.7, "capsize": 1.5, "ecolor": "#333333"}, **look)
        for x in where[values == 0]:  # a zero bar has no height: say 0, unlike a missing one
            axis.annotate("0", (x, 0), xytext=(0, 2), textcoords="offset points",
                          ha="center", va="bottom", fontsize=5, color=look["color"])
    axis.set_xticks(positions)
    axis.set_xticklabels(list(x_labels), fontsize=7, rotation=30 if rotate else 0,
                         ha="right" if rotate else "center")


def legend_outside(figure: Any, axis: Any, title: str | None = None) -> Any:
    """The legend of `axis`'s handles, to the right of the rightmost axes (outside every
    axes); `save` keeps it in the picture."""
    handles, names = axis.get_legend_handles_labels()
    right = max(a.get_position().x1 for a in figure.axes)
    top = max(a.get_position().y1 for a in figure.axes)
    return figure.legend(handles, names, loc="upper left", bbox_to_anchor=(right + 0.01, top),
                         fontsize=7, title=title, title_fontsize=7, frameon=False)


def add_caption(figure: Any, text: str, width: int = 130) -> Any:
    """The caption under the axes, wrapped; a Text whose gid is CAPTION_GID."""
    wrapped = "\n".join(textwrap.fill(part, width) for part in text.split("\n"))
    return figure.text(0.01, -0.02, wrapped, ha="left", va="top", fontsize=7, gid=CAPTION_GID,
                       wrap=False)


def caption_of(figure: Any) -> str:
    """The caption text of a figure made here ("" when it has none), unwrapped."""
    texts = [t.get_text() for t in figure.texts if t.get_gid() == CAPTION_GID]
    return " ".join(" ".join(texts).split())


def percent_axis(axis: Any, label: str = "success (%)") -> None:
    axis.set_ylim(-3, 103)
    axis.set_yticks([0, 25, 50, 75, 100])
    axis.set_ylabel(label, fontsize=8)
    axis.tick_params(labelsize=7)
    axis.grid(axis="y", linewidth=0.4, alpha=0.5)


def place_caption(figure: Any, axes_boxes: Sequence[Any] | None = None) -> None:
    """Move the caption just under the lowest axes decoration (tick labels, x label), so a
    caption never covers rotated labels. `axes_boxes`: the axes' tight boxes in pixels when
    the caller measured them already (each measure lays every tick label out)."""
    captions = [t for t in figure.texts if t.get_gid() == CAPTION_GID]
    if not captions:
        return
    if axes_boxes is None:
        renderer = figure.canvas.get_renderer()
        axes_boxes = [axis.get_tightbbox(renderer) for axis in figure.axes]
    lowest = min(box.y0 for box in axes_boxes)
    y = figure.transFigure.inverted().transform((0.0, lowest))[1]
    for text in captions:
        text.set_y(y - 0.03)


PAD_INCHES = 0.1  # white space kept around what the figure holds


def _tight_box(figure: Any) -> Any:
    """The caption placed and the figure's tight box in inches, with each axes measured once:
    Figure.get_tightbbox's union (its non-axes artists and its visible axes), where calling
    it after place_caption would lay every axes out a second time."""
    from matplotlib.transforms import Bbox, TransformedBbox

    renderer = figure.canvas.get_renderer()
    axes_boxes = [axis.get_tightbbox(renderer) for axis in figure.axes if axis.get_visible()]
    place_caption(figure, axes_boxes)
    others = [artist.get_tightbbox(renderer) for artist in figure.get_children()
              if artist not in figure.axes and artist.get_visible() and artist.get_in_layout()]
    boxes = [box for box in (*others, *axes_boxes)
             if box is not None and np.isfinite(box.width) and np.isfinite(box.height)
             and (box.width != 0 or box.height != 0)]
    if not boxes:
        return figure.bbox_inches
    return TransformedBbox(Bbox.union(boxes), figure.dpi_scale_trans.inverted())


def name_figure(figure: Any, text: str) -> Any:
    """Name what the figure shows, in a line: `save` writes it into the PNG (TITLE_KEY), and
    `diagym report` heads the figure with it rather than with its file name."""
    figure.set_label(text)
    return figure


def save(figure: Any, path: str | Path) -> Path:
    """PNG with the legend and caption outside the axes kept in the picture, and the name
    `name_figure` gave it in its metadata.

    The bounding box is measured once, with the renderer the caption was placed with, and
    given to savefig: `bbox_inches="tight"` would lay the whole figure out a second time to
    measure it (every text's layout again), the larger part of a study's plotting time."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bbox = _tight_box(figure).padded(PAD_INCHES)
    label = figure.get_label()
    figure.savefig(path, bbox_inches=bbox, metadata={TITLE_KEY: label} if label else None,
                   pil_kwargs={"compress_level": 1})  # fast PNG encoding
    return path


def curve_figure(rows: Sequence[Mapping[str, float]], agent: str, title: str,
                 eval_seeds: Sequence[int] | None, trials: int | None) -> Any:
    """A training curve: held-out success (%) against training steps in the agent's colour,
    with a Wilson 95% band when each checkpoint's rate is over `trials` episodes (None: the
    rate is over decisions of unknown count, so no band)."""
    from diagym.analysis.stats import wilson_interval

    figure, (axis,) = new_figure(1, 6.0)
    steps = np.array([r["steps"] for r in rows], dtype=np.float64)
    rate = np.array([r["success"] for r in rows], dtype=np.float64)
    look = style(agent)
    if trials and len(rows):
        low, high = wilson_interval(np.clip(np.round(rate * trials), 0, trials), trials)
        axis.fill_between(steps, 100 * low, 100 * high, color=look["color"], alpha=0.15,
                          linewidth=0, label="Wilson 95%")
    axis.plot(steps, 100 * rate, markersize=4, label=agent, **look)
    axis.set_xlabel("training steps", fontsize=8)
    percent_axis(axis, "held-out success (%)")
    axis.set_title(title, fontsize=9)
    name_figure(figure, f"Training curve: {title}")
    legend_outside(figure, axis)
    where = seed_text(eval_seeds) if eval_seeds is not None else "the held-out seeds"
    band = ("the band is the Wilson 95% interval over those episodes" if trials
            else "no interval: the rate is over decisions")
    add_caption(figure, f"Each point: {agent} at that checkpoint evaluated on {where}, the "
                        f"same seeds at every checkpoint; {band}.", width=90)
    return figure
