"""Seed 003's language-model designs as data, and a whole study against a scripted server."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
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
        assert summary["response_format"] == "auto" and summary["decoding"] == "negotiated"
        # Rerunning with --resume plays nothing again.
        requests = len(server.requests)
        assert main([*argv, "--resume"]) == 0
        assert len(server.requests) == requests
        assert json.loads(capsys.readouterr().out)["episodes"] == 16
    episode_lines = [x for x in log.read_text().splitlines() if '"type": "episode"' in x]
    assert len(episode_lines) == 16


def _calls(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if '"type": "call"' in x]


def test_the_study_reports_the_median_decision_latency_and_the_decoding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 003 reports the median over decisions; the study computes it from the logged
    calls, and records the decoding it was asked for and the one each call used."""
    log = tmp_path / "study.jsonl"
    with FakeServer(scripted([], Reply(content='{"operation": 0, "candidate": 0}'))) as server:
        argv = ["llm-study", "--design", "fractional", "--base-url", server.base_url,
                "--model", "fake", "--log", str(log), "--response-format", "none", "--json"]
        assert main(argv) == 0
        bodies = server.requests
    summary = json.loads(capsys.readouterr().out)
    calls = [c for c in _calls(log) if c["status"] == "ok"]
    assert len(calls) == summary["decisions"]
    assert summary["median_decision_latency_s"] == pytest.approx(
        float(np.median([c["latency_s"] for c in calls])))
    assert summary["mean_decision_latency_s"] == pytest.approx(
        float(np.mean([c["latency_s"] for c in calls])))
    assert summary["response_format"] == "none" and summary["decoding"] == "unconstrained"
    assert summary["calls_by_response_format"] == {"none": len(calls)}
    assert all(c["decoding"] == "unconstrained" for c in calls)
    assert bodies and all("response_format" not in body for body in bodies)


def test_the_study_without_a_log_still_reports_the_median(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with FakeServer(scripted([], Reply(content='{"operation": 0, "candidate": 0}'))) as server:
        assert main(["llm-study", "--design", "fractional", "--base-url", server.base_url,
                     "--model", "fake", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["median_decision_latency_s"] is not None and summary["decisions"] > 0
    assert list(tmp_path.iterdir()) == []


def _endpoint_args(*argv: str) -> argparse.Namespace:
    from analysis.cli.common import add_llm_flags

    parser = argparse.ArgumentParser()
    add_llm_flags(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def fake_local_server(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """local_server.local_server replaced by a stub, so --local needs no model here."""
    from llm_policies.client import local_server

    started: list[str] = []

    @contextlib.contextmanager
    def stub(*_args: object, **_kwargs: object) -> Iterator[str]:
        started.append("http://127.0.0.1:1/v1")
        yield started[-1]

    monkeypatch.setattr(local_server, "local_server", stub)
    return started


@pytest.mark.parametrize(("flags", "expected"), [
    ((), "json_object"), (("--response-format", "none"), "none"),
    (("--response-format", "auto"), "auto")])
def test_response_format_applies_to_local(fake_local_server: list[str], flags: tuple[str, ...],
                                          expected: str) -> None:
    from analysis.cli.common import llm_endpoint
    from llm_policies.client import local_server

    with llm_endpoint(_endpoint_args("--local", *flags)) as settings:
        assert settings.response_format == expected
        assert settings.system_role is local_server.SYSTEM_ROLE
    assert fake_local_server


def test_local_rejects_json_schema_before_starting_a_server(
        fake_local_server: list[str]) -> None:
    from analysis.cli.common import llm_endpoint

    with pytest.raises(ValueError, match="^--response-format with --local must be one of "
                                         "auto | json_object | none"):
        with llm_endpoint(_endpoint_args("--local", "--response-format", "json_schema")):
            pass
    assert fake_local_server == []


def test_an_unknown_response_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["llm-study", "--design", "local", "--local", "--response-format", "grammar"])
    assert exit_info.value.code == 2
    assert "--response-format" in capsys.readouterr().err
