"""The rgb_array picture of a DACSSteering env: what `render_mode="rgb_array"` returns.

One object owns a matplotlib figure on the Agg canvas (no display needed) and turns the env's
public state into an (H, W, 3) uint8 frame of fixed size, which is what SB3's make_vec_env,
gymnasium's RecordVideo and gymnasium.utils.play expect. It shows what the orchestrator is
shown and how it has done, never the right option of the pending request.

The picture, to make the DACS question visible at a glance: one row per agent with the
tokens its block occupies in the current window (a full context, a registry entry, a
compressed entry, or nothing when dropped), the part cut by the budget hatched, the budget
as a dashed line; the requester's row highlighted, the agent a cascade request depends on
outlined. A side panel holds the pending request with its four options and the last outcome;
the top line the mode (flat / dacs / registry / focus), the decision count and the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from diagym.envs.dacs.window import Window

WIDTH_PX, HEIGHT_PX, DPI = 640, 400, 100  # even sides, as video encoders want
COLOURS = {"full": "#1e88e5", "registry": "#8bc34a", "compressed": "#c5e1a5",
           "dropped": "#eeeeee"}
REQUESTER = "#fff59d"
WRONG, RIGHT = "#d32f2f", "#2e7d32"


@dataclass(frozen=True)
class Frame:
    """What one picture shows (the env fills it from its public state).

    mode: "flat" | "dacs" | "registry" | "focus"; budget: the window's budget in tokens
    (None: none); requester / depends_on / focused: agent indices (-1: none; requester -1
    once the episode has ended); options: the pending request's option texts (empty once the
    episode has ended); last: the last step's outcome ("correct", "wrong", "contaminated",
    "focus on agent-j") or None; correct / decisions: the score so far; total: requests in
    the episode."""

    n_agents: int
    window: Window
    mode: str
    budget: int | None
    requester: int
    depends_on: int
    focused: int
    key: str
    options: tuple[str, ...]
    last: str | None
    correct: int
    decisions: int
    total: int


class DacsViewer:
    """Draws DACS states into one reused figure; close() frees it."""

    def __init__(self) -> None:
        self._figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
        self._canvas = FigureCanvasAgg(self._figure)

    def render(self, frame: Frame) -> np.ndarray:
        """The state as a (HEIGHT_PX, WIDTH_PX, 3) uint8 array."""
        figure = self._figure
        figure.clear()
        bars = figure.add_axes((0.10, 0.10, 0.52, 0.76))
        panel = figure.add_axes((0.65, 0.02, 0.34, 0.84))
        self._draw_blocks(bars, frame)
        self._draw_panel(panel, frame)
        budget = "none" if frame.budget is None else str(frame.budget)
        figure.text(0.02, 0.94,
                    f"DACSSteering   window {frame.mode}   budget {budget}   "
                    f"decision {min(frame.decisions + 1, frame.total)}/{frame.total}   "
                    f"window tokens {frame.window.tokens}   correct "
                    f"{frame.correct}/{frame.decisions}", fontsize=8.5, va="center")
        self._canvas.draw()
        return np.asarray(self._canvas.buffer_rgba())[:, :, :3].copy()

    def close(self) -> None:
        self._figure.clear()

    @staticmethod
    def _draw_blocks(axes: Any, frame: Frame) -> None:
        window = frame.window
        spans = {span.agent: span for span in window.blocks}
        scale = max([window.agent_tokens, 1, *(s.end for s in spans.values())])
        limit = None if frame.budget is None else max(frame.budget - window.request_tokens, 0)
        if limit is not None:
            scale = max(scale, limit)
        for agent in range(frame.n_agents):
            row = frame.n_agents - 1 - agent
            if agent == frame.requester:
                axes.add_patch(Rectangle((-0.02 * scale, row - 0.45), 1.06 * scale, 0.9,
                                         facecolor=REQUESTER, edgecolor="none", zorder=0))
            span = spans.get(agent)
            if span is None:
                kind = "dropped"
            elif agent in window.compressed:
                kind = "compressed"
            else:
                kind = span.kind
            start, end = (span.start, span.end) if span is not None else (0, 0)
            kept = min(max(window.kept - start, 0), end - start)
            axes.add_patch(Rectangle((start, row - 0.3), kept, 0.6, facecolor=COLOURS[kind],
                                     edgecolor="#37474f", linewidth=0.6, zorder=2))
            if kept < end - start:  # the part the budget cut
                axes.add_patch(Rectangle((start + kept, row - 0.3), end - start - kept, 0.6,
                                         facecolor="white", edgecolor=COLOURS[kind],
                                         hatch="///", linewidth=0.6, zorder=2))
            if agent == frame.depends_on:
                axes.add_patch(Rectangle((-0.01 * scale, row - 0.4), 1.04 * scale, 0.8,
                                         fill=False, edgecolor=WRONG, linestyle=":",
                                         linewidth=1.2, zorder=3))
            label = f"agent-{agent}" + (" *" if agent == frame.focused else "")
            axes.text(-0.03 * scale, row, label, ha="right", va="center", fontsize=7,
                      fontweight="bold" if agent == frame.requester else "normal")
            axes.text(end + 0.01 * scale, row, "dropped" if span is None else str(end - start),
                      va="center", fontsize=6, color="#455a64", zorder=3)
        if limit is not None:
            axes.axvline(limit, color="#616161", linestyle="--", linewidth=1)
        axes.set_xlim(-0.02 * scale, 1.1 * scale)
        axes.set_ylim(-0.7, frame.n_agents - 0.3)
        axes.set_yticks([])
        axes.tick_params(axis="x", labelsize=6)
        axes.set_xlabel("tokens in the window (dashed: budget left by the request)",
                        fontsize=7)
        for side in ("top", "right", "left"):
            axes.spines[side].set_visible(False)
        handles = [Patch(facecolor=c, edgecolor="#37474f") for c in COLOURS.values()]
        axes.legend(handles, list(COLOURS), loc="lower center", bbox_to_anchor=(0.5, 1.0),
                    ncol=4, fontsize=6.5, frameon=False)

    @staticmethod
    def _draw_panel(axes: Any, frame: Frame) -> None:
        axes.set_axis_off()
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        if frame.options:
            who = f"agent-{frame.requester}"
            axes.text(0.0, 0.97, f"{who} asks:", fontsize=8, fontweight="bold", va="top")
            axes.text(0.0, 0.91, frame.key[:34], fontsize=7.5, va="top", family="monospace")
            if frame.depends_on >= 0:
                axes.text(0.0, 0.84, f"must match agent-{frame.depends_on}'s decision",
                          fontsize=7, va="top", color=WRONG)
            for i, option in enumerate(frame.options):
                axes.text(0.04, 0.76 - 0.08 * i, f"{i}) {option}"[:42], fontsize=7.5, va="top",
                          family="monospace")
        else:
            accuracy = frame.correct / frame.decisions if frame.decisions else 0.0
            axes.text(0.0, 0.97, "episode over", fontsize=8, fontweight="bold", va="top")
            axes.text(0.0, 0.87, f"accuracy {accuracy:.3f}", fontsize=8, va="top")
        last = frame.last or "none"
        colour = RIGHT if last == "correct" else WRONG if last in ("wrong", "contaminated") \
            else "black"
        axes.text(0.0, 0.38, "last outcome", fontsize=7, va="top", color="#616161")
        axes.text(0.0, 0.31, last, fontsize=9, va="top", color=colour, fontweight="bold")
        flags = [name for name, on in (("cut", frame.window.cut),) if on]
        if frame.window.dropped:
            flags.append(f"dropped {len(frame.window.dropped)}")
        if frame.window.compressed:
            flags.append(f"compressed {len(frame.window.compressed)}")
        axes.text(0.0, 0.15, "window: " + (", ".join(flags) or "whole"), fontsize=7,
                  va="top")
