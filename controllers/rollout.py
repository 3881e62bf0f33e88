"""One runner for every kind of agent: episode i on reset(seed=seed + i), one record each."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym

from controllers.policy import EpisodeAborted, EpisodeRecord, Policy
from controllers.runlog import RunLog


def describe_run(env: gym.Env, policy: Any) -> dict[str, Any]:
    """What identifies a run in its log: env id and kwargs, and the policy's own description."""
    spec = env.spec
    describe = getattr(policy, "describe", None)
    return {
        "env": spec.id if spec is not None else type(env.unwrapped).__name__,
        "env_kwargs": dict(spec.kwargs) if spec is not None else {},
        "policy": describe() if callable(describe) else type(policy).__name__,
    }


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
