"""RCWT sweeps on DACSSteering-v0: one fixed-budget prompt per trial, scored 0/1 (seed 000).

Why this exists: seed 000 (section 3.1) measures task-budget displacement by holding the
window W fixed and moving tokens from the task evidence to coordination content. DACS
scenarios already have exactly that split: the requester's own full-context block is the task
evidence (it holds the fact the request asks about) and the other agents' full blocks are
coordination content (same format, same keys, other values). A trial is one scenario seed and
its first request; its prompt is `budget.assemble(instructions + request + answer format,
coordination = other agents' blocks, evidence = requester's block, W, q, order)`, so the
counts u, c, r and p = c / W hold for the exact text sent.

Why a programmed reader is part of it: for `flat-reader` the cliff is known in advance from
the token layout (`layout_cliff`): a trial is answerable iff the requester's fact line for the
asked key is complete within the first r tokens of the evidence block. A sweep with it is the
positive control for the whole pipeline (assembly, scoring, log, fit): the fitted theta must
land on the layout's median threshold.

Attribution under repetition: the evidence block may be repeated whole copies plus a cut
last copy, and the coordination text holds other agents' facts for the same key. The reader
attributes every line to the block header above it (controllers.dacs.readers.parse_window) and takes
the requester's *first* fact mention: every copy but the last is complete, and a cut last copy
can end inside the value ("us-ea", or "750" cut from "7500", which is a real value).

Resume: every call is one "call" line of a RunLog (key f"{q}:{order}:{seed}" plus the run id
of W, env kwargs, trial definition and policy), written as soon as it is scored; a rerun with
resume skips logged keys, so after a kill each call is in the log exactly once and the scores
equal those of an uninterrupted run (the reader's guesses come from a stream seeded by the
trial seed, not from call order).
"""

from __future__ import annotations

import csv
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from controllers.dacs.readers import evidence, parse_window
from controllers.runlog import RunLog
from envs._core import rng
from envs._core.tokens import count, encode
from envs.dacs.window import Block, full_block, request_text
from llm_policies.prompts.budget import ORDERS, Assembly, assemble
from llm_policies.prompts.dacs import ANSWER_SCHEMA
from llm_policies.text_actions import ANSWER_KEY, parse_json_action

ENV_ID = "DACSSteering-v0"
Q_GRID = (0.0, 0.25, 0.50, 0.75, 0.90, 0.92, 0.94, 0.96, 0.98)  # seed 000's target grid
N_OPTIONS = 4
PROVIDER_ERROR = "provider_error"
CSV_FIELDS = ("model", "p", "score", "order", "q", "r", "u", "c", "seed", "category")

INSTRUCTIONS = (
    "You are the orchestrator of several software agents working in parallel. An agent has "
    "sent the steering request below. After it come agent context blocks, each headed "
    "\"## agent-<i> (full context)\" and holding that agent's task, status lines and facts; "
    "a block may be repeated, and the last copy of a block may be cut off. Answer for the "
    "requesting agent, using that agent's own facts, not another agent's."
)
ANSWER_FORMAT = 'Reply with exactly one JSON object {"answer": <option index>} and nothing else.'


# --------------------------------------------------------------------------- trials


@dataclass(frozen=True)
class Trial:
    """One scenario seed's first request and the three prompt sources.

    instructions: INSTRUCTIONS, the request block and ANSWER_FORMAT (never cut: u tokens).
    coordination: the other agents' full blocks in index order; evidence: the requester's
    full block (`evidence_block` keeps its token layout for `layout_cliff`).
    """

    seed: int
    requester: int
    key: str
    key_id: int
    options: tuple[str, ...]
    correct: int
    instructions: str
    coordination: str
    evidence: str
    evidence_block: Block


def _make_env(env_kwargs: Mapping[str, Any] | None) -> Any:
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)

    return gym.make(ENV_ID, **dict(env_kwargs or {}))


