"""StatefulWorkflow as a TRL environment: `GRPOTrainer(environment_factory=WorkflowToolEnv)`.

TRL (1.16, `GRPOTrainer`'s experimental `environment_factory`) makes one instance per
rollout, calls `reset(**row)` with the dataset row and appends the text it returns to the
row's last user message, offers every public method but `reset` and `get_reward` as a tool
(its schema from the type hints and the `Args:` docstring), and after the rollout scores it
with `get_reward()`. So this class has exactly one public tool, `execute(operation,
candidate)`.

Why the episode is diagym's and not a loop written here: the model is told what diagym's
`tools` harness tells it (the renderer's rules with the harness's answer instruction, the
opening turn, a result turn per call: diagym.llm_policies.prompts.workflow), and each call
is judged by the one text-action layer (TextActionWrapper with a ToolCallAction,
diagym.llm_policies.text_actions): an argument out of range is `invalid_action`, one that is
not an integer `invalid_arguments`, and either ends the episode as diagym's rule says
instead of raising into TRL's loop. A rollout that stops calling (the model answered in
text, or TRL's length or turn limit cut it) ends the episode as `no_tool_call`, the
harness's rule for a reply without a call.

Where TRL's loop differs from diagym's harness: TRL executes every call of a reply in turn,
so several calls in one reply are several steps (the harness calls that
`multiple_tool_calls`), and it answers a call of an unknown function itself, so the episode
goes on (`unknown_tool` in the harness). A call after the episode ended raises, and TRL
hands the model the message as the tool's error.

The reward is the episode's return: the fraction of operations completed (the env's 1/N per
success), 1.0 for a solved task. `record` is the episode as diagym's EpisodeRecord.

Datasets: `workflow_dataset` (configurations x task seeds, in order: a curriculum when
`GRPOConfig(shuffle_dataset=False)`) and `battery_dataset` (the diagnosis battery split as
`diagym diagnose` splits it). A row's `env_kwargs` is JSON text, since a dataset column
holds one type. `datasets` is imported by those two functions alone, and nothing here
imports TRL: the class is plain Python (the `[trl]` extra brings TRL and its stack).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from diagym import envs
from diagym.analysis.integrations.episodes import WORKFLOW_ID, battery, seeds
from diagym.analysis.llm_runs import make_text_env
from diagym.controllers.policy import EpisodeRecord
from diagym.envs._core.checks import check_int, check_seed
from diagym.llm_policies.harness.tools import ToolsHarness
from diagym.llm_policies.prompts.workflow import WorkflowRenderer
from diagym.llm_policies.text_actions import (
    FAILURE_REASONS,
    NO_TOOL_CALL,
    TextActionWrapper,
    ToolCallAction,
)

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["EPISODE_OVER", "WorkflowToolEnv", "battery_dataset", "workflow_dataset"]

EPISODE_OVER = "The episode is over"  # every text that ends one starts its last line so


def _kwargs(value: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A row's env kwargs: JSON text (a dataset column) or a mapping."""
    if value is None:
        return {}
    parsed = json.loads(value) if isinstance(value, str) else dict(value)
    if not isinstance(parsed, dict):
        raise ValueError(f"env_kwargs must be a JSON object of gym.make keyword arguments; "
                         f"got {value!r}")
    return parsed


