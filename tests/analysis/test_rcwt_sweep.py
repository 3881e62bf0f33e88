"""RCWT sweeps on DACSSteering-v0 (diagym.analysis.studies.rcwt) and the `rcwt` CLI.

The positive control is the programmed flat-reader, whose cliff is known from the token
layout (layout_cliff); everything runs without a model (the LLM path uses the fake server).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from diagym.analysis.cli.main import main
from diagym.analysis.cli.rcwt import add_parser
from diagym.analysis.llm_runs import ChatPolicyFactory, ChatSettings
from diagym.analysis.studies.rcwt.design import assemble_trial, build_trials, layout_cliff
from diagym.analysis.studies.rcwt.fits import fit_family, theta
from diagym.analysis.studies.rcwt.report import fit_table, read_rows, write_csv, write_outputs
from diagym.analysis.studies.rcwt.run import FlatReader, LLMAnswer, run_sweep
from diagym.controllers.runlog import ResumeNeeded
from diagym.envs._core.tokens import count
from diagym.llm_policies.prompts.budget import ARTIFACT_DROP, LAYOUTS, ORDERS
from tests.llm_fake_server import FakeServer, Reply

W = 768
# Plateaus sampled sparsely, the cliff region (p* in about 0.19..0.74 at W = 768) every 2 %.
FINE_Q = tuple(np.round(np.concatenate([[0.0, 0.1, 0.2], np.arange(0.22, 0.95, 0.02),
                                        [0.96, 0.98]]), 6).tolist())


def _has_block(text: str) -> bool:
    """Whether `text` holds an agent block header line ("## agent-<i> (full context)")."""
    return re.search(r"^## agent-\d+ \(full context\)$", text, re.MULTILINE) is not None


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _calls(path: Path) -> list[dict]:
    return [e for e in _lines(path) if e["type"] == "call"]


def test_every_prompt_has_exactly_w_tokens_less_the_dropped_blocks() -> None:
    trials = build_trials(3)
    dropped = 0
    for window in (700, 1500):
        for trial in trials:
            for q in (0.0, 0.01, 0.25, 0.5, 0.9, 0.98, 0.99, 1.0):
                for order in ORDERS:
                    for layout in LAYOUTS:
                        a = assemble_trial(trial, window, q, order, layout=layout)
                        assert a.c_target == math.floor(q * (window - a.u))
                        assert a.u + a.c_target + a.r_target == window
                        assert a.tokens == count(a.text) == a.u + a.c + a.r
                        lost = sum(a.c_target if n == "coordination" else a.r_target
                                   for n in a.dropped)
                        assert a.tokens == window - lost
                        assert all(0 < t <= ARTIFACT_DROP for t in (
                            a.c_target if n == "coordination" else a.r_target
                            for n in a.dropped))
                        assert a.p == a.c / window
                        dropped += bool(a.dropped)
                    # The artifact's layout: the task (request and answer format) is the
                    # user message, read last; the agent blocks are the system message.
                    system, user = assemble_trial(trial, window, q, order).messages()
                    assert system["role"] == "system" and _has_block(system["content"])
                    assert user["content"].lstrip() == trial.instructions.lstrip()
                    assert not _has_block(user["content"])
    assert dropped  # q = 0.01 and 0.99 put a block at <= 10 tokens


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A fine-grid flat-reader sweep without guessing (score = reads the fact), 40 trials."""
    log = tmp_path_factory.mktemp("control") / "calls.jsonl"
    trials = build_trials(40)
    records = run_sweep(FlatReader(guess=False), window=W, trials=40, log=log, q=FINE_Q)
    return {"records": records, "trials": trials, "log": log}


def test_flat_reader_reads_iff_layout_says_so(control: dict) -> None:
    """Per call: the fact is read iff r >= layout_cliff's required r, except where the
    evidence block is budget.fit_block's filler fallback (a shorter prefix; rare)."""
    trials = {t.seed: t for t in control["trials"]}
    cliffs = {(t.seed, o): layout_cliff(t.seed, W, order=o, trial=t)
              for t in trials.values() for o in ORDERS}
    fallback = 0
    for rec in control["records"]:
        assert rec["tokens"] == W and rec["category"] in ("read", "missing")
        expected = rec["r"] >= cliffs[rec["seed"], rec["order"]].required_r
        if not rec["evidence_prefix"]:
            fallback += 1
            assert rec["score"] <= expected  # a cut-back block can only lose the fact
            continue
        assert rec["score"] == int(expected), rec
    # About one cut in twenty lands right after a line's newline in reason_first.
    assert fallback <= 0.05 * len(control["records"])


