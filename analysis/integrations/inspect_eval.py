"""diagym's envs and its diagnosis battery as inspect_ai tasks, and their eval logs as run logs.

`inspect eval diagym/stateful_workflow --model M` (or diagym/dacs_steering, diagym/diagnosis)
lets any model inspect supports play diagym, with the env's knobs as task arguments (-T width=4)
and one sample per task seed. Why the episode is diagym's and not a loop written here: the
model plays through `LLMPolicy` (the harness's prompts, the env's `execute` tool, one
conversation per episode) behind `TextActionWrapper`, so a reply is judged by the one
text-action layer (diagym.llm_policies.text_actions): a tool call with candidate=2018 is
`invalid_action` and ends that episode as diagym's rule says, and never raises into inspect.
The runner is diagym's `rollout` with its run log, so each sample keeps the very lines a
`diagym run --log` writes (the run, the episode record, its trace, the calls without their
prompts, which inspect's transcript holds), in the sample's store under STORE_KEY.

The bridge: LLMPolicy and the runner are synchronous and inspect's models are async, so a
sample runs the episode in a worker thread (anyio.to_thread) and `InspectChat`, the policy's
chat model, hands each call back to the sample's event loop (anyio.from_thread) to
`Model.generate`; inspect then logs, retries, limits and caches the calls as its own.

`run_log_of` turns an eval log's samples back into one diagym run log, and
`diagym diagnose --inspect-log FILE.eval` diagnoses it: the diagnosis task's samples are the
battery's episodes (analysis/diagnose/battery.py's configurations and allocation, or the
DACS battery), so the log is read exactly as a `diagym diagnose --policy ... --log` log.

inspect_ai is the optional extra `diagym[inspect]`, imported here and nowhere else; the
`inspect_ai` entry point in pyproject.toml names this module, which registers the tasks.
"""

from __future__ import annotations

import functools
import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import read_eval_log_samples
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Model,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolCall as InspectToolCall
from inspect_ai.tool import ToolInfo, ToolParams

from diagym.analysis.integrations.episodes import (
    DACS_ID,
    DEFAULT_EPISODES,
    WORKFLOW_ID,
    battery,
    episode_record,
    play_lines,
    seeds,
)
from diagym.analysis.llm_runs import make_text_env
from diagym.controllers.runlog import RunLog
from diagym.envs._core.checks import check_bool, check_choice, check_int
from diagym.llm_policies.client.transport import ChatResult, ToolCall
from diagym.llm_policies.harness import HARNESSES
from diagym.llm_policies.policy import LLMPolicy

__all__ = ["STORE_KEY", "InspectChat", "dacs_steering", "diagnosis", "play_episode",
           "run_log_of", "stateful_workflow", "episode_outcome"]

STORE_KEY = "diagym_log"  # a sample's run-log lines in its store
INSPECT = "inspect"  # InspectChat's base_url: the model is inspect's, reached in process