def build_trial(seed: int, env_kwargs: Mapping[str, Any] | None = None,
                env: Any | None = None) -> Trial:
    """The trial of scenario `seed`: its first request (never a cascade dependent one)."""
    env = env if env is not None else _make_env(env_kwargs)
    env.reset(seed=int(seed))
    core = env.unwrapped
    scenario, pending = core.scenario, core.pending
    decided: dict[int, int] | None = {} if core.family == "cascade" else None
    blocks = [full_block(agent, decided) for agent in scenario.agents]
    depends = f"agent-{pending.depends_on}" if pending.depends_on >= 0 else None
    request = request_text(f"agent-{pending.requester}", pending.key, pending.options, depends)
    instructions = f"{INSTRUCTIONS}\n\n{request}{ANSWER_FORMAT}\n"
    coordination = "".join(b.text for i, b in enumerate(blocks) if i != pending.requester)
    return Trial(
        seed=int(seed), requester=pending.requester, key=pending.key, key_id=pending.key_id,
        options=tuple(pending.options), correct=int(pending.correct),
        instructions=instructions, coordination=coordination,
        evidence=blocks[pending.requester].text, evidence_block=blocks[pending.requester],
    )


def build_trials(trials: int, env_kwargs: Mapping[str, Any] | None = None) -> list[Trial]:
    """Trials for seeds 0..trials-1 (shared by every (q, order) cell: paired)."""
    env = _make_env(env_kwargs)
    try:
        return [build_trial(seed, env=env) for seed in range(trials)]
    finally:
        env.close()


def assemble_trial(trial: Trial, W: int, q: float, order: str) -> Assembly:
    """The trial's prompt under window W, target ratio q and block order."""
    return assemble(trial.instructions, trial.coordination, trial.evidence, W=W, q=q,
                    order=order)


# --------------------------------------------------------------------------- layout cliff


@dataclass(frozen=True)
class Cliff:
    """Where a trial becomes answerable for a reader of whole fact values.

    required_r: the smallest evidence budget r whose block holds the requester's fact value
    complete. In coord_first the evidence block ends the prompt, so the value may end the
    text (the fact line without its "\\n" token); in reason_first the block is r - 1 tokens
    of source plus an appended "\\n", so the whole line must fit (one token more).
    theta: u + required_r, the smallest non-coordination budget (W - c) that answers it.
    max_c: the largest coordination size that still answers it (W - theta); p_star = max_c / W.
    """

    seed: int
    order: str
    u: int
    fact_start: int
    fact_end: int
    required_r: int
    theta: int
    max_c: int
    p_star: float


