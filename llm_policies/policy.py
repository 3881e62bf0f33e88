"""A chat model as a Policy: the same runner, records and tables as the reference controllers.

Each decision shows the model what a Renderer (chosen per env family in
llm_policies/families.py: prompts.workflow or prompts.dacs) makes of the observation, in the
form of a harness (llm_policies/harness: `json`, a fresh prompt per decision as in seed 003;
`chat`, one conversation per episode; `tools`, that conversation with native function
calls), asks a chat model (a ChatModel: an OpenAI-compatible server through
transport.ChatClient, or the text oracle in this process through oracle.InProcessChat), and
hands the answer to the env's TextActionWrapper, which judges it by the same rules
(`parse_json_action`, `judge_tool_call`) this policy uses to count well-formed replies.
Every call is written to the run log as it happens, with the decoding it used, so a killed
sweep keeps what it paid for; a provider that keeps failing ends the episode as
`provider_error` instead of losing it. An invalid reply ends the episode, as in seed 003,
unless `invalid_retries` lets the model answer again. A resumed episode that a kill or
Ctrl-C interrupted replays the answers its call lines hold, as long as each prompt is the one
logged (the env, seed and harness are deterministic), so the model is asked only the
decisions it had not answered; a prompt that differs ends the replay (`cache` "log").
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from diagym.controllers.callline import CallLine
from diagym.controllers.policy import EpisodeAborted
from diagym.controllers.runlog import PROVIDER_ERROR, RunLog
from diagym.envs._core import tokens
from diagym.llm_policies.client.prices import reply_tokens
from diagym.llm_policies.client.transport import ChatResult, ToolCall
from diagym.llm_policies.families import ToolSpec, text_family
from diagym.llm_policies.harness import (
    CONVERSATION_HARNESSES,
    Judged,
    check_harness_name,
    make_harness,
)
from diagym.llm_policies.harness.conversation import MessageWindow
from diagym.llm_policies.prompts.schema import fields_schema

# Decoding: a server that holds the answer to the action schema (constrained), or free text
# that the parser alone judges (unconstrained, as in seed 003's local run); "auto" negotiates
# per client (transport.py) and each call line records the mode that was used.
CONSTRAINED_FORMATS = ("json_schema", "json_object")
DECODINGS = {"json_schema": "constrained", "json_object": "constrained",
             "none": "unconstrained", "auto": "negotiated"}


def decoding(response_format: str | None) -> str | None:
    """"constrained", "unconstrained" or "negotiated" for a response_format setting."""
    return DECODINGS.get(response_format) if response_format is not None else None

# Per episode. decisions: model calls answered (re-asks included); schema_valid: those whose
# reply had the answer's form (in `tools`, exactly one call of an offered function with its
# integer fields); invalid_retries: the re-asks among them; cache_hits: calls a response
# cache or the run log's interrupted attempt answered; cost_usd: the priced cost of the
# calls (0 where unknown); cl100k_reasoning_tokens: the part of cl100k_completion_tokens that
# was reasoning (docs/REASONING.md), the rest being the answers.
COUNTER_KEYS = (
    "decisions", "schema_valid", "provider_prompt_tokens", "provider_completion_tokens",
    "cl100k_prompt_tokens", "cl100k_completion_tokens", "latency_s", "retries",
    "cost_usd", "cache_hits", "invalid_retries", "cl100k_reasoning_tokens",
)


class ChatModel(Protocol):
    """What LLMPolicy needs from a chat client: transport.ChatClient over HTTP, or
    oracle.InProcessChat in this process. The attributes describe the run."""

    model: str
    base_url: str
    temperature: float
    max_tokens: int | None
    seed: int | None

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> ChatResult: ...


class Renderer(Protocol):
    """What LLMPolicy needs from an env's prompt renderer (prompts.workflow.WorkflowRenderer,
    prompts.dacs.DacsRenderer).

    `render` serves the json harness; `rules`, `opening` and `result` the conversation
    harnesses: the rules once, ending with the harness's `answer` instruction; the first
    turn; and after each action its outcome and the new observation, where `action` is the
    answer's integers in the order of its fields (the JSON answer's, or the called function's;
    a DACS focus is told apart by info["focus"]), or the reply text where it is the action.
    """

    fields: tuple[tuple[str, int], ...] | None  # None: free text, the reply is the action
    schema: dict[str, Any] | None

    def describe(self) -> dict[str, Any]: ...

    def reset(self) -> None: ...

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> None: ...

    def render(self, observation: Any) -> Any: ...

    def rules(self, answer: str) -> str: ...

    def opening(self, observation: Any) -> str: ...

    def result(self, action: Any, observation: Any, info: dict[str, Any]) -> str: ...


def renderer_for(env: Any, **kwargs: Any) -> Renderer:
    """The renderer of a (possibly wrapped) env, from diagym.llm_policies.families."""
    return text_family(env).renderer(env.unwrapped, **kwargs)


def answer_schema(env: Any, bounded_fields: bool = False) -> dict[str, Any] | None:
    """The JSON schema a text answer on `env` is held to under constrained decoding: the
    renderer's (fields bounded from below only, as in seed 003), or with `bounded_fields`
    each field one of its values (prompts.schema); None where the reply is free text."""
    renderer = renderer_for(env)
    if not bounded_fields or renderer.schema is None or renderer.fields is None:
        return renderer.schema
    return fields_schema(renderer.fields, bounded=True)


class LLMPolicy:
    """Plays a text-action env (wrapped in TextActionWrapper) through a chat model.

    The renderer decides what the model sees (StatefulWorkflow: rules, task, observation,
    history, optionally under an RCWT budget; DACSSteering: the orchestrator's window), the
    harness in what form (module docstring).
    """

    def __init__(self, client: ChatModel, renderer: Renderer,
                 response_format: str | None = None, *, harness: str = "json",
                 tools: tuple[ToolSpec, ...] | None = None, invalid_retries: int = 0,
                 window: int | None = None, session: dict[str, Any] | None = None,
                 bounded_fields: bool = False, reasoning_tokens: int | None = None) -> None:
        """response_format: the structured-output setting the client was built with (see
        `decoding`), for the run's record; None takes the client's own `response_format`
        attribute when it has one (oracle.InProcessChat does, transport.ChatClient not).
        harness: one of HARNESSES; tools: the functions of the `tools` harness (for_env takes
        the env family's); invalid_retries: how often one decision may be asked again after
        an invalid reply; window: the conversation window W of `chat` and `tools` (None: the
        renderer's budget, if it has one; see harness/conversation.py); session: what the
        caller knows about how this session reaches the model (a server's probed
        capabilities, prices), for the run log's session line, never the run's identity;
        bounded_fields: the tools' arguments carry their ranges (prompts.schema; the json
        schema the client holds text answers to is the caller's, `answer_schema`);
        reasoning_tokens: the think-then-act answer's reasoning budget (None: the direct
        answer; the client's own cap on the reply is the caller's, docs/REASONING.md)."""
        if (isinstance(invalid_retries, bool) or not isinstance(invalid_retries, int)
                or invalid_retries < 0):
            raise ValueError(f"invalid_retries must be an integer >= 0; got {invalid_retries!r}")
        if window is None and harness in CONVERSATION_HARNESSES:
            window = getattr(renderer, "budget", None)
        self.client = client
        self.renderer = renderer
        self.last_provider_error: str | None = None  # the client's message of the last failure
        self.harness = make_harness(harness, renderer, tools=tools, window=window,
                                    invalid_retries=invalid_retries,
                                    bounded_fields=bounded_fields,
                                    reasoning_tokens=reasoning_tokens)
        self.bounded_fields = bounded_fields
        self.reasoning_tokens = reasoning_tokens
        self.invalid_retries = invalid_retries
        self.window = window
        self.session = dict(session) if session is not None else None
        self.response_format = (response_format if response_format is not None
                                else getattr(client, "response_format", None))
        self.decoding = decoding(self.response_format)
        self._log: RunLog | None = None
        self._replies: list[dict[str, Any]] = []
        self.reset()

    @classmethod
    def for_env(cls, client: ChatModel, env: Any, *, harness: str = "json",
                invalid_retries: int = 0, response_format: str | None = None,
                session: dict[str, Any] | None = None, bounded_fields: bool = False,
                reasoning_tokens: int | None = None, **kwargs: Any) -> LLMPolicy:
        """kwargs go to the renderer (budget, q, coordination, order, system_role); in `chat`
        and `tools` the budget is the conversation window. response_format and session as
        in the constructor."""
        kind = check_harness_name(harness)
        tools = None
        if kind.offers_tools:
            tools = text_family(env).tools(env.unwrapped)
            if not tools:
                raise ValueError(f"harness {harness!r} needs functions to offer; "
                                 f"{env.unwrapped!r} takes the reply text itself (use harness "
                                 "json or chat)")
        window = kwargs.get("budget") if harness in CONVERSATION_HARNESSES else None
        return cls(client, renderer_for(env, **kwargs), response_format, harness=harness,
                   tools=tools, invalid_retries=invalid_retries, window=window,
                   session=session, bounded_fields=bounded_fields,
                   reasoning_tokens=reasoning_tokens)

    def describe(self) -> dict[str, Any]:
        """What this policy measures, for its run's identity: the model, its sampling and the
        prompt harness, never how it is reached (base URL, port, key, timeout). The json
        harness without re-asks is described as it was before harnesses had names, so the
        logs of those runs still resume; any other setting names its harness. Bounded
        fields, a reasoning budget and a tool_choice other than "auto" change what the model
        may answer, so they are named when set (and absent otherwise, for the same
        reason)."""
        described = {
            "llm": self.client.model, "temperature": self.client.temperature,
            "max_tokens": self.client.max_tokens, "seed": self.client.seed,
            **self.renderer.describe(),
        }
        if self.bounded_fields:
            described["bounded_fields"] = True
        if self.reasoning_tokens is not None:
            described["reasoning_tokens"] = self.reasoning_tokens
        if self.harness.name == "json" and self.invalid_retries == 0:
            return described
        described.update(harness=self.harness.name, invalid_retries=self.invalid_retries)
        if self.harness.name in CONVERSATION_HARNESSES:
            described["window"] = self.window
        if self.harness.tools is not None:
            described["tools"] = [tool["function"]["name"] for tool in self.harness.tools]
            tool_choice = getattr(self.client, "tool_choice", "auto")
            if tool_choice != "auto":
                described["tool_choice"] = tool_choice
        return described

    def describe_session(self) -> dict[str, Any] | None:
        """The session line's part of this policy (diagym.controllers.rollout.describe_session)."""
        return None if self.session is None else dict(self.session)

    def attach_log(self, log: RunLog | None) -> None:
        self._log = log

    def reset(self, *, seed: int | None = None) -> None:
        self._seed = seed
        take = getattr(self._log, "take_replies", None) if seed is not None else None
        self._replies = list(take(self._log.key(seed))) if callable(take) else []
        self._counters: dict[str, float] = dict.fromkeys(COUNTER_KEYS, 0)
        self.harness.reset()

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """The env action of this decision: the reply text (json, chat), or a ToolCallAction
        or InvalidReply (tools). An invalid reply is asked again up to invalid_retries times;
        the last reply stands."""
        window = self.harness.prompt(observation, info)
        retry = 0
        while True:
            result = self._complete(window.messages)
            judged = self.harness.judge(result) if result.status == "ok" else None
            self._account(window, result, judged, retry)
            if judged is None:  # a provider failure is not a model decision
                self.last_provider_error = result.error or ""
                raise EpisodeAborted(PROVIDER_ERROR, result.error or "")
            if judged.status == "ok" or retry == self.invalid_retries:
                break
            retry += 1
            self._counters["invalid_retries"] += 1
            window = self.harness.reask(result, judged)
        self.harness.accept(result, judged)
        return judged.action

    def _complete(self, messages: list[dict[str, Any]]) -> ChatResult:
        """One call; the tools keyword only when there are tools, so a client written for
        text replies alone serves the json and chat harnesses. A reply the interrupted
        attempt logged for this very prompt answers without a call (module docstring)."""
        if self._replies:
            replayed = _replayed(self._replies.pop(0), messages)
            if replayed is not None:
                return replayed
            self._replies.clear()  # the episode went another way: ask the model from here
        if self.harness.tools is None:
            return self.client.complete(messages)
        return self.client.complete(messages, tools=self.harness.tools)

    def _account(self, window: MessageWindow, result: ChatResult, judged: Judged | None,
                 retry: int) -> None:
        """The call's counters and its call line; the line's "decision" is the index of the
        answered call in its episode (re-asks included, `invalid_retry` telling them apart),
        so (episode_key, decision) names one call."""
        answered = judged is not None
        decision = int(self._counters["decisions"])
        counters = self._counters
        counters["decisions"] += answered
        counters["schema_valid"] += answered and judged.well_formed
        counters["provider_prompt_tokens"] += result.prompt_tokens or 0
        counters["provider_completion_tokens"] += result.completion_tokens or 0
        counters["cl100k_prompt_tokens"] += window.text_tokens
        response_tokens = reply_tokens(result)
        reasoning = "\n\n".join(part for part in (
            result.reasoning, judged.reasoning if judged is not None else None) if part)
        reasoning_tokens = min(tokens.count(reasoning), response_tokens)
        counters["cl100k_completion_tokens"] += response_tokens
        counters["cl100k_reasoning_tokens"] += reasoning_tokens
        counters["latency_s"] += result.latency_s
        counters["retries"] += result.retries
        counters["cost_usd"] += result.cost_usd or 0.0
        counters["cache_hits"] += result.cache in ("hit", "log")
        if self._log is None:
            return
        model_call = CallLine(
            status=result.status, error=result.error, http_status=result.http_status,
            response=(result.text if judged is None or judged.said is None else judged.said),
            provider_prompt_tokens=result.prompt_tokens,
            provider_completion_tokens=result.completion_tokens, latency_s=result.latency_s,
            retries=result.retries, response_format=result.response_format,
            context={
                "episode_key": self._log.key(self._seed) if self._seed is not None else None,
                "decision": decision,
                "prompt": window.messages,
                "action_status": judged.status if judged is not None else None,
                "cl100k_prompt_tokens": window.text_tokens,
                "cl100k_completion_tokens": response_tokens,
                "cl100k_reasoning_tokens": reasoning_tokens,
                "cl100k_answer_tokens": response_tokens - reasoning_tokens,
                "provider_reasoning_tokens": result.provider_reasoning_tokens,
                "reasoning_budget": self.reasoning_tokens,
                "decoding": decoding(result.response_format),
                "harness": self.harness.name,
                "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}
                               for call in result.tool_calls],
                "served_model": result.served_model,
                "cached_prompt_tokens": result.cached_prompt_tokens,
                "provider_cost_usd": result.provider_cost_usd,
                "cost_usd": result.cost_usd,
                "cache": result.cache,
                "finish_reason": result.finish_reason,
                "reasoning": reasoning or None,
                "dropped_exchanges": window.dropped,
                "invalid_retry": retry,
            })
        self._log.write(model_call.entry())

    def episode_counters(self) -> dict[str, float]:
        return dict(self._counters)


def _replayed(line: dict[str, Any], messages: list[dict[str, Any]]) -> ChatResult | None:
    """The answer of a logged call line when its prompt is `messages` (as the log wrote it),
    with no retries, cost or latency (no call was made); None otherwise."""
    if line.get("prompt") != json.loads(json.dumps(messages, default=str)):
        return None
    try:
        calls = tuple(ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                      for c in line.get("tool_calls") or ())
        return ChatResult(
            text=str(line["response"]), status="ok", error=None,
            http_status=line.get("http_status"),
            prompt_tokens=line.get("provider_prompt_tokens"),
            completion_tokens=line.get("provider_completion_tokens"), latency_s=0.0,
            retries=0, response_format=str(line.get("response_format") or "none"),
            tool_calls=calls, served_model=line.get("served_model"),
            cached_prompt_tokens=line.get("cached_prompt_tokens"),
            reasoning=line.get("reasoning"), finish_reason=line.get("finish_reason"),
            cache="log", cost_usd=0.0)
    except (KeyError, TypeError):
        return None
