"""`diagym dacs-study`: seed 002's phases on DACSSteering-v0, as a table and plots."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from diagym.analysis.cli.flags_chat import add_llm_flags, refuse_chat_flags
from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    executor_workers,
    open_executor,
)
from diagym.analysis.cli.flags_general import MAX_COUNT, add_log_flags, bounded_int
from diagym.analysis.cli.outputs import with_json_stdout, writable_dir, writable_file
from diagym.analysis.cli.policies import build_policy


def _policy(text: str) -> str:
    """argparse type for --policy: reference, llm or an import spec (loaded later, so an
    import error is one line from `run`)."""
    from diagym.controllers.loading import FORMS, is_import_path

    if text in ("reference", "llm") or is_import_path(text):
        return text
    raise argparse.ArgumentTypeError(
        f"must be reference, llm or your own policy as {FORMS}; got {text!r}")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dacs-study",
        help="seed 002's phases on DACSSteering-v0: accuracy, contamination, tokens",
        description=(
            "Run seed 002's eight scenarios (agents: s1-s3 heterogeneous N = 3, 5, 10; "
            "diversity: s4 homogeneous, s5 crossfire, s6 cascade; density: s7 D = 8 at N = 5, "
            "s8 D = 15 at N = 3) on DACSSteering-v0 with the reference orchestrators "
            "(dacs-reader on dacs windows, flat-reader and flat-recency on flat windows, "
            "registry-only, uniform), or with --policy llm or your own policy on dacs and "
            "flat windows; print a table and write it (CSV, Markdown) with plots. No budget unless "
            "--window is given. Phase 4 (live LLM agents, an LLM judge) is diagym dacs-live."
        ),
    )
    from diagym.analysis.studies.dacs_study.design import PHASES

    parser.add_argument("--policy", type=_policy, default="reference", metavar="POLICY",
                        help="reference (the programmed orchestrators), llm (a chat model "
                             "behind --base-url or --local) or your own policy as "
                             "package.module:Name or path/to/file.py:Name (see diagym run "
                             "--help; default: %(default)s)")
    parser.add_argument("--episodes", type=bounded_int(1, MAX_COUNT), default=10, metavar="K",
                        help="scenario seeds per arm (default 10, seed 002's trials per cell)")
    parser.add_argument("--window", type=bounded_int(128), default=None, metavar="W",
                        help="window budget in tokens (default: none, nothing is cut, as in "
                             "seed 002's runs)")
    parser.add_argument("--phases", nargs="+", choices=tuple(PHASES), default=list(PHASES),
                        metavar="PHASE",
                        help=f"which of {', '.join(PHASES)} to run (default: all three)")
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="where the table (dacs_study.csv, dacs_study.md, "
                             "provenance.json) and the plots go (default: results)")
    add_log_flags(parser, "episodes, and model calls with --policy llm", run_flags=True)
    parser.add_argument("--json", action="store_true",
                        help="print JSON rows instead of the table, and write no plots "
                             "(default: off)")
    add_llm_flags(parser)
    add_executor_flags(parser)
    parser.set_defaults(func=with_json_stdout(run))


def _play(args: argparse.Namespace) -> list[Any]:
    from diagym.analysis.studies.dacs_study.design import ENV_ID, LLM_ARMS
    from diagym.analysis.studies.dacs_study.run import play_phases, reference_env, text_env

    shared = {"episodes": args.episodes, "window": args.window, "phases": tuple(args.phases),
              "progress": True, "log": args.log, "resume": args.resume,
              "workers": args.concurrency, "run_name": args.run_name,
              "retry_failed": args.retry_failed}
    if args.policy == "reference":
        from diagym.controllers.registry import make_reference_policy

        refuse_chat_flags(args, args.policy)
        with open_executor(args, executor_workers(args, chat=False)) as executor:
            return play_phases(make_reference_policy, executor=executor, **shared)
    with build_policy(args, ENV_ID) as built:
        if built.chat:
            make_env, arms = text_env, LLM_ARMS
        else:
            make_env = text_env if built.text_actions else reference_env
            built.factory(make_env({}))  # a policy that cannot be made fails before the study
            # the policy under test faces the windows a chat model faces
            arms = tuple((args.policy, mode) for _llm, mode in LLM_ARMS)
        with open_executor(args, executor_workers(args, built.chat)) as executor:
            make_policy = built.factory.for_executor(executor)
            return play_phases(lambda _name, env: make_policy(env), arms=arms,
                             make_env=make_env, executor=executor, **shared)


def run(args: argparse.Namespace) -> int:
    from diagym.analysis.studies.dacs_study.report import format_table, plot_study, write_table
    from diagym.controllers.runlog import RunLog

    writable_file("--log", args.log)
    if not args.json:  # the plots are written only with the table
        writable_dir("--out", args.out)
    check_executor_flags(args)
    RunLog.check_target(args.log, args.resume)
    results = _play(args)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in results], indent=2),
              file=args.stdout)
        return 0
    print(format_table(results, args.window))
    tables = write_table(results, args.window, args.out, {
        "policy": args.policy, "episodes": args.episodes, "phases": list(args.phases),
        "scenario_seeds": [0, args.episodes - 1]})
    for path in tables:
        print(f"table: {path}")
    for path in plot_study(results, args.out, args.window):
        print(f"plot: {path}")
    from diagym.analysis.report import write_beside

    write_beside(args.out, args.log, command="dacs-study")
    return 0
