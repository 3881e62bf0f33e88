"""`diagym summarize LOG.jsonl`: the tables diagym run printed, rebuilt from the log alone,
equal to what the run itself printed (two paths, one answer), and its files with --out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagym.analysis.cli.main import main
from tests.analysis import report_inputs as inputs


def _printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(("env", "policy"), [(inputs.HISTORY_ENV, "cache-2"),
                                             (inputs.ENV, "text-oracle"),
                                             ("DACSSteering-v0", "dacs-reader")])
def test_summarize_prints_the_summary_the_run_printed(
        env: str, policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    ran = _printed(["run", "--env", env, "--policy", policy, "--episodes", "12",
                    "--log", str(log)], capsys)
    rebuilt = _printed(["summarize", str(log)], capsys)
    # the run's own lines: its header names the policy as typed, the log its description
    summary = [line for line in ran[1:] if not line.startswith("report:")]
    assert rebuilt[1:] == summary
    assert rebuilt[0].endswith(": 12 episodes" + ("" if env.startswith("DACS") else
                                                  " from seed 0"))


def test_summarize_out_writes_the_run_json_summary_the_text_and_the_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    argv = ["run", "--env", inputs.HISTORY_ENV, "--policy", "cache-4", "--episodes", "30"]
    ran = json.loads("\n".join(_printed([*argv, "--log", str(log), "--json"], capsys)))
    out = tmp_path / "summary"
    printed = _printed(["summarize", str(log), "--out", str(out)], capsys)
    (written,) = json.loads((out / "summary.json").read_text())
    assert written["summary"] == {k: v for k, v in ran.items()
                                  if k not in ("run", "provenance")}
    assert written["run"]["env_kwargs"] == json.loads(
        printed[0].split(" on ", 1)[1].split(" ", 1)[1].rsplit(":", 1)[0])
    assert (out / "summary.txt").read_text().splitlines() == printed[:-2]
    assert not (out / "profile.png").exists()  # one run: one dot, its rate is in the summary
    assert printed[-2:] == [f"wrote: {out / name}" for name in ("summary.json", "summary.txt")]
    _, shared = inputs.diagnosis_dir(tmp_path)  # a log of many runs
    capsys.readouterr()
    printed = _printed(["summarize", str(shared), "--out", str(tmp_path / "two")], capsys)
    assert (tmp_path / "two" / "profile.png").read_bytes().startswith(b"\x89PNG")
    assert printed[-1] == f"wrote: {tmp_path / 'two' / 'profile.png'}"


def test_summarize_reads_every_run_of_a_shared_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, log = inputs.diagnosis_dir(tmp_path)
    capsys.readouterr()
    printed = _printed(["summarize", str(log)], capsys)
    runs = {json.loads(line)["run_id"] for line in log.read_text().splitlines()
            if json.loads(line)["type"] == "session"}
    assert sum(line.startswith("cache-2 on ") for line in printed) == \
        len(runs) == len(json.loads((out / "diagnosis.json").read_text())["configurations"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "LOG {p}: no such file"),
    ("", "{p}: not a run log (no JSONL line with a \"type\")"),
    ('{"type": "note"}\n', "LOG {p}: holds no run (no line with a run's settings)"),
])
def test_summarize_refuses_what_is_no_log_in_one_line(
        content: str | None, message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl"
    if content is not None:
        path.write_text(content)
    assert main(["summarize", str(path)]) == 2
    assert capsys.readouterr().err == f"diagym summarize: error: {message.format(p=path)}\n"
