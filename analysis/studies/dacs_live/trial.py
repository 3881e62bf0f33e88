"""One phase-4 trial: live agents step in turn, steer the orchestrator, and are judged.

Each agent is a chat conversation of its own. In a step every agent still working takes one
turn; a turn with `[[STEER: q]]` sends q to the orchestrator (a diagym Policy,
orchestrator.py), whose answer is the agent's next user message, and a turn with `[[DONE]]`
ends the agent. The orchestrator's window is
built from the agents' own output: in focus mode the requester's full block (task, recent
turns, steering history) and the other agents' registry entries (task and the start of
their latest turn, at most the DACS registry budget); in flat mode every agent's full block.
Answers are assigned to the agent's rubrics in order, then keyword-scored and judged.

Every model call becomes one run-log call line (controllers/callline.py CallLine) with the
trial's tags (role, condition, trial, agent, step or decision) and the unit's episode key in
its context: the agents' and the judge's written here, the orchestrator's written by the
policy itself when it is an LLMPolicy (through `TrialLines`, its attached log), else one
here for its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diagym.analysis.studies.dacs_live import judge as judging
from diagym.analysis.studies.dacs_live.design import CONDITIONS, AgentSpec, LiveScenario
from diagym.controllers.callline import CallLine
from diagym.controllers.policy import EpisodeAborted, Policy
from diagym.envs._core import tokens
from diagym.envs.dacs.window import HISTORY_TURNS, REGISTRY_MAX_TOKENS
from diagym.llm_policies.client.results import ChatResult
from diagym.llm_policies.steering.agent_turns import (
    Chat,
    agent_system_prompt,
    is_done,
    steer_question,
)

RECENT_TURNS = 3

CallSink = Callable[[dict[str, Any]], None]  # takes one call line's entry


class TrialLines:
    """An LLMPolicy's attached log during a trial: its call lines go to the trial's sink with
    the trial's tags added to their context, keyed by the unit's episode key."""

    def __init__(self, sink: CallSink, episode_key: str | None) -> None:
        self.sink = sink
        self.episode_key = episode_key
        self.tags: dict[str, Any] = {}
        self.written = 0

    def key(self, seed: int) -> str | None:
        return self.episode_key

    def write(self, line: dict[str, Any]) -> None:
        self.written += 1
        self.sink({**line, **self.tags})


def result_line(result: ChatResult, context: dict[str, Any]) -> dict[str, Any]:
    """The call line of one chat call."""
    return CallLine(
        status=result.status, error=result.error, http_status=result.http_status,
        response=result.text, provider_prompt_tokens=result.prompt_tokens,
        provider_completion_tokens=result.completion_tokens, latency_s=result.latency_s,
        retries=result.retries, response_format=result.response_format,
        context={**context, "cost_usd": result.cost_usd, "cache": result.cache}).entry()


@dataclass
class _AgentState:
    spec: AgentSpec
    messages: list[dict[str, Any]]
    outputs: list[str] = field(default_factory=list)
    history: list[tuple[str, str]] = field(default_factory=list)
    steers: int = 0
    done: bool = False


def _full_block(state: _AgentState) -> str:
    lines = [f"## Agent {state.spec.agent_id} (full context)", f"Task: {state.spec.task}",
             "Recent output:"]
    lines += [" ".join(o.split()) for o in state.outputs[-RECENT_TURNS:]] or ["(none yet)"]
    lines.append("Steering history:")
    lines += [f"Q: {q} | A: {' '.join(a.split())}" for q, a in state.history[-HISTORY_TURNS:]]
    return "\n".join(lines) + "\n"


def _registry_block(state: _AgentState) -> str:
    latest = " ".join(state.outputs[-1].split()) if state.outputs else "(none yet)"
    text = (f"## Agent {state.spec.agent_id} (registry)\nTask: {state.spec.task}\n"
            f"Latest: {latest}")
    ids = tokens.encode(text)
    if len(ids) > REGISTRY_MAX_TOKENS:
        text = tokens.decode(ids[:REGISTRY_MAX_TOKENS])
    return text + "\n"


def window(states: list[_AgentState], requester: int, condition: str, question: str) -> str:
    blocks = [_full_block(s) if condition == "flat" or i == requester else _registry_block(s)
              for i, s in enumerate(states)]
    return ("\n".join(blocks) + f"\nRequest from agent {states[requester].spec.agent_id}: "
            f"{question}\n")


def _call(chat: Chat, messages: list[dict[str, Any]], sink: CallSink, **tags: Any) -> str:
    result = chat.complete(messages)
    sink(result_line(result, tags))
    return result.text if result.status == "ok" else ""


def _answer(orchestrator: Policy, lines: TrialLines | None, sink: CallSink,
            observation: dict[str, Any], **tags: Any) -> str:
    """The orchestrator's answer; its call line is the policy's own (an LLMPolicy writes one
    through `lines`), else one written here, so every answer is a call line."""
    before = lines.written if lines is not None else 0
    if lines is not None:
        lines.tags = {"role": "orchestrator", **tags}
    status, error = "ok", None
    try:
        action = orchestrator.act(observation, {"condition": tags["condition"]})
        answer = action if isinstance(action, str) else str(action)
    except EpisodeAborted as aborted:
        status, error, answer = "error", str(aborted), ""
    if lines is None or lines.written == before:
        sink(CallLine(status=status, error=error, response=answer, context={
            "role": "orchestrator", **tags, "policy": type(orchestrator).__name__}).entry())
    return answer


def run_trial(scenario: LiveScenario, condition: str, trial: int, *, agent: Chat,
              orchestrator: Policy, judge: Chat, sink: CallSink, max_steps: int = 6,
              max_steers: int = 3, judge_format: str = "tags",
              episode_key: str | None = None) -> tuple[list[judging.Decision], dict[str, Any]]:
    """Play one trial; returns its decisions and trial figures (steps, DONE and STEER
    counts). Every call goes to `sink` as a call line, under `episode_key` (the unit's key
    in the run log). The orchestrator is reset with seed=trial."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS} (got {condition!r})")
    lines = (TrialLines(sink, episode_key)
             if callable(getattr(orchestrator, "attach_log", None)) else None)
    if lines is not None:
        orchestrator.attach_log(lines)
    orchestrator.reset(seed=trial)
    tags = {"condition": condition, "trial": trial, "episode_key": episode_key}
    states = [_AgentState(spec, [
        {"role": "system", "content": agent_system_prompt(spec, max_steers)},
        {"role": "user", "content": "Begin your task."}]) for spec in scenario.agents]
    asked: list[tuple[int, int, str, str, int]] = []
    turns = 0
    for step in range(max_steps):
        for i, state in enumerate(states):
            if state.done:
                continue
            text = _call(agent, state.messages, sink, role="agent", **tags,
                         agent=state.spec.agent_id, step=step)
            turns += 1
            state.outputs.append(text)
            state.messages.append({"role": "assistant", "content": text})
            question = steer_question(text)
            if is_done(text) and question is None:
                state.done = True
                continue
            if question is None:
                reply = "Continue with your task."
            elif state.steers >= max_steers:
                reply = "No more questions are allowed; decide yourself and continue."
            else:
                shown = window(states, i, condition, question)
                answer = _answer(orchestrator, lines, sink, {
                    "window": shown, "requester": state.spec.agent_id, "question": question,
                    "condition": condition}, **tags, agent=state.spec.agent_id, step=step)
                asked.append((i, state.steers, question, answer, tokens.count(shown)))
                state.steers += 1
                state.history.append((question, answer))
                reply = f"Orchestrator: {answer}"
            state.messages.append({"role": "user", "content": reply})
        if all(s.done for s in states):
            break
    if lines is not None:
        orchestrator.attach_log(None)
    decisions = [_judged(scenario, states, tags, item, judge, sink, judge_format)
                 for item in asked]
    figures = {"turns": turns, "done": sum(s.done for s in states),
               "steers": len(asked), "agents": scenario.n_agents}
    return decisions, figures


def _judged(scenario: LiveScenario, states: list[_AgentState], tags: dict[str, Any],
            item: tuple[int, int, str, str, int], judge: Chat, sink: CallSink,
            judge_format: str) -> judging.Decision:
    i, index, question, answer, context = item
    spec = states[i].spec
    rubric = spec.rubrics[index] if index < len(spec.rubrics) else None
    raw, verdict = "", None
    if rubric is not None:
        raw = _call(judge, [{"role": "system", "content": judging.judge_system(judge_format)},
                            {"role": "user", "content": judging.judge_prompt(
                                spec, question, answer, rubric)}], sink, role="judge",
                    **tags, agent=spec.agent_id, decision=index)
        verdict = judging.parse_verdict(raw, judge_format)
    return judging.Decision(
        condition=tags["condition"], trial=tags["trial"], agent_id=spec.agent_id, index=index,
        question=question, answer=answer, topic=rubric.topic if rubric else None,
        keyword=judging.keyword_correct(answer, rubric) if rubric else None,
        judge=verdict, judge_raw=raw,
        contaminated=judging.contaminated(answer, scenario, spec.agent_id),
        context_tokens=context)
