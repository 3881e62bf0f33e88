"""What the text layer needs from each env family, in one table keyed by envs.family_of.

A text policy needs, per family: the JSON fields of an answer with their bounds (what
`parse_json_action` checks, so an out-of-range answer is `invalid_action`), how parsed
integers become the env's action, the prompt renderer, and the text oracle that answers the
rendered prompts (llm_policies/oracle.py, the harness's self-check). TextActionWrapper and LLMPolicy
read this table and nothing else about the env's kind. To let text policies play a new env
family, add its entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import envs
from llm_policies.oracle import DacsOracle, WorkflowOracle
from llm_policies.prompts.dacs import ANSWER_FIELDS, DacsRenderer
from llm_policies.prompts.workflow import WorkflowRenderer, action_fields

ActionFields = tuple[tuple[str, int], ...]  # (JSON key, exclusive upper bound) per field


@dataclass(frozen=True)
class TextFamily:
    """fields(core env) -> the answer's fields; to_action(parsed integers) -> env action;
    renderer(core env, **renderer kwargs) -> a Renderer for LLMPolicy; oracle() -> a
    function from chat messages to the answer text (it is given no env, by design)."""

    fields: Callable[[Any], ActionFields | None]  # None: the reply text is the action
    to_action: Callable[[tuple[int, ...]], Any]
    renderer: Callable[..., Any]
    oracle: Callable[[], Callable[[Any], str]]


def _dacs_free_text(core: Any) -> bool:
    """Under seed 002's keyword scoring the env's action is the reply text itself."""
    return core.params.scoring == "keywords"


def _dacs_renderer(core: Any, *, system_role: bool = True, **_: Any) -> DacsRenderer:
    # The window is the env's, already under its budget: RCWT knobs do not apply.
    return DacsRenderer(system_role=system_role, free_text=_dacs_free_text(core))


TEXT_FAMILIES: dict[str, TextFamily] = {
    envs.WORKFLOW: TextFamily(
        fields=lambda core: action_fields(core.params),
        to_action=lambda parsed: np.array(parsed, dtype=np.int64),
        renderer=lambda core, **kwargs: WorkflowRenderer(core.params, **kwargs),
        oracle=WorkflowOracle,
    ),
    envs.DACS: TextFamily(
        fields=lambda core: None if _dacs_free_text(core) else ANSWER_FIELDS,
        to_action=lambda parsed: int(parsed[0]),
        renderer=_dacs_renderer,
        oracle=DacsOracle,
    ),
}


def text_family(env: Any) -> TextFamily:
    """The table entry of a (possibly wrapped) env; ValueError for an env text policies do
    not play."""
    family = envs.family_of(env, strict=False)
    if family not in TEXT_FAMILIES:
        titles = " and ".join(envs.FAMILIES[f].title for f in TEXT_FAMILIES)
        raise ValueError(f"text policies play {titles} envs; got {env.unwrapped!r}")
    return TEXT_FAMILIES[family]
