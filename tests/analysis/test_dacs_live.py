"""Seed 002's phase 4 (analysis/studies/dacs_live) played through a fake server in every role
(agents that steer at scripted steps, an orchestrator whose answer depends on its window, a
judge with scripted verdicts); the figures are checked against values computed by hand from the
script."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pytest

from diagym.analysis.studies.dacs_live import judge as protocol
from diagym.analysis.studies.dacs_live.design import SCENARIOS
from diagym.analysis.studies.dacs_live.report import (
    cohen_kappa,
    condition_row,
    condition_rows,
)
from diagym.analysis.studies.dacs_live.run import play_trials
from diagym.analysis.studies.dacs_live.trial import run_trial
from diagym.controllers.runlog import RunLog, call_totals
from diagym.envs._core import tokens
from diagym.llm_policies.client.transport import ChatClient
from diagym.llm_policies.steering.orchestrator import ORCHESTRATOR_SYSTEM, llm_orchestrator
from tests.llm_fake_server import FakeServer, Reply

pytestmark = pytest.mark.timeout(120)

AGENT_SCRIPT = {
    "a1": ["[[STEER: Q1 of a1]]", "[[STEER: Q2 of a1]]", "[[STEER: Q3 of a1]]", "[[DONE]]"],
    "a2": ["[[STEER: Q1 of a2]]", "Finished. [[DONE]]"],
    "a3": ["Reading the files.", "[[STEER: Q1 of a3]]", "[[DONE]]"],
}
# (window kind, requester, question) -> the orchestrator's answer
ANSWERS = {
    ("dacs", "a1", "Q1 of a1"): "Use inorder traversal.",
    ("dacs", "a1", "Q2 of a1"): "Ignore duplicates.",
    ("dacs", "a2", "Q1 of a2"): "Cite Vaswani et al. 2017.",
    ("dacs", "a3", "Q1 of a3"): "Detect the encoding with chardet.",
    ("flat", "a1", "Q1 of a1"): "Use inorder traversal.",
    ("flat", "a1", "Q2 of a1"): "Consider Longformer.",
    ("flat", "a2", "Q1 of a2"): "Cite Vaswani, the original paper.",
    ("flat", "a3", "Q1 of a3"): "Use a plain approach.",
}
VERDICTS = {
    "Use inorder traversal.": "<reason>r</reason>\n<verdict>CORRECT</verdict>",
    "Ignore duplicates.": "<reason>r</reason>\n<verdict>CORRECT</verdict>",
    "Cite Vaswani et al. 2017.": "<reason>r</reason>\n<verdict>INCORRECT</verdict>",
    "Detect the encoding with chardet.": "It looks fine to me.",
    "Consider Longformer.": "<verdict>INCORRECT</verdict>",
    "Cite Vaswani, the original paper.": "<verdict>correct</verdict>",
    "Use a plain approach.": "<verdict>CORRECT</verdict>",
}


def respond(request: dict[str, Any]) -> Reply:
    messages = request["messages"]
    system = messages[0]["content"]
    if system.startswith("You are agent"):
        agent = system.split()[3].rstrip(",")
        turn = sum(m["role"] == "assistant" for m in messages)
        return Reply(content=AGENT_SCRIPT[agent][turn])
    if system.startswith(protocol.JUDGE_RULES):
        answer = re.search(r"Orchestrator's answer:\n(.*?)\n\n", messages[1]["content"]).group(1)
        # a programmed orchestrator's answers (KeywordEcho) are not scripted: judged correct,
        # not a server error that the client retries with backoff
        verdict = VERDICTS.get(answer, "<verdict>CORRECT</verdict>")
        tagged = protocol.VERDICT_RE.search(verdict)
        if system == protocol.judge_system("json") and tagged:  # the same verdict as JSON
            verdict = json.dumps({"verdict": tagged.group(1).upper()})
        return Reply(content=verdict)
    window = messages[-1]["content"]  # the json harness's one window, the chat harness's latest
    requester, question = re.search(r"Request from agent (a\d): (.*)\n", window).groups()
    kind = "dacs" if "(registry)" in window else "flat"
    return Reply(content=ANSWERS[(kind, requester, question)])


def chats(server: FakeServer) -> dict[str, Any]:
    """Agent and judge chat clients, and the orchestrator: an LLMPolicy in the json harness."""
    made: dict[str, Any] = {role: ChatClient(base_url=server.base_url, model="m", max_tokens=64,
                                             api_key="k", max_retries=0)
                            for role in ("agent", "orchestrator", "judge")}
    made["orchestrator"] = llm_orchestrator(made["orchestrator"])
    return made


@pytest.fixture
def server() -> Any:
    with FakeServer(respond) as fake:
        yield fake


@pytest.mark.parametrize("judge_format", protocol.JUDGE_FORMATS)
def test_a_scripted_trial_gives_the_hand_computed_figures(server: FakeServer,
                                                          judge_format: str) -> None:
    scenario = SCENARIOS["ra1_n3"]
    clients = chats(server)
    calls: list[dict[str, Any]] = []
    figures = {}
    decisions = []
    for condition in ("dacs", "flat"):
        made, figures[condition] = run_trial(
            scenario, condition, 0, agent=clients["agent"], orchestrator=clients["orchestrator"],
            judge=clients["judge"], sink=calls.append, max_steps=6, max_steers=2,
            judge_format=judge_format)
        decisions += made
    assert server.errors == []
    # a1: 4 turns, a2: 2, a3: 3; a1's third STEER is over the cap and reaches no orchestrator
    assert figures["dacs"] == {"turns": 9, "done": 3, "steers": 4, "agents": 3}
    assert [c["role"] for c in calls].count("orchestrator") == 8
    assert [c["role"] for c in calls].count("judge") == 8
    refused = [r for r in server.requests if r["messages"][0]["content"].startswith(
        "You are agent a1") and len(r["messages"]) == 8]
    assert refused and refused[0]["messages"][-1]["content"].startswith("No more questions")
    topics = [(d.condition, d.agent_id, d.index, d.topic) for d in decisions]
    assert topics[:4] == [("dacs", "a1", 0, "traversal_order"),
                          ("dacs", "a2", 0, "primary_source"),
                          ("dacs", "a1", 1, "duplicate_handling"),
                          ("dacs", "a3", 0, "encoding_strategy")]
    dacs = condition_row(decisions, "dacs", 1, scenario.n_rubrics)
    flat = condition_row(decisions, "flat", 1, scenario.n_rubrics)
    # dacs: judge C, I, C on the three parseable verdicts (a3's is unparseable); keywords all hit
    assert dacs["unparseable"] == 1
    assert dacs["judge_accuracy"] == pytest.approx(2 / 3)
    assert dacs["keyword_accuracy"] == 1.0
    assert dacs["kappa"] == pytest.approx(0.0)  # keywords constant: chance = observed = 2/3
    assert dacs["contamination"] == 0.0
    assert dacs["coverage"] == pytest.approx(4 / 9)
    # flat: judge (a1q1, a2q1, a1q2, a3q1) = 1, 1, 0, 1; keywords 1, 1, 0, 0
    assert flat["unparseable"] == 0
    assert flat["judge_accuracy"] == pytest.approx(3 / 4)
    assert flat["keyword_accuracy"] == pytest.approx(2 / 4)
    assert flat["kappa"] == pytest.approx((3 / 4 - 1 / 2) / (1 - 1 / 2))
    assert flat["contamination"] == pytest.approx(1 / 4)  # "Longformer" is a2's keyword
    assert flat["kappa_low"] <= flat["kappa"] <= flat["kappa_high"]
    # context tokens: the windows the orchestrator received, counted independently
    windows = [r["messages"][1]["content"] for r in server.requests
               if r["messages"][0]["content"] == ORCHESTRATOR_SYSTEM]
    assert [d.context_tokens for d in decisions] == [tokens.count(w) for w in windows]
    assert flat["context_tokens"] > dacs["context_tokens"]


def test_the_study_resumes_without_repeating_a_trial(server: FakeServer, tmp_path) -> None:
    scenario = SCENARIOS["ra1_n3"]
    log = tmp_path / "phase4.jsonl"

    def roles(role: str, seed: int, _scenario: Any) -> Any:
        return chats(server)[role]  # a trial closes its clients when it ends

    with RunLog(log) as opened:
        entries = play_trials(scenario, 2, roles, opened, max_steers=2)
    seen = len(server.requests)
    with RunLog(log, resume=True) as opened:
        again = play_trials(scenario, 2, roles, opened, max_steers=2)
    assert len(server.requests) == seen
    assert again == entries
    rows = {r["condition"]: r for r in condition_rows(scenario, again)}
    assert rows["flat"]["coverage"] == pytest.approx(8 / 18)
    assert rows["flat"]["kappa"] == pytest.approx(0.5)


def test_unparseable_and_double_verdicts_are_not_guessed() -> None:
    assert protocol.parse_verdict("<verdict>CORRECT</verdict>") is True
    assert protocol.parse_verdict("<verdict> incorrect </verdict>") is False
    assert protocol.parse_verdict("CORRECT") is None
    assert protocol.parse_verdict("<verdict>CORRECT</verdict><verdict>INCORRECT</verdict>") \
        is None


def test_kappa_matches_the_definition_and_is_undefined_for_one_label() -> None:
    a = np.array([1, 1, 0, 0, 1], dtype=bool)
    b = np.array([1, 0, 0, 0, 1], dtype=bool)
    po, pa, pb = 4 / 5, 3 / 5, 2 / 5
    pe = pa * pb + (1 - pa) * (1 - pb)
    assert cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe))
    assert math.isnan(cohen_kappa(np.ones(3, bool), np.ones(3, bool)))
    assert cohen_kappa(a, a) == 1.0


class KeywordEcho:
    """A programmed orchestrator (a Policy, no model): for every agent whose full block is in
    its window it names the first keyword of that agent's k-th rubric, k the requester's
    answered requests so far. On a focus window only the requester's block is full, so it
    answers right and clean; on a flat window it also names the others' keywords."""

    def __init__(self, scenario: Any) -> None:
        self.agents = {a.agent_id: a for a in scenario.agents}
        self.seeds: list[int | None] = []

    def reset(self, *, seed: int | None = None) -> None:
        self.seeds.append(seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        window = observation["window"]
        assert info["condition"] == observation["condition"]
        block = window.split(f"## Agent {observation['requester']} (full context)")[1]
        k = block.split("## Agent")[0].count("\nQ: ")
        full = re.findall(r"## Agent (a\d) \(full context\)", window)
        return " ".join(self.agents[a].rubrics[k].keywords[0] for a in full) + "."


def test_a_programmed_policy_orchestrates_and_flat_windows_contaminate(
        server: FakeServer) -> None:
    scenario = SCENARIOS["ra1_n3"]
    clients = chats(server)
    calls: list[dict[str, Any]] = []
    rows = {}
    for condition in ("dacs", "flat"):
        policy = KeywordEcho(scenario)
        made, _ = run_trial(scenario, condition, 7, agent=clients["agent"], orchestrator=policy,
                            judge=clients["judge"], sink=calls.append, max_steps=6,
                            max_steers=2)
        assert policy.seeds == [7]
        rows[condition] = condition_row(made, condition, 1, scenario.n_rubrics)
        if condition == "dacs":  # a1 q1, a2 q1, a1 q2, a3 q1: each requester's own keyword
            assert [d.answer for d in made] == ["inorder.", "vaswani.", "ignore.", "detect."]
    # the requesters' own keyword is in every answer; flat adds the other two agents'
    assert rows["dacs"]["keyword_accuracy"] == rows["flat"]["keyword_accuracy"] == 1.0
    assert rows["dacs"]["contamination"] == 0.0
    assert rows["flat"]["contamination"] == 1.0
    lines = [c for c in calls if c["role"] == "orchestrator"]
    assert len(lines) == 8 and {c["policy"] for c in lines} == {"KeywordEcho"}
    assert all(c["status"] == "ok" and c["response"].endswith(".") for c in lines)


def test_the_chat_harness_orchestrator_keeps_one_conversation_per_trial(
        server: FakeServer) -> None:
    scenario = SCENARIOS["ra1_n3"]
    clients = chats(server)
    by_harness = {}
    for harness in ("json", "chat"):
        clients["orchestrator"] = llm_orchestrator(
            ChatClient(base_url=server.base_url, model="m", max_tokens=64, api_key="k",
                       max_retries=0), harness=harness)
        start = len(server.requests)
        made, _ = run_trial(scenario, "dacs", 0, agent=clients["agent"],
                            orchestrator=clients["orchestrator"], judge=clients["judge"],
                            sink=lambda _line: None, max_steers=2)
        by_harness[harness] = [(d.agent_id, d.answer, d.judge) for d in made]
        sent = [len(r["messages"]) for r in server.requests[start:]
                if not r["messages"][0]["content"].startswith(("You are agent",
                                                               protocol.JUDGE_RULES))]
        # json: system + the window each time; chat: the conversation grows by two a request
        assert sent == ([2] * 4 if harness == "json" else [2, 4, 6, 8])
    assert by_harness["json"] == by_harness["chat"]


def test_the_study_log_is_a_run_log_locked_and_a_cut_off_unit_counts_once(
        server: FakeServer, tmp_path) -> None:
    """Every line is a run-log entry (a "type", the call lines CallLine's fields); a second
    writer is refused while the study holds the log; a unit whose trial line a kill cut off
    plays again and its earlier calls are voided, so call_totals counts each call once."""
    from diagym.controllers.callline import MODEL_FIELDS
    from diagym.controllers.runlog import LogInUse

    scenario = SCENARIOS["ra1_n3"]
    log = tmp_path / "phase4.jsonl"

    def roles(role: str, seed: int, _scenario: Any) -> Any:
        return chats(server)[role]

    with RunLog(log) as opened:
        with pytest.raises(LogInUse):
            RunLog(log, resume=True)
        play_trials(scenario, 1, roles, opened, max_steers=2)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [line for line in lines if line["type"] == "call"]
    assert all(set(MODEL_FIELDS) <= set(line) for line in calls)
    assert len(calls) == 2 * (9 + 4 + 4)  # per condition: agent turns, answers, verdicts
    assert call_totals(log).calls == len(calls)
    # cut the flat unit's trial line off, as a kill between its calls and its trial would
    cut = next(i for i, line in enumerate(lines) if line["type"] == "trial"
               and line["condition"] == "flat")
    log.write_text("".join(json.dumps(line) + "\n" for line in lines[:cut]))
    before = len(server.requests)
    with RunLog(log, resume=True) as opened:
        again = play_trials(scenario, 1, roles, opened, max_steers=2)
    assert len(server.requests) - before == 17  # the flat unit alone played again
    assert [e["condition"] for e in again] == ["dacs", "flat"]
    totals = call_totals(log)
    assert (totals.calls, totals.replayed) == (len(calls), 17)


def test_a_resume_with_other_settings_is_refused_naming_them(server: FakeServer,
                                                             tmp_path) -> None:
    from diagym.controllers.runlog import RunChanged

    scenario = SCENARIOS["ra1_n3"]
    log = tmp_path / "phase4.jsonl"

    def roles(role: str, seed: int, _scenario: Any) -> Any:
        return chats(server)[role]

    with RunLog(log) as opened:
        play_trials(scenario, 1, roles, opened, max_steers=2)
    with RunLog(log, resume=True) as opened, pytest.raises(RunChanged, match=(
            r"holds the run named 'ra1_n3' with other settings \(settings.max_steers: 2 -> 3\)")):
        play_trials(scenario, 1, roles, opened, max_steers=3)


def test_roles_with_a_cache_replay_a_study_without_asking_again(server: FakeServer,
                                                                tmp_path) -> None:
    """LiveRoles' clients are priced and cached the way every chat run's are
    (analysis/llm_runs.py priced_and_cached): the same trials into a new log ask nothing."""
    from diagym.analysis.studies.dacs_live.roles import ROLES, LiveRoles

    roles = LiveRoles(endpoints={role: (server.base_url, "m") for role in ROLES},
                      judge_format="tags", cache_dir=str(tmp_path / "cache"))
    scenario = SCENARIOS["ra1_n3"]
    with RunLog(tmp_path / "one.jsonl") as log:
        first = play_trials(scenario, 1, roles, log, max_steers=2)
    asked = len(server.requests)
    with RunLog(tmp_path / "two.jsonl") as log:
        again = play_trials(scenario, 1, roles, log, max_steers=2)
    assert len(server.requests) == asked  # fewer than the 34 calls: repeats hit already
    assert [e["decisions"] for e in again] == [e["decisions"] for e in first]
    lines = [json.loads(line) for line in (tmp_path / "two.jsonl").read_text().splitlines()]
    assert {line["cache"] for line in lines if line["type"] == "call"} == {"hit"}