class WorkflowToolEnv:
    """One StatefulWorkflow episode per `reset`, played through `execute` (module
    docstring). `env_id` and `env_kwargs` are the configuration of rows that name none;
    a row's own `env_id`, `env_kwargs` and `task_seed` win. Without a task seed the env
    moves to its next task seed, so a dataset of bare prompts still plays new tasks."""

    def __init__(self, env_id: str = WORKFLOW_ID, **env_kwargs: Any) -> None:
        self._default = (env_id, dict(env_kwargs))
        self._key: str | None = None
        self._env: TextActionWrapper | None = None
        self._record: EpisodeRecord | None = None
        self._open = False

    def reset(self, **row: Any) -> str:
        """Start the row's episode; the text is the rules, the task and the initial
        observation (TRL appends it to the row's prompt)."""
        env_id = row.get("env_id") or self._default[0]
        kwargs = {**self._default[1], **_kwargs(row.get("env_kwargs"))}
        seed = row.get("task_seed")
        env = self._make(env_id, kwargs)
        observation, info = env.reset(seed=check_seed(seed, "task_seed"))
        self._renderer = WorkflowRenderer(env.unwrapped.params)
        self._renderer.reset()
        rules = self._renderer.rules(ToolsHarness(self._renderer, env.tools).answer_instruction())
        self._open, self._return, self._calls = True, 0.0, 0
        self._first_failure: str | None = None
        self._info, self._seed = info, int(info["task_seed"])
        self._record = None
        return f"{rules}\n\n{self._renderer.opening(observation)}"

    def execute(self, operation: int, candidate: int) -> str:
        """Call operation `operation` with candidate slot `candidate`: one step of the
        workflow. The result says the call's outcome, the register update it applied and the
        new observation; a failed call, or a value outside the ranges the rules give, may
        end the episode.

        Args:
            operation: The operation identifier, an integer in the range the rules give.
            candidate: The candidate slot, an integer in the range the rules give.
        """
        if not self._open:
            raise ValueError(f"{EPISODE_OVER}: no further call is executed. Reply without "
                             "a function call.")
        env = self._env
        assert env is not None
        call = ToolCallAction("execute", json.dumps({"operation": operation,
                                                     "candidate": candidate}))
        observation, reward, terminated, truncated, info = env.step(call)
        self._calls += 1
        self._return += float(reward)
        self._info = info
        if self._first_failure is None and info.get("failure") is not None:
            self._first_failure = str(info["failure"])
        status = info["action_status"]
        if status == "ok":
            text = self._renderer.result((operation, candidate), observation, info)
        else:
            text = f"That call was {status}: {FAILURE_REASONS[status]}; nothing was executed."
        if terminated or truncated:
            return f"{text}\n{self._close()}"
        return text

    def get_reward(self) -> float:
        """The episode's return; an episode still open has ended without a call."""
        if self._open:
            self._first_failure = self._first_failure or NO_TOOL_CALL
            self._close()
        return self._return

    @property
    def record(self) -> EpisodeRecord | None:
        """The last finished episode as diagym records one (None before the first ends)."""
        return self._record

    def _close(self) -> str:
        """End the episode: its record, and the text that tells the model it is over."""
        info = self._info
        success = bool(info.get("success"))
        self._open = False
        self._record = EpisodeRecord(
            episode=0, task_seed=self._seed, success=success,
            completed=int(info["completed_ops"]), calls=self._calls, errors=int(info["errors"]),
            first_failure=None if success else self._first_failure,
            episode_return=self._return, counters={})
        outcome = ("the task is solved" if success else
                   f"the task is not solved (first failure: {self._first_failure})")
        return (f"{EPISODE_OVER}: {outcome}, {self._record.completed} operations completed. "
                "Do not call execute again; reply without a function call.")

    def _make(self, env_id: str, kwargs: Mapping[str, Any]) -> TextActionWrapper:
        """The episode's env, kept while the configuration repeats."""
        key = json.dumps([env_id, kwargs], sort_keys=True)
        if key != self._key:
            env = make_text_env(env_id, **kwargs)
            if envs.family_of(env, strict=False) != envs.WORKFLOW:
                env.close()
                raise ValueError(f"env_id must be a StatefulWorkflow id (the execute tool); "
                                 f"got {env_id!r}")
            if self._env is not None:
                self._env.close()
            self._env, self._key = env, key
        assert self._env is not None
        return self._env


def _rows(env_id: str, configurations: Sequence[tuple[Mapping[str, Any], Sequence[int]]]
          ) -> Dataset:
    from datasets import Dataset

    rows: dict[str, list[Any]] = {"prompt": [], "env_id": [], "env_kwargs": [], "task_seed": []}
    for kwargs, task_seeds in configurations:
        text = json.dumps(dict(kwargs), sort_keys=True)
        for seed in task_seeds:
            rows["prompt"].append([{"role": "user", "content": ""}])
            rows["env_id"].append(env_id)
            rows["env_kwargs"].append(text)
            rows["task_seed"].append(int(seed))
    return Dataset.from_dict(rows)


def workflow_dataset(configurations: Sequence[Mapping[str, Any]] = ({},), episodes: int = 8,
                     seed: int = 0, env_id: str = WORKFLOW_ID) -> Dataset:
    """One row per (configuration, task seed): each configuration's gym.make kwargs with the
    task seeds seed..seed+episodes-1, configurations in the order given."""
    task_seeds = seeds(check_int("episodes", episodes, 1), seed)
    for kwargs in configurations:  # a bad knob fails here, naming it
        WorkflowToolEnv(env_id, **kwargs)._make(env_id, kwargs).close()
    return _rows(env_id, [(kwargs, task_seeds) for kwargs in configurations])


def battery_dataset(budget: int | None = None, seed: int = 0) -> Dataset:
    """The StatefulWorkflow diagnosis battery as rows, `budget` episodes (default 512) split
    by the battery's shares as `diagym diagnose` splits them."""
    return _rows(WORKFLOW_ID, battery(WORKFLOW_ID, budget, seed))
