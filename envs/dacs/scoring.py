"""Seed 002's free-text keyword scoring, for text answers to a DACS request.

The env scores an answer as an option index (multiple choice: RL, controllers and the JSON text
harness all answer that way). Seed 002 scores a free-text reply instead: correct if it contains
one of the decision's answer keywords, case-insensitive. `keyword_score` applies that rule to a
DACS request, with the right value's string as the keyword, and calls the reply contaminated
when it contains a value another agent holds for the same attribute (the paper's contamination
check looks for another agent's id in the reply; here the other agents' values are the
attributable trace). A value matches only as a whole word, so "2" does not match inside "250".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagym.envs.dacs.scenario import VALUES, Scenario


@dataclass(frozen=True)
class TextScore:
    correct: bool
    contaminated: bool


def mentions(text: str, value: str) -> bool:
    """Whether `value` occurs in `text` case-insensitively, not inside a longer word or
    number (neighbours are not letters, digits, '.', '/', '_' or '-')."""
    pattern = r"(?<![\w./-])" + re.escape(value.lower()) + r"(?![\w/-]|\.\w)"
    return re.search(pattern, text.lower()) is not None


def keyword_score(text: str, scenario: Scenario, requester: int, key_id: int, key: str,
                  target: int) -> TextScore:
    """Keyword scoring of a reply to `requester`'s request for `key` whose right value id is
    `target`: correct iff the right value is mentioned; contaminated iff a value another agent
    holds for the attribute (other than the right one) is mentioned."""
    values = VALUES[key]
    foreign = scenario.foreign_values(requester, key_id) - {target}
    return TextScore(correct=mentions(text, values[target]),
                     contaminated=any(mentions(text, values[v]) for v in foreign))
