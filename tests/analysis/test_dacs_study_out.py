"""`diagym dacs-study --out DIR` writes the table it prints: DIR/dacs_study.md is the printed
table, DIR/dacs_study.csv holds the same rows at full precision, DIR/provenance.json says
what made them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from diagym.analysis.cli.main import main


def _table(text: str) -> list[list[str]]:
    """The body rows of the Markdown table in text, as cells."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_dacs_study_out_writes_the_printed_table(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["dacs-study", "--episodes", "2", "--phases", "agents", "density",
            "--out", str(tmp_path)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    shown = _table(printed)
    assert len(shown) == (3 + 2) * 5  # cells x reference arms

    markdown = (tmp_path / "dacs_study.md").read_text()
    table_text = printed[:printed.index("\ntable: ")]
    assert markdown == table_text + "\n"

    with (tmp_path / "dacs_study.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(shown)
    for cells, row in zip(shown, rows, strict=True):
        phase, cell, policy, window, accuracy, contamination, invalid, mean, p95, ratio = cells
        assert [row["phase"], row["cell"], row["policy"], row["window"], row["invalid"]] == [
            phase, cell, policy, window, invalid]
        assert abs(float(row["accuracy"]) - float(accuracy)) <= 5e-4
        assert abs(float(row["contamination"]) - float(contamination)) <= 5e-4
        assert abs(float(row["mean_tokens"]) - float(mean)) <= 0.5
        assert abs(float(row["p95_tokens"]) - float(p95)) <= 0.5
        if ratio:
            assert abs(float(row["efficiency"]) - float(ratio.rstrip("x"))) <= 5e-3
        else:
            assert row["efficiency"] == ""
        n_agents, decisions = (int(part.split("=")[1]) for part in cell.split()[1:3])
        assert int(row["decisions"]) == 2 * n_agents * decisions

    provenance = json.loads((tmp_path / "provenance.json").read_text())
    assert provenance["run"]["command"] == "dacs-study"
    assert provenance["run"]["phases"] == ["agents", "density"]
    assert provenance["run"]["scenario_seeds"] == [0, 1]


def test_dacs_study_json_writes_no_table(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dacs-study", "--episodes", "1", "--phases", "agents", "--json",
                 "--out", str(tmp_path / "out")]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3 * 5
    assert not (tmp_path / "out").exists()
