"""Seed 003's language-model designs as data, and a whole study against a scripted server."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from diagym.analysis.cli import main
from diagym.analysis.studies.llm_study.design import design_cells
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


def _study_requests(server: FakeServer) -> list[dict[str, Any]]:
    """The requests of the study's decisions, without those of the server probe and the
    pre-flight check (diagym.analysis.llm_runs.probe_server), which every invocation sends and which
    are capped far below a decision's max_tokens."""
    from diagym.llm_policies.client.probe import PROBE_MAX_TOKENS

    return [body for body in server.requests if body.get("max_tokens", 0) > PROBE_MAX_TOKENS]


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
        requests = len(_study_requests(server))
        assert main([*argv, "--resume"]) == 0
        assert len(_study_requests(server)) == requests
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
        bodies = _study_requests(server)
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
    from diagym.analysis.cli.flags_chat import add_llm_flags

    parser = argparse.ArgumentParser()
    add_llm_flags(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def fake_local_server(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """local_server.local_server replaced by a stub, so --local needs no model here (and
    nothing to probe)."""
    from diagym.analysis import llm_runs
    from diagym.llm_policies.client import local_server, local_speed

    started: list[str] = []
    monkeypatch.setattr(llm_runs, "probe_server",
                        lambda settings, *_args, **_kwargs: settings)

    @contextlib.contextmanager
    def stub(*_args: object, model: str = local_server.DEFAULT_MODEL,
             **_kwargs: object) -> Iterator[object]:
        started.append("http://127.0.0.1:1/v1")
        yield types.SimpleNamespace(base_url=started[-1], n_ctx=8192,
                                    model=local_server.LOCAL_MODELS[model])

    monkeypatch.setattr(local_server, "running_server", stub)
    monkeypatch.setattr(local_speed, "measure", lambda *_args, **_kwargs: local_speed.Speed(
        prompt_tps=100.0, gen_tps=10.0, prompt_tokens=400, seconds=5.0))
    return started


@pytest.mark.parametrize(("flags", "expected"), [
    ((), "json_object"), (("--response-format", "none"), "none"),
    (("--response-format", "auto"), "auto")])
def test_response_format_applies_to_local(fake_local_server: list[str], flags: tuple[str, ...],
                                          expected: str) -> None:
    from diagym.analysis.cli.flags_chat import llm_endpoint
    from diagym.llm_policies.client import local_server

    with llm_endpoint(_endpoint_args("--local", *flags)) as settings:
        assert settings.response_format == expected
        assert settings.system_role is local_server.SYSTEM_ROLE
    assert fake_local_server


def test_local_rejects_json_schema_before_starting_a_server(
        fake_local_server: list[str]) -> None:
    from diagym.analysis.cli.flags_chat import llm_endpoint

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


# The harness as a factor: every harness plays the design's cells on the same task seeds, in
# the text oracle (diagym.llm_policies.oracle) priced per call by the stand-in below.

def _priced_oracle_factory(calls: list[str], fail_on_call: int | None = None
                           ) -> Callable[[str], Callable[[Any], Any]]:
    """make_policy(harness) for run_design: the env family's text oracle, answering tool
    calls in the tools harness, with made-up provider tokens and a cost that differs per
    call (a tenth of a cent per message), so sums are not a multiple of one price. Each call
    appends its harness to `calls`; `fail_on_call`: the provider fails that call (1-based,
    over the whole study) once."""
    from diagym.llm_policies.client.transport import ChatResult
    from diagym.llm_policies.families import text_family
    from diagym.llm_policies.oracle import InProcessChat
    from diagym.llm_policies.policy import LLMPolicy

    class Priced(InProcessChat):
        harness = ""

        def complete(self, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]] | None = None) -> ChatResult:
            calls.append(self.harness)
            result = super().complete(messages, tools=tools)
            if len(calls) == fail_on_call:
                return dataclasses.replace(result, text="", status="error", error="HTTP 503",
                                           tool_calls=(), http_status=503)
            return dataclasses.replace(result, prompt_tokens=10 * len(messages),
                                       completion_tokens=7, cost_usd=1e-3 * len(messages))

    def make_policy(harness: str) -> Callable[[Any], Any]:
        def for_env(env: Any) -> Any:
            client = Priced(text_family(env).oracle())
            client.harness = harness
            return LLMPolicy.for_env(client, env, harness=harness)
        return for_env

    return make_policy


