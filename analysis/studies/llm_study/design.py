"""Seed 003's language-model designs (sections 9.1 and 10) as data.

- `local`: the complete 2^5 factorial of section 10: family (chains, barriers), depth (2, 8),
  candidates (2, 8), width (1, 8) and feedback (history, snapshot), N = 8, every cell on the
  same task seeds (8 by default: 256 episodes).
- `fractional`: the 2^(4-1) resolution-IV half fraction of section 9.1 on chains: depth (2, 8),
  candidates (2, 8), width (1, 8), feedback = depth x candidates x width (defining relation
  I = ABCD), two seeds by default (16 episodes).
- `reasoning`: the fractional design's cells crossed with reasoning budget levels, compared
  at matched total usage (reasoning.py; docs/REASONING.md), two seeds by default.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from diagym.envs.workflow.params import WorkflowParams

# (name, spec field, low, high); feedback is "high" for snapshot, as the paper's contrast is
# snapshot minus history.
FACTORS = (
    ("family", "family", "chains", "barriers"),
    ("depth", "depth", 2, 8),
    ("branching", "candidates", 2, 8),
    ("width", "width", 1, 8),
    ("observation", "snapshot_period", 0, 1),
)
DESIGNS = ("local", "fractional", "reasoning")
# task seeds per cell, as in the paper; reasoning: per cell and budget level
DEFAULT_SEEDS = {"local": 8, "fractional": 2, "reasoning": 2}


@dataclass(frozen=True)
class Cell:
    """One condition of a design: its factor levels (0 low, 1 high) and task spec."""

    levels: dict[str, int]
    spec: WorkflowParams


def design_cells(design: str) -> list[Cell]:
    """The conditions of a design, in standard order (reasoning: its structural cells, the
    fractional design's; each is played at every budget level)."""
    if design == "reasoning":
        design = "fractional"
    if design == "local":
        factors = FACTORS
        rows = list(itertools.product((0, 1), repeat=5))
    elif design == "fractional":
        factors = FACTORS[1:]
        rows = [(a, b, c, a ^ b ^ c) for a, b, c in itertools.product((0, 1), repeat=3)]
    else:
        raise ValueError(f"design must be one of {' | '.join(DESIGNS)}; got {design!r}")
    cells = []
    for row in rows:
        kwargs: dict[str, Any] = {"n_ops": 8, "family": "chains"}
        levels = {}
        for (name, field, low, high), level in zip(factors, row, strict=True):
            kwargs[field] = high if level else low
            levels[name] = level
        cells.append(Cell(levels, WorkflowParams(**kwargs)))
    return cells
