"""diagym's envs as a verifiers (0.4) environment: a Taskset of episodes, an Env whose
`run` plays each one, and `load_environment(**args)` for Python callers.

verifiers 0.4 replaced `MultiTurnEnv` with a Taskset (config in, tasks out) and an Env
whose `run(task, agents)` holds the agent's conversation open turn by turn
(`agents.player.interaction(task)`, `await interaction.turn(message)`), the pattern of its
own TextArena env. Why the episode is diagym's and not a loop written here: the model plays
through `LLMPolicy` (the `chat` harness's prompts by default, one JSON answer per turn)
behind `TextActionWrapper`, on diagym's runner, in a worker thread (`play_lines`); its
chat model, `VerifiersChat`, hands each call to the interaction on the event loop. So a
reply is judged by the one text-action rule (an answer out of range is `invalid_action` and
ends the episode; nothing raises into verifiers), and each trace keeps the episode's
run-log lines in `trace.info["diagym_log"]`, the lines `diagym run --log` writes.

Scoring: the reward `episode_return` (StatefulWorkflow: the fraction of operations
completed; DACSSteering: its per-decision reward), metrics `success` and `completed`, and
`trace.info["first_failure"]`.

verifiers resolves a taskset id by importing a top-level module of that name, and diagym's
wheel installs only `diagym`: importing this module registers it as `diagym_verifiers` too
(enough for `load_environment`), and for `vf-eval diagym_verifiers` a two-line module of
that name on PYTHONPATH names it (docs/INTEGRATIONS.md):

    from diagym.analysis.integrations.verifiers_env import *  # noqa: F403
    from diagym.analysis.integrations.verifiers_env import __all__  # noqa: F401

verifiers pins an older openai than diagym's dev tools, so it is the optional extra
`diagym[verifiers]`, installed in an environment of its own, and imported here alone.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any, Literal

import verifiers.v1 as vf

from diagym.analysis.integrations.episodes import (
    DEFAULT_EPISODES,
    WORKFLOW_ID,
    battery,
    episode_record,
    play_lines,
    seeds,
)
from diagym.llm_policies.client.transport import ChatResult

__all__ = ["DiagymEnv", "DiagymTaskset", "load_environment"]

TASKSET_ID = "diagym_verifiers"  # the top-level name verifiers resolves the taskset by
LOG_KEY = "diagym_log"  # a trace's run-log lines in trace.info
VERIFIERS = "verifiers"  # VerifiersChat's base_url: the model is the interaction's


class DiagymTasksetConfig(vf.TasksetConfig):
    env_id: str = WORKFLOW_ID
    """The diagym env id (StatefulWorkflow-v0, its presets, DACSSteering-v0)."""
    env_kwargs: dict[str, Any] = {}
    """The env's gym.make keyword arguments (its knobs)."""
    episodes: int = DEFAULT_EPISODES
    """Task seeds per configuration: seed..seed+episodes-1."""
    seed: int = 0
    """The first task seed."""
    battery: bool = False
    """Play the diagnosis battery of env_id (`budget` episodes) instead of env_kwargs."""
    budget: int | None = None
    """The battery's episodes (None: diagym diagnose's default)."""
    harness: Literal["chat", "json"] = "chat"
    """How the model answers: `chat` (one conversation, a JSON object per turn) or `json`
    (seed 003's fresh prompt per decision, sent as the next turn)."""


class DiagymData(vf.TaskData):
    info: dict
    """env_id, env_kwargs, task_seed and harness: what the episode is played from."""


class DiagymTask(vf.Task[DiagymData, vf.State, vf.TaskConfig]):
    pass


class DiagymTaskset(vf.Taskset[DiagymTask, DiagymTasksetConfig]):
    """One task per (configuration, task seed); the env writes the prompts as it plays."""

    def load(self) -> Iterator[DiagymTask]:
        config = self.config
        if config.battery:
            configurations = battery(config.env_id, config.budget, config.seed)
        else:
            configurations = [(config.env_kwargs, seeds(config.episodes, config.seed))]
        for index, (kwargs, task_seeds) in enumerate(configurations):
            for seed in task_seeds:
                yield DiagymTask(DiagymData(
                    name=f"{config.env_id} c{index} seed {seed}",
                    info={"env_id": config.env_id, "env_kwargs": dict(kwargs),
                          "task_seed": int(seed), "harness": config.harness}),
                    config.task)


class DiagymEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"},
                                            runtime=vf.SubprocessConfig())
    """The model: verifiers' plain chat program (harness `null`, no tools), run as a local
    subprocess; `--env.player.*` overrides either."""


class VerifiersChat:
    """The chat model (diagym.llm_policies.policy.ChatModel) of one verifiers rollout: each
    call sends what the harness added since the last reply as the interaction's next turn
    (the first call sends the rules and the opening) and returns the reply, from the
    episode's worker thread onto the rollout's event loop."""

    base_url = VERIFIERS
    response_format = "none"
    temperature = 0.0
    max_tokens: int | None = None
    seed: int | None = None

    def __init__(self, interaction: Any, loop: asyncio.AbstractEventLoop,
                 model: str = VERIFIERS) -> None:
        self.interaction, self.loop, self.model = interaction, loop, model

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> ChatResult:
        started = time.perf_counter()
        replies = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
        turn = messages[replies[-1] + 1:] if replies else messages
        segment = asyncio.run_coroutine_threadsafe(
            self.interaction.turn([dict(message) for message in turn]), self.loop).result()
        latency = time.perf_counter() - started
        if segment.terminated:
            return ChatResult(text="", status="error", http_status=None, prompt_tokens=None,
                              completion_tokens=None, latency_s=latency, retries=0,
                              error="the verifiers run ended (a turn, token or time limit)",
                              response_format=self.response_format, error_kind="server")
        return ChatResult(text=segment.last_reply, status="ok", error=None, http_status=None,
                          prompt_tokens=None, completion_tokens=None, latency_s=latency,
                          retries=0, response_format=self.response_format)

    def close(self) -> None:
        pass


class DiagymEnv(vf.Env[DiagymEnvConfig]):
    """Plays a task's episode with the run's model (module docstring)."""

    async def run(self, task: DiagymTask, agents: Any) -> None:
        info = task.data.info
        loop = asyncio.get_running_loop()
        async with agents.player.interaction(task) as interaction:
            chat = VerifiersChat(interaction, loop)
            lines = await asyncio.to_thread(
                play_lines, chat, info["env_id"], info["env_kwargs"], int(info["task_seed"]),
                harness=info["harness"], invalid_retries=0, bounded_fields=False)
            record = episode_record(lines)  # scored before the exchange closes, which logs it
            trace = interaction.trace
            trace.record_reward("episode_return", record.episode_return)
            trace.record_metrics({"success": float(record.success),
                                  "completed": float(record.completed)})
            trace.info["first_failure"] = record.first_failure
            trace.info[LOG_KEY] = lines


def load_environment(**args: Any) -> DiagymEnv:
    """The environment for taskset settings `args` (DiagymTasksetConfig's fields: env_id,
    env_kwargs, episodes, seed, battery, budget, harness), as verifiers' own loader builds
    it; `vf-eval` takes the same settings as `--env.taskset.<name>`."""
    taskset = DiagymTasksetConfig(id=TASKSET_ID, **args)
    return vf.load_environment(DiagymEnvConfig(taskset=taskset))


sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])
