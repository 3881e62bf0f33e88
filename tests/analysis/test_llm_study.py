"""Seed 003's language-model designs as data, and a whole study against a scripted server."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from analysis.cli import main
from analysis.studies.llm_study.design import design_cells
from tests.llm_fake_server import FakeServer, Reply, scripted


def test_local_design_is_the_complete_2_to_the_5_factorial() -> None:
    cells = design_cells("local")
    assert len(cells) == 32
    assert {tuple(c.levels.values()) for c in cells} == set(itertools.product((0, 1), repeat=5))
    assert {c.spec.n_ops for c in cells} == {8}
    assert {(c.spec.family, c.spec.depth, c.spec.candidates, c.spec.width,
             c.spec.snapshot_period) for c in cells} == set(itertools.product(
                 ("chains", "barriers"), (2, 8), (2, 8), (1, 8), (0, 1)))


def test_fractional_design_is_a_resolution_iv_half_fraction() -> None:
    cells = design_cells("fractional")
    rows = [tuple(c.levels[f] for f in ("depth", "branching", "width", "observation"))
            for c in cells]
    assert len(set(rows)) == 8 and all(c.spec.family == "chains" for c in cells)
    assert all(d == a ^ b ^ c for a, b, c, d in rows)  # defining relation I = ABCD
    for i, j in itertools.combinations(range(4), 2):  # every pair of factors balanced
        pairs = [(r[i], r[j]) for r in rows]
        assert all(pairs.count(p) == 2 for p in itertools.product((0, 1), repeat=2))


def test_unknown_design_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="design must be one of local | fractional; got 'x'"):
        design_cells("x")


def test_fractional_study_runs_and_reports_table_8(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    answers = [Reply(content="no idea"), Reply(content='{"operation": 0, "candidate": 0}')]
    log = tmp_path / "study.jsonl"
    with FakeServer(scripted([], answers[1])) as server:
        argv = ["llm-study", "--design", "fractional", "--base-url", server.base_url,
                "--model", "fake", "--log", str(log), "--json"]
        assert main(argv) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["episodes"] == 16
        assert [c["factor"] for c in summary["contrasts"]] == [
            "depth", "branching", "width", "observation"]
        assert all(c["n_per_level"] == 8 for c in summary["contrasts"])
        assert summary["schema_valid_rate"] == 1.0
        # Rerunning with --resume plays nothing again.
        requests = len(server.requests)
        assert main([*argv, "--resume"]) == 0
        assert len(server.requests) == requests
        assert json.loads(capsys.readouterr().out)["episodes"] == 16
    episode_lines = [x for x in log.read_text().splitlines() if '"type": "episode"' in x]
    assert len(episode_lines) == 16
