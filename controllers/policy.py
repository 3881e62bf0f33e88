"""One Policy interface and one rollout runner for every kind of agent.

A reference controller, an LLM text policy (llm_policies/) and a trained SB3 model all
implement `reset(*, seed=None)` and `act(observation, info) -> action`, so one runner, one
record format and one set of tables serve all of them. `ReferencePolicy` adapts the numba
controllers of controllers/reference.py to this interface by rebuilding the env's flat rows
from the observation: the very functions the batched grid runner calls, step by step.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from controllers.reference import (
    C_CHECKS,
    C_ENTRIES,
    C_LOOKUPS,
    C_PREP,
    CONTROLLER_FIELDS,
    CONTROLLERS,
    K_RETAIN,
    RETAIN_PLAN,
    controller_act,
    controller_begin,
    controller_params,
    value_bits,
)
from envs.workflow_layout import OBS_LAST_UPDATE, OBS_REGISTERS, obs_offsets, task_offsets
from envs.workflow_spec import WorkflowSpec


@runtime_checkable
class Policy(Protocol):
    """What the runner needs from an agent."""

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(self, observation: Any, info: dict[str, Any]) -> Any: ...


class ReferencePolicy:
    """A seed 003 reference controller (docs/CONTROLLERS.md) as a per-step Policy.

    It knows the public rules (the WorkflowSpec), reads the public task and the registers
    from the observation, and draws its random choices from the controller stream of the
    episode's task seed (info["task_seed"]), so it plays exactly as the batched runner does.
    """

    def __init__(self, name: str, spec: WorkflowSpec) -> None:
        self.name = name
        self.spec = spec
        self._cparams = controller_params(name)
        self._params = spec.to_params()
        n, b = spec.n_ops, spec.candidates
        self._task = np.zeros((1, task_offsets(n, b)[-1]), dtype=np.int8)
        self._obs = np.zeros((1, obs_offsets(n, b)[-1]), dtype=np.int8)
        self._completed = obs_offsets(n, b)[0]
        self._cstate = np.zeros((1, CONTROLLER_FIELDS), dtype=np.int64)
        self._fresh = True

    @classmethod
    def for_env(cls, name: str, env: gym.Env) -> ReferencePolicy:
        """The controller for a StatefulWorkflow env (wrapped or not)."""
        spec = getattr(env.unwrapped, "spec_params", None)
        if not isinstance(spec, WorkflowSpec):
            raise ValueError(
                f"reference controllers play StatefulWorkflow envs; got {env.unwrapped!r}"
            )
        return cls(name, spec)

    def reset(self, *, seed: int | None = None) -> None:
        self._fresh = True

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        n = self.spec.n_ops
        obs = self._obs[0]
        obs[OBS_REGISTERS:OBS_REGISTERS + 8] = observation["registers"]
        obs[OBS_LAST_UPDATE:OBS_LAST_UPDATE + 2] = observation["last_update"]
        obs[self._completed:self._completed + n] = observation["completed"]
        if self._fresh or info["calls"] == 0:
            self._task[0] = np.concatenate([
                observation["query_register"], observation["update_register"],
                observation["delta"], observation["codes"], observation["prereq"],
            ])
            controller_begin(self._params, self._cparams, self._cstate, 0, self._task, 0,
                             self._obs, 0, int(info["task_seed"]))
            self._fresh = False
        op, slot = controller_act(self._params, self._cparams, self._cstate, 0, self._task, 0,
                                  self._obs, 0, int(observation["failure"]))
        return np.array([op, slot], dtype=np.int64)

    def episode_counters(self) -> dict[str, int]:
        """The controller's resource counters for the episode so far (paper section 4, 7.6)."""
        state = self._cstate[0]
        entries = int(state[C_ENTRIES])
        plan = CONTROLLERS[self.name][K_RETAIN] == RETAIN_PLAN
        return {
            "checks": int(state[C_CHECKS]),
            "lookups": int(state[C_LOOKUPS]),
            "prep_entries": int(state[C_PREP]),
            "cache_entries": entries,
            "value_bits": value_bits(self.name, entries, self.spec.candidates),
            "plan_slots": self.spec.n_ops if plan else 0,
        }


@dataclasses.dataclass(frozen=True)
class EpisodeRecord:
    """One episode, whatever the agent: outcome, work, first failure and the agent's own
    counters (resources of a controller; tokens and latency of an LLM policy)."""

    episode: int
    task_seed: int | None
    success: bool
    completed: int
    calls: int
    errors: int
    first_failure: str | None
    episode_return: float
    counters: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def _completed_records(path: Path) -> dict[int, EpisodeRecord]:
    """Records already written by an earlier (possibly interrupted) run. A torn last line is
    cut off the file, so the episode it belonged to is played again and appended whole."""
    done: dict[int, EpisodeRecord] = {}
    if not path.exists():
        return done
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        with path.open("r+b") as handle:
            handle.truncate(len(data))
    for line in data.decode().splitlines():
        try:
            record = EpisodeRecord(**json.loads(line))
        except (json.JSONDecodeError, TypeError):
            continue
        done[record.episode] = record
    return done


def rollout(env: gym.Env, policy: Policy, episodes: int, seed: int = 0,
            jsonl: Path | None = None,
            on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
    """Play `episodes` episodes, episode i on reset(seed=seed + i); one record each.

    With `jsonl`, every record is appended as one JSON line as soon as its episode ends, and
    episodes already in the file are not played again: an interrupted run resumes without
    losing or duplicating work.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 0:
        raise ValueError(f"episodes must be an integer >= 0; got {episodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63 - episodes:
        raise ValueError(f"seed must be an integer in 0..2**63-1-episodes; got {seed!r}")
    done = _completed_records(jsonl) if jsonl is not None else {}
    records: list[EpisodeRecord] = []
    sink = jsonl.open("a") if jsonl is not None else None
    try:
        for i in range(episodes):
            if i in done:
                records.append(done[i])
                continue
            record = _play(env, policy, i, seed + i)
            if sink is not None:
                sink.write(record.to_json() + "\n")
                sink.flush()
            if on_record is not None:
                on_record(record)
            records.append(record)
    finally:
        if sink is not None:
            sink.close()
    return records


def _play(env: gym.Env, policy: Policy, episode: int, seed: int) -> EpisodeRecord:
    observation, info = env.reset(seed=seed)
    policy.reset(seed=seed)
    first_failure = None
    total = 0.0
    steps = 0
    while True:
        action = policy.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        steps += 1
        total += float(reward)
        if first_failure is None and info.get("failure") is not None:
            first_failure = str(info["failure"])
        if terminated or truncated:
            break
    counters = policy.episode_counters() if hasattr(policy, "episode_counters") else {}
    task_seed = info.get("task_seed")
    return EpisodeRecord(
        episode=episode,
        task_seed=None if task_seed is None else int(task_seed),
        success=bool(info.get("success", False)),
        completed=int(info.get("completed_ops", 0)),
        calls=int(info.get("calls", steps)),
        errors=int(info.get("errors", 0)),
        first_failure=first_failure,
        episode_return=total,
        counters=dict(counters),
    )
