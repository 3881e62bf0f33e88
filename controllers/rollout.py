"""One runner for every kind of agent: episode i on reset(seed=seed + i), one record each.

The runner picks its path itself. A seed 003 reference controller (ReferencePolicy) on a bare
StatefulWorkflow env plays its episodes in the batched numba runner
(controllers/workflow/batched.py), about a hundred times faster than stepping the Gymnasium
env from Python, with records and log lines equal to the per-step path's field for field
(tests/controllers/test_rollout.py holds the two paths against each other). Every other pair
(LLM policies, SB3 models, wrapped envs, DACSSteering) plays step by step.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

from diagym import envs
from diagym.controllers.episodes import Episodes
from diagym.controllers.executors import Executor, LocalExecutor, worker_state
from diagym.controllers.policy import EpisodeAborted, EpisodeRecord, Policy
from diagym.controllers.runlog import RunLog
from diagym.controllers.workflow.adapter import ReferencePolicy
from diagym.controllers.workflow.batched import CHUNK, episode_columns
from diagym.envs._core.failures import failure_name
from diagym.envs.workflow.params import WorkflowParams

# Wrappers that pass reset and step through unchanged: the two gym.make adds by default
# (a reset-before-step check and a one-time passive checker that only warns). Any other
# wrapper may change observations, actions, rewards or episode ends (TimeLimit truncates, a
# text wrapper parses actions), so an env wrapped in one plays step by step. Types are
# matched exactly: a subclass may override step.
TRANSPARENT_WRAPPERS = (OrderEnforcing, PassiveEnvChecker)


def describe_run(env: gym.Env, policy: Any) -> dict[str, Any]:
    """What a run measures: env id and kwargs, and the policy's own description (for a chat
    model its model and harness settings). RunLog names the run by this without its
    transport (runlog.identity), and each episode by the run and its seed."""
    spec = env.spec
    describe = getattr(policy, "describe", None)
    return {
        "env": spec.id if spec is not None else type(env.unwrapped).__name__,
        "env_kwargs": dict(spec.kwargs) if spec is not None else {},
        "policy": describe() if callable(describe) else type(policy).__name__,
    }


def batched_spec(env: gym.Env, policy: Any) -> WorkflowParams | None:
    """The task spec the batched runner plays for (env, policy), or None for step by step.

    Batched only when every record would be the same: the policy is exactly a ReferencePolicy
    (a subclass may act differently), built for the env's own spec; the env's family is
    workflow and its core is exactly the family's env class; every wrapper around it is in
    TRANSPARENT_WRAPPERS. The batched path does not step `env` or `policy`: after the run
    they hold no episode, where the per-step path leaves them at the last episode's end.
    """
    if type(policy) is not ReferencePolicy:
        return None
    try:
        if envs.family_of(env) != envs.WORKFLOW:
            return None
    except ValueError:
        return None
    layer = env
    while isinstance(layer, gym.Wrapper):
        if type(layer) not in TRANSPARENT_WRAPPERS:
            return None
        layer = layer.env
    if type(layer) is not envs.FAMILIES[envs.WORKFLOW].env_class():
        return None
    spec = layer.params
    return spec if policy.spec == spec else None


def _check_counts(episodes: Any, seed: Any) -> None:
    if (isinstance(episodes, bool) or not isinstance(episodes, int)
            or not 0 <= episodes < 2**63):
        raise ValueError(f"episodes must be an integer in 0..2**63-1; got {episodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63 - episodes:
        raise ValueError(f"seed must be an integer in 0..2**63-1-episodes; got {seed!r}")


def rollout(env: gym.Env, policy: Policy, episodes: int, seed: int = 0,
            log: Path | RunLog | None = None, resume: bool = False,
            on_record: Callable[[EpisodeRecord], None] | None = None,
            fast: bool = True, run_name: str | None = None,
            retry_failed: bool = False,
            on_resumed: Callable[[int], None] | None = None,
            on_progress: Callable[[int], None] | None = None) -> Episodes:
    """Play `episodes` episodes, episode i on reset(seed=seed + i); one record each.

    With `log`, every record is appended to a RunLog as soon as its episode ends (and the
    policy may log its own lines there); resume=True skips the episodes already finished in
    it, so an interrupted run loses and duplicates nothing. `log` may be a path (opened, locked
    and closed here) or a RunLog already open (a study sharing one log between its runs; the
    resume rule was applied when it was opened). `run_name` names the run in the log instead
    of its description; retry_failed (implies resume) plays again the finished episodes whose
    first failure is runlog.PROVIDER_ERROR. `on_record` is called with each newly played
    record, in episode order; `on_resumed`, once before any is played, with how many of the
    episodes the log already holds (0 without resume), so progress counts them as done;
    `on_progress`, with how many episodes have just finished (a progress bar's count: unlike
    on_record it needs no record, so the batched path builds none for it).

    A reference controller on a bare workflow env (`batched_spec`) plays batched: the same
    records, log lines and resume, but lines and on_record calls come a chunk of episodes
    (batched.CHUNK) at a time, and only then is an EpisodeRecord built per episode; without
    log and on_record none is (on_progress is told a chunk's size). fast=False forces the
    per-step path.
    """
    return rollout_parallel(lambda: env, lambda _env: policy, episodes, seed=seed, workers=1,
                            log=log, resume=resume, on_record=on_record, fast=fast,
                            run_name=run_name, retry_failed=retry_failed, on_resumed=on_resumed,
                            on_progress=on_progress)


def rollout_parallel(make_env: Callable[[], gym.Env], make_policy: Callable[[gym.Env], Policy],
                     episodes: int, seed: int = 0, workers: int = 2,
                     log: Path | RunLog | None = None, resume: bool = False,
                     on_record: Callable[[EpisodeRecord], None] | None = None,
                     fast: bool = True, run_name: str | None = None,
                     retry_failed: bool = False,
                     executor: Executor | None = None,
                     on_resumed: Callable[[int], None] | None = None,
                     on_progress: Callable[[int], None] | None = None) -> Episodes:
    """`rollout` with `workers` episodes in flight, each worker with its own env and policy
    (for policies that wait on I/O, such as an LLM server). Records come back in episode
    order whatever order they finished in. When the first worker's pair plays batched
    (`batched_spec`), the whole run does, in this thread: workers would only add overhead.

    `executor` (diagym.controllers.executors) says where episodes play instead of `workers` threads
    here. On one that is not in process (Ray) each episode is a task of (make_env,
    make_policy, its seed), which must then be picklable; the task returns its record and the
    lines its policy would have logged, and this thread writes them to the one log as they
    arrive, so the log is the one a local run writes, in another order. A batched run is
    split into chunks of seeds there, one task each."""
    _check_counts(episodes, seed)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; got {workers!r}")
    executor = LocalExecutor(workers) if executor is None else executor
    local = threading.local()

    def worker_pair() -> tuple[gym.Env, Policy]:
        if not hasattr(local, "pair"):
            env = make_env()
            local.pair = (env, make_policy(env))
        return local.pair

    first_env, first_policy = worker_pair()
    spec = batched_spec(first_env, first_policy) if fast else None
    run_log, owned = _open_log(log, describe_run(first_env, first_policy), resume, run_name,
                               retry_failed, describe_session(first_policy))
    finished: list[EpisodeRecord] = []
    if run_log is None:
        todo = np.arange(episodes, dtype=np.int64)
    else:
        remaining = []
        for i in range(episodes):
            key = run_log.key(seed + i)
            if key in run_log.finished:
                finished.append(dataclasses.replace(run_log.finished[key], episode=i))
            else:
                remaining.append(i)
        todo = np.array(remaining, dtype=np.int64)
    if on_resumed is not None:
        on_resumed(len(finished))
    # the per-step paths count each record they build; the batched ones count chunks
    per_step = on_record if on_progress is None else _Counting(on_record, on_progress)
    try:
        if spec is not None and (executor.in_process or not len(todo)):
            assert isinstance(first_policy, ReferencePolicy)
            played = _play_batched(spec, first_policy.name, seed, todo, run_log, on_record,
                                   on_progress)
        elif spec is not None:
            assert isinstance(first_policy, ReferencePolicy)
            played = _play_batched_remote(spec, first_policy.name, seed, todo, run_log,
                                          on_record, executor, on_progress)
        elif executor.in_process:
            played = Episodes.from_records(
                _play_steps(worker_pair, seed, todo.tolist(), executor, run_log, per_step))
        else:
            played = Episodes.from_records(
                _play_remote(make_env, make_policy, seed, todo.tolist(), executor, run_log,
                             per_step))
    finally:
        if run_log is not None and owned:
            run_log.close()
    if not finished:
        return played
    merged = Episodes.concatenate([Episodes.from_records(finished), played])
    return merged.take(np.argsort(merged.columns["episode"], kind="stable"))


class _Counting:
    """on_record that also counts each record into on_progress, for the per-step paths,
    where a record exists anyway (the batched paths count chunks)."""

    def __init__(self, on_record: Callable[[EpisodeRecord], None] | None,
                 on_progress: Callable[[int], None]) -> None:
        self.on_record, self.on_progress = on_record, on_progress

    def __call__(self, record: EpisodeRecord) -> None:
        if self.on_record is not None:
            self.on_record(record)
        self.on_progress(1)


def describe_session(policy: Any) -> dict[str, Any] | None:
    """What a policy says about this session of its run (an LLM policy: the server's probed
    capabilities, prices, cost limit), for the run log's session line; a policy without a
    `describe_session()` method says nothing."""
    describe = getattr(policy, "describe_session", None)
    return describe() if callable(describe) else None


def _open_log(log: Path | RunLog | None, run: dict[str, Any], resume: bool,
              run_name: str | None, retry_failed: bool,
              session: dict[str, Any] | None = None) -> tuple[RunLog | None, bool]:
    """The run's log with `run` open in it, and whether this runner opened (and closes) it."""
    if log is None:
        return None, False
    if isinstance(log, RunLog):
        log.open_run(run, name=run_name, retry_failed=retry_failed, session=session)
        return log, False
    return RunLog(log, run, resume or retry_failed, name=run_name,
                  retry_failed=retry_failed, session=session), True


def _play_steps(worker_pair: Callable[[], tuple[gym.Env, Policy]], seed: int, todo: list[int],
                executor: Executor, run_log: RunLog | None,
                on_record: Callable[[EpisodeRecord], None] | None) -> list[EpisodeRecord]:
    """The per-step path: the env's step loop and the policy's act, episode by episode, on
    threads of this process writing the log as they play. The first failure (a cost limit
    reached, an interrupt) stops the run: episodes not yet started are not started; those in
    flight end as they do (executor.map)."""

    def play(i: int) -> EpisodeRecord:
        env, policy = worker_pair()
        attach = getattr(policy, "attach_log", None)
        if callable(attach):
            attach(run_log)
        if run_log is not None:
            run_log.begin_episode(run_log.key(seed + i))
        record = _play(env, policy, i, seed + i)
        if run_log is not None:
            run_log.write_episode(run_log.key(seed + i), record)
        if on_record is not None:
            on_record(record)
        return record

    return executor.map(play, todo)


class _Lines:
    """What a policy in a remote worker logs (its `attach_log` target): the open run's keys
    and the lines, kept to send back with the episode's record."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.lines: list[dict[str, Any]] = []

    def key(self, seed: int) -> str:
        return f"{self.run_id}:{seed}"

    def write(self, entry: dict[str, Any]) -> None:
        self.lines.append(entry)


@dataclasses.dataclass(frozen=True)
class _RemoteEpisode:
    """One episode as a picklable unit: a pure function of the factories and the seed, so
    the record does not depend on the worker. Each worker builds its own env and policy once
    per run (`token`) and keeps them for its later episodes, as a local thread does."""

    make_env: Callable[[], gym.Env]
    make_policy: Callable[[gym.Env], Policy]
    seed: int
    run_id: str | None
    token: str

    def build(self) -> tuple[gym.Env, Policy]:
        env = self.make_env()
        return env, self.make_policy(env)

    def __call__(self, i: int) -> tuple[EpisodeRecord, list[dict[str, Any]]]:
        env, policy = worker_state(self.token, self.build)
        lines = None if self.run_id is None else _Lines(self.run_id)
        attach = getattr(policy, "attach_log", None)
        if callable(attach):
            attach(lines)
        record = _play(env, policy, i, self.seed + i)
        return record, [] if lines is None else lines.lines


def _play_remote(make_env: Callable[[], gym.Env], make_policy: Callable[[gym.Env], Policy],
                 seed: int, todo: list[int], executor: Executor, run_log: RunLog | None,
                 on_record: Callable[[EpisodeRecord], None] | None) -> list[EpisodeRecord]:
    """The per-step path on workers elsewhere: each episode's lines (calls, traces) and
    record are written here as it arrives, after the replay line voiding an earlier attempt,
    so a worker killed mid-episode leaves nothing in the log and its episode is played again
    whole (by Ray, or by a resume)."""
    unit = _RemoteEpisode(make_env, make_policy, seed,
                          None if run_log is None else run_log.run_id, uuid.uuid4().hex)

    def arrived(i: int, result: tuple[EpisodeRecord, list[dict[str, Any]]]) -> None:
        record, lines = result
        if run_log is not None:
            key = run_log.key(seed + i)
            run_log.begin_episode(key)
            for line in lines:
                run_log.write(line)
            run_log.write_episode(key, record)
        if on_record is not None:
            on_record(record)

    return [record for record, _ in executor.map(unit, todo, on_result=arrived)]


@dataclasses.dataclass(frozen=True)
class _RemoteBatch:
    """A chunk of a batched run's seeds as a picklable unit: its columns and counters."""

    spec: WorkflowParams
    controller: str
    seed: int

    def __call__(self, todo: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        return episode_columns(self.spec, self.controller, self.seed + todo)


def _play_batched_remote(spec: WorkflowParams, controller: str, seed: int, todo: np.ndarray,
                         run_log: RunLog | None,
                         on_record: Callable[[EpisodeRecord], None] | None,
                         executor: Executor,
                         on_progress: Callable[[int], None] | None = None) -> Episodes:
    """The batched path on workers elsewhere: about four chunks per worker (at most CHUNK
    seeds each), each chunk's lines written here as it arrives."""
    size = min(CHUNK, max(1, -(-len(todo) // (4 * executor.workers))))
    chunks = [todo[start:start + size] for start in range(0, len(todo), size)]

    def arrived(chunk: np.ndarray,
                result: tuple[dict[str, np.ndarray], dict[str, np.ndarray]]) -> None:
        if on_progress is not None:
            on_progress(len(chunk))
        if run_log is None and on_record is None:
            return
        columns, counters = result
        for record in Episodes({"episode": chunk, **columns}, counters):
            if run_log is not None:
                key = run_log.key(seed + record.episode)
                run_log.begin_episode(key)
                run_log.write_episode(key, record)
            if on_record is not None:
                on_record(record)

    parts = executor.map(_RemoteBatch(spec, controller, seed), chunks, on_result=arrived)
    return Episodes.concatenate([Episodes({"episode": chunk, **columns}, counters)
                                 for chunk, (columns, counters) in zip(chunks, parts,
                                                                       strict=True)])


def _play_batched(spec: WorkflowParams, controller: str, seed: int, todo: np.ndarray,
                  run_log: RunLog | None,
                  on_record: Callable[[EpisodeRecord], None] | None,
                  on_progress: Callable[[int], None] | None = None) -> Episodes:
    """The batched path: columns straight from the numba runner; records are built (a chunk
    at a time) only for the log and on_record; on_progress is told each chunk's size."""

    def emit(start: int, columns: dict[str, np.ndarray],
             counters: dict[str, np.ndarray]) -> None:
        episode = todo[start:start + len(columns["success"])]
        if run_log is not None or on_record is not None:
            for record in Episodes({"episode": episode, **columns}, counters):
                if run_log is not None:
                    run_log.write_episode(run_log.key(seed + record.episode), record)
                if on_record is not None:
                    on_record(record)
        if on_progress is not None:
            on_progress(len(episode))

    wanted = run_log is not None or on_record is not None or on_progress is not None
    if run_log is not None:
        for i in todo:
            run_log.begin_episode(run_log.key(seed + int(i)))
    columns, counters = episode_columns(spec, controller, seed + todo,
                                        on_chunk=emit if wanted else None)
    return Episodes({"episode": todo, **columns}, counters)


def _play(env: gym.Env, policy: Policy, episode: int, seed: int) -> EpisodeRecord:
    """One episode; after its last step the policy's optional `episode_end(observation,
    info)` gets what that step returned (the last action's outcome reaches no act), then its
    optional `episode_counters()` is asked once."""
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
        if first_failure is None:
            first_failure = failure_name(info.get("failure"))
        if terminated or truncated:
            break
    end = getattr(policy, "episode_end", None)
    if callable(end):  # optional: what the last step returned (controllers/tracing.py)
        end(observation, info)
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
