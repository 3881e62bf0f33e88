"""The local model ladder's speed and behaviour, read from the run logs its cells wrote.

A local model's cost on a shared 2-core CPU is seconds per decision, and most of it is prompt
evaluation; llama.cpp keeps the last call's KV state and evaluates only what follows the
longest shared prefix, so the first decision of an episode (after another episode's or the
probe's prompt) is the cold one and later decisions of a conversation are warm. For each log
(one cell: a model and a harness, `diagym run --local MODEL --harness H --log FILE`), this
prints episodes, decisions, the share of replies the server answered in the schema and the
share the env could act on, success, mean completed operations, first failures, the median
seconds per decision and the prompt tokens per second of first and of later decisions, and
the output tokens of a decision with the part of them that was reasoning (a think-then-act
cell, `--reasoning-tokens R`, docs/REASONING.md; 0 for a direct answer).

A second table says what the models answered, from each episode replayed on its task seed
(the env's own ready set and correct slot at every decision; an episode whose replayed first
failure differs from the logged one is an error): the share of decisions naming a ready
operation against the share a uniform guess of an operation would (ready / N), the share with
the candidate in range, the share right for the operation named, and the most common reply.

A third table, "what a user would try", puts the Qwen cells beside the same model played
with the settings a user would reach for when a small model fails (`--tool-choice
required`, `--bounded-fields`, fewer candidates): per cell its settings, episodes,
decisions, schema-valid and actionable replies, ready operation named, success, completed
operations and seconds per decision.

    python benchmarks/local_ladder.py [LOG.jsonl ...] [--tries LOG.jsonl ...] [--json-out FILE]

Cells are named by their logs' session lines (model alias, harness, settings); without logs,
those of docs/results/ladder/ (the ladder) and docs/results/ladder-tries/ (the tries) are
read (commands in docs/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gymnasium as gym  # noqa: E402
from _output import emit  # noqa: E402

from diagym import envs  # noqa: E402,F401
from diagym.envs._core.failures import failure_name  # noqa: E402
from diagym.llm_policies.text_actions import (  # noqa: E402
    INVALID_JSON,
    INVALID_SCHEMA,
    REASONING_CUT,
    TEXT_FAILURES,
    TOOL_FAILURES,
    split_reasoned_reply,
)

LADDER_LOGS = Path(__file__).resolve().parents[1] / "docs" / "results" / "ladder"
TRIES_LOGS = LADDER_LOGS.with_name("ladder-tries")
LADDER_CANDIDATES = 3  # the easiest configuration's (RESULTS.md)
UNACTIONABLE = {*TEXT_FAILURES, *TOOL_FAILURES, REASONING_CUT}
ENV_FAILURES = ("dependency", "candidate", "completed")


def _rate(tokens: list[int], seconds: list[float]) -> float | None:
    return sum(tokens) / sum(seconds) if seconds and sum(seconds) > 0 else None


def cell(log: Path) -> dict[str, Any]:
    """One log's figures (module docstring)."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    session = next(line for line in lines if line["type"] == "session")
    finished = {line["episode_key"] for line in lines if line["type"] == "episode"}
    # an interrupted log's unfinished episode is left out: its calls have no record yet
    calls = [line for line in lines if line["type"] == "call" and line["episode_key"] in finished]
    episodes = [line["record"] for line in lines if line["type"] == "episode"]
    answered = [c for c in calls if c["status"] == "ok"]
    acted = [c for c in calls if c["action_status"] is not None
             and c["action_status"] not in UNACTIONABLE]
    first = [c for c in answered if c["decision"] == 0 and not c.get("invalid_retry")]
    later = [c for c in answered if c not in first]
    harness = calls[0]["harness"] if calls else session["run"]["policy"].get("harness", "json")
    return {
        "log": log.name,
        "model": session["run"]["policy"].get("llm"),
        "harness": harness,
        "settings": settings(session["run"], None if harness == "tools"
                             else {c["response_format"] for c in calls}),
        "env_kwargs": session["run"].get("env_kwargs"),
        "episodes": len(episodes),
        "decisions": len(calls),
        "answered": len(answered),
        "schema_valid": sum(int(e["counters"].get("schema_valid", 0)) for e in episodes),
        "actionable": len(acted),
        "successes": sum(bool(e["success"]) for e in episodes),
        "mean_completed": (statistics.fmean(e["completed"] for e in episodes)
                           if episodes else None),
        "first_failures": dict(Counter(e["first_failure"] for e in episodes)),
        "median_s_per_decision": (statistics.median(c["latency_s"] for c in answered)
                                  if answered else None),
        "first_decision_prompt_tps": _rate([c["provider_prompt_tokens"] or 0 for c in first],
                                           [c["latency_s"] for c in first]),
        "later_decision_prompt_tps": _rate([c["provider_prompt_tokens"] or 0 for c in later],
                                           [c["latency_s"] for c in later]),
        "median_prompt_tokens": (statistics.median(c["provider_prompt_tokens"] or 0
                                                   for c in answered) if answered else None),
        "output_tokens_per_decision": _mean([c.get("cl100k_completion_tokens") or 0
                                             for c in answered]),
        "reasoning_tokens_per_decision": _mean([c.get("cl100k_reasoning_tokens") or 0
                                                for c in answered]),
        "reasoning_by_decision": [_mean([c.get("cl100k_reasoning_tokens") or 0
                                         for c in answered if c["decision"] == i])
                                  for i in range(4)],
    }


