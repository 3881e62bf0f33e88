"""A steering orchestrator as a diagym Policy: `act(observation, info)` returns the answer.

Why a Policy and not a bare chat call: the orchestrator is the agent under study, so the
same thing a user plugs into `diagym run` (an LLM policy in its harnesses, a programmed
controller, their own class) must be pluggable here. The observation is a dict,
{"window": the focus or flat text, "requester": the agent id, "question": its question,
"condition": "dacs" | "flat"}, and the action is the answer text. `reset(seed=trial)` opens
each trial.

`LiveRenderer` is the Renderer (diagym.llm_policies.policy) of that observation, so `LLMPolicy`
plays it in the json harness (a fresh prompt per request: the window alone, which keeps
DACS's isolation) or the chat harness (one conversation per trial: every earlier window
stays in it, so focus mode is no longer isolated; a choice to study, not the default). The
tools harness needs functions and a free-text answer has none. The DACS readers of
controllers/dacs choose among a request's numbered options; a free-form question has none,
so they do not apply here.
"""

from __future__ import annotations

from typing import Any

from diagym.envs._core.tokens import count
from diagym.llm_policies.policy import LLMPolicy
from diagym.llm_policies.prompts.workflow import Rendered

ORCHESTRATOR_SYSTEM = (
    "You are the orchestrator of several specialist agents. An agent has asked you a "
    "question about its own task. Answer it with one concrete, technically sound "
    "recommendation in a few sentences, for that agent only.")
ORCHESTRATOR_HARNESSES = ("json", "chat")  # a free-text answer offers no tools


class LiveRenderer:
    """The orchestrator's prompt: ORCHESTRATOR_SYSTEM, then the window (which ends with the
    request). Free text: no JSON fields, no schema; the reply is the answer."""

    fields = None
    schema = None

    def __init__(self, system_role: bool = True) -> None:
        self.system_role = system_role

    def describe(self) -> dict[str, Any]:
        return {"renderer": "dacs-live", "system_role": self.system_role}

    def reset(self) -> None:
        pass

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> None:
        pass  # the next window carries the steering history

    def render(self, observation: Any) -> Rendered:
        window = str(observation["window"])
        if self.system_role:
            return Rendered([{"role": "system", "content": ORCHESTRATOR_SYSTEM},
                             {"role": "user", "content": window}],
                            count(ORCHESTRATOR_SYSTEM) + count(window))
        content = f"{ORCHESTRATOR_SYSTEM}\n\n{window}"
        return Rendered([{"role": "user", "content": content}], count(content))

    def rules(self, answer: str) -> str:
        return f"{ORCHESTRATOR_SYSTEM} {answer}"

    def opening(self, observation: Any) -> str:
        return str(observation["window"])

    def result(self, action: Any, observation: Any, info: dict[str, Any]) -> str:
        return (f"Your answer was sent. Next request, from agent {observation['requester']}:\n"
                f"{observation['window']}")


def llm_orchestrator(client: Any, *, harness: str = "json", system_role: bool = True,
                     session: dict[str, Any] | None = None) -> LLMPolicy:
    """An LLMPolicy answering the live window through `client` in `harness`
    (ORCHESTRATOR_HARNESSES)."""
    if harness not in ORCHESTRATOR_HARNESSES:
        raise ValueError(f"harness must be one of {' | '.join(ORCHESTRATOR_HARNESSES)} for "
                         f"live agents (a free-text answer offers no tools); got {harness!r}")
    return LLMPolicy(client, LiveRenderer(system_role), "none", harness=harness,
                     session=session)
