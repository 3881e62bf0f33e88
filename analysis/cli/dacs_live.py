"""`diagym dacs-live`: seed 002's phase 4, live chat-model agents steering a DACS or flat
orchestrator, judged by a chat model beside the keyword rubric (`dacs-study` plays phases
1-3; this command is phase 4)."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from diagym.analysis.cli.errors import UsageError
from diagym.analysis.cli.flags_chat import add_spending_flags, key_variable, spending_settings
from diagym.analysis.cli.flags_executor import (
    add_executor_flags,
    check_executor_flags,
    open_executor,
)
from diagym.analysis.cli.flags_general import (
    bounded_int,
    input_file,
)
from diagym.analysis.cli.outputs import writable_dir, writable_file
from diagym.llm_policies.client.config import client_default

ROLES = ("agent", "orchestrator", "judge")
# The choices of the orchestrator (llm_policies/steering/orchestrator.py ORCHESTRATOR_HARNESSES)
# and of the study (analysis/studies/dacs_live: judge.JUDGE_FORMATS, design.SCENARIOS), named
# here so that `--help` imports no env: a test keeps them equal.
ORCHESTRATOR_HARNESSES = ("json", "chat")
JUDGE_FORMATS = ("json", "tags")
SCENARIO_NAMES = ("ra1_n3", "ra2_n5")


def add_parser(subparsers: Any) -> None:
    from diagym.llm_policies.client.local_server import LOCAL_MODELS

    parser = subparsers.add_parser(
        "dacs-live",
        help="seed 002's phase 4: live LLM agents, DACS vs flat, LLM judge and kappa",
        description=(
            "Live sub-agents (chat models) work on their own tasks, ask the orchestrator with "
            "[[STEER: question]] and stop on [[DONE]] or --max-steps; the orchestrator (an "
            "LLM policy, or your own policy) answers from a focus (dacs) or flat window; a "
            "judge model scores each answer against its rubric, beside the keyword score, "
            "with Cohen's kappa between them. Trials are paired (same seeds in both "
            "conditions), appended to --log and resumed from it; the table, seed 002's "
            "figure 4 (live vs synthetic at matched N) and a report page go to --out."))
    parser.add_argument("--scenario", nargs="+", choices=SCENARIO_NAMES, default=["ra1_n3"],
                        metavar="NAME",
                        help="scenarios of agents, tasks and rubrics: ra1_n3 (N = 3) and/or "
                             "ra2_n5 (N = 5) (default: ra1_n3)")
    parser.add_argument("--trials", type=bounded_int(1), default=2, metavar="K",
                        help="paired trials per condition (default: %(default)s)")
    parser.add_argument("--max-steps", type=bounded_int(1), default=6, metavar="S",
                        help="turns per agent (default: %(default)s)")
    parser.add_argument("--max-steers", type=bounded_int(1), default=3, metavar="Q",
                        help="steering requests answered per agent (default: %(default)s)")
    parser.add_argument("--seed", type=bounded_int(0), default=0, metavar="S",
                        help="sampling seed of the first trial; trial i sends S + i to every "
                             "model (default: %(default)s)")
    for role in ROLES:
        parser.add_argument(f"--{role}-base-url", default=None, metavar="URL",
                            help=f"the {role}'s OpenAI-compatible server (default: none: "
                                 "--local serves every role)")
        parser.add_argument(f"--{role}-model", default=None, metavar="NAME",
                            help=f"the {role}'s model name on that server (default: none)")
    parser.add_argument("--local", choices=tuple(LOCAL_MODELS), default=None,
                        help="serve a bundled model for every role, one server (default: none)")
    parser.add_argument("--api-key-env", default=client_default("api_key_env"), metavar="NAME",
                        help="environment variable holding the API key of every server, "
                             "never logged (default: %(default)s; unset: no key is sent)")
    parser.add_argument("--orchestrator-policy", default=None, metavar="SPEC",
                        help="your own orchestrator Policy as package.module:Name or "
                             "path/to/file.py:Name, made with the scenario as its argument; "
                             "act(observation, info) gets {window, requester, question, "
                             "condition} and returns the answer text (default: none, the LLM "
                             "orchestrator at --orchestrator-base-url)")
    parser.add_argument("--orchestrator-harness", choices=ORCHESTRATOR_HARNESSES, default="json",
                        help="the LLM orchestrator's harness: json (a fresh prompt per "
                             "request) or chat (one conversation per trial, earlier windows "
                             "kept) (default: %(default)s)")
    parser.add_argument("--judge-format", choices=JUDGE_FORMATS, default="json",
                        help="the judge's verdict format: json (one JSON object, held to its "
                             "schema by the server's constrained decoding) or tags "
                             "(<verdict>...</verdict> in free text, seed 002's format) "
                             "(default: %(default)s)")
    parser.add_argument("--max-tokens", type=bounded_int(8), default=160, metavar="T",
                        help="completion tokens per call (default: %(default)s)")
    add_spending_flags(parser, "study", "run again with a higher limit and it goes on")
    parser.add_argument("--synthetic", type=input_file(1 << 24), default=None,
                        metavar="FILE.csv",
                        help="phase-1 rows for the figure, a dacs-study table (dacs_study.csv) "
                             "(default: none: the programmed readers, played here)")
    parser.add_argument("--log", type=Path, required=True, metavar="FILE",
                        help="the run log of every call and trial (one run per scenario); an "
                             "existing one is resumed (required, no default)")
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="where phase4.csv/.md, phase4_paired.csv/.md (dacs - flat paired by "
                             "decision), the figure and report.html go "
                             "(default: results)")
    parser.add_argument("--concurrency", type=bounded_int(1), default=1, metavar="K",
                        help="trials in flight at once, on --executor's workers (default: "
                             "%(default)s; one local server answers one call at a time)")
    add_executor_flags(parser)
    parser.set_defaults(func=run)


def _endpoints(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    """(base URL, model) of each role's server from its flags; UsageError for flags that
    conflict or are missing (none with --local: it serves every role)."""
    ends = {}
    for role in ROLES:
        url, model = getattr(args, f"{role}_base_url"), getattr(args, f"{role}_model")
        if args.local is not None:
            if url or model:
                raise UsageError(f"--{role}-base-url/--{role}-model cannot be used with --local")
            continue
        if role == "orchestrator" and args.orchestrator_policy is not None:
            if url or model:
                raise UsageError("--orchestrator-base-url/--orchestrator-model cannot be "
                                 "used with --orchestrator-policy")
            continue
        if not url or not model:
            raise UsageError(f"--{role}-base-url and --{role}-model are required (or --local "
                             "NAME)")
        ends[role] = (url, model)
    return ends


def _check_policy(spec: str) -> None:
    """A policy spec that does not load is one line naming this command's flag."""
    from diagym.controllers.loading import PolicyLoadError, load_policy_factory

    try:
        load_policy_factory(spec)
    except PolicyLoadError as error:
        raise ValueError(str(error).replace("--policy ", "--orchestrator-policy ", 1)) from None


