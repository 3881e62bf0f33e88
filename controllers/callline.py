"""The "call" line of a run log, typed: `CallLine`, written by every writer of call lines and
read back by every reader, old lines included.

The writers: a chat-model policy (llm_policies/policy.py LLMPolicy, one line per model call of
an episode, keyed by `episode_key` and `decision`), the RCWT sweep
(analysis/studies/rcwt/run.py, one result line per unit, keyed by `key`, whose policy may or may
not call a model) and phase 4's trials (analysis/studies/dacs_live/trial.py, the agents' and the
judge's calls, keyed by the unit's `episode_key`). Each writes `CallLine.entry()`, so the fields
of the model call mean one thing in every log: `latency_s` is the seconds of the model call (the
client's `ChatResult.latency_s`: its attempts and backoff sleeps), never the wall time of a
unit, which an RCWT line keeps apart as `elapsed_s` in its context.

Old lines: RCWT lines written before this type had no `elapsed_s`; their `latency_s` was the
unit's wall time and the model call's seconds, when there was one, `provider_latency_s`.
`CallLine.from_entry` reads them into today's meaning (`old_rcwt_line`), so sums over a log
(controllers/runlog.py `call_totals`) and reports add like with like.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

CALL = "call"  # the "type" of a call line
# The field a unit's wall time is under, and the fields old RCWT lines had instead.
ELAPSED = "elapsed_s"
OLD_MODEL_LATENCY = "provider_latency_s"


@dataclass(frozen=True)
class CallLine:
    """One model call as a run log's "call" line holds it.

    The fields below are the model call, the same for every writer and written even when
    None; `context` is where the call belongs and what its writer adds, written beside them
    as given: an LLMPolicy's `episode_key`, `decision`, `prompt`, `harness`, `tool_calls`,
    cl100k token counts and costs; an RCWT unit's `key`, cell (q, order, W, ...), `score`,
    `category` and `elapsed_s`."""

    status: str | None
    """"ok" (the model answered) or "error" (the client gave up: see `error`); None for a
    unit whose policy called no model (an RCWT sweep of a programmed reader)."""

    error: str | None = None
    """The client's one-line description of a failed call (scrubbed of secrets)."""

    http_status: int | None = None
    """The HTTP status of the call's last attempt; None without one (a transport error)."""

    response: str = ""
    """The answer text ("" for an error or a reply of tool calls only)."""

    provider_prompt_tokens: int | None = None
    """Prompt tokens as the provider reported them; None: not reported."""

    provider_completion_tokens: int | None = None
    """Completion tokens as the provider reported them; None: not reported."""

    latency_s: float | None = None
    """Seconds of the model call, every attempt and backoff sleep included (the client's
    ChatResult.latency_s); None when no model was called."""

    retries: int = 0
    """Retries the client made after the call's first attempt."""

    response_format: str | None = None
    """The structured-output mode the call ended in ("json_schema", "json_object", "none",
    or "tools" for a call with native tools)."""

    context: Mapping[str, Any] = field(default_factory=dict)
    """The writer's fields: where the call belongs and what else it records (class doc)."""

    def entry(self) -> dict[str, Any]:
        """The log line: the context, the type and the model call's fields."""
        line = {**self.context, "type": CALL}
        line.update({name: getattr(self, name) for name in MODEL_FIELDS})
        return line

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> CallLine:
        """A call line as read from a log, in today's meaning whatever its age (module
        docstring); a field of the wrong type reads as absent."""
        if old_rcwt_line(entry):
            entry = {**{k: v for k, v in entry.items() if k != OLD_MODEL_LATENCY},
                     ELAPSED: entry.get("latency_s"),
                     "latency_s": entry.get(OLD_MODEL_LATENCY)}
        values = {name: entry.get(name) for name in MODEL_FIELDS}
        checks = {"status": str, "error": str, "http_status": int, "response": str,
                  "provider_prompt_tokens": int, "provider_completion_tokens": int,
                  "latency_s": int | float, "retries": int, "response_format": str}
        for name, kind in checks.items():
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, kind):
                values[name] = None
        values["response"] = values["response"] or ""
        values["retries"] = values["retries"] or 0
        context = {k: v for k, v in entry.items() if k not in MODEL_FIELDS and k != "type"}
        return cls(**values, context=context)


MODEL_FIELDS = tuple(f.name for f in fields(CallLine) if f.name != "context")


def old_rcwt_line(entry: Mapping[str, Any]) -> bool:
    """Whether `entry` is an RCWT unit's call line from before CallLine: keyed by `key`
    (not an episode's), with no `elapsed_s`, its `latency_s` being the unit's wall time."""
    return entry.get("type") == CALL and "key" in entry and ELAPSED not in entry \
        and not isinstance(entry.get("episode_key"), str)


def normalised(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A call line's entry in today's meaning (old RCWT lines read anew); another line as
    it is."""
    if entry.get("type") != CALL or not old_rcwt_line(entry):
        return dict(entry)
    return CallLine.from_entry(entry).entry()
