"""Chat prompts for DACSSteering-v0: the orchestrator's window, as seed 002's model saw it.

The env already assembles the window (requester's full context and steering history plus
registry entries, or the flat or registry-only variants) under its token budget W, exactly
counted; this renderer only
adds the orchestrator's instructions and the answer format ({"answer": <option index>}, or a
plain-text reply under keyword scoring), so the model sees what the reference controllers
parse and nothing more.

In a conversation (the chat and tools harnesses) the instructions come once (`rules`), the
first window opens it (`opening`) and each later turn (`result`) says what the last action
did and shows the next request's window: each window is whole, so the newest one alone holds
what the pending request needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from diagym.envs._core.tokens import count
from diagym.envs.dacs.scenario import KEYS, N_OPTIONS, VALUES
from diagym.llm_policies.prompts.schema import integer_fields_schema
from diagym.llm_policies.prompts.workflow import Rendered

# A text answer names an option, never a focus action (those stay with non-text policies),
# so its bound is the option count whatever the env's action space.
ANSWER_KEY = "answer"
ANSWER_FIELDS: tuple[tuple[str, int], ...] = ((ANSWER_KEY, N_OPTIONS),)

ANSWER_SCHEMA: dict[str, Any] = integer_fields_schema((ANSWER_KEY,))

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
# A conversation's turns end without a format: its rules carry the harness's own.
ANSWER_END = "\nYour answer:"
REPLY_FORMAT = "Reply with"  # where the instructions' reply-format sentence starts
# Seed 002's protocol for free-text replies (DACSSteering with scoring="keywords"): the reply
# names the value, and the env scores it by keywords.
TASK_INSTRUCTIONS = INSTRUCTIONS[:INSTRUCTIONS.index(REPLY_FORMAT)]
FREE_TEXT_INSTRUCTIONS = TASK_INSTRUCTIONS + (
    "Reply in plain text with the value the requesting agent should use."
)


def _pending(observation: Any) -> tuple[str, str, tuple[str, ...]]:
    """The request an observation shows: (requester's name, key, option values)."""
    key = KEYS[int(observation["key"])]
    return (f"agent-{int(observation['requester'])}", key,
            tuple(VALUES[key][int(v)] for v in observation["options"]))


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
        self._prompt_end = ANSWER_END if free_text else "\nYour answer (one JSON object):"
        self._instruction_tokens = count(self._instructions)
        self._pending: tuple[str, str, tuple[str, ...]] = ("", "", ())

    def describe(self) -> dict[str, Any]:
        return {"renderer": "dacs", "system_role": self.system_role,
                "free_text": self.free_text}

    def reset(self) -> None:
        self._pending = ("", "", ())

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> None:
        pass  # the window itself carries the decisions already given

    def rules(self, answer: str) -> str:
        """A conversation's instructions: the orchestrator's task, then `answer`, the reply
        format of the harness that holds the conversation."""
        return TASK_INSTRUCTIONS + answer

    def opening(self, observation: Any) -> str:
        """A conversation's first user turn: the first request's window."""
        self._pending = _pending(observation)
        return str(observation["window"]) + ANSWER_END

    def result(self, action: Any, observation: Any, info: dict[str, Any]) -> str:
        """What the last action did, then the next request's window.

        The line says only what the model knows or a window could show: the value it gave
        (a free-text reply's recorded value is left out, since it is the right one whenever
        the reply named it), the agent it focused on; never whether the answer was right.
        """
        requester, key, options = self._pending
        if "focus" in info:
            done = f"Loaded the full context of agent-{int(info['focus'])}."
        elif self.free_text:
            done = f"Your reply to {requester} on {key} was recorded."
        else:
            choice = int(np.asarray(action).reshape(-1)[0])  # an int, a tuple or an array
            given = options[choice] if 0 <= choice < len(options) else "none"
            done = f"Given to {requester} for {key}: {given}."
        self._pending = _pending(observation)
        return done + "\n" + str(observation["window"]) + ANSWER_END

    def render(self, observation: Any) -> Rendered:
        window = str(observation["window"])
        question = window + self._prompt_end
        if self.system_role:
            messages = [{"role": "system", "content": self._instructions},
                        {"role": "user", "content": question}]
            return Rendered(messages, self._instruction_tokens + count(question))
        content = self._instructions + "\n\n" + question
        return Rendered([{"role": "user", "content": content}], count(content))
