"""`diagym llm-study`: seed 003's language-model designs for a chat model, the text oracle or
a user's policy, with the harness as a factor."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagym.analysis.cli.flags_chat import add_llm_flags, harnesses_of
from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    executor_workers,
    open_executor,
)
from diagym.analysis.cli.flags_general import add_log_flags, bounded_int
from diagym.analysis.cli.outputs import with_json_stdout, writable_dir, writable_file
from diagym.analysis.cli.policies import TEXT_ORACLE, build_policy

if TYPE_CHECKING:
    from diagym.analysis.cli.estimate import RunPlan


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "llm-study",
        help="seed 003's language-model designs (2^5 local factorial, 2^(4-1) fraction)",
        description=(
            "Run a chat model over seed 003's local 2^5 factorial (section 10) or its 2^(4-1) "
            "fractional factorial (section 9.1) and report completed operations, schema-valid "
            "rate, first failures, the median decision latency, the decoding and the marginal "
            "contrasts with seed-cluster bootstrap intervals (Tables 9 and 8)."
        ),
    )
    from diagym.analysis.studies.llm_study.design import DEFAULT_SEEDS, DESIGNS

    parser.add_argument("--design", choices=DESIGNS, required=True,
                        help="local (the 2^5 factorial), fractional (the 2^(4-1) fraction) or "
                             "reasoning (the fraction's cells at each reasoning budget: the "
                             "direct answer, 256 and 1024 tokens of think-then-act, compared "
                             "at matched tokens per episode; --policy llm; docs/REASONING.md) "
                             "(required)")
    parser.add_argument("--seeds", type=bounded_int(1), metavar="K",
                        help="task seeds per cell (default: "
                        + ", ".join(f"{n} {d}" for d, n in DEFAULT_SEEDS.items()) + ")")
    parser.add_argument("--first-seed", type=bounded_int(0), default=0, metavar="S",
                        help="task seed of each cell's first episode (default: %(default)s)")
    parser.add_argument("--policy", type=_policy, default="llm", metavar="POLICY",
                        help="llm (a chat model behind --base-url or --local), text-oracle "
                             "(the harness's self-check, no server) or your own policy as "
                             "package.module:Name or path/to/file.py:Name, given the text env "
                             "(default: %(default)s)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="also write DIR/summary.json and DIR/results.csv (one row per "
                             "harness and cell, with the run's provenance) (default: none)")
    add_log_flags(parser, "calls and episodes", run_flags=True)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the tables (default: off)")
    add_llm_flags(parser, harnesses=True)
    add_executor_flags(parser)
    parser.set_defaults(func=with_json_stdout(run))




def _policy(text: str) -> str:
    """argparse type for --policy: llm, text-oracle or an import spec (loaded later, so an
    import error is one line from `run`)."""
    from diagym.controllers.loading import FORMS, is_import_path

    if text in ("llm", TEXT_ORACLE) or is_import_path(text):
        return text
    raise argparse.ArgumentTypeError(
        f"must be llm, {TEXT_ORACLE} or your own policy as {FORMS}; got {text!r}")


def run(args: argparse.Namespace) -> int:
    import tempfile

    import diagym  # noqa: F401  (registers the ids)
    from diagym.analysis.studies.llm_study.design import DEFAULT_SEEDS
    from diagym.analysis.studies.llm_study.report import (
        answered_calls,
        format_study_summary,
        summarise_study,
        write_outputs,
    )
    from diagym.analysis.studies.llm_study.run import ENV_ID, run_design, text_env
    from diagym.controllers.provenance import provenance
    from diagym.controllers.runlog import RunLog

    n_seeds = args.seeds or DEFAULT_SEEDS[args.design]
    harnesses = harnesses_of(args)
    levels = _reasoning_levels(args)
    writable_file("--log", args.log)
    if args.out is not None:
        writable_dir("--out", args.out)
    check_executor_flags(args)
    RunLog.check_target(args.log, args.resume)
    # The median decision latency is read from the call lines, so a run without --log
    # still writes one, to a directory that is removed afterwards.
    with tempfile.TemporaryDirectory(prefix="diagym-llm-study-") as scratch, \
            contextlib.ExitStack() as stack:
        log = args.log or Path(scratch) / "study.jsonl"
        plan = None
        if args.policy == "llm":  # a local model's whole-run estimate
            from diagym.analysis.cli.estimate import run_plan
            from diagym.analysis.studies.llm_study.design import design_cells

            plan = run_plan((max(len(levels), 1) * len(harnesses) * n_seeds, cell.spec)
                            for cell in design_cells(args.design))
        factory, make_env, described = _policies(args, stack, log, text_env, plan)
        executor = stack.enter_context(open_executor(
            args, executor_workers(args, args.policy in ("llm", TEXT_ORACLE))))
        # per harness, the factory whose workers share one cost meter and rate limit
        make_policy = factory.for_executor(executor).for_harness
        design = {"harnesses": harnesses, "log": log, "resume": args.resume,
                  "workers": args.concurrency, "progress": True, "make_env": make_env,
                  "run_name": args.run_name, "retry_failed": args.retry_failed,
                  "executor": executor}
        if levels:
            from diagym.analysis.studies.llm_study.reasoning import run_reasoning_design

            by_level = run_reasoning_design(
                args.first_seed, n_seeds,
                lambda harness, budget: make_policy(harness).with_reasoning(budget),
                levels=levels, **design)
            results = [run for runs in by_level.values() for run in runs]
        else:
            results = run_design(args.design, args.first_seed, n_seeds, make_policy, **design)
        calls = answered_calls(log)
    if levels:
        return _reasoning_outputs(args, by_level, calls, described, harnesses, n_seeds)
    summary = summarise_study(results, calls=calls, response_format=described["response_format"])
    summary["run"] = {
        "env": ENV_ID, "design": args.design, "harnesses": list(harnesses),
        "task_seeds": [args.first_seed, args.first_seed + n_seeds - 1], **described,
        "served_models": sorted({str(c["served_model"]) for c in calls
                                 if c.get("served_model")}),
    }
    summary["provenance"] = provenance()
    if args.out is not None:
        write_outputs(summary, results, args.out)
    print(json.dumps(summary, indent=2) if args.json
          else format_study_summary(args.design, summary), file=args.stdout)
    if args.out is not None:
        from diagym.analysis.report import write_beside

        write_beside(args.out, args.log, command="llm-study", quiet=args.json)
    return 0


def _reasoning_levels(args: argparse.Namespace) -> tuple[int | None, ...]:
    """The reasoning budgets --design reasoning plays (none for another design), after
    refusing what it cannot play; the chat flags then see its largest budget, so decoding
    is checked and the probe asks for the native budget control."""
    if args.design != "reasoning":
        return ()
    from diagym.analysis.studies.llm_study.reasoning import REASONING_LEVELS

    if args.policy != "llm":
        raise ValueError(f"--design reasoning varies a chat model's reasoning budget; "
                         f"--policy {args.policy} has none (use --policy llm)")
    if args.reasoning_tokens is not None:
        raise ValueError("--reasoning-tokens: --design reasoning sets the budgets itself "
                         "(the direct answer, " + ", ".join(
                             str(b) for b in REASONING_LEVELS if b is not None) + " tokens)")
    args.reasoning_tokens = max(b for b in REASONING_LEVELS if b is not None)
    return REASONING_LEVELS


def _reasoning_outputs(args: argparse.Namespace, by_level: dict[Any, Any],
                       calls: list[dict[str, Any]], described: dict[str, Any],
                       harnesses: tuple[str, ...], n_seeds: int) -> int:
    """The reasoning design's summary (stdout, --json, --out DIR/summary.json)."""
    from diagym.analysis.studies.llm_study.reasoning import (
        format_reasoning_summary,
        summarise_reasoning,
    )
    from diagym.analysis.studies.llm_study.run import ENV_ID
    from diagym.controllers.provenance import provenance

    summary = summarise_reasoning(by_level, calls)
    summary["run"] = {
        "env": ENV_ID, "design": args.design, "harnesses": list(harnesses),
        "task_seeds": [args.first_seed, args.first_seed + n_seeds - 1],
        "invalid_retries": args.invalid_retries,
        **{k: v for k, v in described.items() if k != "reasoning_tokens"}}
    summary["provenance"] = provenance()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2) if args.json else format_reasoning_summary(summary),
          file=args.stdout)
    if args.out is not None:
        from diagym.analysis.report import write_beside

        write_beside(args.out, args.log, command="llm-study", quiet=args.json)
    return 0


def _policies(args: argparse.Namespace, stack: contextlib.ExitStack, log: Path,
              text_env: Any, plan: RunPlan | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """(the policy's factory, make_env(spec), the policy's description for the summary);
    `plan`, what the study plays, for a local model's whole-run estimate."""
    from diagym.analysis.studies.llm_study.run import ENV_ID

    built = stack.enter_context(build_policy(args, ENV_ID, log=log, plan=plan))
    if args.policy == "llm":
        described = {key: value for key, value in built.described.items() if key != "harness"}
        return built.factory, text_env, {"policy": "llm", **described}
    if args.policy == TEXT_ORACLE:
        return built.factory, text_env, {"policy": TEXT_ORACLE, "response_format": "none"}
    import dataclasses

    import gymnasium as gym

    from diagym.analysis.studies.llm_study.design import design_cells

    def bare_env(spec: Any) -> Any:
        return gym.make(ENV_ID, **dataclasses.asdict(spec))

    make_env = text_env if built.text_actions else bare_env
    built.factory(make_env(design_cells(args.design)[0].spec))  # a broken policy fails here
    return built.factory, make_env, {"policy": args.policy, "response_format": None}