HARNESS_ORDER = ("json", "tools", "chat")


def _standing_ok_calls(log: Path) -> list[dict]:
    """The answered call lines no later "replay" line voided, read straight off the log."""
    standing: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["type"] == "replay":
            standing.pop(entry["episode_key"], None)
        elif entry["type"] == "call" and entry["status"] == "ok":
            standing.setdefault(entry["episode_key"], []).append(entry)
    return [c for entries in standing.values() for c in entries]


def test_every_harness_plays_every_cell_on_the_same_task_seeds(tmp_path: Path) -> None:
    from diagym.analysis.studies.llm_study.run import cell_run_name, run_design

    log, calls = tmp_path / "study.jsonl", []
    results = run_design("fractional", 5, 2, _priced_oracle_factory(calls),
                         harnesses=HARNESS_ORDER, log=log)
    assert [r.harness for r in results] == list(HARNESS_ORDER) * 8
    cells = design_cells("fractional")
    for i, cell in enumerate(cells):
        played = results[3 * i: 3 * i + 3]
        assert all(r.cell == cell for r in played)
        for r in played:
            assert r.episodes.columns["task_seed"].tolist() == \
                played[0].episodes.columns["task_seed"].tolist()
        assert len(set(played[0].episodes.columns["task_seed"].tolist())) == 2
    # Each (harness, cell) is its own run; json's keeps the name it had before harnesses.
    names = {json.loads(x)["run_name"] for x in log.read_text().splitlines()
             if '"run_name"' in x}
    assert names == {cell_run_name(h, "fractional", c) for h in HARNESS_ORDER for c in cells}
    assert cell_run_name("json", "fractional", cells[0]) == f"fractional {cells[0].levels}"
    assert cell_run_name("tools", "fractional", cells[0], "mine") == \
        f"tools mine fractional {cells[0].levels}"
    # Every call line belongs to the harness that made it.
    assert Counter(c["harness"] for c in _calls(log)) == Counter(calls)


