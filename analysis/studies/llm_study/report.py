"""The language-model designs' report: per harness the pooled episode summary, its calls'
latency, tokens and cost, the marginal contrasts with seed-cluster bootstrap intervals, and
Markdown in the shapes of Tables 8 and 9; across harnesses, each against json on the same
task seeds.

Latency is seed 003's: the median over decisions (its 9.00 s), read from the run log's call
lines, since an episode's counters keep only sums. Tokens and cost are read from the same
lines, so every figure of the calls counts the same decisions: a call counts when its episode
finished in the log and the model answered it; a decision replayed after a resume counts once
(its last line). The decoding of the run (constrained, unconstrained or negotiated) and the
structured-output modes the calls actually used are part of the output.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagym.analysis.stats import bootstrap_weights, paired_bootstrap
from diagym.analysis.studies.llm_study.design import FACTORS, Cell
from diagym.analysis.studies.llm_study.run import BASELINE, CellRun
from diagym.analysis.summary import summarise as summarise_episodes
from diagym.controllers.episodes import Episodes
from diagym.controllers.logreader import answered_calls as answered_calls  # the study's name for it

# What a harness's well-formed reply is called: a JSON action, or one valid tool call.
VALID_REPLY_LABELS = {"json": "schema-valid", "chat": "schema-valid", "tools": "tool-call-valid"}
TOKEN_FIELDS = ("provider_prompt_tokens", "provider_completion_tokens", "cl100k_prompt_tokens",
                "cl100k_completion_tokens")


def contrasts(results: list[tuple[Cell, Episodes]], resamples: int = 2000
              ) -> list[dict[str, Any]]:
    """Per factor of the design: high-minus-low success (paired over task seeds, bootstrap
    interval) and completed operations. None for a design not played through (cells with
    unequal task seeds, or a factor whose levels hold unequal numbers of cells: a study read
    part-way from its log), whose marginal differences would mix in the missing cells."""
    if len({len(rs) for _, rs in results}) != 1:
        return []
    for name, *_ in FACTORS:
        if name in results[0][0].levels and 2 * sum(
                cell.levels[name] for cell, _ in results) != len(results):
            return []
    success = np.array([rs.columns["success"] for _, rs in results], dtype=float)  # cells x seeds
    completed = np.array([rs.columns["completed"] for _, rs in results], dtype=float)
    n_seeds = success.shape[1]
    weights = bootstrap_weights(n_seeds, resamples=resamples)
    out = []
    for name, *_ in FACTORS:
        if name not in results[0][0].levels:
            continue
        high = np.array([cell.levels[name] == 1 for cell, _ in results])
        per_seed_success = success[high].mean(axis=0) - success[~high].mean(axis=0)
        per_seed_ops = completed[high].mean(axis=0) - completed[~high].mean(axis=0)
        estimate, low, high_band = paired_bootstrap(per_seed_success[None, :], weights)
        out.append({
            "factor": name,
            "low_success": [int(success[~high].sum()), int(success[~high].size)],
            "high_success": [int(success[high].sum()), int(success[high].size)],
            "success_difference": float(estimate[0]),
            "interval": [float(low[0]), float(high_band[0])],
            "operation_difference": float(per_seed_ops.mean()),
            "n_per_level": int(high.sum()) * n_seeds,
        })
    return out


def harness_of(call: dict[str, Any]) -> str:
    """The harness a call line was made in; lines written before harnesses were recorded
    are json's, the only harness there was."""
    return str(call.get("harness") or BASELINE)


def _known_sum(calls: Sequence[dict[str, Any]], name: str) -> float | None:
    """The sum of a call field over the calls that report it; None when none does."""
    values = [c[name] for c in calls if isinstance(c.get(name), int | float)
              and not isinstance(c.get(name), bool)]
    return float(sum(values)) if values else None