def layout_cliff(seed: int, W: int, *, order: str = "reason_first",
                 env_kwargs: Mapping[str, Any] | None = None,
                 trial: Trial | None = None) -> Cliff:
    """The trial's answerability threshold, from the token layout alone (no reader run).

    The fact line's token span [fact_start, fact_end) inside the evidence block comes from the
    block's own line ids (lines end in "\\n" and start with a non-space character, so the
    block's tokens are the concatenation of its lines'). Truncation keeps a prefix of the
    block; repetition puts later copies after a complete first one, so the first copy decides.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    trial = trial if trial is not None else build_trial(seed, env_kwargs)
    at = 0
    span: tuple[int, int] | None = None
    for line in trial.evidence_block.lines:
        if line.kind == "fact" and any(k == trial.key_id for k, _ in line.shows):
            span = (at, at + len(line.ids))
            if tuple(encode(line.text[:-1])) + tuple(encode("\n")) != line.ids:
                raise AssertionError(f"fact line does not end in its own newline token: "
                                     f"{line.text!r}")
            break
        at += len(line.ids)
    if span is None:
        raise ValueError(f"seed {trial.seed}: the requester has no fact for {trial.key!r}")
    start, end = span
    required = end - 1 if order == "coord_first" else end
    u = count(trial.instructions)
    theta_tokens = u + required
    max_c = W - theta_tokens
    return Cliff(seed=trial.seed, order=order, u=u, fact_start=start, fact_end=end,
                 required_r=required, theta=theta_tokens, max_c=max_c, p_star=max_c / W)


# --------------------------------------------------------------------------- policies


class AnswerPolicy(Protocol):
    """A policy: `answer(prompt_text) -> option index or None`. Optional extras the sweep
    uses when present: `reset(*, seed)` before each call, `last_call` (a dict merged into the
    call record: category, provider tokens...), `name`, `describe()` and `fork()` (a copy for
    another worker thread)."""

    def __call__(self, prompt: str) -> int | None: ...


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

    def __call__(self, prompt: str) -> int | None:
        value, options = self.value(prompt)
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
    """A chat model behind an OpenAI-compatible endpoint (llm_policies.client.transport.ChatClient).

    messages = [user: the assembled text] (the instructions are inside the W tokens, so no
    system turn is needed and models without a system role work). The reply must be
    {"answer": i} (text_actions.parse_json_action); anything else scores 0 with the parse
    category, and a provider failure scores 0 as "provider_error". `settings` are ChatClient
    keyword arguments; each instance (and each `fork()`) owns one client.
    """

    def __init__(self, **settings: Any) -> None:
        from llm_policies.client.transport import ChatClient

        settings.setdefault("json_schema", ANSWER_SCHEMA)
        self.settings = settings
        self.client = ChatClient(**settings)
        self.name = str(settings.get("model", "llm"))
        self.last_call: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        keys = ("model", "base_url", "temperature", "max_tokens", "seed", "response_format")
        return {"policy": "llm", **{k: self.settings.get(k) for k in keys}}

    def fork(self) -> LLMAnswer:
        return LLMAnswer(**self.settings)

    def close(self) -> None:
        self.client.close()

    def __call__(self, prompt: str) -> int | None:
        result = self.client.complete([{"role": "user", "content": prompt}])
        info: dict[str, Any] = {
            "response": result.text, "status": result.status, "error": result.error,
            "http_status": result.http_status, "provider_prompt_tokens": result.prompt_tokens,
            "provider_completion_tokens": result.completion_tokens,
            "provider_latency_s": result.latency_s, "retries": result.retries,
            "response_format": result.response_format,
        }
        if result.status != "ok":
            self.last_call = {**info, "category": PROVIDER_ERROR}
            return None
        status, parsed = parse_json_action(result.text, ((ANSWER_KEY, N_OPTIONS),))
        self.last_call = {**info, "category": status}
        return None if parsed is None else int(parsed[0])


# --------------------------------------------------------------------------- sweep


def normalise_q(values: Iterable[float]) -> tuple[float, ...]:
    """Target ratios as fractions in [0, 1], rounded to 6 digits (stable log keys)."""
    out = []
    for value in values:
        q = float(value)
        if not math.isfinite(q) or not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be in [0, 1]; got {value!r}")
        out.append(round(q, 6))
    return tuple(dict.fromkeys(out))


def call_key(q: float, order: str, seed: int) -> str:
    return f"{q}:{order}:{seed}"


def _describe(policy: Any) -> Any:
    describe = getattr(policy, "describe", None)
    if callable(describe):
        return describe()
    return getattr(policy, "name", getattr(policy, "__name__", type(policy).__name__))


def policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", getattr(policy, "__name__", type(policy).__name__)))


def _logged_calls(path: Path, run_id: str) -> dict[str, dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return calls
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("type") == "call" and entry.get("run_id") == run_id:
            calls.setdefault(str(entry["key"]), entry)
    return calls


def _check_sweep(window: Any, trials: Any, workers: Any, q: Sequence[float],
                 orders: Sequence[str]) -> tuple[float, ...]:
    """Validate a sweep's arguments (errors name the parameter); returns the q grid."""
    for name, value in (("window", window), ("trials", trials), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
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
    on_call: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (q, order, seed) call of the sweep, one "call" line each in `log`.

    Seeds 0..trials-1 are shared by every cell (paired). With resume, keys already in the log
    for this run (same W, env kwargs and policy) are not called again. `on_call(record)` runs
    after each record is written (progress bars; tests raise from it to simulate a kill).
    With workers > 1, calls run in a thread pool, each worker with `policy.fork()` (or the
    shared policy when it has no fork). Returns the records of the requested cells, sorted by
    (order, q, seed), old and new alike.
    """
    grid = _check_sweep(window, trials, workers, q, orders)
    model_name = model or policy_name(policy)
    run = {"rcwt": ENV_ID, "env_kwargs": dict(env_kwargs or {}), "window": window,
           "trial": "first request", "policy": _describe(policy), "model": model_name}
    run_log = RunLog(Path(log), run, resume=resume)
    try:
        done = _logged_calls(run_log.path, run_log.run_id) if resume else {}
        if not done:
            run_log.write({"type": "run", "run_id": run_log.run_id, "run": run})
        all_trials = build_trials(trials, env_kwargs)
        todo = [(qv, order, t) for order in orders for qv in grid for t in all_trials
                if call_key(qv, order, t.seed) not in done]
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
            record = _call(worker_policy(), trial, window, qv, order, model_name)
            record["run_id"] = run_log.run_id
            run_log.write(record)
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
    wanted = [call_key(qv, order, seed) for order in orders for qv in grid
              for seed in range(trials)]
    return [records[k] for k in wanted if k in records]


def _call(policy: Any, trial: Trial, window: int, q: float, order: str,
          model: str) -> dict[str, Any]:
    prompt = assemble_trial(trial, window, q, order)
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset(seed=trial.seed)
    started = time.perf_counter()
    answer = policy(prompt.text)
    latency = time.perf_counter() - started
    extra = dict(getattr(policy, "last_call", None) or {})
    if answer is not None and (isinstance(answer, bool) or not isinstance(answer, int | np.integer)
                               or not 0 <= int(answer) < len(trial.options)):
        extra.setdefault("invalid_answer", repr(answer))
        answer = None
        extra["category"] = "invalid_action"
    answer = None if answer is None else int(answer)
    category = extra.pop("category", "ok" if answer is not None else "no_answer")
    return {
        "type": "call", "key": call_key(q, order, trial.seed), "model": model,
        "q": q, "order": order, "seed": trial.seed, "W": window, "u": prompt.u, "c": prompt.c,
        "r": prompt.r, "p": prompt.p, "tokens": prompt.tokens,
        "score": int(answer is not None and answer == trial.correct),
        "answer": answer, "correct": trial.correct, "category": category,
        "requester": trial.requester, "asked": trial.key,
        "evidence_prefix": evidence_is_prefix(trial, prompt), "latency_s": latency, **extra,
    }


def evidence_is_prefix(trial: Trial, prompt: Assembly) -> bool:
    """Whether the prompt's evidence block is a plain prefix of the repeated requester block.

    False for budget.fit_block's rare filler fallback (when no nearby character prefix has
    exactly the target count, e.g. a cut right after a line's "\\n" in reason_first, where
    the appended "\\n" would merge into "\\n\\n"): that block is a shorter prefix plus "000"
    fillers, so it can miss a fact line that layout_cliff counts as inside.
    """
    if prompt.r == 0:
        return True
    if prompt.order == "coord_first":
        block = prompt.blocks[2]
    else:
        block = prompt.blocks[1][:-1]  # fit_block appended one "\\n"
    source = trial.evidence.lstrip()
    return (source * (len(block) // max(len(source), 1) + 2)).startswith(block)


# --------------------------------------------------------------------------- outputs


def write_csv(records: Iterable[Mapping[str, Any]], path: Path) -> Path:
    """One row per call with CSV_FIELDS (model, p, score, order, ...): rcwt_fit.read_rows input."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow({k: record[k] for k in CSV_FIELDS})
    return path