def _mean(values: list[int]) -> float | None:
    return statistics.fmean(values) if values else None


def settings(run: dict[str, Any], modes: set[str] | None = None) -> str:
    """What a cell's run changed from the ladder's: tool_choice, bounded fields, candidates,
    unconstrained decoding (its calls' `modes`), a reasoning budget."""
    policy, kwargs = run["policy"], run.get("env_kwargs") or {}
    changed = ["unconstrained"] if modes == {"none"} else []
    if policy.get("tool_choice", "auto") != "auto":
        changed.append(f"tool_choice {policy['tool_choice']}")
    if policy.get("bounded_fields"):
        changed.append("bounded fields")
    if kwargs.get("candidates", LADDER_CANDIDATES) != LADDER_CANDIDATES:
        changed.append(f"candidates {kwargs['candidates']}")
    if policy.get("reasoning_tokens"):
        changed.append(f"reasoning {policy['reasoning_tokens']}")
    return ", ".join(changed) or "-"


def _reply(call: dict[str, Any]) -> tuple[int, int] | None:
    """(operation, candidate) a call named, as text JSON (fenced or not, as the wrapper reads
    it) or as its first tool call; None for a reply the wrapper could not read."""
    if call.get("action_status") in (INVALID_JSON, INVALID_SCHEMA, REASONING_CUT):
        return None
    text = call["tool_calls"][0]["arguments"] if call.get("tool_calls") else call["response"]
    _, found = split_reasoned_reply(text or "", (("operation", 0), ("candidate", 0)))
    try:
        value = json.loads(found or "")
        return int(value["operation"]), int(value["candidate"])
    except (ValueError, KeyError, TypeError):
        return None


