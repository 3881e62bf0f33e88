"""`diagym export --format who-and-when`: the labels a fault-injection run carried come back
from the exported files exactly, the decisive turn is the call the env failed, a log without
labels exports null mistakes, and bad input is one line with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagym.analysis.cli.main import main
from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.faults import ENV_FAILURE, INVALID_REPLY, Label, label_of
from diagym.analysis.export.who_and_when import AGENT, read_label
from diagym.analysis.studies.attribution_bench.design import BenchDesign
from diagym.analysis.studies.attribution_bench.run import play
from diagym.controllers.policy import EpisodeRecord

DESIGN = BenchDesign(configurations=(DEFAULT_BATTERY[0], DEFAULT_BATTERY[2]), episodes=14)


def test_export_round_trips_the_injected_labels(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "faults.jsonl"
    injected: dict[tuple[int, int], Label] = {}  # (configuration, task seed) -> label
    records: list[EpisodeRecord] = []
    play(DESIGN, log, on_record=records.append)
    for i, record in enumerate(records):
        label = label_of(record.counters)
        if not record.success:
            assert label is not None
            injected[(i // DESIGN.episodes, record.task_seed)] = label
    out = tmp_path / "out"
    assert main(["export", str(log), "--format", "who-and-when", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {len(injected)} failed episodes "
                                              f"({len(injected)} with exact labels)")
    documents = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    kwargs = [spec.as_dict() for spec in DESIGN.configurations]
    read_back = {(kwargs.index(d["diagym"]["env_kwargs"]), d["diagym"]["task_seed"]):
                 read_label(d) for d in documents}
    assert read_back == injected
    for d in documents:
        label = read_label(d)
        turn = d["history"][int(d["mistake_step"])]
        assert (turn["role"], turn["name"], d["mistake_agent"]) == ("assistant", AGENT, AGENT)
        assert d["is_correct"] is False and d["mistake_reason"].startswith(label.cause)
        if label.cause == INVALID_REPLY:
            assert int(d["mistake_step"]) == len(d["history"]) - 1
        else:  # the env's result of the decisive call names its failure
            result = d["history"][int(d["mistake_step"]) + 1]["content"]
            assert f"execute({label.op}, {label.slot}) -> {ENV_FAILURE[label.cause]}" in result


def test_a_log_without_labels_exports_null_mistakes(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    assert main(["diagnose", "--policy", "uniform-candidate", "--budget", "10",
                 "--log", str(log)]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["export", str(log), "--out", str(out)]) == 0
    documents = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert documents
    assert all(d["mistake_agent"] is d["mistake_step"] is d["mistake_reason"] is None
               and d["diagym"]["label"] is None for d in documents)


@pytest.mark.parametrize(("argv", "message"), [
    (["missing.jsonl"], "LOG {tmp}/missing.jsonl: no such file"),
    (["empty.jsonl"], "log {tmp}/empty.jsonl holds no StatefulWorkflow-v0 episode"),
    (["empty.jsonl", "--format", "csv"], "argument --format: invalid choice: 'csv'"),
])
def test_bad_input_is_one_line_and_status_2(argv: list[str], message: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.jsonl").write_text("{}\n")
    argv = ["export", str(tmp_path / argv[0]), *argv[1:], "--out", str(tmp_path / "out")]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        status = int(exit_.code)
    assert status == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert message.format(tmp=tmp_path) in err