class InspectChat:
    """The chat model (diagym.llm_policies.policy.ChatModel) of a sample: inspect's `model`,
    called from the episode's worker thread on the sample's event loop (`token`). The
    attributes describe the run as a ChatClient's do; the last call's messages and output
    are kept for the sample's transcript."""

    base_url = INSPECT
    response_format = "none"  # the harness's own text or tool calls; no structured output

    def __init__(self, model: Model, token: Any) -> None:
        self.inspect_model = model
        self.token = token
        config = model.config
        self.model = str(model)
        self.temperature = config.temperature
        self.max_tokens = config.max_tokens
        self.seed = config.seed
        self.last: tuple[list[ChatMessage], ModelOutput] | None = None

    def complete(self, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> ChatResult:
        started = time.perf_counter()
        sent = inspect_messages(messages)
        infos = [tool_info(tool) for tool in tools or ()]
        output = anyio.from_thread.run(self._generate, sent, infos, token=self.token)
        self.last = (sent, output)
        return chat_result(output, time.perf_counter() - started)

    async def _generate(self, messages: list[ChatMessage], tools: list[ToolInfo]
                        ) -> ModelOutput:
        return await self.inspect_model.generate(messages, tools=tools,
                                                 tool_choice="auto" if tools else None)

    def close(self) -> None:
        pass


def tool_info(tool: Mapping[str, Any]) -> ToolInfo:
    """inspect's ToolInfo of an OpenAI function dict (the tools harness's `tool_dict`)."""
    function = tool["function"]
    return ToolInfo(name=function["name"], description=function["description"],
                    parameters=ToolParams.model_validate(function["parameters"]))


def inspect_messages(messages: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
    """inspect's messages for the harness's OpenAI-form ones; a tool result is named by the
    function of the call it answers, as some providers require."""
    out: list[ChatMessage] = []
    functions: dict[str, str] = {}
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "user":
            out.append(ChatMessageUser(content=content))
        elif role == "assistant":
            calls = [_inspect_call(call) for call in message.get("tool_calls") or ()]
            functions.update((call.id, call.function) for call in calls)
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif role == "tool":
            call_id = str(message["tool_call_id"])
            out.append(ChatMessageTool(content=content, tool_call_id=call_id,
                                       function=functions.get(call_id)))
        else:
            raise ValueError(f"message role must be system | user | assistant | tool; "
                             f"got {role!r}")
    return out


def _inspect_call(call: Mapping[str, Any]) -> InspectToolCall:
    """An assistant message's tool call for inspect, whose arguments are an object; text that
    is not one travels as the call's parse error (the harness already judged it)."""
    text = call["function"]["arguments"]
    try:
        arguments = json.loads(text)
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        return InspectToolCall(id=call["id"], function=call["function"]["name"],
                               arguments=arguments)
    return InspectToolCall(id=call["id"], function=call["function"]["name"], arguments={},
                           parse_error=f"not a JSON object: {text!r}")


def chat_result(output: ModelOutput, latency_s: float) -> ChatResult:
    """diagym's ChatResult of an inspect output: its text and its tool calls, each call's
    arguments encoded back to JSON text for the harness to judge (an argument out of range
    stays out of range: candidate=2018 is the env's to refuse)."""
    usage = output.usage
    if output.error:
        return ChatResult(text="", status="error", error=output.error, http_status=None,
                          prompt_tokens=None, completion_tokens=None, latency_s=latency_s,
                          retries=0, response_format=InspectChat.response_format,
                          error_kind="server", served_model=output.model or None)
    message = output.message
    calls = tuple(ToolCall(call.id, call.function, json.dumps(call.arguments))
                  for call in message.tool_calls or ())
    return ChatResult(
        text=message.text, status="ok", error=None, http_status=None,
        prompt_tokens=None if usage is None else usage.input_tokens,
        completion_tokens=None if usage is None else usage.output_tokens,
        latency_s=latency_s, retries=0, response_format=InspectChat.response_format,
        tool_calls=calls, served_model=output.model or None,
        finish_reason=output.stop_reason)


@solver
def play_episode(harness: str = "tools", invalid_retries: int = 0,
                 bounded_fields: bool = False) -> Solver:
    """The sample's episode (metadata: env_id, env_kwargs, task_seed) played by the task's
    model (module docstring); its run-log lines go to the store, its last exchange to the
    sample's messages and output."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        chat = InspectChat(get_model(), anyio.lowlevel.current_token())
        meta = state.metadata
        play = functools.partial(play_lines, chat, meta["env_id"], meta["env_kwargs"],
                                 int(meta["task_seed"]), harness=harness,
                                 invalid_retries=invalid_retries,
                                 bounded_fields=bounded_fields)
        state.store.set(STORE_KEY, await anyio.to_thread.run_sync(play))
        if chat.last is not None:
            sent, output = chat.last
            state.messages = [*sent, output.message]
            state.output = output
        return state

    return solve


@scorer(metrics={"success": [mean(), stderr()], "completed": [mean()]})
def episode_outcome() -> Any:
    """The episode's success (1 or 0) and completed operations; the answer is its first
    failure ("none" for an episode without one), as diagym's EpisodeRecord has it."""

    async def score(state: TaskState, target: Target) -> Score:
        record = episode_record(state.store.get(STORE_KEY))
        failure = record.first_failure or "none"
        return Score(value={"success": float(record.success), "completed": record.completed},
                     answer=failure,
                     explanation=(f"{'success' if record.success else 'failure'}: "
                                  f"{record.completed} operations completed in "
                                  f"{record.calls} calls; first failure {failure}"),
                     metadata={"first_failure": record.first_failure,
                               "task_seed": record.task_seed, "calls": record.calls,
                               "errors": record.errors, "return": record.episode_return})

    return score


def _check_play(harness: str, invalid_retries: int, bounded_fields: bool) -> None:
    check_choice("harness", harness, HARNESSES)
    check_int("invalid_retries", invalid_retries, 0)
    check_bool("bounded_fields", bounded_fields)


def _task(env_id: str, configurations: Sequence[tuple[Mapping[str, Any], Sequence[int]]],
          harness: str, invalid_retries: int, bounded_fields: bool) -> Task:
    """One sample per (configuration, task seed), played and scored as above."""
    _check_play(harness, invalid_retries, bounded_fields)
    samples = []
    for c, (kwargs, task_seeds) in enumerate(configurations):
        env = make_text_env(env_id, **dict(kwargs))  # a bad knob fails here, naming it
        try:  # and a harness the env cannot play (tools where the reply text is the action)
            LLMPolicy.for_env(None, env, harness=harness, invalid_retries=invalid_retries,
                              bounded_fields=bounded_fields)
        finally:
            env.close()
        for seed in task_seeds:
            samples.append(Sample(
                id=f"c{c}-s{seed}" if len(configurations) > 1 else seed,
                input=f"{env_id} {dict(kwargs)} task seed {seed}",
                metadata={"env_id": env_id, "env_kwargs": dict(kwargs), "task_seed": seed}))
    return Task(dataset=MemoryDataset(samples, name=env_id),
                solver=play_episode(harness, invalid_retries, bounded_fields),
                scorer=episode_outcome())


@task
def stateful_workflow(episodes: int = DEFAULT_EPISODES, seed: int = 0, harness: str = "tools",
                      invalid_retries: int = 0, bounded_fields: bool = False,
                      **env_kwargs: Any) -> Task:
    """StatefulWorkflow-v0 with any of its knobs (-T width=4 -T snapshot_period=0), one
    sample per task seed seed..seed+episodes-1, played through the `execute` tool (harness
    tools; json or chat: JSON text answers)."""
    return _task(WORKFLOW_ID, [(env_kwargs, seeds(episodes, seed))], harness,
                 invalid_retries, bounded_fields)


@task
def dacs_steering(episodes: int = DEFAULT_EPISODES, seed: int = 0, harness: str = "tools",
                  invalid_retries: int = 0, bounded_fields: bool = False,
                  **env_kwargs: Any) -> Task:
    """DACSSteering-v0 with any of its knobs (-T context_mode=flat), one sample per scenario
    seed, answered through the `answer` tool (and `focus` where the agent chooses it)."""
    return _task(DACS_ID, [(env_kwargs, seeds(episodes, seed))], harness, invalid_retries,
                 bounded_fields)


@task
def diagnosis(env: str = WORKFLOW_ID, budget: int | None = None, seed: int = 0,
              harness: str = "tools", invalid_retries: int = 0,
              bounded_fields: bool = False) -> Task:
    """The diagnosis battery of `env` as samples, `budget` episodes split as `diagym
    diagnose` splits them (StatefulWorkflow: by the battery's shares, default 512;
    DACSSteering: evenly over its 4 configurations, default 32); `diagym diagnose
    --inspect-log` reads the eval log."""
    return _task(env, battery(env, budget, seed), harness, invalid_retries, bounded_fields)


@dataclass(frozen=True)
class Converted:
    """What `run_log_of` wrote: episodes, and the samples it left out (no episode: an
    errored or cancelled sample; a repeat of an episode key: a further epoch)."""

    episodes: int
    without_episode: int
    repeated: int


def run_log_of(eval_log: Path, out: Path) -> Converted:
    """Write the diagym run log of an eval log's samples to `out` (a new file, the run-log
    rule: RunLog.check_target): each sample's lines in sample order, its episode numbered
    within its run in seed order. ValueError, one line, for a log no sample of which holds a
    diagym episode."""
    RunLog.check_target(out, resume=False)
    kept: list[list[dict[str, Any]]] = []
    seeds: dict[str, list[int]] = defaultdict(list)
    keys: set[str] = set()
    without = repeated = 0
    for sample in read_eval_log_samples(str(eval_log), all_samples_required=False,
                                        exclude_fields={"events", "messages"}):
        lines = sample.store.get(STORE_KEY)
        episode = next((line for line in lines or () if line.get("type") == "episode"), None)
        if episode is None:
            without += 1
            continue
        if episode["episode_key"] in keys:
            repeated += 1
            continue
        keys.add(episode["episode_key"])
        run_id, seed = episode["episode_key"].rsplit(":", 1)
        seeds[run_id].append(int(seed))
        kept.append(lines)
    if not kept:
        raise ValueError(f"{eval_log} holds no diagym episode: no sample's store has "
                         f"{STORE_KEY!r} (the eval of a diagym/ task, with its samples logged)")
    order = {key: {seed: i for i, seed in enumerate(sorted(found))}
             for key, found in seeds.items()}
    with Path(out).open("x") as sink:
        for lines in kept:
            for line in lines:
                if line.get("type") == "episode":
                    run_id, seed = line["episode_key"].rsplit(":", 1)
                    line = {**line, "record": {**line["record"],
                                               "episode": order[run_id][int(seed)]}}
                sink.write(json.dumps(line, sort_keys=True, default=str) + "\n")
    return Converted(len(kept), without, repeated)
