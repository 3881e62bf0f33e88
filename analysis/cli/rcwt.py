"""`diagym rcwt sweep` and `diagym rcwt fit`: seed 000's RCWT from the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from pathlib import Path
from typing import Any

from diagym.analysis.cli.flags_chat import add_llm_flags
from diagym.analysis.cli.flags_general import (
    MAX_CSV_BYTES,
    MAX_WINDOW_TOKENS,
    add_env_kwargs,
    bounded_int,
    input_file,
)
from diagym.analysis.cli.outputs import writable_dir
from diagym.analysis.cli.policies import build_policy

LOG_NAME = "calls.jsonl"


def _percent(text: str) -> float:
    """argparse type for --q: a target ratio in percent, 0..100."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a percentage in 0..100; got {text!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"must be a percentage in 0..100; got {text!r}")
    return value


def add_parser(subparsers: Any) -> None:
    """`rcwt` with its own commands `sweep` and `fit`."""
    parser = subparsers.add_parser(
        "rcwt",
        help="seed 000's RCWT: fixed-budget sweeps over the coordination share, and fits",
        description=(
            "Roundtable Context Window Test (seed 000): `sweep` assembles one prompt of exactly "
            "W cl100k_base tokens per trial and target ratio q and scores a policy; `fit` fits "
            "the five curve families and theta = W (1 - p0) to a sweep CSV."
        ),
    )
    from diagym.analysis.studies.rcwt.design import ENV_ID, Q_GRID, WORKFLOW_ID
    from diagym.llm_policies.prompts.budget import ARTIFACT_DROP, ARTIFACT_LAYOUT, LAYOUTS

    commands = parser.add_subparsers(dest="rcwt_command", required=True, metavar="COMMAND")

    sweep = commands.add_parser(
        "sweep",
        help="run a fixed-budget sweep on DACSSteering-v0 and fit it",
        description=(
            "For each target ratio q and both orders (coord_first, reason_first), assemble the "
            "first request of scenario seeds 0..N-1 into exactly W tokens (instructions and "
            "request; other agents' full blocks as coordination; the requester's full block as "
            "evidence; by default the artifact's layout, context as the system message and "
            "the task last as the user message, and blocks of <= 10 tokens not sent), score "
            f"the policy 0/1, and write DIR/{LOG_NAME} (one line per call; --resume continues "
            "it), DIR/sweep.csv, DIR/fits.json and DIR/fits.png."
        ),
    )
    sweep.add_argument("--env", default=ENV_ID, choices=(ENV_ID, WORKFLOW_ID), metavar="ID",
                       help=f"{ENV_ID} (one steering request per call) or {WORKFLOW_ID} "
                            "(one episode per call, --policy llm only; default: %(default)s)")
    add_env_kwargs(sweep)
    sweep.add_argument("--policy", choices=("flat-reader", "llm"), required=True,
                       help="flat-reader (the programmed reader; no model) or llm")
    sweep.add_argument("--window", type=bounded_int(1, MAX_WINDOW_TOKENS), required=True,
                       metavar="W",
                       help="the fixed budget W in cl100k_base tokens")
    sweep.add_argument("--trials", type=bounded_int(1), required=True, metavar="N",
                       help="scenario seeds 0..N-1 per (q, order) cell, paired across cells")
    sweep.add_argument("--q", type=_percent, nargs="+", metavar="PCT",
                       default=[round(100 * q, 6) for q in Q_GRID],
                       help="target ratios in percent (default: 0 25 50 75 90 92 94 96 98)")
    sweep.add_argument("--layout", choices=LAYOUTS, default=ARTIFACT_LAYOUT,
                       help="context_system (default, the artifact's: context blocks as the "
                            "system message, the task last as the user message) or "
                            "instructions_first (one text: instructions, then the blocks); "
                            f"{WORKFLOW_ID} sweeps always use its renderer's instructions_first")
    sweep.add_argument("--drop-at-most", type=bounded_int(0), default=ARTIFACT_DROP, metavar="N",
                       help="do not send a coordination or evidence block whose target is "
                            f"1..N tokens (default {ARTIFACT_DROP}, the artifact's rule; 0 "
                            "keeps every block)")
    sweep.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help=f"directory for {LOG_NAME}, sweep.csv, fits.json and fits.png, "
                            "checked writable before the sweep (required)")
    sweep.add_argument("--resume", action="store_true",
                       help=f"continue DIR/{LOG_NAME}: skip the calls it already holds "
                            "(default: off)")
    sweep.add_argument("--resamples", type=bounded_int(1), default=1000, metavar="B",
                       help="bootstrap resamples for theta's interval (default 1000)")
    sweep.add_argument("--json", action="store_true",
                       help="print the fits JSON instead of the tables (default: off)")
    add_llm_flags(sweep, budget=False, policy=False)  # --window is the budget; no harness
    sweep.set_defaults(func=run_sweep)

    fit = commands.add_parser(
        "fit",
        help="fit the five families and theta to an RCWT CSV (model,p,score[,order])",
        description=(
            "Per model: logistic p0, k, theta = W (1 - p0) and R^2 (or 'not identified' and "
            "why), then every family's R^2, Gaussian AIC and delta AIC, and the family with "
            "the lowest AIC (diagym.analysis.fits.fit_table)."
        ),
    )
    fit.add_argument("csv", type=input_file(MAX_CSV_BYTES), metavar="FILE.csv",
                     help="rows of model,p,score[,order], as sweep.csv")
    fit.add_argument("--window", type=bounded_int(1, MAX_WINDOW_TOKENS), required=True, metavar="W",
                     help="the budget W the rows were scored at, for theta = W (1 - p0) "
                          "(required)")
    fit.add_argument("--json", action="store_true",
                     help="print fit_table's JSON instead of the table (default: off)")
    fit.set_defaults(func=run_fit)


