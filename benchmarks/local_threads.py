"""A local model's seconds per decision and prompt tokens/s per harness, thread counts side by side.

A decision's cost on a shared 2-core CPU is mostly prompt evaluation, and llama.cpp keeps the
last call's KV state, evaluating only what follows the longest shared token prefix (the
server's stderr says how much: "N prefix-match hit, remaining M prompt tokens to eval"). This
replays fixed request sequences, one episode per harness taken from the ladder's committed
logs (docs/results/ladder/: json from the Qwen 1.5B's, chat and tools from SmolLM2's; the
messages as they were sent, with the action schema or the episode's tool list), against a
freshly started server of each model at each thread count. Thread counts are interleaved (their
order alternates between rounds) so that a change of the machine's load falls on all of them, and
each measurement records the 1-minute load average before and after it.

Per model, harness and thread count: the median seconds of the first decision (after another
harness's prompts: only the shared system text is reused) and of later decisions, prompt
tokens/s (the request's prompt tokens over its wall time), the tokens the server evaluated
after prefix reuse (summed over the completions of a request: chatml-function-calling's
tool_choice "auto" runs several) and the ratio of each thread count's later-decision time to
the first thread count's.

    nice -n 10 python benchmarks/local_threads.py [--models qwen0.5b] [--threads 1 2]
        [--rounds 2] [--harnesses json chat tools] [--decisions 3] [--rows-out FILE]
        [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gymnasium as gym  # noqa: E402
from _output import emit  # noqa: E402

from diagym import envs  # noqa: E402,F401
from diagym.llm_policies.client.local_server import LOCAL_MODELS, running_server  # noqa: E402
from diagym.llm_policies.client.transport import ChatClient  # noqa: E402
from diagym.llm_policies.policy import LLMPolicy  # noqa: E402
from diagym.llm_policies.prompts.workflow import ACTION_SCHEMA  # noqa: E402

LADDER = Path(__file__).resolve().parents[1] / "docs" / "results" / "ladder"
SOURCES = {"json": "qwen1.5b-json.jsonl", "chat": "smollm2-chat.jsonl",
           "tools": "smollm2-tools.jsonl"}
EVALUATED = re.compile(rb"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
CALL_TIMEOUT_S = 1800.0  # a bound on a hang on a loaded CPU, not an expected time


def sequence(harness: str) -> tuple[list[list[dict[str, Any]]], dict[str, Any]]:
    """The message lists of the longest episode of the harness's ladder log, and its env
    kwargs (for the tools harness's tool list)."""
    lines = [json.loads(line) for line in (LADDER / SOURCES[harness]).read_text().splitlines()]
    session = next(line for line in lines if line["type"] == "session")
    calls = [line for line in lines if line["type"] == "call"]
    keys = [c["episode_key"] for c in calls]
    longest = max(set(keys), key=keys.count)
    return [c["prompt"] for c in calls if c["episode_key"] == longest], session["run"]


def tool_list(run: dict[str, Any]) -> list[dict[str, Any]]:
    env = gym.make(run["env"], **run["env_kwargs"])
    policy = LLMPolicy.for_env(ChatClient(base_url="http://unused/v1", model="unused"), env,
                               harness="tools")
    return policy.harness.tools


def _load() -> float:
    return os.getloadavg()[0]


def _evaluated(log: Path, seen: int) -> tuple[list[tuple[int, int]], int]:
    """(reused, evaluated) prefix lines the server wrote since byte `seen`."""
    data = log.read_bytes()
    return [(int(a), int(b)) for a, b in EVALUATED.findall(data[seen:])], len(data)


def measure(model: str, threads: int, harnesses: list[str],
            sequences: dict[str, Any], tools: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One server start: each harness's sequence replayed in order, one row per decision."""
    spec = LOCAL_MODELS[model]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        with running_server(model=model, n_threads=threads, log_path=log,
                            startup_timeout=600.0) as server:
            client = ChatClient(base_url=server.base_url, model=spec.name, temperature=0.0,
                                max_tokens=64, response_format=spec.response_format,
                                json_schema=ACTION_SCHEMA, timeout=CALL_TIMEOUT_S,
                                max_retries=0)
            client.complete([{"role": "user", "content": "Hi."}])  # a first call is slower
            _, seen = _evaluated(log, 0)
            for harness in harnesses:
                for decision, messages in enumerate(sequences[harness]):
                    load_before = _load()
                    result = client.complete(messages, tools if harness == "tools" else None)
                    lines, seen = _evaluated(log, seen)
                    yield {"model": model, "threads": threads, "harness": harness,
                           "decision": decision, "status": result.status,
                           "latency_s": result.latency_s,
                           "prompt_tokens": result.prompt_tokens,
                           "completion_tokens": result.completion_tokens,
                           # tool_choice "auto" runs several completions a request
                           "completions": len(lines),
                           "reused_tokens": lines[0][0] if lines else 0,
                           "evaluated_tokens": sum(b for _, b in lines) if lines else None,
                           "load_before": load_before, "load_after": _load()}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(rows: list[dict[str, Any]], threads: list[int]) -> list[dict[str, Any]]:
    cells = []
    for model in dict.fromkeys(r["model"] for r in rows):
        for harness in dict.fromkeys(r["harness"] for r in rows):
            base = None
            for t in threads:
                mine = [r for r in rows if (r["model"], r["harness"], r["threads"]) ==
                        (model, harness, t) and r["status"] == "ok"]
                first = [r for r in mine if r["decision"] == 0]
                later = [r for r in mine if r["decision"] > 0]
                later_s = _median([r["latency_s"] for r in later])
                base = later_s if base is None else base
                cells.append({
                    "model": model, "harness": harness, "threads": t, "decisions": len(mine),
                    "first_s": _median([r["latency_s"] for r in first]),
                    "later_s": later_s,
                    "first_prompt_tps": _median([r["prompt_tokens"] / r["latency_s"]
                                                 for r in first if r["prompt_tokens"]]),
                    "later_prompt_tps": _median([r["prompt_tokens"] / r["latency_s"]
                                                 for r in later if r["prompt_tokens"]]),
                    "later_evaluated_tokens": _median([r["evaluated_tokens"] for r in later
                                                       if r["evaluated_tokens"] is not None]),
                    "later_prompt_tokens": _median([r["prompt_tokens"] for r in later
                                                    if r["prompt_tokens"]]),
                    "later_ratio_to_first_threads": (later_s / base if later_s and base
                                                     else None),
                    "load": [min(r["load_before"] for r in mine),
                             max(r["load_after"] for r in mine)] if mine else None,
                })
    return cells


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen0.5b"], choices=tuple(LOCAL_MODELS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--harnesses", nargs="+", default=list(SOURCES), choices=tuple(SOURCES))
    parser.add_argument("--decisions", type=int, default=3,
                        help="the first this many decisions of each harness's episode")
    parser.add_argument("--rows-out", type=Path, default=None,
                        help="append each decision's row here as it is measured (JSON lines)")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    sequences = {h: sequence(h)[0][:args.decisions] for h in args.harnesses}
    tools = tool_list(sequence("tools")[1]) if "tools" in args.harnesses else []
    rows: list[dict[str, Any]] = []
    for model in args.models:
        for round_index in range(args.rounds):
            order = args.threads if round_index % 2 == 0 else args.threads[::-1]
            for threads in order:
                for row in measure(model, threads, args.harnesses, sequences, tools):
                    row["round"] = round_index
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    if args.rows_out:
                        with args.rows_out.open("a") as out:
                            out.write(json.dumps(row) + "\n")
    cells = summarise(rows, args.threads)
    print(f"{args.rounds} rounds, thread counts interleaved; decisions per harness: "
          + ", ".join(f"{h} {len(s)}" for h, s in sequences.items()))
    print("| model | harness | threads | decisions | first s | later s | later / "
          f"{args.threads[0]} thread(s) | prompt tok/s first / later | later: prompt / "
          "evaluated tokens | load (1-min) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in cells:
        load = c["load"]
        print(f"| {c['model']} | {c['harness']} | {c['threads']} | {c['decisions']} "
              f"| {_fmt(c['first_s'])} | {_fmt(c['later_s'])} "
              f"| {_fmt(c['later_ratio_to_first_threads'], 2)} "
              f"| {_fmt(c['first_prompt_tps'])} / {_fmt(c['later_prompt_tps'])} "
              f"| {_fmt(c['later_prompt_tokens'], 0)} / {_fmt(c['later_evaluated_tokens'], 0)} "
              f"| {_fmt(load[0]) if load else '-'}-{_fmt(load[1]) if load else '-'} |")
    emit({"rounds": args.rounds, "threads": args.threads, "cells": cells, "rows": rows},
         args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
