"""The harnesses, the probe, cost, the cost limit and the cache through the command line,
against a loopback server whose model is the text oracle.

The oracle server answers each chat request as the in-process text oracle would
(diagym.llm_policies.oracle.InProcessChat), as JSON text or, when the request offers tools, as a
native tool call; so a run through HTTP must score what the in-process oracle scores, which
is the positive control for every harness end to end (HTTP payload, tool_calls parsing, tool
messages, the wrapper's judgement). The probe's own requests (a forced `ping` tool, a schema
of one field) are answered by the fake server's tool-speaking responder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagym.analysis.cli import main
from diagym.llm_policies.oracle import InProcessChat, WorkflowOracle
from tests.llm_fake_server import FakeServer, Reply, no_tool_server, tool_call, tool_server

ENV = "StatefulWorkflowHistory-v0"
PRICES = {"models": {"fake": {"input": 1000.0, "output": 2000.0}}}  # USD per 1M tokens


def oracle_server() -> Any:
    """A responder whose model is the workflow text oracle (module docstring)."""
    probe_answers = tool_server()

    def respond(request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "Task (" not in text or isinstance(request.get("tool_choice"), dict):
            return probe_answers(request)
        result = InProcessChat(WorkflowOracle()).complete(messages, tools=request.get("tools"))
        if result.tool_calls:
            return Reply(tool_calls=[tool_call(c.name, c.arguments, c.id)
                                     for c in result.tool_calls])
        return Reply(content=result.text)

    return respond


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(oracle_server(), models=["fake"]) as running:
        yield running


def _run(server: FakeServer, *more: str, episodes: int = 4) -> list[str]:
    return ["run", "--env", ENV, "--policy", "llm", "--base-url", server.base_url,
            "--model", "fake", "--episodes", str(episodes), "--json", *more]


def _summary(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _calls(log: Path) -> list[dict[str, Any]]:
    return [x for x in _lines(log) if x["type"] == "call"]


@pytest.mark.parametrize("harness", ["json", "chat", "tools"])
def test_every_harness_reaches_the_oracles_score_through_http(
        harness: str, server: FakeServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    summary = _summary(_run(server, "--harness", harness, "--log", str(log)), capsys)
    assert summary["success"] == 1.0 and summary["episodes"] == 4
    assert summary["model_calls"]["schema_valid_rate"] == 1.0
    assert summary["run"]["harness"] == harness
    assert summary["run"]["capabilities"]["tools"] is True
    calls = _calls(log)
    assert {c["harness"] for c in calls} == {harness}
    played = [r for r in server.requests if "Task (" in json.dumps(r.get("messages"))]
    assert len(played) == len(calls) == summary["model_calls"]["decisions"]
    if harness == "tools":
        assert all(r["tools"][0]["function"]["name"] == "execute" for r in played)
        assert all(c["tool_calls"] and c["tool_calls"][0]["name"] == "execute" for c in calls)
        later = [r for r in played if len(r["messages"]) > 2]
        assert later and all(r["messages"][-1]["role"] == "tool" for r in later)
    else:
        assert all("tools" not in r for r in played)
    if harness != "json":  # a conversation grows by one exchange per decision
        sizes = [len(r["messages"]) for r in played[:8]]
        assert sizes[:3] == [sizes[0], sizes[0] + 2, sizes[0] + 4]
    session = next(x for x in _lines(log) if x["type"] == "session")
    assert session["server"]["tools"] is True and session["provenance"]["diagym_version"]


def test_a_server_without_tool_calls_is_refused_the_tools_harness_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    with FakeServer(no_tool_server(), models=["fake"]) as plain:
        assert main(_run(plain, "--harness", "tools", "--log", str(log))) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            "diagym run: error: --harness tools needs native tool calls; the server at "
            f"{plain.base_url} did not honour them")
        assert not log.exists()
        assert main(_run(plain, "--harness", "chat")) == 0  # the same server serves chat


def _cost(call: dict[str, Any]) -> float:
    return (call["provider_prompt_tokens"] * 1000.0
            + call["provider_completion_tokens"] * 2000.0) / 1e6


def test_cost_is_priced_from_usage_and_a_limit_stops_then_resumes(
        server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    whole_log = tmp_path / "whole.jsonl"
    whole = _summary(_run(server, "--prices", str(prices), "--log", str(whole_log),
                          episodes=6), capsys)
    calls = _calls(whole_log)
    assert all(c["cost_usd"] == pytest.approx(_cost(c)) for c in calls)
    total = sum(_cost(c) for c in calls)
    assert whole["model_calls"]["cost_usd"] == pytest.approx(total)
    assert whole["model_calls"]["success_per_usd"] == pytest.approx(6 / total)

    log = tmp_path / "limited.jsonl"
    limit = total / 3
    assert main(_run(server, "--prices", str(prices), "--log", str(log), "--cost-limit",
                     str(limit), episodes=6)) == 3
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if " episode (" not in line]  # the progress lines
    assert len(err) == 1 and err[0].startswith("diagym run: cost limit reached: $")
    assert err[0].endswith("continue with --resume and a higher --cost-limit")
    spent = sum(c["cost_usd"] for c in _calls(log))
    assert 0 < spent <= limit
    done = [x for x in _lines(log) if x["type"] == "episode"]
    assert 0 < len(done) < 6
    assert main(_run(server, "--prices", str(prices), "--log", str(log), "--resume",
                     "--cost-limit", str(limit))) == 3  # the log's spending counts
    capsys.readouterr()
    resumed = _summary(_run(server, "--prices", str(prices), "--log", str(log), "--resume",
                            episodes=6), capsys)
    assert resumed["success"] == whole["success"] and resumed["episodes"] == 6
    keys = [x["episode_key"] for x in _lines(log) if x["type"] == "episode"]
    assert len(keys) == len(set(keys)) == 6


def test_a_second_identical_run_with_the_cache_sends_nothing(
        server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    first = _summary(_run(server, "--harness", "tools", "--cache-dir", str(cache), "--log",
                          str(tmp_path / "a.jsonl")), capsys)
    sent = len(server.seen)
    assert all(c["cache"] == "miss" for c in _calls(tmp_path / "a.jsonl"))
    second = _summary(_run(server, "--harness", "tools", "--cache-dir", str(cache), "--log",
                           str(tmp_path / "b.jsonl")), capsys)
    assert len(server.seen) == sent  # no probe, no pre-flight, no completion
    calls = _calls(tmp_path / "b.jsonl")
    assert calls and all(c["cache"] == "hit" and c["retries"] == 0 for c in calls)
    assert second["model_calls"]["cache_hits"] == len(calls)
    for key in ("success", "mean_completed", "failures"):
        assert second[key] == first[key]


def test_llm_study_with_the_harness_as_a_factor_over_http_equals_the_text_oracle(
        server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = ["llm-study", "--design", "fractional", "--seeds", "2", "--json",
             "--harness", "json,tools,chat"]
    oracle = _summary([*study, "--policy", "text-oracle", "--out", str(tmp_path / "o")], capsys)
    served = _summary([*study, "--base-url", server.base_url, "--model", "fake"], capsys)
    assert set(served["harnesses"]) == {"json", "tools", "chat"}
    for harness in ("json", "tools", "chat"):
        mine, theirs = served["harnesses"][harness], oracle["harnesses"][harness]
        assert (mine["successes"], mine["episodes"]) == (theirs["successes"],
                                                         theirs["episodes"]) != (0, 0)
    assert served["run"]["capabilities"]["tools"] is True
    assert served["provenance"]["git_commit"] == oracle["provenance"]["git_commit"]
    rows = (tmp_path / "o" / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 8 and rows[0].startswith("harness,")
    assert rows[0].endswith("diagym_version,git_commit")
    assert json.loads((tmp_path / "o" / "summary.json").read_text()) == oracle


def test_llm_study_plays_a_users_policy_on_the_text_env(
        capsys: pytest.CaptureFixture[str]) -> None:
    shown = _summary(["llm-study", "--design", "fractional", "--seeds", "1", "--json",
                      "--policy", "tests/user_policy.py:JsonFirstReady"], capsys)
    assert shown["episodes"] == 8 and shown["run"]["policy"].endswith(":JsonFirstReady")
    assert main(["llm-study", "--design", "fractional", "--policy", "nope.mod:X"]) == 2
    assert capsys.readouterr().err.startswith("diagym llm-study: error: --policy nope.mod:X")


def test_a_cost_limit_for_a_model_the_table_does_not_price_is_refused(
        server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    assert main(_run(server, "--cost-limit", "0.000001", "--log", str(log))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["diagym run: error: --cost-limit 1e-06 cannot be enforced: the price table "
                   "(bundled llm_policies/client/prices.json) has no price for model 'fake', "
                   "so every call would count as $0; give --prices FILE.json with its price"]
    assert not any(json.loads(line)["type"] == "episode"
                   for line in (log.read_text().splitlines() if log.exists() else []))
