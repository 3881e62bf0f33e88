"""Reference orchestrators for DACSSteering-v0: programmed readers of the window text.

They read exactly what an LLM orchestrator reads, the window text of docs/DACS.md, so their
accuracy is a property of what the window holds: `reader` finds the requester's own fact (or,
for a cascade request, the decision it must match) and guesses uniformly when the window no
longer holds it; `flat-recency` takes the mention of the key nearest the request whoever it
belongs to, a fact or an earlier answer in a steering history (an attribution-blind control
that contaminates); `registry-only` reads registry
entries alone; `uniform` guesses. Two more are the ways a model misreads the window that the
diagnosis must name: `first-agent` (a position bias) answers with the value the topmost agent
block shows for the requested attribute, whoever asked; `own-fact` (a rule violation) answers
with the requester's own fact even where a cascade request says it must match a decision given
to another agent. `dacs-reader` and `flat-reader` are the same reader, named
for the context mode it is meant to face: the difference between them is the window, which
is the point of seed 002.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_HEADER = re.compile(r"^## (agent-\d+) \((full context|registry)\)$")
_REQUEST = re.compile(
    r"^(agent-\d+) asks: which (.+?) should \1 use\?"
    r"(?: It must match the (.+?) decided for (agent-\d+)\.)?$")
_OPTION = re.compile(r"^(\d+)\) (.*)$")
_HISTORY = re.compile(r"^history: Q: which (.+?) should (agent-\d+) use\? A: (.*)$")


@dataclass
class Mention:
    """One "key = value" statement in the window, in reading order."""

    agent: str
    kind: str  # "fact", "decision", "history" (full context) or "decided" (registry entry)
    key: str
    value: str


@dataclass
class ParsedWindow:
    requester: str | None = None
    key: str | None = None
    must_match: tuple[str, str] | None = None  # (agent, key) of a cascade source decision
    options: list[str] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)


def parse_window(text: str) -> ParsedWindow:
    """The request and every complete key/value mention of a window (docs/DACS.md format)."""
    parsed = ParsedWindow()
    agent: str | None = None
    kind = ""
    in_request = False
    for line in text.split("\n"):
        header = _HEADER.match(line)
        if header:
            agent, kind, in_request = header.group(1), header.group(2), False
        elif line == "## request":
            in_request, agent = True, None
        elif in_request:
            _read_request_line(parsed, line)
        elif agent is not None:
            parsed.mentions.extend(_mentions(agent, kind, line))
    return parsed


def _read_request_line(parsed: ParsedWindow, line: str) -> None:
    """A line of the request block: who asks for which key (and a cascade's source), or the
    options."""
    request = _REQUEST.match(line)
    if request:
        parsed.requester, parsed.key = request.group(1), request.group(2)
        if request.group(4):
            parsed.must_match = (request.group(4), request.group(3))
    elif line.startswith("options: "):
        for item in line[len("options: "):].split(" | "):
            option = _OPTION.match(item)
            if option:
                parsed.options.append(option.group(2))


def _mentions(agent: str, kind: str, line: str) -> list[Mention]:
    """The key/value mentions of one line of an agent's block: a full context's history,
    fact and decision lines, or a registry entry's decided list."""
    if kind == "full context":
        history = _HISTORY.match(line)
        if history and history.group(3) != "none":
            return [Mention(agent, "history", history.group(1), history.group(3))]
        for prefix, name in (("fact: ", "fact"), ("decision: ", "decision")):
            if line.startswith(prefix) and " = " in line:
                key, value = line[len(prefix):].split(" = ", 1)
                return [Mention(agent, name, key, value)]
        return []
    if "| decided: " not in line:
        return []
    found = []
    for item in line.split("| decided: ", 1)[1].split("; "):
        if " = " in item:
            key, value = item.split(" = ", 1)
            found.append(Mention(agent, "decided", key.strip(), value.strip()))
    return found


class _WindowPolicy:
    """Shared plumbing: parse the window, pick an option or guess from the controller stream
    of the episode seed (so a run is reproducible and paired across context modes)."""

    name = "uniform"

    def __init__(self) -> None:
        self._key = np.int64(0)
        self._counter = np.int64(0)
        self.guesses = 0

    def reset(self, *, seed: int | None = None) -> None:
        from diagym.envs._core import rng  # numba: imported at play, not when the names are listed

        self._key = rng.stream_key(0 if seed is None else seed, rng.CONTROLLER_STREAM)
        self._counter = np.int64(0)
        self.guesses = 0

    def describe(self) -> dict[str, Any]:
        return {"dacs_controller": self.name}

    def episode_counters(self) -> dict[str, int]:
        return {"guesses": self.guesses}

    def _guess(self, n_options: int) -> int:
        from diagym.envs._core import rng

        self.guesses += 1
        value, self._counter = rng.uniform_below(self._key, self._counter, max(n_options, 1))
        return int(value)

    def _choose(self, parsed: ParsedWindow, value: str | None) -> int:
        if value is not None and value in parsed.options:
            return parsed.options.index(value)
        return self._guess(len(parsed.options) or 4)

    def value(self, parsed: ParsedWindow) -> str | None:
        return None

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        parsed = parse_window(str(observation["window"]))
        return self._choose(parsed, self.value(parsed))


def evidence(parsed: ParsedWindow) -> list[Mention]:
    """The mentions that answer the request, attributed by block: the requester's own fact
    for the key, or for a cascade request the decision it must match (the source agent's
    `decision:` line or registry `decided:` entry). Reading order."""
    if parsed.must_match is not None:
        source, key = parsed.must_match
        return [m for m in parsed.mentions if m.agent == source and m.key == key
                and m.kind in ("decision", "decided")]
    return [m for m in parsed.mentions if m.agent == parsed.requester
            and m.key == parsed.key and m.kind == "fact"]


class Reader(_WindowPolicy):
    """The requester's own fact, or for a cascade request the decision it must match (in the
    source agent's full context or registry entry); a guess when the window lacks it."""

    name = "reader"

    def value(self, parsed: ParsedWindow) -> str | None:
        wanted = evidence(parsed)
        return wanted[-1].value if wanted else None


class FlatRecency(_WindowPolicy):
    """The mention of the requested key nearest the request, whoever it belongs to."""

    name = "flat-recency"

    def value(self, parsed: ParsedWindow) -> str | None:
        key = parsed.must_match[1] if parsed.must_match else parsed.key
        wanted = [m for m in parsed.mentions if m.key == key]
        return wanted[-1].value if wanted else None


class RegistryOnly(_WindowPolicy):
    """Reads registry entries only: it can follow a cascade decision, never a private fact."""

    name = "registry-only"

    def value(self, parsed: ParsedWindow) -> str | None:
        if parsed.must_match is None:
            return None
        source, key = parsed.must_match
        wanted = [m for m in parsed.mentions if m.agent == source and m.key == key
                  and m.kind == "decided"]
        return wanted[-1].value if wanted else None


class FirstAgent(_WindowPolicy):
    """A position bias: the first value for the requested attribute (a fact or decision of
    any key of that attribute) in the topmost agent block that shows one, whoever's block it
    is; a guess when no block shows one among the options."""

    name = "first-agent"

    def value(self, parsed: ParsedWindow) -> str | None:
        key = parsed.must_match[1] if parsed.must_match else parsed.key
        attribute = _attribute(key)
        for m in parsed.mentions:
            if m.kind != "history" and _attribute(m.key) == attribute \
                    and m.value in parsed.options:
                return m.value
        return None


class OwnFact(_WindowPolicy):
    """A rule violation: the requester's own fact for the requested key, also on a cascade
    request, whose rule says the answer must match another agent's recorded decision."""

    name = "own-fact"

    def value(self, parsed: ParsedWindow) -> str | None:
        wanted = [m for m in parsed.mentions if m.agent == parsed.requester
                  and m.key == parsed.key and m.kind == "fact"]
        return wanted[-1].value if wanted else None


def _attribute(key: str | None) -> str | None:
    """The attribute of a key name ("api_region" -> "region"): the part after the domain."""
    return None if key is None else key.split("_", 1)[-1]


class Uniform(_WindowPolicy):
    name = "uniform"


DACS_CONTROLLERS: dict[str, type[_WindowPolicy]] = {
    "dacs-reader": Reader,
    "flat-reader": Reader,
    "flat-recency": FlatRecency,
    "registry-only": RegistryOnly,
    "first-agent": FirstAgent,
    "own-fact": OwnFact,
    "uniform": Uniform,
}


def dacs_controller(name: str) -> _WindowPolicy:
    if name not in DACS_CONTROLLERS:
        raise ValueError(f"DACS controller must be one of {' | '.join(DACS_CONTROLLERS)}; got "
                         f"{name!r}")
    policy = DACS_CONTROLLERS[name]()
    policy.name = name
    return policy
