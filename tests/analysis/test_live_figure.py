"""Seed 002's figure 4 draws exactly the rows it is given: live accuracy by judge and by
keywords and context tokens per window, beside the synthetic rows at the same N."""

from __future__ import annotations

import math

import pytest

from diagym.analysis.plotting import caption_of
from diagym.analysis.studies.dacs_live.figure import figure4
from diagym.analysis.studies.dacs_study.report import reader_rows

pytestmark = pytest.mark.timeout(120)


def live(n: int, condition: str, judge: float, keyword: float, tokens: float) -> dict:
    return {"n_agents": n, "condition": condition, "trials": 2, "decisions": 10,
            "unparseable": 2, "judge_accuracy": judge, "keyword_accuracy": keyword,
            "context_tokens": tokens}


def test_the_bars_are_the_rows_values() -> None:
    rows = [live(3, "dacs", 0.75, 0.6, 500.0), live(3, "flat", 0.5, 0.4, 1200.0),
            live(5, "dacs", 0.875, 0.7, 650.0), live(5, "flat", float("nan"), 0.3, 2100.0)]
    synthetic = reader_rows([3, 5])
    assert sorted((r["cell"].split()[0], r["window"]) for r in synthetic) == [
        ("s1", "dacs"), ("s1", "flat"), ("s2", "dacs"), ("s2", "flat")]
    figure = figure4(rows, synthetic, "readers")
    accuracy, tokens = figure.axes[0], figure.axes[1]
    heights = [p.get_height() for p in accuracy.patches]
    # bar order: the dacs series over the six groups, then the flat series
    s = {(r["cell"].split()[0], r["window"]): 100 * r["accuracy"] for r in synthetic}
    expected = [s[("s1", "dacs")], 75.0, 60.0, s[("s2", "dacs")], 87.5, 70.0,
                s[("s1", "flat")], 50.0, 40.0, s[("s2", "flat")], math.nan, 30.0]
    assert heights == pytest.approx(expected, nan_ok=True)
    token_heights = [p.get_height() for p in tokens.patches]
    t = {(r["cell"].split()[0], r["window"]): r["mean_tokens"] for r in synthetic}
    assert token_heights == pytest.approx([t[("s1", "dacs")], 500.0, t[("s2", "dacs")], 650.0,
                                           t[("s1", "flat")], 1200.0, t[("s2", "flat")],
                                           2100.0])
    assert "paired trials per condition: 2" in caption_of(figure)