def cell_table(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, order, q): mean p, mean r, mean score and the call count, in sweep order."""
    cells: dict[tuple[str, str, float], list[Mapping[str, Any]]] = {}
    for record in records:
        cells.setdefault((record["model"], record["order"], record["q"]), []).append(record)
    rows = []
    for (model, order, q), group in cells.items():
        rows.append({"model": model, "order": order, "q": q, "n": len(group),
                     "p": float(np.mean([g["p"] for g in group])),
                     "r": float(np.mean([g["r"] for g in group])),
                     "score": float(np.mean([g["score"] for g in group]))})
    return rows


def summarise(records: Sequence[Mapping[str, Any]], window: int,
              resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """fit_table of the calls plus, per model, theta's order-stratified bootstrap interval
    and the answer categories."""
    from analysis.fits import bootstrap_theta, fit_table

    rows = [{"model": r["model"], "p": r["p"], "score": r["score"], "order": r["order"]}
            for r in records]
    table = fit_table(rows, window)
    for model, entry in table.items():
        mine = [r for r in records if r["model"] == model]
        boot = bootstrap_theta([r["p"] for r in mine], [r["score"] for r in mine],
                               [r["order"] for r in mine], window, resamples=resamples,
                               seed=seed)
        entry["bootstrap"] = {
            "resamples": resamples,
            "p0_interval": [_finite(v) for v in boot.p0_interval],
            "theta_interval": [_finite(v) for v in boot.theta_interval],
        }
        categories: dict[str, int] = {}
        for r in mine:
            categories[str(r["category"])] = categories.get(str(r["category"]), 0) + 1
        entry["categories"] = dict(sorted(categories.items()))
    return table


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class SweepOutputs:
    csv: Path
    fits_json: Path
    plot: Path
    fits: dict[str, Any]


def write_outputs(records: Sequence[Mapping[str, Any]], out: Path, window: int,
                  resamples: int = 1000) -> SweepOutputs:
    """DIR/sweep.csv, DIR/fits.json (summarise) and DIR/fits.png (rcwt_fit.plot_fits)."""
    from analysis.fits import plot_fits

    out = Path(out)
    csv_path = write_csv(records, out / "sweep.csv")
    fits = summarise(records, window, resamples=resamples)
    fits_path = out / "fits.json"
    fits_path.write_text(json.dumps(fits, indent=2) + "\n")
    rows = [{"model": r["model"], "p": r["p"], "score": r["score"]} for r in records]
    png = plot_fits(rows, window, out / "fits.png")
    return SweepOutputs(csv_path, fits_path, png, fits)


# --------------------------------------------------------------------------- StatefulWorkflow

WORKFLOW_ID = "StatefulWorkflow-v0"


def coordination_text(seed: int) -> str:
    """Synthetic multi-agent coordination content for a StatefulWorkflow prompt: the full
    context blocks of a DACSSteering scenario of the same seed (agents' tasks, status lines,
    facts), which say nothing about the workflow, like seed 000's coordination block."""
    from envs.dacs.scenario import generate
    from envs.dacs.window import full_block

    scenario = generate(seed, 10, "homogeneous", 3)
    return "".join(full_block(agent, {}).text for agent in scenario.agents)


