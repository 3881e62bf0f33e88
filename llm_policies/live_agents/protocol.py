"""The text protocol of seed 002's phase 4 and its scoring: the agents' markers, the judge's
prompt and verdict format, keyword scoring of a free-text answer, and Cohen's kappa.

An agent asks with `[[STEER: question]]` and ends with `[[DONE]]`. The judge answers in one of
two fixed formats (JUDGE_FORMATS): "tags", `<verdict>CORRECT</verdict>` or
`<verdict>INCORRECT</verdict>` in free text (seed 002's format), or "json", the whole reply one
JSON object `{"verdict": "CORRECT"}` or `{"verdict": "INCORRECT"}`, which a server can enforce
with constrained decoding (VERDICT_SCHEMA), so a small model cannot miss the format. Anything
else is recorded as unparseable and left out of accuracy and kappa rather than guessed from
loose words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from diagym.envs.dacs.scoring import mentions
from diagym.llm_policies.live_agents.scenarios import AgentSpec, LiveScenario, Rubric

STEER_RE = re.compile(r"\[\[\s*STEER\s*:\s*(.*?)\]\]", re.IGNORECASE | re.DOTALL)
DONE_RE = re.compile(r"\[\[\s*DONE\s*\]\]", re.IGNORECASE)
VERDICT_RE = re.compile(r"<verdict>\s*(CORRECT|INCORRECT)\s*</verdict>", re.IGNORECASE)
MAX_QUESTION_CHARS = 600
MAX_JUDGED_ANSWER_CHARS = 1200
JUDGE_FORMATS = ("json", "tags")
VERDICTS = ("CORRECT", "INCORRECT")
VERDICT_SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string",
                                                               "enum": list(VERDICTS)}},
                  "required": ["verdict"], "additionalProperties": False}


def steer_question(text: str) -> str | None:
    """The first steering question in an agent turn, or None."""
    match = STEER_RE.search(text)
    if match is None:
        return None
    question = " ".join(match.group(1).split())[:MAX_QUESTION_CHARS]
    return question or None


def is_done(text: str) -> bool:
    return DONE_RE.search(text) is not None


def agent_system_prompt(spec: AgentSpec, max_steers: int) -> str:
    """Seed 002's rule that every listed decision is asked about before [[DONE]], with the
    marker's example last: Qwen2.5-Coder 0.5B answers whichever marker the prompt names last,
    so a prompt ending on "write [[DONE]]" is answered [[DONE]] at once (RESULTS.md)."""
    return (f"You are agent {spec.agent_id}, a specialist working on your own task.\n"
            f"Task: {spec.task}\n"
            f"When your task is finished, write [[DONE]]. Before that, you must ask the "
            f"orchestrator about each of these decisions, one per step, at most {max_steers} "
            f"questions; do not decide them alone:\n{spec.hints}\n"
            f"Work in short steps. To ask, write one question inside the marker and stop; the "
            f"orchestrator's answer will be your next message. Your first step is to ask "
            f"about your first decision, for example: [[STEER: {first_decision(spec)}]]")


def first_decision(spec: AgentSpec) -> str:
    """The agent's first hint as a question: the marker's example names a decision of the
    agent's own (never its answer), so a model that copies the example still asks about its
    task; a generic example is copied word for word by small models (RESULTS.md)."""
    hint = spec.hints.splitlines()[0].lstrip("- ").strip()
    return hint[:1].upper() + hint[1:].rstrip("?.") + "?"


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


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two binary raters; nan when chance agreement is 1 (one label only)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.size == 0:
        return float("nan")
    observed = float(np.mean(a == b))
    pa, pb = float(np.mean(a)), float(np.mean(b))
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1.0:
        return float("nan")
    return (observed - chance) / (1.0 - chance)


def kappa_interval(a: np.ndarray, b: np.ndarray, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap over decisions; resamples where kappa is undefined are dropped
    (nan, nan when none is defined)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, a.size, size=(n_boot, a.size))
    values = np.array([cohen_kappa(a[d], b[d]) for d in draws])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


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