def call_figures(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Latency, tokens, cost and cache hits of one harness's answered calls (one per
    decision). Provider token counts and cost are None where no call reports them, and
    `calls_without_cost` says how many calls a partial cost leaves out."""
    latencies = np.array([float(c["latency_s"]) for c in calls])
    tokens = {name: _known_sum(calls, name) for name in TOKEN_FIELDS}
    provider = [tokens["provider_prompt_tokens"], tokens["provider_completion_tokens"]]
    cl100k = (tokens["cl100k_prompt_tokens"] or 0) + (tokens["cl100k_completion_tokens"] or 0)
    n = len(calls)
    return {
        "median_decision_latency_s": float(np.median(latencies)) if n else None,
        "tokens": tokens,
        "tokens_per_decision": {
            "provider": (sum(t or 0 for t in provider) / n
                         if n and any(t is not None for t in provider) else None),
            "cl100k": cl100k / n if n else None,
        },
        "cost_usd": _known_sum(calls, "cost_usd"),
        "calls_without_cost": sum(c.get("cost_usd") is None for c in calls),
        "cache_hits": sum(c.get("cache") == "hit" for c in calls),
        "calls_by_response_format": dict(sorted(Counter(
            str(c.get("response_format")) for c in calls).items())),
    }


def harness_summary(harness: str, results: Sequence[CellRun], calls: Sequence[dict[str, Any]],
                    resamples: int = 2000) -> dict[str, Any]:
    """One harness's figures: its episodes (diagym.analysis.summary), its calls (`call_figures`),
    success per dollar, and the marginal contrasts of the design within it."""
    pooled = summarise_episodes(Episodes.concatenate([r.episodes for r in results]))
    model = pooled.model_calls
    figures = call_figures(calls)
    cost = figures["cost_usd"]
    return {
        "harness": harness,
        "episodes": pooled.episodes,
        "successes": pooled.successes,
        "success": pooled.success,
        "mean_completed": pooled.mean_completed,
        "decisions": model.decisions if model else 0,
        "valid_reply": VALID_REPLY_LABELS.get(harness, "schema-valid"),
        "schema_valid_rate": model.schema_valid_rate if model else None,
        "first_failures": pooled.failures,
        "mean_decision_latency_s": model.mean_decision_latency_s if model else None,
        **figures,
        "success_per_usd": pooled.successes / cost if cost else None,
        "contrasts": contrasts([(r.cell, r.episodes) for r in results], resamples=resamples),
    }


def _by_harness(results: Sequence[CellRun]) -> dict[str, list[CellRun]]:
    grouped: dict[str, list[CellRun]] = {}
    for result in results:
        grouped.setdefault(result.harness, []).append(result)
    return grouped


def harness_contrasts(results: Sequence[CellRun], resamples: int = 2000
                      ) -> list[dict[str, Any]]:
    """Each harness minus the baseline (json when played, else the first): success paired
    over task seeds (each seed's mean over the cells, bootstrap interval) and completed
    operations. Every harness must have played the same cells on the same task seeds."""
    grouped = _by_harness(results)
    if len(grouped) < 2:
        return []
    baseline = BASELINE if BASELINE in grouped else next(iter(grouped))

    def columns(runs: list[CellRun], name: str) -> np.ndarray:
        return np.array([r.episodes.columns[name] for r in runs], dtype=float)

    base = grouped[baseline]
    plan = ([r.cell.levels for r in base], columns(base, "task_seed").tolist())
    weights = bootstrap_weights(len(base[0].episodes), resamples=resamples)
    out = []
    for harness, runs in grouped.items():
        if harness == baseline:
            continue
        if ([r.cell.levels for r in runs], columns(runs, "task_seed").tolist()) != plan:
            raise ValueError(f"harness {harness!r} did not play the cells and task seeds of "
                             f"harness {baseline!r}; a harness contrast pairs them")
        success, base_success = columns(runs, "success"), columns(base, "success")
        per_seed = success.mean(axis=0) - base_success.mean(axis=0)
        estimate, low, high = paired_bootstrap(per_seed[None, :], weights)
        out.append({
            "harness": harness,
            "baseline": baseline,
            "success": [int(success.sum()), int(success.size)],
            "baseline_success": [int(base_success.sum()), int(base_success.size)],
            "success_difference": float(estimate[0]),
            "interval": [float(low[0]), float(high[0])],
            "operation_difference": float(
                (columns(runs, "completed") - columns(base, "completed")).mean()),
        })
    return out


def summarise_study(results: Sequence[CellRun], resamples: int = 2000,
                    calls: Sequence[dict[str, Any]] = (),
                    response_format: str | None = None) -> dict[str, Any]:
    """The `diagym llm-study --json` object: "harnesses" maps each harness to its figures
    (`harness_summary`; `calls` are the run log's `answered_calls`), "harness_contrasts"
    compares them; a study of one harness also has that harness's figures at the top level,
    the shape the object had before the harness was a factor. response_format: the run's
    setting."""
    from diagym.llm_policies.policy import decoding

    grouped = _by_harness(results)
    harnesses = {
        harness: harness_summary(harness, runs, [c for c in calls if harness_of(c) == harness],
                                 resamples=resamples)
        for harness, runs in grouped.items()}
    out: dict[str, Any] = {}
    if len(harnesses) == 1:
        out.update(next(iter(harnesses.values())))
    out.update({
        "response_format": response_format,
        "decoding": decoding(response_format),
        "harnesses": harnesses,
        "harness_contrasts": harness_contrasts(results, resamples=resamples),
    })
    return out


def _percent(rate: float | None) -> str:
    return f"{100 * rate:.1f}%" if rate is not None else "n/a"


def _tokens_cell(h: dict[str, Any]) -> str:
    per = h["tokens_per_decision"]
    provider = f"{per['provider']:.0f}" if per["provider"] is not None else "n/a"
    cl100k = f"{per['cl100k']:.0f}" if per["cl100k"] is not None else "n/a"
    return f"{provider} (cl100k {cl100k})"


def _cost_cell(h: dict[str, Any]) -> str:
    if h["cost_usd"] is None:
        return "n/a"
    per_usd = h["success_per_usd"]
    return f"{h['cost_usd']:.4f}" + (f" ({per_usd:.1f} successes / USD)"
                                     if per_usd is not None else "")


def harness_table(summary: dict[str, Any]) -> list[str]:
    """The headline rows, one per harness."""
    lines = ["| Harness | Episodes | Success | Valid replies | First failures | Median latency "
             "| Tokens / decision | Cost (USD) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, h in summary["harnesses"].items():
        latency = h["median_decision_latency_s"]
        failures = ", ".join(f"{k} {v}" for k, v in h["first_failures"].items()) or "none"
        lines.append(
            f"| {name} | {h['episodes']} | {_percent(h['success'])} | "
            f"{_percent(h['schema_valid_rate'])} {h['valid_reply']} | {failures} | "
            + (f"{latency:.2f} s" if latency is not None else "n/a")
            + f" | {_tokens_cell(h)} | {_cost_cell(h)} |")
    return lines


def _harness_lines(design: str, h: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """Today's lines and contrast table for one harness."""
    latency = h["median_decision_latency_s"]
    tokens = h["tokens"]

    def count(name: str) -> str:
        return f"{tokens[name]:.0f}" if tokens[name] is not None else "n/a"

    lines = [
        f"{h['episodes']} episodes: success {100 * h['success']:.1f}%, "
        f"mean completed {h['mean_completed']:.2f} of 8, {h['decisions']} "
        f"decisions, {h['valid_reply']} {_percent(h['schema_valid_rate'])}"
        + ", median decision latency "
        + (f"{latency:.2f} s" if latency is not None else "n/a"),
        f"tokens: provider {count('provider_prompt_tokens')} prompt + "
        f"{count('provider_completion_tokens')} completion, cl100k "
        f"{count('cl100k_prompt_tokens')} + {count('cl100k_completion_tokens')}; cost "
        + (f"{h['cost_usd']:.4f} USD" if h["cost_usd"] is not None else "n/a")
        + (f" ({h['calls_without_cost']} calls without a cost)"
           if h["cost_usd"] is not None and h["calls_without_cost"] else "")
        + ", success per USD "
        + (f"{h['success_per_usd']:.1f}" if h["success_per_usd"] is not None else "n/a")
        + f"; cache hits {h['cache_hits']}",
        f"decoding: {summary['decoding'] or 'n/a'} (response_format "
        f"{summary['response_format'] or 'n/a'}; calls by mode: "
        + (", ".join(f"{k} {v}" for k, v in h["calls_by_response_format"].items())
           or "none") + ")",
        "first failures: " + (", ".join(f"{k} {v}" for k, v in h["first_failures"].items())
                              or "none"),
        "",
    ]
    if not h["contrasts"]:
        lines.append("contrasts: not estimated (the design is not played through)")
    elif design == "local":
        lines += ["| Contrast | Low success | High success | Difference (95% interval) |",
                  "| --- | --- | --- | --- |"]
        for c in h["contrasts"]:
            lo_k, lo_n = c["low_success"]
            hi_k, hi_n = c["high_success"]
            a, b = c["interval"]
            lines.append(
                f"| {c['factor']} (high - low) | {lo_k}/{lo_n} ({lo_k / lo_n:.3f}) | "
                f"{hi_k}/{hi_n} ({hi_k / hi_n:.3f}) | {100 * c['success_difference']:+.1f} pp "
                f"({100 * a:+.1f}, {100 * b:+.1f}) |")
    else:
        lines += ["| Factor | Success difference | Operation difference | n per level |",
                  "| --- | --- | --- | --- |"]
        for c in h["contrasts"]:
            lines.append(f"| {c['factor']} (high - low) | {100 * c['success_difference']:+.1f} pp"
                         f" | {c['operation_difference']:+.2f} | {c['n_per_level']} |")
    return lines


def format_study_summary(design: str, summary: dict[str, Any]) -> str:
    """Markdown: the harness table, the harness contrasts, then per harness the lines and
    the table in the shape of Table 9 (local) or Table 8 (fractional)."""
    lines = [*harness_table(summary), ""]
    if summary["harness_contrasts"]:
        lines += ["| Harness contrast | Baseline success | Harness success | "
                  "Difference (95% interval) | Operation difference |",
                  "| --- | --- | --- | --- | --- |"]
        for c in summary["harness_contrasts"]:
            (k, n), (base_k, base_n), (a, b) = c["success"], c["baseline_success"], c["interval"]
            lines.append(
                f"| {c['harness']} - {c['baseline']} | {base_k}/{base_n} | {k}/{n} | "
                f"{100 * c['success_difference']:+.1f} pp ({100 * a:+.1f}, {100 * b:+.1f}) | "
                f"{c['operation_difference']:+.2f} |")
        lines.append("")
    several = len(summary["harnesses"]) > 1
    for name, h in summary["harnesses"].items():
        if several:
            lines += [f"### harness {name}", ""]
        lines += [*_harness_lines(design, h, summary), ""]
    return "\n".join(lines).rstrip("\n")


RESULT_COLUMNS = ("harness", *(name for name, *_ in FACTORS), "episodes", "successes",
                  "success", "mean_completed", "decisions", "valid_reply_rate",
                  "first_failures", "cost_usd")
RUN_COLUMNS = ("env", "design", "policy", "model", "served_models", "task_seeds",
               "diagym_version", "git_commit")


def result_rows(summary: dict[str, Any], results: Sequence[CellRun]) -> list[dict[str, Any]]:
    """One row per (harness, cell), each carrying the run's provenance (RUN_COLUMNS), so a
    row copied out of the file still says what produced it."""
    run, made = summary.get("run", {}), summary.get("provenance", {})
    shared = {
        "env": run.get("env"), "design": run.get("design"), "policy": run.get("policy"),
        "model": run.get("model"), "served_models": " ".join(run.get("served_models", [])),
        "task_seeds": "..".join(str(s) for s in run.get("task_seeds", [])),
        "diagym_version": made.get("diagym_version"), "git_commit": made.get("git_commit"),
    }
    rows = []
    for result in results:
        pooled = summarise_episodes(result.episodes)
        model = pooled.model_calls
        rows.append({
            "harness": result.harness,
            **{name: result.cell.levels.get(name, "") for name, *_ in FACTORS},
            "episodes": pooled.episodes, "successes": pooled.successes,
            "success": pooled.success, "mean_completed": pooled.mean_completed,
            "decisions": model.decisions if model else "",
            "valid_reply_rate": "" if model is None or model.schema_valid_rate is None
            else model.schema_valid_rate,
            "first_failures": " ".join(f"{k}:{v}" for k, v in pooled.failures.items()),
            "cost_usd": "" if model is None or model.cost_usd is None else model.cost_usd,
            **shared,
        })
    return rows


def write_outputs(summary: dict[str, Any], results: Sequence[CellRun], out: Path) -> None:
    """DIR/summary.json (the --json object) and DIR/results.csv (`result_rows`)."""
    import csv

    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with (out / "results.csv").open("w", newline="") as sink:
        writer = csv.DictWriter(sink, fieldnames=[*RESULT_COLUMNS, *RUN_COLUMNS])
        writer.writeheader()
        writer.writerows(result_rows(summary, results))
