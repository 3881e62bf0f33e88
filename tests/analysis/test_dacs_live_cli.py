"""`diagym dacs-live`: bad flags are one line with exit 2; a scripted run writes its table."""

from __future__ import annotations

import csv
import json

import pytest

from diagym.analysis.cli.main import main
from tests.analysis.test_dacs_live import respond
from tests.llm_fake_server import FakeServer

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(("argv", "message"), [
    (["--trials", "0"], "argument --trials: must be an integer >= 1; got 0"),
    (["--scenario", "ra9"], "argument --scenario: invalid choice: 'ra9'"),
    ([], "--agent-base-url and --agent-model are required (or --local NAME)"),
    (["--local", "gemma", "--judge-model", "j"],
     "--judge-base-url/--judge-model cannot be used with --local"),
    (["--judge-format", "xml"], "argument --judge-format: invalid choice: 'xml'"),
    (["--orchestrator-harness", "tools"], "argument --orchestrator-harness: invalid choice"),
    (["--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "m",
      "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
      "--orchestrator-policy", "no_such_module_here:Policy"],
     "--orchestrator-policy no_such_module_here:Policy"),
    (["--local", "gemma", "--ray-address", "auto"],
     "--ray-address joins a Ray cluster: it needs --executor ray"),
])
def test_bad_flags_are_one_line_and_exit_2(argv: list[str], message: str, tmp_path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        code = main(["dacs-live", "--log", str(tmp_path / "l.jsonl"), *argv])
        raise SystemExit(code)
    assert stop.value.code == 2
    out = capsys.readouterr()
    text = (out.err + out.out).strip()
    assert len(text.splitlines()) == 1 and message in text


def test_a_scripted_run_writes_the_table(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer(respond) as server:
        flags = [f"--{role}-{what}={value}" for role in ("agent", "orchestrator", "judge")
                 for what, value in (("base-url", server.base_url), ("model", "m"))]
        code = main(["dacs-live", *flags, "--trials", "1", "--max-steers", "2",
                     "--log", str(tmp_path / "p4.jsonl"), "--out", str(tmp_path / "out")])
    assert code == 0
    rows = {r["condition"]: r for r in csv.DictReader((tmp_path / "out" / "phase4.csv").open())}
    assert float(rows["flat"]["kappa"]) == pytest.approx(0.5)
    assert float(rows["dacs"]["judge_accuracy"]) == pytest.approx(2 / 3)
    paired = {r["rater"]: r for r in csv.DictReader(
        (tmp_path / "out" / "phase4_paired.csv").open())}
    # the script's pairs (trial, agent, request): judge a1/0 C-C, a1/1 C-I, a2/0 I-C (a3's
    # dacs verdict does not parse, so a3/0 drops out); keywords hit all four under dacs and
    # a1/0 and a2/0 under flat
    assert paired["judge"]["pairs"] == "3"
    assert float(paired["judge"]["difference"]) == pytest.approx(0.0)
    assert -1.0 <= float(paired["judge"]["low"]) <= 0.0 <= float(paired["judge"]["high"]) <= 1
    assert paired["keyword"]["pairs"] == "4"
    assert (float(paired["keyword"]["dacs"]), float(paired["keyword"]["flat"])) == (1.0, 0.5)
    assert float(paired["keyword"]["difference"]) == pytest.approx(0.5)
    assert 0.0 <= float(paired["keyword"]["low"]) <= 0.5 <= float(paired["keyword"]["high"])
    for name in ("phase4.md", "phase4_paired.md", "phase4_vs_synthetic.png", "provenance.json",
                 "report.html"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    lines = [json.loads(line) for line in (tmp_path / "p4.jsonl").read_text().splitlines()]
    roles = [line["role"] for line in lines if line["type"] == "call"]
    # per condition: 9 agent turns, 4 answers, 4 verdicts (the hand count of test_dacs_live)
    assert (roles.count("agent"), roles.count("orchestrator"), roles.count("judge")) == (
        18, 8, 8)


def test_the_report_shows_phase_4_as_a_study_and_reads_its_log(tmp_path) -> None:
    """phase4.md has its tables as data beside it, so the report shows the table like any
    study's; the log is a run log the report reads, its calls summed like any run's."""
    from diagym.analysis.report.inputs import build

    with FakeServer(respond) as server:
        flags = [f"--{role}-{what}={value}" for role in ("agent", "orchestrator", "judge")
                 for what, value in (("base-url", server.base_url), ("model", "m"))]
        assert main(["dacs-live", *flags, "--trials", "1", "--max-steers", "2",
                     "--log", str(tmp_path / "out" / "p4.jsonl"),
                     "--out", str(tmp_path / "out")]) == 0
    report = build([tmp_path / "out"])
    tables = {item.title: item for item in report.sections["tables"]}
    phase4 = tables["phase4.md"]
    rows = {row[phase4.columns.index("condition")]: row for row in phase4.rows}
    assert rows["flat"][phase4.columns.index("kappa")] == "0.500"
    assert not [note for note in report.notes if "p4.jsonl" in note or "phase4" in note]
    costs = [item for items in report.sections.values() for item in items
             if getattr(item, "columns", None) and "calls" in item.columns]
    assert costs and costs[0].rows[0][costs[0].columns.index("calls")] == 34


def test_a_users_policy_orchestrates_from_the_command_line(tmp_path) -> None:
    with FakeServer(respond) as server:
        flags = [f"--{role}-{what}={value}" for role in ("agent", "judge")
                 for what, value in (("base-url", server.base_url), ("model", "m"))]
        code = main(["dacs-live", *flags, "--trials", "1", "--max-steers", "2",
                     "--orchestrator-policy", "tests.analysis.test_dacs_live:KeywordEcho",
                     "--log", str(tmp_path / "p4.jsonl"), "--out", str(tmp_path / "out")])
    assert code == 0
    rows = {r["condition"]: r for r in csv.DictReader((tmp_path / "out" / "phase4.csv").open())}
    assert float(rows["dacs"]["contamination"]) == 0.0
    assert float(rows["flat"]["contamination"]) == 1.0
    calls = [json.loads(line) for line in (tmp_path / "p4.jsonl").read_text().splitlines()]
    assert {c["status"] for c in calls if c["type"] == "call"} == {"ok"}


def test_the_cost_limit_stops_between_calls_and_the_study_resumes(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"m": {"input": 1000.0, "output": 1000.0}}}))
    log = tmp_path / "p4.jsonl"
    with FakeServer(respond) as server:
        flags = [f"--{role}-{what}={value}" for role in ("agent", "orchestrator", "judge")
                 for what, value in (("base-url", server.base_url), ("model", "m"))]
        argv = ["dacs-live", *flags, "--trials", "1", "--max-steers", "2", "--log", str(log),
                "--out", str(tmp_path / "out"), "--prices", str(prices)]
        # $1000 per 1M tokens: a trial's calls cost far more than $0.30
        assert main([*argv, "--cost-limit", "0.3"]) == 3
        assert "cost limit reached" in capsys.readouterr().err
        assert not log.exists() or all(json.loads(line)["type"] != "trial"
                                       for line in log.read_text().splitlines())
        assert main([*argv, "--cost-limit", "1000"]) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(line["type"] == "trial" for line in lines) == 2
    assert all(line["cost_usd"] > 0 for line in lines if line["type"] == "call")