def answers(log: Path) -> dict[str, Any]:
    """What one log's decisions named, against the env replayed on each episode's task seed."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    run = next(line for line in lines if line["type"] == "session")["run"]
    episodes = {line["episode_key"]: line["record"] for line in lines if line["type"] == "episode"}
    env = gym.make(run["env"], **run["env_kwargs"]).unwrapped
    n_ops, b = env.params.n_ops, env.params.candidates
    counts = Counter()
    replies: Counter = Counter()
    firsts: list[list[int] | None] = []  # each episode's first reply: does it follow the task?
    chance = []
    for key, record in episodes.items():
        env.reset(seed=record["task_seed"])
        first_failure = None
        calls = sorted((c for c in lines if c["type"] == "call" and c["episode_key"] == key
                        and c["status"] == "ok"), key=lambda c: c["decision"])
        firsts.append(list(_reply(calls[0]) or ()) or None if calls else None)
        for call in calls:
            reply = _reply(call)
            counts["decisions"] += 1
            if reply is None:
                continue
            replies[reply] += 1
            op, slot = reply
            ready = env.action_masks()[:n_ops]
            chance.append(ready.sum() / n_ops)
            in_range = 0 <= op < n_ops and 0 <= slot < b
            counts["parsed"] += 1
            counts["in_range"] += in_range
            if not in_range:
                continue
            counts["ready"] += bool(ready[op])
            counts["right_slot"] += slot == env.correct_slot(op)
            *_, info = env.step((op, slot))
            if info["failure"] and first_failure is None:
                first_failure = failure_name(info["failure"])
        logged = record["first_failure"]
        if logged in ENV_FAILURES and first_failure != logged:
            raise RuntimeError(f"{log.name} {key}: the replay's first failure is "
                               f"{first_failure}, the log's {logged}")
    top = replies.most_common(1)
    return {"log": log.name, **counts,
            "ready_by_chance": statistics.fmean(chance) if chance else None,
            "most_common_reply": list(top[0][0]) if top else None,
            "most_common_count": top[0][1] if top else 0, "first_replies": firsts}


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def tries_table(logs: list[Path]) -> list[dict[str, Any]]:
    """The "what a user would try" rows (module docstring), printed, one per log."""
    rows = [{**cell(log), **{k: v for k, v in answers(log).items() if k != "log"}}
            for log in logs if log.stat().st_size]
    print("\n| model | harness | settings | episodes | decisions | schema-valid | actionable "
          "| ready op named | success | completed ops | s/decision | most common reply "
          "| first reply of each episode |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        n, episodes = r["decisions"], r["episodes"]
        completed = round((r["mean_completed"] or 0) * episodes)
        print(f"| {r['model']} | {r['harness']} | {r['settings']} | {episodes} | {n} "
              f"| {r['schema_valid']}/{n} | {r['actionable']}/{n} | {r.get('ready', 0)}/{n} "
              f"| {r['successes']}/{episodes} | {completed} "
              f"| {_fmt(r['median_s_per_decision'])} | {_common(r)} "
              f"| {', '.join(_pair(f) for f in r['first_replies'])} |")
    return rows


def _pair(reply: list[int] | None) -> str:
    return "-" if reply is None else f"({reply[0]}, {reply[1]})"


def _common(a: dict[str, Any]) -> str:
    top = a["most_common_reply"]
    return "-" if top is None else f"({top[0]}, {top[1]}) x{a['most_common_count']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs="*", metavar="LOG.jsonl")
    parser.add_argument("--tries", type=Path, nargs="*", default=None, metavar="LOG.jsonl")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.logs:
        args.logs = sorted(LADDER_LOGS.glob("*.jsonl"))
        if args.tries is None:
            args.tries = [log for log in args.logs if log.name.startswith("qwen")]
            args.tries += sorted(TRIES_LOGS.glob("*.jsonl"))
    cells = [cell(log) for log in args.logs if log.stat().st_size]
    print("| model | harness | settings | episodes | decisions | schema-valid | actionable "
          "| success | completed | first failures | s/decision | prompt tok/s first / later "
          "| output tok/decision (reasoning) | reasoning tok at decisions 0-3 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in cells:
        failures = ", ".join(f"{k} {v}" for k, v in sorted(c["first_failures"].items()))
        print(f"| {c['model']} | {c['harness']} | {c['settings']} | {c['episodes']} "
              f"| {c['decisions']} "
              f"| {c['schema_valid']}/{c['decisions']} | {c['actionable']}/{c['decisions']} "
              f"| {c['successes']}/{c['episodes']} | {_fmt(c['mean_completed'], 2)} "
              f"| {failures} | {_fmt(c['median_s_per_decision'])} "
              f"| {_fmt(c['first_decision_prompt_tps'])} / "
              f"{_fmt(c['later_decision_prompt_tps'])} "
              f"| {_fmt(c['output_tokens_per_decision'], 0)} "
              f"({_fmt(c['reasoning_tokens_per_decision'], 0)}) "
              f"| {' / '.join(_fmt(r, 0) for r in c['reasoning_by_decision'])} |")
    replies = [answers(log) for log in args.logs if log.stat().st_size]
    print("\n| model | harness | settings | decisions | ready op named (uniform guess) "
          "| candidate in range | right slot for the op named | most common reply |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for c, a in zip(cells, replies, strict=True):
        n = a.get("decisions", 0)
        common = _common(a)
        print(f"| {c['model']} | {c['harness']} | {c['settings']} | {n} | {a.get('ready', 0)}/{n} "
              f"({_fmt(a['ready_by_chance'], 2)}) | {a.get('in_range', 0)}/{n} "
              f"| {a.get('right_slot', 0)}/{n} "
              f"| {common} |")
    tries = tries_table(args.tries) if args.tries else []
    emit({"cells": cells, "answers": replies, "tries": tries}, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
