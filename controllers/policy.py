"""One Policy interface and one rollout runner for every kind of agent.

A reference controller, an LLM text policy (llm_policies/) and a trained SB3 model all
implement `reset(*, seed=None)` and `act(observation, info) -> action`, so one runner, one
record format and one set of tables serve all of them. `ReferencePolicy` adapts the numba
controllers of controllers/reference.py to this interface by rebuilding the env's flat rows
from the observation: the very functions the batched grid runner calls, step by step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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

    def describe(self) -> dict[str, Any]:
        return {"controller": self.name}

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


class EpisodeAborted(Exception):
    """Raised by a policy to end the episode without acting, with a failure category (an LLM
    policy whose provider kept failing raises it with "provider_error"); the runner records
    the episode instead of losing it."""

    def __init__(self, category: str, detail: str = "") -> None:
        super().__init__(f"{category}: {detail}" if detail else category)
        self.category = category


@dataclasses.dataclass(frozen=True)
class EpisodeRecord:
    """One episode, whatever the agent: outcome, work, first failure, the agent's own
    counters (resources of a controller; tokens and latency of an LLM policy) and the env's
    own per-episode metrics (DACSSteering: accuracy, contamination, window tokens)."""

    episode: int
    task_seed: int | None
    success: bool
    completed: int
    calls: int
    errors: int
    first_failure: str | None
    episode_return: float
    counters: dict[str, Any]
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)  # env's episode_metrics


def describe_run(env: gym.Env, policy: Any) -> dict[str, Any]:
    """What identifies a run in its log: env id and kwargs, and the policy's own description."""
    spec = env.spec
    describe = getattr(policy, "describe", None)
    return {
        "env": spec.id if spec is not None else type(env.unwrapped).__name__,
        "env_kwargs": dict(spec.kwargs) if spec is not None else {},
        "policy": describe() if callable(describe) else type(policy).__name__,
    }


class RunLog:
    """An append-only JSONL log of a run, safe to kill at any moment.

    Every line is one JSON object with a "type": "episode" lines (`episode_key` and the
    EpisodeRecord) are written when an episode ends; policies may add their own lines (an LLM
    policy writes one "call" line per model call). Opening with resume=True reads the finished
    episodes and cuts a torn last line, so a rerun plays only the episodes that have no
    "episode" line and each episode ends up in the log exactly once. Appends are serialised by
    a lock, so parallel episodes share one log.
    """

    def __init__(self, path: Path, run: dict[str, Any], resume: bool = False) -> None:
        self.path = Path(path)
        self.run = run
        text = json.dumps(run, sort_keys=True, default=str)
        self.run_id = hashlib.sha256(text.encode()).hexdigest()[:12]
        self._lock = threading.Lock()
        self.finished: dict[str, EpisodeRecord] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise FileExistsError(
                    f"log {self.path} exists: pass resume=True (--resume) to continue it, or "
                    f"choose another file"
                )
            self._read_finished()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sink = self.path.open("a")

    def _read_finished(self) -> None:
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        for line in data.decode().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("type") == "episode" and entry.get("episode_key", "").startswith(
                    f"{self.run_id}:"):
                self.finished[entry["episode_key"]] = EpisodeRecord(**entry["record"])

    def key(self, seed: int) -> str:
        """The episode key of reset seed `seed` in this run."""
        return f"{self.run_id}:{seed}"

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True, default=str)
        with self._lock:
            self._sink.write(line + "\n")
            self._sink.flush()

    def write_episode(self, key: str, record: EpisodeRecord) -> None:
        self.write({"type": "episode", "episode_key": key, "record": dataclasses.asdict(record)})

    def close(self) -> None:
        with self._lock:
            self._sink.close()


def _check_counts(episodes: Any, seed: Any) -> None:
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 0:
        raise ValueError(f"episodes must be an integer >= 0; got {episodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63 - episodes:
        raise ValueError(f"seed must be an integer in 0..2**63-1-episodes; got {seed!r}")


def rollout(env: gym.Env, policy: Policy, episodes: int, seed: int = 0,
            log: Path | None = None, resume: bool = False,
            on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
    """Play `episodes` episodes, episode i on reset(seed=seed + i); one record each.

    With `log`, every record is appended to a RunLog as soon as its episode ends (and the
    policy may log its own lines there); resume=True skips the episodes already finished in
    it, so an interrupted run loses and duplicates nothing.
    """
    return rollout_parallel(lambda: env, lambda _env: policy, episodes, seed=seed, workers=1,
                            log=log, resume=resume, on_record=on_record)


def rollout_parallel(make_env: Callable[[], gym.Env], make_policy: Callable[[gym.Env], Policy],
                     episodes: int, seed: int = 0, workers: int = 2, log: Path | None = None,
                     resume: bool = False,
                     on_record: Callable[[EpisodeRecord], None] | None = None
                     ) -> list[EpisodeRecord]:
    """`rollout` with `workers` episodes in flight, each worker with its own env and policy
    (for policies that wait on I/O, such as an LLM server). Records come back in episode
    order whatever order they finished in."""
    _check_counts(episodes, seed)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    local = threading.local()

    def worker_pair() -> tuple[gym.Env, Policy]:
        if not hasattr(local, "pair"):
            env = make_env()
            local.pair = (env, make_policy(env))
        return local.pair

    first_env, first_policy = worker_pair()
    run_log = RunLog(log, describe_run(first_env, first_policy), resume) if log else None
    records: dict[int, EpisodeRecord] = {}
    todo = []
    for i in range(episodes):
        key = run_log.key(seed + i) if run_log else None
        if run_log is not None and key in run_log.finished:
            records[i] = dataclasses.replace(run_log.finished[key], episode=i)
        else:
            todo.append(i)

    def play(i: int) -> EpisodeRecord:
        env, policy = worker_pair()
        attach = getattr(policy, "attach_log", None)
        if callable(attach):
            attach(run_log)
        record = _play(env, policy, i, seed + i)
        if run_log is not None:
            run_log.write_episode(run_log.key(seed + i), record)
        if on_record is not None:
            on_record(record)
        return record

    try:
        if workers == 1:
            for i in todo:
                records[i] = play(i)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for i, record in zip(todo, pool.map(play, todo), strict=True):
                    records[i] = record
    finally:
        if run_log is not None:
            run_log.close()
    return [records[i] for i in range(episodes)]


def _play(env: gym.Env, policy: Policy, episode: int, seed: int) -> EpisodeRecord:
    observation, info = env.reset(seed=seed)
    policy.reset(seed=seed)
    first_failure = None
    total = 0.0
    steps = 0
    while True:
        try:
            action = policy.act(observation, info)
        except EpisodeAborted as aborted:
            first_failure = first_failure or aborted.category
            info = {**info, "success": False}
            break
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
        metrics=dict(info.get("episode_metrics", {})),
    )
