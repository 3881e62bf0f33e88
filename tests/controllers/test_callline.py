"""The typed call line: both writers' lines read back as written, old RCWT lines (whose
latency_s was the unit's wall time) read in today's meaning, and the log's one sum and one
reader count like with like."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagym.controllers.callline import ELAPSED, MODEL_FIELDS, CallLine, normalised, old_rcwt_line
from diagym.controllers.logreader import read_log
from diagym.controllers.runlog import RunLog, call_totals

ROOT = Path(__file__).resolve().parents[2]
LADDER = sorted((ROOT / "docs" / "results" / "ladder").glob("*.jsonl"))

OLD_RCWT = {"type": "call", "key": "0.5:first:3", "model": "m", "q": 0.5, "score": 1,
            "status": "ok", "response": '{"answer": 2}', "latency_s": 2.5,
            "provider_latency_s": 0.75, "retries": 1, "run_id": "abc"}
OLD_RCWT_READER = {"type": "call", "key": "0.0:first:0", "model": "reader", "score": 0,
                   "latency_s": 0.001, "run_id": "abc"}

texts = st.text(max_size=20)
maybe_int = st.none() | st.integers(0, 10**6)
lines = st.builds(
    CallLine, status=st.none() | st.sampled_from(["ok", "error"]), error=st.none() | texts,
    http_status=st.none() | st.integers(100, 599), response=texts,
    provider_prompt_tokens=maybe_int, provider_completion_tokens=maybe_int,
    latency_s=st.none() | st.floats(0, 1e4), retries=st.integers(0, 9),
    response_format=st.none() | st.sampled_from(["json_schema", "json_object", "none"]),
    context=st.fixed_dictionaries({"episode_key": st.just("r:1"),
                                   "decision": st.integers(0, 50), "harness": texts}))


@given(lines)
def test_a_line_reads_back_as_it_was_written(line: CallLine) -> None:
    assert CallLine.from_entry(json.loads(json.dumps(line.entry()))) == line


@pytest.mark.parametrize("path", LADDER, ids=lambda p: p.name)
def test_every_call_line_on_disk_reads_and_writes_back_the_same(path: Path) -> None:
    calls = [json.loads(text) for text in path.read_text().splitlines()]
    calls = [entry for entry in calls if entry.get("type") == "call"]
    assert calls
    for entry in calls:
        assert not old_rcwt_line(entry)
        assert CallLine.from_entry(entry).entry() == entry


def test_an_old_rcwt_line_reads_its_wall_time_apart_from_the_model_call() -> None:
    line = CallLine.from_entry(OLD_RCWT)
    assert line.latency_s == 0.75 and line.context[ELAPSED] == 2.5
    assert "provider_latency_s" not in line.entry() and line.retries == 1
    reader = CallLine.from_entry(OLD_RCWT_READER)
    assert reader.latency_s is None and reader.status is None
    assert reader.context[ELAPSED] == 0.001 and reader.context["score"] == 0
    assert not old_rcwt_line(line.entry())  # read anew once, it stays as it is
    assert normalised(line.entry()) == line.entry()


def test_a_field_of_the_wrong_type_reads_as_absent() -> None:
    line = CallLine.from_entry({"type": "call", "status": 3, "latency_s": True,
                                "retries": "2", "response": None, "episode_key": "r:0"})
    assert (line.status, line.latency_s, line.retries, line.response) == (None, None, 0, "")
    assert set(line.entry()) == {"type", "episode_key", *MODEL_FIELDS}


def _old_log(path: Path) -> None:
    run = {"rcwt": "x", "window": 8}
    with RunLog(path, run) as log:
        log.write_result({k: v for k, v in OLD_RCWT.items() if k != "run_id"})
        log.write_result({**{k: v for k, v in OLD_RCWT.items() if k != "run_id"},
                          "key": "0.5:first:4", "latency_s": 4.0, "provider_latency_s": 0.25})
        log.write_result({k: v for k, v in OLD_RCWT.items() if k != "run_id"})  # repeated key


def test_the_sum_and_the_reader_count_an_old_log_in_todays_meaning(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    _old_log(path)
    totals = call_totals(path)
    assert totals.calls == 2 and totals.replayed == 1
    assert totals.totals["latency_s"] == pytest.approx(0.75 + 0.25)
    (run,) = read_log(path).values()
    assert [r["key"] for r in run.results] == ["0.5:first:3", "0.5:first:4"]
    assert [r["latency_s"] for r in run.results] == [0.75, 0.25]
    assert [r[ELAPSED] for r in run.results] == [2.5, 4.0]
    assert len(run.sessions) == 1 and run.name is None


def test_a_resume_finds_an_old_logs_units_in_todays_meaning(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    _old_log(path)
    with RunLog(path, {"rcwt": "x", "window": 8}, resume=True) as log:
        assert sorted(log.results) == ["0.5:first:3", "0.5:first:4"]
        assert log.results["0.5:first:3"]["latency_s"] == 0.75
        assert log.results["0.5:first:3"][ELAPSED] == 2.5
