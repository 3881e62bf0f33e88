"""Chat prompts for DACSSteering-v0: the orchestrator's window, as seed 002's model saw it.

The env already assembles the window (requester's full context and steering history plus
registry entries, or the flat or registry-only variants) under its token budget W, exactly
counted; this renderer only
adds the orchestrator's instructions and the answer format {"answer": <option index>}, so the
model sees what the reference controllers parse and nothing more.
"""

from __future__ import annotations

from typing import Any

from envs._core.tokens import count
from envs.dacs.scenario import N_OPTIONS
from llm_policies.prompts.workflow import Rendered

# A text answer names an option, never a focus action (those stay with non-text policies),
# so its bound is the option count whatever the env's action space.
ANSWER_KEY = "answer"
ANSWER_FIELDS: tuple[tuple[str, int], ...] = ((ANSWER_KEY, N_OPTIONS),)

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "integer", "minimum": 0}},
    "required": ["answer"],
    "additionalProperties": False,
}

INSTRUCTIONS = (
    "You are the orchestrator of several software agents working in parallel. An agent has "
    "sent a steering request. The window below holds agent contexts: a full context "
    "(task, status lines, facts, decisions already given, the agent's recent steering "
    "exchanges as history lines) or a short registry entry per agent, then the request "
    "with its numbered options. Answer for the requesting agent, "
    "using that agent's own facts (or the decision the request says it must match), not "
    "another agent's. Reply with exactly one JSON object {\"answer\": <option index>} and "
    "nothing else."
)


class DacsRenderer:
    """The window of the pending request, under the orchestrator's instructions."""

    schema = ANSWER_SCHEMA
    fields = ANSWER_FIELDS

    def __init__(self, system_role: bool = True) -> None:
        self.system_role = system_role
        self._instruction_tokens = count(INSTRUCTIONS)

    def describe(self) -> dict[str, Any]:
        return {"renderer": "dacs", "system_role": self.system_role}

    def reset(self) -> None:
        pass

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> None:
        pass  # the window itself carries the decisions already given

    def render(self, observation: Any) -> Rendered:
        window = str(observation["window"])
        question = window + "\nYour answer (one JSON object):"
        if self.system_role:
            messages = [{"role": "system", "content": INSTRUCTIONS},
                        {"role": "user", "content": question}]
            return Rendered(messages, self._instruction_tokens + count(question))
        content = INSTRUCTIONS + "\n\n" + question
        return Rendered([{"role": "user", "content": content}], count(content))
