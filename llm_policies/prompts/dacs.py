"""Chat prompts for DACSSteering-v0: the orchestrator's window, as seed 002's model saw it.

The env already assembles the window (requester's full context and steering history plus
registry entries, or the flat or registry-only variants) under its token budget W, exactly
counted; this renderer only
adds the orchestrator's instructions and the answer format ({"answer": <option index>}, or a
plain-text reply under keyword scoring), so the model sees what the reference controllers
parse and nothing more.
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
# Seed 002's protocol for free-text replies (DACSSteering with scoring="keywords"): the reply
# names the value, and the env scores it by keywords.
FREE_TEXT_INSTRUCTIONS = INSTRUCTIONS[:INSTRUCTIONS.index("Reply with")] + (
    "Reply in plain text with the value the requesting agent should use."
)


class DacsRenderer:
    """The window of the pending request, under the orchestrator's instructions.

    free_text: the reply is plain text scored by keywords (no JSON fields, no schema), for an
    env whose action is the reply itself.
    """

    def __init__(self, system_role: bool = True, free_text: bool = False) -> None:
        self.system_role = system_role
        self.free_text = free_text
        self.fields: tuple[tuple[str, int], ...] | None = None if free_text else ANSWER_FIELDS
        self.schema: dict[str, Any] | None = None if free_text else ANSWER_SCHEMA
        self._instructions = FREE_TEXT_INSTRUCTIONS if free_text else INSTRUCTIONS
        self._prompt_end = "\nYour answer:" if free_text else "\nYour answer (one JSON object):"
        self._instruction_tokens = count(self._instructions)

    def describe(self) -> dict[str, Any]:
        return {"renderer": "dacs", "system_role": self.system_role,
                "free_text": self.free_text}

    def reset(self) -> None:
        pass

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> None:
        pass  # the window itself carries the decisions already given

    def render(self, observation: Any) -> Rendered:
        window = str(observation["window"])
        question = window + self._prompt_end
        if self.system_role:
            messages = [{"role": "system", "content": self._instructions},
                        {"role": "user", "content": question}]
            return Rendered(messages, self._instruction_tokens + count(question))
        content = self._instructions + "\n\n" + question
        return Rendered([{"role": "user", "content": content}], count(content))
