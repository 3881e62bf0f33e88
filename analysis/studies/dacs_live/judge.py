"""How phase 4 scores an answer: the judge's prompt and verdict format, keyword scoring of a
free-text answer, contamination, and the Decision that holds one request's scores.

The judge answers in one of two fixed formats (JUDGE_FORMATS): "tags",
`<verdict>CORRECT</verdict>` or `<verdict>INCORRECT</verdict>` in free text (seed 002's format),
or "json", the whole reply one JSON object `{"verdict": "CORRECT"}` or `{"verdict":
"INCORRECT"}`, which a server can enforce with constrained decoding (VERDICT_SCHEMA), so a small
model cannot miss the format. Anything else is recorded as unparseable and left out of accuracy
and kappa rather than guessed from loose words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from diagym.analysis.studies.dacs_live.design import AgentSpec, LiveScenario, Rubric
from diagym.envs.dacs.scoring import mentions

VERDICT_RE = re.compile(r"<verdict>\s*(CORRECT|INCORRECT)\s*</verdict>", re.IGNORECASE)
MAX_JUDGED_ANSWER_CHARS = 1200
JUDGE_FORMATS = ("json", "tags")
VERDICTS = ("CORRECT", "INCORRECT")
VERDICT_SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string",
                                                               "enum": list(VERDICTS)}},
                  "required": ["verdict"], "additionalProperties": False}

JUDGE_RULES = (
    "You judge whether an orchestrator correctly answered a specialist agent's design "
    "question. CORRECT: the answer substantively addresses the question with a technically "
    "valid recommendation consistent with the rubric. INCORRECT: it misses the question, is "
    "vague or irrelevant, or contradicts the rubric. ")
JUDGE_REPLY = {
    "tags": ("Reply in exactly this format:\n<reason>one sentence</reason>\n"
             "<verdict>CORRECT</verdict>\nor\n<reason>one sentence</reason>\n"
             "<verdict>INCORRECT</verdict>"),
    "json": ('Reply with one JSON object and nothing else: {"verdict": "CORRECT"} or '
             '{"verdict": "INCORRECT"}'),
}
JUDGE_SYSTEM = JUDGE_RULES + JUDGE_REPLY["tags"]


def judge_system(judge_format: str) -> str:
    """The judge's instructions for a verdict format (JUDGE_FORMATS)."""
    if judge_format not in JUDGE_FORMATS:
        raise ValueError(f"judge_format must be one of {JUDGE_FORMATS} (got {judge_format!r})")
    return JUDGE_RULES + JUDGE_REPLY[judge_format]


def judge_prompt(spec: AgentSpec, question: str, answer: str, rubric: Rubric) -> str:
    return (f"Agent task domain: {spec.task}\n\n"
            f"Agent's question to the orchestrator:\n{question}\n\n"
            f"Orchestrator's answer:\n{answer[:MAX_JUDGED_ANSWER_CHARS]}\n\n"
            f"Rubric (what a correct answer looks like):\n{rubric.judge_context}\n\n"
            f"Is this answer CORRECT or INCORRECT?")


def parse_verdict(text: str, judge_format: str = "tags") -> bool | None:
    """True/False for a well-formed verdict in `judge_format`; None when the format is not
    followed (or both verdicts are given)."""
    if judge_format == "json":
        try:
            reply = json.loads(text)
        except ValueError:
            return None
        verdict = reply.get("verdict") if isinstance(reply, dict) else None
        return None if verdict not in VERDICTS else verdict == "CORRECT"
    found = {m.upper() for m in VERDICT_RE.findall(text)}
    if len(found) != 1:
        return None
    return found == {"CORRECT"}


def keyword_correct(answer: str, rubric: Rubric) -> bool:
    return any(mentions(answer, kw) for kw in rubric.keywords)


def contaminated(answer: str, scenario: LiveScenario, requester: str) -> bool:
    """Whether the answer carries another agent's material: its id, or one of its rubric
    keywords that is not also one of the requester's."""
    own = {kw.lower() for a in scenario.agents if a.agent_id == requester for r in a.rubrics
           for kw in r.keywords}
    for other in scenario.agents:
        if other.agent_id == requester:
            continue
        if mentions(answer, other.agent_id):
            return True
        for rubric in other.rubrics:
            if any(kw.lower() not in own and mentions(answer, kw) for kw in rubric.keywords):
                return True
    return False


@dataclass(frozen=True)
class Decision:
    """One steering request and its answer, with the rubric it was assigned (in order per
    agent; None beyond the agent's rubrics) and both scores."""

    condition: str
    trial: int
    agent_id: str
    index: int
    question: str
    answer: str
    topic: str | None
    keyword: bool | None
    judge: bool | None
    judge_raw: str
    contaminated: bool
    context_tokens: int