def _sweep(args: argparse.Namespace, log: Path) -> list[dict[str, Any]]:
    """The sweep's call records (old and new), with a progress bar on stderr."""
    from diagym import envs
    from diagym.analysis.progress import progress
    from diagym.analysis.studies.rcwt import run
    from diagym.analysis.studies.rcwt.design import WORKFLOW_ID

    q = [value / 100.0 for value in args.q]
    family = envs.family_of(args.env)
    if family == envs.WORKFLOW and args.policy != "llm":
        raise ValueError(f"{WORKFLOW_ID} sweeps need --policy llm (the programmed "
                         "controllers do not read text)")
    with contextlib.ExitStack() as stack:
        # the endpoint first: its pre-flight check may end the sweep before any progress line;
        # a sweep's prompts are its own: it takes the factory's chat clients, not its policies
        built = stack.enter_context(build_policy(args, args.env))
        bars: list[Any] = []  # opened once the log is open: a refused resume shows none

        def started(done: int, total: int) -> None:
            bars.append(stack.enter_context(progress(
                total=total, desc="rcwt sweep", unit="call", initial=done, resumed_from=log)))

        shared = {"window": args.window, "trials": args.trials, "log": log, "q": q,
                  "env_kwargs": args.env_kwargs, "resume": args.resume,
                  "on_call": lambda _record: bars[0].update(1), "on_start": started}
        if family == envs.DACS:
            shared.update(layout=args.layout, drop_at_most=args.drop_at_most)
        if built.settings is None:
            return run.run_sweep(run.FlatReader(), **shared)
        if family == envs.WORKFLOW:
            return run.run_workflow_sweep(built.factory, **shared)
        policy = run.LLMAnswer(built.factory)
        stack.callback(policy.close)
        return run.run_sweep(policy, workers=args.concurrency, **shared)


def run_sweep(args: argparse.Namespace) -> int:
    from diagym.analysis.studies.rcwt.report import cell_table, format_sweep, write_outputs
    from diagym.controllers.runlog import RunLog

    log = args.out / LOG_NAME
    writable_dir("--out", args.out)
    RunLog.check_target(log, args.resume)
    records = _sweep(args, log)
    outputs = write_outputs(records, args.out, args.window, resamples=args.resamples)
    from diagym.analysis.report import write_beside

    write_beside(args.out, command="rcwt sweep", quiet=args.json)
    if args.json:
        print(json.dumps(outputs.fits, indent=2))
        return 0
    print(f"{len(records)} calls at W = {args.window} on {args.env} "
          f"{json.dumps(args.env_kwargs)}")
    print(format_sweep(cell_table(records), outputs.fits))
    print(f"log: {log}\ncsv: {outputs.csv}\nfits: {outputs.fits_json}\nplot: {outputs.plot}")
    return 0


def run_fit(args: argparse.Namespace) -> int:
    from diagym.analysis.studies.rcwt.report import fit_table, format_fit_table, read_rows

    rows = read_rows(args.csv)
    table = fit_table(rows, args.window)
    print(json.dumps(table, indent=2) if args.json else format_fit_table(table))
    return 0
