"""`diagym run --json` on DACSSteering states accuracy, its headline, and no success (its
episodes have none), and docs/DACS.md states the env's real window default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from diagym.analysis.cli import main
from diagym.envs.dacs.params import DacsParams


def test_a_dacs_run_reports_accuracy_and_no_success(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--env", "DACSSteering-v0", "--policy", "dacs-reader", "--episodes",
                 "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["accuracy"] == 1.0
    assert "success" not in summary and "success_ci" not in summary


def test_the_docs_state_the_window_default() -> None:
    text = (Path(__file__).parents[2] / "docs" / "DACS.md").read_text()
    row = re.search(r"^\| `window` \|.*\((\w+)\) \|$", text, flags=re.M)
    assert row is not None and row.group(1) == str(DacsParams().window)
