"""What the text layer needs from each env family, in one table keyed by diagym.envs.family_of.

A text policy needs, per family: the JSON fields of an answer with their bounds (what
`parse_json_action` checks, so an out-of-range answer is `invalid_action`), how parsed
integers become the env's action, the functions a model may call instead in the `tools`
harness (each with its own fields, checked by the same rule), the prompt renderer, and the
text oracle that answers the rendered prompts (llm_policies/oracle.py, the harness's
self-check). TextActionWrapper and LLMPolicy
read this table and nothing else about the env's kind. To let text policies play a new env
family, add its entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagym import envs
from diagym.envs.dacs.scenario import N_OPTIONS
from diagym.llm_policies.oracle import DacsOracle, WorkflowOracle
from diagym.llm_policies.prompts.dacs import ANSWER_FIELDS, DacsRenderer
from diagym.llm_policies.prompts.workflow import WorkflowRenderer, action_fields

ActionFields = tuple[tuple[str, int], ...]  # (JSON key, exclusive upper bound) per field


@dataclass(frozen=True)
class ToolSpec:
    """One function a model may call: its arguments are exactly `fields` (integers below
    their bounds, judged like a JSON answer), and to_action(those integers) is the env action
    the call stands for."""

    name: str
    description: str
    fields: ActionFields
    to_action: Callable[[tuple[int, ...]], Any]


@dataclass(frozen=True)
class TextFamily:
    """fields(core env) -> the answer's fields; to_action(parsed integers) -> env action;
    tools(core env) -> the functions of the tools harness (empty where the reply text is the
    action); renderer(core env, **renderer kwargs) -> a Renderer for LLMPolicy; oracle() -> a
    function from chat messages to the answer text (it is given no env, by design)."""

    fields: Callable[[Any], ActionFields | None]  # None: the reply text is the action
    to_action: Callable[[tuple[int, ...]], Any]
    tools: Callable[[Any], tuple[ToolSpec, ...]]
    renderer: Callable[..., Any]
    oracle: Callable[[], Callable[[Any], str]]


def _dacs_free_text(core: Any) -> bool:
    """Under seed 002's keyword scoring the env's action is the reply text itself."""
    return core.params.scoring == "keywords"


def _workflow_action(parsed: tuple[int, ...]) -> Any:
    return np.array(parsed, dtype=np.int64)


def _workflow_tools(core: Any) -> tuple[ToolSpec, ...]:
    spec = core.params
    return (ToolSpec(
        "execute",
        f"Call operation `operation` (0..{spec.n_ops - 1}) with candidate slot `candidate` "
        f"(0..{spec.candidates - 1}).",
        action_fields(spec), _workflow_action),)


def _dacs_tools(core: Any) -> tuple[ToolSpec, ...]:
    """answer(option), and focus(agent) where the env lets the policy load an agent's full
    context (its action N_OPTIONS + agent, envs/dacs/env.py)."""
    if _dacs_free_text(core):
        return ()
    answer = ToolSpec(
        "answer", f"Answer the pending request with option `option` (0..{N_OPTIONS - 1}).",
        (("option", N_OPTIONS),), lambda parsed: int(parsed[0]))
    if not core.params.agent_chosen_focus:
        return (answer,)
    n, cost = core.params.n_agents, core.params.focus_cost
    focus = ToolSpec(
        "focus", f"Load the full context of agent `agent` (0..{n - 1}) into the window; the "
        f"request stays pending and the call costs {cost:g} reward.",
        (("agent", n),), lambda parsed: N_OPTIONS + int(parsed[0]))
    return answer, focus


def _dacs_renderer(core: Any, *, system_role: bool = True, **_: Any) -> DacsRenderer:
    # The window is the env's, already under its budget: RCWT knobs do not apply.
    return DacsRenderer(system_role=system_role, free_text=_dacs_free_text(core))


TEXT_FAMILIES: dict[str, TextFamily] = {
    envs.WORKFLOW: TextFamily(
        fields=lambda core: action_fields(core.params),
        to_action=_workflow_action,
        tools=_workflow_tools,
        renderer=lambda core, **kwargs: WorkflowRenderer(core.params, **kwargs),
        oracle=WorkflowOracle,
    ),
    envs.DACS: TextFamily(
        fields=lambda core: None if _dacs_free_text(core) else ANSWER_FIELDS,
        to_action=lambda parsed: int(parsed[0]),
        tools=_dacs_tools,
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
        raise ValueError(f"text policies play {titles} envs; got {envs.env_name(env)}")
    return TEXT_FAMILIES[family]
