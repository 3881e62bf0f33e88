"""Held-out DACSSteering agents for the honest diagnosis: written here, never tuned against,
each with the truth it plays. Outside the hypotheses (the readers of controllers/dacs/readers.py
with a copy rate and a lapse, or a per-episode mixture of two readers): deterministic copiers
(always the topmost, or always the nearest, lure) and a position bias the readers do not hold
(the bottom-most block's value). Inside: the two new readers played themselves, readers with a
lapse of 0.2-0.3, the reader copying at a rate, and a per-episode mixture of two readers
(analysis/diagnose/dacs/mixture.py; outside before the mixtures were hypotheses).

`HELD_OUT` maps a name to (make the agent, its truth, whether it is inside the family).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from diagym.controllers.dacs.readers import (
    ParsedWindow,
    Reader,
    dacs_controller,
    evidence,
    parse_window,
)
from diagym.envs.dacs.scenario import ATTRIBUTE_OF, KEYS
from tests.analysis.test_dacs_diagnosis import Contaminating, Lapsing
from tests.analysis.test_dacs_verdicts import CopyingReader


def shown_lures(parsed: ParsedWindow) -> list[str]:
    """Other agents' values for the requested attribute among the options, in reading order."""
    attribute = ATTRIBUTE_OF[KEYS.index(parsed.key)]
    right = {m.value for m in evidence(parsed)}
    out: list[str] = []
    for m in parsed.mentions:
        if m.agent != parsed.requester and m.value in parsed.options and m.value not in right \
                and ATTRIBUTE_OF[KEYS.index(m.key)] == attribute and m.value not in out:
            out.append(m.value)
    return out


class NearestLure(Reader):
    """Always copies the lure mentioned nearest the request (the last in reading order) when
    the window shows one, else reads as the reader does."""

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        parsed = parse_window(str(observation["window"]))
        shown = shown_lures(parsed)
        if shown:
            return parsed.options.index(shown[-1])
        return self._choose(parsed, self.value(parsed))


class LastAgent(Reader):
    """A position bias no reader holds: the value for the requested attribute in the
    bottom-most agent block that shows one among the options, whoever's block it is."""

    def value(self, parsed: ParsedWindow) -> str | None:
        key = parsed.must_match[1] if parsed.must_match else parsed.key
        attribute = key.split("_", 1)[-1] if key else None
        found = [m.value for m in parsed.mentions if m.kind != "history"
                 and m.key.split("_", 1)[-1] == attribute and m.value in parsed.options]
        return found[-1] if found else None


class EpisodeMixture:
    """Plays `first` on a share `weight` of its episodes and `second` on the others, drawn
    per episode from its own stream."""

    def __init__(self, first: str, second: str, weight: float = 0.5, seed: int = 3) -> None:
        self.readers = (dacs_controller(first), dacs_controller(second))
        self.weight = weight
        self.rng = np.random.default_rng([13, seed])
        self.current = self.readers[0]

    def reset(self, *, seed: int | None = None) -> None:
        self.current = self.readers[0 if self.rng.random() < self.weight else 1]
        self.current.reset(seed=seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        return self.current.act(observation, info)


HELD_OUT: dict[str, tuple[Callable[[], Any], str, bool]] = {
    "first-lure copier": (Contaminating, "always the topmost lure", False),
    "nearest-lure copier": (NearestLure, "always the nearest lure", False),
    "mixture dacs-reader / flat-recency": (
        lambda: EpisodeMixture("dacs-reader", "flat-recency"),
        "mixture of dacs-reader and flat-recency per episode, 0.5 each", True),
    "last-agent position bias": (LastAgent, "the bottom-most block's value", False),
    "first-agent": (lambda: dacs_controller("first-agent"), "first-agent", True),
    "own-fact": (lambda: dacs_controller("own-fact"), "own-fact", True),
    "dacs-reader lapsing 0.25": (lambda: Lapsing("dacs-reader", 0.25, seed=5),
                                 "dacs-reader@0.25", True),
    "flat-recency lapsing 0.2": (lambda: Lapsing("flat-recency", 0.2, seed=6),
                                 "flat-recency@0.2", True),
    "first-agent lapsing 0.3": (lambda: Lapsing("first-agent", 0.3, seed=8),
                                "first-agent@0.3", True),
    "dacs-reader copying 0.5": (lambda: CopyingReader(0.5), "dacs-reader+copy 0.5", True),
}