def test_the_report_has_one_row_per_harness_with_its_cost_from_the_call_lines(
        tmp_path: Path) -> None:
    from diagym.analysis.studies.llm_study.report import (
        answered_calls,
        format_study_summary,
        summarise_study,
    )
    from diagym.analysis.studies.llm_study.run import run_design

    log, calls = tmp_path / "study.jsonl", []
    results = run_design("fractional", 0, 2, _priced_oracle_factory(calls),
                         harnesses=HARNESS_ORDER, log=log)
    summary = summarise_study(results, resamples=200, calls=answered_calls(log))
    assert list(summary["harnesses"]) == list(HARNESS_ORDER)
    assert "episodes" not in summary  # no pooling across harnesses
    lines = _standing_ok_calls(log)
    for harness, h in summary["harnesses"].items():
        own = [r for r in results if r.harness == harness]
        mine = [c for c in lines if c["harness"] == harness]
        successes = sum(int(r.episodes.columns["success"].sum()) for r in own)
        assert (h["episodes"], h["successes"]) == (16, successes)
        assert h["decisions"] == len(mine) > 0
        assert h["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in mine))
        assert h["calls_without_cost"] == 0
        assert h["success_per_usd"] == pytest.approx(successes / h["cost_usd"])
        assert h["tokens"]["provider_prompt_tokens"] == sum(
            c["provider_prompt_tokens"] for c in mine)
        assert h["tokens_per_decision"]["cl100k"] == pytest.approx(sum(
            c["cl100k_prompt_tokens"] + c["cl100k_completion_tokens"] for c in mine) / len(mine))
        assert h["median_decision_latency_s"] == pytest.approx(
            float(np.median([c["latency_s"] for c in mine])))
        assert h["valid_reply"] == ("tool-call-valid" if harness == "tools" else "schema-valid")
        assert h["schema_valid_rate"] == 1.0  # the oracle always answers well-formed
    # The conversation harnesses resend the exchanges, so their calls cost more than json's.
    assert summary["harnesses"]["chat"]["cost_usd"] > summary["harnesses"]["json"]["cost_usd"]
    assert [c["harness"] for c in summary["harness_contrasts"]] == ["tools", "chat"]
    table = format_study_summary("fractional", summary).splitlines()
    assert table[0].startswith("| Harness | Episodes | Success | Valid replies | First failures"
                               " | Median latency | Tokens / decision | Cost (USD) |")
    rows = table[2:5]
    for row, harness in zip(rows, HARNESS_ORDER, strict=True):
        h = summary["harnesses"][harness]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[:4] == [harness, "16", f"{100 * h['success']:.1f}%",
                             f"100.0% {h['valid_reply']}"]
        assert cells[7].startswith(f"{h['cost_usd']:.4f} (")
    assert sum(line.startswith("### harness ") for line in table) == 3


def test_a_resumed_harness_study_plays_nothing_again(tmp_path: Path) -> None:
    from diagym.analysis.studies.llm_study.run import run_design

    log, calls = tmp_path / "study.jsonl", []
    first = run_design("fractional", 0, 2, _priced_oracle_factory(calls),
                       harnesses=("tools", "chat"), log=log)
    played = len(calls)
    again = run_design("fractional", 0, 2, _priced_oracle_factory(calls),
                       harnesses=("tools", "chat"), log=log, resume=True)
    assert len(calls) == played > 0
    assert [(r.harness, r.cell) for r in again] == [(r.harness, r.cell) for r in first]
    assert all(a.episodes == b.episodes for a, b in zip(again, first, strict=True))


def test_a_replayed_episode_costs_once_in_the_report(tmp_path: Path) -> None:
    """Positive control of counting each decision once: a provider failure on the third call
    ends an episode after two paid answers; retrying it replays them, and the report's cost is
    the sum over the calls that stand, not over every answered line."""
    from diagym.analysis.studies.llm_study.report import answered_calls, summarise_study
    from diagym.analysis.studies.llm_study.run import run_design

    log, calls = tmp_path / "study.jsonl", []
    run_design("fractional", 0, 1, _priced_oracle_factory(calls, fail_on_call=3),
               harnesses=("json",), log=log)
    results = run_design("fractional", 0, 1, _priced_oracle_factory(calls),
                         harnesses=("json",), log=log, resume=True, retry_failed=True)
    summary = summarise_study(results, resamples=200, calls=answered_calls(log))
    every_ok = [c for c in _calls(log) if c["status"] == "ok"]
    standing = _standing_ok_calls(log)
    assert len(every_ok) == len(standing) + 2
    assert summary["first_failures"].get("provider_error") is None
    assert summary["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in standing))
    assert summary["cost_usd"] < sum(c["cost_usd"] for c in every_ok)


def test_a_single_json_study_keeps_the_top_level_shape_and_unknown_cost(tmp_path: Path) -> None:
    from diagym.analysis.llm_runs import oracle_policy_factory
    from diagym.analysis.studies.llm_study.report import (
        answered_calls,
        format_study_summary,
        summarise_study,
    )
    from diagym.analysis.studies.llm_study.run import run_design

    log = tmp_path / "study.jsonl"
    results = run_design("fractional", 0, 1, lambda _harness: oracle_policy_factory(), log=log)
    summary = summarise_study(results, resamples=200, calls=answered_calls(log))
    assert {"episodes", "success", "mean_completed", "decisions", "schema_valid_rate",
            "first_failures", "median_decision_latency_s", "mean_decision_latency_s",
            "response_format", "decoding", "calls_by_response_format",
            "contrasts"} <= set(summary)
    assert list(summary["harnesses"]) == ["json"] and summary["harness_contrasts"] == []
    assert summary["episodes"] == summary["harnesses"]["json"]["episodes"] == 8
    # The in-process oracle reports no price: cost unknown, not zero.
    assert summary["cost_usd"] is None and summary["success_per_usd"] is None
    assert summary["calls_without_cost"] == summary["decisions"] > 0
    assert summary["tokens_per_decision"]["provider"] is None
    row = format_study_summary("fractional", summary).splitlines()[2]
    assert row.endswith("| n/a |") and row.startswith("| json | 8 |")


def test_a_log_written_before_harnesses_resumes_as_the_json_harness(tmp_path: Path) -> None:
    from diagym.analysis.llm_runs import oracle_policy_factory
    from diagym.analysis.studies.llm_study.run import run_design, text_env
    from diagym.controllers.rollout import rollout_parallel

    log = tmp_path / "study.jsonl"
    for cell in design_cells("fractional"):  # the runs as the study named them before
        rollout_parallel(lambda cell=cell: text_env(cell.spec), oracle_policy_factory(), 1,
                         seed=0, workers=1, log=log, resume=True,
                         run_name=f"fractional {cell.levels}")
    lines = len(log.read_text().splitlines())
    results = run_design("fractional", 0, 1, lambda _harness: oracle_policy_factory(), log=log,
                         resume=True)
    assert len(log.read_text().splitlines()) == lines  # nothing played again
    assert len(results) == 8


@pytest.mark.parametrize("harnesses", [(), ("json", "json"), ("json", "xml")])
def test_harnesses_are_distinct_known_names(harnesses: tuple[str, ...]) -> None:
    from diagym.analysis.studies.llm_study.run import run_design

    with pytest.raises(ValueError, match="^harnesses must be distinct names among json"):
        run_design("fractional", 0, 1, lambda _harness: pytest.fail("no policy is needed"),
                   harnesses=harnesses)


def test_a_local_run_takes_its_timeouts_from_the_measured_speed(
        fake_local_server: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Without --timeout, the call timeout and the probe deadline are the measured speed's
    (local_speed.Speed at 100 prompt and 10 generated tokens/s), and the estimate is printed;
    an explicit --timeout is both."""
    from diagym.analysis.cli.flags_chat import llm_endpoint
    from diagym.llm_policies.client.local_speed import Speed

    speed = Speed(prompt_tps=100.0, gen_tps=10.0, prompt_tokens=400, seconds=5.0)
    with llm_endpoint(_endpoint_args("--local")) as settings:
        assert settings.timeout == speed.call_timeout(8192, 64)
        assert settings.probe_timeout == speed.probe_timeout()
    err = capsys.readouterr().err
    assert "Gemma 3 270M: prompt 100 tokens/s, generation 10.0 tokens/s" in err
    assert f"per-call timeout {speed.call_timeout(8192, 64):g} s" in err
    with llm_endpoint(_endpoint_args("--local", "--timeout", "7")) as settings:
        assert (settings.timeout, settings.probe_timeout) == (7.0, 7.0)


def test_a_design_not_played_through_gets_no_contrasts(tmp_path: Path) -> None:
    """A study read part-way (cells missing, or cells with fewer seeds) would mix the missing
    cells into every marginal difference: its contrasts are not estimated, and the table says
    so; the whole design's are."""
    from diagym.analysis.llm_runs import oracle_policy_factory
    from diagym.analysis.studies.llm_study.report import format_study_summary, summarise_study
    from diagym.analysis.studies.llm_study.run import run_design

    results = run_design("fractional", 0, 2, lambda _harness: oracle_policy_factory(),
                         log=tmp_path / "study.jsonl")
    assert summarise_study(results, resamples=50)["contrasts"] != []
    partial = summarise_study(results[:5], resamples=50)
    assert partial["contrasts"] == [] and partial["episodes"] == 10
    assert "contrasts: not estimated (the design is not played through)" in (
        format_study_summary("fractional", partial))
