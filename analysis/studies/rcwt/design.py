"""Seed 000's RCWT design on DACSSteering-v0 as data: the trials, their prompts, the q grid.

Why DACS scenarios: seed 000 (section 3.1) measures task-budget displacement by holding the
window W fixed and moving tokens from the task evidence to coordination content. DACS
scenarios already have exactly that split: the requester's own full-context block is the task
evidence (it holds the fact the request asks about) and the other agents' full blocks are
coordination content (same format, same keys, other values). A trial is one scenario seed and
its first request; its prompt is `budget.assemble(instructions + request + answer format,
coordination = other agents' blocks, evidence = requester's block, W, q, order, layout,
drop_at_most)`, so the counts u, c, r and p = c / W hold for the exact text sent. The
default layout and small-block rule are the artifact's (`budget.ARTIFACT_LAYOUT`: context
blocks as the system message, the task as the user message, read last; blocks of <= 10
tokens not sent); `instructions_first` keeps the instructions at the top of one text.

Why the layout cliff: for the programmed `flat-reader` the threshold is known in advance from
the token layout (`layout_cliff`): a trial is answerable iff the requester's fact line for the
asked key is complete within the first r tokens of the evidence block. A sweep with it is the
positive control for the whole pipeline (assembly, scoring, log, fit): the fitted theta must
land on the layout's median threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from diagym.envs._core.tokens import count, encode
from diagym.envs.dacs.scenario import generate
from diagym.envs.dacs.window import Block, full_block, request_text
from diagym.llm_policies.prompts.budget import (
    ARTIFACT_DROP,
    ARTIFACT_LAYOUT,
    LAYOUTS,
    ORDERS,
    Assembly,
    assemble,
)

ENV_ID = "DACSSteering-v0"
WORKFLOW_ID = "StatefulWorkflow-v0"
Q_GRID = (0.0, 0.25, 0.50, 0.75, 0.90, 0.92, 0.94, 0.96, 0.98)  # seed 000's target grid

INSTRUCTIONS = (
    "You are the orchestrator of several software agents working in parallel. An agent has "
    "sent the steering request below. The agent context blocks given with it are each headed "
    "\"## agent-<i> (full context)\" and hold that agent's task, status lines and facts; "
    "a block may be repeated, and the last copy of a block may be cut off. Answer for the "
    "requesting agent, using that agent's own facts, not another agent's."
)
ANSWER_FORMAT = 'Reply with exactly one JSON object {"answer": <option index>} and nothing else.'


# --------------------------------------------------------------------------- trials


@dataclass(frozen=True)
class Trial:
    """One scenario seed's first request and the three prompt sources.

    instructions: INSTRUCTIONS, the request block and ANSWER_FORMAT (never cut: u tokens).
    coordination: the other agents' full blocks in index order; evidence: the requester's
    full block (`evidence_block` keeps its token layout for `layout_cliff`).
    """

    seed: int
    requester: int
    key: str
    key_id: int
    options: tuple[str, ...]
    correct: int
    instructions: str
    coordination: str
    evidence: str
    evidence_block: Block


def _make_env(env_kwargs: Mapping[str, Any] | None) -> Any:
    import gymnasium as gym

    import diagym  # noqa: F401  (registers the ids)

    return gym.make(ENV_ID, **dict(env_kwargs or {}))


def build_trial(seed: int, env_kwargs: Mapping[str, Any] | None = None,
                env: Any | None = None) -> Trial:
    """The trial of scenario `seed`: its first request (never a cascade dependent one)."""
    env = env if env is not None else _make_env(env_kwargs)
    env.reset(seed=int(seed))
    core = env.unwrapped
    scenario, pending = core.scenario, core.pending
    decided: dict[int, int] | None = {} if core.family == "cascade" else None
    blocks = [full_block(agent, decided) for agent in scenario.agents]
    depends = f"agent-{pending.depends_on}" if pending.depends_on >= 0 else None
    request = request_text(f"agent-{pending.requester}", pending.key, pending.options, depends)
    instructions = f"{INSTRUCTIONS}\n\n{request}{ANSWER_FORMAT}\n"
    coordination = "".join(b.text for i, b in enumerate(blocks) if i != pending.requester)
    return Trial(
        seed=int(seed), requester=pending.requester, key=pending.key, key_id=pending.key_id,
        options=tuple(pending.options), correct=int(pending.correct),
        instructions=instructions, coordination=coordination,
        evidence=blocks[pending.requester].text, evidence_block=blocks[pending.requester],
    )


def build_trials(trials: int, env_kwargs: Mapping[str, Any] | None = None) -> list[Trial]:
    """Trials for seeds 0..trials-1 (shared by every (q, order) cell: paired)."""
    env = _make_env(env_kwargs)
    try:
        return [build_trial(seed, env=env) for seed in range(trials)]
    finally:
        env.close()


def assemble_trial(trial: Trial, W: int, q: float, order: str, *,
                   layout: str = ARTIFACT_LAYOUT, drop_at_most: int = ARTIFACT_DROP
                   ) -> Assembly:
    """The trial's prompt under window W, target ratio q, block order and layout."""
    return assemble(trial.instructions, trial.coordination, trial.evidence, W=W, q=q,
                    order=order, layout=layout, drop_at_most=drop_at_most)


