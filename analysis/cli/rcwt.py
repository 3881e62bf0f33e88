"""`diagym rcwt sweep` and `diagym rcwt fit`: seed 000's RCWT from the command line.

Why a separate module: analysis/cli/main.py is edited in parallel, so this one only exports
`add_rcwt_parser(subparsers)` in the style of cli.py's `_add_<name>_parser` functions, and
cli.py registers it with one line in SUBCOMMANDS. The shared argparse helpers (`_bounded_int`,
`_env_kwargs`, `_add_llm_flags`, `_llm_endpoint`) are imported from analysis.cli.main inside the
functions, so importing this module never imports cli.py at module level (no import cycle
once cli.py imports this one).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


def _percent(text: str) -> float:
    """argparse type for --q: a target ratio in percent, 0..100."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a percentage in 0..100; got {text!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"must be a percentage in 0..100; got {text!r}")
    return value


def add_rcwt_parser(subparsers: Any) -> None:
    """Add `rcwt` with its sub-subcommands `sweep` and `fit` to a subparsers object."""
    from analysis.cli.main import _add_llm_flags, _bounded_int, _env_kwargs
    from analysis.studies.rcwt.run import ENV_ID, Q_GRID, WORKFLOW_ID

    parser = subparsers.add_parser(
        "rcwt",
        help="seed 000's RCWT: fixed-budget sweeps over the coordination share, and fits",
        description=(
            "Roundtable Context Window Test (seed 000): `sweep` assembles one prompt of exactly "
            "W cl100k_base tokens per trial and target ratio q and scores a policy; `fit` fits "
            "the five curve families and theta = W (1 - p0) to a sweep CSV."
        ),
    )
    commands = parser.add_subparsers(dest="rcwt_command", required=True, metavar="COMMAND")

    sweep = commands.add_parser(
        "sweep",
        help="run a fixed-budget sweep on DACSSteering-v0 and fit it",
        description=(
            "For each target ratio q and both orders (coord_first, reason_first), assemble the "
            "first request of scenario seeds 0..N-1 into exactly W tokens (instructions and "
            "request; other agents' full blocks as coordination; the requester's full block as "
            "evidence), score the policy 0/1, and write DIR/calls.jsonl (one line per call; "
            "--resume continues it), DIR/sweep.csv, DIR/fits.json and DIR/fits.png."
        ),
    )
    sweep.add_argument("--env", default=ENV_ID, choices=(ENV_ID, WORKFLOW_ID), metavar="ID",
                       help=f"{ENV_ID} (one steering request per call) or {WORKFLOW_ID} "
                            "(one episode per call, --policy llm only)")
    sweep.add_argument("--env-kwargs", type=_env_kwargs, default={}, metavar="JSON",
                       help="keyword arguments for gym.make, as a JSON object")
    sweep.add_argument("--policy", choices=("flat-reader", "llm"), required=True,
                       help="flat-reader (the programmed reader; no model) or llm")
    sweep.add_argument("--window", type=_bounded_int(1), required=True, metavar="W",
                       help="the fixed budget W in cl100k_base tokens")
    sweep.add_argument("--trials", type=_bounded_int(1), required=True, metavar="N",
                       help="scenario seeds 0..N-1 per (q, order) cell, paired across cells")
    sweep.add_argument("--q", type=_percent, nargs="+", metavar="PCT",
                       default=[round(100 * q, 6) for q in Q_GRID],
                       help="target ratios in percent (default: 0 25 50 75 90 92 94 96 98)")
    sweep.add_argument("--out", type=Path, required=True, metavar="DIR")
    sweep.add_argument("--resume", action="store_true",
                       help="continue DIR/calls.jsonl: skip the calls it already holds")
    sweep.add_argument("--resamples", type=_bounded_int(1), default=1000, metavar="B",
                       help="bootstrap resamples for theta's interval (default 1000)")
    sweep.add_argument("--json", action="store_true", help="print the fits JSON instead")
    _add_llm_flags(sweep)
    sweep.set_defaults(func=_cmd_rcwt_sweep)

    fit = commands.add_parser(
        "fit",
        help="fit the five families and theta to an RCWT CSV (model,p,score[,order])",
        description=(
            "Per model: logistic p0, k, theta = W (1 - p0) and R^2, then every family's R^2 "
            "and AIC (analysis.fits.fit_table)."
        ),
    )
    fit.add_argument("csv", type=Path, metavar="FILE.csv")
    fit.add_argument("--window", type=_bounded_int(1), required=True, metavar="W")
    fit.add_argument("--json", action="store_true", help="print fit_table's JSON instead")
    fit.set_defaults(func=_cmd_rcwt_fit)


def _num(value: Any, spec: str) -> str:
    return "nan" if value is None else format(value, spec)


