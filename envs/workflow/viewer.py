"""The rgb_array picture of a workflow env: what `render_mode="rgb_array"` returns.

A viewer in Jumanji's manner: one object owns a matplotlib figure (the Agg canvas, so no
display is needed) and turns the public state into an (H, W, 3) uint8 frame of fixed size,
which is what SB3's make_vec_env, gymnasium's RecordVideo and gymnasium.utils.play expect.
It draws from the same inputs as the ansi text (spec, public task, observation), so a frame
shows what an agent can know and nothing of the hidden registers.

The picture: the operation graph, one column per prerequisite depth, each operation coloured
completed / ready / blocked and labelled with its query and update registers; the eight
registers (active ones bold, "?" while not shown, the last updated one outlined); a status
line with progress, calls, errors against the allowance, the last update and the last failure
(in red, with a red frame, when the last call failed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from diagym.envs.workflow.layout import FAILURE_NAMES, WorkflowTask
from diagym.envs.workflow.params import WorkflowParams

WIDTH_PX, HEIGHT_PX, DPI = 640, 400, 100  # even sides, as video encoders want
COLUMN_ROWS = 8  # a depth level with more operations wraps into further columns
COLOURS = {"completed": "#43a047", "ready": "#fbc02d", "blocked": "#cfd8dc"}
FAILURE_COLOUR = "#d32f2f"


def depth_levels(prereq: np.ndarray) -> np.ndarray:
    """Each operation's longest prerequisite chain below it (0 for an operation with none)."""
    n = prereq.shape[0]
    levels = np.zeros(n, dtype=np.int64)
    for _ in range(n):  # relax until stable; a chain is at most N long
        deeper = np.where(prereq.any(axis=1),
                          (np.where(prereq, levels[None, :], -1)).max(axis=1) + 1, 0)
        if np.array_equal(deeper, levels):
            break
        levels = deeper
    return levels