def _play(args: argparse.Namespace,
          ends: dict[str, tuple[str, str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The per-condition rows and the paired (dacs - flat) rows of every scenario."""
    from diagym.analysis.llm_runs import spent_in_log
    from diagym.analysis.studies.dacs_live.design import SCENARIOS
    from diagym.analysis.studies.dacs_live.paired import paired_rows
    from diagym.analysis.studies.dacs_live.report import condition_rows
    from diagym.analysis.studies.dacs_live.roles import LiveRoles
    from diagym.analysis.studies.dacs_live.run import play_trials
    from diagym.controllers.runlog import RunLog

    with contextlib.ExitStack() as stack:
        log = stack.enter_context(RunLog(args.log, resume=True))  # the study resumes its log
        spent = spent_in_log(args.log)  # what a resumed study's cost limit counts
        system_role = True
        if args.local is not None:
            from diagym.llm_policies.client.local_server import local_model, local_server

            url = stack.enter_context(local_server(model=args.local))
            spec = local_model(args.local)
            ends = {role: (url, spec.name) for role in ROLES}
            system_role = spec.system_role
        roles = LiveRoles(
            endpoints=ends, max_tokens=args.max_tokens,
            judge_format=args.judge_format, harness=args.orchestrator_harness,
            system_role=system_role, api_key_env=key_variable(args.api_key_env),
            **spending_settings(args), spent_usd=spent,
            orchestrator_policy=args.orchestrator_policy)
        executor = stack.enter_context(open_executor(args, args.concurrency))
        rows, paired = [], []
        for name in args.scenario:
            scenario = SCENARIOS[name]
            entries = play_trials(scenario, args.trials, roles.for_executor(executor), log,
                                  seed=args.seed, max_steps=args.max_steps,
                                  max_steers=args.max_steers, judge_format=args.judge_format,
                                  executor=executor)
            rows += condition_rows(scenario, entries)
            paired += paired_rows(name, entries)
    return rows, paired


def run(args: argparse.Namespace) -> int:
    ends = _endpoints(args)
    writable_file("--log", args.log)
    writable_dir("--out", args.out)
    if args.cache_dir is not None:
        writable_dir("--cache-dir", args.cache_dir)
    check_executor_flags(args)
    if args.orchestrator_policy is not None:
        _check_policy(args.orchestrator_policy)
    rows, paired = _play(args, ends)
    return _write(args, rows, paired)


def _write(args: argparse.Namespace, rows: list[dict[str, Any]],
           paired: list[dict[str, Any]]) -> int:
    from diagym.analysis.report import write_beside
    from diagym.analysis.studies.dacs_live.figure import read_synthetic, write_outputs
    from diagym.analysis.studies.dacs_live.paired import write_paired
    from diagym.analysis.studies.dacs_live.report import write_tables
    from diagym.analysis.studies.dacs_study.report import reader_rows

    for path in [*write_tables(rows, args.out), *write_paired(paired, args.out)]:
        print(f"table: {path}")
    if args.synthetic is not None:
        synthetic, source = read_synthetic(args.synthetic), f"dacs-study table {args.synthetic}"
    else:
        synthetic = reader_rows(sorted({int(r["n_agents"]) for r in rows}))
        source = "programmed readers: dacs-reader on dacs windows, flat-reader on flat"
    run = {"scenarios": list(args.scenario), "trials": args.trials,
           "max_steps": args.max_steps, "max_steers": args.max_steers, "seed": args.seed,
           "judge_format": args.judge_format, "local": args.local,
           "orchestrator_policy": args.orchestrator_policy,
           "orchestrator_harness": args.orchestrator_harness,
           "models": {role: getattr(args, f"{role}_model") for role in ROLES}}
    for path in write_outputs(rows, synthetic, source, args.out, run):
        print(f"plot: {path}")
    write_beside(args.out, command="dacs-live")
    print(json.dumps(rows, indent=1))
    return 0