def format_fit_table(table: dict[str, Any]) -> str:
    """Per model: p0, k, theta, r2 of the logistic, then each family's R^2 and AIC."""
    lines = [f"{'model':<20} {'p0':>7} {'k':>8} {'theta':>8} {'r2':>7}"]
    for model, entry in table.items():
        lines.append(f"{model:<20} {_num(entry['p0'], '.4f'):>7} {_num(entry['k'], '.2f'):>8} "
                     f"{_num(entry['theta'], '.1f'):>8} {_num(entry['r2'], '.4f'):>7}")
    for model, entry in table.items():
        lines.append(f"\n{model}: family            R^2        AIC")
        for name, fam in entry["families"].items():
            lines.append(f"  {name:<22} {_num(fam['r2'], '.4f'):>8} {_num(fam['aic'], '.2f'):>10}")
    return "\n".join(lines)


def format_sweep(cells: list[dict[str, Any]], fits: dict[str, Any]) -> str:
    """Per order: q, mean p, mean r and mean score per cell; then theta and its interval."""
    lines = []
    for order in dict.fromkeys(c["order"] for c in cells):
        lines.append(f"{order}\n{'q':>7} {'p':>7} {'r':>8} {'score':>7} {'n':>5}")
        for c in (c for c in cells if c["order"] == order):
            lines.append(f"{100 * c['q']:>6.1f}% {c['p']:>7.4f} {c['r']:>8.1f} "
                         f"{c['score']:>7.3f} {c['n']:>5}")
    for model, entry in fits.items():
        lo, hi = entry["bootstrap"]["theta_interval"]
        cats = ", ".join(f"{k} {v}" for k, v in entry["categories"].items())
        lines.append(f"{model}: theta {_num(entry['theta'], '.1f')} tokens (95% bootstrap, "
                     f"order strata: [{_num(lo, '.1f')}, {_num(hi, '.1f')}]); p0 "
                     f"{_num(entry['p0'], '.4f')}, k {_num(entry['k'], '.2f')}, R^2 "
                     f"{_num(entry['r2'], '.4f')}; answers: {cats}")
    return "\n".join(lines)


def _cmd_rcwt_sweep(args: argparse.Namespace) -> int:
    import contextlib

    from analysis.studies.rcwt.run import (
        WORKFLOW_ID,
        FlatReader,
        LLMAnswer,
        cell_table,
        run_sweep,
        run_workflow_sweep,
        write_outputs,
    )

    log = args.out / "calls.jsonl"
    if log.exists() and log.stat().st_size > 0 and not args.resume:
        print(f"diagym rcwt sweep: error: {log} exists: pass --resume to continue it, or "
              f"choose another --out", file=sys.stderr)
        return 2
    q = [value / 100.0 for value in args.q]
    try:
        with contextlib.ExitStack() as stack:
            if args.policy == "llm":
                from analysis.cli.main import _llm_endpoint

                endpoint = stack.enter_context(_llm_endpoint(args))
                policy: Any = LLMAnswer(
                    base_url=endpoint["base_url"], model=endpoint["model"],
                    api_key_env=args.api_key_env, timeout=args.timeout,
                    temperature=args.temperature, max_tokens=args.max_tokens,
                    seed=args.llm_seed, response_format=endpoint["response_format"])
                stack.callback(policy.close)
            else:
                policy = FlatReader()
            from tqdm import tqdm

            bar = stack.enter_context(tqdm(unit="call", disable=None, file=sys.stderr))
            if args.env == WORKFLOW_ID:
                if args.policy != "llm":
                    raise ValueError(f"{WORKFLOW_ID} sweeps need --policy llm (the programmed "
                                     "controllers do not read text)")
                records = run_workflow_sweep(
                    dict(policy.settings), window=args.window, trials=args.trials, log=log,
                    q=q, env_kwargs=args.env_kwargs, resume=args.resume,
                    system_role=endpoint["system_role"],
                    on_call=lambda _record: bar.update(1))
            else:
                records = run_sweep(
                    policy, window=args.window, trials=args.trials, log=log, q=q,
                    env_kwargs=args.env_kwargs, resume=args.resume,
                    workers=args.concurrency if args.policy == "llm" else 1,
                    on_call=lambda _record: bar.update(1))
    except (ValueError, RuntimeError, OSError) as error:
        print(f"diagym rcwt sweep: error: {error}", file=sys.stderr)
        return 2
    outputs = write_outputs(records, args.out, args.window, resamples=args.resamples)
    if args.json:
        print(json.dumps(outputs.fits, indent=2))
        return 0
    print(f"{len(records)} calls at W = {args.window} on {args.env} "
          f"{json.dumps(args.env_kwargs)}")
    print(format_sweep(cell_table(records), outputs.fits))
    print(f"log: {log}\ncsv: {outputs.csv}\nfits: {outputs.fits_json}\nplot: {outputs.plot}")
    return 0


def _cmd_rcwt_fit(args: argparse.Namespace) -> int:
    from analysis.fits import fit_table, read_rows

    try:
        rows = read_rows(args.csv)
    except (OSError, ValueError) as error:
        print(f"diagym rcwt fit: error: {error}", file=sys.stderr)
        return 2
    table = fit_table(rows, args.window)
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        print(format_fit_table(table))
    return 0