def run_workflow_sweep(
    settings: Mapping[str, Any],
    *,
    window: int,
    trials: int,
    log: Path,
    q: Sequence[float] = Q_GRID,
    orders: Sequence[str] = ORDERS,
    env_kwargs: Mapping[str, Any] | None = None,
    resume: bool = False,
    system_role: bool = False,
    on_call: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """The RCWT sweep on StatefulWorkflow with a chat model: one episode per (q, order, seed),
    every decision's prompt assembled to exactly W tokens (rules as instructions, synthetic
    coordination, the task/observation/history as evidence); score = episode success.

    One "call" line per episode (with its decisions' tokens and categories) keeps the
    record format of the DACS sweep, so `write_outputs` fits it the same way; resume skips
    episodes already logged.
    """
    import gymnasium as gym

    from controllers.rollout import rollout
    from llm_policies.client.transport import ChatClient
    from llm_policies.policy import LLMPolicy
    from llm_policies.prompts.workflow import ACTION_SCHEMA, WorkflowRenderer
    from llm_policies.text_actions import TextActionWrapper

    grid = _check_sweep(window, trials, 1, q, orders)
    model_name = str(settings.get("model", "llm"))
    run = {"rcwt": WORKFLOW_ID, "env_kwargs": dict(env_kwargs or {}), "window": window,
           "trial": "episode", "model": model_name, "system_role": system_role,
           "policy": {k: settings.get(k) for k in ("model", "base_url", "temperature",
                                                    "max_tokens", "seed")}}
    run_log = RunLog(Path(log), run, resume=resume)
    records = []
    try:
        done = _logged_calls(run_log.path, run_log.run_id) if resume else {}
        if not done:
            run_log.write({"type": "run", "run_id": run_log.run_id, "run": run})
        env = TextActionWrapper(gym.make(WORKFLOW_ID, **dict(env_kwargs or {})))
        spec = env.unwrapped.spec_params
        client = ChatClient(**{**settings, "json_schema": ACTION_SCHEMA})
        for order in orders:
            for qv in grid:
                for seed in range(trials):
                    key = call_key(qv, order, seed)
                    if key in done:
                        records.append(done[key])
                        continue
                    renderer = WorkflowRenderer(spec, budget=window, q=qv,
                                                coordination=coordination_text(seed),
                                                order=order, system_role=system_role)
                    first = renderer.render(env.reset(seed=seed)[0]).assembly
                    started = time.perf_counter()
                    record = rollout(env, LLMPolicy(client, renderer), 1, seed=seed)[0]
                    entry = {
                        "type": "call", "key": key, "run_id": run_log.run_id,
                        "model": model_name, "q": qv, "order": order, "seed": seed,
                        "W": window, "u": first.u, "c": first.c, "r": first.r, "p": first.p,
                        "tokens": first.tokens, "score": int(record.success),
                        "completed": record.completed,
                        "category": record.first_failure or "ok",
                        "decisions": record.counters.get("decisions", 0),
                        "provider_prompt_tokens": record.counters.get(
                            "provider_prompt_tokens", 0),
                        "latency_s": time.perf_counter() - started,
                    }
                    run_log.write(entry)
                    if on_call is not None:
                        on_call(entry)
                    records.append(entry)
        client.close()
    finally:
        run_log.close()
    return records