def test_fitted_theta_matches_layout(control: dict) -> None:
    """The positive control: theta fitted from flat-reader's scores vs the layout.

    A trial is answerable iff c <= W - (u_s + R_s) (u_s: its instruction tokens, R_s: its
    required evidence tokens), so its own threshold is theta_s = u_s + R_s. (1) Per trial, the
    logistic fitted to its 0/1 scores over the fine q grid must put theta within one grid step
    (in c, about (W - u) * 0.02 tokens) of theta_s; (2) the median of those fitted thetas
    must be within 6 tokens of median_s(u_s + R_s) (u + median(required r) when u is fixed).
    (3) The pooled logistic (fit_table on the written CSV) is a least-squares midpoint of a
    flat, non-logistic threshold distribution, not its median; it must lie within 10 % of the
    thresholds' spread (p90 - p10) of the median.
    """
    trials = control["trials"]
    records = control["records"]
    diffs, fitted, layout = [], [], []
    for order in ORDERS:
        for trial in trials:
            cliff = layout_cliff(trial.seed, W, order=order, trial=trial)
            mine = [r for r in records if r["seed"] == trial.seed and r["order"] == order]
            fit = fit_family("logistic", [r["p"] for r in mine], [r["score"] for r in mine])
            estimate = theta(fit.params["p0"], W)
            step = (W - cliff.u) * 0.02 + 1
            if all(r["score"] == int(r["r"] >= cliff.required_r) for r in mine):
                assert abs(estimate - cliff.theta) <= step, (trial.seed, order)
            diffs.append(estimate - cliff.theta)
            fitted.append(estimate)
            layout.append(cliff.theta)
    assert abs(np.median(fitted) - np.median(layout)) <= 6.0
    csv_path = write_csv(records, control["log"].parent / "sweep.csv")
    pooled = fit_table(read_rows(csv_path), W)["flat-reader"]["theta"]
    spread = np.percentile(layout, 90) - np.percentile(layout, 10)
    assert abs(pooled - np.median(layout)) <= 0.1 * spread


def test_resume_after_kill_logs_each_call_once(tmp_path: Path) -> None:
    q = (0.0, 0.5, 0.9, 0.98)
    full = run_sweep(FlatReader(), window=W, trials=5, log=tmp_path / "full.jsonl", q=q)
    log = tmp_path / "killed.jsonl"

    class Killed(Exception):
        pass

    def kill_after(k: int):
        seen = []

        def on_call(_record: dict) -> None:
            seen.append(1)
            if len(seen) == k:
                raise Killed

        return on_call

    with pytest.raises(Killed):
        run_sweep(FlatReader(), window=W, trials=5, log=log, q=q, on_call=kill_after(17))
    with log.open("a") as handle:  # a torn line, as a kill mid-write leaves it
        handle.write('{"type": "call", "key": "0.9:coord_first:')
    with pytest.raises(ResumeNeeded, match="pass --resume"):
        run_sweep(FlatReader(), window=W, trials=5, log=log, q=q)
    resumed = run_sweep(FlatReader(), window=W, trials=5, log=log, q=q, resume=True)
    keys = [c["key"] for c in _calls(log)]
    assert len(keys) == len(set(keys)) == len(q) * len(ORDERS) * 5
    assert {c["key"] for c in _calls(log)} == {r["key"] for r in full}
    assert [(r["key"], r["score"], r["answer"]) for r in resumed] == [
        (r["key"], r["score"], r["answer"]) for r in full]
    assert any(r["category"] == "guess" for r in full)  # the seeded guesses were exercised


def chat_factory(base_url: str, **settings: Any) -> ChatPolicyFactory:
    """The one builder of a chat run's clients, as the command line makes it."""
    return ChatPolicyFactory(ChatSettings(base_url=base_url, model="fake-model", **settings))


