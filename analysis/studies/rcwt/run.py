"""Play RCWT sweeps (design.py): one fixed-budget prompt per trial, scored 0/1.

Attribution under repetition: the evidence block may be repeated whole copies plus a cut
last copy, and the coordination text holds other agents' facts for the same key. The reader
attributes every line to the block header above it (diagym.controllers.dacs.readers.parse_window)
and takes the requester's *first* fact mention: every copy but the last is complete, and a
cut last copy can end inside the value ("us-ea", or "750" cut from "7500", which is a real
value).

Resume: every call is one result line of a RunLog (key f"{q}:{order}:{seed}" plus the run id
of W, env kwargs, trial definition and policy), written as soon as it is scored; a rerun with
resume skips logged keys, so after a kill each call is in the log exactly once and the scores
equal those of an uninterrupted run (the reader's guesses come from a stream seeded by the
trial seed, not from call order).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from diagym.analysis.studies.rcwt.design import (
    ENV_ID,
    Q_GRID,
    WORKFLOW_ID,
    Trial,
    assemble_trial,
    build_trials,
    call_key,
    coordination_text,
    normalise_q,
)
from diagym.controllers.callline import ELAPSED, MODEL_FIELDS, CallLine
from diagym.controllers.dacs.readers import evidence, parse_window
from diagym.controllers.runlog import PROVIDER_ERROR, RunLog
from diagym.envs._core import rng
from diagym.envs.dacs.scenario import N_OPTIONS
from diagym.llm_policies.prompts.budget import (
    ARTIFACT_DROP,
    ARTIFACT_LAYOUT,
    LAYOUTS,
    ORDERS,
    Assembly,
)
from diagym.llm_policies.prompts.dacs import ANSWER_SCHEMA
from diagym.llm_policies.text_actions import ANSWER_KEY, parse_json_action

# --------------------------------------------------------------------------- policies


class AnswerPolicy(Protocol):
    """A policy: `answer(prompt) -> option index or None`, `prompt` the assembled
    budget.Assembly (its `text`, or its chat `messages()`). Optional extras the sweep uses
    when present: `reset(*, seed)` before each call, `last_call` (a dict merged into the call
    record: category, provider tokens...), `name`, `describe()` and `fork()` (a copy for
    another worker thread)."""

    def __call__(self, prompt: Assembly) -> int | None: ...


class FlatReader:
    """The programmed reader on the assembled text (no model).

    parse_window attributes each "fact: <key> = <value>" line to the block header above it;
    the reader takes the requester's first fact mention for the asked key (module docstring)
    or, for a cascade request, the source agent's first decision. Missing (or a value that is
    not an option): a uniform guess from the controller stream of the trial seed (category
    "guess"), or with guess=False no answer (category "missing", score 0).
    """

    name = "flat-reader"

    def __init__(self, guess: bool = True) -> None:
        self.guess = guess
        self._key = rng.stream_key(0, rng.CONTROLLER_STREAM)
        self._counter = np.int64(0)
        self.last_call: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "guess": self.guess}

    def fork(self) -> FlatReader:
        return FlatReader(self.guess)

    def reset(self, *, seed: int) -> None:
        self._key = rng.stream_key(int(seed), rng.CONTROLLER_STREAM)
        self._counter = np.int64(0)

    def value(self, prompt: str) -> tuple[str | None, list[str]]:
        """(the value read, the options); value None when the prompt does not hold it."""
        parsed = parse_window(prompt)
        wanted = evidence(parsed)  # the first copy: a repeated block's last may be cut
        return (wanted[0].value if wanted else None), parsed.options

    def __call__(self, prompt: Assembly | str) -> int | None:
        value, options = self.value(prompt.text if isinstance(prompt, Assembly) else prompt)
        if value is not None and value in options:
            self.last_call = {"category": "read"}
            return options.index(value)
        if not self.guess:
            self.last_call = {"category": "missing"}
            return None
        draw, self._counter = rng.uniform_below(self._key, self._counter,
                                                max(len(options), 1) if options else N_OPTIONS)
        self.last_call = {"category": "guess"}
        return int(draw)


class LLMAnswer:
    """A chat model behind an OpenAI-compatible endpoint, its client made by the run's chat
    policy factory (analysis/llm_runs.py ChatPolicyFactory.chat: priced, limited, cached like
    every other chat run's).

    messages = the assembly's `messages(system_role)`: in the artifact's layout [system: the
    context blocks, user: the task]; with system_role=False (chat templates that drop system
    messages, e.g. llama.cpp's gemma format), or in `instructions_first`, one user message
    holding the same W tokens. The reply must be {"answer": i}
    (text_actions.parse_json_action); anything else scores 0 with the parse category, and a
    provider failure scores 0 as "provider_error". Each instance (and each `fork()`) owns one
    client.
    """

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self.system_role = factory.settings.system_role
        self.client = factory.chat(ANSWER_SCHEMA)
        self.name = str(factory.settings.model)
        self.last_call: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        # What is measured, never the transport (the base URL may carry credentials too).
        keys = ("model", "temperature", "max_tokens", "seed", "response_format")
        return {"policy": "llm", "system_role": self.system_role,
                **{k: getattr(self.factory.settings, k) for k in keys}}

    def fork(self) -> LLMAnswer:
        return LLMAnswer(self.factory)

    def close(self) -> None:
        self.client.close()

    def __call__(self, prompt: Assembly) -> int | None:
        result = self.client.complete(prompt.messages(self.system_role))
        info: dict[str, Any] = {
            "response": result.text, "status": result.status, "error": result.error,
            "http_status": result.http_status, "provider_prompt_tokens": result.prompt_tokens,
            "provider_completion_tokens": result.completion_tokens,
            "latency_s": result.latency_s, "retries": result.retries,
            "response_format": result.response_format, "cost_usd": result.cost_usd,
            "cache": result.cache,
        }
        if result.status != "ok":
            self.last_call = {**info, "category": PROVIDER_ERROR}
            return None
        status, parsed = parse_json_action(result.text, ((ANSWER_KEY, N_OPTIONS),))
        self.last_call = {**info, "category": status}
        return None if parsed is None else int(parsed[0])


def _describe(policy: Any) -> Any:
    describe = getattr(policy, "describe", None)
    if callable(describe):
        return describe()
    return getattr(policy, "name", getattr(policy, "__name__", type(policy).__name__))


def policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", getattr(policy, "__name__", type(policy).__name__)))


def _check_sweep(window: Any, trials: Any, workers: Any, q: Sequence[float],
                 orders: Sequence[str], layout: Any = ARTIFACT_LAYOUT,
                 drop_at_most: Any = ARTIFACT_DROP) -> tuple[float, ...]:
    """Validate a sweep's arguments (errors name the parameter); returns the q grid."""
    for name, value in (("window", window), ("trials", trials), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    if isinstance(drop_at_most, bool) or not isinstance(drop_at_most, int) or drop_at_most < 0:
        raise ValueError(f"drop_at_most must be an integer >= 0; got {drop_at_most!r}")
    for order in orders:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    return normalise_q(q)


def run_sweep(
    policy: AnswerPolicy,
    *,
    window: int,
    trials: int,
    log: Path,
    q: Sequence[float] = Q_GRID,
    orders: Sequence[str] = ORDERS,
    env_kwargs: Mapping[str, Any] | None = None,
    resume: bool = False,
    model: str | None = None,
    workers: int = 1,
    layout: str = ARTIFACT_LAYOUT,
    drop_at_most: int = ARTIFACT_DROP,
    on_call: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (q, order, seed) call of the sweep, one "call" line each in `log`.

    layout and drop_at_most are budget.assemble's (default: the artifact's layout and its
    <= 10-token drop rule); both are part of the run, so a resume cannot mix layouts.

    Seeds 0..trials-1 are shared by every cell (paired). With resume, keys already in the log
    for this run (same W, env kwargs and policy) are not called again. `on_call(record)` runs
    after each record is written (progress bars; tests raise from it to simulate a kill);
    `on_start(done, total)` once before any call, with how many of the sweep's `total` calls
    the log already holds. With workers > 1, calls run in a thread pool, each worker with
    `policy.fork()` (or the shared policy when it has no fork). Returns the records of the
    requested cells, sorted by (order, q, seed), old and new alike.
    """
    grid = _check_sweep(window, trials, workers, q, orders, layout, drop_at_most)
    model_name = model or policy_name(policy)
    run = {"rcwt": ENV_ID, "env_kwargs": dict(env_kwargs or {}), "window": window,
           "trial": "first request", "policy": _describe(policy), "model": model_name,
           "layout": layout, "drop_at_most": drop_at_most}
    all_trials = build_trials(trials, env_kwargs)
    local = threading.local()

    def worker_policy() -> Any:
        if workers == 1:
            return policy
        if not hasattr(local, "policy"):
            fork = getattr(policy, "fork", None)
            local.policy = fork() if callable(fork) else policy
        return local.policy

    def one(item: tuple[float, str, Trial]) -> dict[str, Any]:
        qv, order, trial = item
        prompt = assemble_trial(trial, window, qv, order, layout=layout,
                                drop_at_most=drop_at_most)
        return _call(worker_policy(), trial, prompt, model_name)

    units = [(call_key(qv, order, t.seed), (qv, order, t))
             for order in orders for qv in grid for t in all_trials]
    return play_units(log, run, resume, units, one, workers=workers, on_call=on_call,
                      on_start=on_start)


def play_units(log: Path, run: Mapping[str, Any], resume: bool,
               units: Sequence[tuple[str, Any]], play: Callable[[Any], dict[str, Any]], *,
               workers: int = 1, on_call: Callable[[dict[str, Any]], None] | None = None,
               on_start: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Both sweeps' loop: play each (key, unit) of `units` the run's log lacks (`play(unit)`
    is its result line), each line written as soon as it is played, in `workers` threads;
    `on_start(done, total)` once first, `on_call(record)` after each line. Returns every
    unit's line, old and new, in the order of `units`."""
    run_log = RunLog(Path(log), run, resume=resume)
    try:
        done = run_log.results
        todo = [(key, unit) for key, unit in units if key not in done]
        if on_start is not None:
            on_start(len(units) - len(todo), len(units))

        def one(item: tuple[str, Any]) -> dict[str, Any]:
            record = run_log.write_result(play(item[1]))
            if on_call is not None:
                on_call(record)
            return record

        if workers == 1:
            new = [one(item) for item in todo]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                new = list(pool.map(one, todo))
    finally:
        run_log.close()
    records = {**done, **{r["key"]: r for r in new}}
    return [records[key] for key, _ in units if key in records]


def _call(policy: Any, trial: Trial, prompt: Assembly, model: str) -> dict[str, Any]:
    q, order = prompt.q, prompt.order
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset(seed=trial.seed)
    started = time.perf_counter()
    answer = policy(prompt)
    elapsed = time.perf_counter() - started
    extra = dict(getattr(policy, "last_call", None) or {})
    if answer is not None and (isinstance(answer, bool) or not isinstance(answer, int | np.integer)
                               or not 0 <= int(answer) < len(trial.options)):
        extra.setdefault("invalid_answer", repr(answer))
        answer = None
        extra["category"] = "invalid_action"
    answer = None if answer is None else int(answer)
    category = extra.pop("category", "ok" if answer is not None else "no_answer")
    model_call = {name: extra.pop(name) for name in MODEL_FIELDS if name in extra}
    return CallLine(**{"status": None, **model_call}, context={
        "key": call_key(q, order, trial.seed), "model": model,
        "q": q, "order": order, "seed": trial.seed, "W": prompt.W, "u": prompt.u, "c": prompt.c,
        "r": prompt.r, "p": prompt.p, "tokens": prompt.tokens, "c_target": prompt.c_target,
        "r_target": prompt.r_target, "dropped": list(prompt.dropped), "layout": prompt.layout,
        "score": int(answer is not None and answer == trial.correct),
        "answer": answer, "correct": trial.correct, "category": category,
        "requester": trial.requester, "asked": trial.key,
        "evidence_prefix": evidence_is_prefix(trial, prompt), ELAPSED: elapsed, **extra,
    }).entry()


def evidence_is_prefix(trial: Trial, prompt: Assembly) -> bool:
    """Whether the prompt's evidence block is a plain prefix of the repeated requester block.

    False for budget.fit_block's rare filler fallback (when no nearby character prefix has
    exactly the target count, e.g. a cut right after a line's "\\n" where the appended
    "\\n" would merge into "\\n\\n"): that block is a shorter prefix plus "000"
    fillers, so it can miss a fact line that layout_cliff counts as inside.
    """
    if prompt.r == 0:
        return True
    index = prompt.names.index("evidence")
    block = prompt.blocks[index]
    if prompt.newline_added[index]:
        block = block[:-1]  # fit_block appended one "\\n"
    source = trial.evidence.lstrip()
    return (source * (len(block) // max(len(source), 1) + 2)).startswith(block)


def run_workflow_sweep(
    factory: Any,
    *,
    window: int,
    trials: int,
    log: Path,
    q: Sequence[float] = Q_GRID,
    orders: Sequence[str] = ORDERS,
    env_kwargs: Mapping[str, Any] | None = None,
    resume: bool = False,
    on_call: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """The RCWT sweep on StatefulWorkflow with a chat model (`factory`, a ChatPolicyFactory
    of analysis/llm_runs.py: its client and its settings' system_role): one episode per
    (q, order, seed), every decision's prompt assembled to exactly W tokens (rules as
    instructions, synthetic coordination, the task/observation/history as evidence) by the
    workflow renderer, which keeps budget.assemble's `instructions_first` layout; score =
    episode success.

    One "call" line per episode (with its decisions' tokens and categories) keeps the
    record format of the DACS sweep, so `write_outputs` fits it the same way; resume skips
    episodes already logged. `on_call` and `on_start` are run_sweep's.
    """
    import gymnasium as gym

    from diagym.controllers.rollout import rollout
    from diagym.llm_policies.policy import LLMPolicy
    from diagym.llm_policies.prompts.workflow import ACTION_SCHEMA, WorkflowRenderer
    from diagym.llm_policies.text_actions import TextActionWrapper

    grid = _check_sweep(window, trials, 1, q, orders)
    settings = factory.settings
    model_name = str(settings.model)
    system_role = settings.system_role
    run = {"rcwt": WORKFLOW_ID, "env_kwargs": dict(env_kwargs or {}), "window": window,
           "trial": "episode", "model": model_name, "system_role": system_role,
           "policy": {k: getattr(settings, k) for k in ("model", "temperature", "max_tokens",
                                                        "seed")}}
    env = TextActionWrapper(gym.make(WORKFLOW_ID, **dict(env_kwargs or {})))
    spec = env.unwrapped.params
    client = factory.chat(ACTION_SCHEMA)

    def one(unit: tuple[float, str, int]) -> dict[str, Any]:
        qv, order, seed = unit
        renderer = WorkflowRenderer(spec, budget=window, q=qv,
                                    coordination=coordination_text(seed), order=order,
                                    system_role=system_role)
        first = renderer.render(env.reset(seed=seed)[0]).assembly
        started = time.perf_counter()
        record = rollout(env, LLMPolicy(client, renderer), 1, seed=seed)[0]
        counters = record.counters
        return CallLine(
            status="error" if record.first_failure == PROVIDER_ERROR else "ok",
            provider_prompt_tokens=counters.get("provider_prompt_tokens", 0),
            latency_s=counters.get("latency_s", 0.0),
            retries=int(counters.get("retries", 0)),
            context={
                "key": call_key(qv, order, seed), "model": model_name, "q": qv,
                "order": order, "seed": seed, "W": window, "u": first.u, "c": first.c,
                "r": first.r, "p": first.p, "tokens": first.tokens,
                "score": int(record.success), "completed": record.completed,
                "category": record.first_failure or "ok",
                "decisions": counters.get("decisions", 0),
                "cost_usd": counters.get("cost_usd", 0.0),
                ELAPSED: time.perf_counter() - started}).entry()

    units = [(call_key(qv, order, seed), (qv, order, seed))
             for order in orders for qv in grid for seed in range(trials)]
    try:
        return play_units(log, run, resume, units, one, on_call=on_call, on_start=on_start)
    finally:
        client.close()