def node_positions(prereq: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(x, y, columns, rows): depth levels left to right, a level of more than COLUMN_ROWS
    operations wrapped into several columns, each column centred on y = 0."""
    levels = depth_levels(prereq)
    x = np.zeros(levels.size)
    y = np.zeros(levels.size)
    column, tallest = 0, 1
    for level in np.unique(levels):
        members = np.flatnonzero(levels == level)
        for start in range(0, members.size, COLUMN_ROWS):
            chunk = members[start:start + COLUMN_ROWS]
            x[chunk] = column
            y[chunk] = (chunk.size - 1) / 2 - np.arange(chunk.size)
            tallest = max(tallest, chunk.size)
            column += 1
    return x, y, column, tallest


def operation_status(prereq: np.ndarray, completed: np.ndarray) -> list[str]:
    """"completed", "ready" (every prerequisite done) or "blocked", per operation."""
    done = completed.astype(bool)
    waiting = (prereq & ~done[None, :]).any(axis=1)
    return ["completed" if d else "blocked" if w else "ready"
            for d, w in zip(done, waiting, strict=True)]


class WorkflowViewer:
    """Draws workflow states into one reused figure; close() frees it."""

    def __init__(self) -> None:
        self._figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
        self._canvas = FigureCanvasAgg(self._figure)

    def render(self, spec: WorkflowParams, task: WorkflowTask,
               observation: Mapping[str, Any]) -> np.ndarray:
        """The state as an (HEIGHT_PX, WIDTH_PX, 3) uint8 array."""
        figure = self._figure
        figure.clear()
        graph = figure.add_axes((0.02, 0.02, 0.70, 0.84))
        registers = figure.add_axes((0.75, 0.02, 0.23, 0.84))
        failure = FAILURE_NAMES[int(observation["failure"])]
        self._draw_graph(graph, spec, task, observation)
        self._draw_registers(registers, spec, observation)
        figure.text(0.02, 0.93, self._status(spec, observation), fontsize=9,
                    color=FAILURE_COLOUR if failure else "black", va="center")
        if failure:
            figure.patches.append(Rectangle((0.003, 0.003), 0.994, 0.994, fill=False,
                                            edgecolor=FAILURE_COLOUR, linewidth=4,
                                            transform=figure.transFigure, figure=figure))
        self._canvas.draw()
        return np.asarray(self._canvas.buffer_rgba())[:, :, :3].copy()

    def close(self) -> None:
        self._figure.clear()

    @staticmethod
    def _status(spec: WorkflowParams, observation: Mapping[str, Any]) -> str:
        done = int(np.count_nonzero(observation["completed"]))
        reg, delta = (int(x) for x in observation["last_update"])
        last = f"x[{reg}] += {delta}" if reg >= 0 else "none"
        failure = FAILURE_NAMES[int(observation["failure"])]
        shown = "shown" if observation["registers"][0] >= 0 else "hidden"
        return (f"completed {done}/{spec.n_ops}   errors {int(observation['errors'])}"
                f"/{spec.error_allowance}   registers {shown}   last update {last}   "
                f"failure {failure or 'none'}")

    @staticmethod
    def _draw_graph(axes: Any, spec: WorkflowParams, task: WorkflowTask,
                    observation: Mapping[str, Any]) -> None:
        n = spec.n_ops
        x, y, columns, tallest = node_positions(task.prereq)
        edges = [((x[u], y[u]), (x[v], y[v])) for v, u in zip(*np.nonzero(task.prereq),
                                                              strict=True)]
        axes.add_collection(LineCollection(edges, colors="#90a4ae", linewidths=0.8, zorder=1))
        status = operation_status(task.prereq, observation["completed"])
        # Font size in points; a node is 3.2 fonts wide and must fit its row and its column.
        size = max(2.0, min(9.0, 64.0 / tallest, 70.0 / columns))
        axes.scatter(x, y, s=(size * 3.2) ** 2, c=[COLOURS[s] for s in status],
                     edgecolors="#37474f", linewidths=0.8, zorder=2, marker="s")
        for v in range(n):  # offsets in points, so labels stay inside their node at any N
            axes.annotate(str(v), (x[v], y[v]), xytext=(0, size * 0.45),
                          textcoords="offset points", ha="center", va="center", fontsize=size,
                          fontweight="bold", zorder=3)
            axes.annotate(f"q{int(task.query[v])} u{int(task.update[v])}", (x[v], y[v]),
                          xytext=(0, -size * 0.85), textcoords="offset points", ha="center",
                          va="center", fontsize=size * 0.6, color="#37474f", zorder=3)
        axes.set_xlim(-0.6, max(1, columns - 1) + 0.6)
        axes.set_ylim(-(tallest - 1) / 2 - 0.6, (tallest - 1) / 2 + 0.6)
        axes.set_axis_off()
        handles = [Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="#37474f")
                   for c in COLOURS.values()]
        axes.legend(handles, list(COLOURS), loc="upper center", bbox_to_anchor=(0.5, 1.06),
                    ncol=3, fontsize=7, frameon=False)

    @staticmethod
    def _draw_registers(axes: Any, spec: WorkflowParams, observation: Mapping[str, Any]) -> None:
        values = observation["registers"]
        updated = int(observation["last_update"][0])
        for r in range(8):
            active = r < spec.width
            top = 7 - r
            axes.add_patch(Rectangle((0.0, top + 0.1), 1.0, 0.8,
                                     facecolor="#e3f2fd" if active else "#f5f5f5",
                                     edgecolor="#1565c0" if r == updated else "#b0bec5",
                                     linewidth=2.5 if r == updated else 0.8))
            shown = str(int(values[r])) if values[r] >= 0 else "?"
            axes.text(0.08, top + 0.5, f"x[{r}]", va="center", fontsize=8,
                      color="black" if active else "#9e9e9e",
                      fontweight="bold" if active else "normal")
            axes.text(0.8, top + 0.5, shown, va="center", ha="center", fontsize=10,
                      color="black" if active else "#9e9e9e")
        axes.set_xlim(-0.05, 1.05)
        axes.set_ylim(0, 8.3)
        axes.set_title("registers", fontsize=8, pad=2)
        axes.set_axis_off()
