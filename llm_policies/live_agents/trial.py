"""One phase-4 trial: live agents step in turn, steer the orchestrator, and are judged.

Each agent is a chat conversation of its own. In a step every agent still working takes one
turn; a turn with `[[STEER: q]]` sends q to the orchestrator (a diagym Policy,
orchestrator.py), whose answer is the agent's next user message, and a turn with `[[DONE]]`
ends the agent. The orchestrator's window is
built from the agents' own output: in focus mode the requester's full block (task, recent
turns, steering history) and the other agents' registry entries (task and the start of
their latest turn, at most the DACS registry budget); in flat mode every agent's full block.
Answers are assigned to the agent's rubrics in order, then keyword-scored and judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from diagym.controllers.policy import EpisodeAborted, Policy
from diagym.envs._core import tokens
from diagym.envs.dacs.window import HISTORY_TURNS, REGISTRY_MAX_TOKENS
from diagym.llm_policies.client.transport import ChatResult
from diagym.llm_policies.live_agents import protocol
from diagym.llm_policies.live_agents.orchestrator import CallLines
from diagym.llm_policies.live_agents.scenarios import AgentSpec, LiveScenario

CONDITIONS = ("dacs", "flat")
RECENT_TURNS = 3


class Chat(Protocol):
    def complete(self, messages: list[dict[str, Any]]) -> ChatResult: ...


CallSink = Callable[[dict[str, Any]], None]


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
    sink({"kind": "call", **tags, "status": result.status, "error": result.error,
          "text": result.text, "prompt_tokens": result.prompt_tokens,
          "completion_tokens": result.completion_tokens, "cost_usd": result.cost_usd,
          "cache": result.cache, "latency_s": round(result.latency_s, 3)})
    return result.text if result.status == "ok" else ""


def _answer(orchestrator: Policy, lines: CallLines | None, sink: CallSink,
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
        sink({"kind": "call", "role": "orchestrator", **tags, "status": status, "error": error,
              "text": answer, "prompt_tokens": None, "completion_tokens": None,
              "cost_usd": None, "cache": None, "latency_s": None,
              "policy": type(orchestrator).__name__})
    return answer


def run_trial(scenario: LiveScenario, condition: str, trial: int, *, agent: Chat,
              orchestrator: Policy, judge: Chat, sink: CallSink, max_steps: int = 6,
              max_steers: int = 3,
              judge_format: str = "tags") -> tuple[list[protocol.Decision], dict[str, Any]]:
    """Play one trial; returns its decisions and trial figures (steps, DONE and STEER
    counts). Every call goes to `sink` as a call line. The orchestrator is reset with
    seed=trial."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS} (got {condition!r})")
    orchestrator.reset(seed=trial)
    lines = CallLines(sink) if callable(getattr(orchestrator, "attach_log", None)) else None
    if lines is not None:
        orchestrator.attach_log(lines)
    states = [_AgentState(spec, [
        {"role": "system", "content": protocol.agent_system_prompt(spec, max_steers)},
        {"role": "user", "content": "Begin your task."}]) for spec in scenario.agents]
    asked: list[tuple[int, int, str, str, int]] = []
    turns = 0
    for step in range(max_steps):
        for i, state in enumerate(states):
            if state.done:
                continue
            text = _call(agent, state.messages, sink, role="agent", condition=condition,
                         trial=trial, agent=state.spec.agent_id, step=step)
            turns += 1
            state.outputs.append(text)
            state.messages.append({"role": "assistant", "content": text})
            question = protocol.steer_question(text)
            if protocol.is_done(text) and question is None:
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
                    "condition": condition}, condition=condition, trial=trial,
                    agent=state.spec.agent_id, step=step)
                asked.append((i, state.steers, question, answer, tokens.count(shown)))
                state.steers += 1
                state.history.append((question, answer))
                reply = f"Orchestrator: {answer}"
            state.messages.append({"role": "user", "content": reply})
        if all(s.done for s in states):
            break
    if lines is not None:
        orchestrator.attach_log(None)
    decisions = [_judged(scenario, states, condition, trial, item, judge, sink, judge_format)
                 for item in asked]
    figures = {"turns": turns, "done": sum(s.done for s in states),
               "steers": len(asked), "agents": scenario.n_agents}
    return decisions, figures


def _judged(scenario: LiveScenario, states: list[_AgentState], condition: str, trial: int,
            item: tuple[int, int, str, str, int], judge: Chat, sink: CallSink,
            judge_format: str) -> protocol.Decision:
    i, index, question, answer, context = item
    spec = states[i].spec
    rubric = spec.rubrics[index] if index < len(spec.rubrics) else None
    raw, verdict = "", None
    if rubric is not None:
        raw = _call(judge, [{"role": "system", "content": protocol.judge_system(judge_format)},
                            {"role": "user", "content": protocol.judge_prompt(
                                spec, question, answer, rubric)}], sink, role="judge",
                    condition=condition, trial=trial, agent=spec.agent_id, decision=index)
        verdict = protocol.parse_verdict(raw, judge_format)
    return protocol.Decision(
        condition=condition, trial=trial, agent_id=spec.agent_id, index=index,
        question=question, answer=answer, topic=rubric.topic if rubric else None,
        keyword=protocol.keyword_correct(answer, rubric) if rubric else None,
        judge=verdict, judge_raw=raw,
        contaminated=protocol.contaminated(answer, scenario, spec.agent_id),
        context_tokens=context)


class FoldSystem:
    """A chat whose model takes no system role (Gemma's template): the system text opens
    the first user message instead, as the project's harnesses do for such models."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def complete(self, messages: list[dict[str, Any]]) -> ChatResult:
        if not messages or messages[0]["role"] != "system":
            return self.chat.complete(messages)
        system, rest = messages[0]["content"], list(messages[1:])
        if rest and rest[0]["role"] == "user":
            rest[0] = {"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}
        else:
            rest.insert(0, {"role": "user", "content": system})
        return self.chat.complete(rest)