def test_llm_sweep_against_fake_server(tmp_path: Path) -> None:
    answers = iter(['{"answer": 1}', "not json", '{"answer": 9}', '{"pick": 0}'])

    def respond(_request: dict) -> Reply:
        return Reply(content=next(answers, '{"answer": 2}'))

    with FakeServer(respond) as server:
        policy = LLMAnswer(chat_factory(server.base_url))
        records = run_sweep(policy, window=700, trials=2, log=tmp_path / "calls.jsonl",
                            q=(0.0, 0.9))
        policy.close()
        sent = server.requests
    assert len(records) == len(sent) == 8
    for request in sent:  # the artifact's layout: context as system, the task last as user
        system, user = request["messages"]
        assert system["role"] == "system" and user["role"] == "user"
        assert _has_block(system["content"]) and "## request" not in system["content"]
        assert "## request" in user["content"] and not _has_block(user["content"])
        assert count(system["content"]) + count(user["content"]) == 700
    assert [r["category"] for r in records[:4]] == [
        "ok", "invalid_json", "invalid_action", "invalid_schema"]
    assert all(r["score"] == 0 and r["answer"] is None for r in records[1:4])
    assert all(r["score"] == int(r["answer"] == r["correct"]) for r in records)
    assert all(r["model"] == "fake-model" and r["tokens"] == 700 for r in records)
    assert all(isinstance(r["provider_prompt_tokens"], int)
               and r["provider_completion_tokens"] >= 1 for r in records)
    out = write_outputs(records, tmp_path, 700, resamples=20)
    assert out.fits["fake-model"]["categories"]["invalid_json"] == 1
    assert out.plot.exists() and read_rows(out.csv)[0]["model"] == "fake-model"
    made = json.loads((tmp_path / "provenance.json").read_text())
    assert made["run"] == {"command": "rcwt sweep", "window": 700, "resamples": 20,
                           "models": ["fake-model"], "calls": len(records)}
    assert made["diagym_version"] and "git_commit" in made