# --------------------------------------------------------------------------- layout cliff


@dataclass(frozen=True)
class Cliff:
    """Where a trial becomes answerable for a reader of whole fact values.

    required_r: the smallest evidence budget r whose block holds the requester's fact value
    complete. Where the evidence block ends the text (instructions_first, coord_first) the
    value may end it (the fact line without its "\\n" token); elsewhere the block is r - 1
    tokens of source plus an appended "\\n", so the whole line must fit (one token more).
    theta: u + required_r, the smallest non-coordination budget (W - c) that answers it.
    max_c: the largest coordination size that still answers it (W - theta); p_star = max_c / W.
    """

    seed: int
    order: str
    u: int
    fact_start: int
    fact_end: int
    required_r: int
    theta: int
    max_c: int
    p_star: float


def layout_cliff(seed: int, W: int, *, order: str = "reason_first",
                 layout: str = ARTIFACT_LAYOUT,
                 env_kwargs: Mapping[str, Any] | None = None,
                 trial: Trial | None = None) -> Cliff:
    """The trial's answerability threshold, from the token layout alone (no reader run).

    The fact line's token span [fact_start, fact_end) inside the evidence block comes from the
    block's own line ids (lines end in "\\n" and start with a non-space character, so the
    block's tokens are the concatenation of its lines'). Truncation keeps a prefix of the
    block; repetition puts later copies after a complete first one, so the first copy decides.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
    trial = trial if trial is not None else build_trial(seed, env_kwargs)
    at = 0
    span: tuple[int, int] | None = None
    for line in trial.evidence_block.lines:
        if line.kind == "fact" and any(k == trial.key_id for k, _ in line.shows):
            span = (at, at + len(line.ids))
            if tuple(encode(line.text[:-1])) + tuple(encode("\n")) != line.ids:
                raise AssertionError(f"fact line does not end in its own newline token: "
                                     f"{line.text!r}")
            break
        at += len(line.ids)
    if span is None:
        raise ValueError(f"seed {trial.seed}: the requester has no fact for {trial.key!r}")
    start, end = span
    evidence_ends_text = layout == "instructions_first" and order == "coord_first"
    required = end - 1 if evidence_ends_text else end
    u = count(trial.instructions if layout == "instructions_first" else
              trial.instructions.lstrip())
    theta_tokens = u + required
    max_c = W - theta_tokens
    return Cliff(seed=trial.seed, order=order, u=u, fact_start=start, fact_end=end,
                 required_r=required, theta=theta_tokens, max_c=max_c, p_star=max_c / W)


# --------------------------------------------------------------------------- grid and keys


def normalise_q(values: Iterable[float]) -> tuple[float, ...]:
    """Target ratios as fractions in [0, 1], rounded to 6 digits (stable log keys)."""
    out = []
    for value in values:
        q = float(value)
        if not math.isfinite(q) or not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be in [0, 1]; got {value!r}")
        out.append(round(q, 6))
    return tuple(dict.fromkeys(out))


def call_key(q: float, order: str, seed: int) -> str:
    return f"{q}:{order}:{seed}"



def coordination_text(seed: int) -> str:
    """Synthetic multi-agent coordination content for a StatefulWorkflow prompt: the full
    context blocks of a DACSSteering scenario of the same seed (agents' tasks, status lines,
    facts), which say nothing about the workflow, like seed 000's coordination block."""
    scenario = generate(seed, 10, "homogeneous", 3)
    return "".join(full_block(agent, {}).text for agent in scenario.agents)