def test_llm_sweep_without_a_system_role_sends_one_message_ending_with_the_task(
        tmp_path: Path) -> None:
    with FakeServer(lambda _r: Reply(content='{"answer": 0}')) as server:
        policy = LLMAnswer(chat_factory(server.base_url, system_role=False))
        run_sweep(policy, window=700, trials=1, log=tmp_path / "calls.jsonl", q=(0.5,),
                  orders=("coord_first",))
        policy.close()
        (request,) = server.requests
    (message,) = request["messages"]
    assert message["role"] == "user" and count(message["content"]) == 700
    assert _has_block(message["content"].split("## request")[0])
    assert not _has_block(message["content"].split("## request")[1])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="diagym")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_rcwt_fit_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    p = np.repeat(np.linspace(0.0, 0.95, 20), 10)
    score = (rng.random(p.size) < 1 / (1 + np.exp(40 * (p - 0.8)))).astype(int)
    path = tmp_path / "synthetic.csv"
    body = "".join(f"m,{a},{b}\n" for a, b in zip(p, score, strict=True))
    path.write_text("model,p,score\n" + body)
    args = _parser().parse_args(["rcwt", "fit", str(path), "--window", "4096", "--json"])
    assert args.func(args) == 0
    table = json.loads(capsys.readouterr().out)
    assert abs(table["m"]["theta"] - 4096 * 0.2) < 4096 * 0.05
    args = _parser().parse_args(["rcwt", "fit", str(path), "--window", "4096"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "theta" in text and "piecewise_linear" in text


def test_rcwt_fit_cli_on_the_papers_table_names_every_family_and_the_winner(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The paper's Table A1 as input: every model gets every family's R^2 and AIC, theta or
    the reasons it is not identified, and the lowest-AIC family (no expected values here)."""
    table_a1 = Path(__file__).resolve().parents[2] / "docs" / "rcwt" / "table_a1.csv"
    args = _parser().parse_args(["rcwt", "fit", str(table_a1), "--window", "4096", "--json"])
    assert args.func(args) == 0
    table = json.loads(capsys.readouterr().out)
    assert len(table) == 3
    for entry in table.values():
        families = entry["families"]
        assert set(families) == {"logistic", "power_law", "exponential", "quadratic",
                                 "piecewise_linear"}
        for fam in families.values():
            assert isinstance(fam["r2"], float) and isinstance(fam["aic"], float)
            assert (fam["params"] is None) == (not fam["identified"]) == bool(
                fam["not_identified"])
        assert entry["best_family"] == min(families, key=lambda f: families[f]["aic"])
        assert families[entry["best_family"]]["delta_aic"] == 0.0
        assert (entry["theta"] is None) == (not entry["identified"])
        if entry["theta"] is not None:
            assert entry["theta"] == pytest.approx(theta(entry["p0"], 4096))


def test_rcwt_sweep_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["rcwt", "sweep", "--policy", "flat-reader", "--window", "700", "--trials", "3",
            "--q", "0", "50", "98", "--out", str(tmp_path), "--resamples", "20"]
    args = _parser().parse_args(argv)
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "coord_first" in text and "reason_first" in text and "theta" in text
    for name in ("calls.jsonl", "sweep.csv", "fits.json", "fits.png"):
        assert (tmp_path / name).exists()
    capsys.readouterr()
    # the log exists and --resume was not given: the CLI's error boundary prints the line
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"diagym rcwt sweep: error: log {tmp_path / 'calls.jsonl'} exists: pass --resume to "
        "continue it (in Python: pass resume=True), or choose another file"]
    args = _parser().parse_args([*argv, "--resume"])
    assert args.func(args) == 0
    assert len(_calls(tmp_path / "calls.jsonl")) == 3 * 2 * 3


def test_workflow_sweep_assembles_every_decision_to_w_and_resumes(tmp_path: Path) -> None:
    """StatefulWorkflow under RCWT budgets: one episode per (q, order, seed), every prompt
    exactly W tokens (checked on what the server received), a rerun plays nothing again."""
    from diagym.analysis.studies.rcwt.run import run_workflow_sweep
    from diagym.envs._core.tokens import count
    from tests.llm_fake_server import FakeServer, Reply

    log = tmp_path / "wf.jsonl"
    with FakeServer(lambda _r: Reply(content='{"operation": 0, "candidate": 0}')) as server:
        settings = ChatPolicyFactory(ChatSettings(base_url=server.base_url, model="fake",
                                                  response_format="json_schema",
                                                  system_role=False))
        records = run_workflow_sweep(settings, window=1200, trials=2, log=log,
                                     q=(0.0, 0.5), orders=("coord_first", "reason_first"))
        assert len(records) == 8
        for request in server.requests:
            assert sum(count(m["content"]) for m in request["messages"]) == 1200
        calls = len(server.requests)
        again = run_workflow_sweep(settings, window=1200, trials=2, log=log,
                                   q=(0.0, 0.5), orders=("coord_first", "reason_first"),
                                   resume=True)
        assert len(server.requests) == calls
    assert [r["key"] for r in again] == [r["key"] for r in records]
    for record in records:
        assert record["c"] == int(record["q"] * (1200 - record["u"]))
        assert record["u"] + record["c"] + record["r"] == 1200


def test_the_sweeps_chat_is_the_factorys_cached_and_priced(tmp_path: Path) -> None:
    """The DACS sweep's client is made by the chat policy factory like every chat run's: with
    a cache directory a second sweep into a new log asks the server nothing and its lines say
    so; every call is priced on the price table given."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"fake-model": {"input": 1.0, "output": 1.0}}}))
    with FakeServer(lambda _r: Reply(content='{"answer": 0}')) as server:
        factory = chat_factory(server.base_url, cache_dir=str(tmp_path / "cache"),
                               prices=str(prices))
        kwargs = {"window": 700, "trials": 2, "q": (0.5,), "orders": ("coord_first",)}
        first = run_sweep(LLMAnswer(factory), log=tmp_path / "one.jsonl", **kwargs)
        asked = len(server.requests)
        again = run_sweep(LLMAnswer(factory), log=tmp_path / "two.jsonl", **kwargs)
        assert len(server.requests) == asked == 2
    assert [r["cache"] for r in first] == ["miss", "miss"]
    assert [r["cache"] for r in again] == ["hit", "hit"]
    assert [r["answer"] for r in again] == [r["answer"] for r in first]
    assert all(r["cost_usd"] > 0 for r in first)
    assert all(r["cost_usd"] == 0 for r in again)  # a cache hit costs nothing
